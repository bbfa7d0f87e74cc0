package leader

import (
	"sync/atomic"
	"time"
)

// Clock is the time a leader stamps into the commands it proposes. It
// continues FSM time from where the log left it and advances it by the
// time that passes on this process's monotonic clock, so a leader whose
// wall clock is wrong, or jumps while it leads, moves FSM time neither
// forward nor back: every deadline runs for its real length. Only a new
// cluster, whose log holds no time yet, starts from the wall clock.
//
// Time without a leader does not count: a new leader continues from the
// last time in the log. Ticker's Sync keeps that time fresh while anything
// waits on a deadline.
type Clock struct {
	base  int64     // FSM time at start
	start time.Time // carries the monotonic reading
}

// NewClock returns a Clock that starts at FSM time fsmNow, or at wall()
// when fsmNow is 0 (an empty log).
func NewClock(fsmNow int64, wall func() time.Time) *Clock {
	start := time.Now()
	if fsmNow == 0 {
		fsmNow = wall().UnixNano()
	}
	return &Clock{base: fsmNow, start: start}
}

// Now returns the FSM time to stamp, in unix nanoseconds.
func (c *Clock) Now() int64 { return c.base + int64(time.Since(c.start)) }

// TermClock holds the Clock of the current leadership term, if any. Both
// backends stamp their proposals with it.
type TermClock struct{ p atomic.Pointer[Clock] }

// Start begins a term at FSM time fsmNow.
func (l *TermClock) Start(fsmNow int64, wall func() time.Time) {
	l.p.Store(NewClock(fsmNow, wall))
}

// Stop ends the term.
func (l *TermClock) Stop() { l.p.Store(nil) }

// Now returns the term's time, or fsmNow when no term has started (a
// command proposed then does not move FSM time).
func (l *TermClock) Now(fsmNow int64) int64 {
	if c := l.p.Load(); c != nil {
		return max(c.Now(), fsmNow)
	}
	return fsmNow
}
