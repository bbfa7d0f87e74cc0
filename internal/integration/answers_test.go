package integration

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/etcdtest"
	"github.com/raftmaster/raftmaster/internal/proccluster"
	"github.com/raftmaster/raftmaster/rpc"
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
	needsProcesses(t)
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

// waitClockPast waits until the FSM time that the running nodes report is
// past t: the leader ticks at least every second while a lease is out.
func waitClockPast(c *proccluster.Cluster, t time.Time) {
	c.WaitFor("FSM time to pass "+t.String(), time.Minute, func() bool {
		for _, p := range c.Procs {
			if st, err := proccluster.Status(context.Background(), p.APIAddr); err == nil && p.Running() && st.FSM.Clock.After(t) {
				return true
			}
		}
		return false
	})
}

// TestReplayedLeasesSayWhatRemains: a save-model request and a lease
// renewal whose answers were lost (the leader is killed) are retried with
// their request ids after some FSM time has passed: the answers to the
// retries say how much of each lease remains then, not the whole length
// the first answers gave, so that the holder does not count on time it
// does not have.
func TestReplayedLeasesSayWhatRemains(t *testing.T) {
	needsProcesses(t)
	c := proccluster.Start(t, proccluster.Options{Args: []string{"--failover-grace", "1s"}})
	c.WaitReady()
	at := client.WithAddrs(c.APIAddrs()...)
	const lease = 30 * time.Second
	if _, err := newClient(t, at).SetDatasetWithParams([]string{writeDataset(t, t.TempDir(), 20, 10, 40)},
		client.DatasetParams{TaskTimeout: lease}); err != nil {
		t.Fatal(err)
	}
	task, err := newClient(t, at, client.WithoutSession()).GetTask(0) // a lease that runs out
	if err != nil {
		t.Fatal(err)
	}
	// The answers' lease, which releases before it did not give.
	type grant struct {
		Granted   bool         `json:"granted"`
		Lease     rpc.Duration `json:"lease"`
		AppliedAt time.Time    `json:"applied_at"`
	}
	leader := c.Leader()
	saveID, renewID := uuid.NewString()+"/1", uuid.NewString()+"/1"
	save := rpc.SaveModelRequest{TrainerID: "trainer-a", BlockDur: rpc.Duration(lease)}
	renew := rpc.TaskRequest{Meta: task.Meta}
	var saved, renewed grant
	if st := postWithID(t, leader.APIAddr, rpc.PathTaskRenew, renewID, renew, &renewed); st != http.StatusOK || time.Duration(renewed.Lease) != lease {
		t.Fatalf("renewal: HTTP %d %+v, want a lease of %v", st, renewed, lease)
	}
	if st := postWithID(t, leader.APIAddr, rpc.PathSaveModel, saveID, save, &saved); st != http.StatusOK || !saved.Granted {
		t.Fatalf("save-model request: HTTP %d %+v, want granted", st, saved)
	}
	// The answers are lost with the leader; the callers retry later.
	c.Kill(leader)
	waitClockPast(c, renewed.AppliedAt.Add(3*time.Second))
	addr := c.Leader().APIAddr
	var saveAgain, renewAgain grant
	if st := postWithID(t, addr, rpc.PathTaskRenew, renewID, renew, &renewAgain); st != http.StatusOK {
		t.Fatalf("retried renewal: HTTP %d", st)
	}
	if !renewAgain.AppliedAt.Equal(renewed.AppliedAt) || time.Duration(renewAgain.Lease) > lease-3*time.Second || renewAgain.Lease <= 0 {
		t.Fatalf("retried renewal %+v: want the first renewal (applied at %v) with at most %v of its lease left",
			renewAgain, renewed.AppliedAt, lease-3*time.Second)
	}
	if st := postWithID(t, addr, rpc.PathSaveModel, saveID, save, &saveAgain); st != http.StatusOK {
		t.Fatalf("retried save-model request: HTTP %d", st)
	}
	if time.Duration(saved.Lease) != lease || !saveAgain.Granted || !saveAgain.AppliedAt.Equal(saved.AppliedAt) ||
		time.Duration(saveAgain.Lease) > lease-3*time.Second || saveAgain.Lease <= 0 {
		t.Fatalf("save-model request %+v, retried %+v: want granted for %v, then the first grant with at most %v of its lease left",
			saved, saveAgain, lease, lease-3*time.Second)
	}
}

// TestReadersOfADeletedJob: trainers reading a job that an operator
// deletes are told (ErrUnknownJob) once the records they hold are
// delivered, instead of waiting for a dataset for ever; a trainer that
// started before its job existed waited for the dataset and read, and a
// trainer started after the delete waits as for a job not created yet.
func TestReadersOfADeletedJob(t *testing.T) {
	needsProcesses(t)
	c := proccluster.Start(t, proccluster.Options{Args: []string{"--chunks-per-task", "1"}})
	c.WaitReady()
	waitProtocol2(t, c)
	at := client.WithAddrs(c.APIAddrs()...)
	// The first trainer comes before its job.
	early := newClient(t, at, client.WithJob("doomed"), client.WithBuffer(1))
	early.StartGetRecords(0)
	if err := newClient(t, at, client.WithJob("doomed")).SetDataset([]string{writeDataset(t, t.TempDir(), 200, 20, 40)}); err != nil {
		t.Fatal(err)
	}
	late := newClient(t, at, client.WithJob("doomed"), client.WithBuffer(1))
	late.StartGetRecords(0)
	for _, tr := range []*client.Client{early, late} {
		if _, err := tr.NextRecord(); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := cli(t, c, "job", "delete", "--addr", c.Leader().APIAddr, "doomed"); err != nil {
		t.Fatalf("job delete: %v\n%s", err, out)
	}
	for i, tr := range []*client.Client{early, late} {
		errc := make(chan error, 1)
		go func() {
			for {
				if _, err := tr.NextRecord(); err != nil {
					errc <- err
					return
				}
			}
		}()
		select {
		case err := <-errc:
			if !errors.Is(err, client.ErrUnknownJob) {
				t.Fatalf("trainer %d: NextRecord after its job was deleted: %v, want ErrUnknownJob", i, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("trainer %d: NextRecord still waits a minute after its job was deleted", i)
		}
	}
	if _, err := newClient(t, at, client.WithJob("doomed")).GetTask(0); !errors.Is(err, client.ErrNoDataset) {
		t.Fatalf("GetTask of a new trainer of the deleted job: %v, want ErrNoDataset", err)
	}
}

// TestSetDatasetRetryAfterLeaderKill: a SetDataset whose answer was lost
// with its leader, retried with its request id at the next leader, is
// answered as its first attempt was (installed, not ignored), while
// another trainer's request is ignored; on both backends.
func TestSetDatasetRetryAfterLeaderKill(t *testing.T) {
	needsProcesses(t)
	t.Run("raft", func(t *testing.T) {
		c := proccluster.Start(t, proccluster.Options{Args: []string{"--chunks-per-task", "2"}})
		c.WaitReady()
		checkSetDatasetRetry(t, c)
	})
	t.Run("etcd", func(t *testing.T) {
		e := etcdtest.Start(t)
		c := proccluster.StartEtcd(t, e.Endpoint, 2, "--etcd-ttl", "2s", "--chunks-per-task", "2")
		c.WaitReady()
		checkSetDatasetRetry(t, c)
	})
}

// checkSetDatasetRetry sets a dataset at c's leader, kills it, and retries.
func checkSetDatasetRetry(t *testing.T, c *proccluster.Cluster) {
	t.Helper()
	req := rpc.SetDatasetRequest{Globs: []string{writeDataset(t, t.TempDir(), 120, 40, 60)}}
	id := uuid.NewString() + "/1"
	leader := c.Leader()
	var first rpc.SetDatasetResponse
	if st := postWithID(t, leader.APIAddr, rpc.PathDataset, id, req, &first); st != http.StatusOK || first.Ignored || first.Files != 3 {
		t.Fatalf("first attempt: HTTP %d %+v, want 3 files installed", st, first)
	}
	c.Kill(leader)
	addr := c.Leader().APIAddr
	var retry, other rpc.SetDatasetResponse
	if st := postWithID(t, addr, rpc.PathDataset, id, req, &retry); st != http.StatusOK || !reflect.DeepEqual(retry, first) {
		t.Fatalf("retry with the request id: HTTP %d %+v, want the first answer %+v", st, retry, first)
	}
	if st := postWithID(t, addr, rpc.PathDataset, uuid.NewString()+"/1", req, &other); st != http.StatusOK ||
		!other.Ignored || other.Chunks != first.Chunks || other.Tasks != first.Tasks {
		t.Fatalf("another trainer's request: HTTP %d %+v, want ignored with the dataset in place", st, other)
	}
}
