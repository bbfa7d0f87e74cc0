package raftnode

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// freePort returns a port of 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

func shutdown(n *Node) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n.Shutdown(ctx)
}

// TestAdvertisedNameNeedNotResolveAtStart: a node whose advertised Raft
// name does not resolve yet, as a pod's DNS record that is not published,
// starts all the same, and keeps the name as written in its configuration
// and registry entry.
func TestAdvertisedNameNeedNotResolveAtStart(t *testing.T) {
	port := freePort(t)
	name := "raftmaster-0.raftmaster.not-published-yet.invalid:" + port
	cfg := testConfig(t, "n1", t.TempDir())
	cfg.RaftAddr, cfg.RaftAdvertise = "127.0.0.1:"+port, name
	cfg.Peers = []Peer{{ID: "n1", RaftAddr: name}}
	n, err := New(cfg)
	if err != nil {
		t.Fatalf("start with an advertised name that does not resolve: %v", err)
	}
	defer shutdown(n)
	waitFor(t, "the node to lead its one-node cluster", n.LeaderReady)
	members, err := n.Members()
	if err != nil || len(members) != 1 || members[0].RaftAddr != name {
		t.Fatalf("members %+v, %v; want n1 at %s", members, err, name)
	}
	waitFor(t, "the leader to register itself", func() bool {
		e, ok := n.FSM().Registration(n.ID())
		return ok && e.RaftAddr == name
	})
}

// TestPeersDialedByName: a node added under a host name is dialed by that
// name, looked up when the leader connects, and catches up.
func TestPeersDialedByName(t *testing.T) {
	nodes := make([]*Node, 2)
	addrs := make([]string, 2)
	for i, id := range []string{"n1", "n2"} {
		port := freePort(t)
		cfg := testConfig(t, id, t.TempDir())
		cfg.RaftAddr, cfg.RaftAdvertise = "127.0.0.1:"+port, "localhost:"+port
		if i == 0 {
			cfg.Peers = []Peer{{ID: id, RaftAddr: cfg.RaftAdvertise}}
		}
		n, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer shutdown(n)
		nodes[i], addrs[i] = n, cfg.RaftAdvertise
	}
	if nodes[1].Servers() != 0 {
		t.Fatalf("a node started without peers lists %d servers, want 0", nodes[1].Servers())
	}
	waitFor(t, "n1 to lead", nodes[0].LeaderReady)
	join(t, nodes[0], nodes[1], "api-n2")
	waitFor(t, "n2 to receive the configuration and the registry", func() bool {
		e, ok := nodes[1].FSM().Registration(nodes[1].ID())
		return nodes[1].Servers() == 2 && ok && e.RaftAddr == addrs[1]
	})
	members, err := nodes[1].Members()
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range members {
		if m.RaftAddr != addrs[i] {
			t.Errorf("member %s at %s, want %s", m.ID, m.RaftAddr, addrs[i])
		}
	}
}

// TestCheckAdvertise: an address other nodes could not dial is refused
// with a reason.
func TestCheckAdvertise(t *testing.T) {
	for _, tc := range []struct{ addr, err string }{
		{"raftmaster-0.raftmaster.ns.svc.cluster.local:7000", ""},
		{"10.0.0.1:7000", ""},
		{"[fd00::1]:7000", ""},
		{"127.0.0.1:0", ""},
		{"0.0.0.0:7000", "unspecified"},
		{"[::]:7000", "unspecified"},
		{":7000", "no host"},
		{"raftmaster-0", "want host:port"},
		{"n1:port", "bad port"},
		{"n1:70000", "bad port"},
	} {
		err := CheckAdvertise(tc.addr)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v, want no error", tc.addr, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: %v, want an error with %q", tc.addr, err, tc.err)
		}
	}
}
