package check

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/chaos/history"
)

// under makes op a call under session s; a leased task is held by it.
func under(s uint64, op history.Op) history.Op {
	op.Session = s
	if (op.Kind == history.GetTask || op.Kind == history.FinishAndGet) && op.Code == "" && op.Task.ID != 0 {
		op.Holder = s
	}
	return op
}

// expired is a call of kind under session s, for task id epoch e (a
// finish or a failure), answered session_expired: refused without a time.
func expired(c int, inv, ret int64, kind history.Kind, id, e int, s uint64) history.Op {
	i, r := rt(inv, ret)
	return history.Op{Client: c, Kind: kind, Invoke: i, Return: r, Meta: fsm.TaskMeta{ID: id, Epoch: e}, Session: s,
		Code: fsm.CodeSessionExpired.String()}
}

// keepAlive is a keep-alive of session s, answered code ("" for alive).
func keepAlive(c int, inv, ret int64, s uint64, code string) history.Op {
	i, r := rt(inv, ret)
	return history.Op{Client: c, Kind: history.KeepAlive, Invoke: i, Return: r, Session: s, Code: code}
}

// stalled is a history in which session 1 holds task 1 from FSM time 0,
// its trainer stalls, the session ends, and session 2 leases the task again
// at 60, within the task timeout (100): legal, since nothing shows session
// 1 open after 0.
func stalled() []history.Op {
	return ops(
		under(1, get(0, 0, 1, 0, 1, 1, 0)),
		keepAlive(0, 20, 21, 1, ""),
		under(2, get(1, 60, 61, 0, 1, 2, 60)),
		under(2, fin(1, 70, 71, 1, 2, 70)),
		// The stalled trainer comes back: its finish is refused.
		expired(0, 80, 81, history.TaskFinished, 1, 1, 1),
		keepAlive(0, 82, 83, 1, fsm.CodeSessionExpired.String()),
	)
}

func TestSessionHolds(t *testing.T) {
	runErrCases(t, func(o []history.Op) error { return SessionHolds(o, testCfg) }, []errCase{
		{name: "the session ended, the task was leased again", ops: stalled()},
		{name: "the session lived on after its task was leased again", ops: append(stalled(),
			// Applied under session 1 at 75, after the new lease at 60.
			under(1, getErr(0, 74, 76, 0, "no_more_available", 75)),
		), want: []string{"sessions hold tasks alone", "task 1 epoch 1, held by session 1", "while the session lived on", "op 6"}},
		{name: "the session lived on, shown in real time only", ops: append(stalled(),
			// Applied at the very FSM time of the new lease, but invoked
			// after it returned.
			under(1, getErr(0, 62, 63, 0, "no_more_available", 60)),
		), want: []string{"invoked after the new lease returned"}},
		{name: "leased again after the task timeout: the leader may have revoked it", ops: ops(
			under(1, get(0, 0, 1, 0, 1, 1, 0)),
			under(2, get(1, 120, 121, 0, 1, 2, 120)),
			under(1, getErr(0, 130, 131, 0, "no_more_available", 130)),
		)},
		{name: "released by a failure whose outcome is unknown", ops: ops(
			under(1, get(0, 0, 1, 0, 1, 1, 0)),
			under(1, failedUnknown(0, 30, 1, 1)),
			under(2, get(1, 60, 61, 0, 1, 2, 60)),
			under(1, getErr(0, 70, 71, 0, "no_more_available", 70)),
		)},
		{name: "released by a finish refused as its session ended (it may have applied before)", ops: ops(
			under(1, get(0, 0, 1, 0, 1, 1, 0)),
			expired(0, 30, 35, history.TaskFinished, 1, 1, 1),
			under(2, get(1, 60, 61, 1, 1, 2, 60)),
		)},
		{name: "a lease without a session is not held", ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			under(2, get(1, 60, 61, 0, 1, 2, 60)),
		)},
		{name: "answered a task held by another session", ops: ops(
			func() history.Op { op := under(1, get(0, 0, 1, 0, 1, 1, 0)); op.Holder = 3; return op }(),
		), want: []string{"leased under session 1, but the answer says the task is held by session 3"}},
		{name: "one lease held by two sessions", ops: ops(
			under(1, get(0, 0, 1, 0, 1, 1, 0)),
			under(2, get(1, 0, 2, 0, 1, 1, 0)),
		), want: []string{"task 1 epoch 1 is held by sessions 1 and 2"}},
	})
}

func TestSessionEnds(t *testing.T) {
	runErrCases(t, SessionEnds, []errCase{
		{name: "refused, then a new session", ops: append(stalled(),
			under(3, getErr(0, 84, 85, 0, "no_more_available", 84)),
		)},
		{name: "a write invoked before the refusal returned may have applied before it", ops: append(stalled(),
			under(1, getErr(0, 79, 90, 0, "no_more_available", 75)),
		)},
		{name: "a write applied after its session was refused", ops: append(stalled(),
			under(1, getErr(0, 84, 85, 0, "no_more_available", 84)),
		), want: []string{"no write of an ended session applied", "applied under session 1 after the session had ended", "op 4"}},
		{name: "a refused attempt the client went past counts", ops: ops(
			under(1, get(0, 0, 1, 0, 1, 1, 0)),
			history.Op{Client: 0, Kind: history.SessionRefused, Session: 1, Invoke: 10 * ms, Return: 11 * ms, Path: "/v1/task/finished",
				Code: fsm.CodeSessionExpired.String()},
			under(1, getErr(0, 12, 13, 0, "no_more_available", 12)),
		), want: []string{"session_refused under session 1 /v1/task/finished -> session_expired"}},
		{name: "a keep-alive refused proves no end", ops: ops(
			under(1, get(0, 0, 1, 0, 1, 1, 0)),
			keepAlive(0, 10, 11, 1, fsm.CodeSessionExpired.String()),
			under(1, getErr(0, 12, 13, 0, "no_more_available", 12)),
		)},
	})
}

// A finish refused because its session ended is a finish of unknown
// outcome to the other checkers: it may have applied before the end.
func TestSessionExpiredIsAnUnknownOutcome(t *testing.T) {
	cfg := testCfg
	cfg.NumTasks = 1
	cfg.VisualizeDir = t.TempDir()
	done := ops(
		under(1, get(0, 0, 1, 0, 1, 1, 0)),
		// Its answer lost, the finish applied; the retry found the
		// session ended, and the pass went on.
		expired(0, 10, 30, history.TaskFinished, 1, 1, 1),
		under(2, get(0, 40, 41, 1, 1, 2, 40)),
	)
	if errs := All(done, cfg); len(errs) != 0 {
		t.Fatalf("a refused finish that had applied: %v", errs)
	}
	notDone := ops(
		under(1, get(0, 0, 1, 0, 1, 1, 0)),
		expired(0, 10, 30, history.TaskFinished, 1, 1, 1),
		under(2, get(1, 40, 41, 0, 1, 2, 40)),
		under(2, fin(1, 50, 51, 1, 2, 50)),
	)
	if errs := All(notDone, cfg); len(errs) != 0 {
		t.Fatalf("a refused finish that had not applied: %v", errs)
	}
}

// The task model knows that a held task goes back when its session ends:
// a new lease within the task timeout is legal while nothing shows the
// session open after it, and illegal once something does.
func TestLinearizableHeldTasks(t *testing.T) {
	cfg := testCfg
	cfg.VisualizeDir = t.TempDir()
	res, err := Linearizable(stalled(), cfg, time.Minute)
	if err != nil || res.Outcome != porcupine.Ok {
		t.Fatalf("a held task leased again after its session ended: %v, %v", res.Err(), err)
	}
	lived := append(stalled(), under(1, getErr(0, 74, 76, 0, "no_more_available", 75)))
	res, err = Linearizable(lived, cfg, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != porcupine.Illegal {
		t.Fatalf("a held task leased again while its session lived: %v, want Illegal", res.Outcome)
	}
	t.Log(res.Explanation)
}
