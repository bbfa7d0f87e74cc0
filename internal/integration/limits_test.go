package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/internal/proccluster"
	"github.com/raftmaster/raftmaster/rpc"
)

// differentLimitFlags starts a cluster whose nodes have different limit
// flags: node i (from 0) --max-jobs 3+i and --job-ttl (i+1)h.
func differentLimitFlags(t *testing.T) *proccluster.Cluster {
	t.Helper()
	return proccluster.Start(t, proccluster.Options{Prepare: func(ps []*proccluster.Proc) map[string][]string {
		flags := map[string][]string{}
		for i, p := range ps {
			flags[p.ID] = []string{"--max-jobs", fmt.Sprint(3 + i), "--job-ttl", fmt.Sprintf("%dh", i+1)}
		}
		return flags
	}})
}

// clusterLimits reads the limits in effect through the job list, which
// every release serves.
func clusterLimits(t *testing.T, c *proccluster.Cluster) rpc.Limits {
	t.Helper()
	jobs, err := newClient(t, client.WithAddrs(c.APIAddrs()...)).Jobs()
	if err != nil {
		t.Fatal(err)
	}
	return jobs.Limits
}

// TestLimitsDoNotFlipAtFailOver: the nodes of a cluster were started with
// different limit flags. The flags of the first leader set the cluster's
// limits; the leaders that follow it keep them, so two fail-overs change
// nothing.
func TestLimitsDoNotFlipAtFailOver(t *testing.T) {
	needsProcesses(t)
	c := differentLimitFlags(t)
	c.WaitReady()
	waitProtocol2(t, c)
	initial := clusterLimits(t, c)
	if initial.MaxJobs < 3 || initial.MaxJobs > 5 || time.Duration(initial.JobTTL) != time.Duration(initial.MaxJobs-2)*time.Hour {
		t.Fatalf("limits of the new cluster %+v, want one node's flags", initial)
	}
	for round := range 2 {
		leader := c.Leader()
		c.Kill(leader)
		next := c.Leader()
		t.Logf("round %d: killed the leader %s; %s leads", round, leader.ID, next.ID)
		if got := clusterLimits(t, c); got != initial {
			t.Fatalf("round %d: limits after %s took over: %+v, want the cluster's %+v", round, next.ID, got, initial)
		}
		c.Restart(leader)
		c.WaitReady()
	}
}

// TestLimitsCommand: raftmaster limits get shows the cluster's limits and
// limits set changes only those it names, which then hold through a
// fail-over; bad values are refused with a clear error; a node whose flags
// differ from the cluster's logs each limit that does.
func TestLimitsCommand(t *testing.T) {
	needsProcesses(t)
	c := differentLimitFlags(t)
	c.WaitReady()
	waitProtocol2(t, c)
	addrs := strings.Join(c.APIAddrs(), ",")
	initial := clusterLimits(t, c)
	out, err := cli(t, c, "limits", "get", "--addr", addrs)
	if err != nil || !strings.Contains(out, fmt.Sprintf("max-jobs             %d\n", initial.MaxJobs)) {
		t.Fatalf("limits get: %v\n%s", err, out)
	}
	out, err = cli(t, c, "limits", "set", "--addr", addrs, "--max-jobs", "9")
	if err != nil || !strings.Contains(out, "max-jobs             9\n") {
		t.Fatalf("limits set: %v\n%s", err, out)
	}
	want := initial
	want.MaxJobs = 9
	if got := clusterLimits(t, c); got != want {
		t.Fatalf("limits after limits set --max-jobs 9: %+v, want %+v (job_ttl kept)", got, want)
	}
	if out, err := cli(t, c, "limits", "set", "--addr", addrs, "--max-jobs", "-2"); err == nil || !strings.Contains(err.Error(), "max_jobs -2 out of range") {
		t.Fatalf("limits set --max-jobs -2: %v\n%s", err, out)
	}
	leader := c.Leader()
	c.Kill(leader)
	next := c.Leader()
	if got := clusterLimits(t, c); got != want {
		t.Fatalf("limits after a fail-over: %+v, want %+v", got, want)
	}
	// Every node's --max-jobs differs from 9 now: the new leader says so
	// at its take-over, and a node started again says so once it has
	// caught up.
	c.Restart(leader)
	c.WaitReady()
	for _, p := range []*proccluster.Proc{next, leader} {
		c.WaitFor(p.ID+" to log that its flags differ", time.Minute, func() bool {
			log, err := readFile(p.LogPath)
			return err == nil && strings.Contains(log, "limit flags differ from the cluster's limits") &&
				strings.Contains(log, "max-jobs ") && strings.Contains(log, "(cluster 9)")
		})
	}
}
