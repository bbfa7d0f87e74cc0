package check

import (
	"sort"
	"time"

	"github.com/raftmaster/raftmaster/internal/chaos/history"
)

// SingleSaveHolder checks that at most one trainer held the save-model
// lease at any FSM time: taking the known grants in AppliedAt order, each
// grant holds until its AppliedAt plus its BlockDur, and a grant to another
// trainer before that is a violation. Grants without an AppliedAt cannot
// be placed and are skipped; unknown outcomes could only have made the
// holder's lease longer, so leaving them out cannot invent a violation.
func SingleSaveHolder(ops []history.Op) error {
	v := &violations{name: "single save holder"}
	var grants []int
	for i, op := range ops {
		if op.Kind == history.SaveModel && succeeded(op) && op.Granted && op.AppliedAt != 0 {
			grants = append(grants, i)
		}
	}
	sort.SliceStable(grants, func(a, b int) bool { return ops[grants[a]].AppliedAt < ops[grants[b]].AppliedAt })
	holder := -1 // the operation of the current grant
	var deadline int64
	for _, i := range grants {
		g := ops[i]
		if holder >= 0 && ops[holder].Trainer != g.Trainer && g.AppliedAt < deadline {
			v.add("%s: granted while %q held the lease until %d (%v later), by %s",
				describe(i, g), ops[holder].Trainer, deadline, time.Duration(deadline-g.AppliedAt), describe(holder, ops[holder]))
		}
		holder, deadline = i, g.AppliedAt+int64(g.BlockDur)
	}
	return v.err()
}
