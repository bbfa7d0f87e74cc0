package leader

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/fsm"
)

// TestTickerExpiresALease: a leased task goes back to the queue once the
// ticker's clock passes its deadline, and not before.
func TestTickerExpiresALease(t *testing.T) {
	f := fsm.New()
	var mu sync.Mutex
	var idx uint64
	apply := func(c fsm.Command, now int64) *fsm.Result {
		mu.Lock()
		defer mu.Unlock()
		c.Hdr().Now = now
		idx++
		return f.ApplyEntry(idx, fsm.Encode(c))
	}
	const lease = time.Minute
	apply(&fsm.SetDataset{
		Header: fsm.Header{Request: fsm.RequestID{Client: uuid.New(), Seq: 1}},
		Params: fsm.DatasetParams{ChunksPerTask: 1, TaskTimeout: lease, FailureMax: 3},
		Chunks: []fsm.Chunk{{Path: "/d", Records: 1}},
	}, 0)
	if r := apply(&fsm.GetTask{}, 0); r.Task == nil {
		t.Fatalf("no task: %+v", r)
	}
	var clock atomic.Int64 // the ticker's clock, moved by the test
	var ticks atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Ticker{FSM: f, Now: clock.Load, Propose: func(_ context.Context, c fsm.Command) (*fsm.Result, error) {
			ticks.Add(1)
			return apply(c, clock.Load()), nil
		}}.Run(ctx)
	}()
	defer func() { cancel(); <-done }()

	clock.Store(int64(lease) - 1)
	// Wake the ticker with an unrelated apply; it must not tick early.
	apply(&fsm.RequestSaveModel{TrainerID: "t", BlockDur: time.Hour}, 0)
	if st := f.Stats(fsm.DefaultJob); st.Pending != 1 {
		t.Fatalf("lease expired early: %+v", st)
	}
	clock.Store(int64(lease))
	waitUntil(t, func() bool { return f.Stats(fsm.DefaultJob).Todo == 1 })
	if st := f.Stats(fsm.DefaultJob); st.Pending != 0 || ticks.Load() == 0 {
		t.Fatalf("after the deadline: %+v, %d ticks", st, ticks.Load())
	}
}

func TestSleep(t *testing.T) {
	if !Sleep(context.Background(), time.Millisecond) {
		t.Fatal("Sleep reported a cancel")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, time.Hour) {
		t.Fatal("Sleep on a done context waited")
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	end := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(end) {
			t.Fatal("condition not met in 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
