package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/internal/proccluster"
)

// TestMembershipThroughCLI adds a fourth node with "cluster join", removes
// it with "cluster remove", and moves leadership with "cluster transfer".
func TestMembershipThroughCLI(t *testing.T) {
	c := proccluster.Start(t, proccluster.Options{})
	c.WaitReady()
	seed := c.Procs[0].APIAddr

	// A node started with neither --peers nor --join waits to be added.
	n4 := c.AddProc("n4", nil)
	if out, err := cli(t, c, "cluster", "join", "--addr", seed, "--id", "n4", "--raft-addr", n4.RaftAdv, "--api-addr", n4.APIAddr); err != nil {
		t.Fatalf("cluster join: %v\n%s", err, out)
	}
	cl := newClient(t, client.WithAddrs(c.APIAddrs()...))
	c.WaitFor("n4 to be a ready voter", time.Minute, func() bool {
		m, err := cl.Members()
		if err != nil || len(m.Members) != 4 {
			return false
		}
		st, err := proccluster.Status(t.Context(), n4.APIAddr)
		return err == nil && st.Ready
	})
	out, err := cli(t, c, "cluster", "inspect", "--addr", n4.APIAddr)
	if err != nil || !strings.Contains(out, "n4") || !strings.Contains(out, "Leader *") {
		t.Fatalf("inspect: %v\n%s", err, out)
	}
	c.Converged(time.Minute)

	if out, err := cli(t, c, "cluster", "remove", "--addr", seed, "n4"); err != nil {
		t.Fatalf("cluster remove: %v\n%s", err, out)
	}
	m, err := cl.Members()
	if err != nil || len(m.Members) != 3 {
		t.Fatalf("members after remove: %+v %v", m.Members, err)
	}
	// Removing a node that is not a member fails clearly and changes nothing.
	out, err = cli(t, c, "cluster", "remove", "--addr", seed, "nosuch")
	if err == nil || !strings.Contains(err.Error(), `"nosuch" is not a member of the cluster`) {
		t.Fatalf("cluster remove nosuch: %v\n%s", err, out)
	}
	if m, err := cl.Members(); err != nil || len(m.Members) != 3 {
		t.Fatalf("members after removing an unknown node: %+v %v", m.Members, err)
	}
	c.Kill(n4)

	leader := c.Leader()
	target := c.Others(leader)[0]
	out, err = cli(t, c, "cluster", "transfer", "--addr", seed, "--to", target.ID)
	if err != nil {
		t.Fatalf("cluster transfer: %v\n%s", err, out)
	}
	if got := c.Leader(); got != target {
		t.Fatalf("leader is %s, want %s", got.ID, target.ID)
	}
	if _, err := cli(t, c, "health", "--addr", target.APIAddr); err != nil {
		t.Fatalf("health: %v", err)
	}
}

// TestGracefulStopTransfersLeadership: SIGTERM to the leader hands
// leadership over, and a "serve --join" node joins by itself.
func TestGracefulStopAndJoinFlag(t *testing.T) {
	c := proccluster.Start(t, proccluster.Options{})
	leader := c.Leader()
	n4 := c.AddProc("n4", []string{c.Procs[0].APIAddr})
	cl := newClient(t, client.WithAddrs(c.APIAddrs()...))
	c.WaitFor("n4 to join", time.Minute, func() bool {
		m, err := cl.Members()
		return err == nil && len(m.Members) == 4
	})
	_ = n4
	c.Term(leader)
	next := c.Leader()
	if next == leader {
		t.Fatal("stopped leader still leads")
	}
	if b, _ := readFile(leader.LogPath); !strings.Contains(b, "transferring leadership") {
		t.Fatalf("the stopped leader did not transfer leadership; log:\n%s", b)
	}
}
