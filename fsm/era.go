package fsm

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
)

// Eras. A backup restored into a new cluster (raftmaster restore) carries
// the state of the cluster it was taken from, which may go on running, or
// may have handed out tokens after the backup that its clients still hold:
// register versions (the fencing tokens of compare-and-set), allgather
// generations, task epochs and job numbers. If the new cluster counted on
// from the backup's counters, it would hand the same numbers out again,
// and an old holder's compare-and-set would swap over another's value, or
// its task report would count for another trainer's lease.
//
// So the state a restore starts a cluster from is in the next era (NextEra), and from
// then on every token it hands out lies outside what the old cluster
// could hand out:
//
//   - Register versions, generations and job numbers are uint64 counters.
//     The new era e continues each from e<<EraShift, at least. The old
//     cluster, of era e-1, started its counters at (e-1)<<EraShift (or 0),
//     so it reaches e<<EraShift only after handing out 2^40 (about 10^12)
//     values of one counter: 2^40 compare-and-sets, joins or job
//     creations, which at 10,000 a second take three and a half years.
//     That is the bound the guarantee relies on.
//   - A task's epoch is a uint32 counter of its dispatches. Its wire form
//     carries the era in the bits above 32 (era<<32 | counter), so an
//     epoch of another era is told apart exactly, whatever the counter:
//     TaskFinished and RenewLease answer it ErrStaleEpoch, TaskFailed
//     ignores it. Epoch 0 ("any lease") names no lease and stays 0.
//
// A counter never moves back (max), and an answer for an old token is a
// refusal, not a match: a compare-and-set naming an old version is not
// swapped (no key holds that version here), a watch of an old generation
// answers closed or reconnected, never another join's outcome.
//
// MaxEra bounds the eras so that every token stays below 2^53 and is
// exact in any JSON reader.
const (
	// EraShift places an era in the uint64 counters: era e hands out
	// values above e<<EraShift.
	EraShift = 40
	// MaxEra is the last era: a state restored that often is refused
	// another restore.
	MaxEra = 1<<13 - 1
	// MaxEpoch is the largest task epoch on the wire: the last era's
	// largest counter. Below Protocol2, epochs stay at or below
	// math.MaxInt32, as before eras existed.
	MaxEpoch = MaxEra<<32 | math.MaxUint32
)

// wireEpoch is the epoch a client sees for a lease counter of this era.
func (s *state) wireEpoch(counter uint32) int { return int(s.era<<32 | uint64(counter)) }

// leaseEpoch returns the lease counter a client's epoch names, and false
// for an epoch of another era, which no lease of this cluster has. 0, the
// epoch of no lease in particular, is 0 in every era.
func (s *state) leaseEpoch(epoch int) (uint32, bool) {
	if epoch == 0 {
		return 0, true
	}
	e := uint64(epoch)
	if e>>32 != s.era {
		return 0, false
	}
	return uint32(e), true
}

// startEra moves the state into the next era: every counter continues from
// the era's floor, at least, and the level is at least Protocol2, whose
// snapshot version holds the era. It changes nothing when the eras are
// exhausted.
func (s *state) startEra() error {
	if s.era >= MaxEra {
		return fmt.Errorf("fsm: the state is in era %d, the last: it cannot be restored again", s.era)
	}
	s.era++
	s.protocol = max(s.protocol, Protocol2)
	floor := s.era << EraShift
	s.kvVersion = max(s.kvVersion, floor)
	s.nextGen = max(s.nextGen, floor)
	s.jobSeq = max(s.jobSeq, floor)
	return nil
}

// NextEra reads a snapshot (as Snapshot.WriteTo and a backup hold it) and
// writes to w the same state in the next era, as the first state of a new
// cluster restored from it: every register version, allgather generation,
// task epoch and job number it hands out from then on differs from those
// the cluster the snapshot came from handed out, or will (see Eras). The
// state is written at Protocol2 at least, in snapshot version 5: the new
// cluster runs this release. A snapshot that does not restore, or whose
// era is MaxEra, is refused, and nothing is written.
func NextEra(w io.Writer, snapshot io.Reader) error {
	br := bufio.NewReaderSize(snapshot, maxHeaderBytes)
	head, err := br.Peek(maxHeaderBytes)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return fmt.Errorf("fsm: reading the snapshot: %w", err)
	}
	if len(head) < len(snapshotMagic) || string(head[:len(snapshotMagic)]) != snapshotMagic {
		return errors.New("fsm snapshot: bad magic")
	}
	d := &decoder{buf: head[len(snapshotMagic):]}
	version := d.uvarint()
	if d.err != nil || version < 5 {
		// A state of an earlier level: decoded whole, and written in
		// version 5.
		b, err := io.ReadAll(br)
		if err != nil {
			return fmt.Errorf("fsm: reading the snapshot: %w", err)
		}
		s, err := decodeState(b)
		if err != nil {
			return err
		}
		if err := s.startEra(); err != nil {
			return err
		}
		return encodeState(w, s)
	}
	// A version 5 state keeps its era, level and counters in its header:
	// only the header is rewritten, the rest streamed as it is, so that a
	// state of any size is restored in little memory. The node that starts
	// from it decodes and checks the whole state.
	if version > snapshotVersion {
		return fmt.Errorf("fsm snapshot: version %d, this replica reads 1 to %d", version, snapshotVersion)
	}
	s := newState()
	s.clock = d.varint()
	decodeCounters(d, s, version)
	if d.err != nil {
		return fmt.Errorf("fsm snapshot: header: %w", d.err)
	}
	if err := s.startEra(); err != nil {
		return err
	}
	e := &encoder{}
	encodeHeader(e, s, version)
	if _, err := br.Discard(len(head) - len(d.buf)); err != nil {
		return err
	}
	if _, err := w.Write(e.buf); err != nil {
		return err
	}
	_, err = io.Copy(w, br)
	return err
}

// maxHeaderBytes bounds the header of a snapshot (encodeHeader): a few
// dozen varints.
const maxHeaderBytes = 4 << 10

// Era returns the cluster's era: how many restores led to it.
func (f *FSM) Era() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.s.era
}
