package leader

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/fsm"
)

// A leader's clock continues FSM time whatever its wall clock says; only an
// empty log starts from the wall clock.
func TestClockIgnoresTheWallClock(t *testing.T) {
	const fsmNow = int64(1_700_000_000) * int64(time.Second)
	for _, skew := range []time.Duration{0, 3 * time.Hour, -3 * time.Hour, 10 * 365 * 24 * time.Hour} {
		wall := func() time.Time { return time.Now().Add(skew) }
		start := time.Now()
		c := NewClock(fsmNow, wall)
		got := c.Now()
		if got < fsmNow || got > fsmNow+int64(time.Since(start)) {
			t.Fatalf("skew %v: Now %d, want within the time elapsed after FSM time %d", skew, got, fsmNow)
		}
	}
	wall := time.Unix(1_800_000_000, 0)
	if got := NewClock(0, func() time.Time { return wall }).Now(); got < wall.UnixNano() || got > wall.UnixNano()+int64(time.Minute) {
		t.Fatalf("a new cluster's clock starts at %d, want the wall clock %d", got, wall.UnixNano())
	}
	var l TermClock
	if got := l.Now(fsmNow); got != fsmNow {
		t.Fatalf("no term: Now %d, want the FSM time %d", got, fsmNow)
	}
	l.Start(fsmNow, time.Now)
	if got := l.Now(fsmNow + int64(time.Hour)); got != fsmNow+int64(time.Hour) {
		t.Fatalf("a term's clock went below FSM time: %d", got)
	}
	l.Stop()
	if got := l.Now(fsmNow); got != fsmNow {
		t.Fatalf("after the term: Now %d, want the FSM time", got)
	}
}

// With Sync set, a ticker keeps FSM time within Sync of its clock while a
// lease waits, so a leader that takes over continues from a recent time.
func TestTickerSyncsFSMTime(t *testing.T) {
	f := fsm.New()
	var mu sync.Mutex
	var idx uint64
	apply := func(c fsm.Command, now int64) {
		mu.Lock()
		defer mu.Unlock()
		c.Hdr().Now = now
		idx++
		f.ApplyEntry(idx, fsm.Encode(c))
	}
	apply(&fsm.RequestSaveModel{TrainerID: "t", BlockDur: 24 * time.Hour}, 1)
	var clock atomic.Int64
	clock.Store(1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Ticker{FSM: f, Now: clock.Load, Sync: 10 * time.Millisecond, Propose: func(_ context.Context, c fsm.Command) (*fsm.Result, error) {
			apply(c, clock.Load())
			return &fsm.Result{}, nil
		}}.Run(ctx)
	}()
	defer func() { cancel(); <-done }()
	for _, now := range []time.Duration{time.Second, time.Hour} {
		clock.Store(int64(now))
		waitUntil(t, func() bool { return f.Clock() == int64(now) })
	}
	if _, _, held := f.SaveModelHolder(fsm.DefaultJob); !held {
		t.Fatal("a sync tick expired a lease that was not due")
	}
}
