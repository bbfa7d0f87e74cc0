package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/raftmaster/raftmaster/rpc"
)

// A node that holds a request without answering (a paused or cut-off
// leader) would cost the caller the whole attempt timeout. Once an attempt
// has waited leaderProbeAfter, the client asks the other nodes, every
// leaderProbeEvery, who leads; when another node leads, the attempt is
// abandoned and the call retried there with the same request id, so a
// write that the old leader did apply is not applied twice.
const (
	leaderProbeAfter   = time.Second
	leaderProbeEvery   = 500 * time.Millisecond
	leaderProbeTimeout = time.Second
)

// errLeaderMoved is the cause of an attempt abandoned for a new leader.
var errLeaderMoved = errors.New("raftmaster client: another node took over as leader")

// watchLeaderMove cancels an attempt to *current with errLeaderMoved once
// another node reports that it leads, and points the client at it. stop
// ends the watch.
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

// otherLeader asks every known node but current for its view of the
// leader, and returns the base URL of a leader other than current, or "".
func (c *Client) otherLeader(ctx context.Context, current string) string {
	c.ep.mu.Lock()
	addrs := append([]string(nil), c.ep.addrs...)
	c.ep.mu.Unlock()
	for _, a := range addrs {
		if a == current {
			continue
		}
		st, err := c.staleStatus(ctx, a)
		if err != nil {
			continue
		}
		if st.State == "Leader" && st.Ready {
			return a
		}
		if st.Leader.APIAddr != "" {
			if l, err := normalizeAddr(st.Leader.APIAddr); err == nil && l != current {
				return l
			}
		}
	}
	return ""
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
