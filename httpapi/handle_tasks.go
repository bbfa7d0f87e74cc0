package httpapi

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/rpc"
)

// handleGetTask leases the next task of a pass. A request that carries
// the task its caller finished (Finished, fsm.Protocol9) has it finished
// by the same entry, before the lease: the answer says how the finish
// went (Finish), on an error answer too, since the finish counts even
// when no task is left to lease. Below fsm.Protocol9 such a request is
// answered unavailable (fsm.ErrUpgradePending) and nothing is proposed.
func (s *Handler) handleGetTask(w http.ResponseWriter, r *http.Request) error {
	var in rpc.GetTaskRequest
	req, err := s.readWrite(w, r, &in)
	if err != nil {
		return err
	}
	if in.Pass < 0 || in.Pass > math.MaxInt32 {
		return invalidf("pass %d out of range [0, %d]", in.Pass, math.MaxInt32)
	}
	c := &fsm.GetTask{Pass: in.Pass, JobNumber: in.JobNumber}
	if in.Finished != nil {
		if err := checkTaskMeta("finished task", *in.Finished); err != nil {
			return err
		}
		if err := s.finishRidesAllowed(); err != nil {
			return err
		}
		c.Finished = TaskMetaToFSM(*in.Finished)
	}
	if err := s.batch(c, in); err != nil {
		return err
	}
	if c.JobNumber != 0 && s.b.FSM().Protocol() < fsm.Protocol2 {
		// Replicas of the previous release cannot read it. The level
		// only rises, so at Protocol2 here every replica applies it.
		c.JobNumber = 0
	}
	c.Hdr().Job = jobOf(r)
	res, err := s.propose(r, req, c)
	if err != nil {
		return err
	}
	finish := FinishOutcomeFromFSM(res.Finish)
	var moreFinish []rpc.FinishOutcome
	for _, o := range res.MoreFinish {
		moreFinish = append(moreFinish, *FinishOutcomeFromFSM(&o))
	}
	if err := resultError(res); err != nil {
		// The finishes the request carried went their way all the same:
		// say how, for the caller to know whether to send them again.
		if e, ok := errors.AsType[*rpc.Error](err); ok {
			e.Finish, e.MoreFinish = finish, moreFinish
		}
		return err
	}
	if res.Task == nil {
		return rpc.Errorf(rpc.CodeInternal, "GetTask succeeded without a task")
	}
	out := rpc.GetTaskResponse{Task: TaskFromFSM(res.Task), AppliedAt: FSMTime(res.Clock), JobNumber: res.Task.JobNumber,
		Finish: finish, MoreFinish: moreFinish, Replayed: res.Duplicate}
	for _, t := range res.More {
		out.More = append(out.More, TaskFromFSM(t))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// batch checks and sets a GetTask's batch fields (fsm.Protocol10): a
// Count to lease, and more finished tasks, which need a first one. Below
// fsm.Protocol10 a request that asks for more than one task, or carries
// more finishes, is answered unavailable, as finishRidesAllowed says.
func (s *Handler) batch(c *fsm.GetTask, in rpc.GetTaskRequest) error {
	if in.Count < 0 || in.Count > fsm.MaxTasksPerGet {
		return invalidf("count %d out of range [0, %d]", in.Count, fsm.MaxTasksPerGet)
	}
	if len(in.MoreFinished) > 0 && in.Finished == nil {
		return invalidf("more_finished without finished: name the first finished task in finished")
	}
	if len(in.MoreFinished) >= fsm.MaxTasksPerGet {
		return invalidf("%d finished tasks: a request carries at most %d", len(in.MoreFinished)+1, fsm.MaxTasksPerGet)
	}
	if in.Count <= 1 && len(in.MoreFinished) == 0 {
		return nil
	}
	for _, m := range in.MoreFinished {
		if err := checkTaskMeta("finished task", m); err != nil {
			return err
		}
		c.MoreFinished = append(c.MoreFinished, TaskMetaToFSM(m))
	}
	if len(in.MoreFinished) > 0 {
		if err := distinctTasks("finished", *in.Finished, in.MoreFinished); err != nil {
			return err
		}
	}
	c.Count = in.Count
	return s.levelAllows(fsm.Protocol10, "a GetTask of a batch (count above 1, or more_finished)",
		"ask for one task at a time and report the others on their own ("+rpc.PathTaskFinished+")")
}

// finishRidesAllowed refuses a GetTask that carries a finished task, on
// a leader whose cluster is below fsm.Protocol9, with
// fsm.ErrUpgradePending (unavailable): replicas of earlier releases
// cannot read it. A node that does not lead sends the request to the
// leader rather than judge by its own view of the level.
func (s *Handler) finishRidesAllowed() error {
	return s.levelAllows(fsm.Protocol9, "a GetTask that carries the finished task",
		"report the task finished on its own ("+rpc.PathTaskFinished+"), then ask for the next")
}

// levelAllows refuses, on a leader whose cluster is below level need,
// with fsm.ErrUpgradePending: what (a request's field) needs that level,
// and instead says what to do until then.
func (s *Handler) levelAllows(need uint64, what, instead string) error {
	level := s.b.FSM().Protocol()
	if level >= need {
		return nil
	}
	if !s.leads() {
		return ErrNotLeader
	}
	return fmt.Errorf("%w: %s needs protocol level %d, and the cluster is at %d "+
		"until every node runs a release that knows it: %s",
		fsm.ErrUpgradePending, what, need, level, instead)
}

// checkTaskMeta checks the range of a task meta of a request; what names
// its task in the error ("task", "finished task").
func checkTaskMeta(what string, m rpc.TaskMeta) error {
	if m.ID < 1 || m.ID > math.MaxInt32 {
		return invalidf("%s id %d out of range [1, %d]", what, m.ID, math.MaxInt32)
	}
	if m.Epoch < 0 || m.Epoch > fsm.MaxEpoch {
		// An epoch of a restored cluster carries its era above 32 bits.
		return invalidf("%s epoch %d out of range [0, %d]", what, m.Epoch, int64(fsm.MaxEpoch))
	}
	return nil
}

// handleTaskFinished reports a task done.
func (s *Handler) handleTaskFinished(w http.ResponseWriter, r *http.Request) error {
	return s.taskReport(w, r, single(func(m fsm.TaskMeta) fsm.Command { return &fsm.TaskFinished{Meta: m} }))
}

// handleTaskFailed reports a task failed.
func (s *Handler) handleTaskFailed(w http.ResponseWriter, r *http.Request) error {
	return s.taskReport(w, r, single(func(m fsm.TaskMeta) fsm.Command { return &fsm.TaskFailed{Meta: m} }))
}

// handleTaskRenew extends a task's lease, or, with More (fsm.Protocol10),
// several leases in one entry.
func (s *Handler) handleTaskRenew(w http.ResponseWriter, r *http.Request) error {
	return s.taskReport(w, r, func(in rpc.TaskRequest) (fsm.Command, error) {
		c := &fsm.RenewLease{Meta: TaskMetaToFSM(in.Meta)}
		if len(in.More) == 0 {
			return c, nil
		}
		if len(in.More) >= fsm.MaxTasksPerGet {
			return nil, invalidf("%d leases: a renewal renews at most %d", len(in.More)+1, fsm.MaxTasksPerGet)
		}
		for _, m := range in.More {
			if err := checkTaskMeta("task", m); err != nil {
				return nil, err
			}
			c.More = append(c.More, TaskMetaToFSM(m))
		}
		if err := distinctTasks("renewed", in.Meta, in.More); err != nil {
			return nil, err
		}
		return c, s.levelAllows(fsm.Protocol10, "a renewal of several leases (more)", "renew each lease on its own")
	})
}

// taskReport applies the command cmd makes of a task report; more, the
// further leases of a batch renewal, is refused by the others.
func (s *Handler) taskReport(w http.ResponseWriter, r *http.Request, cmd func(rpc.TaskRequest) (fsm.Command, error)) error {
	var in rpc.TaskRequest
	req, err := s.readWrite(w, r, &in)
	if err != nil {
		return err
	}
	if err := checkTaskMeta("task", in.Meta); err != nil {
		return err
	}
	c, err := cmd(in)
	if err != nil {
		return err
	}
	res, err := s.apply(r, req, c)
	if err != nil {
		return err
	}
	// A renewal's answer says how long its lease lasts, a replayed one
	// what remains of it at the retry.
	out := rpc.TaskResponse{Ignored: res.Ignored, AppliedAt: FSMTime(res.Clock), Lease: rpc.Duration(res.Lease)}
	for _, o := range res.Renewed {
		ro := rpc.RenewOutcome{Lease: rpc.Duration(o.Lease)}
		if o.Code != fsm.CodeOK {
			ro.Code = o.Code.String()
		}
		out.Renewed = append(out.Renewed, ro)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// distinctTasks refuses a batch that names a task twice (what: how the
// batch treats its tasks).
func distinctTasks(what string, first rpc.TaskMeta, more []rpc.TaskMeta) error {
	seen := map[int]bool{first.ID: true}
	for _, m := range more {
		if seen[m.ID] {
			return invalidf("task %d is %s twice in one request", m.ID, what)
		}
		seen[m.ID] = true
	}
	return nil
}

// single is the command of a task report that takes one task: more is
// refused.
func single(cmd func(fsm.TaskMeta) fsm.Command) func(rpc.TaskRequest) (fsm.Command, error) {
	return func(in rpc.TaskRequest) (fsm.Command, error) {
		if len(in.More) > 0 {
			return nil, invalidf("more: only a renewal (%s) takes several tasks", rpc.PathTaskRenew)
		}
		return cmd(TaskMetaToFSM(in.Meta)), nil
	}
}

// handleSaveModel asks for the save-model lease.
func (s *Handler) handleSaveModel(w http.ResponseWriter, r *http.Request) error {
	var in rpc.SaveModelRequest
	req, err := s.readWrite(w, r, &in)
	if err != nil {
		return err
	}
	if err := checkID("trainer_id", in.TrainerID); err != nil {
		return err
	}
	maxDur := min(s.cfg.Limits.MaxDuration, fsm.MaxBlockDur)
	if err := checkDuration("block_dur", time.Duration(in.BlockDur), time.Millisecond, maxDur); err != nil {
		return err
	}
	res, err := s.apply(r, req, &fsm.RequestSaveModel{TrainerID: in.TrainerID, BlockDur: time.Duration(in.BlockDur)})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rpc.SaveModelResponse{Granted: res.Granted, AppliedAt: FSMTime(res.Clock), Replayed: res.Duplicate,
		Lease: rpc.Duration(res.Lease)})
	return nil
}
