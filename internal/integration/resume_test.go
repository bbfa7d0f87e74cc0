package integration

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/proccluster"
	"github.com/raftmaster/raftmaster/internal/resume"
)

// TestResumeExactlyOnceOverFullRestarts: trainers on real clients
// checkpoint with cursors and are all killed at least three times, once
// between a cursor's commit and its model's save, and restart from the
// last complete checkpoint at another number of trainers and readers,
// while the leader is SIGKILLed now and then; over every pass, the
// records trained up to each restored checkpoint and after the last are
// every record exactly once.
func TestResumeExactlyOnceOverFullRestarts(t *testing.T) {
	maxFailures := fsm.MaxFailureMax
	needsProcesses(t)
	c := proccluster.Start(t, proccluster.Options{})
	c.WaitReady()
	waitProtocol(t, c, fsm.Protocol7)
	// Two leader kills at most per schedule, a few seconds apart, each
	// over once the old leader is back; RESUME_LEADER_KILLS=n allows n,
	// back to back.
	maxKills, spacing := 2, 5*time.Second
	if v := os.Getenv("RESUME_LEADER_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("RESUME_LEADER_KILLS=%q: %v", v, err)
		}
		maxKills, spacing = n, 0
	}
	var killing atomic.Bool
	var kills int
	var last time.Time
	killLeader := func() {
		if kills >= maxKills || time.Since(last) < spacing || !killing.CompareAndSwap(false, true) {
			return
		}
		kills, last = kills+1, time.Now()
		go func() {
			defer killing.Store(false)
			leader := c.Leader()
			c.Kill(leader)
			c.WaitFor("a new leader", time.Minute, func() bool { l := c.Leader(); return l != nil && l != leader })
			c.Restart(leader)
			c.WaitReady()
		}()
	}
	for seed := range uint64(2) {
		job := fmt.Sprintf("resume-%d", seed)
		pattern, ids, err := resume.WriteDataset(t.TempDir(), job, 4, 12)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := newClient(t, client.WithAddrs(c.APIAddrs()...), client.WithJob(job)).SetDatasetWithParams([]string{pattern},
			client.DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Minute, FailureMax: &maxFailures}); err != nil {
			t.Fatal(err)
		}
		kills, last = 0, time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		res, err := resume.Run(ctx, resume.Config{
			Addrs: c.APIAddrs(), Job: job, Records: ids, Passes: 2, Restarts: 3, MaxTrainers: 8, MaxReaders: 2,
			Seed: seed, Chaos: killLeader, Logf: t.Logf,
		})
		cancel()
		if err != nil {
			t.Fatalf("schedule %d: %v (so far: %v)", seed, err, res)
		}
		t.Logf("schedule %d: %v; %d leader kills", seed, res, kills)
		c.WaitFor("the last leader kill's restart", 2*time.Minute, func() bool { return !killing.Load() })
		if res.Duplicates != 0 || res.Losses != 0 || res.Restarts < 3 {
			t.Fatalf("schedule %d: %v", seed, res)
		}
	}
}
