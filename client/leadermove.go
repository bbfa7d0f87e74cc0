package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftmaster/raftmaster/rpc"
)

// A node that holds a request without answering (a paused or cut-off
// leader) would cost the caller the whole attempt timeout. Once an attempt
// has waited leaderProbeAfter, the client asks the nodes, every
// leaderProbeEvery, who leads; when another node leads and the node being
// asked does not answer as the leader itself, the attempt is abandoned and
// the call retried on the new leader with the same request id, so a write
// that the old leader did apply is not applied twice. A healthy leader
// answers in milliseconds, so the first probe comes early: a paused or cut
// off leader is then left about as soon as the others have elected a new
// one (a few hundred milliseconds with the default Raft timeouts).
const (
	leaderProbeAfter   = 300 * time.Millisecond
	leaderProbeEvery   = 150 * time.Millisecond
	leaderProbeTimeout = 250 * time.Millisecond
)

// errLeaderMoved is the cause of an attempt abandoned for a new leader.
var errLeaderMoved = errors.New("raftmaster client: another node took over as leader")

// probes shares one round of status requests among the attempts that wait
// at the same time, so that many slow calls do not multiply the load on a
// cluster that is already in trouble.
type probes struct {
	mu      sync.Mutex
	at      time.Time
	asked   map[string]bool               // base URLs of the last round
	results map[string]rpc.StatusResponse // by base URL, nodes that answered
	running chan struct{}                 // closed when the round in flight ends
}

// watchLeaderMove cancels an attempt to *current with errLeaderMoved once
// another node leads, and points the client at it. stop ends the watch.
func (c *Client) watchLeaderMove(ctx context.Context, current *atomic.Pointer[string], cancel context.CancelCauseFunc) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTimer(leaderProbeAfter)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if leader := c.otherLeader(ctx, *current.Load()); leader != "" {
				c.logger.Debug("abandoning an attempt for a new leader", "from", *current.Load(), "to", leader)
				c.ep.setLeader(leader)
				cancel(errLeaderMoved)
				return
			}
			t.Reset(leaderProbeEvery)
		}
	}()
	return func() { close(done) }
}

// otherLeader returns the base URL of a leader other than current, or ""
// while current still answers as the leader (it may be known under another
// address, or simply be slow) or no other leader is known. A leader that
// a node names but that did not answer the same round, or that refused a
// connection of late, is no leader to move to: a follower names a killed
// leader until the election timeout, and moving the attempt there would
// only take it off a node that holds it until the next leader serves.
func (c *Client) otherLeader(ctx context.Context, current string) string {
	statuses, asked := c.probeAll(ctx, current)
	if st, ok := statuses[current]; ok && st.State == "Leader" && st.Ready {
		return ""
	}
	currentID := c.ep.idOf(current)
	if st, ok := statuses[current]; ok {
		currentID = st.NodeID
	}
	silent := func(base string) bool {
		_, answered := statuses[base]
		return asked[base] && !answered || c.ep.refusedLately(base)
	}
	for base, st := range statuses {
		switch {
		case base == current:
		case st.State == "Leader" && st.Ready && st.NodeID != currentID:
			return base
		case st.Leader.APIAddr != "" && st.Leader.ID != currentID:
			if l, err := c.normalize(st.Leader.APIAddr); err == nil && l != current && !silent(l) {
				// A node the token goes to reports it as the leader.
				c.ep.trust(l)
				return l
			}
		}
	}
	return ""
}

// probeAll asks current and every known node for its own status, in
// parallel, and returns the answers by base URL and the base URLs asked.
// A round younger than leaderProbeEvery/2 is reused; a round in flight is
// waited for.
func (c *Client) probeAll(ctx context.Context, current string) (map[string]rpc.StatusResponse, map[string]bool) {
	p := &c.probes
	p.mu.Lock()
	for p.running != nil {
		running := p.running
		p.mu.Unlock()
		select {
		case <-running:
		case <-ctx.Done():
			return nil, nil
		}
		p.mu.Lock()
	}
	if p.asked[current] && time.Since(p.at) < leaderProbeEvery/2 {
		res, asked := p.results, p.asked
		p.mu.Unlock()
		return res, asked
	}
	p.running = make(chan struct{})
	p.mu.Unlock()

	c.ep.mu.Lock()
	addrs := append([]string(nil), c.ep.addrs...)
	c.ep.mu.Unlock()
	if !contains(addrs, current) {
		addrs = append(addrs, current)
	}
	type answer struct {
		base string
		st   rpc.StatusResponse
		err  error
	}
	answers := make(chan answer, len(addrs))
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, a := range addrs {
		go func() {
			st, err := c.staleStatus(pctx, a)
			answers <- answer{a, st, err}
		}()
	}
	// The round ends when every other node has answered: the node being
	// waited on counts only if it answers by then, since a paused or
	// cut-off node would run every round into its timeout. It is waited
	// for only when the others name a leader and its own id is unknown,
	// for that leader could be the same node under another address.
	res := map[string]rpc.StatusResponse{}
	idKnown := c.ep.idOf(current) != ""
	othersLeft, currentLeft, named := len(addrs)-1, true, false
	for othersLeft > 0 || (currentLeft && named && !idKnown) {
		a := <-answers
		if a.base == current {
			currentLeft = false
		} else {
			othersLeft--
			named = named || (a.err == nil && (a.st.State == "Leader" || a.st.Leader.ID != ""))
		}
		if a.err == nil {
			res[a.base] = a.st
		}
	}

	asked := map[string]bool{}
	for _, a := range addrs {
		asked[a] = true
	}
	p.mu.Lock()
	p.at, p.asked, p.results = time.Now(), asked, res
	close(p.running)
	p.running = nil
	p.mu.Unlock()
	return res, asked
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// staleStatus reads one node's own status, without going to the leader.
func (c *Client) staleStatus(ctx context.Context, base string) (rpc.StatusResponse, error) {
	var st rpc.StatusResponse
	ctx, cancel := context.WithTimeout(ctx, leaderProbeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+rpc.PathStatus+"?stale", nil)
	if err != nil {
		return st, err
	}
	c.setToken(req)
	resp, err := c.hc.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, errors.New(resp.Status)
	}
	err = json.NewDecoder(io.LimitReader(resp.Body, maxErrorBytes)).Decode(&st)
	return st, err
}
