package leader

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/raftmaster/raftmaster/fsm"
)

// TakeOver is what a new leader does before it serves, on either backend,
// once its FSM holds everything committed before it took over (after a
// Raft barrier, or a load from etcd): it starts the term's clock, which
// continues FSM time from that state; it registers itself in the node
// registry unless it is there already; and it gives every lease the
// fail-over grace, so that no trainer is punished for the time without a
// leader. With Limits it also sets the initial limits of a new cluster.
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
	// Limits, when set, are the node's limit flags. A cluster below
	// fsm.Protocol2 gets them whenever its limits differ: every cluster
	// starts at level 1, so its first leader sets them, and in a cluster
	// of mixed releases each new leader sets its own, as older releases
	// do. From level 2 on, leaders keep the cluster's limits, which only
	// SetLimits from an operator changes, and a leader whose flags differ
	// logs each limit that does.
	Limits *fsm.Limits
	// Logger receives that log line; nil discards it.
	Logger hclog.Logger
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
	switch {
	case t.Limits == nil:
	case t.FSM.Protocol() < fsm.Protocol2:
		if t.Limits.Effective() != t.FSM.Limits() {
			return t.propose(ctx, &fsm.SetLimits{Limits: *t.Limits})
		}
	case t.Logger != nil:
		LogLimitFlags(t.Logger, *t.Limits, t.FSM.Limits())
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

// LimitsDiffer names each limit on which flags, a node's limit flags,
// differ from cluster, the limits in effect, as "max-jobs 5 (cluster
// 1024)", the limits named as their flags; "" when none does.
func LimitsDiffer(flags fsm.Limits, cluster fsm.Limits) string {
	f := flags.Effective()
	var diffs []string
	for _, l := range []struct {
		name          string
		flag, cluster any
	}{
		{"max-jobs", f.MaxJobs, cluster.MaxJobs},
		{"max-job-tasks", f.MaxJobTasks, cluster.MaxJobTasks},
		{"max-job-chunks", f.MaxJobChunks, cluster.MaxJobChunks},
		{"max-job-groups", f.MaxJobGroups, cluster.MaxJobGroups},
		{"max-job-group-bytes", f.MaxJobGroupBytes, cluster.MaxJobGroupBytes},
		{"max-state-bytes", f.MaxStateBytes, cluster.MaxStateBytes},
		{"max-job-kv-keys", f.MaxJobKVKeys, cluster.MaxJobKVKeys},
		{"max-kv-value-bytes", f.MaxKVValueBytes, cluster.MaxKVValueBytes},
		{"job-ttl", f.JobTTL, cluster.JobTTL},
	} {
		if l.flag != l.cluster {
			diffs = append(diffs, fmt.Sprintf("%s %v (cluster %v)", l.name, l.flag, l.cluster))
		}
	}
	return strings.Join(diffs, ", ")
}

// LogLimitFlags logs, when the node's limit flags differ from the
// cluster's limits, each limit that does: the flags only set a new
// cluster's, and the cluster's limits are the ones enforced.
func LogLimitFlags(log hclog.Logger, flags fsm.Limits, cluster fsm.Limits) {
	if diff := LimitsDiffer(flags, cluster); diff != "" {
		log.Warn("this node's limit flags differ from the cluster's limits, which are the ones in effect: "+
			"the flags only set a new cluster's; change the cluster's with raftmaster limits set", "differing", diff)
	}
}
