package check

import (
	"sort"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/chaos/history"
)

type lease struct{ id, epoch int }

type taskPass struct{ id, pass int }

// PassAccounting checks that every pass the history shows to have ended
// finished every task exactly once, and that a finished task is not
// dispatched again in the same pass (see the package documentation). A
// FinishAndGet counts as its finish and its lease (finishView, getView).
// It returns every violation it finds, naming the task, the pass and the
// operations.
func PassAccounting(ops []history.Op, cfg Config) error {
	v := &violations{name: "pass accounting"}
	// The highest pass the history shows to have begun, and the operation
	// that shows it.
	highest, highestOp := -1, -1
	began := func(p, i int) {
		if p > highest {
			highest, highestOp = p, i
		}
	}
	dispatch := map[lease]int{}        // the GetTask that leased (id, epoch)
	dispatches := map[taskPass][]int{} // GetTasks of a task in a pass
	passBefore := fsm.CodePassBefore.String()
	// The views of the operations as the GetTask and the TaskFinished
	// they are or carry.
	gets := make([]history.Op, len(ops))
	fins := make([]history.Op, len(ops))
	for i, orig := range ops {
		op, ok := getView(orig)
		if !ok || unknown(op) {
			continue
		}
		gets[i] = op
		switch op.Code {
		case "":
		case passBefore:
			began(op.Pass+1, i) // a later pass is current
			continue
		case fsm.CodeNoMoreAvailable.String(), fsm.CodeAllTaskFailed.String():
			began(op.Pass, i) // this pass is current
			continue
		default:
			continue
		}
		if op.Task.ID == 0 {
			v.add("%s: answered without a task", describe(i, orig))
			continue
		}
		began(op.Pass, i)
		if cfg.NumTasks > 0 && (op.Task.ID < 1 || op.Task.ID > cfg.NumTasks) {
			v.add("%s: task id %d is not in 1..%d", describe(i, orig), op.Task.ID, cfg.NumTasks)
		}
		l := lease{op.Task.ID, op.Task.Epoch}
		if j, ok := dispatch[l]; ok {
			if gets[j].AppliedAt != op.AppliedAt || gets[j].Pass != op.Pass {
				v.add("task %d epoch %d dispatched twice: %s and %s", l.id, l.epoch, describe(j, ops[j]), describe(i, orig))
			}
			continue // the same command, answered twice
		}
		dispatch[l] = i
		k := taskPass{l.id, op.Pass}
		dispatches[k] = append(dispatches[k], i)
	}

	finished := map[taskPass][]int{} // accepted finishes
	maybe := map[taskPass][]int{}    // unknown-outcome finishes
	for i, orig := range ops {
		op, ok := finishView(orig)
		if !ok {
			continue
		}
		fins[i] = op
		l := lease{op.Meta.ID, op.Meta.Epoch}
		j, ok := dispatch[l]
		switch {
		case unknown(op):
			if ok {
				k := taskPass{l.id, gets[j].Pass}
				maybe[k] = append(maybe[k], i)
			}
		case op.Code == "" && !op.Ignored:
			if !ok {
				v.add("%s: accepted for a lease that no GetTask dispatched", describe(i, orig))
				continue
			}
			k := taskPass{l.id, gets[j].Pass}
			finished[k] = append(finished[k], i)
		}
	}

	// Every task of every ended pass is finished.
	lost := false
	for p := 0; p < highest; p++ {
		for id := 1; id <= cfg.NumTasks; id++ {
			k := taskPass{id, p}
			if len(finished[k]) > 0 || len(maybe[k]) > 0 {
				continue
			}
			lost = true
			v.add("task %d lost in pass %d: no accepted or unknown-outcome finish of a lease of that pass (dispatched in it by ops %v), yet pass %d began (op %d)",
				id, p, dispatches[k], highest, highestOp)
		}
	}
	if lost {
		v.add("pass %d began: %s", highest, describe(highestOp, ops[highestOp]))
	}

	keys := make([]taskPass, 0, len(finished))
	for k := range finished {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].pass != keys[j].pass {
			return keys[i].pass < keys[j].pass
		}
		return keys[i].id < keys[j].id
	})
	for _, k := range keys {
		accepted := finished[k]
		// At most one finish per task and pass (a retry answered twice
		// is one command: same lease, same AppliedAt).
		for a := 1; a < len(accepted); a++ {
			f, g := fins[accepted[0]], fins[accepted[a]]
			if f.Meta.Epoch != g.Meta.Epoch || f.AppliedAt != g.AppliedAt {
				v.add("task %d finished twice in pass %d: %s and %s", k.id, k.pass, describe(accepted[0], ops[accepted[0]]), describe(accepted[a], ops[accepted[a]]))
			}
		}
		// No dispatch of the task in the same pass after a finish.
		for _, fi := range accepted {
			f := fins[fi]
			own := dispatch[lease{f.Meta.ID, f.Meta.Epoch}]
			for _, gi := range dispatches[k] {
				g := gets[gi]
				if gi == own {
					continue
				}
				if g.Invoke > f.Return {
					v.add("task %d dispatched again in pass %d by %s, invoked after its finish %s returned", k.id, k.pass, describe(gi, ops[gi]), describe(fi, ops[fi]))
				} else if g.AppliedAt != 0 && f.AppliedAt != 0 && g.AppliedAt > f.AppliedAt {
					v.add("task %d dispatched again in pass %d by %s, applied after its finish %s", k.id, k.pass, describe(gi, ops[gi]), describe(fi, ops[fi]))
				}
			}
		}
	}
	return v.err()
}
