package raftnode

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/raftmaster/raftmaster/fsm"
)

// skewedClock is a wall clock off by an offset that a test can change.
type skewedClock struct{ off atomic.Int64 }

func (s *skewedClock) now() time.Time      { return time.Now().Add(time.Duration(s.off.Load())) }
func (s *skewedClock) set(d time.Duration) { s.off.Store(int64(d)) }

// leaseTest sets a one-task dataset with a short lease and leases the
// task; the trainer then "dies".
func leaseTest(c *testCluster) fsm.TaskMeta {
	c.t.Helper()
	c.apply(&fsm.SetDataset{
		Params: fsm.DatasetParams{ChunksPerTask: 1, TaskTimeout: 2 * time.Second, FailureMax: 3},
		Chunks: []fsm.Chunk{{Path: "/d/a", Records: 1}},
	})
	r := c.apply(&fsm.GetTask{Pass: 0})
	if r.Task == nil {
		c.t.Fatalf("GetTask: %+v", r)
	}
	return r.Task.Meta
}

// waitExpired waits until every replica sees the lease of m expired.
func (c *testCluster) waitExpired(m fsm.TaskMeta) {
	c.t.Helper()
	waitFor(c.t, "the dead trainer's lease to expire on every replica", func() bool {
		for _, n := range c.nodes {
			ts, err := n.FSM().Task(fsm.DefaultJob, m.ID)
			if err != nil || ts.Queue != "todo" || ts.Failures != 1 {
				return false
			}
		}
		return true
	})
}

// transferTo moves leadership to node i.
func (c *testCluster) transferTo(i int) {
	c.t.Helper()
	waitFor(c.t, "leadership to move to "+c.nodes[i].ID(), func() bool {
		if c.nodes[i].LeaderReady() {
			return true
		}
		if l := c.leader(); l != c.nodes[i] {
			_ = l.TransferLeadership(context.Background(), c.nodes[i].ID())
		}
		return c.nodes[i].LeaderReady()
	})
}

// A leader whose wall clock runs far ahead must not push FSM time ahead:
// after it fails over, a lease it granted still expires in real time.
func TestSkewedLeaderDoesNotFreezeLeases(t *testing.T) {
	for _, skew := range []time.Duration{30 * time.Minute, 10 * 365 * 24 * time.Hour} {
		t.Run(skew.String(), func(t *testing.T) {
			clocks := map[string]*skewedClock{}
			c := newTestClusterWith(t, 3, func(cfg *Config) {
				clocks[cfg.ID] = &skewedClock{}
				cfg.Clock = clocks[cfg.ID].now
			})
			c.leader()
			// Node 0's clock is ahead; it leads while the lease is granted.
			clocks[c.nodes[0].Name()].set(skew)
			c.transferTo(0)
			before := c.nodes[0].FSM().Clock()
			m := leaseTest(c)
			if jump := time.Duration(c.nodes[0].FSM().Clock() - before); jump > time.Minute {
				t.Fatalf("FSM time jumped %v under a leader whose clock is %v ahead", jump, skew)
			}
			c.transferTo(1)
			c.waitExpired(m)
		})
	}
}

// A leader whose wall clock jumps back while it leads must not stop FSM
// time: its leases still expire.
func TestLeaderClockJumpBack(t *testing.T) {
	clocks := map[string]*skewedClock{}
	c := newTestClusterWith(t, 3, func(cfg *Config) {
		clocks[cfg.ID] = &skewedClock{}
		cfg.Clock = clocks[cfg.ID].now
	})
	l := c.leader()
	m := leaseTest(c)
	clocks[l.Name()].set(-3 * time.Hour)
	c.waitExpired(m)
}

// A fail-over grace the state machine would refuse is a start-up error.
func TestFailoverGraceOutOfRange(t *testing.T) {
	for _, grace := range []time.Duration{-time.Second, fsm.MaxGrace + time.Second} {
		cfg := testConfig(t, "n1", t.TempDir())
		cfg.FailoverGrace = grace
		if n, err := New(cfg); err == nil {
			n.Shutdown(context.Background())
			t.Fatalf("New accepted a fail-over grace of %v", grace)
		}
	}
}

// A replica that meets a log entry of an unknown command type stops, and
// no replica applies anything after it. (A follower that never learnt the
// entry was committed, because every node that had applied it stopped,
// does not apply it either.)
func TestUnknownEntryHaltsEveryReplica(t *testing.T) {
	c := newTestCluster(t, 3)
	c.apply(&fsm.RegisterNode{Node: fsm.Registration{ID: "x", RaftAddr: "r", APIAddr: "a"}})
	l := c.leader()
	hashes := map[string]string{}
	waitFor(t, "replicas to agree", func() bool {
		for _, n := range c.nodes {
			if n.FSM().Protocol() != fsm.Protocol {
				return false
			}
			hashes[n.ID()] = n.FSM().StateHash()
		}
		h := func(i int) string { return hashes[c.nodes[i].ID()] }
		return h(0) == h(1) && h(1) == h(2)
	})
	// A command type from a newer version, proposed as a newer leader would.
	newer := append([]byte{1, 0x7e}, fsm.Encode(&fsm.Tick{})[2:]...)
	f := l.Raft().Apply(newer, 5*time.Second)
	_ = f.Error()
	at := f.Index()
	_ = l.Raft().Apply(fsm.Encode(&fsm.RemoveNode{ID: "x"}), time.Second).Error()
	select {
	case <-l.Halted():
	case <-time.After(30 * time.Second):
		t.Fatalf("the leader %s did not halt", l.ID())
	}
	if !errors.Is(l.HaltErr(), fsm.ErrUnsupported) {
		t.Fatalf("%s halted with %v, want ErrUnsupported", l.ID(), l.HaltErr())
	}
	// The others either halt too (they applied the entry after an election)
	// or never apply it, since every node that could commit it stopped.
	waitFor(t, "every replica to halt or stay before the entry", func() bool {
		for _, n := range c.nodes {
			select {
			case <-n.Halted():
			default:
				if n.FSM().AppliedIndex() >= at || n.Raft().State() == raft.Leader {
					return false
				}
			}
		}
		return true
	})
	for _, n := range c.nodes {
		if h := n.FSM().StateHash(); h != hashes[n.ID()] {
			t.Fatalf("%s applied something after the entry it could not decode", n.ID())
		}
	}
}
