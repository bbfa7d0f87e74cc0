package integration

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/proccluster"
)

// TestShuffledPassesDispatchInTheSameOrderAtAnyScale: two jobs over the
// same dataset with the same seed, on a 3-node cluster, one read by 2
// trainers that report failures, the other by 8 trainers without
// sessions, which report other failures and two of which are killed
// holding a task (in passes 0 and 1: the trainer stops without a word,
// as a killed process, and its lease runs out), first dispatch every
// pass's tasks in the same order: the permutation of (seed, pass).
//
// The order of first dispatch is observed as the cluster applies it: the
// trainers of a job lease through one lock, so that each GetTask is
// answered before the next is sent, and the answers arrive in log order.
// What they do with a task (finish, fail, die holding it) runs
// concurrently.
func TestShuffledPassesDispatchInTheSameOrderAtAnyScale(t *testing.T) {
	needsProcesses(t)
	c := proccluster.Start(t, proccluster.Options{})
	c.WaitReady()
	waitProtocol(t, c, fsm.Protocol8)
	glob := writeDataset(t, t.TempDir(), 60, 15, 8)
	const seed, passes = uint64(20261203), 3

	small := runShuffled(t, c, shuffledRun{job: "shuffle-2", glob: glob, seed: seed, passes: passes, trainers: 2, faultSeed: 1})
	large := runShuffled(t, c, shuffledRun{job: "shuffle-8", glob: glob, seed: seed, passes: passes, trainers: 8, faultSeed: 2,
		withoutSessions: true, kills: 2})
	for p := range passes {
		want := fsm.PassOrder(seed, true, p, small.tasks)
		if hashIDs(small.first[p]) != hashIDs(large.first[p]) {
			t.Errorf("pass %d: 2 trainers first dispatched %v, 8 trainers %v", p, small.first[p], large.first[p])
		}
		if hashIDs(small.first[p]) != hashIDs(want) {
			t.Errorf("pass %d: first dispatched %v, want the permutation %v", p, small.first[p], want)
		}
		t.Logf("pass %d: first-dispatch hash %x", p, hashIDs(small.first[p]))
	}
	if slices.Equal(small.first[0], fsm.PassOrder(seed, false, 0, small.tasks)) {
		t.Error("pass 0 was dispatched in id order")
	}
	// The faults happened.
	if small.failed == 0 || large.failed == 0 || large.killed != 2 || large.dispatches <= passes*large.tasks {
		t.Fatalf("too few faults: 2 trainers %d failures; 8 trainers %d failures, %d killed, %d dispatches of %d tasks in %d passes",
			small.failed, large.failed, large.killed, large.dispatches, large.tasks, passes)
	}
}

// shuffledRun is one job read by trainers that lease in turn.
type shuffledRun struct {
	job       string
	glob      string
	seed      uint64
	passes    int
	trainers  int
	faultSeed uint64
	// withoutSessions makes the trainers' leases run out rather than be
	// held by sessions; kills is how many of them die holding a task.
	withoutSessions bool
	kills           int
}

// shuffledResult is what a run observed: each pass's task ids in the
// order of their first dispatch, and the faults.
type shuffledResult struct {
	tasks                      int
	first                      [][]int
	dispatches, failed, killed int
}

// runShuffled sets the run's dataset and reads its passes.
func runShuffled(t *testing.T, c *proccluster.Cluster, run shuffledRun) shuffledResult {
	t.Helper()
	maxFailures := fsm.MaxFailureMax
	setter := newClient(t, client.WithAddrs(c.APIAddrs()...), client.WithJob(run.job))
	resp, err := setter.SetDatasetWithParams([]string{run.glob}, client.DatasetParams{ChunksPerTask: 1, TaskTimeout: 2 * time.Second,
		FailureMax: &maxFailures, Seed: &run.seed})
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Shuffle || resp.Seed != run.seed || resp.Tasks < 10 {
		t.Fatalf("%s: dataset %+v, want a shuffle of seed %d and at least 10 tasks", run.job, resp, run.seed)
	}

	res := shuffledResult{tasks: resp.Tasks, first: make([][]int, run.passes)}
	var lease sync.Mutex // held from a GetTask's request to its answer
	seen := make([]map[int]bool, run.passes)
	for p := range seen {
		seen[p] = map[int]bool{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(run.faultSeed, 0))
	var rngMu sync.Mutex
	draw := func(n int) int { rngMu.Lock(); defer rngMu.Unlock(); return rng.IntN(n) }

	var wg sync.WaitGroup
	errs := make(chan error, run.trainers)
	for k := range run.trainers {
		opts := []client.Option{client.WithAddrs(c.APIAddrs()...), client.WithJob(run.job)}
		if run.withoutSessions {
			opts = append(opts, client.WithoutSession())
		}
		cl := newClient(t, opts...)
		wg.Go(func() {
			pass := 0
			for pass < run.passes && ctx.Err() == nil {
				lease.Lock()
				task, err := cl.GetTaskContext(ctx, pass)
				if err == nil {
					res.dispatches++
					if p := task.Pass; p < run.passes && !seen[p][task.Meta.ID] {
						seen[p][task.Meta.ID] = true
						res.first[p] = append(res.first[p], task.Meta.ID)
					}
				}
				// Trainer k < kills dies holding its first task of pass k.
				die := err == nil && k < run.kills && task.Pass == k
				if die {
					res.killed++
				}
				lease.Unlock()
				switch {
				case errors.Is(err, client.ErrPassBefore):
					pass++
					continue
				case errors.Is(err, client.ErrPassAfter), errors.Is(err, client.ErrNoMoreAvailable):
					// Others finish the pass, or a lease runs out first.
					time.Sleep(20 * time.Millisecond)
					continue
				case err != nil:
					errs <- fmt.Errorf("%s trainer %d: GetTask(%d): %w", run.job, k, pass, err)
					return
				case die:
					return // killed holding the task: its lease runs out
				}
				if draw(5) == 0 {
					err = cl.TaskFailedContext(ctx, task.Meta)
					lease.Lock()
					res.failed++
					lease.Unlock()
				} else {
					err = cl.TaskFinishedContext(ctx, task.Meta)
				}
				if err != nil && !errors.Is(err, client.ErrStaleEpoch) {
					errs <- fmt.Errorf("%s trainer %d: task %d: %w", run.job, k, task.Meta.ID, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatalf("%s: the passes did not end in time: %d dispatches", run.job, res.dispatches)
	}
	for p, ids := range res.first {
		if len(ids) != res.tasks {
			t.Fatalf("%s pass %d: %d of %d tasks first dispatched", run.job, p, len(ids), res.tasks)
		}
	}
	t.Logf("%s: %d trainers, %d tasks, %d dispatches, %d failures, %d killed", run.job, run.trainers, res.tasks,
		res.dispatches, res.failed, res.killed)
	return res
}

// hashIDs is a hash of a sequence of task ids.
func hashIDs(ids []int) [32]byte {
	b := make([]byte, 0, 8*len(ids))
	for _, id := range ids {
		b = binary.LittleEndian.AppendUint64(b, uint64(id))
	}
	return sha256.Sum256(b)
}
