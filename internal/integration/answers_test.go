package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/proccluster"
)

// waitProtocol2 waits until every running node has applied protocol level
// 2, which a leader proposes a few seconds after every server answers.
func waitProtocol2(t *testing.T, c *proccluster.Cluster) {
	t.Helper()
	c.WaitFor("every node to apply protocol level 2", 2*time.Minute, func() bool {
		for _, p := range c.Procs {
			if !p.Running() {
				continue
			}
			st, err := proccluster.Status(context.Background(), p.APIAddr)
			if err != nil || st.ClusterProtocol < fsm.Protocol2 {
				return false
			}
		}
		return true
	})
}

// TestKVMissAtMaxJobs: at --max-jobs, a compare-and-set that expects a
// version, addressed to a job that does not exist, cannot create the job:
// it is answered as a compare-and-set that did not swap, the key absent,
// not as a limit, and creates nothing. One that would create the job is
// still refused at the limit.
func TestKVMissAtMaxJobs(t *testing.T) {
	c := proccluster.Start(t, proccluster.Options{Args: []string{"--max-jobs", "1"}})
	c.WaitReady()
	waitProtocol2(t, c)
	ctx := context.Background()
	at := client.WithAddrs(c.APIAddrs()...)
	if _, err := newClient(t, at, client.WithJob("a")).KVCompareAndSet(ctx, "rdzv", 0, []byte("a")); err != nil {
		t.Fatal(err)
	}
	b := newClient(t, at, client.WithJob("b"))
	res, err := b.KVCompareAndSet(ctx, "rdzv", 5, []byte("b"))
	if err != nil || res.Swapped || res.Found || res.Version != 0 {
		t.Fatalf("compare-and-set at version 5 in a missing job at --max-jobs 1: %+v, %v; want not swapped, the key absent", res, err)
	}
	if _, err := b.KVCompareAndSet(ctx, "rdzv", 0, []byte("b")); !errors.Is(err, client.ErrLimitExceeded) {
		t.Fatalf("a compare-and-set that would create a second job: %v, want ErrLimitExceeded", err)
	}
	jobs, err := newClient(t, at).Jobs()
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs.Jobs) != 1 || jobs.Jobs[0].Name != "a" {
		t.Fatalf("jobs %+v, want a alone", jobs.Jobs)
	}
	c.Converged(time.Minute)
}
