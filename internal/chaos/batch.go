package chaos

import (
	"context"
	"errors"
	"time"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/chaos/history"
	"github.com/raftmaster/raftmaster/rpc"
)

// batchTrainer is a trainer that prefetches: each GetTask leases up to
// a.batch tasks and reports the tasks of the batch before that it
// finished (rpc.GetTaskRequest.Count and MoreFinished, protocol level
// 10), one log entry per batch. It fails some tasks and abandons a few,
// as trainer does, and sends its finishes again when an answer does not
// say how they went.
func (a *actor) batchTrainer(ctx context.Context) {
	pass := 0
	var finished []rpc.TaskMeta // to report on the next GetTask
	for ctx.Err() == nil {
		tasks, code, told := a.getBatch(ctx, pass, finished)
		if told {
			finished = nil
		}
		switch {
		case code == "":
		case code == "pass_before":
			pass++
			continue
		case code == "no_more_available" && a.rng.IntN(2) == 0:
			pass++
			continue
		case code == "pass_after", code == "no_more_available", code == "no_dataset":
			sleep(ctx, time.Duration(20+a.rng.IntN(80))*time.Millisecond)
			continue
		default:
			sleep(ctx, 50*time.Millisecond)
			continue
		}
		for _, meta := range tasks {
			sleep(ctx, time.Duration(a.rng.IntN(20))*time.Millisecond) // "training"
			switch r := a.rng.IntN(100); {
			case r < 4:
				// Die mid-task: the task comes back when the session
				// ends or the leader revokes it.
			case r < 14:
				var tr rpc.TaskResponse
				a.call(ctx, history.Op{Kind: history.TaskFailed, Meta: fsm.TaskMeta(meta)}, rpc.PathTaskFailed,
					rpc.TaskRequest{Meta: meta}, &tr, func(op *history.Op) { op.Ignored, op.AppliedAt = tr.Ignored, fsmTime(tr.AppliedAt) })
			default:
				finished = append(finished, meta)
			}
		}
	}
}

// getBatch sends one batch GetTask of pass carrying finished and records
// it as what the entry does, one operation per part: the first finish and
// the first lease as a FinishAndGet (a GetTask when it carries none), each
// further finish as a TaskFinished, each further lease as a GetTask, all
// over the call's span, so that the checkers may order them as the entry
// did. A part whose outcome is unknown is recorded so: every part when
// the call's is, and the leases a replayed answer no longer carries. It
// returns the tasks leased, the error code ("" for none, "unknown" when
// the outcome is), and whether the answer said how the finishes went.
func (a *actor) getBatch(ctx context.Context, pass int, finished []rpc.TaskMeta) ([]rpc.TaskMeta, string, bool) {
	req := rpc.GetTaskRequest{Pass: pass, Count: a.batch}
	if len(finished) > 0 {
		req.Finished, req.MoreFinished = &finished[0], finished[1:]
	}
	var resp rpc.GetTaskResponse
	base := history.Op{Client: a.id, Job: a.job, Pass: pass, Invoke: a.w.rec.Now()}
	session, err := a.cl.CallSession(ctx, rpc.PathTaskGet, req, &resp)
	base.Return, base.Session = a.w.rec.Now(), session
	code, at, unknown := outcome(err)
	if code == fsm.CodeStaleEpoch.String() {
		// A retry whose first lease ended since: what it leased is
		// unknown to the caller.
		unknown = true
	}
	first := base
	first.Kind = history.GetTask
	if len(finished) > 0 {
		first.Kind, first.Meta = history.FinishAndGet, fsm.TaskMeta(finished[0])
	}
	var ops []history.Op
	// finish records the further finish i, as the answer's outcome o says
	// (nil: unknown).
	finish := func(i int, o *rpc.FinishOutcome, appliedAt int64) {
		op := base
		op.Kind, op.Pass, op.Meta = history.TaskFinished, 0, fsm.TaskMeta(finished[i])
		switch {
		case o == nil:
			op.Return = history.Never
		case o.Code != "":
			op.Code, op.AppliedAt = o.Code, appliedAt
		default:
			op.Ignored, op.AppliedAt = o.Ignored, appliedAt
		}
		ops = append(ops, op)
	}
	// lease records a further lease: t, or an unknown one for nil.
	lease := func(t *rpc.Task, appliedAt int64) {
		op := base
		op.Kind = history.GetTask
		if t == nil {
			op.Return = history.Never
		} else {
			op.Task, op.Pass, op.Holder, op.AppliedAt = fsm.TaskMeta(t.Meta), t.Pass, t.Session, appliedAt
			for _, c := range t.Chunks {
				op.Chunks = append(op.Chunks, c.Path)
			}
		}
		ops = append(ops, op)
	}
	var tasks []rpc.TaskMeta
	told := false
	switch {
	case err == nil:
		at := fsmTime(resp.AppliedAt)
		first.Task, first.AppliedAt, first.Pass, first.Holder = fsm.TaskMeta(resp.Task.Meta), at, resp.Task.Pass, resp.Task.Session
		for _, c := range resp.Task.Chunks {
			first.Chunks = append(first.Chunks, c.Path)
		}
		if len(finished) > 0 {
			first.Finish = finishOutcome(resp.Finish)
			told = first.Finish != nil && len(resp.MoreFinish) == len(finished)-1
		}
		ops = append(ops, first)
		for i := 1; i < len(finished); i++ {
			var o *rpc.FinishOutcome
			if i-1 < len(resp.MoreFinish) {
				o = &resp.MoreFinish[i-1]
			}
			finish(i, o, at)
		}
		tasks = append(tasks, resp.Task.Meta)
		for i := range resp.More {
			lease(&resp.More[i], at)
			tasks = append(tasks, resp.More[i].Meta)
		}
		if resp.Replayed {
			// Leases of the first answer that ended since: unknown.
			for range a.batch - len(tasks) {
				lease(nil, 0)
			}
		}
	case unknown:
		first.Return = history.Never
		ops = append(ops, first)
		for i := 1; i < len(finished); i++ {
			finish(i, nil, 0)
		}
		for range a.batch - 1 {
			lease(nil, 0)
		}
		code = "unknown"
	default:
		first.Code, first.AppliedAt = code, at
		var e *rpc.Error
		var more []rpc.FinishOutcome
		if errors.As(err, &e) && len(finished) > 0 {
			first.Finish, more = finishOutcome(e.Finish), e.MoreFinish
			told = first.Finish != nil && len(more) == len(finished)-1
		}
		ops = append(ops, first)
		for i := 1; i < len(finished); i++ {
			var o *rpc.FinishOutcome
			if i-1 < len(more) {
				o = &more[i-1]
			}
			finish(i, o, at)
		}
	}
	for _, op := range ops {
		a.w.rec.Add(op)
	}
	return tasks, code, told
}
