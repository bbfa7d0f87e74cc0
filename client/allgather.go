package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/rpc"
)

// watchWait is how long one allgather watch may wait on the server before
// it is asked again; watchSlack is added to it for the attempt's deadline.
const (
	watchWait  = 30 * time.Second
	watchSlack = 15 * time.Second
)

// Result is the outcome of an allgather join: every member's data in join
// order, or the error that ended the join (ErrClosed, ErrReconnected,
// ErrAllGatherTimeoutExceeded, ErrClientClosed, the error of JoinContext's
// context, or the last error of a cluster that could not be reached).
type Result struct {
	// Data holds each member's data, decoded from JSON into an any, so
	// numbers are float64 and objects map[string]any. It is nil when the
	// join asked for raw results (JoinOptions.RawResults).
	Data []any
	// Raw holds each member's data as JSON, to decode into a type. Its
	// elements share one buffer, each capped at its own length, so that
	// appending to one copies it rather than overwriting the next.
	Raw []json.RawMessage
	// Rank is this member's index in Data.
	Rank int
	// Err is set when the join did not complete.
	Err error
}

// Watcher delivers the Result of one join. C receives exactly one Result.
type Watcher struct {
	C <-chan Result
}

type watchKey struct {
	group  string
	member uuid.UUID
}

// poller watches one join until its outcome is final.
type poller struct {
	cancel context.CancelFunc
	out    chan Result
	done   atomic.Bool
}

// finish delivers res, after calling cb, unless a result was delivered
// already. The callback runs outside any lock, so it may call the client.
func (p *poller) finish(res Result, cb func()) {
	if !p.done.CompareAndSwap(false, true) {
		return
	}
	if cb != nil {
		cb()
	}
	p.out <- res
}

// JoinOptions are the settings of JoinContext beyond the member and its
// data. The zero value is Join's: no callbacks, and the original's
// DefaultTimeout, after which the group stays open.
type JoinOptions struct {
	// OnReady, when not nil, is called once the last member has joined,
	// before the Watcher receives every member's data.
	OnReady func()
	// OnTimeout, when not nil, is called with ErrAllGatherTimeoutExceeded
	// once the group has not filled up Timeout after it was created.
	OnTimeout func(error)
	// Timeout is how long after its creation the group may take to fill
	// up before OnTimeout is called; zero means DefaultTimeout. Only the
	// join that creates the group sets it; later joins keep it.
	Timeout time.Duration
	// FailOnTimeout makes Timeout a hard deadline, as JoinWithDeadline
	// does: a group not complete by then fails for every member, whose
	// Watchers receive ErrAllGatherTimeoutExceeded, and a join after that
	// starts the group afresh. Without it the group stays open, as in the
	// original, and completes however late its last member joins. Only the
	// join that creates the group sets it.
	FailOnTimeout bool
	// RawResults leaves every member's data as JSON: the Result carries
	// Raw alone and Data is nil, so the member pays for no decoding into
	// an any, which for a large group costs far more than the answer's
	// transfer (each member decodes every member's data). Decode the
	// elements of Raw that are needed, into their own types.
	RawResults bool
}

// Join adds member id with data to the allgather group groupID of numPeers
// members, as Determined's allgather.Join. Data is sent as JSON. When the
// last member joins, ready is called (if not nil) and the Watcher receives
// every member's data. If the group has not filled up DefaultTimeout after
// it was created, timeout is called (if not nil) with
// ErrAllGatherTimeoutExceeded, as in the original, and the group stays open:
// when the last member joins, however late, the Watcher still receives the
// data. A later join with the same id makes this one's Watcher receive
// ErrReconnected, and Leave makes it receive ErrClosed. The group lives in
// the replicated state, so the watch survives a leader failover.
func (c *Client) Join(groupID string, id uuid.UUID, numPeers int, data any, ready func(), timeout func(error)) (Watcher, error) {
	return c.JoinContext(context.Background(), groupID, id, numPeers, data, JoinOptions{OnReady: ready, OnTimeout: timeout})
}

// JoinWithTimeout is Join with the time after which timeout is called when
// the group is not complete (zero means DefaultTimeout); the group stays
// open. Only the join that creates the group sets it.
func (c *Client) JoinWithTimeout(groupID string, id uuid.UUID, numPeers int, data any, ready func(), timeout func(error), groupTimeout time.Duration) (Watcher, error) {
	return c.JoinContext(context.Background(), groupID, id, numPeers, data,
		JoinOptions{OnReady: ready, OnTimeout: timeout, Timeout: groupTimeout})
}

// JoinWithDeadline is Join with a hard deadline: a group that is not
// complete deadline after it was created fails for every member, whose
// Watchers receive ErrAllGatherTimeoutExceeded after timeout (if not nil)
// is called with it. A join after that starts the group afresh; a member
// of the failed round that polls only then still gets the timeout, which
// the cluster keeps for the deadline or five minutes, the longer. Zero
// means DefaultTimeout. Only the join that creates the group sets it, and
// the kind of timeout.
func (c *Client) JoinWithDeadline(groupID string, id uuid.UUID, numPeers int, data any, ready func(), timeout func(error), deadline time.Duration) (Watcher, error) {
	return c.JoinContext(context.Background(), groupID, id, numPeers, data,
		JoinOptions{OnReady: ready, OnTimeout: timeout, Timeout: deadline, FailOnTimeout: true})
}

// JoinContext is Join with its settings in opts (JoinWithTimeout and
// JoinWithDeadline are JoinContext with opts.Timeout, and
// opts.FailOnTimeout for the latter), bounded by ctx. ctx bounds the
// join and then the watch: when it is done before the group's outcome,
// the Watcher receives ctx's error (errors.Is matches context.Canceled or
// context.DeadlineExceeded) and no callback is called. The member stays
// in the group: Leave takes it out.
func (c *Client) JoinContext(ctx context.Context, groupID string, id uuid.UUID, numPeers int, data any, opts JoinOptions) (Watcher, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return Watcher{}, fmt.Errorf("%w: allgather data: %v", ErrInvalid, err)
	}
	var resp rpc.JoinResponse
	err = c.do(ctx, &call{method: http.MethodPost, path: rpc.PathAllgatherJoin, write: true, out: &resp,
		body: rpc.JoinRequest{Group: groupID, Member: id, NumPeers: numPeers, Data: raw,
			Timeout: rpc.Duration(opts.Timeout), FailOnTimeout: opts.FailOnTimeout}})
	if err != nil {
		return Watcher{}, err
	}
	groupTimeout := opts.Timeout
	if groupTimeout == 0 {
		groupTimeout = DefaultTimeout
	}
	pctx, cancel := c.callContext(ctx)
	p := &poller{cancel: cancel, out: make(chan Result, 1)}
	key := watchKey{groupID, id}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		cancel()
		return Watcher{}, ErrClientClosed
	}
	if c.watchers[key] == nil {
		c.watchers[key] = make(map[*poller]struct{})
	}
	c.watchers[key][p] = struct{}{}
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		defer c.dropPoller(key, p)
		c.poll(pctx, p, key, resp.Generation, opts, groupTimeout)
	}()
	return Watcher{C: p.out}, nil
}

// Leave removes member id from the group, as Determined's allgather.Leave.
// This client's watchers of that member receive ErrClosed and stop. When
// the last member leaves, the group closes.
func (c *Client) Leave(groupID string, id uuid.UUID) error {
	return c.LeaveContext(context.Background(), groupID, id)
}

// LeaveContext is Leave bounded by ctx.
func (c *Client) LeaveContext(ctx context.Context, groupID string, id uuid.UUID) error {
	err := c.do(ctx, &call{method: http.MethodPost, path: rpc.PathAllgatherLeave, write: true,
		body: rpc.LeaveRequest{Group: groupID, Member: id}})
	if err != nil {
		return err
	}
	key := watchKey{groupID, id}
	c.mu.Lock()
	ps := make([]*poller, 0, len(c.watchers[key]))
	for p := range c.watchers[key] {
		ps = append(ps, p)
	}
	c.mu.Unlock()
	for _, p := range ps {
		p.finish(Result{Err: ErrClosed}, nil)
		p.cancel()
	}
	return nil
}

func (c *Client) dropPoller(key watchKey, p *poller) {
	p.cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.watchers[key], p)
	if len(c.watchers[key]) == 0 {
		delete(c.watchers, key)
	}
}

// poll long-polls the watch of one join until its outcome is final.
// Unreachable nodes and elections are retried for as long as the group may
// wait, since the group's state survives a failover. The first answer that
// says the group is overdue calls opts.OnTimeout; later polls tell the
// server it has been seen.
func (c *Client) poll(ctx context.Context, p *poller, key watchKey, gen uint64, opts JoinOptions, groupTimeout time.Duration) {
	ready, timeout := opts.OnReady, opts.OnTimeout
	q := url.Values{
		rpc.WatchParamGroup:      {key.group},
		rpc.WatchParamMember:     {key.member.String()},
		rpc.WatchParamGeneration: {strconv.FormatUint(gen, 10)},
		rpc.WatchParamWait:       {watchWait.String()},
	}
	log := c.logger.With("group", key.group, "member", key.member, "generation", gen)
	for {
		var wr watchAnswer
		err := c.do(ctx, &call{method: http.MethodGet, path: rpc.PathAllgatherWatch, query: q, out: &wr,
			timeout: watchWait + watchSlack, budget: max(c.retry, groupTimeout)})
		switch {
		case ctx.Err() != nil:
			// Leave delivered ErrClosed already; otherwise Close, or the
			// end of the caller's context.
			if c.ctx.Err() != nil {
				err = ErrClientClosed
			} else {
				err = fmt.Errorf("raftmaster client: watching group %q for member %s: %w", key.group, key.member, ctxCause(ctx))
			}
			p.finish(Result{Err: err}, nil)
			return
		case err != nil:
			err = sentinel(err)
			log.Debug("allgather ended", "error", err)
			var cb func()
			if errors.Is(err, ErrAllGatherTimeoutExceeded) && timeout != nil {
				cb = func() { timeout(err) }
			}
			p.finish(Result{Err: err}, cb)
			return
		case wr.Status == rpc.WatchPending:
			if wr.Overdue && !q.Has(rpc.WatchParamSeenOverdue) {
				log.Debug("allgather group overdue")
				q.Set(rpc.WatchParamSeenOverdue, "true")
				if timeout != nil {
					timeout(ErrAllGatherTimeoutExceeded)
				}
			}
			continue
		case wr.Status == rpc.WatchComplete:
			res, err := wr.completed(opts.RawResults)
			if err != nil {
				p.finish(Result{Err: err}, nil)
				return
			}
			p.finish(res, ready)
			return
		default:
			p.finish(Result{Err: fmt.Errorf("raftmaster client: unknown allgather watch status %q", wr.Status)}, nil)
			return
		}
	}
}

// sentinel returns the allgather sentinel that err carries, so that
// ported code comparing Result.Err with == keeps working.
func sentinel(err error) error {
	for _, s := range []error{ErrClosed, ErrReconnected, ErrAllGatherTimeoutExceeded} {
		if errors.Is(err, s) {
			return s
		}
	}
	return err
}
