package integration

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/internal/proccluster"
)

// TestCursorExactlyOnceOverFullRestart checks the data position saved
// with the model across a full restart, at another number of trainers:
// three trainers read part of a pass, report their progress, one commits
// a cursor, they read on past the checkpoint (work the restart loses) and
// stop; every node is killed and restarted; two new trainers restore the
// cursor and read the rest of the pass. The records the checkpoint held
// and those read after the restore are the pass's records, each once.
func TestCursorExactlyOnceOverFullRestart(t *testing.T) {
	needsProcesses(t)
	const (
		total     = 200
		before    = 25 // records each first trainer consumes before the checkpoint
		after     = 10 // and after it, lost with the restart
		job       = "cursor-restart"
		firstRun  = 3
		secondRun = 2
	)
	ctx := context.Background()
	c := proccluster.Start(t, proccluster.Options{})
	glob := writeDataset(t, t.TempDir(), total, 20, 40)
	opts := []client.Option{client.WithAddrs(c.APIAddrs()...), client.WithJob(job), client.WithBuffer(4)}
	setup := newClient(t, opts...)
	failureMax := 3
	if _, err := setup.SetDatasetWithParams([]string{glob}, client.DatasetParams{ChunksPerTask: 2, FailureMax: &failureMax}); err != nil {
		t.Fatal(err)
	}

	// The first run: each trainer consumes its part, then stops.
	trainers := make([]*client.Client, firstRun)
	trained := make([][]string, firstRun)
	for i := range trainers {
		trainers[i] = newClient(t, opts...)
		trainers[i].StartGetRecords(0)
	}
	read := func(i, n int) []string {
		var out []string
		for range n {
			r, err := trainers[i].NextRecord()
			if err != nil {
				t.Errorf("trainer %d: %v", i, err)
				return out
			}
			out = append(out, string(r))
		}
		return out
	}
	var wg sync.WaitGroup
	for i := range trainers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			trained[i] = read(i, before)
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	// The checkpoint: every trainer reports, then one commits.
	for i, tr := range trainers {
		if _, err := tr.ReportProgress(ctx); err != nil {
			t.Fatalf("trainer %d: ReportProgress: %v", i, err)
		}
	}
	cur, err := trainers[0].CommitCursor(ctx, firstRun*before)
	if err != nil {
		t.Fatal(err)
	}
	if cur.Records != firstRun*before || cur.InFlight == 0 {
		t.Fatalf("cursor %+v, want %d records counted, some of tasks in flight", cur, firstRun*before)
	}
	// Work past the checkpoint, which the restart loses.
	for i := range trainers {
		read(i, after)
		if err := trainers[i].Close(); err != nil {
			t.Fatal(err)
		}
	}

	for _, p := range c.Procs {
		c.Kill(p)
	}
	for _, p := range c.Procs {
		c.Restart(p)
	}

	// The second run, at another number of trainers.
	resumed := make([]*client.Client, secondRun)
	for i := range resumed {
		resumed[i] = newClient(t, opts...)
	}
	res, err := resumed[0].RestoreCursor(ctx, cur.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := make([][]string, secondRun)
	for i, tr := range resumed {
		tr.StartGetRecords(res.Cursor.Pass)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				r, err := tr.NextRecord()
				if errors.Is(err, client.ErrPassBefore) || errors.Is(err, client.ErrNoMoreAvailable) {
					return
				}
				if err != nil {
					t.Errorf("resumed trainer %d: %v", i, err)
					return
				}
				got[i] = append(got[i], string(r))
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		t.Fatal("the resumed trainers did not finish the pass within 3 minutes")
	}

	seen := map[string]int{}
	for _, rs := range append(trained, got...) {
		for _, r := range rs {
			seen[r]++
		}
	}
	var wrong []string
	for i := range total {
		if n := seen[strconv.Itoa(i)]; n != 1 {
			wrong = append(wrong, fmt.Sprintf("%d: %d times", i, n))
		}
	}
	if len(wrong) > 0 || len(seen) != total {
		t.Fatalf("records trained not exactly once (%d distinct, want %d): %v", len(seen), total, wrong)
	}
}
