package fsm

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// withRequest sets c's request id to client n, sequence seq.
func withRequest(c Command, n byte, seq uint64) Command {
	c.Hdr().Request = RequestID{Client: clientID(n), Seq: seq}
	return c
}

func TestDedup(t *testing.T) {
	runScenarios(t, []scenario{
		{"retried GetTask returns the same task and changes nothing", func(h *harness) {
			h.setDataset(3, defaultParams)
			first := h.ok(withRequest(&GetTask{Pass: 0}, 1, 1))
			before := h.f.SnapshotBytes()
			h.advance(time.Second) // the retry is proposed later
			retry := h.ok(withRequest(&GetTask{Pass: 0}, 1, 1))
			if !retry.Duplicate || retry.Task == nil || retry.Task.Meta != first.Task.Meta ||
				!slices.Equal(retry.Task.Chunks, first.Task.Chunks) {
				h.t.Fatalf("retry %+v, want a duplicate of %+v", retry, first)
			}
			if !bytes.Equal(before, h.f.SnapshotBytes()) {
				h.t.Fatalf("a retried GetTask changed the state")
			}
			if m := h.ok(withRequest(&GetTask{Pass: 0}, 1, 2)).Task.Meta; m.ID != 2 {
				h.t.Fatalf("next request leased %+v, want task 2", m)
			}
		}},
		{"errors are replayed", func(h *harness) {
			h.setDataset(1, defaultParams)
			m := h.getTask(0)
			h.fails(withRequest(&GetTask{Pass: 3}, 1, 1), ErrPassAfter)
			r := h.fails(withRequest(&GetTask{Pass: 3}, 1, 1), ErrPassAfter)
			if !r.Duplicate {
				h.t.Fatalf("retry not marked duplicate")
			}
			h.ok(withRequest(&TaskFinished{Meta: m}, 2, 7))
			if r := h.ok(withRequest(&TaskFinished{Meta: m}, 2, 7)); !r.Duplicate || r.Ignored {
				h.t.Fatalf("retried finish %+v, want the first outcome", r)
			}
		}},
		{"retry after too many newer requests is refused", func(h *harness) {
			h.setDataset(1, defaultParams)
			h.ok(withRequest(&GetTask{Pass: 0}, 1, 1))
			for seq := uint64(2); seq <= DedupPerClient; seq++ {
				h.fails(withRequest(&GetTask{Pass: 0}, 1, seq), ErrNoMoreAvailable)
			}
			if r := h.ok(withRequest(&GetTask{Pass: 0}, 1, 1)); !r.Duplicate {
				h.t.Fatalf("request 1 forgotten after %d requests", DedupPerClient)
			}
			h.ok(withRequest(&Tick{}, 1, DedupPerClient+1))
			r := h.rejects(withRequest(&GetTask{Pass: 0}, 1, 1))
			if r.Duplicate {
				h.t.Fatalf("too old retry marked duplicate")
			}
		}},
		{"request id reused for another type is refused", func(h *harness) {
			h.setDataset(1, defaultParams)
			h.ok(withRequest(&GetTask{Pass: 0}, 1, 1))
			h.rejects(withRequest(&Tick{}, 1, 1))
		}},
		{"invalid commands are not remembered", func(h *harness) {
			h.setDataset(1, defaultParams)
			h.rejects(withRequest(&GetTask{Pass: -1}, 1, 1))
			if r := h.ok(withRequest(&GetTask{Pass: 0}, 1, 1)); r.Duplicate {
				h.t.Fatalf("invalid command was remembered")
			}
		}},
		{"join retry keeps its generation", func(h *harness) {
			first := h.ok(withRequest(&Join{Group: "g", Member: memberID(1), NumPeers: 2}, 1, 1))
			before := h.f.SnapshotBytes()
			retry := h.ok(withRequest(&Join{Group: "g", Member: memberID(1), NumPeers: 2}, 1, 1))
			if !retry.Duplicate || retry.Generation != first.Generation {
				h.t.Fatalf("retry %+v, want generation %d", retry, first.Generation)
			}
			if !bytes.Equal(before, h.f.SnapshotBytes()) {
				h.t.Fatalf("a retried join changed the state")
			}
		}},
		{"save-model retry answers whether the lease is still held", func(h *harness) {
			save := func(trainer string, seq uint64) *Result {
				return h.ok(withRequest(&RequestSaveModel{TrainerID: trainer, BlockDur: 2 * time.Second}, 1, seq))
			}
			if r := save("a", 1); !r.Granted || r.Lease != 2*time.Second {
				h.t.Fatalf("first request %+v, want granted for 2s", r)
			}
			h.advance(time.Second)
			// The retry says what remains of the lease, not the lease
			// the first answer gave.
			if r := save("a", 1); !r.Granted || !r.Duplicate || r.Lease != time.Second {
				h.t.Fatalf("retry while a holds the lease %+v, want granted with 1s left", r)
			}
			h.advance(time.Second + time.Second/2) // a's lease ended at +2s
			if r := save("b", 2); !r.Granted {
				h.t.Fatalf("b's request after a's lease %+v, want granted", r)
			}
			before := h.f.SnapshotBytes()
			if r := save("a", 1); r.Granted || !r.Duplicate || r.Lease != 0 {
				h.t.Fatalf("a's retry while b holds the lease %+v, want a duplicate that is not granted", r)
			}
			if !bytes.Equal(before, h.f.SnapshotBytes()) {
				h.t.Fatalf("a replayed save-model request changed the state")
			}
			h.wantHolder("b")
			// Expired but not yet ticked: the retry's own stamp decides.
			h.advance(3 * time.Second)
			if r := h.ok(withRequest(&RequestSaveModel{TrainerID: "b", BlockDur: 2 * time.Second}, 1, 2)); r.Granted {
				h.t.Fatalf("b's retry after its lease ended %+v, want not granted", r)
			}
		}},
		{"task retry after its lease ended is stale", func(h *harness) {
			h.setDataset(2, defaultParams)
			first := h.ok(withRequest(&GetTask{Pass: 0}, 1, 1))
			if first.Task.Lease != defaultParams.TaskTimeout || first.Task.Pass != 0 {
				h.t.Fatalf("task %+v, want pass 0 and a lease of the task timeout", first.Task)
			}
			h.advance(4 * time.Second)
			r := h.ok(withRequest(&GetTask{Pass: 0}, 1, 1))
			if !r.Duplicate || r.Task.Meta != first.Task.Meta || r.Task.Lease != defaultParams.TaskTimeout-4*time.Second {
				h.t.Fatalf("retry within the lease %+v, want the same task with 6s left", r.Task)
			}
			h.ok(withRequest(&RenewLease{Meta: first.Task.Meta}, 1, 2))
			h.advance(defaultParams.TaskTimeout)
			h.tick() // the lease expires; the task goes back to todo
			h.fails(withRequest(&GetTask{Pass: 0}, 1, 1), ErrStaleEpoch)
			h.fails(withRequest(&RenewLease{Meta: first.Task.Meta}, 1, 2), ErrStaleEpoch)
			if m := h.getTask(0); m.ID != 2 {
				h.t.Fatalf("next lease %+v, want task 2 (task 1 went to the end of todo)", m)
			}
		}},
		{"renewal retry says what remains of the renewed lease", func(h *harness) {
			h.setDataset(2, defaultParams)
			m := h.getTask(0)
			h.advance(3 * time.Second)
			renew := withRequest(&RenewLease{Meta: m}, 1, 1)
			if r := h.ok(renew); r.Lease != defaultParams.TaskTimeout {
				h.t.Fatalf("renewal %+v, want a lease of the task timeout", r)
			}
			h.advance(4 * time.Second)
			before := h.f.SnapshotBytes()
			r := h.ok(withRequest(&RenewLease{Meta: m}, 1, 1))
			if !r.Duplicate || r.Lease != defaultParams.TaskTimeout-4*time.Second {
				h.t.Fatalf("retry 4s after the renewal %+v, want a duplicate with %v left", r, defaultParams.TaskTimeout-4*time.Second)
			}
			if !bytes.Equal(before, h.f.SnapshotBytes()) {
				h.t.Fatalf("a replayed renewal changed the state")
			}
			// A later renewal moved the deadline: the retry of the first
			// says how long the lease now lasts.
			h.ok(&RenewLease{Meta: m})
			h.advance(time.Second)
			if r := h.ok(withRequest(&RenewLease{Meta: m}, 1, 1)); r.Lease != defaultParams.TaskTimeout-time.Second {
				h.t.Fatalf("retry after a later renewal %+v, want %v left", r, defaultParams.TaskTimeout-time.Second)
			}
		}},
		{"a dataset request's first outcome is read without applying", func(h *harness) {
			if _, ok := h.f.DatasetOutcome(RequestID{Client: clientID(1), Seq: 1}); ok {
				h.t.Fatalf("an unknown request has an outcome")
			}
			first := h.ok(withRequest(in("a", &SetDataset{Params: defaultParams, Chunks: testChunks(2)}), 1, 1))
			h.ok(withRequest(in("b", part("u", 0, testChunks(2))), 2, 1))
			h.ok(withRequest(in("b", &DatasetCommit{UploadID: "u", Parts: 1, NumChunks: 2, Params: defaultParams}), 2, 2))
			h.ok(withRequest(in("a", &SetDataset{Params: defaultParams, Chunks: testChunks(3)}), 1, 2))
			h.ok(withRequest(&Tick{}, 1, 3))
			for _, c := range []struct {
				req     RequestID
				ignored bool
			}{
				{RequestID{Client: clientID(1), Seq: 1}, false},
				{RequestID{Client: clientID(2), Seq: 2}, false},
				{RequestID{Client: clientID(1), Seq: 2}, true},
			} {
				r, ok := h.f.DatasetOutcome(c.req)
				if !ok || r.Code != CodeOK || r.Ignored != c.ignored || !r.Duplicate || r.Clock == 0 {
					h.t.Fatalf("%v: %+v, %v; want ignored %v", c.req, r, ok, c.ignored)
				}
			}
			if r, _ := h.f.DatasetOutcome(RequestID{Client: clientID(1), Seq: 1}); r.Clock != first.Clock {
				h.t.Fatalf("outcome at %d, applied at %d", r.Clock, first.Clock)
			}
			// Neither another command's id nor a part's is a dataset request.
			for _, req := range []RequestID{{Client: clientID(1), Seq: 3}, {Client: clientID(2), Seq: 1}, {}} {
				if _, ok := h.f.DatasetOutcome(req); ok {
					h.t.Fatalf("%v has a dataset outcome", req)
				}
			}
		}},
		{"clients are forgotten after the window", func(h *harness) {
			h.setDataset(2, defaultParams)
			h.ok(withRequest(&GetTask{Pass: 0}, 1, 1))
			h.ok(withRequest(&Tick{}, 2, 1))
			if n := h.f.Stats(DefaultJob).DedupClients; n != 2 {
				h.t.Fatalf("%d dedup clients, want 2", n)
			}
			h.advance(DedupWindow)
			h.tick()
			if n := h.f.Stats(DefaultJob).DedupClients; n != 2 {
				h.t.Fatalf("%d dedup clients at the end of the window, want 2", n)
			}
			h.advance(1)
			h.tick()
			if n := h.f.Stats(DefaultJob).DedupClients; n != 0 {
				h.t.Fatalf("%d dedup clients after the window, want 0", n)
			}
			// Forgotten: a retry this late is applied again.
			if r := h.ok(withRequest(&GetTask{Pass: 0}, 1, 1)); r.Duplicate {
				h.t.Fatalf("forgotten request replayed")
			}
		}},
	})
}

// refused applies c and fails the test unless it was refused with want
// (ErrUnknownClient or ErrTooManyClients) without changing the state,
// the clock included.
func (h *harness) refused(c Command, want error) *Result {
	h.t.Helper()
	before := h.f.SnapshotBytes()
	r := h.fails(c, want)
	if r.Duplicate || r.Clock != 0 || !r.rejected() || r.Message == "" {
		h.t.Fatalf("%v refused as %+v, want a rejection with a message", c.Type(), r)
	}
	if !bytes.Equal(before, h.f.SnapshotBytes()) {
		h.t.Fatalf("%v refused (%s) changed the state", c.Type(), r.Message)
	}
	return r
}

// atProtocol2 raises the harness's cluster to Protocol2 and lowers its
// de-duplication table to maxActive clients within the window.
func (h *harness) atProtocol2(maxActive int) {
	h.t.Helper()
	h.ok(&SetProtocol{Level: Protocol2})
	withMaxActive(h.f, maxActive)
}

// dedupClients is how many clients the de-duplication table holds.
func (h *harness) dedupClients() int { return h.f.Stats(DefaultJob).DedupClients }

// TestDedupWindow: from Protocol2 on, no client used within DedupWindow is
// forgotten, whatever other clients do; a new client past the table's
// bound, and a client id the table does not hold past sequence 1, are
// refused and change nothing.
func TestDedupWindow(t *testing.T) {
	runScenarios(t, []scenario{
		{"a flood of new clients forgets no client within the window", func(h *harness) {
			h.atProtocol2(4)
			h.setDataset(3, defaultParams)
			first := h.ok(withRequest(&GetTask{Pass: 0}, 1, 1))
			swap := h.ok(withRequest(&KVCompareAndSet{Key: "k", Value: []byte("a")}, 1, 2))
			for n := byte(2); n <= 4; n++ {
				h.ok(withRequest(&Tick{}, n, 1))
			}
			for n := byte(5); n <= 20; n++ {
				h.advance(100 * time.Millisecond)
				h.refused(withRequest(&Tick{}, n, 1), ErrTooManyClients)
			}
			if n := h.dedupClients(); n != 4 {
				h.t.Fatalf("%d clients held, want the 4 admitted", n)
			}
			retry := h.ok(withRequest(&GetTask{Pass: 0}, 1, 1))
			if !retry.Duplicate || retry.Task.Meta != first.Task.Meta {
				h.t.Fatalf("retried GetTask after the flood %+v, want task %+v replayed", retry.Task, first.Task.Meta)
			}
			h.ok(withRequest(&KVCompareAndSet{Key: "k", Version: 1, Value: []byte("b")}, 2, 2))
			again := h.ok(withRequest(&KVCompareAndSet{Key: "k", Value: []byte("a")}, 1, 2))
			if !again.Duplicate || !again.Swapped || again.KV.Version != swap.KV.Version {
				h.t.Fatalf("retried swap after the flood %+v, want swapped at version %d", again, swap.KV.Version)
			}
		}},
		{"a new client is admitted once a client's window has passed", func(h *harness) {
			h.atProtocol2(2)
			h.ok(withRequest(&Tick{}, 1, 1))
			h.advance(time.Minute)
			h.ok(withRequest(&Tick{}, 2, 1))
			h.advance(DedupWindow - time.Minute)
			h.refused(withRequest(&Tick{}, 3, 1), ErrTooManyClients) // client 1 is at the end of its window
			h.advance(1)
			// No Tick has forgotten client 1 yet: the command's own time
			// decides, and its apply forgets it.
			r := h.ok(withRequest(&Tick{}, 3, 1))
			if r.Duplicate || h.dedupClients() != 2 {
				h.t.Fatalf("client 3 %+v with %d clients held, want a new request and clients 2 and 3", r, h.dedupClients())
			}
			h.refused(withRequest(&Tick{}, 1, 2), ErrUnknownClient) // client 1 was forgotten
			h.refused(withRequest(&Tick{}, 4, 1), ErrTooManyClients)
		}},
		{"a forgotten client's late retry is refused, never applied", func(h *harness) {
			h.atProtocol2(8)
			h.setDataset(3, defaultParams)
			h.ok(withRequest(&GetTask{Pass: 0}, 1, 1))
			first := h.ok(withRequest(&GetTask{Pass: 0}, 1, 2))
			h.advance(DedupWindow + time.Second)
			h.tick()
			if n := h.dedupClients(); n != 0 {
				h.t.Fatalf("%d clients held after the window, want 0", n)
			}
			h.refused(withRequest(&GetTask{Pass: 0}, 1, 2), ErrUnknownClient)
			// The client continues under a new id; task 3 is the next.
			if m := h.ok(withRequest(&GetTask{Pass: 0}, 9, 1)).Task.Meta; m.ID != 3 || m == first.Task.Meta {
				h.t.Fatalf("the new client's GetTask leased %+v, want task 3", m)
			}
		}},
		{"a client id never seen is refused past sequence 1", func(h *harness) {
			h.atProtocol2(8)
			r := h.refused(withRequest(&CreateJob{}, 1, 2), ErrUnknownClient)
			if !strings.Contains(r.Message, clientID(1).String()+"/2") {
				h.t.Fatalf("refusal %q does not name the request id", r.Message)
			}
			h.ok(withRequest(&CreateJob{}, 1, 1))
			h.ok(withRequest(&CreateJob{}, 1, 2))
			h.ok(withRequest(&CreateJob{}, 2, 0)) // sequence 0 starts a client too
		}},
		{"retries and invalid commands do not take room", func(h *harness) {
			h.atProtocol2(1)
			h.rejects(withRequest(&GetTask{Pass: -1}, 2, 1))
			h.ok(withRequest(&Tick{}, 1, 1))
			h.advance(DedupWindow)
			if r := h.ok(withRequest(&Tick{}, 1, 1)); !r.Duplicate {
				h.t.Fatalf("retry at the end of the window %+v, want a duplicate", r)
			}
			h.refused(withRequest(&Tick{}, 2, 1), ErrTooManyClients)
		}},
		{"a table held at Protocol1 keeps its clients at Protocol2", func(h *harness) {
			h.ok(withRequest(&Tick{}, 1, 1))
			h.ok(withRequest(&Tick{}, 2, 5))
			h.atProtocol2(2)
			if r := h.ok(withRequest(&Tick{}, 2, 5)); !r.Duplicate {
				h.t.Fatalf("retry across the level change %+v, want a duplicate", r)
			}
			h.ok(withRequest(&Tick{}, 2, 6))
			h.refused(withRequest(&Tick{}, 3, 1), ErrTooManyClients)
		}},
	})
}

// TestDedupProtocol1 keeps the table of releases before Protocol2: the
// least recently used client is evicted to take a new one, however
// recently it was used, and a forgotten client's request past sequence 1
// is applied as new.
func TestDedupProtocol1(t *testing.T) {
	h := newHarness(t)
	h.ok(withRequest(&CreateJob{Header: Header{Job: "a"}}, 1, 3))
	for n := range DedupMaxClients {
		h.ok(&Tick{Header: Header{Request: RequestID{Client: uuid.UUID{0: 0xee, 12: byte(n >> 16), 13: byte(n >> 8), 14: byte(n)}, Seq: 1}}})
	}
	if n := h.dedupClients(); n != DedupMaxClients {
		h.t.Fatalf("%d clients held, want %d", n, DedupMaxClients)
	}
	h.ok(withRequest(&DeleteJob{Header: Header{Job: "a"}}, 2, 1))
	h.ok(withRequest(&CreateJob{Header: Header{Job: "a"}}, 2, 2))
	if r := h.ok(withRequest(&CreateJob{Header: Header{Job: "a"}}, 1, 3)); r.Duplicate || !r.Ignored {
		h.t.Fatalf("client 1's retry after %d new clients %+v, want it applied again (ignored: the job exists)", DedupMaxClients, r)
	}
}

// owned sets c's request id to client n, sequence seq, under owner o.
func owned(c Command, n byte, seq uint64, o byte) Command {
	c.Hdr().Request = RequestID{Client: clientID(n), Seq: seq, Owner: [16]byte{o}}
	return c
}

// TestDedupOwner: from Protocol3 on, a client id is bound to the owner
// (the token) of its first request: another owner can neither replay its
// answers, nor add requests under it, nor close it, and each refusal
// changes nothing, on this replica and on one restored from a snapshot.
// Below Protocol3 a command with an owner is invalid.
func TestDedupOwner(t *testing.T) {
	h := newHarness(t)
	h.setDataset(3, defaultParams)
	if r := h.apply(owned(&GetTask{Pass: 0}, 1, 1, 7)); r.Code != CodeInvalid || !strings.Contains(r.Message, "protocol level 3") {
		t.Fatalf("an owned command at level 1: %+v", r)
	}
	h.ok(&SetProtocol{Level: Protocol3})
	first := h.ok(owned(&GetTask{Pass: 0}, 1, 1, 7))
	before := h.f.SnapshotBytes()
	for _, c := range []Command{
		owned(&GetTask{Pass: 0}, 1, 1, 8),                    // a replay of the owner's answer
		owned(&GetTask{Pass: 0}, 1, 2, 8),                    // a new request under its id
		owned(&TaskFinished{Meta: first.Task.Meta}, 1, 2, 8), // closing its task
		owned(&RequestSaveModel{TrainerID: "t", BlockDur: time.Minute}, 1, 50, 8),
	} {
		h.fails(c, ErrForeignClient)
	}
	if !bytes.Equal(before, h.f.SnapshotBytes()) {
		t.Fatal("a foreign owner's request changed the state")
	}
	if r, ok := h.f.DatasetOutcome(RequestID{Client: clientID(1), Seq: 1, Owner: [16]byte{8}}); ok {
		t.Fatalf("a foreign owner was answered a dataset outcome: %+v", r)
	}
	if o, held := h.f.ClientOwner(clientID(1)); !held || o != [16]byte{7} {
		t.Fatalf("ClientOwner = %v %v", o, held)
	}
	// The owner itself goes on; its replay is still the first answer.
	if r := h.ok(owned(&GetTask{Pass: 0}, 1, 1, 7)); !r.Duplicate || r.Task.Meta != first.Task.Meta {
		t.Fatalf("the owner's retry: %+v", r)
	}
	h.ok(owned(&TaskFinished{Meta: first.Task.Meta}, 1, 2, 7))
	// The binding survives a snapshot.
	g := restored(t, persist(t, h.f))
	if r := g.ApplyEntry(h.index+1, Encode(owned(&GetTask{Pass: 0}, 1, 3, 8))); r.Code != CodeForeignClient {
		t.Fatalf("after a restore, a foreign owner: %+v", r)
	}
}
