package raftnode

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/raftmaster/raftmaster/internal/certs"
)

// TestRaftPortAdmitsMembersOnly: under TLS, a node with no configuration
// admits any node certificate of the cluster's CA (its founders, the
// leader that adds it); once it has one, only certificates of the nodes
// it lists, by node id or, for certificates that name none, by address.
func TestRaftPortAdmitsMembersOnly(t *testing.T) {
	key := certs.NewClusterKey()
	cfg := testConfig(t, "n1", t.TempDir())
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(n)
	stranger, err := certs.FromClusterKey(key, "n9", []string{"10.0.0.9"})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.admits(stranger.Leaf()); err != nil {
		t.Fatalf("a node with no configuration refused a certificate of the CA: %v", err)
	}
	if err := n.Bootstrap([]Peer{{ID: n.ID(), RaftAddr: n.RaftAddr()}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for n.Servers() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no configuration after bootstrap")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := n.admits(stranger.Leaf()); err == nil || !strings.Contains(err.Error(), `"n9"`) {
		t.Fatalf("a member admitted node n9, which its configuration does not list: %v", err)
	}
	member, err := certs.FromClusterKey(key, "n1", []string{"10.0.0.9"})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.admits(member.Leaf()); err != nil {
		t.Fatalf("a certificate of node n1, listed: %v", err)
	}
	// Certificates without a node id: by the host of a listed address.
	dir := t.TempDir()
	if _, err := certs.Generate(certs.GenerateOptions{Dir: dir, Hosts: []string{"127.0.0.1"}}); err != nil {
		t.Fatal(err)
	}
	local, err := certs.Load(dir+"/"+certs.NodeCertFile, dir+"/"+certs.NodeKeyFile, dir+"/"+certs.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.admits(local.Leaf()); err != nil {
		t.Fatalf("a certificate for 127.0.0.1, the host of a listed address: %v", err)
	}
	other := t.TempDir()
	if _, err := certs.Generate(certs.GenerateOptions{Dir: other, Hosts: []string{"10.0.0.9"}}); err != nil {
		t.Fatal(err)
	}
	far, err := certs.Load(other+"/"+certs.NodeCertFile, other+"/"+certs.NodeKeyFile, other+"/"+certs.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.admits(far.Leaf()); err == nil {
		t.Fatal("a certificate for 10.0.0.9, no listed address, was admitted")
	}
}

// TestIdleConnectionsDoNotHoldHandshakeSlots: with more TCP connections
// open to the Raft port than it keeps pending, all silent, a peer's TLS
// handshake and probe still get through, and the silent connections are
// closed.
func TestIdleConnectionsDoNotHoldHandshakeSlots(t *testing.T) {
	key := certs.NewClusterKey()
	server, err := certs.FromClusterKey(key, "tester", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	client, err := certs.FromClusterKey(key, "n2", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := newPeerStream(ln, ln.Addr(), server, fixedGate{}, hclog.NewNullLogger())
	defer s.Close()
	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for range maxPending + 44 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	h, err := ProbeNode(ctx, ln.Addr().String(), "tester", client)
	if err != nil || h.Name != "tester" {
		t.Fatalf("a peer's probe with %d idle connections open: %+v, %v", len(idle), h, err)
	}
	// The first silent connections were evicted: the node closed them.
	_ = idle[0].SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := idle[0].Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("the oldest silent connection is still open: %v", err)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
