package fsm

import (
	"testing"
	"time"
)

// sessionHarness returns a harness at Protocol6 with a dataset of n tasks.
func sessionHarness(t *testing.T, n int) *harness {
	t.Helper()
	h := newHarness(t)
	h.ok(&SetProtocol{Level: Protocol6})
	if n > 0 {
		h.setDataset(n, defaultParams)
	}
	return h
}

// open opens a session for client n and returns its id.
func (h *harness) open(n byte, ttl time.Duration) uint64 {
	h.t.Helper()
	r := h.ok(&OpenSession{Header: Header{Request: RequestID{Client: clientID(n), Seq: 1}}, TTL: ttl})
	if r.Session == 0 || r.Lease != ttl {
		h.t.Fatalf("OpenSession answered %+v", r)
	}
	return r.Session
}

// under returns a header of request seq of client n under session id.
func under(n byte, seq, id uint64) Header {
	return Header{Request: RequestID{Client: clientID(n), Seq: seq}, Session: id}
}

func TestSessionHoldsItsTaskUntilItExpires(t *testing.T) {
	h := sessionHarness(t, 2)
	id := h.open(1, 5*time.Second)
	r := h.ok(&GetTask{Header: under(2, 1, id)})
	if r.Task.Session != id || r.Task.Lease != 0 {
		t.Fatalf("task %+v: want held by session %d, no lease", r.Task, id)
	}
	m := r.Task.Meta
	h.wantTask(m.ID, "held", m.Epoch, 0)
	if st := h.f.Stats(""); st.Pending != 1 || st.Held != 1 {
		t.Fatalf("stats %+v: want 1 pending, 1 held", st)
	}
	// No deadline ends it: not a Tick long after the task timeout, nor a
	// leader's grace.
	h.advance(20 * time.Minute)
	h.tick()
	h.ok(&LeaderGrace{Grace: time.Second})
	h.wantTask(m.ID, "held", m.Epoch, 0)
	// A retry answers the same task, still held.
	if r2 := h.ok(&GetTask{Header: under(2, 1, id)}); !r2.Duplicate || r2.Task.Meta != m || r2.Task.Session != id {
		t.Fatalf("retry answered %+v", r2)
	}
	// Renewing it changes nothing and answers the session's TTL.
	if r := h.ok(&RenewLease{Header: under(2, 2, id), Meta: m}); r.Lease != 5*time.Second {
		t.Fatalf("RenewLease of a held task answered %+v", r)
	}
	info, ok := h.f.Session(id)
	if !ok || len(info.Tasks) != 1 || info.Tasks[0].Meta != m || info.Tasks[0].Timeout != defaultParams.TaskTimeout {
		t.Fatalf("Session(%d) = %+v, %v", id, info, ok)
	}
	// Expiry returns it, counting a failure, in the entry that ends it.
	if r := h.ok(&ExpireSessions{IDs: []uint64{id, id + 1}}); r.Ended != 1 {
		t.Fatalf("ExpireSessions answered %+v", r)
	}
	h.wantTask(m.ID, "todo", m.Epoch, 1)
	if _, ok := h.f.Session(id); ok {
		t.Fatalf("session %d is still open", id)
	}
	// Its requests, new ones and retries, are refused and change nothing.
	before := h.f.SnapshotBytes()
	h.fails(&GetTask{Header: under(2, 3, id)}, ErrSessionExpired)
	h.fails(&GetTask{Header: under(2, 1, id)}, ErrSessionExpired)
	h.fails(&TaskFinished{Header: under(2, 4, id), Meta: m}, ErrSessionExpired)
	// Its identity cannot leave the session to get its requests applied.
	h.fails(&TaskFinished{Header: under(2, 4, 0), Meta: m}, ErrSessionExpired)
	if string(before) != string(h.f.SnapshotBytes()) {
		t.Fatalf("a refused request changed the state")
	}
	// The task is dispatched again, to anyone, after the one left todo.
	h.getTask(0)
	if got := h.getTask(0); got.ID != m.ID {
		t.Fatalf("next task %+v, want %d again", got, m.ID)
	}
}

func TestSessionCloseReleasesWithoutFailure(t *testing.T) {
	h := sessionHarness(t, 2)
	id := h.open(1, 5*time.Second)
	m := h.ok(&GetTask{Header: under(2, 1, id)}).Task.Meta
	attach := under(2, 2, id)
	attach.Attach = true
	h.ok(&KVCompareAndSet{Header: attach, Key: "rdzv/state", Value: []byte("a")})
	attach.Request.Seq = 3
	h.ok(&KVMultiSet{Header: attach, Pairs: []KVPair{{Key: "w/1", Value: []byte("x")}, {Key: "w/2", Value: []byte("y")}}})
	// A key written again without Attach is no longer the session's.
	h.ok(&KVCompareAndSet{Header: under(2, 4, id), Key: "w/2", Version: h.f.KV("", "w/2").Version, Value: []byte("z")})
	h.ok(&KVCompareAndSet{Header: Header{}, Key: "other", Value: []byte("o")})
	if r := h.ok(&RequestSaveModel{Header: under(2, 5, id), TrainerID: "t1", BlockDur: time.Hour}); !r.Granted {
		t.Fatalf("save-model not granted: %+v", r)
	}
	if info, _ := h.f.Session(id); info.Keys != 2 {
		t.Fatalf("session holds %d keys, want 2", info.Keys)
	}
	// Another token cannot close it.
	foreign := Header{Request: RequestID{Client: clientID(3), Seq: 1, Owner: [16]byte{9}}}
	h.ok(&SetProtocol{Level: Protocol6}) // idempotent
	owned := h.ok(&OpenSession{Header: Header{Request: RequestID{Client: clientID(4), Seq: 1, Owner: [16]byte{1}}}, TTL: time.Minute}).Session
	h.fails(&CloseSession{Header: foreign, ID: owned}, ErrForeignClient)

	if r := h.ok(&CloseSession{Header: Header{Request: RequestID{Client: clientID(1), Seq: 2}}, ID: id}); r.Session != id {
		t.Fatalf("CloseSession answered %+v", r)
	}
	h.wantTask(m.ID, "todo", m.Epoch, 0)
	for key, want := range map[string]bool{"rdzv/state": false, "w/1": false, "w/2": true, "other": true} {
		if found := h.f.KV("", key).Found; found != want {
			t.Errorf("key %q found %v, want %v", key, found, want)
		}
	}
	if st := h.f.Stats(""); st.SaveHolder != "" {
		t.Fatalf("save-model lease still held by %q", st.SaveHolder)
	}
	// Closing again is ignored; its retry answers the first outcome.
	h.ignored(&CloseSession{Header: Header{Request: RequestID{Client: clientID(1), Seq: 3}}, ID: id})
	if r := h.ok(&CloseSession{Header: Header{Request: RequestID{Client: clientID(1), Seq: 2}}, ID: id}); !r.Duplicate || r.Session != id {
		t.Fatalf("retried close answered %+v", r)
	}
}

func TestSessionTasksKeepThePassOpen(t *testing.T) {
	h := sessionHarness(t, 2)
	id := h.open(1, 5*time.Second)
	a := h.ok(&GetTask{Header: under(2, 1, id)}).Task.Meta
	b := h.getTask(0)
	h.finish(b)
	h.fails(&GetTask{Pass: 1}, ErrPassAfter)
	h.ok(&TaskFinished{Header: under(2, 2, id), Meta: a})
	if st := h.f.Stats(""); st.Pass != 1 || st.Held != 0 {
		t.Fatalf("stats %+v: want pass 1, nothing held", st)
	}
	// A finished task is no longer the session's: expiring it returns
	// nothing.
	h.ok(&ExpireSessions{IDs: []uint64{id}})
	if st := h.f.Stats(""); st.Todo != 2 {
		t.Fatalf("stats %+v: want both tasks todo in pass 1", st)
	}
}

func TestSessionBindsItsIdentities(t *testing.T) {
	h := sessionHarness(t, 3)
	a := h.open(1, 5*time.Second)
	b := h.open(3, 5*time.Second)
	h.ok(&GetTask{Header: under(2, 1, a)})
	// The identity is session a's: not b's, not none.
	h.rejects(&GetTask{Header: under(2, 2, b)})
	h.rejects(&GetTask{Header: under(2, 2, 0)})
	// An identity first used without a session stays without one.
	h.ok(&GetTask{Header: under(4, 1, 0)})
	h.rejects(&GetTask{Header: under(4, 2, a)})
	// A session that never existed.
	h.fails(&GetTask{Header: under(5, 1, 999)}, ErrSessionExpired)
}

func TestSessionsNeedProtocol6(t *testing.T) {
	h := newHarness(t)
	h.ok(&SetProtocol{Level: Protocol5})
	h.setDataset(1, defaultParams)
	h.rejects(&OpenSession{Header: Header{Request: RequestID{Client: clientID(1), Seq: 1}}, TTL: 5 * time.Second})
	h.rejects(&GetTask{Header: under(2, 1, 1)})
	h.ok(&SetProtocol{Level: Protocol6})
	h.rejects(&OpenSession{TTL: 5 * time.Second})                                                                   // no request id
	h.rejects(&OpenSession{Header: Header{Request: RequestID{Client: clientID(1), Seq: 1}}, TTL: time.Millisecond}) // TTL too short
	h.rejects(&ExpireSessions{})
	h.rejects(&CheckpointSessions{IDs: []uint64{0}})
	attach := Header{Request: RequestID{Client: clientID(2), Seq: 1}, Attach: true}
	h.rejects(&KVAdd{Header: attach, Key: "k", Delta: 1})
}

func TestSessionGracesAndCheckpoints(t *testing.T) {
	h := sessionHarness(t, 0)
	id := h.open(1, 5*time.Second)
	opened := h.now
	h.advance(time.Second)
	h.ok(&LeaderGrace{Grace: time.Second})
	first := h.now
	h.advance(time.Second)
	h.ok(&LeaderGrace{Grace: time.Second})
	if latest, prev := h.f.SessionGraces(); latest != h.now || prev != first {
		t.Fatalf("graces %d, %d; want %d, %d", latest, prev, h.now, first)
	}
	// Seen before the previous grace: the next leader gives no fresh TTL.
	if info, _ := h.f.Session(id); info.Seen != opened {
		t.Fatalf("seen %d, want %d", info.Seen, opened)
	}
	h.advance(time.Second)
	h.ok(&CheckpointSessions{IDs: []uint64{id}})
	if info, _ := h.f.Session(id); info.Seen != h.now {
		t.Fatalf("seen %d after a checkpoint, want %d", info.Seen, h.now)
	}
	// Any request under the session is a sign of life too.
	h.advance(time.Second)
	h.ok(&KVAdd{Header: under(2, 1, id), Key: "n", Delta: 1})
	if info, _ := h.f.Session(id); info.Seen != h.now {
		t.Fatalf("seen %d after a request, want %d", info.Seen, h.now)
	}
}

func TestSessionSurvivesSnapshot(t *testing.T) {
	h := sessionHarness(t, 2)
	id := h.open(1, 5*time.Second)
	m := h.ok(&GetTask{Header: under(2, 1, id)}).Task.Meta
	snap := persist(t, h.f)
	g := restored(t, snap)
	if g.StateHash() != h.f.StateHash() {
		t.Fatal("restored state differs")
	}
	info, ok := g.Session(id)
	if !ok || len(info.Tasks) != 1 || info.Tasks[0].Meta != m {
		t.Fatalf("restored session %+v, %v", info, ok)
	}
	r := g.ApplyEntry(100, Encode(&ExpireSessions{Header: Header{Now: h.now}, IDs: []uint64{id}}))
	if r.Ended != 1 {
		t.Fatalf("expire after restore answered %+v", r)
	}
	if ts, _ := g.Task(DefaultJob, m.ID); ts.Queue != "todo" || ts.Failures != 1 {
		t.Fatalf("task after restore and expiry: %+v", ts)
	}
	// A snapshot whose held task no session holds does not restore.
	broken := restored(t, snap)
	delete(broken.s.sessions, id)
	if err := New().Restore(readCloser(broken.SnapshotBytes())); err == nil {
		t.Fatal("a held task without its session restored")
	}
}

// TestSessionReferencesStayBounded: a session that keeps leasing and
// finishing tasks keeps at most about twice the references it holds, and
// its snapshot, which holds only the live ones, restores to the same
// bytes.
func TestSessionReferencesStayBounded(t *testing.T) {
	h := sessionHarness(t, 600)
	id := h.open(1, time.Minute)
	seq := uint64(0)
	next := func() uint64 { seq++; return seq }
	var held []TaskMeta
	for range 10 {
		held = append(held, h.ok(&GetTask{Header: under(2, next(), id)}).Task.Meta)
	}
	for round := range 500 {
		h.ok(&TaskFinished{Header: under(2, next(), id), Meta: held[0]})
		held = append(held[1:], h.ok(&GetTask{Header: under(2, next(), id)}).Task.Meta)
		refs := len(h.f.s.sessions[id].tasks)
		if refs > 2*len(held)+minPrune {
			t.Fatalf("round %d: the session keeps %d task references for %d held", round, refs, len(held))
		}
	}
	info, _ := h.f.Session(id)
	if len(info.Tasks) != len(held) {
		t.Fatalf("Session lists %d tasks, want the %d held", len(info.Tasks), len(held))
	}
	b := h.f.SnapshotBytes()
	if r := restored(t, b); string(r.SnapshotBytes()) != string(b) {
		t.Fatalf("the restored state writes other bytes")
	}
}
