package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/proccluster"
	"github.com/raftmaster/raftmaster/rpc"
)

// TestMembershipThroughCLI adds a fourth node with "cluster member add",
// lists the members with "cluster member list", removes the node with
// "cluster member remove", does the same for a fifth node under the
// commands' earlier names ("cluster join", "cluster remove"), and moves
// leadership with "cluster transfer".
func TestMembershipThroughCLI(t *testing.T) {
	needsProcesses(t)
	c := proccluster.Start(t, proccluster.Options{})
	c.WaitReady()
	first := c.Procs[0].APIAddr
	cl := newClient(t, client.WithAddrs(c.APIAddrs()...))
	// addAndRemove adds a node started with neither --peers nor --members,
	// which waits to be added, with the add command, then removes it with
	// the remove command.
	addAndRemove := func(id string, add, remove []string) {
		t.Helper()
		p := c.AddProc(id, nil)
		if out, err := cli(t, c, append(add, "--addr", first, "--id", id, "--raft-addr", p.RaftAdv, "--api-addr", p.APIAddr)...); err != nil {
			t.Fatalf("%q: %v\n%s", add, err, out)
		}
		c.WaitFor(id+" to be a ready voter", time.Minute, func() bool {
			m, err := cl.Members()
			if err != nil || len(m.Members) != 4 {
				return false
			}
			st, err := proccluster.Status(t.Context(), p.APIAddr)
			// A voter, registered: its registration loop is over, so the
			// node stays out once removed.
			return err == nil && st.Ready && st.Registered
		})
		c.Converged(time.Minute)
		if out, err := cli(t, c, append(remove, "--addr", first, id)...); err != nil {
			t.Fatalf("%q: %v\n%s", remove, err, out)
		}
		if m, err := cl.Members(); err != nil || len(m.Members) != 3 {
			t.Fatalf("members after %q: %+v %v", remove, m.Members, err)
		}
		c.Kill(p)
	}

	n4 := c.AddProc("n4", nil)
	if out, err := cli(t, c, "cluster", "member", "add", "--addr", first, "--id", "n4", "--raft-addr", n4.RaftAdv, "--api-addr", n4.APIAddr); err != nil {
		t.Fatalf("cluster member add: %v\n%s", err, out)
	}
	c.WaitFor("n4 to be a ready voter", time.Minute, func() bool {
		st, err := proccluster.Status(t.Context(), n4.APIAddr)
		return err == nil && st.Ready && st.Registered
	})
	// Every member, its role and addresses, and the leader marked; any
	// node answers --stale from its own view.
	leader := c.Leader()
	for _, args := range [][]string{{"--addr", n4.APIAddr}, {"--addr", n4.APIAddr, "--stale"}} {
		out, err := cli(t, c, append([]string{"cluster", "member", "list", "--json"}, args...)...)
		var list struct {
			Leader  rpc.NodeRef `json:"leader"`
			Members []struct {
				ID       string `json:"id"`
				Name     string `json:"name"`
				Role     string `json:"role"`
				RaftAddr string `json:"raft_addr"`
				APIAddr  string `json:"api_addr"`
				Leader   bool   `json:"leader"`
			} `json:"members"`
		}
		if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list.Members) != 4 {
			t.Fatalf("member list %q: %v\n%s", args, err, out)
		}
		leaders := 0
		for _, m := range list.Members {
			i := slices.IndexFunc(c.Procs, func(p *proccluster.Proc) bool { return p.ID == m.Name })
			if i < 0 {
				t.Fatalf("member list %q: %+v is no node of the cluster", args, m)
			}
			if p := c.Procs[i]; m.Role != "voter" || m.RaftAddr != p.RaftAdv || m.APIAddr != p.APIAddr || !strings.HasPrefix(m.ID, p.ID+"~") {
				t.Errorf("member list %q: member %+v", args, m)
			}
			if m.Leader {
				leaders++
				if m.Name != leader.ID || list.Leader.ID != m.ID {
					t.Errorf("member list %q: %s marked the leader, answer's leader %s; want %s", args, m.ID, list.Leader.ID, leader.ID)
				}
			}
		}
		if leaders != 1 {
			t.Errorf("member list %q: %d leaders marked", args, leaders)
		}
	}
	out, err := cli(t, c, "cluster", "member", "list", "--addr", first)
	if row := lineWith(out, "n4~"); err != nil || !strings.Contains(row, "voter") || !strings.Contains(row, n4.APIAddr) ||
		!strings.Contains(lineWith(out, leader.ID+"~"), "*") {
		t.Fatalf("member list: %v\n%s", err, out)
	}
	out, err = cli(t, c, "cluster", "inspect", "--addr", n4.APIAddr)
	if err != nil || !strings.Contains(out, "n4") || !strings.Contains(out, "Leader *") {
		t.Fatalf("inspect: %v\n%s", err, out)
	}
	c.Converged(time.Minute)
	if out, err := cli(t, c, "cluster", "member", "remove", "--addr", first, "n4"); err != nil {
		t.Fatalf("cluster member remove: %v\n%s", err, out)
	}
	if m, err := cl.Members(); err != nil || len(m.Members) != 3 {
		t.Fatalf("members after remove: %+v %v", m.Members, err)
	}
	c.Kill(n4)

	// The commands' earlier names do the same.
	addAndRemove("n5", []string{"cluster", "join"}, []string{"cluster", "remove"})

	// Removing a node that is not a member fails clearly and changes
	// nothing, under either name.
	for _, remove := range [][]string{{"cluster", "member", "remove"}, {"cluster", "remove"}} {
		out, err = cli(t, c, append(remove, "--addr", first, "nosuch")...)
		if err == nil || !strings.Contains(err.Error(), `"nosuch" is not a member of the cluster`) {
			t.Fatalf("%q nosuch: %v\n%s", remove, err, out)
		}
		if m, err := cl.Members(); err != nil || len(m.Members) != 3 {
			t.Fatalf("members after removing an unknown node: %+v %v", m.Members, err)
		}
	}

	leader = c.Leader()
	target := c.Others(leader)[0]
	out, err = cli(t, c, "cluster", "transfer", "--addr", first, "--to", target.ID)
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

// TestGracefulStopAndMembersFlag: SIGTERM to the leader hands leadership
// over, and a "serve --members" node becomes a member by itself.
func TestGracefulStopAndMembersFlag(t *testing.T) {
	needsProcesses(t)
	c := proccluster.Start(t, proccluster.Options{})
	leader := c.Leader()
	c.AddProc("n4", nil, "--members", c.Procs[0].APIAddr)
	cl := newClient(t, client.WithAddrs(c.APIAddrs()...))
	c.WaitFor("n4 to become a member", time.Minute, func() bool {
		m, err := cl.Members()
		return err == nil && len(m.Members) == 4
	})
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
