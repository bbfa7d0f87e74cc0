package check

import (
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/raftmaster/raftmaster/internal/chaos/history"
)

// TestLinearizableFinishAndGetLegal: a FinishAndGet is its finish then its
// lease, in one step; each part answered as a TaskFinished and a GetTask
// would be.
func TestLinearizableFinishAndGetLegal(t *testing.T) {
	runLinCases(t, []linCase{
		{name: "each finish rides the next GetTask", want: porcupine.Ok, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			finGet(0, 2, 3, 1, 1, 0, 2, 1, 2),
			finGet(0, 4, 5, 2, 1, 0, 3, 1, 4),
			// The last finish of pass 0 ends it: pass_before.
			finGetErr(0, 6, 7, 3, 1, 0, "pass_before", 6),
			get(0, 8, 9, 1, 1, 2, 8),
			finGet(0, 10, 11, 1, 2, 1, 2, 2, 10),
		)},
		{name: "one entry finishes a task and leases it again in the next pass", want: porcupine.Ok, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			// A trainer waiting on pass 1 finishes the last task of pass
			// 0, and is given the first of pass 1. Finish then lease: the
			// other order would lease epoch 2 while epoch 1 is pending,
			// before its deadline.
			finGet(0, 2, 3, 1, 1, 1, 1, 2, 2),
			fin(0, 4, 5, 1, 2, 4),
		)},
		{name: "a stale finish, and the task it concerned leased at once", want: porcupine.Ok, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			// The lease expired: the finish is refused, the task is todo
			// and the same entry leases it again.
			finishWent(finGet(0, 150, 151, 1, 1, 0, 1, 2, 150), "stale_epoch", false),
			fin(0, 152, 153, 1, 2, 152),
		)},
		{name: "the finish counts when the lease is refused", want: porcupine.Ok, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			finGetErr(0, 2, 3, 1, 1, 0, "pass_before", 2),
			get(1, 4, 5, 1, 1, 2, 4),
		)},
		{name: "a refusal before the finish says nothing of it", want: porcupine.Ok, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			finishUnsaid(finGetErr(0, 2, 3, 1, 1, 0, "unknown_job", 2)),
			// The finish was not applied: the lease expires.
			get(1, 150, 151, 0, 1, 2, 150),
		)},
		{name: "unknown outcome: the finish took effect", want: porcupine.Ok, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			finGetUnknown(0, 2, 1, 1, 0),
			get(1, 5, 6, 1, 1, 2, 5),
		)},
		{name: "unknown outcome: the finish did not take effect", want: porcupine.Ok, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			finGetUnknown(0, 2, 1, 1, 0),
			get(1, 150, 151, 0, 1, 2, 150),
		)},
		{name: "unknown outcome: its lease may have used an epoch", want: porcupine.Ok, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			finGetUnknown(0, 2, 1, 1, 0),
			// Epoch 1 of task 2 went to the unknown lease and expired.
			get(1, 150, 151, 0, 2, 2, 150),
		)},
		{name: "a retry replays the finish, its lease ended since", want: porcupine.Ok, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			// The first attempt finished task 1 and leased task 2 epoch
			// 1; the retry came after that lease expired.
			finGetErr(0, 2, 300, 1, 1, 0, "stale_epoch", 300),
			get(1, 310, 311, 0, 2, 2, 310),
			get(1, 320, 321, 1, 1, 2, 320),
		)},
		{name: "a finish refused with its session ended applied before, if at all", want: porcupine.Ok, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			func() history.Op {
				op := finishUnsaid(finGetErr(0, 2, 3, 1, 1, 0, "session_expired", 0))
				op.AppliedAt, op.Session = 0, 1
				return op
			}(),
			get(1, 4, 5, 1, 1, 2, 4),
		)},
	})
}

// TestLinearizableFinishAndGetViolations: servers that get the combined
// call wrong.
func TestLinearizableFinishAndGetViolations(t *testing.T) {
	runLinCases(t, []linCase{
		{name: "the finish dropped, yet answered accepted", want: porcupine.Illegal, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			finGet(0, 2, 3, 1, 1, 0, 2, 1, 2),
			// Task 1 stayed pending; its lease expired and it went out
			// again in the pass it was finished in.
			get(1, 150, 151, 0, 1, 2, 150),
		), explain: []string{"task 1", "dispatched in pass 0, but it was already done in pass 0"}},
		{name: "the lease applied before the finish", want: porcupine.Illegal, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			get(1, 150, 151, 0, 1, 2, 150),
			fin(1, 152, 153, 1, 2, 152),
			get(1, 154, 155, 1, 1, 3, 154),
			// Accepted only if the lease of epoch 4 came first.
			finGet(1, 200, 201, 1, 4, 1, 1, 4, 200),
		), explain: []string{"#4 finish_and_get(finish task 1 epoch 4 -> accepted; get pass 1 -> task 1 epoch 4)",
			"its finish: finish of epoch 4 accepted, but the task is pending epoch 3"}},
		{name: "a finish accepted for a lease that is not current", want: porcupine.Illegal, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			get(1, 150, 151, 0, 1, 2, 150),
			finGet(0, 160, 161, 1, 1, 0, 2, 1, 160),
		), explain: []string{"task 1", "its finish: finish of epoch 1 accepted, but the task is pending epoch 2"}},
		{name: "the current lease's finish refused as stale before its deadline", want: porcupine.Illegal, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			finishWent(finGet(0, 10, 11, 1, 1, 0, 2, 1, 10), "stale_epoch", false),
		), explain: []string{"its finish: finish of the current lease refused as stale"}},
		{name: "the lease dispatches what its own finish just did", want: porcupine.Illegal, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			finGet(0, 2, 3, 1, 1, 0, 1, 2, 2),
		), explain: []string{"its lease, after its finish: dispatched in pass 0, but it was already done in pass 0"}},
		{name: "a lease answer silent about the finish", want: porcupine.Illegal, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			finishUnsaid(finGet(0, 2, 3, 1, 1, 0, 2, 1, 2)),
		), explain: []string{"says nothing of the finish"}},
		{name: "an error answer silent about the finish", want: porcupine.Illegal, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			finishUnsaid(finGetErr(0, 2, 3, 1, 1, 0, "no_more_available", 2)),
		), explain: []string{"says nothing of the finish"}},
		{name: "a finish ignored on a strict dataset", want: porcupine.Illegal, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			finishWent(finGet(0, 2, 3, 1, 1, 0, 2, 1, 2), "", true),
		), explain: []string{"strict dataset never ignores a finish"}},
		{name: "an unexpected finish code", want: porcupine.Illegal, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			finishWent(finGetErr(0, 2, 3, 1, 1, 0, "pass_before", 2), "unknown_task", false),
		), explain: []string{"unexpected answer unknown_task"}},
		{name: "a replayed finish cannot excuse an early dispatch", want: porcupine.Illegal, ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			finGetErr(0, 2, 300, 1, 1, 0, "stale_epoch", 300),
			get(1, 310, 311, 0, 1, 2, 310),
		), explain: []string{"dispatched in pass 0, but it was already done in pass 0"}},
	})
}

func TestLinearizableFinishAndGetCounts(t *testing.T) {
	res, err := Linearizable(ops(
		get(0, 0, 1, 0, 1, 1, 0),
		finGet(0, 2, 3, 1, 1, 0, 2, 1, 2),                   // two partitions
		finGet(0, 4, 5, 2, 1, 1, 2, 2, 4),                   // one
		finGetErr(0, 6, 7, 2, 2, 1, "no_more_available", 6), // its finish alone
	), testCfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != porcupine.Ok || res.Ops != 5 || res.Partitions != 2 || res.Unattributed != 1 || res.Relaxed {
		t.Fatalf("%+v", res)
	}
}

// TestFinishAndGetCheckers: the checkers of finishes and leases count a
// FinishAndGet as both.
func TestFinishAndGetCheckers(t *testing.T) {
	cfg := testCfg
	cfg.NumTasks = 2
	runErrCases(t, func(o []history.Op) error { return PassAccounting(o, cfg) }, []errCase{
		{name: "a pass whose finishes all rode GetTasks", ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			finGet(0, 2, 3, 1, 1, 0, 2, 1, 2),
			finGet(0, 4, 5, 2, 1, 1, 1, 2, 4),
			finGetErr(0, 6, 7, 1, 2, 1, "no_more_available", 6),
		)},
		{name: "a finish replayed with its lease stale", ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			finGetErr(0, 2, 300, 1, 1, 0, "stale_epoch", 300),
			get(1, 310, 311, 0, 2, 2, 310),
			fin(1, 312, 313, 2, 2, 312),
			get(1, 320, 321, 1, 1, 2, 320),
		)},
		{name: "a finish lost with the pass ended", ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			finishWent(finGet(0, 2, 3, 1, 1, 0, 2, 1, 2), "stale_epoch", false),
			fin(0, 4, 5, 2, 1, 4),
			getErr(0, 6, 7, 0, "pass_before", 6),
		), want: []string{"task 1 lost in pass 0"}},
		{name: "the finish dropped", ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			finGet(0, 2, 3, 1, 1, 0, 2, 1, 2),
			get(1, 150, 151, 0, 1, 2, 150),
			fin(1, 152, 153, 1, 2, 152),
		), want: []string{"task 1 finished twice in pass 0", "task 1 dispatched again in pass 0", "finish_and_get"}},
		{name: "a lease dispatched twice", ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			finGet(0, 2, 3, 1, 1, 0, 2, 1, 2),
			finGet(1, 2, 3, 1, 1, 0, 2, 1, 3),
		), want: []string{"task 2 epoch 1 dispatched twice"}},
	})
	runErrCases(t, func(o []history.Op) error { return SessionHolds(o, testCfg) }, []errCase{
		{name: "a held task released by a finish that rode a GetTask", ops: ops(
			under(1, get(0, 0, 1, 0, 1, 1, 0)),
			under(1, finGet(0, 10, 11, 1, 1, 0, 2, 1, 10)),
			under(2, get(1, 20, 21, 1, 1, 2, 20)),
			under(1, getErr(0, 30, 31, 0, "no_more_available", 30)),
		)},
		{name: "a held task leased again by a FinishAndGet while its session lived on", ops: ops(
			under(1, get(0, 0, 1, 0, 1, 1, 0)),
			under(2, finGet(1, 10, 11, 2, 1, 0, 1, 2, 10)),
			under(1, getErr(0, 30, 31, 0, "no_more_available", 30)),
		), want: []string{"task 1 epoch 1, held by session 1", "leased again within the task timeout by op 1 (client 1, finish_and_get under session 2", "while the session lived on"}},
	})
}
