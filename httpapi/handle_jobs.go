package httpapi

import (
	"net/http"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/rpc"
)

// jobOf returns the job a request addresses: the {job} of its path, or
// fsm.DefaultJob on the routes outside /v1/jobs/{job}/. checkJob has
// checked the name.
func jobOf(r *http.Request) string {
	if job := r.PathValue(rpc.JobParam); job != "" {
		return job
	}
	return fsm.DefaultJob
}

// checkJob answers invalid, before fn runs, for a request whose {job} is
// not a valid job name.
func checkJob(fn handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if job := r.PathValue(rpc.JobParam); job != "" {
			if err := fsm.ValidateJobName(job); err != nil {
				return invalidFromFSM(err)
			}
		}
		return fn(w, r)
	}
}

// handleJobs lists every job. Without ?stale the read is linearizable
// (the leader answers after a read barrier), so that a job just created or
// deleted shows as such.
func (s *Handler) handleJobs(w http.ResponseWriter, r *http.Request) error {
	if !stale(r) {
		if err := s.b.ReadBarrier(r.Context()); err != nil {
			return readError(err)
		}
	}
	f := s.b.FSM()
	out := rpc.JobsResponse{Jobs: jobsWithDatasets(f), Limits: LimitsFromFSM(f.Limits()), StateBytes: f.Stats(fsm.DefaultJob).StateBytes}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// jobsWithDatasets summarises every job with its dataset's counts and
// settings (not its paths).
func jobsWithDatasets(f *fsm.FSM) []rpc.Job {
	infos := f.Jobs()
	out := make([]rpc.Job, len(infos))
	for i, j := range infos {
		out[i] = JobFromFSM(j)
		if d, ok := f.Dataset(j.Name, 0); ok {
			out[i] = WithDataset(out[i], d)
		}
	}
	return out
}

// handleJob describes one job, linearizably unless ?stale.
func (s *Handler) handleJob(w http.ResponseWriter, r *http.Request) error {
	if !stale(r) {
		if err := s.b.ReadBarrier(r.Context()); err != nil {
			return readError(err)
		}
	}
	job := jobOf(r)
	info, ok := s.b.FSM().Job(job)
	switch {
	case !ok && job == fsm.DefaultJob:
		// The plain routes always address the default job: until it
		// holds something, it is empty rather than unknown.
		info = fsm.JobInfo{Name: job}
	case !ok:
		return rpc.Errorf(rpc.CodeUnknownJob, "no job %q", job)
	}
	out := JobFromFSM(info)
	if d, ok := s.b.FSM().Dataset(job, rpc.MaxJobPaths); ok {
		out = WithMixture(WithDataset(out, d), s.b.FSM().Stats(job))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// handleJobCreate creates the job of the path, empty.
func (s *Handler) handleJobCreate(w http.ResponseWriter, r *http.Request) error {
	return s.jobChange(w, r, &fsm.CreateJob{})
}

// handleJobDelete deletes the job of the path with everything it holds.
func (s *Handler) handleJobDelete(w http.ResponseWriter, r *http.Request) error {
	return s.jobChange(w, r, &fsm.DeleteJob{})
}

// jobChange proposes a create or delete of the job of the path (the
// command addresses it through its header).
func (s *Handler) jobChange(w http.ResponseWriter, r *http.Request, c fsm.Command) error {
	var in rpc.JobRequest
	req, err := s.readWriteEmpty(w, r, &in)
	if err != nil {
		return err
	}
	res, err := s.apply(r, req, c)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rpc.JobResponse{Ignored: res.Ignored})
	return nil
}
