package replica

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/raftmaster/raftmaster/raftnode"
	"github.com/raftmaster/raftmaster/rpc"
)

// A node started with --bootstrap-expect N and --members ADDRS, and no
// state of its own, decides here whether to bootstrap a cluster. The first
// N member addresses are the founding members. A cluster is bootstrapped only when
// every founding member answers, none of them reports any state of a
// cluster, no other member address does either, and this node is one of
// them; then each founding member bootstraps the same configuration, the
// founders sorted by id. As soon as any node reports state of a cluster,
// the node never bootstraps: it becomes a member of that cluster (the
// registration loop asks its leader to add it), or, when the cluster
// already lists it, waits for the leader to send it the log. A node whose
// volume was lost therefore becomes a member again, even when the
// survivors alone cannot
// elect a leader: it votes for the survivor with the longest log, whose
// log is then the cluster's.

// probe is what one member address answered to GET /v1/status?stale.
type probe struct {
	Addr   string
	Status rpc.StatusResponse
	Err    error
}

// hasClusterState reports whether a status shows state of a cluster: a
// configuration, a log entry or a term (a vote cast in an election).
func hasClusterState(st rpc.StatusResponse) bool {
	return st.Servers > 0 || st.LastIndex > 0 || st.Term > 0
}

// founding is the outcome of one round of probes.
type founding struct {
	// Peers, when set, is the configuration to bootstrap.
	Peers []raftnode.Peer
	// Late reports that another founder bootstrapped Peers, listing this
	// node, before this node's probes saw every founder empty.
	Late bool
	// Member, when set, is the address of a node that reported state of
	// a cluster: never bootstrap.
	Member probe
	// Wait says why the node neither bootstraps nor asks for membership
	// yet.
	Wait string
}

// decideFounding decides for node self, with expect founding members,
// given the probes of every member address in order (the first expect are
// the founding members).
func decideFounding(self string, expect int, probes []probe) founding {
	for _, p := range probes {
		if p.Err == nil && hasClusterState(p.Status) {
			conf := make([]raftnode.ConfigServer, len(p.Status.Configuration))
			for i, s := range p.Status.Configuration {
				conf[i] = raftnode.ConfigServer{ID: s.ID, RaftAddr: s.RaftAddr, Voter: s.Voter}
			}
			if peers, ok := raftnode.FoundersListing(self, conf); ok {
				return founding{Peers: peers, Late: true}
			}
			return founding{Member: p}
		}
	}
	if len(probes) < expect {
		return founding{Wait: fmt.Sprintf("%d member addresses for %d founding members", len(probes), expect)}
	}
	founders := probes[:expect]
	ids, addrs := map[string]string{}, map[string]string{}
	isFounder := false
	for _, p := range founders {
		switch st := p.Status; {
		case p.Err != nil:
			return founding{Wait: fmt.Sprintf("founding member at %s does not answer: %v", p.Addr, p.Err)}
		case st.NodeID == "" || st.RaftAddr == "":
			return founding{Wait: fmt.Sprintf("%s answered without a node id or Raft address (not a raftmaster Raft node?)", p.Addr)}
		case ids[st.NodeID] != "":
			return founding{Wait: fmt.Sprintf("%s and %s both answer as node %q: the member addresses must name %d distinct nodes", ids[st.NodeID], p.Addr, st.NodeID, expect)}
		case addrs[st.RaftAddr] != "":
			return founding{Wait: fmt.Sprintf("%s and %s both advertise Raft address %s", addrs[st.RaftAddr], p.Addr, st.RaftAddr)}
		}
		ids[p.Status.NodeID], addrs[p.Status.RaftAddr] = p.Addr, p.Addr
		isFounder = isFounder || p.Status.NodeID == self
	}
	if !isFounder {
		return founding{Wait: fmt.Sprintf("this node is not one of the %d founding members (the first member addresses); it asks for membership once they have formed the cluster", expect)}
	}
	peers := make([]raftnode.Peer, 0, expect)
	for _, p := range founders {
		peers = append(peers, raftnode.Peer{ID: p.Status.NodeID, RaftAddr: p.Status.RaftAddr})
	}
	slices.SortFunc(peers, func(a, b raftnode.Peer) int { return cmp.Compare(a.ID, b.ID) })
	return founding{Peers: peers}
}

// found runs rounds of probes until node has a configuration (it
// bootstrapped, or a leader sent it one), a node reports state of a
// cluster (the registration loop then asks it for membership), or ctx
// ends.
func found(ctx context.Context, log hclog.Logger, node *raftnode.Node, members []string, expect int, peers peerAPI) {
	backoff := 200 * time.Millisecond
	lastWait := ""
	for attempt := 0; ; attempt++ {
		if node.Servers() > 0 {
			return
		}
		d := decideFounding(node.ID(), expect, probeAll(ctx, peers, members))
		switch {
		case ctx.Err() != nil:
			return
		case d.Peers != nil:
			founders := make([]string, len(d.Peers))
			for i, p := range d.Peers {
				founders[i] = p.ID + "=" + p.RaftAddr
			}
			if d.Late {
				log.Info("bootstrapping: another founding member bootstrapped this node's cluster first", "founders", strings.Join(founders, ","))
			} else {
				log.Info("bootstrapping: every founding member answered and none has state", "founders", strings.Join(founders, ","))
			}
			if err := node.Bootstrap(d.Peers); err != nil {
				log.Error("bootstrap failed", "error", err)
			}
			return
		case d.Member.Addr != "":
			st := d.Member.Status
			log.Info("a cluster exists: asking to become its member, never bootstrapping", "via", d.Member.Addr, "node", st.NodeID,
				"servers", st.Servers, "term", st.Term, "last_index", st.LastIndex)
			return
		case d.Wait != lastWait || attempt%20 == 0:
			log.Info("not bootstrapping yet", "why", d.Wait)
			lastWait = d.Wait
		}
		if !sleepBackoff(ctx, &backoff) {
			return
		}
	}
}

// probeAll asks every address for its stale status, all at once.
func probeAll(ctx context.Context, peers peerAPI, addrs []string) []probe {
	out := make([]probe, len(addrs))
	var wg sync.WaitGroup
	for i, a := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := fetchStatus(ctx, peers, a)
			out[i] = probe{Addr: a, Status: st, Err: err}
		}()
	}
	wg.Wait()
	return out
}

// fetchStatus reads the stale status of the node at addr: its own view,
// whether or not it knows a leader.
func fetchStatus(ctx context.Context, peers peerAPI, addr string) (rpc.StatusResponse, error) {
	var st rpc.StatusResponse
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, peers.url(addr, rpc.PathStatus+"?"+rpc.ParamStale), nil)
	if err != nil {
		return st, err
	}
	setToken(req, peers.token)
	resp, err := peers.client.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return st, err
	}
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("%s: %.200s", resp.Status, body)
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return st, fmt.Errorf("status of %s: %w", addr, err)
	}
	return st, nil
}
