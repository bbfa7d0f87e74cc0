package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/rpc"
)

// codeInvalid is the wire code of bad input, fsm.CodeInvalid's name.
var codeInvalid = fsm.CodeInvalid.String()

// invalidf returns a 400 "invalid" error.
func invalidf(format string, args ...any) *rpc.Error { return rpc.Errorf(codeInvalid, format, args...) }

// invalidFromFSM returns the 400 "invalid" error of a rule of the state
// machine that input broke (an fsm.ErrInvalid), without its prefix.
func invalidFromFSM(err error) *rpc.Error {
	return invalidf("%s", strings.TrimPrefix(err.Error(), fsm.ErrInvalid.Error()+": "))
}

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

// fail writes err as a JSON error. A request that needs the leader is
// redirected to it, waiting for one during an election (see redirect);
// other backend errors become a 503; anything unexpected is a 500.
func (s *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	var e *rpc.Error
	switch {
	case errors.As(err, &e):
	case errors.Is(err, ErrNotLeader), errors.Is(err, ErrNoLeader), errors.Is(err, ErrNotReady):
		s.redirect(w, r)
		return
	case errors.Is(err, ErrUnknownOutcome), errors.Is(err, context.DeadlineExceeded):
		// No Retry-After: another node may already lead, and the client
		// should ask it at once.
		e = rpc.Errorf(rpc.CodeUnknownOutcome, "the write may or may not have applied; retry with the same request id: %v", err)
		writeJSON(w, http.StatusServiceUnavailable, e)
		return
	case errors.Is(err, context.Canceled), errors.Is(err, fsm.ErrUpgradePending):
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

// redirect answers 307 to the same path and query on the leader's API.
// During an election, or while the leader takes over, it first waits, up
// to Config.LeaderWait, for a leader that serves: the client then follows
// the redirect as soon as there is one, instead of sleeping through a
// backoff. A leader that became ready here redirects to itself. Only when
// the wait runs out does it answer 503 no_leader.
func (s *Handler) redirect(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.LeaderWait)
	defer cancel()
	t := time.NewTicker(leaderPoll)
	defer t.Stop()
	unreachable := strings.Split(r.Header.Get(rpc.HeaderUnreachable), ",")
	for {
		l, ok := s.b.Leader()
		serves := l.ID == s.b.NodeID() && s.b.Ready() ||
			l.ID != s.b.NodeID() && !slices.Contains(unreachable, l.APIAddr)
		if ok && l.APIAddr != "" && serves {
			loc := baseURL(requestScheme(r), l.APIAddr) + r.URL.RequestURI()
			w.Header().Set("Location", loc)
			if s.cfg.Observer != nil {
				s.cfg.Observer.Redirect()
			}
			writeJSON(w, http.StatusTemporaryRedirect, rpc.Errorf(rpc.CodeNotLeader, "the leader is %s at %s", l.ID, l.APIAddr))
			return
		}
		select {
		case <-t.C:
			continue
		case <-ctx.Done():
		}
		break
	}
	w.Header().Set("Retry-After", "1")
	writeJSON(w, http.StatusServiceUnavailable, rpc.Errorf(rpc.CodeNoLeader, "no leader that serves is known after %v; retry", s.cfg.LeaderWait))
}

// leaderPoll is how often a request waiting for a leader looks again.
const leaderPoll = 10 * time.Millisecond

// baseURL turns an API address into a URL prefix: "host:port" takes
// scheme, an address with a scheme is used as it is, except that an
// "http://" one is upgraded when scheme is https: a node that serves HTTPS
// never points a client, or sends a token, to plain HTTP.
func baseURL(scheme, addr string) string {
	if rest, ok := strings.CutPrefix(addr, "http://"); ok && scheme == "https" {
		addr = rest
	}
	if strings.Contains(addr, "://") {
		return strings.TrimSuffix(addr, "/")
	}
	return scheme + "://" + addr
}

// requestScheme is the scheme r came in over. The nodes of a cluster all
// serve the same one, so that a redirect from an HTTPS node points to
// HTTPS and the nodes ask each other over it too.
func requestScheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
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
