package check

import (
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/chaos/history"
)

// A FinishAndGet is a TaskFinished and a GetTask applied in one log
// entry, in that order. The checkers of leases see its lease part as a
// GetTask (getView), those of finishes its finish part as a TaskFinished
// (finishView); Linearizable checks both parts at once when they concern
// one task, and each in its task's partition otherwise.

// leaseAfterFinish reports whether code is an answer the lease part of a
// FinishAndGet gives after its finish was applied: a lease, an error of
// the lease (pass_before, no_more_available, ...), or the stale_epoch of a
// retry whose lease has ended since. An answer with any other code was
// refused before the finish (unknown_job, session_expired, ...).
func leaseAfterFinish(code string) bool {
	switch code {
	case "", fsm.CodePassBefore.String(), fsm.CodePassAfter.String(), fsm.CodeNoMoreAvailable.String(),
		fsm.CodeAllTaskFailed.String(), fsm.CodeNoDataset.String(), fsm.CodeStaleEpoch.String():
		return true
	}
	return false
}

// replayedStale reports whether op is a FinishAndGet retried after its
// lease ended: the cluster replays the finish's outcome, and answers the
// lease stale_epoch. It leased a task whose epoch the caller never learns,
// as a GetTask so answered, which the workload records as unknown.
func replayedStale(op history.Op) bool {
	return op.Kind == history.FinishAndGet && op.Code == fsm.CodeStaleEpoch.String() && !op.Unknown()
}

// getView returns op as the GetTask the checkers of leases see: op itself
// for a GetTask, the lease part for a FinishAndGet (of unknown outcome
// when the lease was replayed stale, see replayedStale); ok is false for
// any other kind.
func getView(op history.Op) (g history.Op, ok bool) {
	switch op.Kind {
	case history.GetTask:
		return op, true
	case history.FinishAndGet:
		g = op
		g.Kind, g.Meta, g.Finish = history.GetTask, fsm.TaskMeta{}, nil
		if replayedStale(op) {
			g.Code, g.Return, g.AppliedAt = "", history.Never, 0
		}
		return g, true
	}
	return op, false
}

// finishView returns op as the TaskFinished the checkers of finishes see:
// op itself for a TaskFinished; for a FinishAndGet, its finish part, of
// unknown outcome when op's is, else answered as op.Finish says (without
// an FSM time when the lease was replayed stale: the answer's may be the
// retry's). ok is false for any other kind, and for a FinishAndGet whose
// known answer says nothing of its finish (which Linearizable reports
// when the finish should have been applied, see leaseAfterFinish).
func finishView(op history.Op) (f history.Op, ok bool) {
	switch op.Kind {
	case history.TaskFinished:
		return op, true
	case history.FinishAndGet:
		f = op
		f.Kind, f.Task, f.Holder, f.Chunks, f.Finish = history.TaskFinished, fsm.TaskMeta{}, 0, nil, nil
		switch {
		case unknown(op):
			f.AppliedAt = 0
		case op.Finish == nil:
			return op, false
		default:
			f.Code, f.Ignored = op.Finish.Code, op.Finish.Ignored
			if replayedStale(op) {
				f.AppliedAt = 0
			}
		}
		return f, true
	}
	return op, false
}
