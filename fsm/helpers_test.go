package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/google/uuid"
	"pgregory.net/rapid"
)

// t0 is the FSM time the table tests start at.
const t0 = int64(1_700_000_000) * int64(time.Second)

// defaultParams are the dataset settings of most table tests.
var defaultParams = DatasetParams{ChunksPerTask: 1, TaskTimeout: 10 * time.Second, FailureMax: 2}

// harness applies commands to one FSM at increasing log indexes, stamped
// with its own leader clock now.
type harness struct {
	t     *testing.T
	f     *FSM
	index uint64
	now   int64
}

// newHarness returns a harness on a fresh FSM at time t0. When the test
// ends it checks that the state survives a snapshot round trip.
func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, f: New(), now: t0}
	t.Cleanup(func() { checkRoundTrip(t, h.f) })
	return h
}

// advance moves the leader clock forward by d.
func (h *harness) advance(d time.Duration) { h.now += int64(d) }

// apply stamps c with the leader clock, encodes it and applies it.
func (h *harness) apply(c Command) *Result {
	h.t.Helper()
	c.Hdr().Now = h.now
	return h.applyBytes(Encode(c))
}

func (h *harness) applyBytes(b []byte) *Result {
	h.t.Helper()
	h.index++
	r := h.f.ApplyEntry(h.index, b)
	if r == nil {
		h.t.Fatalf("ApplyEntry returned nil")
	}
	return r
}

// ok applies c and fails the test unless it succeeded.
func (h *harness) ok(c Command) *Result {
	h.t.Helper()
	r := h.apply(c)
	if err := r.Err(); err != nil {
		h.t.Fatalf("%v: unexpected error %v", c.Type(), err)
	}
	return r
}

// fails applies c and fails the test unless it failed with want.
func (h *harness) fails(c Command, want error) *Result {
	h.t.Helper()
	r := h.apply(c)
	if err := r.Err(); !errors.Is(err, want) {
		h.t.Fatalf("%v: got error %v, want %v", c.Type(), err, want)
	}
	return r
}

// ignored applies c and fails the test unless it was accepted as a no-op.
func (h *harness) ignored(c Command) {
	h.t.Helper()
	if r := h.ok(c); !r.Ignored {
		h.t.Fatalf("%v: not ignored: %+v", c.Type(), r)
	}
}

// invalid applies b and fails the test unless it was rejected as invalid
// without changing the snapshot bytes.
func (h *harness) invalid(b []byte) *Result {
	h.t.Helper()
	before := h.f.SnapshotBytes()
	r := h.applyBytes(b)
	if r.Code != CodeInvalid || !errors.Is(r.Err(), ErrInvalid) {
		h.t.Fatalf("got %v (%s), want CodeInvalid", r.Code, r.Message)
	}
	if !bytes.Equal(before, h.f.SnapshotBytes()) {
		h.t.Fatalf("invalid command (%s) changed the state", r.Message)
	}
	return r
}

// rejects stamps and applies c, and fails the test unless it was rejected
// as invalid without changing the snapshot bytes.
func (h *harness) rejects(c Command) *Result {
	h.t.Helper()
	c.Hdr().Now = h.now
	return h.invalid(Encode(c))
}

func (h *harness) tick() { h.t.Helper(); h.ok(&Tick{}) }

func (h *harness) setDataset(numChunks int, p DatasetParams) {
	h.t.Helper()
	h.ok(&SetDataset{Params: p, Chunks: testChunks(numChunks)})
}

// getTask leases a task of pass and returns its meta.
func (h *harness) getTask(pass int) TaskMeta {
	h.t.Helper()
	r := h.ok(&GetTask{Pass: pass})
	if r.Task == nil {
		h.t.Fatalf("GetTask(%d) returned no task", pass)
	}
	return r.Task.Meta
}

func (h *harness) finish(m TaskMeta) { h.t.Helper(); h.ok(&TaskFinished{Meta: m}) }
func (h *harness) fail(m TaskMeta)   { h.t.Helper(); h.ok(&TaskFailed{Meta: m}) }

// wantTask fails the test unless task id is in queue with the given epoch
// and failure count.
func (h *harness) wantTask(id int, queue string, epoch, failures int) TaskState {
	h.t.Helper()
	ts, err := h.f.Task(DefaultJob, id)
	if err != nil {
		h.t.Fatalf("Task(%d): %v", id, err)
	}
	if ts.Queue != queue || ts.Meta.Epoch != epoch || ts.Failures != failures {
		h.t.Fatalf("task %d: %+v, want queue %s epoch %d failures %d", id, ts, queue, epoch, failures)
	}
	return ts
}

// testChunks returns n chunks spread over three files.
func testChunks(n int) []Chunk {
	out := make([]Chunk, n)
	for i := range out {
		out[i] = Chunk{Path: fmt.Sprintf("/data/train-%02d.recordio", i%3), Offset: int64(i) * 4096, Records: 100}
	}
	return out
}

// memberID returns a deterministic member id for tests.
func memberID(n byte) uuid.UUID { return uuid.UUID{15: n, 0: 0xaa} }

// clientID returns a deterministic client id for tests.
func clientID(n byte) uuid.UUID { return uuid.UUID{15: n, 0: 0xcc} }

// persist writes f's snapshot through Snapshot and WriteTo.
func persist(t rapid.TB, f *FSM) []byte {
	t.Helper()
	sn, err := f.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	var b bytes.Buffer
	n, err := sn.WriteTo(&b)
	if err != nil {
		t.Fatalf("WriteTo: %v", err)
	}
	if n != int64(b.Len()) {
		t.Fatalf("WriteTo reported %d bytes, wrote %d", n, b.Len())
	}
	return b.Bytes()
}

func readCloser(b []byte) io.ReadCloser { return io.NopCloser(bytes.NewReader(b)) }

// restored returns a fresh FSM restored from snapshot b.
func restored(t rapid.TB, b []byte) *FSM {
	t.Helper()
	g := New()
	if err := g.Restore(readCloser(b)); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	return g
}

// checkRoundTrip restores f's snapshot, written both by Snapshot.WriteTo
// and by WriteSnapshot, into fresh FSMs and compares their snapshot bytes.
func checkRoundTrip(t rapid.TB, f *FSM) {
	t.Helper()
	want := f.SnapshotBytes()
	var w bytes.Buffer
	if err := f.WriteSnapshot(&w); err != nil {
		t.Fatalf("WriteSnapshot: %v", err)
	}
	for _, c := range []struct {
		name string
		b    []byte
	}{{"Snapshot.WriteTo", persist(t, f)}, {"WriteSnapshot", w.Bytes()}} {
		if !bytes.Equal(c.b, want) {
			t.Errorf("%s wrote other bytes than SnapshotBytes", c.name)
		}
		if got := restored(t, c.b).SnapshotBytes(); !bytes.Equal(got, want) {
			t.Errorf("%s: restored state differs: %d bytes, want %d", c.name, len(got), len(want))
		}
	}
}
