package httpapi

import (
	"net/http"
	"strconv"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/rpc"
)

// apply stamps req and the request's job into c, proposes it and returns
// the result, or the error of a backend failure or an FSM outcome other
// than CodeOK.
func (s *Handler) apply(r *http.Request, req fsm.RequestID, c fsm.Command) (*fsm.Result, error) {
	c.Hdr().Job = jobOf(r)
	return s.applyCluster(r, req, c)
}

// applyCluster is apply for a cluster-wide command, which names no job.
func (s *Handler) applyCluster(r *http.Request, req fsm.RequestID, c fsm.Command) (*fsm.Result, error) {
	res, err := s.propose(r, req, c)
	if err != nil {
		return nil, err
	}
	if err := resultError(res); err != nil {
		return nil, err
	}
	return res, nil
}

// propose stamps req into c, proposes it and returns the FSM's result,
// whatever its outcome, or the error of a backend failure. The session
// of the request's HeaderSession goes into c's header, with ParamAttach
// on a register write that stores keys; the leader's keeper counts a
// write under a session as a keep-alive.
func (s *Handler) propose(r *http.Request, req fsm.RequestID, c fsm.Command) (*fsm.Result, error) {
	ctx := r.Context()
	h := c.Hdr()
	h.Request = req
	session, err := parseSession(r)
	if err != nil {
		return nil, err
	}
	h.Session = session
	if storesKeys(c) {
		if h.Attach, err = parseAttach(r, session); err != nil {
			return nil, err
		}
	}
	res, err := s.b.Apply(ctx, c)
	if err != nil {
		return nil, err
	}
	if session != 0 && res.Code != fsm.CodeSessionExpired {
		if k, ok := s.leaderKeeper(); ok {
			k.Touch(session)
		}
	}
	if s.cfg.Observer != nil {
		s.cfg.Observer.Applied(c, res)
	}
	return res, nil
}

// readWrite parses the request id and decodes the body of a write with the
// default body limit.
func (s *Handler) readWrite(w http.ResponseWriter, r *http.Request, v any) (fsm.RequestID, error) {
	return s.readWriteLimit(w, r, v, s.cfg.Limits.MaxBodyBytes)
}

func (s *Handler) readWriteLimit(w http.ResponseWriter, r *http.Request, v any, limit int64) (fsm.RequestID, error) {
	req, err := s.requestID(r)
	if err != nil {
		return req, err
	}
	return req, decodeBody(w, r, limit, v, false)
}

// readWriteEmpty is readWrite for a write whose body may be empty.
func (s *Handler) readWriteEmpty(w http.ResponseWriter, r *http.Request, v any) (fsm.RequestID, error) {
	req, err := s.requestID(r)
	if err != nil {
		return req, err
	}
	return req, decodeBody(w, r, s.cfg.Limits.MaxBodyBytes, v, true)
}

// requestID parses r's request id and stamps it with the owner of r's
// token (ownerOf), which binds a new client id to the token. It checks the
// session header too, before the body is read: a write under a session
// needs a request id, and a cluster at protocol level 6.
func (s *Handler) requestID(r *http.Request) (fsm.RequestID, error) {
	req, err := parseRequestID(r)
	if err != nil {
		return req, err
	}
	session, err := parseSession(r)
	if err != nil {
		return req, err
	}
	if session != 0 {
		if req.IsZero() {
			return req, invalidf("a write under a session (%s) needs a request id (%s)", rpc.HeaderSession, rpc.HeaderRequestID)
		}
		if err := s.sessionsAllowed(); err != nil {
			return req, err
		}
	}
	if !req.IsZero() {
		req.Owner = s.ownerOf(r)
	}
	return req, nil
}

// parseSession reads the HeaderSession header: the session a write is
// made under, in decimal; 0 for none.
func parseSession(r *http.Request) (uint64, error) {
	v := r.Header.Get(rpc.HeaderSession)
	if v == "" {
		return 0, nil
	}
	id, err := strconv.ParseUint(v, 10, 64)
	if err != nil || id == 0 {
		return 0, invalidf("%s %q: want a session id, a positive decimal integer", rpc.HeaderSession, v)
	}
	return id, nil
}

// parseAttach reads the ParamAttach query parameter of a register write,
// which needs a session.
func parseAttach(r *http.Request, session uint64) (bool, error) {
	v := r.URL.Query().Get(rpc.ParamAttach)
	if v == "" {
		return false, nil
	}
	attach, err := strconv.ParseBool(v)
	if err != nil {
		return false, invalidf("%s %q is not a boolean", rpc.ParamAttach, v)
	}
	if attach && session == 0 {
		return false, invalidf("%s=true attaches keys to the session of the %s header, which the request lacks", rpc.ParamAttach, rpc.HeaderSession)
	}
	return attach, nil
}

// storesKeys reports whether c is a register write that stores keys,
// which may be attached to its session (the endpoints that take
// ParamAttach).
func storesKeys(c fsm.Command) bool {
	switch c.(type) {
	case *fsm.KVCompareAndSet, *fsm.KVCompareValue, *fsm.KVAdd, *fsm.KVAppend, *fsm.KVMultiSet:
		return true
	}
	return false
}
