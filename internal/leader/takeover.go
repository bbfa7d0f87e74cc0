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
	// Self is the node's registry entry, with its release: the state
	// records the release from fsm.Protocol2 on.
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
	if err := Register(ctx, t.FSM, t.Self, t.Propose); err != nil {
		return err
	}
	if err := t.propose(ctx, &fsm.LeaderGrace{Grace: t.Grace}); err != nil {
		return err
	}
	if t.Limits != nil && t.Limits.Effective() != t.FSM.Limits() {
		return t.propose(ctx, &fsm.SetLimits{Limits: *t.Limits})
	}
	return nil
}

// Register proposes self's registry entry as the state's protocol level
// records it (fsm.Registration.AtLevel), unless the registry holds it
// already. A leader runs it when it takes over, and again once it has
// raised the level, so that its entry gains its release.
func Register(ctx context.Context, f *fsm.FSM, self fsm.Registration,
	propose func(ctx context.Context, c fsm.Command) (*fsm.Result, error)) error {
	self = self.AtLevel(f.Protocol())
	if cur, ok := f.Registration(self.ID); ok && cur == self {
		return nil
	}
	return proposeOK(ctx, propose, &fsm.RegisterNode{Node: self})
}

// propose proposes c and turns a result other than CodeOK into an error.
func (t TakeOver) propose(ctx context.Context, c fsm.Command) error {
	return proposeOK(ctx, t.Propose, c)
}

// proposeOK proposes c and turns a result other than CodeOK into an error.
func proposeOK(ctx context.Context, propose func(ctx context.Context, c fsm.Command) (*fsm.Result, error), c fsm.Command) error {
	r, err := propose(ctx, c)
	if err != nil {
		return fmt.Errorf("%v: %w", c.Type(), err)
	}
	if err := r.Err(); err != nil {
		return fmt.Errorf("%v: %w", c.Type(), err)
	}
	return nil
}
