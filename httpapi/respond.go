package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/rpc"
)

// codeInvalid is the wire code of bad input, fsm.CodeInvalid's name.
var codeInvalid = fsm.CodeInvalid.String()

// invalidf returns a 400 "invalid" error.
func invalidf(format string, args ...any) *rpc.Error { return rpc.Errorf(codeInvalid, format, args...) }

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(&rpc.Error{Code: rpc.CodeInternal, Message: "encoding the response: " + err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// resultError turns an FSM outcome into its wire error, or nil for CodeOK.
func resultError(res *fsm.Result) error {
	err := res.Err()
	if err == nil {
		return nil
	}
	code := fsm.CodeOf(err).String()
	msg := err.Error()
	if res.Code == fsm.CodeInvalid && res.Message != "" {
		msg = res.Message
	}
	e := rpc.Errorf(code, "%s", msg)
	e.AppliedAt = FSMTime(res.Clock)
	return e
}

// fail writes err as a JSON error. Backend errors become a redirect to
// the leader or a 503 with Retry-After; anything unexpected is a 500.
func (s *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	var e *rpc.Error
	switch {
	case errors.As(err, &e):
	case errors.Is(err, ErrNotLeader):
		s.redirect(w, r)
		return
	case errors.Is(err, ErrNoLeader):
		e = rpc.Errorf(rpc.CodeNoLeader, "no leader is known; retry")
	case errors.Is(err, ErrUnknownOutcome), errors.Is(err, context.DeadlineExceeded):
		e = rpc.Errorf(rpc.CodeUnknownOutcome, "the write may or may not have applied; retry with the same request id: %v", err)
	case errors.Is(err, ErrNotReady), errors.Is(err, context.Canceled):
		e = rpc.Errorf(rpc.CodeUnavailable, "%v", err)
	default:
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "error", err)
		e = rpc.Errorf(rpc.CodeInternal, "%v", err)
	}
	status := e.Status
	if status == 0 {
		status = rpc.HTTPStatus(e.Code)
	}
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, e)
}

// redirect answers 307 to the same path and query on the leader's API, or
// 503 no_leader when the leader or its address is not known.
func (s *Handler) redirect(w http.ResponseWriter, r *http.Request) {
	l, ok := s.b.Leader()
	if !ok || l.APIAddr == "" || l.ID == s.b.NodeID() {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, rpc.Errorf(rpc.CodeNoLeader, "this node is not the leader and no leader is known; retry"))
		return
	}
	loc := baseURL(l.APIAddr) + r.URL.RequestURI()
	w.Header().Set("Location", loc)
	writeJSON(w, http.StatusTemporaryRedirect, rpc.Errorf(rpc.CodeNotLeader, "the leader is %s at %s", l.ID, l.APIAddr))
}

// baseURL turns an API address into a URL prefix: "host:port" means
// plain HTTP, an address with a scheme is used as it is.
func baseURL(addr string) string {
	if strings.Contains(addr, "://") {
		return strings.TrimSuffix(addr, "/")
	}
	return "http://" + addr
}

// readError maps a ReadBarrier failure: a request that ended while waiting
// is unavailable (no outcome is in doubt for a read); the backend's
// sentinels pass through to fail.
func readError(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return rpc.Errorf(rpc.CodeUnavailable, "read barrier: %v", err)
	}
	return err
}
