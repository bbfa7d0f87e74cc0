package replica

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/raftmaster/raftmaster/raftnode"
	"github.com/raftmaster/raftmaster/rpc"
)

// empty is the answer of a node with no state; member is that of a node of
// a cluster.
func empty(addr, id string) probe {
	return probe{Addr: addr, Status: rpc.StatusResponse{NodeID: id, RaftAddr: id + ":7000", APIAddr: addr}}
}

func member(addr, id string, servers int, term, last uint64) probe {
	p := empty(addr, id)
	p.Status.Servers, p.Status.Term, p.Status.LastIndex = servers, term, last
	return p
}

// listing gives p's node the configuration of peers, all voters.
func listing(p probe, peers []raftnode.Peer) probe {
	for _, s := range peers {
		p.Status.Configuration = append(p.Status.Configuration, rpc.ConfigServer{ID: s.ID, RaftAddr: s.RaftAddr, Voter: true})
	}
	return p
}

func unreachable(addr string) probe {
	return probe{Addr: addr, Err: errors.New("dial tcp: lookup " + addr + ": no such host")}
}

// TestDecideFounding: a node bootstraps only when every founding member
// answers with no state and it is one of them; any node with state of a
// cluster (a configuration, a log entry or a term) means join, never
// bootstrap, whoever else is empty or unreachable.
func TestDecideFounding(t *testing.T) {
	founders := []raftnode.Peer{{ID: "n1", RaftAddr: "n1:7000"}, {ID: "n2", RaftAddr: "n2:7000"}, {ID: "n3", RaftAddr: "n3:7000"}}
	for _, tc := range []struct {
		name   string
		self   string
		probes []probe
		peers  []raftnode.Peer // bootstrap these
		member string          // join via this address
		wait   string          // else wait, for this reason
	}{
		{name: "every founder empty", self: "n2",
			probes: []probe{empty("a1", "n1"), empty("a2", "n2"), empty("a3", "n3")}, peers: founders},
		{name: "founders answer in another order: the same configuration", self: "n1",
			probes: []probe{empty("a3", "n3"), empty("a1", "n1"), empty("a2", "n2")}, peers: founders},
		{name: "one founder unreachable (DNS not published yet)", self: "n1",
			probes: []probe{empty("a1", "n1"), unreachable("a2"), empty("a3", "n3")}, wait: "founding member at a2 does not answer"},
		{name: "two volumes lost, the survivor down", self: "n1",
			probes: []probe{empty("a1", "n1"), empty("a2", "n2"), unreachable("a3")}, wait: "does not answer"},
		{name: "two volumes lost, the survivor up", self: "n1",
			probes: []probe{empty("a1", "n1"), empty("a2", "n2"), member("a3", "n3", 3, 7, 120)}, member: "a3"},
		{name: "a survivor with only a term (it voted)", self: "n1",
			probes: []probe{empty("a1", "n1"), empty("a2", "n2"), member("a3", "n3", 0, 2, 0)}, member: "a3"},
		{name: "a founder bootstrapped a moment ago, without this node", self: "n3",
			probes: []probe{member("a1", "n1", 3, 1, 1), empty("a2", "n2"), empty("a3", "n3")}, member: "a1"},
		{name: "a founder bootstrapped a moment ago, listing this node as a voter: the same configuration", self: "n3",
			probes: []probe{listing(member("a1", "n1", 3, 1, 1), founders), empty("a2", "n2"), empty("a3", "n3")}, peers: founders},
		{name: "a node beyond the founders holds the cluster", self: "n1",
			probes: []probe{empty("a1", "n1"), empty("a2", "n2"), empty("a3", "n3"), member("a4", "n4", 5, 9, 400)}, member: "a4"},
		{name: "not a founder", self: "n4",
			probes: []probe{empty("a1", "n1"), empty("a2", "n2"), empty("a3", "n3"), empty("a4", "n4")}, wait: "not one of the 3 founding members"},
		{name: "two addresses name one node", self: "n1",
			probes: []probe{empty("a1", "n1"), empty("a2", "n1"), empty("a3", "n3")}, wait: `a1 and a2 both answer as node "n1"`},
		{name: "a founder without a Raft address", self: "n1",
			probes: []probe{empty("a1", "n1"), {Addr: "a2", Status: rpc.StatusResponse{NodeID: "m2"}}, empty("a3", "n3")}, wait: "without a node id or Raft address"},
		{name: "fewer addresses than founders", self: "n1",
			probes: []probe{empty("a1", "n1"), empty("a2", "n2")}, wait: "2 member addresses for 3 founding members"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := decideFounding(tc.self, 3, tc.probes)
			switch {
			case tc.peers != nil:
				if !reflect.DeepEqual(d.Peers, tc.peers) {
					t.Fatalf("got %+v, want to bootstrap %+v", d, tc.peers)
				}
			case tc.member != "":
				if d.Peers != nil || d.Member.Addr != tc.member {
					t.Fatalf("got %+v, want to join via %s", d, tc.member)
				}
			default:
				if d.Peers != nil || d.Member.Addr != "" || !strings.Contains(d.Wait, tc.wait) {
					t.Fatalf("got %+v, want to wait because %q", d, tc.wait)
				}
			}
		})
	}
}
