package check

import (
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/chaos/history"
)

// Synthetic histories: real times and FSM times are given in milliseconds;
// FSM times are offsets from t0, a plausible unix time.
const (
	t0 = int64(1_700_000_000_000_000_000)
	ms = int64(time.Millisecond)
)

var testCfg = Config{NumTasks: 3, TaskTimeout: 100 * time.Millisecond, Grace: 50 * time.Millisecond}

func at(a int64) int64 { return t0 + a*ms }

func rt(inv, ret int64) (int64, int64) { return inv * ms, ret * ms }

// get is a GetTask of pass p answered with task id, epoch e, applied at a.
func get(c int, inv, ret int64, p, id, e int, a int64) history.Op {
	i, r := rt(inv, ret)
	return history.Op{Client: c, Kind: history.GetTask, Invoke: i, Return: r, Pass: p,
		Task: fsm.TaskMeta{ID: id, Epoch: e}, AppliedAt: at(a)}
}

// getErr is a GetTask of pass p answered with an error code.
func getErr(c int, inv, ret int64, p int, code string, a int64) history.Op {
	i, r := rt(inv, ret)
	return history.Op{Client: c, Kind: history.GetTask, Invoke: i, Return: r, Pass: p, Code: code, AppliedAt: at(a)}
}

// getUnknown is a GetTask whose outcome is unknown.
func getUnknown(c int, inv int64, p int) history.Op {
	return history.Op{Client: c, Kind: history.GetTask, Invoke: inv * ms, Return: history.Never, Pass: p}
}

// fin is an accepted TaskFinished.
func fin(c int, inv, ret int64, id, e int, a int64) history.Op {
	i, r := rt(inv, ret)
	return history.Op{Client: c, Kind: history.TaskFinished, Invoke: i, Return: r,
		Meta: fsm.TaskMeta{ID: id, Epoch: e}, AppliedAt: at(a)}
}

// finCode is a TaskFinished answered with code.
func finCode(c int, inv, ret int64, id, e int, code string, a int64) history.Op {
	op := fin(c, inv, ret, id, e, a)
	op.Code = code
	return op
}

// stale is a TaskFinished refused with stale_epoch.
func stale(c int, inv, ret int64, id, e int, a int64) history.Op {
	return finCode(c, inv, ret, id, e, "stale_epoch", a)
}

// finUnknown is a TaskFinished whose outcome is unknown.
func finUnknown(c int, inv int64, id, e int) history.Op {
	return history.Op{Client: c, Kind: history.TaskFinished, Invoke: inv * ms, Return: history.Never,
		Meta: fsm.TaskMeta{ID: id, Epoch: e}}
}

// failed is a TaskFailed, accepted or ignored.
func failed(c int, inv, ret int64, id, e int, ignored bool, a int64) history.Op {
	i, r := rt(inv, ret)
	return history.Op{Client: c, Kind: history.TaskFailed, Invoke: i, Return: r,
		Meta: fsm.TaskMeta{ID: id, Epoch: e}, Ignored: ignored, AppliedAt: at(a)}
}

// failedUnknown is a TaskFailed whose outcome is unknown.
func failedUnknown(c int, inv int64, id, e int) history.Op {
	return history.Op{Client: c, Kind: history.TaskFailed, Invoke: inv * ms, Return: history.Never,
		Meta: fsm.TaskMeta{ID: id, Epoch: e}}
}

// save is a RequestSaveModel by trainer for d ms, granted or denied.
func save(c int, inv, ret int64, trainer string, d int64, granted bool, a int64) history.Op {
	i, r := rt(inv, ret)
	return history.Op{Client: c, Kind: history.SaveModel, Invoke: i, Return: r, Trainer: trainer,
		BlockDur: time.Duration(d * ms), Granted: granted, AppliedAt: at(a)}
}

// saveUnknown is a RequestSaveModel whose outcome is unknown.
func saveUnknown(c int, inv int64, trainer string, d int64) history.Op {
	return history.Op{Client: c, Kind: history.SaveModel, Invoke: inv * ms, Return: history.Never,
		Trainer: trainer, BlockDur: time.Duration(d * ms)}
}

// member returns a stable member id for a small number.
func member(n int) uuid.UUID {
	return uuid.NewSHA1(uuid.NameSpaceOID, []byte{byte(n)})
}

func join(c int, inv, ret int64, group string, m, peers int, data string) history.Op {
	i, r := rt(inv, ret)
	return history.Op{Client: c, Kind: history.Join, Invoke: i, Return: r, Group: group,
		Member: member(m), NumPeers: peers, Data: data}
}

func watch(c int, inv, ret int64, group string, m, rank int, result ...string) history.Op {
	i, r := rt(inv, ret)
	return history.Op{Client: c, Kind: history.Watch, Invoke: i, Return: r, Group: group,
		Member: member(m), Rank: rank, Result: result}
}

func ops(o ...history.Op) []history.Op { return o }

// finGet is a FinishAndGet of pass p that carried the finish of task fid
// epoch fe, answered with task id, epoch e, applied at a, its finish
// accepted.
func finGet(c int, inv, ret int64, fid, fe, p, id, e int, a int64) history.Op {
	op := get(c, inv, ret, p, id, e, a)
	op.Kind, op.Meta, op.Finish = history.FinishAndGet, fsm.TaskMeta{ID: fid, Epoch: fe}, &history.FinishOutcome{}
	return op
}

// finGetErr is a FinishAndGet of pass p that carried the finish of task
// fid epoch fe, answered with an error code, its finish accepted.
func finGetErr(c int, inv, ret int64, fid, fe, p int, code string, a int64) history.Op {
	op := getErr(c, inv, ret, p, code, a)
	op.Kind, op.Meta, op.Finish = history.FinishAndGet, fsm.TaskMeta{ID: fid, Epoch: fe}, &history.FinishOutcome{}
	return op
}

// finGetUnknown is a FinishAndGet whose outcome is unknown.
func finGetUnknown(c int, inv int64, fid, fe, p int) history.Op {
	op := getUnknown(c, inv, p)
	op.Kind, op.Meta = history.FinishAndGet, fsm.TaskMeta{ID: fid, Epoch: fe}
	return op
}

// finishWent sets how op's answer says its finish went: code ("" for
// accepted) and ignored.
func finishWent(op history.Op, code string, ignored bool) history.Op {
	op.Finish = &history.FinishOutcome{Code: code, Ignored: ignored}
	return op
}

// finishUnsaid makes op's answer say nothing of its finish.
func finishUnsaid(op history.Op) history.Op {
	op.Finish = nil
	return op
}
