package httpapi

import (
	"math"
	"net/http"
	"time"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/rpc"
)

// handleGetTask leases the next task of a pass.
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
	if c.JobNumber != 0 && s.b.FSM().Protocol() < fsm.Protocol2 {
		// Replicas of the previous release cannot read it. The level
		// only rises, so at Protocol2 here every replica applies it.
		c.JobNumber = 0
	}
	res, err := s.apply(r, req, c)
	if err != nil {
		return err
	}
	if res.Task == nil {
		return rpc.Errorf(rpc.CodeInternal, "GetTask succeeded without a task")
	}
	out := rpc.GetTaskResponse{Task: rpc.Task{Meta: TaskMetaFromFSM(res.Task.Meta), Chunks: make([]rpc.Chunk, len(res.Task.Chunks)),
		Pass: res.Task.Pass, Lease: rpc.Duration(res.Task.Lease), Session: res.Task.Session, Skip: res.Task.Skip, Seed: res.Task.Seed,
		Source: res.Task.Source}, AppliedAt: FSMTime(res.Clock), JobNumber: res.Task.JobNumber}
	for i, c := range res.Task.Chunks {
		out.Task.Chunks[i] = ChunkFromFSM(c)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// handleTaskFinished reports a task done.
func (s *Handler) handleTaskFinished(w http.ResponseWriter, r *http.Request) error {
	return s.taskReport(w, r, func(m fsm.TaskMeta) fsm.Command { return &fsm.TaskFinished{Meta: m} })
}

// handleTaskFailed reports a task failed.
func (s *Handler) handleTaskFailed(w http.ResponseWriter, r *http.Request) error {
	return s.taskReport(w, r, func(m fsm.TaskMeta) fsm.Command { return &fsm.TaskFailed{Meta: m} })
}

// handleTaskRenew extends a task's lease.
func (s *Handler) handleTaskRenew(w http.ResponseWriter, r *http.Request) error {
	return s.taskReport(w, r, func(m fsm.TaskMeta) fsm.Command { return &fsm.RenewLease{Meta: m} })
}

func (s *Handler) taskReport(w http.ResponseWriter, r *http.Request, cmd func(fsm.TaskMeta) fsm.Command) error {
	var in rpc.TaskRequest
	req, err := s.readWrite(w, r, &in)
	if err != nil {
		return err
	}
	if in.Meta.ID < 1 || in.Meta.ID > math.MaxInt32 {
		return invalidf("task id %d out of range [1, %d]", in.Meta.ID, math.MaxInt32)
	}
	if in.Meta.Epoch < 0 || in.Meta.Epoch > fsm.MaxEpoch {
		// An epoch of a restored cluster carries its era above 32 bits.
		return invalidf("task epoch %d out of range [0, %d]", in.Meta.Epoch, int64(fsm.MaxEpoch))
	}
	c := cmd(TaskMetaToFSM(in.Meta))
	res, err := s.apply(r, req, c)
	if err != nil {
		return err
	}
	// A renewal's answer says how long its lease lasts, a replayed one
	// what remains of it at the retry.
	writeJSON(w, http.StatusOK, rpc.TaskResponse{Ignored: res.Ignored, AppliedAt: FSMTime(res.Clock), Lease: rpc.Duration(res.Lease)})
	return nil
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
