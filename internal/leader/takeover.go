package leader

import (
	"context"
	"fmt"
	"time"

	"github.com/raftmaster/raftmaster/fsm"
)

// TakeOver is what a new leader does before it serves, on either backend,
// once its FSM holds everything committed before it took over (after a
// Raft barrier, or a load from etcd): it starts the term's clock, which
// continues FSM time from that state; it registers itself in the node
// registry unless it is there already; and it gives every lease the
// fail-over grace, so that no trainer is punished for the time without a
// leader. With Limits it also brings the cluster's limits to its own.
type TakeOver struct {
	// FSM is the state the node now leads.
	FSM *fsm.FSM
	// Clock is the node's term clock.
	Clock *TermClock
	// Wall is the wall clock, used only by a new cluster's first leader.
	Wall func() time.Time
	// Self is the node's registry entry.
	Self fsm.Registration
	// Grace is the fail-over grace.
	Grace time.Duration
	// Limits, when set, are the limits the cluster should have (the
	// leader's flags); they are proposed when the state's differ.
	Limits *fsm.Limits
	// Propose proposes a command and returns its result once applied.
	Propose func(ctx context.Context, c fsm.Command) (*fsm.Result, error)
}

// Run runs the steps. A step the state machine refuses returns an error
// wrapping fsm.ErrInvalid: retrying cannot help. Running it again after a
// failure is safe.
func (t TakeOver) Run(ctx context.Context) error {
	t.Clock.Start(t.FSM.Clock(), t.Wall)
	if cur, ok := t.FSM.Registration(t.Self.ID); !ok || cur != t.Self {
		if err := t.propose(ctx, &fsm.RegisterNode{Node: t.Self}); err != nil {
			return err
		}
	}
	if err := t.propose(ctx, &fsm.LeaderGrace{Grace: t.Grace}); err != nil {
		return err
	}
	if t.Limits != nil && t.Limits.Effective() != t.FSM.Limits() {
		return t.propose(ctx, &fsm.SetLimits{Limits: *t.Limits})
	}
	return nil
}

// propose proposes c and turns a result other than CodeOK into an error.
func (t TakeOver) propose(ctx context.Context, c fsm.Command) error {
	r, err := t.Propose(ctx, c)
	if err != nil {
		return fmt.Errorf("%v: %w", c.Type(), err)
	}
	if err := r.Err(); err != nil {
		return fmt.Errorf("%v: %w", c.Type(), err)
	}
	return nil
}
