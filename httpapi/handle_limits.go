package httpapi

import (
	"fmt"
	"net/http"
	"time"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/rpc"
)

// handleLimits answers the limits in effect, linearizably unless ?stale.
func (s *Handler) handleLimits(w http.ResponseWriter, r *http.Request) error {
	if !stale(r) {
		if err := s.b.ReadBarrier(r.Context()); err != nil {
			return readError(err)
		}
	}
	writeJSON(w, http.StatusOK, LimitsFromFSM(s.b.FSM().Limits()))
	return nil
}

// handleLimitsSet changes the limits the request names and keeps the
// others: it proposes the whole record, as the state holds it after a read
// barrier with the named fields replaced. One change at a time runs on a
// node, so that two changes of different limits do not undo each other.
// A cluster below protocol level 2 is refused: each of its new leaders
// still proposes its own flags, which would undo the change at the next
// fail-over.
func (s *Handler) handleLimitsSet(w http.ResponseWriter, r *http.Request) error {
	var in rpc.LimitsRequest
	req, err := s.readWrite(w, r, &in)
	if err != nil {
		return err
	}
	if in == (rpc.LimitsRequest{}) {
		return invalidf("no limit given: name at least one of max_jobs, max_job_tasks, max_job_chunks, max_job_groups, " +
			"max_job_group_bytes, max_state_bytes, job_ttl, max_job_kv_keys and max_kv_value_bytes")
	}
	s.limitsMu.Lock()
	defer s.limitsMu.Unlock()
	if err := s.b.ReadBarrier(r.Context()); err != nil {
		return readError(err)
	}
	f := s.b.FSM()
	if level := f.Protocol(); level < fsm.Protocol2 {
		return fmt.Errorf("%w: the cluster is at protocol level %d until every node runs a release that knows level %d; "+
			"until then each new leader sets the limits from its own flags", fsm.ErrUpgradePending, level, fsm.Protocol2)
	}
	l := f.LimitsRecord()
	setLimit(&l.MaxJobs, in.MaxJobs)
	setLimit(&l.MaxJobTasks, in.MaxJobTasks)
	setLimit(&l.MaxJobChunks, in.MaxJobChunks)
	setLimit(&l.MaxJobGroups, in.MaxJobGroups)
	setLimit(&l.MaxJobGroupBytes, in.MaxJobGroupBytes)
	setLimit(&l.MaxStateBytes, in.MaxStateBytes)
	if in.JobTTL != nil {
		l.JobTTL = time.Duration(*in.JobTTL)
	}
	setLimit(&l.MaxJobKVKeys, in.MaxJobKVKeys)
	setLimit(&l.MaxKVValueBytes, in.MaxKVValueBytes)
	if err := l.Check(); err != nil {
		return invalidFromFSM(err)
	}
	if _, err := s.applyCluster(r, req, &fsm.SetLimits{Limits: l}); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, LimitsFromFSM(f.Limits()))
	return nil
}

// setLimit sets *field to *v when the request gives v.
func setLimit[T int | int64](field *T, v *T) {
	if v != nil {
		*field = *v
	}
}
