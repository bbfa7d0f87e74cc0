package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/proccluster"
	"github.com/raftmaster/raftmaster/recordio"
)

// TestMixtureWindowsThroughKills: a job of three sources weighted
// 0.5/0.3/0.2, tasks of 10 records, read by 16 trainers on a 3-node
// cluster, some of which fail tasks and four of which are killed holding
// one (their leases run out), through a SIGKILL of the leader: every
// window of 10,000 records, in the log order of the task finishes, is
// within one percentage point of the weights for each source; after
// SetWeights the windows follow the new weights; and each source's count
// of records in job inspect equals the records of its finished tasks.
//
// The log order of finishes is observed as the cluster applies it: the
// trainers finish through one lock, so that each TaskFinished is
// answered before the next is sent.
func TestMixtureWindowsThroughKills(t *testing.T) {
	needsProcesses(t)
	c := proccluster.Start(t, proccluster.Options{})
	c.WaitReady()
	waitProtocol(t, c, fsm.Protocol9)
	dir := t.TempDir()
	names, weights := []string{"web", "code", "books"}, []float64{0.5, 0.3, 0.2}
	var sources []client.Source
	for k, name := range names {
		glob := writeSourceFiles(t, filepath.Join(dir, name), []int{60, 40, 20}[k])
		sources = append(sources, client.Source{Name: name, Weight: weights[k], Patterns: []string{glob}})
	}
	const job = "mixture"
	maxFailures := fsm.MaxFailureMax
	setter := newClient(t, client.WithAddrs(c.APIAddrs()...), client.WithJob(job))
	if _, err := setter.SetDatasetWithParams(nil, client.DatasetParams{ChunksPerTask: 1, TaskTimeout: 3 * time.Second,
		FailureMax: &maxFailures, Sources: sources}); err != nil {
		t.Fatal(err)
	}

	run := &mixtureRun{names: names}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	// Phase 1: 30,000 records at 0.5/0.3/0.2, the leader killed midway.
	killed := run.read(t, ctx, c, job, 20_000, func() {
		leader := c.Leader()
		c.Kill(leader)
		c.Restart(leader)
		t.Logf("the leader %s was killed and restarted", leader.ID)
	})
	if w, at := run.worstWindow(0, weights); w > 1 {
		t.Errorf("a window of 10,000 records from finish %d is %.2f points off 0.5/0.3/0.2", at, w)
	} else {
		t.Logf("phase 1: %d finishes, worst window %.2f points off", len(run.source), w)
	}
	// Phase 2: new weights, from the next task on.
	if _, err := setter.SetWeights(ctx, map[string]float64{"web": 0.2, "books": 0.5}); err != nil {
		t.Fatal(err)
	}
	from := len(run.source)
	killed += run.read(t, ctx, c, job, 20_000, nil)
	// The tasks out on a lease when the weights changed finish first:
	// at most one per trainer.
	if w, at := run.worstWindow(from+16, []float64{0.2, 0.3, 0.5}); w > 1 {
		t.Errorf("after SetWeights, a window from finish %d is %.2f points off 0.2/0.3/0.5", at, w)
	} else {
		t.Logf("phase 2: worst window %.2f points off", w)
	}
	if killed < 4 || run.failed == 0 {
		t.Fatalf("too few faults: %d trainers killed, %d failures", killed, run.failed)
	}

	info, err := setter.Job(job)
	if err != nil {
		t.Fatal(err)
	}
	records := map[string]int64{}
	for i, k := range run.source {
		records[names[k]] += run.records[i]
	}
	for _, s := range info.Sources {
		if s.Records != records[s.Name] {
			t.Errorf("source %s: job inspect counts %d records, the finishes %d", s.Name, s.Records, records[s.Name])
		}
	}
	if len(info.Sources) != 3 {
		t.Fatalf("job inspect shows sources %+v", info.Sources)
	}
}

// writeSourceFiles writes n chunks of 10 records of 8 bytes into files of
// 20 chunks under dir, and returns their glob.
func writeSourceFiles(t *testing.T, dir string, n int) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for f := 0; f*20 < n; f++ {
		file, err := os.Create(filepath.Join(dir, fmt.Sprintf("part-%03d.recordio", f)))
		if err != nil {
			t.Fatal(err)
		}
		w := recordio.NewWriter(file, 80, recordio.NoCompression)
		for i := f * 200; i < min((f+1)*20, n)*10; i++ {
			if _, err := fmt.Fprintf(w, "%08d", i); err != nil {
				t.Fatal(err)
			}
		}
		if err := errors.Join(w.Close(), file.Close()); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "part-*.recordio")
}

// mixtureRun is the log of a mixture's finishes, in log order.
type mixtureRun struct {
	names   []string
	mu      sync.Mutex // held from a TaskFinished's request to its answer
	source  []int
	records []int64
	failed  int
}

// read runs 16 trainers until the run logged records more records:
// trainers 0 and 1 are killed holding their 50th task, and fault runs
// once, a third of the way. It returns how many trainers were killed.
func (r *mixtureRun) read(t *testing.T, ctx context.Context, c *proccluster.Cluster, job string, records int64, fault func()) int {
	t.Helper()
	r.mu.Lock()
	start := r.consumed()
	r.mu.Unlock()
	target := start + records
	var wg sync.WaitGroup
	var faultOnce sync.Once
	errs := make(chan error, 16)
	killedCount := 0
	var killedMu sync.Mutex
	for k := range 16 {
		cl := newClient(t, client.WithAddrs(c.APIAddrs()...), client.WithJob(job), client.WithoutSession())
		rng := rand.New(rand.NewPCG(uint64(k), uint64(start)))
		wg.Go(func() {
			pass, dispatched := 0, 0
			for ctx.Err() == nil {
				r.mu.Lock()
				done := r.consumed()
				r.mu.Unlock()
				if done >= target {
					return
				}
				if fault != nil && done-start > records/3 {
					faultOnce.Do(fault)
				}
				task, err := cl.GetTaskContext(ctx, pass)
				switch {
				case errors.Is(err, client.ErrPassBefore):
					pass++
					continue
				case errors.Is(err, client.ErrPassAfter), errors.Is(err, client.ErrNoMoreAvailable):
					time.Sleep(20 * time.Millisecond)
					continue
				case err != nil:
					errs <- fmt.Errorf("trainer %d: GetTask(%d): %w", k, pass, err)
					return
				}
				dispatched++
				if k < 2 && dispatched == 50 {
					// Killed holding the task: its lease runs out.
					killedMu.Lock()
					killedCount++
					killedMu.Unlock()
					return
				}
				if rng.IntN(20) == 0 {
					if err := cl.TaskFailedContext(ctx, task.Meta); err != nil && !errors.Is(err, client.ErrStaleEpoch) {
						errs <- fmt.Errorf("trainer %d: TaskFailed: %w", k, err)
						return
					}
					r.mu.Lock()
					r.failed++
					r.mu.Unlock()
					continue
				}
				var n int64
				for _, ch := range task.Chunks {
					n += int64(ch.Records)
				}
				r.mu.Lock()
				err = cl.TaskFinishedContext(ctx, task.Meta)
				if err == nil {
					r.source = append(r.source, r.index(task.Source))
					r.records = append(r.records, n)
				}
				r.mu.Unlock()
				if err != nil && !errors.Is(err, client.ErrStaleEpoch) {
					errs <- fmt.Errorf("trainer %d: TaskFinished: %w", k, err)
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
		t.Fatalf("the run did not read %d records in time", records)
	}
	return killedCount
}

// consumed sums the records of the finishes logged; r.mu is held.
func (r *mixtureRun) consumed() int64 {
	var n int64
	for _, x := range r.records {
		n += x
	}
	return n
}

// index returns the index of source name.
func (r *mixtureRun) index(name string) int {
	for k, n := range r.names {
		if n == name {
			return k
		}
	}
	return -1
}

// worstWindow returns, over every window of 10,000 records of the log
// from finish from on that starts at a finish, the largest distance of a
// source's share from its target, in percentage points, and the window's
// first finish. The finish that a window ends inside counts pro rata.
func (r *mixtureRun) worstWindow(from int, targets []float64) (float64, int) {
	const width = 10_000
	source, records := r.source[from:], r.records[from:]
	n := len(records)
	counts := make([]float64, len(targets))
	end, filled := 0, int64(0)
	worst, at := 0.0, -1
	for start := 0; start < n; start++ {
		for end < n && filled+records[end] <= width {
			counts[source[end]] += float64(records[end])
			filled += records[end]
			end++
		}
		if end == n && filled < width {
			break
		}
		part := append([]float64(nil), counts...)
		if end < n {
			part[source[end]] += float64(width - filled)
		}
		for k, target := range targets {
			d := part[k]/width - target
			if d < 0 {
				d = -d
			}
			if 100*d > worst {
				worst, at = 100*d, from+start
			}
		}
		counts[source[start]] -= float64(records[start])
		filled -= records[start]
	}
	return worst, at
}
