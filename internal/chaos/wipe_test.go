package chaos

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/internal/chaos/check"
	"github.com/raftmaster/raftmaster/internal/proccluster"
)

// procsNamed describes nodes with the given names, none started.
func procsNamed(dir string, names ...string) *proccluster.Cluster {
	c := &proccluster.Cluster{}
	for _, n := range names {
		c.Procs = append(c.Procs, &proccluster.Proc{ID: n, LogPath: filepath.Join(dir, n+".log"), DataDir: filepath.Join(dir, n)})
	}
	return c
}

// TestMayWipe: at most a minority of the nodes lack their data at once,
// counting the one to wipe, and a node wiped again counts once.
func TestMayWipe(t *testing.T) {
	cases := []struct {
		nodes   []string
		lacking []string
		target  string
		want    bool
	}{
		{[]string{"n1", "n2", "n3"}, nil, "n1", true},
		{[]string{"n1", "n2", "n3"}, []string{"n2"}, "n1", false},
		{[]string{"n1", "n2", "n3"}, []string{"n2"}, "n2", true},
		{[]string{"n1", "n2", "n3", "n4", "n5"}, []string{"n2"}, "n1", true},
		{[]string{"n1", "n2", "n3", "n4", "n5"}, []string{"n2", "n4"}, "n1", false},
		{[]string{"n1", "n2", "n3", "n4", "n5"}, []string{"n2", "n4"}, "n4", true},
	}
	for _, tc := range cases {
		v := newVolumes(context.Background(), procsNamed(t.TempDir(), tc.nodes...), t.Logf)
		for i, n := range tc.lacking {
			v.lacking[n] = i
		}
		if got := v.mayWipe(tc.target); got != tc.want {
			t.Errorf("%d nodes, %v lacking: may wipe %s = %v, want %v", len(tc.nodes), tc.lacking, tc.target, got, tc.want)
		}
	}
}

// TestPickWaitsForPromotion: a wipe that would leave a majority lacking
// waits for the promotion it needs, and fails if it does not come.
func TestPickWaitsForPromotion(t *testing.T) {
	c := procsNamed(t.TempDir(), "n1", "n2", "n3")
	v := newVolumes(context.Background(), c, t.Logf)
	v.lacking["n2"] = 1
	n1 := func() *proccluster.Proc { return c.Procs[0] }
	if _, err := v.pick(n1, 100*time.Millisecond); err == nil || !strings.Contains(err.Error(), "incarnation of n2 to be promoted") {
		t.Fatalf("wiping n1 with n2 lacking: %v; want a wait that fails", err)
	}
	if p, err := v.pick(func() *proccluster.Proc { return c.Procs[1] }, 0); err != nil || p != c.Procs[1] {
		t.Fatalf("wiping n2 again: %v, %v; want it at once", p, err)
	}
	promoted := time.Now().Add(300 * time.Millisecond)
	go func() {
		time.Sleep(time.Until(promoted))
		v.mu.Lock()
		delete(v.lacking, "n2")
		v.mu.Unlock()
	}()
	p, err := v.pick(n1, time.Minute)
	if err != nil || p != c.Procs[0] || time.Now().Before(promoted) {
		t.Fatalf("wiping n1: %v, %v; want it once n2 is promoted", p, err)
	}
}

// TestWipeKeepsTheLog: a wipe deletes the data directory and nothing
// else, and marks the node lacking until promoted.
func TestWipeKeepsTheLog(t *testing.T) {
	c := procsNamed(t.TempDir(), "n1", "n2", "n3")
	p := c.Procs[1]
	if err := os.MkdirAll(p.DataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.DataDir, "raft.db"), []byte("state"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.LogPath, []byte("line 1\nline 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	v := newVolumes(context.Background(), c, t.Logf)
	inc, err := v.wipe(p, "n2~aaaa")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p.DataDir); !os.IsNotExist(err) {
		t.Errorf("the data directory is still there: %v", err)
	}
	if b, err := os.ReadFile(p.LogPath); err != nil || string(b) != "line 1\nline 2\n" {
		t.Errorf("the log is %q, %v; want it kept", b, err)
	}
	if got := v.incarnations("n2"); inc != 1 || len(got) != 2 || got[0].id != "n2~aaaa" || got[1].logFrom != 14 {
		t.Errorf("incarnation %d, incarnations %+v; want the old one as n2~aaaa and the new one from byte 14", inc, got)
	}
	if v.mayWipe("n1") || !slices.Equal(v.lackingNames(), []string{"n2"}) {
		t.Errorf("lacking %v; want n2, and no second node wiped", v.lackingNames())
	}
}

// TestLeaderClaimsPerIncarnation: the incarnations of a wiped node append
// to one log, and the claims of each are made under its own server id, so
// that two incarnations winning the same term are two leaders.
func TestLeaderClaimsPerIncarnation(t *testing.T) {
	c := procsNamed(t.TempDir(), "n1", "n2")
	won := func(term string) string {
		return "2026-12-01T10:00:00.000Z [INFO]  raft: election won: term=" + term + " tally=2\n"
	}
	old := "start\n" + won("5") + "partial line without its end"
	if err := os.WriteFile(c.Procs[1].LogPath, []byte(old+" ... new start\n"+won("5")+won("7")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.Procs[0].LogPath, []byte(won("3")), 0o644); err != nil {
		t.Fatal(err)
	}
	v := newVolumes(context.Background(), c, t.Logf)
	v.incs["n2"] = []incarnation{{id: "n2~aaaa"}, {logFrom: int64(len(old)), id: "n2~bbbb"}}
	claims, err := leaderClaims(c, v)
	if err != nil {
		t.Fatal(err)
	}
	want := []check.LeaderClaim{
		{Node: "n1", Term: 3, Source: "n1.log:1"},
		{Node: "n2~aaaa", Term: 5, Source: "n2.log:2"},
		{Node: "n2~bbbb", Term: 5, Source: "n2.log:4"},
		{Node: "n2~bbbb", Term: 7, Source: "n2.log:5"},
	}
	if !slices.Equal(claims, want) {
		t.Fatalf("claims %+v\nwant %+v", claims, want)
	}
	vs := checkLeaders(claims, nil)
	if len(vs) != 1 || !strings.Contains(vs[0], "term 5 has 2 leaders: n2~aaaa (n2.log:2), n2~bbbb (n2.log:4)") {
		t.Errorf("violations %q; want term 5 to have two leaders", vs)
	}

	// Without the new incarnation's id (a run that never saw it
	// promoted), it is still a server of its own.
	v.incs["n2"][1].id = ""
	claims, _ = leaderClaims(c, v)
	if vs := checkLeaders(claims, nil); len(vs) != 1 || !strings.Contains(vs[0], "n2 (incarnation 2) (n2.log:4)") {
		t.Errorf("violations %q; want n2~aaaa and n2 (incarnation 2) leading term 5", vs)
	}
}
