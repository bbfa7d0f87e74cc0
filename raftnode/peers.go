package raftnode

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"github.com/raftmaster/raftmaster/fsm"
)

// A node started with --peers (a static cluster) and an empty data
// directory bootstraps only when every peer answers a probe on its Raft
// port and none holds state of a cluster: then every peer, all empty,
// bootstraps the same configuration, the peers' server ids in the order of
// the list. As soon as any peer holds state, the node never bootstraps: a
// node whose volume was lost would otherwise found a rival cluster with
// the other empty nodes and truncate the survivors' log. It asks to
// become a member of that cluster instead, through the API addresses the
// peers gave (MembersToAsk), as a new incarnation that the leader adds
// once it has removed the old one.

// serverID is the node's server id, for the Raft port's preamble check.
func (n *Node) serverID() string { return n.id }

// requireTarget reports whether the Raft port refuses connections that
// name no server: once the cluster's protocol level shows that every
// server sends the preamble.
func (n *Node) requireTarget() bool { return n.transportLevel() >= fsm.Protocol2 }

// hello describes this node for a probe of its Raft port.
func (n *Node) hello() Hello {
	h := Hello{ServerID: n.id, Name: n.cfg.ID, RaftAddr: n.cfg.RaftAdvertise, APIAddr: n.cfg.APIAddr}
	r := n.rp.Load()
	if r == nil {
		return h
	}
	h.Configuration = n.Configuration()
	h.Servers = len(h.Configuration)
	h.Term, h.LastIndex = r.CurrentTerm(), r.LastIndex()
	if _, id := r.LeaderWithID(); id != "" {
		if reg, ok := n.fsm.Registration(string(id)); ok {
			h.LeaderAPI = reg.APIAddr
		}
	}
	return h
}

// MembersToAsk returns the API addresses of members of a running cluster
// that the node's peers gave when they showed it holds state: where to ask
// to become a member.
func (n *Node) MembersToAsk() []string {
	if p := n.membersToAsk.Load(); p != nil {
		return *p
	}
	return nil
}

// foundFromPeers probes the peers until it can decide: bootstrap, when
// every peer answers with no state, or ask to become a member, when one
// holds state. It
// returns once decided, or when the node stops or has a configuration.
func (n *Node) foundFromPeers(peers []Peer) {
	backoff := 200 * time.Millisecond
	lastWhy := ""
	for attempt := 0; ; attempt++ {
		if n.Servers() > 0 {
			return
		}
		ids, via, founders, why := n.probePeers(peers)
		switch {
		case founders != nil:
			n.log.Info("a peer bootstrapped this node's cluster before it: bootstrapping the same configuration")
			if err := n.Bootstrap(founders); err != nil {
				n.log.Error("bootstrap failed", "error", err)
			}
			return
		case len(via) > 0:
			n.membersToAsk.Store(&via)
			n.log.Info("a peer holds state of a cluster: asking to become its member as a new incarnation, never bootstrapping", "via", strings.Join(via, ","))
			return
		case why == "":
			servers := make([]Peer, len(peers))
			for i, p := range peers {
				servers[i] = Peer{ID: ids[i], RaftAddr: p.RaftAddr}
			}
			if err := n.Bootstrap(servers); err != nil {
				n.log.Error("bootstrap failed", "error", err)
			}
			return
		case why != lastWhy || attempt%20 == 0:
			n.log.Info("not bootstrapping yet", "why", why)
			lastWhy = why
		}
		select {
		case <-n.stop:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// probePeers asks every peer for its Hello. It returns the peers' server
// ids when all answered with no state; the configuration a peer
// bootstrapped with this node as a founder (FoundersListing); the API
// addresses of members to ask when one holds state; or why it cannot decide
// yet.
func (n *Node) probePeers(peers []Peer) (ids, via []string, founders []Peer, why string) {
	ids = make([]string, len(peers))
	for i, p := range peers {
		if p.ID == n.cfg.ID {
			ids[i] = n.id
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		h, err := ProbeNode(ctx, p.RaftAddr, p.ID, n.cfg.PeerTLS)
		cancel()
		switch {
		case err != nil:
			why = fmt.Sprintf("peer %s at %s does not answer: %v", p.ID, p.RaftAddr, err)
			continue
		case h.Name != p.ID:
			why = fmt.Sprintf("%s answers as node %q, not %q", p.RaftAddr, h.Name, p.ID)
			continue
		case h.HasState():
			if cfg, ok := FoundersListing(n.id, h.Configuration); ok {
				return nil, nil, cfg, ""
			}
			for _, a := range []string{h.LeaderAPI, h.APIAddr} {
				if a != "" && !slices.Contains(via, a) {
					via = append(via, a)
				}
			}
			if len(via) == 0 {
				why = fmt.Sprintf("peer %s holds state of a cluster but gave no API address", p.ID)
			}
		}
		ids[i] = h.ServerID
	}
	if len(via) > 0 {
		return nil, via, nil, ""
	}
	return ids, nil, nil, why
}

// Configuration returns the node's latest Raft configuration.
func (n *Node) Configuration() []ConfigServer {
	r := n.rp.Load()
	if r == nil {
		return nil
	}
	var out []ConfigServer
	for _, s := range r.GetConfiguration().Configuration().Servers {
		out = append(out, ConfigServer{ID: string(s.ID), RaftAddr: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	return out
}
