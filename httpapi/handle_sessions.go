package httpapi

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/auth"
	"github.com/raftmaster/raftmaster/internal/sessions"
	"github.com/raftmaster/raftmaster/rpc"
)

// MaxKeepAliveProgress bounds the progress entries of one keep-alive: the
// tasks a session reports on at once.
const MaxKeepAliveProgress = 4096

// keepAliveEntryBytes is what one progress entry may take in a JSON body,
// its job name's every byte escaped.
const keepAliveEntryBytes = 6*fsm.MaxJobNameLen + 128

// handleOpenSession opens a session for the caller, of the TTL it asks
// for or the server's default (Config.SessionTTL).
func (s *Handler) handleOpenSession(w http.ResponseWriter, r *http.Request) error {
	var in rpc.OpenSessionRequest
	req, err := s.readWriteEmpty(w, r, &in)
	if err != nil {
		return err
	}
	if req.IsZero() {
		return invalidf("opening a session needs a request id (%s)", rpc.HeaderRequestID)
	}
	if r.Header.Get(rpc.HeaderSession) != "" {
		return invalidf("a session is not opened under a session: send no %s", rpc.HeaderSession)
	}
	if err := s.sessionsAllowed(); err != nil {
		return err
	}
	if _, ok := s.b.(SessionBackend); !ok {
		return noSessions()
	}
	ttl := time.Duration(in.TTL)
	if ttl == 0 {
		ttl = s.cfg.SessionTTL
	}
	if err := checkDuration("ttl", ttl, fsm.MinSessionTTL, fsm.MaxSessionTTL); err != nil {
		return err
	}
	res, err := s.applyCluster(r, req, &fsm.OpenSession{TTL: ttl})
	if err != nil {
		return err
	}
	if res.Session == 0 {
		return rpc.Errorf(rpc.CodeInternal, "OpenSession succeeded without a session")
	}
	// A retry is answered the session its first attempt opened, without
	// the TTL: the session's own, while it is open.
	if res.Lease == 0 {
		res.Lease = ttl
		if open, _, ok := s.b.FSM().SessionOpen(res.Session); ok {
			res.Lease = open
		}
	}
	writeJSON(w, http.StatusOK, rpc.OpenSessionResponse{Session: res.Session, TTL: rpc.Duration(res.Lease), AppliedAt: FSMTime(res.Clock)})
	return nil
}

// handleSessionKeepAlive restarts a session's TTL at the leader's keeper,
// with the progress of the tasks it holds. Nothing is proposed.
func (s *Handler) handleSessionKeepAlive(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionParam(r)
	if err != nil {
		return err
	}
	if err := s.sessionsAllowed(); err != nil {
		return err
	}
	k, err := s.keeper()
	if err != nil {
		return err
	}
	var in rpc.KeepAliveRequest
	limit := s.cfg.Limits.MaxBodyBytes + MaxKeepAliveProgress*keepAliveEntryBytes
	if err := decodeBody(w, r, limit, &in, true); err != nil {
		return err
	}
	if n := len(in.Progress); n > MaxKeepAliveProgress {
		return invalidf("a keep-alive reports on %d tasks, at most %d", n, MaxKeepAliveProgress)
	}
	for i := range in.Progress {
		if err := checkProgress(&in.Progress[i]); err != nil {
			return err
		}
	}
	ttl, err := k.KeepAlive(id, s.ownerOf(r), in.Progress)
	if err != nil {
		return sessionError(id, err)
	}
	writeJSON(w, http.StatusOK, rpc.KeepAliveResponse{TTL: rpc.Duration(ttl)})
	return nil
}

// checkProgress checks a progress entry of a keep-alive, naming the
// default job where it names none.
func checkProgress(p *rpc.SessionProgress) error {
	if p.Job == "" {
		p.Job = fsm.DefaultJob
	}
	if err := fsm.ValidateJobName(p.Job); err != nil {
		return invalidFromFSM(err)
	}
	if p.Task < 1 || p.Task > math.MaxInt32 {
		return invalidf("progress of task %d: out of range [1, %d]", p.Task, math.MaxInt32)
	}
	if p.Epoch < 0 || p.Epoch > fsm.MaxEpoch {
		return invalidf("progress of task %d: epoch %d out of range [0, %d]", p.Task, p.Epoch, int64(fsm.MaxEpoch))
	}
	if p.Records < 0 {
		return invalidf("progress of task %d: %d records", p.Task, p.Records)
	}
	return nil
}

// sessionError turns the keeper's refusals into their wire codes.
func sessionError(id uint64, err error) error {
	switch {
	case errors.Is(err, fsm.ErrSessionExpired):
		return rpc.Errorf(rpc.CodeSessionExpired, "session %d: %v; open a new one", id, rpc.ErrSessionExpired)
	case errors.Is(err, fsm.ErrForeignClient):
		return rpc.Errorf(rpc.CodeForeignClient, "session %d: %v", id, rpc.ErrForeignClient)
	case errors.Is(err, sessions.ErrStopped):
		// The keeper's term ended: another node leads, or will.
		return fmt.Errorf("%w: %v", ErrNotLeader, err)
	}
	return err
}

// handleCloseSession proposes the end of a session. A token closes its
// own sessions, an operator's any: an operator's request carries no
// owner, which the state machine would check the session's against.
func (s *Handler) handleCloseSession(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionParam(r)
	if err != nil {
		return err
	}
	var in struct{}
	req, err := s.readWriteEmpty(w, r, &in)
	if err != nil {
		return err
	}
	if req.IsZero() {
		return invalidf("closing a session needs a request id (%s)", rpc.HeaderRequestID)
	}
	if err := s.sessionsAllowed(); err != nil {
		return err
	}
	if g, ok := grantOf(r); ok && g.Role == auth.Operator {
		req.Owner = [16]byte{}
	}
	res, err := s.applyCluster(r, req, &fsm.CloseSession{ID: id})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rpc.CloseSessionResponse{Closed: !res.Ignored, AppliedAt: FSMTime(res.Clock)})
	return nil
}

// handleSessions lists the open sessions, at the leader after a read
// barrier, with what its keeper says of each.
func (s *Handler) handleSessions(w http.ResponseWriter, r *http.Request) error {
	if err := s.b.ReadBarrier(r.Context()); err != nil {
		return readError(err)
	}
	if err := s.sessionsAllowed(); err != nil {
		return err
	}
	k, err := s.keeper()
	if err != nil {
		return err
	}
	f := s.b.FSM()
	infos := f.Sessions()
	now := max(time.Now().UnixNano(), f.Clock())
	out := rpc.SessionsResponse{Sessions: make([]rpc.Session, len(infos))}
	for i, info := range infos {
		remaining, ok := k.Remaining(info.ID)
		if !ok {
			// Not seen by the keeper yet, which gives it its TTL
			// when it is.
			remaining = info.TTL
		}
		ss := rpc.Session{Session: info.ID, TTL: rpc.Duration(info.TTL), Remaining: rpc.Duration(max(remaining, 0)),
			Opened: FSMTime(info.Opened), Age: rpc.Duration(max(now-info.Opened, 0)), Keys: info.Keys}
		for _, t := range info.Tasks {
			ss.Tasks = append(ss.Tasks, rpc.SessionTask{Job: t.Job, Meta: TaskMetaFromFSM(t.Meta)})
		}
		out.Sessions[i] = ss
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// sessionParam reads the session id of the path.
func sessionParam(r *http.Request) (uint64, error) { return idParam(r, rpc.SessionParam, "session") }

// idParam reads the id of a path's parameter name, a positive decimal
// integer; what names the id's kind in the error.
func idParam(r *http.Request, name, what string) (uint64, error) {
	v := r.PathValue(name)
	id, err := strconv.ParseUint(v, 10, 64)
	if err != nil || id == 0 {
		return 0, invalidf("%s %q: want a %s id, a positive decimal integer", what, v, what)
	}
	return id, nil
}

// sessionsAllowed refuses, on a leader whose cluster is below protocol
// level 6, what needs sessions: fsm.ErrUpgradePending, answered
// unavailable. A node that does not lead sends the request to the leader
// rather than judge by its own view of the level.
func (s *Handler) sessionsAllowed() error {
	level := s.b.FSM().Protocol()
	if level >= fsm.Protocol6 {
		return nil
	}
	if !s.leads() {
		return ErrNotLeader
	}
	return fmt.Errorf("%w: sessions need protocol level %d, and the cluster is at %d until every node runs a release that knows it",
		fsm.ErrUpgradePending, fsm.Protocol6, level)
}

// leads reports whether this node knows itself the leader.
func (s *Handler) leads() bool {
	l, ok := s.b.Leader()
	return ok && l.ID == s.b.NodeID()
}

// leaderKeeper returns the leader's session keeper, false when this node
// does not lead, has not taken over yet, or its backend keeps no sessions.
func (s *Handler) leaderKeeper() (SessionKeeper, bool) {
	sb, ok := s.b.(SessionBackend)
	if !ok {
		return nil, false
	}
	return sb.Sessions()
}

// keeper returns the leader's session keeper for a request that needs
// it. A node that does not lead redirects (ErrNotLeader); a leader that
// has not taken over its sessions yet answers unavailable, to be retried;
// one whose backend keeps no sessions answers noSessions.
func (s *Handler) keeper() (SessionKeeper, error) {
	sb, ok := s.b.(SessionBackend)
	if !ok {
		return nil, noSessions()
	}
	if k, ok := sb.Sessions(); ok {
		return k, nil
	}
	if !s.leads() {
		return nil, ErrNotLeader
	}
	return nil, rpc.Errorf(rpc.CodeUnavailable, "the leader has not taken over the sessions yet; retry")
}

// noSessions is the answer of a server whose backend keeps no sessions:
// not_found, as from a server of a release before sessions, which a
// client does not retry; it carries on without a session.
func noSessions() error {
	return rpc.Errorf(rpc.CodeNotFound, "this server keeps no sessions")
}

// The leader's tracker is the keeper both backends hand out.
var _ SessionKeeper = (*sessions.Tracker)(nil)
