package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/rpc"
)

// Sessions. A Client opens one session, at its first write to a cluster
// at protocol level 6 (rpc.SessionProtocol), and keeps it alive in the
// background, sending a keep-alive every third of its TTL with the
// progress of the tasks its reader holds: how many records of each the
// training loop has consumed (NextRecord returned them). Every write
// carries it: the tasks the Client leases and the save-model lease it is
// granted are the session's, and go back at once when it ends, whether
// Close closes it or the leader gets no keep-alive for its TTL (the
// process died, or lost the cluster). A task held by the session needs no renewal. The writes of
// the task calls and the save-model lease go under the session, with
// de-duplication identities of the session's own, so that no retry of a
// session that has ended is ever applied (ErrSessionExpired); the Client
// then opens a new session for its later calls.
//
// On a cluster below level 6, or WithoutSession, the Client works as
// before: leases run out after the task timeout unless renewed.

const (
	// sessionRecheck is how long a Client that found no sessions on its
	// cluster (an older level) waits before it asks again.
	sessionRecheck = time.Minute
	// sessionOpenBudget bounds how long a write waits for its session to
	// open before it goes without one.
	sessionOpenBudget = 10 * time.Second
	// keepAliveFloor bounds how often keep-alives are sent.
	keepAliveFloor = 100 * time.Millisecond
)

// WithSessionTTL sets the TTL of the Client's session: how long after its
// last keep-alive (the process died, or cannot reach the cluster) the
// leader ends it, releasing its tasks. The default is
// rpc.DefaultSessionTTL, 5 seconds; it is at least one second.
func WithSessionTTL(ttl time.Duration) Option {
	return func(c *Client) error {
		if ttl < time.Second {
			return fmt.Errorf("raftmaster client: WithSessionTTL(%v): a session lives at least 1s", ttl)
		}
		c.sess.ttl = ttl
		return nil
	}
}

// WithoutSession makes a Client that opens no session: its leases run out
// after the task timeout unless renewed, as on clusters below protocol
// level 6.
func WithoutSession() Option {
	return func(c *Client) error {
		c.sess.off = true
		return nil
	}
}

// sessions is the Client's session state.
type sessions struct {
	ttl time.Duration // the TTL asked for
	off bool          // WithoutSession
	// ids are the identities of the calls that open and close sessions,
	// apart from the Client's other writes.
	ids lanes

	mu      sync.Mutex
	closing bool          // Close began: no session is opened any more
	cur     *session      // the open session, nil for none
	opening chan struct{} // closed when the open in flight is over
	retryAt time.Time     // no session is asked for before it
	// progress holds, by task, the records the training loop has consumed
	// of each task the session holds.
	progress map[progressKey]int64
}

type progressKey struct {
	job  string
	meta TaskMeta
}

// session is one open session and the identities of its writes.
type session struct {
	id    uint64
	ttl   time.Duration
	lanes lanes
	done  chan struct{} // closed when the session is dropped
}

// Session returns the id of the Client's session, 0 when it has none
// open.
func (c *Client) Session() uint64 {
	c.sess.mu.Lock()
	defer c.sess.mu.Unlock()
	if c.sess.cur == nil {
		return 0
	}
	return c.sess.cur.id
}

// sessionTTL is the TTL of the Client's session: the open one's, else
// the one it asks for.
func (c *Client) sessionTTL() time.Duration {
	c.sess.mu.Lock()
	defer c.sess.mu.Unlock()
	if c.sess.cur != nil && c.sess.cur.ttl > 0 {
		return c.sess.cur.ttl
	}
	if c.sess.ttl > 0 {
		return c.sess.ttl
	}
	return rpc.DefaultSessionTTL
}

// sessionFor returns the session a write goes under, opening one first
// when none is open and the cluster has sessions; nil to go without.
func (c *Client) sessionFor(ctx context.Context) *session {
	s := &c.sess
	for {
		s.mu.Lock()
		switch {
		case s.off, s.closing:
			s.mu.Unlock()
			return nil
		case s.cur != nil:
			cur := s.cur
			s.mu.Unlock()
			return cur
		case s.opening != nil:
			ch := s.opening
			s.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil
			}
		case time.Now().Before(s.retryAt):
			s.mu.Unlock()
			return nil
		}
		ch := make(chan struct{})
		s.opening = ch
		s.mu.Unlock()
		cur, err := c.openSession(ctx)
		s.mu.Lock()
		s.opening = nil
		if err != nil {
			s.retryAt = time.Now().Add(sessionRecheck)
			c.logger.Debug("writing without a session", "error", err)
		} else {
			s.cur = cur
		}
		s.mu.Unlock()
		close(ch)
		if cur != nil && !c.spawn(func() { c.keepAlive(cur) }) {
			c.dropSession(cur)
			return nil
		}
		return cur
	}
}

// errNoSessions means the cluster is below the protocol level of sessions.
var errNoSessions = errors.New("the cluster has no sessions yet")

// openSession opens a session, if the cluster is at the level of
// sessions.
func (c *Client) openSession(ctx context.Context) (*session, error) {
	ctx, cancel := context.WithTimeout(ctx, sessionOpenBudget)
	defer cancel()
	st, err := c.StatusStaleContext(ctx)
	if err != nil {
		return nil, err
	}
	if st.ClusterProtocol < rpc.SessionProtocol {
		return nil, fmt.Errorf("%w: it is at protocol level %d", errNoSessions, st.ClusterProtocol)
	}
	ttl := c.sess.ttl
	if ttl == 0 {
		ttl = rpc.DefaultSessionTTL
	}
	var resp rpc.OpenSessionResponse
	err = c.do(ctx, &call{method: http.MethodPost, path: rpc.PathSessions, body: rpc.OpenSessionRequest{TTL: rpc.Duration(ttl)},
		write: true, out: &resp, ids: &c.sess.ids, budget: sessionOpenBudget})
	if err != nil {
		return nil, err
	}
	cur := &session{id: resp.Session, ttl: time.Duration(resp.TTL), done: make(chan struct{})}
	cur.lanes.base = uuid.New()
	c.logger.Debug("session opened", "session", cur.id, "ttl", cur.ttl)
	return cur, nil
}

// dropSession forgets cur, which has ended, so that the next write opens
// a new session.
func (c *Client) dropSession(cur *session) {
	s := &c.sess
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != cur {
		return
	}
	s.cur = nil
	clear(s.progress)
	close(cur.done)
	// The session's tasks went back to the queue when it ended, maybe to
	// other trainers: the reader delivers no more of their records.
	c.loseTasks(cur.id)
}

// keepAlive sends cur's keep-alives every third of its TTL until it ends
// or the Client is closed. A keep-alive that fails is sent again at once,
// more often, until the TTL would have run out; the leader decides when
// the session ends.
func (c *Client) keepAlive(cur *session) {
	every := max(cur.ttl/3, keepAliveFloor)
	for {
		select {
		case <-cur.done:
			return
		case <-c.ctx.Done():
			return
		case <-time.After(every):
		}
		ctx, cancel := context.WithTimeout(c.ctx, cur.ttl)
		var resp rpc.KeepAliveResponse
		err := c.do(ctx, &call{method: http.MethodPost, path: sessionPath(rpc.PathSessionKeepAlive, cur.id),
			body: rpc.KeepAliveRequest{Progress: c.sessionProgress()}, out: &resp, budget: cur.ttl, timeout: cur.ttl / 2})
		cancel()
		switch {
		case err == nil:
			every = max(time.Duration(resp.TTL)/3, keepAliveFloor)
		case c.ctx.Err() != nil:
			return
		case errors.Is(err, ErrSessionExpired):
			c.logger.Warn("the session ended: its tasks went back to the queue; opening a new one at the next call", "session", cur.id)
			c.dropSession(cur)
			return
		default:
			c.logger.Warn("cannot keep the session alive", "session", cur.id, "error", err)
			every = keepAliveFloor
		}
	}
}

// closeSession closes the Client's session, if it has one, so that what
// it holds goes back at once.
func (c *Client) closeSession() {
	s := &c.sess
	s.mu.Lock()
	s.closing = true
	cur := s.cur
	s.mu.Unlock()
	if cur == nil {
		return
	}
	ctx, cancel := context.WithTimeout(c.ctx, sessionOpenBudget)
	defer cancel()
	var resp rpc.CloseSessionResponse
	err := c.do(ctx, &call{method: http.MethodDelete, path: sessionPath(rpc.PathSession, cur.id), write: true, out: &resp,
		ids: &c.sess.ids, budget: sessionOpenBudget})
	if err != nil {
		c.logger.Warn("cannot close the session; it ends when its TTL runs out", "session", cur.id, "error", err)
	}
	c.dropSession(cur)
}

// sessionPath is path with the session id in it.
func sessionPath(path string, id uint64) string {
	return strings.Replace(path, "{"+rpc.SessionParam+"}", strconv.FormatUint(id, 10), 1)
}

// trackTask starts reporting the records consumed of a task held by the
// session, consumed so far (those a restored cursor skipped), for the
// keep-alives to report.
func (c *Client) trackTask(job string, meta TaskMeta, consumed int64) {
	c.sess.mu.Lock()
	defer c.sess.mu.Unlock()
	if c.sess.progress == nil {
		c.sess.progress = make(map[progressKey]int64)
	}
	c.sess.progress[progressKey{job, meta}] = consumed
}

// sessionConsumed records that the training loop has consumed n records
// of a held task.
func (c *Client) sessionConsumed(job string, meta TaskMeta, n int64) {
	c.sess.mu.Lock()
	defer c.sess.mu.Unlock()
	k := progressKey{job, meta}
	if _, ok := c.sess.progress[k]; ok {
		c.sess.progress[k] = n
	}
}

// untrackTask stops counting a task's records.
func (c *Client) untrackTask(job string, meta TaskMeta) {
	c.sess.mu.Lock()
	defer c.sess.mu.Unlock()
	delete(c.sess.progress, progressKey{job, meta})
}

// sessionProgress is the progress the next keep-alive reports.
func (c *Client) sessionProgress() []rpc.SessionProgress {
	c.sess.mu.Lock()
	defer c.sess.mu.Unlock()
	out := make([]rpc.SessionProgress, 0, len(c.sess.progress))
	for k, n := range c.sess.progress {
		job := k.job
		if job == "" {
			job = rpc.DefaultJob
		}
		out = append(out, rpc.SessionProgress{Job: job, Task: k.meta.ID, Epoch: k.meta.Epoch, Records: n})
	}
	return out
}
