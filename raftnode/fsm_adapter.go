package raftnode

import (
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/raft"
	"github.com/raftmaster/raftmaster/fsm"
)

// raftFSM adapts fsm.FSM to raft.FSM. The shim lives here, with the rest
// of the Raft wiring, so that package fsm depends on no consensus library
// and its encodings can be reused without one (the etcd backend applies
// the same FSM).
type raftFSM struct {
	f *fsm.FSM
	// bytes, when set, counts the bytes of the entries applied.
	bytes *logBytes
	// rec, when set, is told how long each apply takes. The clock is read
	// here, outside package fsm, which stays deterministic.
	rec Recorder
}

var _ raft.FSM = raftFSM{}

// Apply applies a committed log entry and returns its *fsm.Result, which
// Raft hands to the proposer's ApplyFuture.
func (a raftFSM) Apply(l *raft.Log) any {
	if a.bytes == nil && a.rec == nil {
		return a.f.ApplyEntry(l.Index, l.Data)
	}
	start := time.Now()
	r := a.f.ApplyEntry(l.Index, l.Data)
	took := time.Since(start)
	if a.bytes != nil {
		a.bytes.applied(len(l.Data), took)
	}
	if a.rec != nil {
		a.rec.FSMApplied(took)
	}
	return r
}

// Snapshot takes the FSM's point-in-time copy; Raft persists it later,
// while entries go on being applied. A halted FSM refuses, so that no
// snapshot records the entry it could not apply.
func (a raftFSM) Snapshot() (raft.FSMSnapshot, error) {
	start := time.Now()
	sn, err := a.f.Snapshot()
	if err != nil {
		return nil, err
	}
	if a.bytes != nil {
		a.bytes.snapshotted()
	}
	return raftSnapshot{sn: sn, bytes: a.bytes, copying: time.Since(start)}, nil
}

// Restore replaces the FSM's state with a snapshot Persist wrote; the
// log since the last snapshot starts afresh.
func (a raftFSM) Restore(rc io.ReadCloser) error {
	start := time.Now()
	counted := &countingReader{ReadCloser: rc}
	if err := a.f.Restore(counted); err != nil {
		return err
	}
	if a.bytes != nil {
		a.bytes.snapshotted()
		a.bytes.snapshotDone(counted.n, time.Since(start))
	}
	return nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	io.ReadCloser
	n int64
}

func (r *countingReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	r.n += int64(n)
	return n, err
}

// raftSnapshot adapts fsm.Snapshot to raft.FSMSnapshot.
type raftSnapshot struct {
	sn *fsm.Snapshot
	// bytes, when set, is told the snapshot's size and cost once it is
	// written: copying, the time the state machine took to copy the
	// state, and the time Persist takes.
	bytes   *logBytes
	copying time.Duration
}

var _ raft.FSMSnapshot = raftSnapshot{}

// Persist writes the snapshot to sink and closes it, or cancels it on an
// error so that Raft discards the partial snapshot.
func (s raftSnapshot) Persist(sink raft.SnapshotSink) error {
	start := time.Now()
	n, err := s.sn.WriteTo(sink)
	if err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("fsm persist: %w", err)
	}
	if err := sink.Close(); err != nil {
		return err
	}
	if s.bytes != nil {
		s.bytes.snapshotDone(n, s.copying+time.Since(start))
	}
	return nil
}

// Release does nothing: the copy holds no resources.
func (raftSnapshot) Release() {}
