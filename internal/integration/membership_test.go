package integration

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/proccluster"
	"github.com/raftmaster/raftmaster/rpc"
)

// TestMembershipThroughCLI adds a fourth node with "cluster join", removes
// it with "cluster remove", and moves leadership with "cluster transfer".
func TestMembershipThroughCLI(t *testing.T) {
	needsProcesses(t)
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
		// A voter, registered: its registration loop is over, so the
		// node stays out once removed.
		return err == nil && st.Ready && st.Registered
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
	needsProcesses(t)
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

// TestMembersShowTheirRelease: once the cluster has reached this build's
// protocol level, every node's registry entry holds its release, so
// cluster inspect shows each member's version and level, and the
// cluster's, even for a member that is down.
func TestMembersShowTheirRelease(t *testing.T) {
	needsProcesses(t)
	c := proccluster.Start(t, proccluster.Options{})
	c.WaitReady()
	st, err := proccluster.Status(t.Context(), c.Procs[0].APIAddr)
	if err != nil {
		t.Fatal(err)
	}
	want := st.Version
	cl := newClient(t, client.WithAddrs(c.APIAddrs()...))
	c.WaitFor("every member registered with its release", time.Minute, func() bool {
		m, err := cl.Members()
		if err != nil || m.ClusterProtocol != fsm.Protocol || len(m.Members) != 3 {
			return false
		}
		for _, p := range c.Procs {
			st, err := proccluster.Status(t.Context(), p.APIAddr)
			if err != nil {
				return false
			}
			reg, ok := registryEntry(t, cl, st.NodeID)
			if !ok || reg.Version != want || reg.Protocol != fsm.Protocol {
				return false
			}
		}
		return true
	})
	out, err := cli(t, c, "cluster", "inspect", "--addr", c.Procs[0].APIAddr)
	if err != nil || !strings.Contains(out, fmt.Sprintf("%s (level %d)", want, fsm.Protocol)) ||
		!strings.Contains(out, fmt.Sprintf("protocol:  level %d", fsm.Protocol)) {
		t.Fatalf("inspect: %v\n%s", err, out)
	}

	// A member that is down is shown with the release it registered.
	down := follower(c)
	downID := statusOf(t, down).NodeID
	c.Kill(down)
	m, err := cl.Members()
	if err != nil {
		t.Fatal(err)
	}
	for _, mb := range m.Members {
		if mb.ID == downID && (mb.Error == "" || mb.Version != want || mb.Protocol != fsm.Protocol) {
			t.Fatalf("the stopped member: %+v; want it unreachable, with version %s and level %d", mb, want, fsm.Protocol)
		}
	}
}

// registryEntry is the node registry's entry of id, as a backup of the
// leader's state holds it.
func registryEntry(t *testing.T, cl *client.Client, id string) (fsm.Registration, bool) {
	t.Helper()
	var b bytes.Buffer
	if _, err := cl.BackupTo(t.Context(), &b); err != nil {
		return fsm.Registration{}, false
	}
	f := fsm.New()
	if err := f.Restore(io.NopCloser(&b)); err != nil {
		t.Fatal(err)
	}
	return f.Registration(id)
}

func statusOf(t *testing.T, p *proccluster.Proc) rpc.StatusResponse {
	t.Helper()
	st, err := proccluster.Status(t.Context(), p.APIAddr)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
