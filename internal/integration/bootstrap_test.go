package integration

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/internal/proccluster"
)

// Log lines of the bootstrap decision (internal/replica/bootstrap.go).
const (
	logBootstrapping  = "bootstrapping: every founding member answered"
	logWaiting        = "not bootstrapping yet"
	logBecomingMember = "a cluster exists: asking to become its member"
)

// logCount counts the lines of p's log that contain s.
func logCount(t *testing.T, p *proccluster.Proc, s string) int {
	t.Helper()
	b, err := readFile(p.LogPath)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Count(b, s)
}

// servers is the number of servers p's Raft configuration lists, or -1
// when p does not answer.
func servers(p *proccluster.Proc) int {
	st, err := proccluster.Status(context.Background(), p.APIAddr)
	if err != nil {
		return -1
	}
	return st.Servers
}

// memberNames lists the node names of the cluster's members, sorted, as
// the leader knows them, and how many of them are voters.
func memberNames(t *testing.T, cl *client.Client) ([]string, int) {
	t.Helper()
	m, err := cl.Members()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	voters := 0
	for _, s := range m.Members {
		names = append(names, s.Name)
		if s.Suffrage == "Voter" {
			voters++
		}
	}
	slices.Sort(names)
	return names, voters
}

// TestBootstrapExpectWaitsForEveryFounder starts the founding members of
// a --bootstrap-expect 3 cluster one at a time, as pods whose peers are
// not up yet (or whose DNS records are not published yet). Nothing is
// bootstrapped while a founder does not answer; once the third starts,
// one cluster of the three forms. A fourth node with the same flags is
// no founder: it joins that cluster.
func TestBootstrapExpectWaitsForEveryFounder(t *testing.T) {
	needsProcesses(t)
	c := proccluster.Start(t, proccluster.Options{Nodes: 4, BootstrapExpect: 3, Hold: true})
	n1, n2, n3, n4 := c.Procs[0], c.Procs[1], c.Procs[2], c.Procs[3]

	c.Launch(n1)
	c.WaitFor("n1 to wait for the other founders", time.Minute, func() bool { return logCount(t, n1, logWaiting) > 0 })
	c.Launch(n2)
	c.WaitFor("n2 to wait for n3", time.Minute, func() bool { return logCount(t, n2, logWaiting) > 0 })
	// Both have probed a founder that does not answer, and decided to wait.
	c.WaitFor("n1 to probe again", time.Minute, func() bool { return logCount(t, n1, "does not answer") > 0 })
	for _, p := range []*proccluster.Proc{n1, n2} {
		if got := servers(p); got != 0 {
			t.Fatalf("%s lists %d servers before every founder answered, want 0", p.ID, got)
		}
	}

	c.Launch(n3)
	leader := c.Leader()
	cl := newClient(t, client.WithAddrs(n1.APIAddr, n2.APIAddr, n3.APIAddr))
	if names, voters := memberNames(t, cl); !slices.Equal(names, []string{"n1", "n2", "n3"}) || voters != 3 {
		t.Fatalf("members %v (%d voters), want voters n1 n2 n3", names, voters)
	}
	t.Logf("leader %s", leader.ID)

	c.Launch(n4)
	c.WaitFor("n4 to join as the fourth voter", time.Minute, func() bool {
		_, voters := memberNames(t, cl)
		return voters == 4 && servers(n4) == 4
	})
	if logCount(t, n4, logBootstrapping) != 0 || logCount(t, n4, logBecomingMember) != 1 {
		t.Fatalf("n4, no founder, did not simply join; its log:\n%s", tail(t, n4))
	}
	c.Converged(time.Minute)
}

// TestWipedVolumesNeverBootstrapARivalCluster loses the data directories
// of two of three nodes at once while trainers read, with the third node
// (the survivor) stopped too. The wiped nodes start first: every founder
// answers, but one is missing, so they wait rather than elect each other.
// Once the survivor is back, it still cannot lead: the wiped nodes are new
// incarnations, which no configuration lists as voters, and the survivor
// alone may lack entries the lost volumes acknowledged. The cluster stays
// unavailable rather than serve a history that may be truncated, until
// the operator accepts that loss: `raftmaster recover` on the survivor.
// It then leads alone, the wiped nodes join as new incarnations, and
// every pass completes with every record exactly once: nothing the
// survivor held was truncated.
func TestWipedVolumesNeverBootstrapARivalCluster(t *testing.T) {
	needsProcesses(t)
	c := proccluster.Start(t, proccluster.Options{BootstrapExpect: 3, Args: []string{"--chunks-per-task", "1", "--failover-grace", "2s"}})
	c.WaitReady()
	survivor, wiped := c.Procs[0], c.Procs[1:]
	glob := writeDataset(t, t.TempDir(), 150, 50, 60)
	at := client.WithAddrs(c.APIAddrs()...)
	if err := newClient(t, at).SetDataset([]string{glob}); err != nil {
		t.Fatal(err)
	}
	const passes = 3
	var log passLog
	wait := startTrainers(t, 3, passes, &log, at, client.WithBuffer(4), client.WithRetry(5*time.Minute))
	c.WaitFor("pass 0 to be under way", time.Minute, func() bool { return log.delivered(0) >= 30 })

	before, err := proccluster.Status(context.Background(), survivor.APIAddr)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range wiped {
		c.Kill(p)
	}
	c.Term(survivor)
	for _, p := range wiped {
		t.Logf("wiping %s", p.DataDir)
		if err := os.RemoveAll(p.DataDir); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p.LogPath, 0); err != nil {
			t.Fatal(err)
		}
		c.Restart(p)
	}
	for _, p := range wiped {
		c.WaitFor(p.ID+" to find the survivor missing", time.Minute, func() bool { return logCount(t, p, "does not answer") > 0 })
		if got := servers(p); got != 0 {
			t.Fatalf("wiped %s lists %d servers while the survivor is down, want 0", p.ID, got)
		}
	}

	campaigns := logCount(t, survivor, logCampaign)
	c.Restart(survivor)
	c.WaitFor("the survivor to lose three elections", 2*time.Minute, func() bool {
		for _, p := range c.Procs {
			if st, err := proccluster.Status(context.Background(), p.APIAddr); err == nil && st.State == "Leader" {
				t.Fatalf("%s leads with two of three volumes lost", p.ID)
			}
		}
		return logCount(t, survivor, logCampaign) >= campaigns+3
	})

	c.Term(survivor)
	out, err := cli(t, c, "recover", "--data-dir", survivor.DataDir, "--peers", survivor.ID+"="+survivor.RaftAdv)
	if err != nil {
		t.Fatalf("recover: %v\n%s", err, out)
	}
	if !strings.Contains(out, "is lost") {
		t.Fatalf("recover does not say what may be lost:\n%s", out)
	}
	c.Restart(survivor)
	wait()
	checkPasses(t, &log, passes, 150, false)
	for _, p := range wiped {
		if n := logCount(t, p, logBootstrapping); n != 0 {
			t.Fatalf("wiped %s bootstrapped a cluster; its log:\n%s", p.ID, tail(t, p))
		}
		if logCount(t, p, logBecomingMember) == 0 {
			t.Fatalf("wiped %s did not report joining the existing cluster; its log:\n%s", p.ID, tail(t, p))
		}
	}
	cl := newClient(t, at)
	c.WaitFor("the wiped nodes to become voters", time.Minute, func() bool {
		names, voters := memberNames(t, cl)
		return slices.Equal(names, []string{"n1", "n2", "n3"}) && voters == 3
	})
	c.Converged(time.Minute)
	after, err := proccluster.Status(context.Background(), survivor.APIAddr)
	if err != nil {
		t.Fatal(err)
	}
	if after.Term <= before.Term || after.AppliedIndex <= before.AppliedIndex {
		t.Fatalf("survivor went from term %d index %d to term %d index %d; want both to grow",
			before.Term, before.AppliedIndex, after.Term, after.AppliedIndex)
	}
}

// tail is the end of p's log, for failure messages.
func tail(t *testing.T, p *proccluster.Proc) string {
	b, _ := readFile(p.LogPath)
	return b[max(0, len(b)-4000):]
}
