package raftnode

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/fsm"
)

// countingRecorder counts what a node reports to its Recorder.
type countingRecorder struct{ committed, applied atomic.Int64 }

func (r *countingRecorder) Committed(d time.Duration) {
	if d > 0 {
		r.committed.Add(1)
	}
}

func (r *countingRecorder) FSMApplied(d time.Duration) {
	if d > 0 {
		r.applied.Add(1)
	}
}

// TestRecorderAndLeaderChanges: the leader reports the time of each of
// its proposals, every node the time of each apply, and every node counts
// the leaders it has seen, one more when leadership moves.
func TestRecorderAndLeaderChanges(t *testing.T) {
	recs := map[string]*countingRecorder{}
	c := newTestClusterWith(t, 3, func(cfg *Config) {
		recs[cfg.ID] = &countingRecorder{}
		cfg.Recorder = recs[cfg.ID]
	})
	leader := c.leader()
	for _, n := range c.nodes {
		waitFor(t, n.ID()+" to see a leader", func() bool { return n.LeaderChanges() >= 1 })
	}
	before := map[string]int64{}
	for _, n := range c.nodes {
		before[n.Name()] = recs[n.Name()].applied.Load()
	}
	committed := recs[leader.Name()].committed.Load()
	const writes = 5
	for i := range writes {
		c.apply(&fsm.KVCompareAndSet{Key: "k", Version: uint64(i), Value: []byte{byte(i)}})
	}
	if got := recs[leader.Name()].committed.Load(); got < committed+writes {
		t.Errorf("the leader reported %d proposals after %d writes, from %d", got, writes, committed)
	}
	for _, n := range c.nodes {
		waitFor(t, n.ID()+" to report the applies", func() bool {
			return recs[n.Name()].applied.Load() >= before[n.Name()]+writes
		})
	}

	changes := map[string]uint64{}
	for _, n := range c.nodes {
		changes[n.Name()] = n.LeaderChanges()
	}
	next := 0
	if c.nodes[next] == leader {
		next = 1
	}
	c.transferTo(next)
	for _, n := range c.nodes {
		waitFor(t, n.ID()+" to count the new leader", func() bool { return n.LeaderChanges() > changes[n.Name()] })
	}
}
