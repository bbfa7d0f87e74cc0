package fsm

import (
	"bytes"
	"sync"
	"testing"
	"time"
)

func TestChangedAndAppliedIndex(t *testing.T) {
	f := New()
	ch := f.Changed()
	if f.Changed() != ch {
		t.Fatalf("Changed returned a new channel before anything changed")
	}
	r := f.ApplyEntry(7, Encode(&Tick{Header: Header{Now: t0}}))
	if r.Err() != nil {
		t.Fatalf("tick: %v", r.Err())
	}
	select {
	case <-ch:
	default:
		t.Fatalf("Changed not closed by an apply")
	}
	if f.AppliedIndex() != 7 {
		t.Fatalf("applied index %d, want 7", f.AppliedIndex())
	}
	f.ApplyEntry(3, []byte("garbage")) // an older index does not move it back
	if f.AppliedIndex() != 7 {
		t.Fatalf("applied index %d, want 7", f.AppliedIndex())
	}
	ch = f.Changed()
	if err := f.Restore(readCloser(applyLog(setupLog()).SnapshotBytes())); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	default:
		t.Fatalf("Changed not closed by a restore")
	}
}

// TestConcurrentQueries runs every query while entries are applied and
// snapshots persisted; the race detector checks the locking.
func TestConcurrentQueries(t *testing.T) {
	f := New()
	log := setupLog()
	var wg sync.WaitGroup
	done := make(chan struct{})
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				case <-f.Changed():
				}
				f.Stats(DefaultJob)
				f.Task(DefaultJob, 1)
				f.Groups(DefaultJob)
				f.Group(DefaultJob, "g")
				f.Watch(DefaultJob, "g", memberID(1), 1)
				f.Registrations()
				f.RegistrationByRaftAddr("r:1")
				f.NextDeadline()
				f.SaveModelHolder(DefaultJob)
				f.StateHash()
			}
		}()
	}
	index := uint64(0)
	for round := range 50 {
		for _, e := range log {
			index++
			f.ApplyEntry(index, e)
		}
		index++
		f.ApplyEntry(index, Encode(&Tick{Header: Header{Now: t0 + int64(round)*int64(time.Hour)}}))
		if round%10 == 0 {
			persist(t, f)
		}
	}
	close(done)
	wg.Wait()
}

func TestRestoreRefuses(t *testing.T) {
	good := applyLog(setupLog()).SnapshotBytes()
	corrupt := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"bad magic", append([]byte("XXXXX"), good[5:]...)},
		{"newer version", append([]byte(snapshotMagic+string(rune(snapshotVersion+1))), good[6:]...)},
		{"version 0", append([]byte(snapshotMagic+"\x00"), good[6:]...)},
		{"truncated", good[:len(good)-1]},
		{"trailing byte", append(append([]byte{}, good...), 0)},
	}
	for _, tc := range corrupt {
		t.Run(tc.name, func(t *testing.T) { wantRefused(t, tc.b) })
	}
	// Each mutation breaks one invariant that Apply keeps.
	mutations := []struct {
		name string
		fn   func(s *state)
	}{
		{"clock before 1970", func(s *state) { s.clock = -1 }},
		{"clock after 2116", func(s *state) { s.clock = maxNow + 1 }},
		{"grace too long", func(s *state) { s.graceUntil = s.clock + int64(MaxGrace) + 1 }},
		{"tasks without dataset", func(s *state) { dj(s).ds = nil }},
		{"negative pass", func(s *state) { dj(s).pass = -1 }},
		{"pending without deadline", func(s *state) { dj(s).tasks[dj(s).queues[qPending].head].deadline = 0 }},
		{"pending out of order", func(s *state) { dj(s).tasks[dj(s).queues[qPending].head].deadline = s.clock + int64(time.Hour) }},
		{"lease beyond any new lease", func(s *state) { dj(s).tasks[dj(s).queues[qPending].tail].deadline = s.clock + int64(time.Hour) }},
		{"pass epoch after epoch", func(s *state) { dj(s).tasks[0].passEpoch = dj(s).tasks[0].epoch + 1 }},
		{"lease deadline without holder", func(s *state) { dj(s).save.holder = "" }},
		{"open group with a member gone", func(s *state) { dj(s).groups["g"].members[0].left = true }},
		{"complete group short of members", func(s *state) { dj(s).groups["g"].status = groupComplete }},
		{"group without active member", func(s *state) { dj(s).groups["done"].members[0].left = true }},
		{"member generation from the future", func(s *state) { dj(s).groups["g"].members[0].gen = s.nextGen + 1 }},
		{"group numPeers 0", func(s *state) { dj(s).groups["g"].numPeers = 0 }},
		{"empty node id", func(s *state) { s.nodes["n1"] = Registration{ID: ""} }},
		{"bad upload path", func(s *state) { dj(s).uploads["u"].paths[0] = "" }},
		{"too many dedup entries", func(s *state) {
			c := s.dedup.head
			for len(c.entries) <= DedupPerClient {
				c.entries = append(c.entries, c.entries[0])
			}
		}},
	}
	for _, tc := range mutations {
		t.Run(tc.name, func(t *testing.T) {
			s := applyLog(setupLog()).s
			tc.fn(s)
			var b bytes.Buffer
			if err := encodeState(&b, s); err != nil {
				t.Fatal(err)
			}
			wantRefused(t, b.Bytes())
		})
	}
}

// wantRefused fails the test unless Restore refuses b and keeps the state
// it had.
func wantRefused(t *testing.T, b []byte) {
	t.Helper()
	f := applyLog(setupLog()[:3])
	before := f.SnapshotBytes()
	if err := f.Restore(readCloser(b)); err == nil {
		t.Fatalf("Restore accepted a bad snapshot")
	}
	if !bytes.Equal(before, f.SnapshotBytes()) {
		t.Fatalf("a refused Restore changed the state")
	}
}

// dj returns the default job of s.
func dj(s *state) *job { return s.jobs[DefaultJob] }
