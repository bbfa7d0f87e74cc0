package netfault

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
)

// link is a directed Raft link: from dials to.
type link struct{ from, to string }

// Net is a Proxy for every ordered pair of distinct nodes. Node "from"
// reaches node "to" through the proxy of link (from, to), so faults can be
// set per direction. It is safe for concurrent use.
//
// Methods that take node ids panic on an id that NewNet was not given: that
// is a bug in the test, not a fault to inject.
type Net struct {
	ids     []string        // sorted
	proxies map[link]*Proxy // immutable after NewNet
	mu      sync.Mutex      // serialises fault changes
	logf    func(string, ...any)
}

// NewNet starts a proxy for every ordered pair of distinct ids in targets,
// which maps each node id to the address its Raft transport listens on.
// Every link starts in Pass mode.
func NewNet(targets map[string]string, opts ...Option) (*Net, error) {
	o := buildOptions(opts)
	n := &Net{proxies: map[link]*Proxy{}, logf: o.logf}
	for id := range targets {
		if id == "" {
			return nil, errors.New("netfault: empty node id")
		}
		n.ids = append(n.ids, id)
	}
	sort.Strings(n.ids)
	for _, from := range n.ids {
		for _, to := range n.ids {
			if from == to {
				continue
			}
			p, err := newProxy(targets[to], from+"->"+to, opts...)
			if err != nil {
				n.Close()
				return nil, fmt.Errorf("netfault: proxy %s->%s: %w", from, to, err)
			}
			n.proxies[link{from, to}] = p
		}
	}
	return n, nil
}

// IDs returns the node ids in sorted order.
func (n *Net) IDs() []string { return slices.Clone(n.ids) }

// Proxy returns the proxy of link (from, to).
func (n *Net) Proxy(from, to string) *Proxy {
	p, ok := n.proxies[link{from, to}]
	if !ok {
		panic(fmt.Sprintf("netfault: no link %q->%q", from, to))
	}
	return p
}

// DialMap returns, for every peer of node from, the proxy address that from
// must dial to reach it (for raftmaster's hidden --test-raft-dial flag).
func (n *Net) DialMap(from string) map[string]string {
	n.mustKnow(from)
	m := make(map[string]string, len(n.ids)-1)
	for _, to := range n.ids {
		if to != from {
			m[to] = n.proxies[link{from, to}].Addr()
		}
	}
	return m
}

// SetMode sets the mode of link (from, to).
func (n *Net) SetMode(from, to string, m Mode) {
	p := n.Proxy(from, to)
	n.mu.Lock()
	defer n.mu.Unlock()
	p.SetMode(m)
}

// Mode returns the mode of link (from, to).
func (n *Net) Mode(from, to string) Mode { return n.Proxy(from, to).Mode() }

// Cut blackholes link (from, to): from's connections to to forward nothing,
// in either direction, while to's connections to from are untouched.
func (n *Net) Cut(from, to string) { n.SetMode(from, to, Drop) }

// CutBoth blackholes both links between a and b.
func (n *Net) CutBoth(a, b string) {
	pa, pb := n.Proxy(a, b), n.Proxy(b, a)
	n.mu.Lock()
	defer n.mu.Unlock()
	pa.SetMode(Drop)
	pb.SetMode(Drop)
}

// Partition replaces the current faults by a partition into groups: every
// link between nodes of different groups is blackholed in both directions
// and every other link passes. A node that is in no group is isolated, as
// if it were a group of its own. A node in two groups panics.
func (n *Net) Partition(groups ...[]string) {
	group := map[string]int{}
	for g, ids := range groups {
		for _, id := range ids {
			n.mustKnow(id)
			if _, dup := group[id]; dup {
				panic(fmt.Sprintf("netfault: node %q is in two groups", id))
			}
			group[id] = g
		}
	}
	next := len(groups)
	for _, id := range n.ids {
		if _, ok := group[id]; !ok {
			group[id] = next
			next++
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.logf("netfault: partition %v", groups)
	for l, p := range n.proxies {
		if group[l.from] == group[l.to] {
			p.SetMode(Pass)
		} else {
			p.SetMode(Drop)
		}
	}
}

// Heal sets every link back to Pass.
func (n *Net) Heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.logf("netfault: heal")
	for _, p := range n.proxies {
		p.SetMode(Pass)
	}
}

// Close stops every proxy and waits for their goroutines.
func (n *Net) Close() error {
	var errs []error
	for _, p := range n.proxies {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}

func (n *Net) mustKnow(id string) {
	if _, ok := slices.BinarySearch(n.ids, id); !ok {
		panic(fmt.Sprintf("netfault: unknown node %q", id))
	}
}
