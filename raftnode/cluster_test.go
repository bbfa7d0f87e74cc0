package raftnode

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	"github.com/raftmaster/raftmaster/fsm"
)

// testCluster is a set of in-process nodes on 127.0.0.1 with real TCP
// transports and bolt stores.
type testCluster struct {
	t     *testing.T
	nodes []*Node
	cfgs  []Config
}

func testConfig(t *testing.T, id, dir string) Config {
	return Config{
		ID: id, DataDir: dir, RaftAddr: "127.0.0.1:0", APIAddr: "api-" + id,
		HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: time.Second,
		LeaderLeaseTimeout: 500 * time.Millisecond, FailoverGrace: time.Second,
		Logger: hclog.New(&hclog.LoggerOptions{Name: id, Level: hclog.Warn, Output: testWriter{t}}),
		// Every node of a test cluster runs this build.
		PeerLevel: func(context.Context, fsm.Registration) (uint64, error) { return fsm.Protocol, nil },
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

func newTestCluster(t *testing.T, n int) *testCluster {
	t.Helper()
	return newTestClusterWith(t, n, nil)
}

// newTestClusterWith starts n bootstrapped nodes; configure, when set,
// adjusts each node's configuration first.
func newTestClusterWith(t *testing.T, n int, configure func(*Config)) *testCluster {
	t.Helper()
	c := &testCluster{t: t}
	var peers []Peer
	for i := range n {
		cfg := testConfig(t, fmt.Sprintf("n%d", i+1), t.TempDir())
		if configure != nil {
			configure(&cfg)
		}
		node, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		cfg.RaftAddr = node.RaftAddr()
		c.nodes = append(c.nodes, node)
		c.cfgs = append(c.cfgs, cfg)
		peers = append(peers, Peer{ID: node.ID(), RaftAddr: node.RaftAddr()})
	}
	for _, node := range c.nodes {
		if err := node.Bootstrap(peers); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, node := range c.nodes {
			if node != nil {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				node.Shutdown(ctx)
				cancel()
			}
		}
	})
	return c
}

// join adds node to the cluster of leader as its registration loop does:
// asking again until the node is a voter (a new incarnation is added as a
// non-voter first, and promoted once it has caught up).
func join(t *testing.T, leader, node *Node, apiAddr string) {
	t.Helper()
	waitFor(t, node.ID()+" to become a voter", func() bool {
		reg := node.registration()
		reg.APIAddr = apiAddr
		if err := leader.AddMember(context.Background(), reg, node.Raft().LastIndex()); err != nil {
			t.Fatalf("AddVoter: %v", err)
		}
		return node.IsVoter()
	})
}

// waitFor polls cond until it holds or a generous deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *testCluster) leader() *Node {
	c.t.Helper()
	var leader *Node
	waitFor(c.t, "a ready leader", func() bool {
		for _, n := range c.nodes {
			if n != nil && n.LeaderReady() {
				leader = n
				return true
			}
		}
		return false
	})
	return leader
}

// apply proposes cmd on the current leader, retrying (with the same request
// id, as the client does) while leadership moves.
func (c *testCluster) apply(cmd fsm.Command) *fsm.Result {
	c.t.Helper()
	var r *fsm.Result
	waitFor(c.t, "apply "+cmd.Type().String(), func() bool {
		var err error
		r, err = c.leader().Apply(context.Background(), cmd)
		return err == nil
	})
	return r
}

// setDataset is apply for SetDataset.
func (c *testCluster) setDataset(req fsm.RequestID, p fsm.DatasetParams, chunks []fsm.Chunk) *fsm.Result {
	c.t.Helper()
	var r *fsm.Result
	waitFor(c.t, "set dataset", func() bool {
		var err error
		r, err = c.leader().SetDataset(context.Background(), fsm.DefaultJob, req, p, nil, chunks)
		return err == nil
	})
	return r
}

func (c *testCluster) followers() []*Node {
	var out []*Node
	for _, n := range c.nodes {
		if n != nil && !n.IsLeader() {
			out = append(out, n)
		}
	}
	return out
}

// converged waits until every live node has the leader's state hash.
func (c *testCluster) converged() {
	c.t.Helper()
	waitFor(c.t, "replicas to converge", func() bool {
		want := ""
		for _, n := range c.nodes {
			if n == nil {
				continue
			}
			h := n.FSM().StateHash()
			if want == "" {
				want = h
			} else if h != want {
				return false
			}
		}
		return true
	})
}

func dataset(n int) []fsm.Chunk {
	chunks := make([]fsm.Chunk, n)
	for i := range chunks {
		chunks[i] = fsm.Chunk{Path: fmt.Sprintf("/data/part-%03d.recordio", i/100), Offset: int64(i%100) * 4096, Records: 10}
	}
	return chunks
}

func params(timeout time.Duration) fsm.DatasetParams {
	return fsm.DatasetParams{ChunksPerTask: 1, TaskTimeout: timeout, FailureMax: 3}
}

func TestClusterAppliesOnLeaderAndReplicates(t *testing.T) {
	c := newTestCluster(t, 3)
	ctx := context.Background()
	leader := c.leader()
	if r := c.setDataset(fsm.RequestID{Client: uuid.New(), Seq: 1}, params(time.Hour), dataset(10)); r.Code != fsm.CodeOK {
		t.Fatalf("SetDataset: %+v", r)
	}
	req := fsm.RequestID{Client: uuid.New(), Seq: 1}
	r1 := c.apply(&fsm.GetTask{Header: fsm.Header{Request: req}})
	if r1.Task == nil {
		t.Fatalf("GetTask: %+v", r1)
	}
	r2 := c.apply(&fsm.GetTask{Header: fsm.Header{Request: req}})
	if r2.Task == nil || r2.Task.Meta != r1.Task.Meta || !r2.Duplicate {
		t.Fatalf("retried GetTask got %+v, want the first task %+v again", r2, r1.Task)
	}
	for _, f := range c.followers() {
		if _, err := f.Apply(ctx, &fsm.Tick{}); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("follower Apply: %v, want ErrNotLeader", err)
		}
		if err := f.ReadBarrier(ctx); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("follower ReadBarrier: %v, want ErrNotLeader", err)
		}
	}
	if err := leader.ReadBarrier(ctx); err != nil {
		t.Fatalf("leader ReadBarrier: %v", err)
	}
	c.converged()
	for _, n := range c.nodes {
		if st := n.FSM().Stats(fsm.DefaultJob); st.Pending != 1 || st.Nodes < 1 {
			t.Fatalf("%s: stats %+v, want 1 pending task and the leader registered", n.ID(), st)
		}
	}
}

func TestLeaderTicksExpireLeases(t *testing.T) {
	c := newTestCluster(t, 3)
	c.setDataset(fsm.RequestID{}, params(200*time.Millisecond), dataset(3))
	r := c.apply(&fsm.GetTask{})
	if r.Task == nil {
		t.Fatalf("GetTask: %+v", r)
	}
	id := r.Task.Meta.ID
	waitFor(t, "the expired lease to go back to todo", func() bool {
		ts, err := c.leader().FSM().Task(fsm.DefaultJob, id)
		return err == nil && ts.Queue == "todo" && ts.Failures == 1
	})
}

func TestFailoverKeepsStateAndGraceExtendsLeases(t *testing.T) {
	c := newTestCluster(t, 3)
	ctx := context.Background()
	c.setDataset(fsm.RequestID{}, params(time.Hour), dataset(5))
	r := c.apply(&fsm.GetTask{})
	if r.Task == nil {
		t.Fatalf("GetTask: %+v", r)
	}
	c.converged()
	old := c.leader()
	for i, n := range c.nodes {
		if n == old {
			if err := n.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			c.nodes[i] = nil
		}
	}
	leader := c.leader()
	if leader == old {
		t.Fatal("old leader still leads")
	}
	ts, err := leader.FSM().Task(fsm.DefaultJob, r.Task.Meta.ID)
	if err != nil || ts.Queue != "pending" || ts.Meta != r.Task.Meta {
		t.Fatalf("task after failover: %+v %v, want pending %+v", ts, err, r.Task.Meta)
	}
	c.apply(&fsm.TaskFinished{Meta: r.Task.Meta})
	if st := c.leader().FSM().Stats(fsm.DefaultJob); st.Done != 1 {
		t.Fatalf("stats %+v, want 1 done", st)
	}
}

func TestRestartFromSnapshot(t *testing.T) {
	c := newTestCluster(t, 3)
	ctx := context.Background()
	c.setDataset(fsm.RequestID{}, params(time.Hour), dataset(50))
	for range 20 {
		r := c.apply(&fsm.GetTask{Header: fsm.Header{Request: fsm.RequestID{Client: uuid.New(), Seq: 1}}})
		c.apply(&fsm.TaskFinished{Meta: r.Task.Meta})
	}
	c.converged()
	f := c.followers()[0]
	if err := f.Raft().Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	idx := -1
	for i, n := range c.nodes {
		if n == f {
			idx = i
		}
	}
	if err := f.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	c.nodes[idx] = nil
	for range 5 {
		c.apply(&fsm.GetTask{})
	}
	restarted, err := New(c.cfgs[idx])
	if err != nil {
		t.Fatal(err)
	}
	c.nodes[idx] = restarted
	c.converged()
	if st := restarted.FSM().Stats(fsm.DefaultJob); st.Done != 20 || st.Pending != 5 {
		t.Fatalf("restarted stats %+v, want 20 done and 5 pending", st)
	}
}

func TestLargeDatasetIsProposedInParts(t *testing.T) {
	c := newTestCluster(t, 3)
	for _, n := range c.nodes {
		n.cfg.MaxEntryBytes = 4 << 10
	}
	chunks := dataset(3000)
	if parts := fsm.SplitChunks(chunks, 4<<10); len(parts) < 5 {
		t.Fatalf("expected several parts, got %d", len(parts))
	}
	if r := c.setDataset(fsm.RequestID{Client: uuid.New(), Seq: 1}, params(time.Hour), chunks); r.Code != fsm.CodeOK {
		t.Fatalf("SetDataset: %+v", r)
	}
	c.converged()
	for _, n := range c.nodes {
		if st := n.FSM().Stats(fsm.DefaultJob); st.Chunks != 3000 || st.Tasks != 3000 || st.Uploads != 0 {
			t.Fatalf("%s: %+v", n.ID(), st)
		}
	}
}

func TestSplitChunksStaysUnderLimit(t *testing.T) {
	chunks := dataset(20000)
	for _, limit := range []int{1 << 10, 64 << 10, 256 << 10} {
		total := 0
		for _, part := range fsm.SplitChunks(chunks, limit) {
			total += len(part)
			enc := fsm.Encode(&fsm.DatasetPart{UploadID: "upload-" + uuid.NewString(), Chunks: part})
			if len(enc) > limit {
				t.Fatalf("limit %d: part of %d chunks encodes to %d bytes", limit, len(part), len(enc))
			}
		}
		if total != len(chunks) {
			t.Fatalf("limit %d: parts hold %d of %d chunks", limit, total, len(chunks))
		}
	}
}

func TestMembershipChanges(t *testing.T) {
	c := newTestCluster(t, 3)
	ctx := context.Background()
	leader := c.leader()

	cfg := testConfig(t, "n4", t.TempDir())
	n4, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.nodes = append(c.nodes, n4)
	join(t, leader, n4, "api-n4")
	c.converged()
	servers, err := leader.Members()
	if err != nil || len(servers) != 4 {
		t.Fatalf("servers %+v %v, want 4", servers, err)
	}
	if e, ok := n4.FSM().Registration(n4.ID()); !ok || e.APIAddr != "api-n4" {
		t.Fatalf("registry entry of n4: %+v %v", e, ok)
	}

	if err := leader.TransferLeadership(ctx, "n4"); err != nil {
		t.Fatalf("transfer: %v", err)
	}
	waitFor(t, "n4 to lead", n4.LeaderReady)

	if err := n4.RemoveMember(ctx, leader.ID()); err != nil {
		t.Fatalf("remove: %v", err)
	}
	servers, err = n4.Members()
	if err != nil || len(servers) != 3 {
		t.Fatalf("servers after remove %+v %v, want 3", servers, err)
	}
	if _, ok := n4.FSM().Registration(leader.ID()); ok {
		t.Fatal("removed node still in the registry")
	}
	if err := n4.RemoveMember(ctx, "nope"); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("remove unknown: %v", err)
	}
}
