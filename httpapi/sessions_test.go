package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
	"github.com/raftmaster/raftmaster/rpc"
)

// sessionPath is path (rpc.PathSession or rpc.PathSessionKeepAlive) for
// session id.
func sessionPath(path string, id uint64) string {
	return strings.Replace(path, "{"+rpc.SessionParam+"}", fmt.Sprint(id), 1)
}

// under returns the headers of a write under session id: the session and
// a request id of a new client.
func under(id uint64, header ...string) []string {
	return append(append(reqID(uuid.New(), 1), rpc.HeaderSession, fmt.Sprint(id)), header...)
}

// openSession opens a session of ttl (0: the server's default) and
// returns the answer.
func (e *env) openSession(ttl time.Duration, header ...string) rpc.OpenSessionResponse {
	e.t.Helper()
	var out rpc.OpenSessionResponse
	e.ok(rpc.PathSessions, rpc.OpenSessionRequest{TTL: rpc.Duration(ttl)}, &out, append(reqID(uuid.New(), 1), header...)...)
	if out.Session == 0 {
		e.t.Fatalf("opened session 0: %+v", out)
	}
	return out
}

// closeSession sends the close of session id.
func (e *env) closeSession(id uint64, header ...string) response {
	e.t.Helper()
	return e.do(http.MethodDelete, sessionPath(rpc.PathSession, id), nil, append(reqID(uuid.New(), 1), header...)...)
}

// sessions lists the sessions.
func (e *env) sessions(header ...string) rpc.SessionsResponse {
	e.t.Helper()
	r := e.do(http.MethodGet, rpc.PathSessions, nil, header...)
	if r.status != http.StatusOK {
		e.t.Fatalf("GET %s: %d %s", rpc.PathSessions, r.status, r.body)
	}
	var out rpc.SessionsResponse
	r.decode(e.t, &out)
	return out
}

// TestSessionOpenKeepAliveClose: a session opens with the TTL asked for,
// or the server's default, lives in the state, is kept alive at the
// keeper with its progress, is listed with what the keeper says of it, and
// closes once; then its keep-alives are answered session_expired.
func TestSessionOpenKeepAliveClose(t *testing.T) {
	e, fake := fakeEnv(t)
	client := uuid.New()
	var s1 rpc.OpenSessionResponse
	e.ok(rpc.PathSessions, rpc.OpenSessionRequest{TTL: rpc.Duration(2 * time.Second)}, &s1, reqID(client, 1)...)
	if s1.Session == 0 || s1.TTL != rpc.Duration(2*time.Second) || s1.AppliedAt.IsZero() {
		t.Fatalf("open: %+v", s1)
	}
	if info, ok := e.local.FSM().Session(s1.Session); !ok || info.TTL != 2*time.Second {
		t.Fatalf("the state's session: %+v %v", info, ok)
	}
	// A retry is answered the same session, with its TTL.
	var again rpc.OpenSessionResponse
	e.ok(rpc.PathSessions, rpc.OpenSessionRequest{TTL: rpc.Duration(2 * time.Second)}, &again, reqID(client, 1)...)
	if again.Session != s1.Session || again.TTL != s1.TTL || len(e.local.FSM().Sessions()) != 1 {
		t.Fatalf("retried open: %+v, first %+v, %d sessions", again, s1, len(e.local.FSM().Sessions()))
	}
	// No TTL, or no body: the server's default.
	s2 := e.openSession(0)
	r := e.do(http.MethodPost, rpc.PathSessions, nil, reqID(uuid.New(), 1)...)
	var s3 rpc.OpenSessionResponse
	r.decode(t, &s3)
	if r.status != http.StatusOK || s2.TTL != rpc.Duration(rpc.DefaultSessionTTL) || s3.TTL != s2.TTL || s3.Session <= s2.Session {
		t.Fatalf("default TTL: %+v; without a body %d %s", s2, r.status, r.body)
	}

	// Keep-alives go to the keeper, with their progress, the job named
	// default where they name none.
	progress := []rpc.SessionProgress{{Task: 3, Epoch: 5, Records: 120}, {Job: "other", Task: 1, Epoch: 1, Records: 7}}
	var ka rpc.KeepAliveResponse
	e.ok(sessionPath(rpc.PathSessionKeepAlive, s1.Session), rpc.KeepAliveRequest{Progress: progress}, &ka)
	n, _, got := fake.keeper.seen(s1.Session)
	progress[0].Job = fsm.DefaultJob
	if ka.TTL != rpc.Duration(2*time.Second) || n != 1 || !slices.Equal(got, progress) {
		t.Fatalf("keep-alive: %+v; the keeper saw %d with %+v", ka, n, got)
	}
	if r := e.do(http.MethodPost, sessionPath(rpc.PathSessionKeepAlive, s1.Session), nil); r.status != http.StatusOK {
		t.Fatalf("a keep-alive without a body: %d %s", r.status, r.body)
	}

	// The list: in id order, with the keeper's remaining time.
	fake.keeper.setRemaining(s1.Session, 1500*time.Millisecond)
	list := e.sessions()
	if len(list.Sessions) != 3 {
		t.Fatalf("list: %+v", list)
	}
	l1 := list.Sessions[0]
	if l1.Session != s1.Session || l1.TTL != s1.TTL || l1.Remaining != rpc.Duration(1500*time.Millisecond) ||
		!l1.Opened.Equal(s1.AppliedAt) || l1.Age < 0 || l1.Keys != 0 || len(l1.Tasks) != 0 {
		t.Fatalf("listed %+v, opened %+v", l1, s1)
	}
	if l2 := list.Sessions[1]; l2.Session != s2.Session || l2.Remaining != s2.TTL {
		t.Fatalf("second listed %+v, opened %+v", l2, s2)
	}

	// Closed once; then the close says it had ended, and keep-alives
	// are answered session_expired.
	var closed rpc.CloseSessionResponse
	r = e.closeSession(s1.Session)
	if r.decode(t, &closed); r.status != http.StatusOK || !closed.Closed || closed.AppliedAt.IsZero() {
		t.Fatalf("close: %d %s", r.status, r.body)
	}
	if _, ok := e.local.FSM().Session(s1.Session); ok {
		t.Fatal("the closed session is still in the state")
	}
	r = e.closeSession(s1.Session)
	if r.decode(t, &closed); r.status != http.StatusOK || closed.Closed {
		t.Fatalf("second close: %d %s", r.status, r.body)
	}
	msg := wantError(t, e.post(sessionPath(rpc.PathSessionKeepAlive, s1.Session), rpc.KeepAliveRequest{}), http.StatusGone, rpc.CodeSessionExpired).Message
	if !strings.Contains(msg, fmt.Sprint(s1.Session)) {
		t.Errorf("message %q does not name the session", msg)
	}
	if list := e.sessions(); len(list.Sessions) != 2 || list.Sessions[0].Session != s2.Session {
		t.Fatalf("list after the close: %+v", list)
	}
	wantError(t, e.closeSession(0), http.StatusBadRequest, rpc.CodeInvalid)
	wantError(t, e.do(http.MethodDelete, "/v1/sessions/x", nil, reqID(uuid.New(), 1)...), http.StatusBadRequest, rpc.CodeInvalid)
}

// TestSessionOpenRefusals: a TTL out of range, an opening without a
// request id or under a session, change nothing; the server's default TTL
// is Config.SessionTTL.
func TestSessionOpenRefusals(t *testing.T) {
	e, _ := fakeEnv(t)
	before := e.state()
	for _, ttl := range []time.Duration{500 * time.Millisecond, 2 * time.Hour, -time.Second} {
		msg := wantError(t, e.post(rpc.PathSessions, rpc.OpenSessionRequest{TTL: rpc.Duration(ttl)}, reqID(uuid.New(), 1)...),
			http.StatusBadRequest, rpc.CodeInvalid).Message
		if !strings.Contains(msg, "ttl") || !strings.Contains(msg, "[1s, 1h0m0s]") {
			t.Errorf("TTL %v: message %q", ttl, msg)
		}
	}
	if msg := wantError(t, e.post(rpc.PathSessions, rpc.OpenSessionRequest{}), http.StatusBadRequest, rpc.CodeInvalid).Message; !strings.Contains(msg, rpc.HeaderRequestID) {
		t.Errorf("without a request id: %q", msg)
	}
	if msg := wantError(t, e.post(rpc.PathSessions, rpc.OpenSessionRequest{}, under(1)...), http.StatusBadRequest, rpc.CodeInvalid).Message; !strings.Contains(msg, "not opened under a session") {
		t.Errorf("under a session: %q", msg)
	}
	if e.state() != before {
		t.Fatal("a refused opening changed the state")
	}

	var fake *fakeBackend
	cfg := testConfig()
	cfg.SessionTTL = 30 * time.Second
	e = newEnv(t, cfg, func(l *apitest.Local) httpapi.Backend { fake = newFake(l); return fake }, nil)
	if s := e.openSession(0); s.TTL != rpc.Duration(30*time.Second) {
		t.Fatalf("with SessionTTL 30s: %+v", s)
	}
}

// TestSessionHoldsTasks: a task leased under a session is held by it: the
// answer names the session, the summaries count it held, the list shows
// it, and the write counts as a keep-alive; closing the session hands the
// task back without a failure.
func TestSessionHoldsTasks(t *testing.T) {
	e, fake := fakeEnv(t)
	e.setDataset(3, fsm.DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Minute, FailureMax: 2})
	s := e.openSession(10 * time.Second)
	r := e.post(rpc.PathTaskGet, rpc.GetTaskRequest{}, under(s.Session)...)
	var held rpc.GetTaskResponse
	if r.decode(t, &held); r.status != http.StatusOK || held.Task.Session != s.Session {
		t.Fatalf("GetTask under session %d: %d %s", s.Session, r.status, r.body)
	}
	if _, touches, _ := fake.keeper.seen(s.Session); touches != 1 {
		t.Errorf("the keeper was touched %d times by a write under the session, want once", touches)
	}
	// A task leased without a session names none.
	r = e.post(rpc.PathTaskGet, rpc.GetTaskRequest{}, reqID(uuid.New(), 1)...)
	var leased struct {
		Task map[string]any `json:"task"`
	}
	if r.decode(t, &leased); r.status != http.StatusOK || leased.Task["session"] != nil {
		t.Fatalf("GetTask without a session: %d %s", r.status, r.body)
	}

	var st rpc.StatusResponse
	if r := e.get(rpc.PathStatus); r.status != http.StatusOK {
		t.Fatal(r.status)
	} else {
		r.decode(t, &st)
	}
	if st.FSM.Held != 1 || st.FSM.Pending != 2 || st.FSM.Todo != 1 {
		t.Fatalf("status: %+v", st.FSM)
	}
	var jobs rpc.JobsResponse
	e.get(rpc.PathJobs).decode(t, &jobs)
	if len(jobs.Jobs) != 1 || jobs.Jobs[0].Held != 1 {
		t.Fatalf("jobs: %+v", jobs.Jobs)
	}
	list := e.sessions()
	if len(list.Sessions) != 1 || len(list.Sessions[0].Tasks) != 1 ||
		list.Sessions[0].Tasks[0] != (rpc.SessionTask{Job: fsm.DefaultJob, Meta: held.Task.Meta}) {
		t.Fatalf("list: %+v, held %+v", list, held.Task.Meta)
	}

	if r := e.closeSession(s.Session); r.status != http.StatusOK {
		t.Fatalf("close: %d %s", r.status, r.body)
	}
	if got := e.local.FSM().Stats(fsm.DefaultJob); got.Held != 0 || got.Todo != 2 || got.Failed != 0 {
		t.Fatalf("after the close: %+v", got)
	}
}

// attachWrites are the register writes that take attach, each storing
// one key.
var attachWrites = []struct {
	path string
	body any
	key  string
}{
	{rpc.PathKVCompareAndSet, rpc.KVCompareAndSetRequest{Key: "cas", Value: []byte("v")}, "cas"},
	{rpc.PathKVAdd, rpc.KVAddRequest{Key: "add", Amount: 1}, "add"},
	{rpc.PathKVMultiSet, rpc.KVMultiSetRequest{Pairs: []rpc.KVPair{{Key: "multi", Value: []byte("v")}}}, "multi"},
	{rpc.PathKVAppend, rpc.KVAppendRequest{Key: "append", Value: []byte("v")}, "append"},
	{rpc.PathKVCompareValue, rpc.KVCompareValueRequest{Key: "value", Desired: []byte("v")}, "value"},
}

// TestSessionAttachedKeys: the keys each register write stores with
// attach=true under a session are deleted when it closes; a key written
// under the session without attach stays. The endpoints that document
// attach are those writes. Attach without a session, or not a boolean, is
// refused and changes nothing.
func TestSessionAttachedKeys(t *testing.T) {
	e, _ := fakeEnv(t)
	var documented, tested []string
	for _, ep := range rpc.Endpoints {
		if slices.ContainsFunc(ep.Query, func(p rpc.Param) bool { return p.Name == rpc.ParamAttach }) {
			documented = append(documented, ep.Path)
		}
	}
	s := e.openSession(time.Minute)
	for _, w := range attachWrites {
		tested = append(tested, w.path)
		e.ok(w.path+"?"+rpc.ParamAttach+"=true", w.body, nil, under(s.Session)...)
	}
	slices.Sort(documented)
	slices.Sort(tested)
	if !slices.Equal(documented, tested) {
		t.Errorf("the endpoints that take %s are %q; the test writes %q", rpc.ParamAttach, documented, tested)
	}
	e.ok(rpc.PathKVCompareAndSet, rpc.KVCompareAndSetRequest{Key: "kept", Value: []byte("v")}, nil, under(s.Session)...)
	if list := e.sessions(); len(list.Sessions) != 1 || list.Sessions[0].Keys != len(attachWrites) {
		t.Fatalf("list: %+v", list)
	}

	before := e.state()
	body := rpc.KVCompareAndSetRequest{Key: "loose", Value: []byte("v")}
	msg := wantError(t, e.post(rpc.PathKVCompareAndSet+"?attach=true", body, reqID(uuid.New(), 1)...), http.StatusBadRequest, rpc.CodeInvalid).Message
	if !strings.Contains(msg, rpc.HeaderSession) {
		t.Errorf("attach without a session: %q", msg)
	}
	wantError(t, e.post(rpc.PathKVCompareAndSet+"?attach=maybe", body, under(s.Session)...), http.StatusBadRequest, rpc.CodeInvalid)
	if e.state() != before {
		t.Fatal("a refused attach changed the state")
	}

	if r := e.closeSession(s.Session); r.status != http.StatusOK {
		t.Fatalf("close: %d %s", r.status, r.body)
	}
	for _, w := range attachWrites {
		if v := e.local.FSM().KV(fsm.DefaultJob, w.key); v.Found {
			t.Errorf("key %q, attached by %s, outlived its session", w.key, w.path)
		}
	}
	if v := e.local.FSM().KV(fsm.DefaultJob, "kept"); !v.Found {
		t.Error("a key written under the session without attach was deleted with it")
	}
}

// TestSessionExpired: once a session has ended, its keep-alive and every
// write under it are answered 410 session_expired, and the writes change
// nothing.
func TestSessionExpired(t *testing.T) {
	e, _ := fakeEnv(t)
	e.setDataset(2, fsm.DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Minute, FailureMax: 2})
	s := e.openSession(time.Minute)
	if res, err := e.local.Apply(context.Background(), &fsm.ExpireSessions{IDs: []uint64{s.Session}}); err != nil || res.Ended != 1 {
		t.Fatalf("expire: %+v %v", res, err)
	}
	before := e.state()
	wantError(t, e.post(sessionPath(rpc.PathSessionKeepAlive, s.Session), rpc.KeepAliveRequest{}), http.StatusGone, rpc.CodeSessionExpired)
	wantError(t, e.post(rpc.PathTaskGet, rpc.GetTaskRequest{}, under(s.Session)...), http.StatusGone, rpc.CodeSessionExpired)
	wantError(t, e.post(rpc.PathKVCompareAndSet+"?attach=true", rpc.KVCompareAndSetRequest{Key: "k", Value: []byte("v")}, under(s.Session)...),
		http.StatusGone, rpc.CodeSessionExpired)
	if after := e.state(); after.hash != before.hash {
		t.Fatal("a write under an ended session changed the state")
	}
	if got := e.local.FSM().Stats(fsm.DefaultJob); got.Todo != 2 {
		t.Fatalf("a task was leased under an ended session: %+v", got)
	}
}

// TestSessionHeaderRefusals: a malformed session header, one without a
// request id, and one on a dataset, are refused before anything is
// proposed.
func TestSessionHeaderRefusals(t *testing.T) {
	e, _ := fakeEnv(t)
	e.setDataset(2, fsm.DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Minute, FailureMax: 2})
	s := e.openSession(time.Minute)
	before := e.state()
	for _, v := range []string{"abc", "0", "-1", "1.5", "0x10", "18446744073709551616"} {
		r := e.post(rpc.PathTaskGet, rpc.GetTaskRequest{}, append(reqID(uuid.New(), 1), rpc.HeaderSession, v)...)
		if msg := wantError(t, r, http.StatusBadRequest, rpc.CodeInvalid).Message; !strings.Contains(msg, rpc.HeaderSession) {
			t.Errorf("header %q: message %q does not name it", v, msg)
		}
	}
	r := e.post(rpc.PathTaskGet, rpc.GetTaskRequest{}, rpc.HeaderSession, fmt.Sprint(s.Session))
	if msg := wantError(t, r, http.StatusBadRequest, rpc.CodeInvalid).Message; !strings.Contains(msg, rpc.HeaderRequestID) {
		t.Errorf("a session without a request id: %q", msg)
	}
	r = e.post(rpc.PathDataset, rpc.SetDatasetRequest{Chunks: []rpc.Chunk{{Path: "/a", Records: 1}}}, under(s.Session)...)
	if msg := wantError(t, r, http.StatusBadRequest, rpc.CodeInvalid).Message; !strings.Contains(msg, "not set under a session") {
		t.Errorf("a dataset under a session: %q", msg)
	}
	if e.state() != before {
		t.Fatal("a refused header changed the state")
	}
}

// TestKeepAliveBounds: a keep-alive reports on at most
// MaxKeepAliveProgress tasks, each well formed, in a bounded body.
func TestKeepAliveBounds(t *testing.T) {
	e, fake := fakeEnv(t)
	s := e.openSession(time.Minute)
	path := sessionPath(rpc.PathSessionKeepAlive, s.Session)
	many := make([]rpc.SessionProgress, httpapi.MaxKeepAliveProgress+1)
	for i := range many {
		many[i] = rpc.SessionProgress{Job: "default", Task: i + 1, Epoch: 1, Records: 1}
	}
	msg := wantError(t, e.post(path, rpc.KeepAliveRequest{Progress: many}), http.StatusBadRequest, rpc.CodeInvalid).Message
	if !strings.Contains(msg, fmt.Sprint(httpapi.MaxKeepAliveProgress)) {
		t.Errorf("too many entries: %q", msg)
	}
	e.ok(path, rpc.KeepAliveRequest{Progress: many[:httpapi.MaxKeepAliveProgress]}, nil)
	for _, p := range []rpc.SessionProgress{
		{Task: 0, Epoch: 1}, {Task: 1, Epoch: -1}, {Task: 1, Epoch: 1, Records: -1}, {Job: "Not_A_Job", Task: 1},
	} {
		wantError(t, e.post(path, rpc.KeepAliveRequest{Progress: []rpc.SessionProgress{p}}), http.StatusBadRequest, rpc.CodeInvalid)
	}
	huge := append([]byte(`{"progress":[`), bytes.Repeat([]byte(" "), 4<<20)...)
	wantError(t, e.do(http.MethodPost, path, append(huge, "]}"...)), http.StatusRequestEntityTooLarge, rpc.CodeTooLarge)
	if n, _, _ := fake.keeper.seen(s.Session); n != 1 {
		t.Fatalf("the keeper saw %d keep-alives, want the one well-formed", n)
	}
}

// TestSessionsNeedTheLeader: a follower sends the session endpoints to
// the leader; a leader that has not taken over its sessions answers the
// keep-alive and the list unavailable, to be retried; a server whose
// backend keeps no sessions answers not_found, which is not retried.
func TestSessionsNeedTheLeader(t *testing.T) {
	e, fake := fakeEnv(t)
	s := e.openSession(time.Minute)
	fake.follower(httpapi.ErrNotLeader, rpc.NodeRef{ID: "n2", APIAddr: "10.0.0.2:8080"}, true)
	for _, r := range []struct {
		method, path string
		body         []byte
	}{
		{http.MethodPost, sessionPath(rpc.PathSessionKeepAlive, s.Session), []byte(`{}`)},
		{http.MethodPost, rpc.PathSessions, []byte(`{}`)},
		{http.MethodGet, rpc.PathSessions, nil},
		{http.MethodDelete, sessionPath(rpc.PathSession, s.Session), nil},
	} {
		got := e.do(r.method, r.path, r.body, reqID(uuid.New(), 1)...)
		wantError(t, got, http.StatusTemporaryRedirect, rpc.CodeNotLeader)
		if loc := got.header.Get("Location"); loc != "http://10.0.0.2:8080"+r.path {
			t.Errorf("%s %s: Location %q", r.method, r.path, loc)
		}
	}
	if n, _, _ := fake.keeper.seen(s.Session); n != 0 {
		t.Fatalf("a follower kept a session alive %d times", n)
	}

	fake.follower(nil, rpc.NodeRef{ID: e.local.ID}, true)
	fake.mu.Lock()
	fake.noKeeper = true
	fake.mu.Unlock()
	for _, r := range []response{
		e.post(sessionPath(rpc.PathSessionKeepAlive, s.Session), rpc.KeepAliveRequest{}),
		e.get(rpc.PathSessions),
	} {
		wantError(t, r, http.StatusServiceUnavailable, rpc.CodeUnavailable)
		if r.header.Get("Retry-After") == "" {
			t.Error("no Retry-After")
		}
	}

	plain := newEnv(t, testConfig(), nil, nil)
	before := plain.state()
	r := plain.post(rpc.PathSessions, rpc.OpenSessionRequest{}, reqID(uuid.New(), 1)...)
	if msg := wantError(t, r, http.StatusNotFound, rpc.CodeNotFound).Message; !strings.Contains(msg, "keeps no sessions") {
		t.Errorf("open on a server that keeps no sessions: %q", msg)
	}
	wantError(t, plain.post(sessionPath(rpc.PathSessionKeepAlive, 1), rpc.KeepAliveRequest{}), http.StatusNotFound, rpc.CodeNotFound)
	wantError(t, plain.get(rpc.PathSessions), http.StatusNotFound, rpc.CodeNotFound)
	if plain.state() != before {
		t.Fatal("a refused opening changed the state")
	}
}

// TestSessionsBelowProtocol6: a cluster below protocol level 6 answers
// the session endpoints, and a write under a session, unavailable,
// proposing nothing; writes without a session work.
func TestSessionsBelowProtocol6(t *testing.T) {
	b := level4{&level1{f: fsm.New()}}
	ctx := context.Background()
	if r, _ := b.level1.Apply(ctx, &fsm.SetProtocol{Level: fsm.Protocol5}); r.Code != fsm.CodeOK {
		t.Fatal(r)
	}
	if r, _ := b.Apply(ctx, &fsm.SetDataset{Params: fsm.DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Minute},
		Chunks: []fsm.Chunk{{Path: "/data/a", Records: 1}, {Path: "/data/b", Records: 1}}}); r.Code != fsm.CodeOK {
		t.Fatal(r)
	}
	e := newEnv(t, testConfig(), func(l *apitest.Local) httpapi.Backend { b.Local = l; return b }, nil)
	hash, applied := b.f.StateHash(), b.f.AppliedIndex()
	for name, r := range map[string]response{
		"open":       e.post(rpc.PathSessions, rpc.OpenSessionRequest{}, reqID(uuid.New(), 1)...),
		"keep-alive": e.post(sessionPath(rpc.PathSessionKeepAlive, 1), rpc.KeepAliveRequest{}),
		"close":      e.closeSession(1),
		"list":       e.get(rpc.PathSessions),
		"GetTask":    e.post(rpc.PathTaskGet, rpc.GetTaskRequest{}, under(1)...),
	} {
		msg := wantError(t, r, http.StatusServiceUnavailable, rpc.CodeUnavailable).Message
		if !strings.Contains(msg, "need protocol level 6") || r.header.Get("Retry-After") == "" {
			t.Errorf("%s: %q, Retry-After %q", name, msg, r.header.Get("Retry-After"))
		}
	}
	if b.f.StateHash() != hash || b.f.AppliedIndex() != applied {
		t.Fatal("a refused session request changed the state")
	}
	var got rpc.GetTaskResponse
	e.ok(rpc.PathTaskGet, rpc.GetTaskRequest{}, &got, reqID(uuid.New(), 1)...)
	if got.Task.Meta.ID == 0 || got.Task.Session != 0 {
		t.Fatalf("GetTask without a session at level 5: %+v", got)
	}
}

// TestSessionTokens: opening, keeping alive and closing a session is a
// trainer's right, listing an operator's; a token keeps alive, closes and
// writes under its own sessions only, and an operator closes any.
func TestSessionTokens(t *testing.T) {
	cfg := testConfig()
	cfg.Tokens = loadTokens(t, "trainer "+tokA+" a", "trainer "+tokB+" b", "operator "+tokOp)
	var fake *fakeBackend
	e := newEnv(t, cfg, func(l *apitest.Local) httpapi.Backend { fake = newFake(l); return fake }, nil)
	a := e.openSession(time.Minute, bearer(tokA)...)
	a2 := e.openSession(time.Minute, bearer(tokA)...)
	keepAlive := sessionPath(rpc.PathSessionKeepAlive, a.Session)
	wantError(t, e.post(rpc.PathSessions, rpc.OpenSessionRequest{}, reqID(uuid.New(), 1)...), http.StatusUnauthorized, rpc.CodeUnauthorized)
	wantError(t, e.post(keepAlive, rpc.KeepAliveRequest{}), http.StatusUnauthorized, rpc.CodeUnauthorized)
	e.ok(keepAlive, rpc.KeepAliveRequest{}, nil, bearer(tokA)...)
	wantError(t, e.post(keepAlive, rpc.KeepAliveRequest{}, bearer(tokB)...), http.StatusForbidden, rpc.CodeForeignClient)
	if n, _, _ := fake.keeper.seen(a.Session); n != 1 {
		t.Fatalf("the keeper saw %d keep-alives, want the owner's one", n)
	}

	wantError(t, e.closeSession(a.Session, bearer(tokB)...), http.StatusForbidden, rpc.CodeForeignClient)
	if _, ok := e.local.FSM().Session(a.Session); !ok {
		t.Fatal("another token closed the session")
	}
	before := e.state()
	wantError(t, e.post(rpc.JobPath("b", rpc.PathTaskGet), rpc.GetTaskRequest{}, under(a.Session, bearer(tokB)...)...),
		http.StatusForbidden, rpc.CodeForeignClient)
	if e.state().hash != before.hash {
		t.Fatal("another token's write under the session changed the state")
	}

	wantError(t, e.do(http.MethodGet, rpc.PathSessions, nil, bearer(tokA)...), http.StatusForbidden, rpc.CodeForbidden)
	if list := e.sessions(bearer(tokOp)...); len(list.Sessions) != 2 {
		t.Fatalf("the operator's list: %+v", list)
	}

	var closed rpc.CloseSessionResponse
	r := e.closeSession(a.Session, bearer(tokA)...)
	if r.decode(t, &closed); r.status != http.StatusOK || !closed.Closed {
		t.Fatalf("the owner's close: %d %s", r.status, r.body)
	}
	r = e.closeSession(a2.Session, bearer(tokOp)...)
	if r.decode(t, &closed); r.status != http.StatusOK || !closed.Closed {
		t.Fatalf("the operator's close: %d %s", r.status, r.body)
	}
	if n := len(e.local.FSM().Sessions()); n != 0 {
		t.Fatalf("%d sessions left", n)
	}
}

// TestSessionJSON: the session answers carry the wire names.
func TestSessionJSON(t *testing.T) {
	e, _ := fakeEnv(t)
	s := e.openSession(3 * time.Second)
	var raw map[string]any
	e.get(rpc.PathSessions).decode(t, &raw)
	b, _ := json.Marshal(raw)
	for _, want := range []string{`"session":` + fmt.Sprint(s.Session), `"ttl":"3s"`, `"remaining":"3s"`, `"age":`, `"opened":`, `"keys":0`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("no %s in %s", want, b)
		}
	}
}
