package check

import (
	"sort"
	"time"

	"github.com/raftmaster/raftmaster/internal/chaos/history"
)

// SingleSaveHolder checks that at most one trainer held the save-model
// lease at any FSM time. It takes the answered requests in AppliedAt
// order: a grant holds until its AppliedAt plus its BlockDur, and a grant
// to another trainer before that is a violation.
//
// A request of the holder applied while it holds the lease renews it: the
// state machine sets the deadline to that request's AppliedAt plus its
// BlockDur, which may be sooner. That holds whatever the answer says,
// since a retried request is answered whether the caller holds the lease
// at the retry (with the first application's AppliedAt): a renewal whose
// first answer was lost can come back "not granted". For the same reason
// a request of the holder whose outcome is unknown may have shortened the
// lease at any time after it was sent: a grant to another trainer is only
// a violation when the holder has no such request sent before it.
func SingleSaveHolder(ops []history.Op) error {
	v := &violations{name: "single save holder"}
	var applied []int
	for i, op := range ops {
		if op.Kind == history.SaveModel && succeeded(op) && op.AppliedAt != 0 {
			applied = append(applied, i)
		}
	}
	sort.SliceStable(applied, func(a, b int) bool { return ops[applied[a]].AppliedAt < ops[applied[b]].AppliedAt })
	// maybeShortened reports whether trainer has a request of unknown
	// outcome sent before the answer to op g.
	maybeShortened := func(trainer string, g history.Op) bool {
		for _, o := range ops {
			if o.Kind == history.SaveModel && o.Trainer == trainer && unknown(o) && o.Invoke < g.Return {
				return true
			}
		}
		return false
	}
	holder := -1 // the operation that set the current lease
	var deadline int64
	for _, i := range applied {
		g := ops[i]
		held := holder >= 0 && g.AppliedAt < deadline
		switch {
		case held && ops[holder].Trainer == g.Trainer:
			holder, deadline = i, g.AppliedAt+int64(g.BlockDur) // a renewal
		case !g.Granted:
		case held && !maybeShortened(ops[holder].Trainer, g):
			v.add("%s: granted while %q held the lease until %d (%v later), by %s",
				describe(i, g), ops[holder].Trainer, deadline, time.Duration(deadline-g.AppliedAt), describe(holder, ops[holder]))
			holder, deadline = i, g.AppliedAt+int64(g.BlockDur)
		default:
			holder, deadline = i, g.AppliedAt+int64(g.BlockDur)
		}
	}
	return v.err()
}
