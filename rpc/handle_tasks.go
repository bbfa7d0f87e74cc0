package rpc

import (
	"math"
	"net/http"
	"time"

	"github.com/raftmaster/raftmaster/fsm"
)

// handleGetTask leases the next task of a pass.
func (s *Server) handleGetTask(w http.ResponseWriter, r *http.Request) error {
	var in GetTaskRequest
	req, err := s.readWrite(w, r, &in)
	if err != nil {
		return err
	}
	if in.Pass < 0 || in.Pass > math.MaxInt32 {
		return invalidf("pass %d out of range [0, %d]", in.Pass, math.MaxInt32)
	}
	res, err := s.apply(r.Context(), req, &fsm.GetTask{Pass: in.Pass})
	if err != nil {
		return err
	}
	if res.Task == nil {
		return Errorf(CodeInternal, "GetTask succeeded without a task")
	}
	out := GetTaskResponse{Task: Task{Meta: res.Task.Meta, Chunks: make([]Chunk, len(res.Task.Chunks)),
		Pass: res.Task.Pass, Lease: Duration(res.Task.Lease)}, AppliedAt: res.Clock}
	for i, c := range res.Task.Chunks {
		out.Task.Chunks[i] = ChunkFromFSM(c)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// handleTaskFinished reports a task done.
func (s *Server) handleTaskFinished(w http.ResponseWriter, r *http.Request) error {
	return s.taskReport(w, r, func(m fsm.TaskMeta) fsm.Command { return &fsm.TaskFinished{Meta: m} })
}

// handleTaskFailed reports a task failed.
func (s *Server) handleTaskFailed(w http.ResponseWriter, r *http.Request) error {
	return s.taskReport(w, r, func(m fsm.TaskMeta) fsm.Command { return &fsm.TaskFailed{Meta: m} })
}

// handleTaskRenew extends a task's lease.
func (s *Server) handleTaskRenew(w http.ResponseWriter, r *http.Request) error {
	return s.taskReport(w, r, func(m fsm.TaskMeta) fsm.Command { return &fsm.RenewLease{Meta: m} })
}

func (s *Server) taskReport(w http.ResponseWriter, r *http.Request, cmd func(fsm.TaskMeta) fsm.Command) error {
	var in TaskRequest
	req, err := s.readWrite(w, r, &in)
	if err != nil {
		return err
	}
	if in.Meta.ID < 1 || in.Meta.ID > math.MaxInt32 {
		return invalidf("task id %d out of range [1, %d]", in.Meta.ID, math.MaxInt32)
	}
	if in.Meta.Epoch < 0 || in.Meta.Epoch > math.MaxInt32 {
		return invalidf("task epoch %d out of range [0, %d]", in.Meta.Epoch, math.MaxInt32)
	}
	res, err := s.apply(r.Context(), req, cmd(in.Meta))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, TaskResponse{Ignored: res.Ignored, AppliedAt: res.Clock})
	return nil
}

// handleSaveModel asks for the save-model lease.
func (s *Server) handleSaveModel(w http.ResponseWriter, r *http.Request) error {
	var in SaveModelRequest
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
	res, err := s.apply(r.Context(), req, &fsm.RequestSaveModel{TrainerID: in.TrainerID, BlockDur: time.Duration(in.BlockDur)})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, SaveModelResponse{Granted: res.Granted, AppliedAt: res.Clock, Replayed: res.Duplicate})
	return nil
}
