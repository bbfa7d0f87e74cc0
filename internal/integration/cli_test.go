package integration

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/raftmaster/raftmaster/internal/proccluster"
	"github.com/raftmaster/raftmaster/rpc"
)

// statusRow is a row of cluster status --json.
type statusRow struct {
	ID           string  `json:"id"`
	APIAddr      string  `json:"api_addr"`
	State        string  `json:"state"`
	Leader       bool    `json:"leader"`
	Term         uint64  `json:"term"`
	CommitIndex  uint64  `json:"commit_index"`
	AppliedIndex uint64  `json:"applied_index"`
	Lag          *uint64 `json:"lag"`
	Version      string  `json:"version"`
	Error        string  `json:"error"`
}

// TestCLIOnACluster drives the operator's commands against real
// processes: cluster status asks every member, with flags anywhere on the
// line; job inspect shows the files of the dataset set; backup inspect
// reads the backup taken; a stopped member shows as a row with its error.
func TestCLIOnACluster(t *testing.T) {
	needsProcesses(t)
	c := proccluster.Start(t, proccluster.Options{})
	c.WaitReady()
	leader := c.Leader()
	want, err := proccluster.Status(t.Context(), leader.APIAddr)
	if err != nil {
		t.Fatal(err)
	}
	addr := follower(c).APIAddr

	var rows struct {
		Leader  rpc.NodeRef `json:"leader"`
		Members []statusRow `json:"members"`
	}
	out, err := cli(t, c, "cluster", "status", "--json", "--addr", addr)
	if err != nil {
		t.Fatalf("cluster status: %v\n%s", err, out)
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("cluster status --json: %v\n%s", err, out)
	}
	leaders := 0
	for _, m := range rows.Members {
		if m.Error != "" || m.Term == 0 || m.Lag == nil || m.Version != want.Version || m.AppliedIndex == 0 {
			t.Errorf("member %+v", m)
		}
		if m.Leader {
			leaders++
		}
	}
	if len(rows.Members) != 3 || leaders != 1 || rows.Leader.ID == "" {
		t.Fatalf("cluster status: %d members, %d leaders, leader %q:\n%s", len(rows.Members), leaders, rows.Leader.ID, out)
	}
	out, err = cli(t, c, "cluster", "status", "--addr", addr)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); err != nil || len(lines) != 4 || !strings.Contains(out, "Leader *") || !strings.Contains(lines[0], "LAG") {
		t.Fatalf("cluster status: %v\n%s", err, out)
	}

	// A dataset, then what job inspect says of it.
	glob := writeDataset(t, t.TempDir(), 300, 100, 256)
	if out, err := cli(t, c, "dataset", "set", glob, "--addr", addr, "--job", "train"); err != nil {
		t.Fatalf("dataset set: %v\n%s", err, out)
	}
	out, err = cli(t, c, "job", "inspect", "train", "--addr", addr, "--json")
	var j rpc.Job
	if err == nil {
		err = json.Unmarshal([]byte(out), &j)
	}
	if err != nil || j.Files != 3 || j.Chunks == 0 || len(j.Paths) != 3 || filepath.Base(j.Paths[0]) != "train-000.recordio" {
		t.Fatalf("job inspect --json: %v\n%s", err, out)
	}
	out, err = cli(t, c, "job", "inspect", "train", "--addr", addr)
	if err != nil || !strings.Contains(out, "3 in "+filepath.Dir(glob)+"/: train-000.recordio ... train-002.recordio") {
		t.Fatalf("job inspect: %v\n%s", err, out)
	}

	// A backup, read back without the cluster.
	file := filepath.Join(t.TempDir(), "backup.bin")
	if out, err := cli(t, c, "backup", "--out", file, "--addr", addr); err != nil {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	out, err = cli(t, c, "backup", "inspect", file)
	if err != nil || !strings.Contains(out, "checked, intact") || !strings.Contains(out, "by "+want.Version) || !strings.Contains(lineWith(out, "  train "), " 3 ") {
		t.Fatalf("backup inspect: %v\n%s", err, out)
	}

	// A stopped member has a row with its error, and the command fails.
	down := follower(c)
	if down.APIAddr == addr {
		down = c.Others(leader)[1]
	}
	c.Kill(down)
	out, err = cli(t, c, "cluster", "status", "--addr", addr, "--member-timeout", "2s")
	if err == nil || !strings.Contains(err.Error(), "1 of 3 members did not answer") {
		t.Fatalf("with a member down: %v\n%s", err, out)
	}
	if row := lineWith(out, down.APIAddr); !strings.Contains(row, "unreachable") {
		t.Fatalf("the stopped member's row %q in:\n%s", row, out)
	}

	// Without a leader, the survivor still answers with the table.
	c.Kill(leader)
	out, err = cli(t, c, "cluster", "status", "--addr", addr, "--member-timeout", "2s", "--retry", "10s")
	if err == nil || !strings.Contains(err.Error(), "2 of 3 members did not answer") || !strings.Contains(out, "no member answered as the leader") ||
		strings.Contains(lineWith(out, addr), "unreachable") {
		t.Fatalf("without a leader: %v\n%s", err, out)
	}

	// A mistyped command is answered with the nearest.
	cmd := exec.Command(c.Bin, "cluster", "stauts")
	b, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(b), `did you mean "status"?`) {
		t.Fatalf("cluster stauts: %v: %s", err, b)
	}
}

// lineWith returns the first line of s that contains sub.
func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}
