package httpapi

import (
	"net/http"

	"github.com/raftmaster/raftmaster/fsm"
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
	ctx := r.Context()
	c.Hdr().Request = req
	res, err := s.b.Apply(ctx, c)
	if err != nil {
		return nil, err
	}
	if s.cfg.Observer != nil {
		s.cfg.Observer.Applied(c, res)
	}
	if err := resultError(res); err != nil {
		return nil, err
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
// token (ownerOf), which binds a new client id to the token.
func (s *Handler) requestID(r *http.Request) (fsm.RequestID, error) {
	req, err := parseRequestID(r)
	if err == nil && !req.IsZero() {
		req.Owner = s.ownerOf(r)
	}
	return req, err
}
