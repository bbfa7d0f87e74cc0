package raftnode

import (
	"context"
	"crypto/x509"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// A data directory keeps its incarnation across restarts; an empty one
// gets a new one; a directory of another node is refused.
func TestIncarnationOfTheDataDirectory(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, "n1", dir)
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	first := n.ID()
	if NameOf(first) != "n1" || !strings.Contains(first, IncarnationSep) {
		t.Fatalf("server id %q: want n1%s<incarnation>", first, IncarnationSep)
	}
	shutdown(n)

	if n, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	if n.ID() != first {
		t.Fatalf("restarted as %s, was %s", n.ID(), first)
	}
	shutdown(n)

	other := testConfig(t, "n2", dir)
	if _, err := New(other); err == nil || !strings.Contains(err.Error(), `belongs to node "n1"`) {
		t.Fatalf("n2 on n1's directory: %v", err)
	}

	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if n, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	defer shutdown(n)
	if n.ID() == first || NameOf(n.ID()) != "n1" {
		t.Fatalf("an emptied directory came back as %s, was %s: want a new incarnation of n1", n.ID(), first)
	}
}

// A node of an earlier release kept its name as its server id: a data
// directory with Raft state and no incarnation keeps it.
func TestDirectoryOfAnEarlierReleaseKeepsItsName(t *testing.T) {
	dir := t.TempDir()
	store, err := openLogStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.SetUint64([]byte("CurrentTerm"), 3); err != nil {
		t.Fatal(err)
	}
	store.Close()
	n, err := New(testConfig(t, "n1", dir))
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(n)
	if n.ID() != "n1" {
		t.Fatalf("server id %q, want n1", n.ID())
	}
}

// The Raft port admits a connection only when it names this node's
// server id; a probe is answered with the node's Hello.
func TestRaftPortAdmitsOnlyItsOwnServerID(t *testing.T) {
	c := newTestCluster(t, 1)
	n := c.leader()
	addr := n.RaftAddr()

	h, err := ProbeRaft(context.Background(), addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	if h.ServerID != n.ID() || h.Name != "n1" || !h.HasState() || h.APIAddr != "api-n1" {
		t.Fatalf("hello %+v", h)
	}

	trans := testTransport(t)
	for _, tc := range []struct {
		target string
		admit  bool
	}{{n.ID(), true}, {"n1", false}, {"n1~00000000", false}} {
		// A stale heartbeat: an admitted one is answered (not a
		// success), a refused one never reaches raft.
		req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("x"), Addr: []byte("127.0.0.1:1")}}
		var resp raft.AppendEntriesResponse
		err := trans.AppendEntries(raft.ServerID(tc.target), raft.ServerAddress(addr+targetSep+tc.target), req, &resp)
		if got := err == nil; got != tc.admit {
			t.Errorf("RPC addressed to %s: error %v; want admitted %v", tc.target, err, tc.admit)
		}
		if resp.Success {
			t.Errorf("RPC addressed to %s: a stale heartbeat succeeded", tc.target)
		}
	}
}

// A node that is not a voter of its configuration refuses votes: an empty
// node, and a non-voter.
func TestNonVoterRefusesVotes(t *testing.T) {
	cfg := testConfig(t, "n9", t.TempDir())
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(n)
	trans := testTransport(t)
	target := raft.ServerAddress(n.RaftAddr() + targetSep + n.ID())
	var resp raft.RequestVoteResponse
	req := &raft.RequestVoteRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("c1"), Addr: []byte("127.0.0.1:1")},
		Term:      5, LastLogIndex: 100, LastLogTerm: 4,
	}
	if err := trans.RequestVote(raft.ServerID(n.ID()), target, req, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Granted {
		t.Fatalf("an empty node granted a vote to a candidate with a longer log")
	}
	var pre raft.RequestPreVoteResponse
	preq := &raft.RequestPreVoteRequest{RPCHeader: req.RPCHeader, Term: 5, LastLogIndex: 100, LastLogTerm: 4}
	if err := trans.RequestPreVote(raft.ServerID(n.ID()), target, preq, &pre); err != nil {
		t.Fatal(err)
	}
	if pre.Granted {
		t.Fatalf("an empty node granted a pre-vote")
	}
	var tn raft.TimeoutNowResponse
	if err := trans.TimeoutNow(raft.ServerID(n.ID()), target, &raft.TimeoutNowRequest{RPCHeader: req.RPCHeader}, &tn); err == nil {
		t.Fatalf("an empty node accepted TimeoutNow")
	}
	if n.raft.CurrentTerm() != 0 {
		t.Fatalf("the refused vote moved the node's term to %d", n.raft.CurrentTerm())
	}
}

// testTransport is a network transport of a node "tester" that no one
// dials, for tests to send RPCs with.
func testTransport(t *testing.T) *raft.NetworkTransport {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stream := newPeerStream(ln, ln.Addr(), nil, fixedGate{}, hclog.NewNullLogger())
	trans := raft.NewNetworkTransport(stream, 1, 5*time.Second, io.Discard)
	t.Cleanup(func() { trans.Close() })
	return trans
}

// fixedGate is the streamGate of testTransport.
type fixedGate struct{}

func (fixedGate) serverID() string               { return "tester" }
func (fixedGate) requireTarget() bool            { return false }
func (fixedGate) hello() Hello                   { return Hello{ServerID: "tester", Name: "tester"} }
func (fixedGate) admits(*x509.Certificate) error { return nil }
