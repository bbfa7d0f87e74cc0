package raftnode

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/raft"
	"github.com/raftmaster/raftmaster/fsm"
)

// inmemNet is a full mesh of raft's in-memory transports, one per node,
// whose links the tests cut and restore.
type inmemNet struct {
	mu    sync.Mutex
	trans map[string]*raft.InmemTransport
}

// newPartitionCluster starts n nodes on in-memory transports.
func newPartitionCluster(t *testing.T, n int, configure func(*Config)) (*testCluster, *inmemNet) {
	t.Helper()
	net := &inmemNet{trans: map[string]*raft.InmemTransport{}}
	c := newTestClusterWith(t, n, func(cfg *Config) {
		_, tr := raft.NewInmemTransportWithTimeout(raft.ServerAddress(cfg.ID), time.Second)
		net.trans[cfg.ID] = tr
		cfg.Transport = tr
		if configure != nil {
			configure(cfg)
		}
	})
	net.heal()
	return c, net
}

// heal connects every pair of nodes in both directions.
func (n *inmemNet) heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for a, ta := range n.trans {
		for b, tb := range n.trans {
			if a != b {
				ta.Connect(tb.LocalAddr(), tb)
			}
		}
	}
}

// isolate cuts every link of id, in both directions.
func (n *inmemNet) isolate(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	self := n.trans[id]
	for other, t := range n.trans {
		if other != id {
			self.Disconnect(t.LocalAddr())
			t.Disconnect(self.LocalAddr())
		}
	}
}

// leaderOtherThan waits for a ready leader that is not old.
func (c *testCluster) leaderOtherThan(old *Node) *Node {
	c.t.Helper()
	var leader *Node
	waitFor(c.t, "a new leader", func() bool {
		for _, n := range c.nodes {
			if n != nil && n != old && n.LeaderReady() {
				leader = n
				return true
			}
		}
		return false
	})
	return leader
}

// TestIsolatedLeaderIsReplaced cuts the leader off: the majority elects a
// new leader that keeps every acknowledged write and goes on; the old
// leader can neither commit nor serve a linearizable read; after the
// partition heals it adopts the majority's log and its own uncommitted
// proposal is gone.
func TestIsolatedLeaderIsReplaced(t *testing.T) {
	c, net := newPartitionCluster(t, 3, nil)
	ctx := context.Background()
	c.setDataset(fsm.RequestID{}, params(time.Hour), dataset(5))
	first := c.apply(&fsm.GetTask{}).Task
	if first == nil {
		t.Fatal("no task")
	}
	old := c.leader()
	net.isolate(old.Name())

	// The isolated leader's proposal cannot reach a quorum.
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if r, err := old.Apply(actx, &fsm.GetTask{Header: fsm.Header{Request: fsm.RequestID{Client: uuid.New(), Seq: 1}}}); err == nil {
		t.Fatalf("isolated leader committed %+v", r)
	}
	if err := old.ReadBarrier(actx); err == nil {
		t.Fatal("isolated leader served a linearizable read")
	}

	leader := c.leaderOtherThan(old)
	if ts, err := leader.FSM().Task(fsm.DefaultJob, first.Meta.ID); err != nil || ts.Queue != "pending" {
		t.Fatalf("acknowledged lease after the partition: %+v, %v", ts, err)
	}
	if _, err := leader.Apply(ctx, &fsm.TaskFinished{Meta: first.Meta}); err != nil {
		t.Fatalf("new leader: %v", err)
	}
	if _, err := leader.Apply(ctx, &fsm.GetTask{}); err != nil {
		t.Fatalf("new leader: %v", err)
	}

	net.heal()
	c.converged()
	if old.IsLeader() && old != c.leader() {
		t.Fatal("two leaders after the heal")
	}
	// One task done, one leased by the new leader; the isolated leader's
	// GetTask never happened.
	if st := old.FSM().Stats(fsm.DefaultJob); st.Done != 1 || st.Pending != 1 || st.Todo != 3 {
		t.Fatalf("old leader's state after the heal: %+v, want 1 done, 1 pending, 3 todo", st)
	}
}

// TestNoQuorumNoProgress isolates every node: nobody can commit. Once the
// links are back a leader is elected and the cluster goes on.
func TestNoQuorumNoProgress(t *testing.T) {
	c, net := newPartitionCluster(t, 3, nil)
	ctx := context.Background()
	c.setDataset(fsm.RequestID{}, params(time.Hour), dataset(3))
	c.converged()
	before := c.leader().FSM().StateHash()
	for _, n := range c.nodes {
		net.isolate(n.Name())
	}
	for _, n := range c.nodes {
		actx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := n.Apply(actx, &fsm.GetTask{})
		cancel()
		if err == nil {
			t.Fatalf("%s committed without a quorum", n.ID())
		}
	}
	for _, n := range c.nodes {
		if h := n.FSM().StateHash(); h != before {
			t.Fatalf("%s changed state without a quorum", n.ID())
		}
	}
	net.heal()
	if r := c.apply(&fsm.GetTask{}); r.Task == nil {
		t.Fatalf("GetTask after the heal: %+v", r)
	}
	c.converged()
}

// TestLaggingFollowerCatchesUpBySnapshot cuts a follower off while the
// leader applies enough entries to compact its log past the follower's
// position; after the heal the follower installs the leader's snapshot
// over the transport and converges.
func TestLaggingFollowerCatchesUpBySnapshot(t *testing.T) {
	c, net := newPartitionCluster(t, 3, func(cfg *Config) {
		cfg.SnapshotThreshold = 32
		cfg.TrailingLogs = cfgTrailing
		cfg.SnapshotInterval = 50 * time.Millisecond
	})
	c.setDataset(fsm.RequestID{}, params(time.Hour), dataset(300))
	c.converged()
	lagging := c.followers()[0]
	net.isolate(lagging.Name())
	leader := c.leader()
	for range 200 {
		r := c.apply(&fsm.GetTask{})
		if r.Task == nil {
			t.Fatalf("GetTask: %+v", r)
		}
		c.apply(&fsm.TaskFinished{Meta: r.Task.Meta})
	}
	behind := lagging.FSM().AppliedIndex()
	waitFor(t, "the leader to compact its log past the follower", func() bool {
		snap, err := strconv.ParseUint(leader.Raft().Stats()["last_snapshot_index"], 10, 64)
		return err == nil && snap > behind+cfgTrailing
	})
	if lagging.FSM().Stats(fsm.DefaultJob).Done != 0 {
		t.Fatal("the cut-off follower applied entries")
	}
	net.heal()
	c.converged()
	if st := lagging.FSM().Stats(fsm.DefaultJob); st.Done != 200 {
		t.Fatalf("follower after catching up: %+v, want 200 done", st)
	}
}

// cfgTrailing is the log the leader keeps after a snapshot in
// TestLaggingFollowerCatchesUpBySnapshot.
const cfgTrailing = 8
