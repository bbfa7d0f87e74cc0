package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/raftmaster/raftmaster/internal/chaos/history"
	"github.com/raftmaster/raftmaster/rpc"
)

// Sessions in the workload. Most trainers lease their tasks under a
// session of sessionTTL (client.WithSessionTTL); one per job goes without
// (client.WithoutSession), so that leases with deadlines stay covered. A
// trainer under a session stalls now and then right after it leased a
// task, for two to four TTLs: paused, as a stopped process (its requests
// and answers wait, keep-alives included), or cut off from the cluster
// (its requests fail while its call retries). Its session then ends, and
// the task goes back to others, unless a keep-alive gets through. Faults
// end sessions too: a leader isolated from the others answers keep-alives
// that its successor never hears of.
const (
	sessionTTL = time.Second
	// stallMin and stallMax bound a stall; stallGapMin and stallGapMax
	// how long a trainer works between two stalls.
	stallMin, stallMax       = 2 * sessionTTL, 4 * sessionTTL
	stallGapMin, stallGapMax = 4 * time.Second, 12 * time.Second
)

// Stall modes (history.Op.Data of a history.Stall).
const (
	stallPause = "pause"
	stallCut   = "cut"
)

// errCutOff is what an actor that is cut off sees of its requests.
var errCutOff = errors.New("chaos: this trainer is cut off from the cluster")

// gate stalls one actor's requests: while it is paused, requests and
// answers wait; while it is cut off, they fail.
type gate struct {
	mu     sync.Mutex
	mode   string        // "", stallPause or stallCut
	resume chan struct{} // closed when the stall ends
}

// stall begins a stall of mode.
func (g *gate) stall(mode string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mode, g.resume = mode, make(chan struct{})
}

// end ends the stall, if any.
func (g *gate) end() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mode != "" {
		g.mode = ""
		close(g.resume)
	}
}

// pass waits while the actor is paused, and fails while it is cut off.
func (g *gate) pass(ctx context.Context) error {
	g.mu.Lock()
	mode, resume := g.mode, g.resume
	g.mu.Unlock()
	switch mode {
	case stallPause:
		select {
		case <-resume:
		case <-ctx.Done():
			return ctx.Err()
		}
	case stallCut:
		return errCutOff
	}
	return nil
}

type gatedTransport struct {
	base http.RoundTripper
	g    *gate
}

// RoundTrip sends req once the actor may, and hands the answer over once
// it may: an answer that comes while the actor is cut off is lost.
func (t gatedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.g.pass(req.Context()); err != nil {
		return nil, err
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if err := t.g.pass(req.Context()); err != nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil, err
	}
	return resp, nil
}

// sessionWire records what one actor's client does with its sessions, as
// the cluster answered it on the wire: each session opened
// (history.OpenSession), each keep-alive answered alive or
// session_expired (history.KeepAlive), and each attempt of a write under
// a session refused session_expired (history.SessionRefused), which
// includes the attempts the client went past, opening a new session. The
// cluster also refuses so a request whose de-duplication identity is bound
// to another session that has ended, with the same answer; the client
// never sends one, as the writes under a session use identities of that
// session alone, so a refusal is of the session the request named.
type sessionWire struct {
	base   http.RoundTripper
	rec    *history.Recorder
	client int
	job    string
}

// sessionCall classifies a request: an opening, a keep-alive of a session,
// a write under a session, or none ("").
func sessionCall(req *http.Request) (kind history.Kind, session uint64) {
	p := req.URL.Path
	switch {
	case req.Method != http.MethodPost:
	case p == rpc.PathSessions:
		return history.OpenSession, 0
	case strings.HasPrefix(p, rpc.PathSessions+"/") && strings.HasSuffix(p, "/keepalive"):
		id, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(p, rpc.PathSessions+"/"), "/keepalive"), 10, 64)
		if err == nil {
			return history.KeepAlive, id
		}
	default:
		if id, err := strconv.ParseUint(req.Header.Get(rpc.HeaderSession), 10, 64); err == nil && id != 0 {
			return history.SessionRefused, id
		}
	}
	return "", 0
}

// RoundTrip sends req and records what its answer says of a session.
func (t sessionWire) RoundTrip(req *http.Request) (*http.Response, error) {
	kind, session := sessionCall(req)
	if kind == "" {
		return t.base.RoundTrip(req)
	}
	invoke := t.rec.Now()
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	ret := t.rec.Now()
	switch {
	case resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusGone:
		return resp, nil // redirects, unavailability: nothing decided
	case resp.StatusCode == http.StatusOK && kind == history.SessionRefused:
		return resp, nil // a write applied: its operation records it
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	op := history.Op{Client: t.client, Job: t.job, Kind: kind, Session: session, Invoke: invoke, Return: ret}
	if resp.StatusCode == http.StatusGone {
		var e rpc.Error
		if json.Unmarshal(body, &e) != nil || e.Code != rpc.CodeSessionExpired {
			return resp, nil
		}
		if kind == history.OpenSession {
			return resp, nil
		}
		op.Code = e.Code
		if kind == history.SessionRefused {
			op.Path = req.URL.Path
		}
		t.rec.Add(op)
		return resp, nil
	}
	switch kind {
	case history.OpenSession:
		var out rpc.OpenSessionResponse
		if json.Unmarshal(body, &out) != nil || out.Session == 0 {
			return resp, nil
		}
		op.Session, op.AppliedAt = out.Session, fsmTime(out.AppliedAt)
	}
	t.rec.Add(op)
	return resp, nil
}

// stall stalls the actor in mode for d and records it. A pause stops the
// actor too; a cut lets it go on (its calls retry until the cut ends, at
// d, or when ctx is done).
func (a *actor) stall(ctx context.Context, mode string, d time.Duration) {
	start := a.w.rec.Now()
	a.gate.stall(mode)
	a.w.logf("actor %d (job %s): %s for %v, under session %d", a.id, a.job, mode, d, a.cl.Session())
	session := a.cl.Session()
	done := func() {
		a.gate.end()
		a.w.rec.Add(history.Op{Client: a.id, Job: a.job, Kind: history.Stall, Session: session, Data: mode,
			Invoke: start, Return: a.w.rec.Now()})
	}
	if mode == stallPause {
		sleep(ctx, d)
		done()
		return
	}
	a.w.wg.Add(1)
	go func() {
		defer a.w.wg.Done()
		sleep(ctx, d)
		done()
	}()
}

// SessionReport counts what a run did with sessions.
type SessionReport struct {
	// Opened counts the sessions opened; Ended those that the cluster
	// answered session_expired for (a keep-alive or a write).
	Opened int `json:"opened"`
	Ended  int `json:"ended"`
	// KeepAlives counts the keep-alives answered, KeepAlivesExpired those
	// answered session_expired.
	KeepAlives        int `json:"keep_alives"`
	KeepAlivesExpired int `json:"keep_alives_expired"`
	// Refused counts the attempts of writes refused session_expired.
	Refused int `json:"refused"`
	// Stalls counts the trainers' stalls; TaskOps the task operations
	// made under a session, LeaseOps those made without one.
	Stalls   int `json:"stalls"`
	TaskOps  int `json:"task_ops"`
	LeaseOps int `json:"lease_ops"`
}

// sessionReport counts the session operations of ops.
func sessionReport(ops []history.Op) SessionReport {
	var r SessionReport
	opened, ended := map[uint64]bool{}, map[uint64]bool{}
	for _, op := range ops {
		switch op.Kind {
		case history.OpenSession:
			opened[op.Session] = true
		case history.KeepAlive:
			r.KeepAlives++
			if op.Code == rpc.CodeSessionExpired {
				r.KeepAlivesExpired++
			}
		case history.SessionRefused:
			r.Refused++
		case history.Stall:
			r.Stalls++
		case history.GetTask, history.TaskFinished, history.TaskFailed, history.FinishAndGet:
			if op.Session != 0 {
				r.TaskOps++
			} else {
				r.LeaseOps++
			}
		}
		if op.Session != 0 && op.Code == rpc.CodeSessionExpired {
			ended[op.Session] = true
		}
	}
	r.Opened, r.Ended = len(opened), len(ended)
	return r
}

// add adds o's counts to r.
func (r *SessionReport) add(o SessionReport) {
	r.Opened += o.Opened
	r.Ended += o.Ended
	r.KeepAlives += o.KeepAlives
	r.KeepAlivesExpired += o.KeepAlivesExpired
	r.Refused += o.Refused
	r.Stalls += o.Stalls
	r.TaskOps += o.TaskOps
	r.LeaseOps += o.LeaseOps
}
