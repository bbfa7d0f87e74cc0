// Package leader holds what a node does while it leads, on either backend
// (a Raft node, an active master of the etcd backend): TakeOver, the steps
// before it serves; TermClock, the time it stamps into its proposals; and
// Ticker, which drives the FSM's time-based transitions, since the FSM
// never reads a clock: the leader proposes a Tick whenever the FSM's
// earliest deadline has passed on its own clock.
package leader

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/raftmaster/raftmaster/fsm"
)

// idle is the longest wait between two looks at the clock, so that a clock
// that jumps forward is noticed.
const idle = time.Second

// Ticker proposes Tick commands for one FSM.
type Ticker struct {
	// FSM is the local replica whose deadlines are watched.
	FSM *fsm.FSM
	// Now is the leader's clock, in unix nanoseconds.
	Now func() int64
	// Propose proposes a Tick and returns its result once it is applied.
	Propose func(ctx context.Context, c fsm.Command) (*fsm.Result, error)
	// Logger receives the jobs a tick collected (Limits.JobTTL) at info
	// level, and failed ticks at debug level.
	Logger hclog.Logger
	// Sync, when positive, proposes a Tick whenever something waits on a
	// deadline and FSM time lags Now by Sync or more, so that a leader
	// that takes over continues from a recent time (see Clock).
	Sync time.Duration
}

// Run proposes a Tick whenever the FSM's earliest deadline is due, until
// ctx is done. A failed tick is retried after a short pause.
func (t Ticker) Run(ctx context.Context) {
	timer := time.NewTimer(idle)
	defer timer.Stop()
	for {
		changed := t.FSM.Changed()
		wait := idle
		if d, ok := t.FSM.NextDeadline(); ok {
			now := t.Now()
			due := time.Duration(d - now)
			if t.Sync > 0 {
				// Time to refresh FSM time, if that comes first.
				due = min(due, t.Sync-time.Duration(now-t.FSM.Clock()))
			}
			if due <= 0 {
				res, err := t.Propose(ctx, &fsm.Tick{})
				if err != nil {
					if t.Logger != nil {
						t.Logger.Debug("tick failed", "error", err)
					}
					if !Sleep(ctx, 100*time.Millisecond) {
						return
					}
					continue
				}
				if t.Logger != nil {
					for _, job := range res.Collected {
						t.Logger.Info("collected an idle job: no lease, save-model holder or group, and unused for the job TTL",
							"job", job, "job_ttl", t.FSM.Limits().JobTTL)
					}
				}
				continue
			} else if due < wait {
				wait = due
			}
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-timer.C:
		}
	}
}

// Sleep waits for d or until ctx is done; it reports whether d passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
