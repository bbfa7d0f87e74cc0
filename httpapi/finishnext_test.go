package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
	"github.com/raftmaster/raftmaster/rpc"
)

// counted is the outcome of a finish that counted.
var counted = rpc.FinishOutcome{}

// TestGetTaskCarriesTheFinish: a reader whose every GetTask carries the
// task it finished reads a pass exactly once at one entry per task, each
// answer saying the finish counted, and the GetTask that carries the
// pass's last task is answered pass_before with that finish counted.
func TestGetTaskCarriesTheFinish(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	e.setDataset(5, fsm.DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Minute})
	before := e.state().applied
	seen := map[int]bool{}
	var last *rpc.TaskMeta
	for {
		r := e.post(rpc.PathTaskGet, rpc.GetTaskRequest{Pass: 0, Finished: last}, reqID(uuid.New(), 1)...)
		if r.status != http.StatusOK {
			apiErr := wantError(t, r, http.StatusConflict, rpc.CodePassBefore)
			if last == nil || apiErr.Finish == nil || *apiErr.Finish != counted {
				t.Fatalf("the pass ended with the finish of %+v going %+v", last, apiErr.Finish)
			}
			break
		}
		var got rpc.GetTaskResponse
		r.decode(t, &got)
		switch {
		case last == nil && got.Finish != nil:
			t.Fatalf("a GetTask that carried no finish was answered one: %+v", got.Finish)
		case last != nil && (got.Finish == nil || *got.Finish != counted):
			t.Fatalf("the finish of %+v went %+v", *last, got.Finish)
		case seen[got.Task.Meta.ID]:
			t.Fatalf("task %d read twice in the pass", got.Task.Meta.ID)
		}
		seen[got.Task.Meta.ID] = true
		last = &got.Task.Meta
	}
	if len(seen) != 5 {
		t.Fatalf("read %d of 5 tasks", len(seen))
	}
	st := e.local.FSM().Stats(fsm.DefaultJob)
	if st.Pass != 1 || st.Pending != 0 {
		t.Fatalf("after the pass: %+v", st)
	}
	if n := e.state().applied - before; n != 6 {
		t.Fatalf("%d entries for a pass of 5 tasks, want 6", n)
	}
}

// TestGetTaskFinishOutcomes: a finish that a TaskFinished would refuse is
// reported with its code (a stale epoch, an unknown task) and the lease
// is granted all the same; when no task is left, the error answer
// (no_more_available, pass_before) says how the finish went; a retry with
// the same request id gets the same answer, finish included, and changes
// nothing.
func TestGetTaskFinishOutcomes(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	e.setDataset(4, fsm.DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Minute, Strict: true})
	var a rpc.GetTaskResponse
	e.ok(rpc.PathTaskGet, rpc.GetTaskRequest{}, &a)
	e.ok(rpc.PathTaskFinished, rpc.TaskRequest{Meta: a.Task.Meta}, nil)

	// Finished already, in a strict dataset: a stale epoch, and a task.
	var b rpc.GetTaskResponse
	e.ok(rpc.PathTaskGet, rpc.GetTaskRequest{Finished: &a.Task.Meta}, &b)
	if b.Finish == nil || b.Finish.Code != rpc.CodeStaleEpoch || b.Task.Meta.ID == 0 {
		t.Fatalf("a second finish: %+v", b)
	}
	// An unknown task.
	var c rpc.GetTaskResponse
	e.ok(rpc.PathTaskGet, rpc.GetTaskRequest{Finished: &rpc.TaskMeta{ID: 99, Epoch: 1}}, &c)
	if c.Finish == nil || c.Finish.Code != rpc.CodeUnknownTask || c.Task.Meta.ID == 0 {
		t.Fatalf("an unknown task's finish: %+v", c)
	}

	// A retry is answered as the first, finish included.
	client := uuid.New()
	var d, again rpc.GetTaskResponse
	e.ok(rpc.PathTaskGet, rpc.GetTaskRequest{Finished: &b.Task.Meta}, &d, reqID(client, 1)...)
	state := e.state()
	e.ok(rpc.PathTaskGet, rpc.GetTaskRequest{Finished: &b.Task.Meta}, &again, reqID(client, 1)...)
	if d.Finish == nil || *d.Finish != counted || again.Finish == nil || *again.Finish != *d.Finish || again.Task.Meta != d.Task.Meta {
		t.Fatalf("retry %+v, first %+v", again, d)
	}
	if e.state().hash != state.hash {
		t.Fatal("a retry changed the state")
	}

	// Tasks c and d are out: the finish of c leaves d pending with
	// another reader, and is answered no_more_available, counted.
	r := e.post(rpc.PathTaskGet, rpc.GetTaskRequest{Finished: &c.Task.Meta}, reqID(client, 2)...)
	first := wantError(t, r, http.StatusConflict, rpc.CodeNoMoreAvailable)
	if first.Finish == nil || *first.Finish != counted {
		t.Fatalf("the finish riding a no_more_available answer went %+v", first.Finish)
	}
	if ts, _ := e.local.FSM().Task(fsm.DefaultJob, c.Task.Meta.ID); ts.Queue != "done" {
		t.Fatalf("task %d is %s after its finish rode a GetTask answered no_more_available", c.Task.Meta.ID, ts.Queue)
	}
	state = e.state()
	replay := wantError(t, e.post(rpc.PathTaskGet, rpc.GetTaskRequest{Finished: &c.Task.Meta}, reqID(client, 2)...),
		http.StatusConflict, rpc.CodeNoMoreAvailable)
	if replay.Finish == nil || *replay.Finish != *first.Finish || !replay.AppliedAt.Equal(first.AppliedAt) {
		t.Fatalf("the retry of a no_more_available answer: %+v, first %+v", replay, first)
	}
	if e.state().hash != state.hash {
		t.Fatal("a retry changed the state")
	}

	// The last task's finish ends the pass: pass_before, counted.
	r = e.post(rpc.PathTaskGet, rpc.GetTaskRequest{Finished: &d.Task.Meta})
	if end := wantError(t, r, http.StatusConflict, rpc.CodePassBefore); end.Finish == nil || *end.Finish != counted {
		t.Fatalf("the last finish went %+v", end.Finish)
	}
	if st := e.local.FSM().Stats(fsm.DefaultJob); st.Pass != 1 {
		t.Fatalf("the pass did not end with its last finish: %+v", st)
	}
	// An error answer of a GetTask that carried no finish says none.
	r = e.post(rpc.PathTaskGet, rpc.GetTaskRequest{Pass: 0})
	if none := wantError(t, r, http.StatusConflict, rpc.CodePassBefore); none.Finish != nil || strings.Contains(string(r.body), `"finish"`) {
		t.Fatalf("an answer without a finish: %s", r.body)
	}
}

// TestGetTaskFinishUnderASession: a GetTask under a session may carry the
// finish of a task the session holds: it counts, and the next task is
// held by the session.
func TestGetTaskFinishUnderASession(t *testing.T) {
	e, _ := fakeEnv(t)
	e.setDataset(3, fsm.DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Minute})
	s := e.openSession(10 * time.Second)
	var a, b rpc.GetTaskResponse
	e.ok(rpc.PathTaskGet, rpc.GetTaskRequest{}, &a, under(s.Session)...)
	e.ok(rpc.PathTaskGet, rpc.GetTaskRequest{Finished: &a.Task.Meta}, &b, under(s.Session)...)
	if b.Finish == nil || *b.Finish != counted || b.Task.Session != s.Session {
		t.Fatalf("a finish under session %d: %+v", s.Session, b)
	}
	st := e.local.FSM().Stats(fsm.DefaultJob)
	if st.Done != 1 || st.Held != 1 {
		t.Fatalf("after a finish under a session: %+v", st)
	}
}

// TestGetTaskFinishBadInput: a finished task out of range is invalid and
// changes nothing.
func TestGetTaskFinishBadInput(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	e.setDataset(2, fsm.DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Minute})
	before := e.state()
	for _, body := range []string{`{"finished":{"id":0,"epoch":1}}`, `{"finished":{"id":1,"epoch":-1}}`, `{"finished":{}}`} {
		r := e.do(http.MethodPost, rpc.PathTaskGet, []byte(body))
		if msg := wantError(t, r, http.StatusBadRequest, rpc.CodeInvalid).Message; !strings.Contains(msg, "finished task") {
			t.Errorf("%s: %q does not name the finished task", body, msg)
		}
	}
	if e.state() != before {
		t.Fatal("a refused request changed the state")
	}
}

// follower8 is a level1 backend that does not lead.
type follower8 struct{ *level1 }

func (b follower8) Leader() (rpc.NodeRef, bool) {
	return rpc.NodeRef{ID: "n2", APIAddr: "10.0.0.2:8080"}, true
}

func (b follower8) Apply(context.Context, fsm.Command) (*fsm.Result, error) {
	return nil, httpapi.ErrNotLeader
}

// TestGetTaskFinishBelowProtocol9: a leader of a cluster below protocol
// level 9, whose older replicas could not read a GetTask that carries a
// finish, answers it unavailable, proposes nothing and changes nothing; a
// GetTask without one leases as before. A follower that sees the cluster
// below the level redirects the request to the leader, which judges.
func TestGetTaskFinishBelowProtocol9(t *testing.T) {
	b := &level1{f: fsm.New()}
	if r, _ := b.Apply(context.Background(), &fsm.SetProtocol{Level: fsm.Protocol8}); r.Code != fsm.CodeOK {
		t.Fatal(r)
	}
	e := newEnv(t, testConfig(), func(l *apitest.Local) httpapi.Backend { b.Local = l; return b }, nil)
	if r, _ := b.Apply(context.Background(), &fsm.SetDataset{Params: fsm.DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Minute},
		Chunks: []fsm.Chunk{{Path: "/data/a", Records: 1}, {Path: "/data/b", Records: 1}}}); r.Code != fsm.CodeOK {
		t.Fatal(r)
	}
	var a rpc.GetTaskResponse
	e.ok(rpc.PathTaskGet, rpc.GetTaskRequest{}, &a)
	hash, applied := b.f.StateHash(), b.f.AppliedIndex()
	r := e.post(rpc.PathTaskGet, rpc.GetTaskRequest{Finished: &a.Task.Meta}, reqID(uuid.New(), 1)...)
	msg := wantError(t, r, http.StatusServiceUnavailable, rpc.CodeUnavailable).Message
	if !strings.Contains(msg, "not upgraded") || !strings.Contains(msg, "protocol level 9") {
		t.Errorf("the refusal %q does not say that the cluster is not upgraded to level 9", msg)
	}
	if b.f.StateHash() != hash || b.f.AppliedIndex() != applied {
		t.Fatal("a GetTask carrying a finish below protocol level 9 changed the state")
	}
	if ts, _ := b.f.Task(fsm.DefaultJob, a.Task.Meta.ID); ts.Queue != "pending" {
		t.Fatalf("task %d is %s after a refused finish", a.Task.Meta.ID, ts.Queue)
	}
	// Reported on its own, then the next asked for: as before.
	e.ok(rpc.PathTaskFinished, rpc.TaskRequest{Meta: a.Task.Meta}, nil)
	var next rpc.GetTaskResponse
	e.ok(rpc.PathTaskGet, rpc.GetTaskRequest{}, &next)
	if next.Task.Meta.ID == 0 || next.Task.Meta.ID == a.Task.Meta.ID || next.Finish != nil {
		t.Fatalf("the next task at protocol level 8: %+v", next)
	}

	f := follower8{&level1{f: fsm.New()}}
	if r, _ := f.level1.Apply(context.Background(), &fsm.SetProtocol{Level: fsm.Protocol8}); r.Code != fsm.CodeOK {
		t.Fatal(r)
	}
	fe := newEnv(t, testConfig(), func(l *apitest.Local) httpapi.Backend { f.Local = l; return f }, nil)
	r = fe.post(rpc.PathTaskGet, rpc.GetTaskRequest{Finished: &a.Task.Meta}, reqID(uuid.New(), 1)...)
	wantError(t, r, http.StatusTemporaryRedirect, rpc.CodeNotLeader)
}

// TestGetTaskBatch: a request of count 3 leases three tasks in one
// entry, and the next reports them (finished, more_finished) with the
// next lease, each outcome in order; a batch out of bounds is invalid
// and changes nothing; below protocol level 10 a batch is answered
// unavailable.
func TestGetTaskBatch(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	e.setDataset(5, fsm.DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Minute})
	before := e.state()
	for _, body := range []string{`{"count":33}`, `{"count":-1}`, `{"more_finished":[{"id":1,"epoch":1}]}`,
		`{"finished":{"id":1,"epoch":1},"more_finished":[{"id":0,"epoch":1}]}`, `{"finished":{"id":1,"epoch":1},"more_finished":[{"id":1,"epoch":2}]}`} {
		r := e.do(http.MethodPost, rpc.PathTaskGet, []byte(body))
		wantError(t, r, http.StatusBadRequest, rpc.CodeInvalid)
	}
	if e.state() != before {
		t.Fatal("a refused request changed the state")
	}
	var a rpc.GetTaskResponse
	e.ok(rpc.PathTaskGet, rpc.GetTaskRequest{Count: 3}, &a)
	if len(a.More) != 2 || a.Task.Meta.ID == 0 {
		t.Fatalf("a batch of 3 leased %+v and %d more", a.Task.Meta, len(a.More))
	}
	applied := e.state().applied
	var b rpc.GetTaskResponse
	e.ok(rpc.PathTaskGet, rpc.GetTaskRequest{Count: 3, Finished: &a.Task.Meta,
		MoreFinished: []rpc.TaskMeta{a.More[0].Meta, a.More[1].Meta, {ID: 99, Epoch: 1}}}, &b)
	if b.Finish == nil || *b.Finish != counted || len(b.MoreFinish) != 3 || b.MoreFinish[0] != counted || b.MoreFinish[1] != counted ||
		b.MoreFinish[2].Code != rpc.CodeUnknownTask {
		t.Fatalf("the batch's finishes went %+v, %+v", b.Finish, b.MoreFinish)
	}
	if len(b.More) != 1 || e.state().applied != applied+1 {
		t.Fatalf("the second batch leased %d more (want 1, the 2 left) in %d entries", len(b.More), e.state().applied-applied)
	}
	if st := e.local.FSM().Stats(fsm.DefaultJob); st.Done != 3 || st.Pending != 2 {
		t.Fatalf("after two batches: %+v", st)
	}

	old := &level1{f: fsm.New()}
	if r, _ := old.Apply(context.Background(), &fsm.SetProtocol{Level: fsm.Protocol9}); r.Code != fsm.CodeOK {
		t.Fatal(r)
	}
	oe := newEnv(t, testConfig(), func(l *apitest.Local) httpapi.Backend { old.Local = l; return old }, nil)
	r := oe.post(rpc.PathTaskGet, rpc.GetTaskRequest{Count: 2}, reqID(uuid.New(), 1)...)
	if msg := wantError(t, r, http.StatusServiceUnavailable, rpc.CodeUnavailable).Message; !strings.Contains(msg, "protocol level 10") {
		t.Errorf("the refusal %q does not name protocol level 10", msg)
	}
}

// TestRenewBatch: one renewal request renews several leases, each
// outcome in order, a stale one refused without failing the others;
// finished and failed refuse more; below protocol level 10 a batch is
// answered unavailable.
func TestRenewBatch(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	e.setDataset(4, fsm.DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Minute})
	var a, b, c rpc.GetTaskResponse
	e.ok(rpc.PathTaskGet, rpc.GetTaskRequest{}, &a)
	e.ok(rpc.PathTaskGet, rpc.GetTaskRequest{}, &b)
	e.ok(rpc.PathTaskGet, rpc.GetTaskRequest{}, &c)
	stale := rpc.TaskMeta{ID: c.Task.Meta.ID, Epoch: c.Task.Meta.Epoch + 4}
	var out rpc.TaskResponse
	e.ok(rpc.PathTaskRenew, rpc.TaskRequest{Meta: a.Task.Meta, More: []rpc.TaskMeta{stale, b.Task.Meta}}, &out)
	if len(out.Renewed) != 3 || out.Renewed[0].Code != "" || out.Renewed[0].Lease != rpc.Duration(time.Minute) ||
		out.Renewed[1].Code != rpc.CodeStaleEpoch || out.Renewed[2].Code != "" {
		t.Fatalf("renewed %+v", out.Renewed)
	}
	before := e.state()
	for _, path := range []string{rpc.PathTaskFinished, rpc.PathTaskFailed} {
		r := e.post(path, rpc.TaskRequest{Meta: a.Task.Meta, More: []rpc.TaskMeta{b.Task.Meta}})
		wantError(t, r, http.StatusBadRequest, rpc.CodeInvalid)
	}
	r := e.post(rpc.PathTaskRenew, rpc.TaskRequest{Meta: a.Task.Meta, More: []rpc.TaskMeta{a.Task.Meta}})
	wantError(t, r, http.StatusBadRequest, rpc.CodeInvalid)
	if e.state() != before {
		t.Fatal("a refused request changed the state")
	}

	old := &level1{f: fsm.New()}
	if r, _ := old.Apply(context.Background(), &fsm.SetProtocol{Level: fsm.Protocol9}); r.Code != fsm.CodeOK {
		t.Fatal(r)
	}
	oe := newEnv(t, testConfig(), func(l *apitest.Local) httpapi.Backend { old.Local = l; return old }, nil)
	r = oe.post(rpc.PathTaskRenew, rpc.TaskRequest{Meta: rpc.TaskMeta{ID: 1, Epoch: 1}, More: []rpc.TaskMeta{{ID: 2, Epoch: 1}}}, reqID(uuid.New(), 1)...)
	wantError(t, r, http.StatusServiceUnavailable, rpc.CodeUnavailable)
}
