package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/internal/proccluster"
	"github.com/raftmaster/raftmaster/raftnode"
)

// TestRecoverFromALostMajority loses two of three nodes for good while
// trainers read. The survivor, alone, can elect no leader. It is stopped,
// recovered with `raftmaster recover` to a cluster of itself, and started
// again: it leads, and the trainers, which kept retrying, finish every pass
// with no record lost. Recover refuses a running node and a directory with
// no Raft state, changing nothing.
func TestRecoverFromALostMajority(t *testing.T) {
	needsProcesses(t)
	c := proccluster.Start(t, proccluster.Options{Args: []string{"--chunks-per-task", "1", "--failover-grace", "2s"}})
	c.WaitReady()
	glob := writeDataset(t, t.TempDir(), 150, 50, 60)
	at := client.WithAddrs(c.APIAddrs()...)
	if err := newClient(t, at).SetDataset([]string{glob}); err != nil {
		t.Fatal(err)
	}
	survivor := c.Procs[0]
	peers := survivor.ID + "=" + survivor.RaftAdv
	if out, err := cli(t, c, "recover", "--data-dir", survivor.DataDir, "--peers", peers); err == nil || !strings.Contains(err.Error(), "stop the node first") {
		t.Fatalf("recover of a running node: %v\n%s", err, out)
	}
	if out, err := cli(t, c, "recover", "--data-dir", t.TempDir(), "--peers", peers); err == nil {
		t.Fatalf("recover of an empty directory succeeded:\n%s", out)
	}

	const passes = 3
	var log passLog
	wait := startTrainers(t, 3, passes, &log, client.WithAddrs(survivor.APIAddr), client.WithBuffer(4), client.WithRetry(3*time.Minute))
	c.WaitFor("pass 0 to be under way", time.Minute, func() bool { return log.delivered(0) >= 30 })
	for _, p := range c.Others(survivor) {
		t.Logf("losing %s for good", p.ID)
		c.Kill(p)
	}
	// Without a majority nothing is written: the survivor cannot lead.
	if _, err := newClient(t, client.WithAddrs(survivor.APIAddr), client.WithRetry(2*time.Second)).RequestSaveModel("probe", time.Second); err == nil {
		t.Fatal("a lone survivor of three acknowledged a write")
	}
	c.Term(survivor)
	out, err := cli(t, c, "recover", "--data-dir", survivor.DataDir, "--peers", peers)
	if err != nil {
		t.Fatalf("recover: %v\n%s", err, out)
	}
	c.Restart(survivor)
	wait()
	checkPasses(t, &log, passes, 150, true)
	st, err := newClient(t, client.WithAddrs(survivor.APIAddr)).Status()
	if err != nil {
		t.Fatal(err)
	}
	if raftnode.NameOf(st.Leader.ID) != survivor.ID || st.FSM.Pass < passes-1 {
		t.Fatalf("after recovery: leader %s at pass %d, want %s at pass >= %d", st.Leader.ID, st.FSM.Pass, survivor.ID, passes-1)
	}
	members, err := newClient(t, client.WithAddrs(survivor.APIAddr)).Members()
	if err != nil {
		t.Fatal(err)
	}
	if len(members.Members) != 1 {
		t.Fatalf("members after recovery: %+v", members.Members)
	}
}
