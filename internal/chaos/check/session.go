package check

import (
	"fmt"
	"slices"
	"time"

	"github.com/raftmaster/raftmaster/internal/chaos/history"
)

// sessionLife is what a history shows of one session's life: when it was
// still open, and when the cluster had already ended it.
type sessionLife struct {
	// alive is the latest FSM time at which an answer shows the session
	// open (appliedUnder), aliveOp that operation; -1 when none does.
	alive   int64
	aliveOp int
	// lastInvoke is the latest real time at which an operation that was
	// applied under the session was invoked, lastOp that operation: the
	// session was open at some moment after lastInvoke. -1 when none.
	lastInvoke int64
	lastOp     int
	// refused is the earliest real time at which a write under the
	// session was answered session_expired, refusedOp that operation:
	// the session had ended before it. -1 when none was.
	refused   int64
	refusedOp int
}

// sessionLives reads the life of every session ops name. A keep-alive
// answered session_expired is no proof of an end: the leader answers so
// while the entry that ends the session is in flight, and that entry may
// fail (the leader was deposed), leaving the session open.
func sessionLives(ops []history.Op) map[uint64]*sessionLife {
	lives := map[uint64]*sessionLife{}
	for i, op := range ops {
		if op.Session == 0 || op.Kind == history.KeepAlive || op.Kind == history.Stall {
			continue
		}
		l := lives[op.Session]
		if l == nil {
			l = &sessionLife{aliveOp: -1, lastOp: -1, refusedOp: -1}
			lives[op.Session] = l
		}
		switch {
		case appliedUnder(op):
			if l.aliveOp < 0 || op.AppliedAt > l.alive {
				l.alive, l.aliveOp = op.AppliedAt, i
			}
			if l.lastOp < 0 || op.Invoke > l.lastInvoke {
				l.lastInvoke, l.lastOp = op.Invoke, i
			}
		case expiredRefusal(op):
			if l.refusedOp < 0 || op.Return < l.refused {
				l.refused, l.refusedOp = op.Return, i
			}
		}
	}
	return lives
}

// aliveTimes returns, per session, the latest FSM time at which the history
// shows it open: the session ended at or after it.
func aliveTimes(ops []history.Op) map[uint64]int64 {
	out := map[uint64]int64{}
	for id, l := range sessionLives(ops) {
		if l.aliveOp >= 0 {
			out[id] = l.alive
		}
	}
	return out
}

// SessionEnds checks that no write of a session that has ended is applied:
// once the cluster has answered a write under a session session_expired,
// no write under it invoked after that answer is applied (answered with an
// FSM time). A session never opens again, and the cluster refuses a
// request of an ended session before it applies or replays anything.
func SessionEnds(ops []history.Op) error {
	v := &violations{name: "no write of an ended session applied"}
	lives := sessionLives(ops)
	for i, op := range ops {
		if !appliedUnder(op) {
			continue
		}
		if l := lives[op.Session]; l.refusedOp >= 0 && op.Invoke > l.refused {
			v.add("%s: applied under session %d after the session had ended: %s was refused before it was invoked",
				describe(i, op), op.Session, describe(l.refusedOp, ops[l.refusedOp]))
		}
	}
	return v.err()
}

// SessionHolds checks that a task held by a session is held by it alone:
//
//   - a GetTask made under a session leases the task to that session (the
//     answer names it as the holder), and every answer of one lease (task
//     and epoch) names the same holder;
//   - a task held by session S under epoch e is leased again (a later
//     epoch) only once it was released: by a finish or a failure of epoch
//     e (accepted, or of unknown outcome, before the new lease), by the
//     leader's revocation of a held task without progress, which comes no
//     sooner than the task timeout after the lease (in FSM time), or by
//     the end of S. So a new lease within the task timeout, with no finish
//     or failure of epoch e that could have come before it, shows that S
//     had ended: an operation applied under S later (in FSM time, or
//     invoked after the new lease returned) is a violation.
//
// The history must not close sessions or replace datasets while tasks are
// held (the workload does neither): those release held tasks too.
func SessionHolds(ops []history.Op, cfg Config) error {
	v := &violations{name: "sessions hold tasks alone"}
	lives := sessionLives(ops)
	first := map[lease]int{}  // the first GetTask answering a lease
	byTask := map[int][]int{} // per task id, the first answer of each lease, with a time
	// The views of the operations as the GetTask and the TaskFinished
	// they are or carry (a FinishAndGet is both).
	views := make([]history.Op, len(ops))
	for i, orig := range ops {
		op, ok := getView(orig)
		if !ok || !succeeded(op) || op.Task.ID == 0 {
			continue
		}
		views[i] = op
		if op.Session != 0 && op.Holder != op.Session {
			v.add("%s: leased under session %d, but the answer says the task is held by session %d (0: a lease without one)",
				describe(i, orig), op.Session, op.Holder)
		}
		l := lease{op.Task.ID, op.Task.Epoch}
		if j, ok := first[l]; ok {
			if ops[j].Holder != op.Holder {
				v.add("task %d epoch %d is held by sessions %d and %d: %s and %s", l.id, l.epoch, ops[j].Holder, op.Holder,
					describe(j, ops[j]), describe(i, orig))
			}
			continue
		}
		first[l] = i
		if op.AppliedAt != 0 {
			byTask[l.id] = append(byTask[l.id], i)
		}
	}
	// Finishes and failures that may have released a lease, as the
	// operations they are or carry.
	releases := map[lease][]history.Op{}
	for _, orig := range ops {
		op, ok := finishView(orig)
		if !ok && orig.Kind == history.TaskFailed {
			op, ok = orig, true
		}
		if ok && (unknown(op) || op.Code == "" && !op.Ignored) {
			l := lease{op.Meta.ID, op.Meta.Epoch}
			releases[l] = append(releases[l], op)
		}
	}
	ids := make([]int, 0, len(byTask))
	for id := range byTask {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		gs := byTask[id]
		// Epochs grow in log order.
		slices.SortFunc(gs, func(a, b int) int { return views[a].Task.Epoch - views[b].Task.Epoch })
		for k := 0; k+1 < len(gs); k++ {
			g1, g2 := views[gs[k]], views[gs[k+1]]
			s := g1.Holder
			if s == 0 || cfg.TaskTimeout <= 0 || g2.AppliedAt >= g1.AppliedAt+int64(cfg.TaskTimeout) {
				continue // a lease without a session, or the leader may have revoked it
			}
			released := slices.ContainsFunc(releases[lease{id, g1.Task.Epoch}], func(op history.Op) bool {
				if !unknown(op) && op.AppliedAt != 0 {
					return op.AppliedAt <= g2.AppliedAt
				}
				return op.Invoke < g2.Return
			})
			if released {
				continue
			}
			l := lives[s]
			var proof string
			switch {
			case l == nil:
			case l.aliveOp >= 0 && l.alive > g2.AppliedAt:
				proof = fmt.Sprintf("%s was applied under it %v after the new lease", describe(l.aliveOp, ops[l.aliveOp]),
					time.Duration(l.alive-g2.AppliedAt))
			case l.lastOp >= 0 && l.lastInvoke > g2.Return:
				proof = fmt.Sprintf("%s, invoked after the new lease returned, was applied under it", describe(l.lastOp, ops[l.lastOp]))
			}
			if proof != "" {
				v.add("task %d epoch %d, held by session %d (%s), was leased again within the task timeout by %s, with no finish or failure of it before, while the session lived on: %s",
					id, g1.Task.Epoch, s, describe(gs[k], ops[gs[k]]), describe(gs[k+1], ops[gs[k+1]]), proof)
			}
		}
	}
	return v.err()
}
