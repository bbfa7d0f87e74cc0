package httpapi

import (
	"errors"
	"math"
	"net/http"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/rpc"
)

// handleReportProgress records the consumed offsets of the caller's tasks
// for the job's next cursor.
func (s *Handler) handleReportProgress(w http.ResponseWriter, r *http.Request) error {
	var in rpc.ReportProgressRequest
	req, err := s.readWrite(w, r, &in)
	if err != nil {
		return err
	}
	if len(in.Progress) == 0 {
		return invalidf("a progress report names no task")
	}
	ps, err := progressToFSM(in.Progress)
	if err != nil {
		return err
	}
	res, err := s.apply(r, req, &fsm.ReportProgress{Progress: ps})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rpc.ReportProgressResponse{Recorded: res.Recorded, AppliedAt: FSMTime(res.Clock)})
	return nil
}

// handleCommitCursor commits a cursor of the job's dispatch.
func (s *Handler) handleCommitCursor(w http.ResponseWriter, r *http.Request) error {
	var in rpc.CommitCursorRequest
	req, err := s.readWrite(w, r, &in)
	if err != nil {
		return err
	}
	if in.TrainerID != "" {
		if err := checkID("trainer_id", in.TrainerID); err != nil {
			return err
		}
	}
	ps, err := progressToFSM(in.Progress)
	if err != nil {
		return err
	}
	res, err := s.apply(r, req, &fsm.CommitCursor{Step: in.Step, Progress: ps, TrainerID: in.TrainerID, Generation: in.Generation})
	if err != nil {
		return err
	}
	if res.Cursor == nil {
		return rpc.Errorf(rpc.CodeInternal, "CommitCursor succeeded without a cursor")
	}
	writeJSON(w, http.StatusOK, rpc.CommitCursorResponse{Cursor: CursorFromFSM(*res.Cursor), AppliedAt: FSMTime(res.Clock)})
	return nil
}

// handleCursors lists the job's cursors, at the leader after a read
// barrier.
func (s *Handler) handleCursors(w http.ResponseWriter, r *http.Request) error {
	if err := s.b.ReadBarrier(r.Context()); err != nil {
		return readError(err)
	}
	job := jobOf(r)
	list, gen, ok := s.b.FSM().Cursors(job)
	switch {
	case !ok && job == fsm.DefaultJob:
		gen = 1
	case !ok:
		return rpc.Errorf(rpc.CodeUnknownJob, "no job %q", job)
	}
	out := rpc.ListCursorsResponse{Job: job, Generation: gen, Cursors: make([]rpc.CursorInfo, len(list))}
	for i, c := range list {
		out.Cursors[i] = CursorFromFSM(c)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// handleCursor shows one cursor with its partly consumed tasks.
func (s *Handler) handleCursor(w http.ResponseWriter, r *http.Request) error {
	id, err := cursorParam(r)
	if err != nil {
		return err
	}
	if err := s.b.ReadBarrier(r.Context()); err != nil {
		return readError(err)
	}
	job := jobOf(r)
	info, tasks, err := s.b.FSM().Cursor(job, id)
	switch {
	case errors.Is(err, fsm.ErrUnknownJob) && job != fsm.DefaultJob:
		return rpc.Errorf(rpc.CodeUnknownJob, "no job %q", job)
	case err != nil:
		return rpc.Errorf(rpc.CodeUnknownCursor, "job %q has no cursor %d", job, id)
	}
	out := rpc.CursorResponse{Job: job, Cursor: CursorFromFSM(info), Tasks: make([]rpc.CursorTask, len(tasks))}
	for i, t := range tasks {
		out.Tasks[i] = rpc.CursorTask{Task: t.Task, Consumed: t.Consumed}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// handleRestoreCursor puts the job's dispatch back to a cursor.
func (s *Handler) handleRestoreCursor(w http.ResponseWriter, r *http.Request) error {
	id, err := cursorParam(r)
	if err != nil {
		return err
	}
	var in rpc.RestoreCursorRequest
	req, err := s.readWriteEmpty(w, r, &in)
	if err != nil {
		return err
	}
	res, err := s.apply(r, req, &fsm.RestoreCursor{ID: id})
	if err != nil {
		return err
	}
	if res.Cursor == nil {
		return rpc.Errorf(rpc.CodeInternal, "RestoreCursor succeeded without a cursor")
	}
	writeJSON(w, http.StatusOK, rpc.RestoreCursorResponse{Cursor: CursorFromFSM(*res.Cursor), Generation: res.Generation,
		Revoked: res.Recorded, AppliedAt: FSMTime(res.Clock)})
	return nil
}

// handleDeleteCursor deletes a cursor.
func (s *Handler) handleDeleteCursor(w http.ResponseWriter, r *http.Request) error {
	id, err := cursorParam(r)
	if err != nil {
		return err
	}
	var in struct{}
	req, err := s.readWriteEmpty(w, r, &in)
	if err != nil {
		return err
	}
	res, err := s.apply(r, req, &fsm.DeleteCursor{ID: id})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rpc.DeleteCursorResponse{Deleted: !res.Ignored, AppliedAt: FSMTime(res.Clock)})
	return nil
}

// cursorParam reads the cursor id of the path.
func cursorParam(r *http.Request) (uint64, error) { return idParam(r, rpc.CursorParam, "cursor") }

// progressToFSM checks progress entries and converts them.
func progressToFSM(in []rpc.TaskProgress) ([]fsm.TaskProgress, error) {
	if len(in) > rpc.MaxProgress {
		return nil, invalidf("%d progress entries: at most %d", len(in), rpc.MaxProgress)
	}
	out := make([]fsm.TaskProgress, len(in))
	for i, p := range in {
		if p.Meta.ID < 1 || p.Meta.ID > math.MaxInt32 {
			return nil, invalidf("progress %d: task id %d out of range [1, %d]", i, p.Meta.ID, math.MaxInt32)
		}
		if p.Meta.Epoch < 0 || p.Meta.Epoch > fsm.MaxEpoch {
			return nil, invalidf("progress %d: task epoch %d out of range [0, %d]", i, p.Meta.Epoch, int64(fsm.MaxEpoch))
		}
		if p.Consumed < 0 || p.Consumed > math.MaxUint32 {
			return nil, invalidf("progress %d: consumed %d out of range [0, %d]", i, p.Consumed, uint32(math.MaxUint32))
		}
		out[i] = fsm.TaskProgress{Meta: TaskMetaToFSM(p.Meta), Consumed: p.Consumed}
	}
	return out, nil
}

// CursorFromFSM converts a cursor's description.
func CursorFromFSM(c fsm.CursorInfo) rpc.CursorInfo {
	return rpc.CursorInfo{ID: c.ID, Step: c.Step, Pass: c.Pass, Tasks: c.Tasks, Finished: c.Finished, InFlight: c.InFlight,
		Records: c.Records, Generation: c.Generation, Bytes: c.Bytes, CreatedAt: FSMTime(c.Created)}
}
