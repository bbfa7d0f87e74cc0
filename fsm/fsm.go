package fsm

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
)

// FSM is the replicated state machine: ApplyEntry, Snapshot and Restore are
// what a consensus library drives (raftnode adapts them to raft.FSM), and
// queries are safe to call concurrently with them.
type FSM struct {
	mu      sync.RWMutex
	s       *state
	applied atomic.Uint64

	notifyMu sync.Mutex
	changed  chan struct{} // closed after the next apply, when non-nil
	// waits are the allgather long polls waiting, by group (wait.go).
	// They are not state: no snapshot or hash sees them.
	waits map[string]*groupWaiters
	// kvWaits are the register long polls waiting, by job and key
	// (kvwait.go); not state either.
	kvWaits map[string]map[string]*kvWaiters

	halted   chan struct{} // closed when the FSM halts
	haltErr  error         // why; set before halted is closed, under mu
	haltOnce sync.Once
}

// New returns an empty FSM.
func New() *FSM { return &FSM{s: newState(), halted: make(chan struct{})} }

// ApplyEntry applies one encoded command at log index index. Bytes that do
// not decode give a CodeInvalid result and change nothing but the applied
// index; an unknown command type marked ignorable is skipped. An entry of
// an unknown command version or non-ignorable type (ErrUnsupported) halts
// the FSM: it and every later entry are left unapplied, so that this
// replica stops rather than diverges.
func (f *FSM) ApplyEntry(index uint64, data []byte) *Result {
	c, err := Decode(data)
	f.mu.Lock()
	var r *Result
	switch {
	case f.haltErr != nil:
		f.mu.Unlock()
		return haltedResult(f.haltErr)
	case errors.Is(err, ErrUnsupported):
		f.haltErr = fmt.Errorf("fsm: log entry %d: %w; upgrade this replica to a version that knows it", index, err)
		r = haltedResult(f.haltErr)
		f.mu.Unlock()
		f.haltOnce.Do(func() { close(f.halted) })
		return r
	case errors.Is(err, errUnknownType):
		r = &Result{Ignored: true}
	case err != nil:
		r = errResult(err)
	default:
		r = f.s.apply(c)
	}
	changes, kvChanges := f.s.takeChanges(), f.s.takeKVChanges()
	if index > f.applied.Load() {
		f.applied.Store(index)
	}
	f.mu.Unlock()
	f.notify(changes, kvChanges)
	return r
}

func haltedResult(err error) *Result {
	return &Result{Code: CodeInvalid, Message: err.Error()}
}

// Halted returns a channel that is closed when the FSM meets a log entry
// it cannot decode because a newer version wrote it. The replica must then
// stop: HaltErr says why.
func (f *FSM) Halted() <-chan struct{} { return f.halted }

// HaltErr returns why the FSM halted, or nil.
func (f *FSM) HaltErr() error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.haltErr
}

// Changed returns a channel that is closed after the next applied entry or
// restore. Long polls wait on it and then query again; the allgather watch
// waits on WatchWait instead, which wakes it only for its group.
func (f *FSM) Changed() <-chan struct{} {
	f.notifyMu.Lock()
	defer f.notifyMu.Unlock()
	if f.changed == nil {
		f.changed = make(chan struct{})
	}
	return f.changed
}

// notify wakes what waits on the next apply, the watches of the groups
// and members in changes, and those of the register keys in kvChanges.
func (f *FSM) notify(changes []groupChange, kvChanges []kvChange) {
	f.notifyMu.Lock()
	ch := f.changed
	f.changed = nil
	for _, c := range changes {
		f.wakeLocked(c)
	}
	for _, c := range kvChanges {
		f.wakeKVLocked(c)
	}
	f.notifyMu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// AppliedIndex returns the index of the last applied entry.
func (f *FSM) AppliedIndex() uint64 { return f.applied.Load() }

// Snapshot returns a point-in-time copy of the state. It copies the task
// array and small tables under the lock; the encoding happens in
// Snapshot.WriteTo, concurrently with further applies. A halted FSM
// refuses, with its HaltErr.
func (f *FSM) Snapshot() (*Snapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.haltErr != nil {
		// The state misses an entry: persisting it would make the skip
		// permanent.
		return nil, f.haltErr
	}
	return &Snapshot{s: f.s.snapshotCopy(), index: f.applied.Load()}, nil
}

// Restore replaces the state with a snapshot written by Snapshot.WriteTo
// or WriteSnapshot, and closes rc. A snapshot that does not decode, or
// breaks an invariant that Apply keeps, is refused and changes nothing.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("fsm restore: %w", err)
	}
	s, err := decodeState(b)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.s = s
	f.mu.Unlock()
	f.notifyAll()
	return nil
}

// WriteSnapshot writes the current state in the snapshot format.
func (f *FSM) WriteSnapshot(w io.Writer) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return encodeState(w, f.s)
}

// StateHash returns the SHA-256 of the snapshot encoding, in hex. Replicas
// that applied the same log have the same hash.
func (f *FSM) StateHash() string {
	h := sha256.New()
	if err := f.WriteSnapshot(h); err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}

// SnapshotBytes returns the snapshot encoding of the current state.
func (f *FSM) SnapshotBytes() []byte {
	var b bytes.Buffer
	_ = f.WriteSnapshot(&b) // a bytes.Buffer does not fail
	return b.Bytes()
}

// Snapshot is a point-in-time copy of the state, taken by FSM.Snapshot.
// Later applies do not change it, and it holds no resources: dropping it
// releases it.
type Snapshot struct {
	s     *state
	index uint64
}

// Index is the index of the last entry applied to the copy.
func (sn *Snapshot) Index() uint64 { return sn.index }

// WriteTo writes to w the snapshot encoding of the copy: the bytes
// WriteSnapshot would have written when the copy was taken. It may run
// while the FSM applies further entries, and it does not close w.
func (sn *Snapshot) WriteTo(w io.Writer) (int64, error) {
	cw := &countingWriter{w: w}
	err := encodeState(cw, sn.s)
	return cw.n, err
}

// countingWriter counts the bytes written through it, for WriteTo's result.
type countingWriter struct {
	w io.Writer
	n int64
}

func (cw *countingWriter) Write(p []byte) (int, error) {
	n, err := cw.w.Write(p)
	cw.n += int64(n)
	return n, err
}
