package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/raftmaster/raftmaster/rpc"
)

// Transport limits.
const (
	maxRedirects = 5
	backoffMin   = 50 * time.Millisecond
	backoffMax   = 2 * time.Second
	// defaultAttemptTimeout gives up on a node that does not answer, such
	// as a paused or partitioned leader, and moves on to the next address.
	// A healthy cluster commits in milliseconds, and a retry reuses the
	// request id, so an apply that was only slow is not applied twice.
	defaultAttemptTimeout = 5 * time.Second
	maxResponseBytes      = 256 << 20
	maxErrorBytes         = 64 << 10
)

// minConnectWait is the least time an attempt at first contact waits
// for its connection.
const minConnectWait = 500 * time.Millisecond

// errNoConnection is the cause of an attempt at first contact whose
// connection took too long.
var errNoConnection = errors.New("no connection")

// contactOutcome is what an address did at first contact.
type contactOutcome struct {
	addr string
	what string
}

// noteContact records in tried what addr did, the last outcome of each
// address replacing its earlier ones.
func noteContact(tried []contactOutcome, addr string, err error) []contactOutcome {
	what := describeFailure(err)
	for i := range tried {
		if tried[i].addr == addr {
			tried[i].what = what
			return tried
		}
	}
	return append(tried, contactOutcome{addr, what})
}

// noContactError is ErrNoContact, naming each address and what it did.
func noContactError(d time.Duration, tried []contactOutcome) error {
	parts := make([]string, len(tried))
	for i, o := range tried {
		parts[i] = strings.TrimPrefix(strings.TrimPrefix(o.addr, "http://"), "https://") + ": " + o.what
	}
	return fmt.Errorf("%w within %v: %s (check the addresses, and that the cluster runs)", ErrNoContact, d, strings.Join(parts, "; "))
}

// describeFailure says in a few words what a failed attempt's error was:
// a refused connection, no connection in time, a TLS or name-resolution
// error, or the error itself.
func describeFailure(err error) string {
	var dns *net.DNSError
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	var header tls.RecordHeaderError
	var netErr net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, errNoConnection):
		return err.Error()
	case errors.As(err, &dns):
		return "cannot resolve " + dns.Name + ": " + dns.Err
	case errors.As(err, &header):
		return "TLS error: the node does not speak TLS (an http:// address?)"
	case errors.As(err, &unknownCA), errors.As(err, &hostErr), errors.As(err, &invalid), errors.As(err, &verify):
		return "TLS error: " + innermost(err).Error()
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset (a TLS port, or not a raftmaster node?)"
	case errors.As(err, &netErr) && netErr.Timeout():
		return "timeout: " + innermost(err).Error()
	}
	return innermost(err).Error()
}

// innermost returns the error that a *url.Error wraps, or err.
func innermost(err error) error {
	var u *url.Error
	if errors.As(err, &u) {
		return u.Err
	}
	return err
}

// endpoints picks the address of the next attempt: the leader when known,
// else the addresses in turn.
type endpoints struct {
	mu     sync.Mutex
	addrs  []string
	next   int
	leader string
	// refused holds the nodes ("host:port") that refused a connection, and
	// when: a killed node. Requests name them (rpc.HeaderUnreachable) for
	// deadRefusal, so that followers that have not yet noticed a dead
	// leader wait for the next one instead of redirecting to it.
	refused map[string]time.Time
	// ids maps a base URL to the id of the node that answered there.
	ids map[string]string
	// trusted holds the base URLs, beyond addrs, that a node the client
	// was given reported as the cluster's leader: the client's token goes
	// to addrs and these only.
	trusted map[string]bool
}

// allowed reports whether base is one of the client's addresses or a
// leader a node of them reported, which the client's token may go to.
func (e *endpoints) allowed(base string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Contains(e.addrs, base) || e.trusted[base]
}

// trust adds base to the addresses the token may go to.
func (e *endpoints) trust(base string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.trusted == nil {
		e.trusted = make(map[string]bool)
	}
	e.trusted[base] = true
}

// answered records the node id an answer from base carried.
func (e *endpoints) answered(base, id string) {
	if id == "" {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ids == nil {
		e.ids = make(map[string]string)
	}
	e.ids[base] = id
}

// idOf returns the id of the node last seen answering at base, or "".
func (e *endpoints) idOf(base string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ids[base]
}

// deadRefusal is how long a node that refused a connection is named as
// unreachable: about as long as followers take to notice a dead leader.
const deadRefusal = 2 * time.Second

// count returns how many addresses the client rotates through.
func (e *endpoints) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.addrs)
}

// refusedBy records that base refused a connection.
func (e *endpoints) refusedBy(base string) {
	u, err := url.Parse(base)
	if err != nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.refused == nil {
		e.refused = make(map[string]time.Time)
	}
	e.refused[u.Host] = time.Now()
}

// refusedLately reports whether the node at base refused a connection
// within deadRefusal.
func (e *endpoints) refusedLately(base string) bool {
	u, err := url.Parse(base)
	if err != nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	at, ok := e.refused[u.Host]
	return ok && time.Since(at) <= deadRefusal
}

// unreachable returns the nodes that refused a connection within
// deadRefusal, comma separated, and forgets older ones.
func (e *endpoints) unreachable() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for host, at := range e.refused {
		if time.Since(at) > deadRefusal {
			delete(e.refused, host)
			continue
		}
		out = append(out, host)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

func (e *endpoints) pick() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.leader != "" {
		return e.leader
	}
	return e.addrs[e.next%len(e.addrs)]
}

// setLeader remembers the address that redirected requests point at, or
// that accepted a write.
func (e *endpoints) setLeader(base string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.leader = base
}

// use makes base the leader and one of the addresses to rotate through.
func (e *endpoints) use(base string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.leader = base
	for _, a := range e.addrs {
		if a == base {
			return
		}
	}
	e.addrs = append(e.addrs, base)
}

// failed moves on from base, which could not serve a request.
func (e *endpoints) failed(base string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.leader == base {
		e.leader = ""
	}
	if e.addrs[e.next%len(e.addrs)] == base {
		e.next = (e.next + 1) % len(e.addrs)
	}
}

// normalize is normalizeAddr with the client's scheme: https under
// WithTLS, else http.
func (c *Client) normalize(a string) (string, error) {
	if c.tls == nil {
		return normalizeAddr(a, "http")
	}
	u, err := normalizeAddr(a, "https")
	if err == nil && !strings.HasPrefix(u, "https://") {
		// A token must not go out in the clear, whoever named the address
		// (the caller, a node's status, etcd).
		return "", fmt.Errorf("raftmaster client: address %q is plain HTTP, and the client uses TLS", a)
	}
	return u, err
}

// normalizeAddr turns "host:port" or "http://host:port/" into
// "http://host:port"; scheme is the scheme of an address without one.
func normalizeAddr(a, scheme string) (string, error) {
	s := strings.TrimSpace(a)
	if s == "" {
		return "", errors.New("raftmaster client: empty address")
	}
	if !strings.Contains(s, "://") {
		s = scheme + "://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("raftmaster client: address %q: %w", a, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("raftmaster client: address %q: want host:port or http(s)://host:port", a)
	}
	return u.Scheme + "://" + u.Host, nil
}

// call describes one API call.
type call struct {
	method  string
	path    string
	query   url.Values
	body    any           // sent as JSON when non-nil
	write   bool          // carries a request id, reused by every retry
	out     any           // decoded from a 2xx answer when non-nil
	timeout time.Duration // of each attempt; 0 means defaultAttemptTimeout
	budget  time.Duration // for retries; 0 means the client's
	addr    string        // one node only: no rotation, redirect or retry
	// noProbe keeps the attempt on its node however long it waits: for
	// writes that are not de-duplicated, which a retry elsewhere could
	// repeat (membership changes).
	noProbe bool
	// accept is the Accept header; "" means application/json.
	accept string
	// underSession sends a write under the Client's session, opening it
	// first if need be: the calls whose grants the session holds (the
	// task calls, the save-model lease).
	underSession bool
	// grants marks a write that asks for a grant (GetTask, the
	// save-model lease) rather than reporting on one: refused because its
	// session ended before its first attempt, it is sent again under a
	// new session. A report on what the ended session held is not: that
	// went back to the queue with it.
	grants bool
	// ids, when set, are the identities of the write instead of the
	// Client's.
	ids *lanes
	// session is the session the write goes under (set by do).
	session uint64
	// final, when set, ends the call at an error it holds for, though
	// retryable: an answer that asking again would not change.
	final func(error) bool
	// stream, when set, reads a 2xx answer's body instead of out: the
	// attempt's timeout then covers the wait for the answer's headers
	// only, and a failure once stream has begun is not retried, as what
	// it wrote cannot be taken back.
	stream func(*http.Response) error
}

// errAnswerTimeout is the cause of a streamed call's attempt that got no
// answer within its timeout.
var errAnswerTimeout = errors.New("raftmaster client: no answer within the attempt's timeout")

// attemptError is the outcome of one failed attempt.
type attemptError struct {
	err        error
	retry      bool          // the call may be sent again with the same request id
	retryAfter time.Duration // what the server asked for, if anything
	moved      bool          // abandoned for a new leader, which is already the hint
	refused    bool          // the node refused the connection: it is not running
}

// do performs c, following redirects and retrying retryable failures with
// exponential backoff and full jitter until the budget or ctx runs out.
// Close ends it too.
func (c *Client) do(ctx context.Context, cl *call) error {
	ctx, done := c.callContext(ctx)
	defer done()
	var payload []byte
	if cl.body != nil {
		b, err := json.Marshal(cl.body)
		if err != nil {
			return fmt.Errorf("raftmaster client: encoding %s request: %w", cl.path, err)
		}
		payload = b
	}
	var reqID string
	var ln *lane
	ids := &c.lanes
	if cl.ids != nil {
		ids = cl.ids
	}
	var sess *session
	if cl.write {
		if cl.underSession && cl.addr == "" {
			if sess = c.sessionFor(ctx); sess != nil {
				ids, cl.session = &sess.lanes, sess.id
			}
		}
		ln = ids.acquire()
		reqID = ln.next()
		defer func() { ids.release(ln) }()
	}
	budget := cl.budget
	if budget == 0 {
		budget = c.retry
	}
	if cl.write {
		// Every attempt of a write must reach the cluster well within the
		// de-duplication window of its first.
		budget = min(budget, c.maxWriteRetry)
	}
	start := time.Now()
	var tried []contactOutcome // what each address did, until one connects
	refusals := 0              // attempts refused in a row
	first := cl.write          // no attempt of the write has been sent yet
	var last error             // the error of the last attempt
	for attempt := 0; ; attempt++ {
		if ctx.Err() != nil {
			return c.ctxErr(ctx, cl, attempt, last)
		}
		base := cl.addr
		if base == "" {
			base = c.ep.pick()
		}
		if retryWithFreshIDs && cl.write && attempt > 0 {
			reqID = ln.next()
		}
		ae := c.attempt(ctx, base, cl, payload, reqID)
		if ae == nil {
			if c.waiting.CompareAndSwap(true, false) {
				c.logger.Info("the cluster answers again", "addr", base)
			}
			return nil
		}
		if ctx.Err() != nil {
			return c.ctxErr(ctx, cl, attempt+1, last)
		}
		last = ae.err
		if !c.reached.Load() && cl.addr == "" && c.firstContact > 0 {
			tried = noteContact(tried, base, ae.err)
			if time.Since(start) >= c.firstContact && len(tried) >= c.ep.count() {
				return noContactError(c.firstContact, tried)
			}
		}
		if errors.Is(ae.err, rpc.ErrUnknownClient) && cl.write {
			if first {
				// The lane was idle past the window and the cluster
				// forgot its identity. The refusal applied nothing, and
				// no other attempt of the write was ever sent, so the
				// write goes again, at once, as the first request of a
				// new identity.
				ids.renew(ln)
				reqID = ln.next()
				first = false
				attempt--
				continue
			}
			// A retry refused so may follow an attempt that was applied
			// before the cluster forgot the identity.
			return fmt.Errorf("raftmaster client: %s %s: the write may or may not have applied (an earlier attempt may have, before the cluster forgot this client): %w", cl.method, cl.path, ae.err)
		}
		if errors.Is(ae.err, rpc.ErrSessionExpired) && sess != nil {
			c.dropSession(sess)
			if first && cl.grants {
				// The session ended before the write's first attempt,
				// which the refusal shows was not applied: the write
				// goes again, at once, under a new session (or none).
				ids.release(ln)
				ids, cl.session = &c.lanes, 0
				if sess = c.sessionFor(ctx); sess != nil {
					ids, cl.session = &sess.lanes, sess.id
				}
				ln = ids.acquire()
				reqID = ln.next()
				first = false
				attempt--
				continue
			}
			if first {
				return fmt.Errorf("raftmaster client: %s %s: the session it was made under ended, and what it held went back to the queue; "+
					"nothing was applied: %w", cl.method, cl.path, ae.err)
			}
			return fmt.Errorf("raftmaster client: %s %s: the session ended; the write may or may not have applied before it did, "+
				"and what the session held went back: %w", cl.method, cl.path, ae.err)
		}
		first = false
		if !ae.retry || cl.addr != "" || cl.final != nil && cl.final(ae.err) {
			return ae.err
		}
		if !ae.moved {
			c.ep.failed(base)
		}
		wait := rand.N(min(backoffMax, backoffMin<<min(attempt, 10)) + 1)
		if ae.retryAfter > 0 {
			wait = max(wait, min(ae.retryAfter, backoffMax))
		}
		if ae.refused {
			refusals++
		} else {
			refusals = 0
		}
		if ae.moved {
			// Abandoned for the leader the probe found, after the
			// probe's delay at least: the call goes there at once.
			wait = 0
		}
		if ae.refused && refusals < c.ep.count() {
			// A killed node: ask the next one at once. It holds the call
			// until a leader serves (naming this node as unreachable),
			// so there is nothing to back off from, unless every node
			// refuses.
			wait = 0
		}
		if c.reached.Load() && !ae.moved && c.waiting.CompareAndSwap(false, true) {
			c.logger.Info("waiting for the cluster's leader", "path", cl.path, "addr", base, "error", ae.err, "retry_budget", budget)
		}
		elapsed := time.Since(start)
		if elapsed >= budget {
			return fmt.Errorf("raftmaster client: %s %s: giving up after %d attempts in %v: %w",
				cl.method, cl.path, attempt+1, time.Since(start).Round(time.Millisecond), ae.err)
		}
		// The server's Retry-After is honoured loosely: never past the
		// budget, so that a short budget still gets its last attempt.
		wait = min(wait, budget-elapsed)
		c.logger.Debug("retrying", "path", cl.path, "addr", base, "attempt", attempt+1, "wait", wait, "error", ae.err)
		if !sleep(ctx, wait) {
			return c.ctxErr(ctx, cl, attempt+1, last)
		}
	}
}

// ctxErr is the error of a call whose context is done after attempts
// attempts, last being the latest failure (nil when none had failed
// before the context ended): ErrClientClosed once the client is
// closed, else the context's error, which errors.Is matches with
// context.Canceled or context.DeadlineExceeded.
func (c *Client) ctxErr(ctx context.Context, cl *call, attempts int, last error) error {
	if c.ctx.Err() != nil {
		return ErrClientClosed
	}
	what := cl.method + " " + cl.path
	if last != nil {
		what += fmt.Sprintf(" after %d attempts (the last failure: %v)", attempts, last)
	}
	note := ""
	if attempts > 0 && cl.write {
		// Asking again takes a new call, with a new request id.
		note = "; the write may or may not have applied"
	}
	return fmt.Errorf("raftmaster client: %s: %w%s", what, ctxCause(ctx), note)
}

// ctxCause is the error of ctx, which is done, together with its cause
// when the canceller gave one (context.WithCancelCause).
func ctxCause(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("%w: %w", err, cause)
	}
	return err
}

// attempt sends cl to base, following up to maxRedirects redirects.
func (c *Client) attempt(ctx context.Context, base string, cl *call, payload []byte, reqID string) *attemptError {
	timeout := cl.timeout
	if timeout == 0 {
		timeout = c.attemptTimeout
	}
	if timeout == 0 {
		timeout = defaultAttemptTimeout
	}
	ctx, cancelCause := context.WithCancelCause(ctx)
	defer cancelCause(nil)
	// answered ends the attempt's timeout once a streamed answer's
	// headers are in, and reports whether it had not run out.
	answered := func() bool { return true }
	if cl.stream == nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	} else {
		t := time.AfterFunc(timeout, func() { cancelCause(errAnswerTimeout) })
		defer t.Stop()
		answered = t.Stop
	}
	var current atomic.Pointer[string] // the node being asked
	current.Store(&base)
	connected := func() {}
	if !c.reached.Load() && c.firstContact > 0 {
		// At first contact, a node that takes long to connect to is
		// given up, so that every address is tried within the
		// first-contact timeout; once connected, the attempt's own
		// timeout applies.
		d := max(c.firstContact/time.Duration(max(c.ep.count(), 1)), minConnectWait)
		t := time.AfterFunc(d, func() { cancelCause(fmt.Errorf("%w within %v", errNoConnection, d)) })
		defer t.Stop()
		connected = func() { t.Stop() }
	}
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) {
			connected()
			c.reached.Store(true)
		},
	})
	stopWatch := func() {}
	if cl.timeout == 0 && cl.addr == "" && !cl.noProbe {
		// Long polls set their own timeout and are expected to wait.
		stopWatch = sync.OnceFunc(c.watchLeaderMove(ctx, &current, cancelCause))
		defer stopWatch()
	}
	accept := cl.accept
	if accept == "" {
		accept = rpc.ContentTypeJSON
	}
	target := base + c.route(cl.path)
	if len(cl.query) > 0 {
		target += "?" + cl.query.Encode()
	}
	for redirects := 0; ; redirects++ {
		var body io.Reader
		if payload != nil {
			body = bytes.NewReader(payload)
		}
		req, err := http.NewRequestWithContext(ctx, cl.method, target, body)
		if err != nil {
			return &attemptError{err: fmt.Errorf("raftmaster client: %w", err)}
		}
		if payload != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Accept", accept)
		c.setToken(req)
		if reqID != "" {
			req.Header.Set(rpc.HeaderRequestID, reqID)
		}
		if cl.session != 0 {
			req.Header.Set(rpc.HeaderSession, strconv.FormatUint(cl.session, 10))
		}
		if dead := c.ep.unreachable(); dead != "" {
			req.Header.Set(rpc.HeaderUnreachable, dead)
		}
		resp, err := c.hc.Do(req)
		if err == nil {
			c.ep.answered(*current.Load(), resp.Header.Get(rpc.HeaderNode))
		}
		if err != nil {
			if errors.Is(err, syscall.ECONNREFUSED) {
				c.ep.refusedBy(*current.Load())
				return &attemptError{err: err, retry: true, refused: true}
			}
			if cause := context.Cause(ctx); errors.Is(cause, errLeaderMoved) {
				return &attemptError{err: cause, retry: true, moved: true}
			} else if errors.Is(cause, errAnswerTimeout) || errors.Is(cause, errNoConnection) {
				return &attemptError{err: cause, retry: true}
			}
			return &attemptError{err: err, retry: true}
		}
		if resp.StatusCode == http.StatusTemporaryRedirect || resp.StatusCode == http.StatusPermanentRedirect {
			loc := resp.Header.Get("Location")
			discard(resp)
			if cl.addr != "" {
				return &attemptError{err: fmt.Errorf("raftmaster client: %s redirected %s to %q", cl.addr, cl.path, loc)}
			}
			if redirects >= maxRedirects {
				return &attemptError{err: fmt.Errorf("raftmaster client: %s: more than %d redirects", cl.path, maxRedirects), retry: true}
			}
			u, err := req.URL.Parse(loc)
			if err != nil || loc == "" || (u.Scheme != "http" && u.Scheme != "https") {
				return &attemptError{err: fmt.Errorf("raftmaster client: bad redirect %q from %s", loc, target), retry: true}
			}
			if c.tls != nil && u.Scheme != "https" {
				return &attemptError{err: fmt.Errorf("raftmaster client: refusing a redirect from %s to plain HTTP (%q): the client uses TLS", target, loc)}
			}
			next := u.Scheme + "://" + u.Host
			if c.token != "" && !c.ep.allowed(next) {
				// The token goes only to the addresses the client was
				// given and the leader they report, never to any host a
				// redirect names.
				from := *current.Load()
				if err := c.checkLeader(ctx, from, next); err != nil {
					return &attemptError{err: fmt.Errorf("raftmaster client: refusing the redirect of %s from %s to %s, with the client's token: "+
						"it is not an address the client was given, nor the leader the cluster reports (%v)", cl.path, from, next, err), retry: true}
				}
				c.ep.trust(next)
			}
			c.ep.setLeader(next)
			current.Store(&next)
			c.logger.Debug("redirected", "path", cl.path, "from", target, "to", u.String())
			target = u.String()
			continue
		}
		if cl.stream != nil && resp.StatusCode >= 200 && resp.StatusCode < 300 {
			// The answer has begun: it takes as long as it takes, on
			// this node, whoever leads meanwhile.
			stopWatch()
			if !answered() {
				resp.Body.Close()
				return &attemptError{err: errAnswerTimeout, retry: true}
			}
			if ctx.Err() != nil {
				// Abandoned for a new leader just as the answer came:
				// nothing was written yet, so it may be asked again.
				resp.Body.Close()
				cause := context.Cause(ctx)
				return &attemptError{err: cause, retry: true, moved: errors.Is(cause, errLeaderMoved)}
			}
			defer resp.Body.Close()
			if err := cl.stream(resp); err != nil {
				return &attemptError{err: err}
			}
			return nil
		}
		ae := c.answer(resp, cl)
		if ae == nil && cl.write && cl.addr == "" {
			// The node that accepted a write is the leader.
			c.ep.setLeader(req.URL.Scheme + "://" + req.URL.Host)
		}
		return ae
	}
}

// checkLeader asks the node at from, which the token may go to, for its
// status (a stale read: from answers itself) and returns nil when the
// leader it names is at next.
func (c *Client) checkLeader(ctx context.Context, from, next string) error {
	ctx, cancel := context.WithTimeout(ctx, defaultAttemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, from+rpc.PathStatus+"?"+rpc.ParamStale, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", rpc.ContentTypeJSON)
	c.setToken(req)
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		discard(resp)
		return fmt.Errorf("its status answered %s", resp.Status)
	}
	var st rpc.StatusResponse
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxErrorBytes)).Decode(&st); err != nil {
		return fmt.Errorf("its status: %w", err)
	}
	if st.Leader.APIAddr == "" {
		return errors.New("it knows no leader")
	}
	leader, err := c.normalize(st.Leader.APIAddr)
	if err != nil {
		return err
	}
	if leader != next {
		return fmt.Errorf("it reports the leader at %s", leader)
	}
	return nil
}

// answer reads a non-redirect response.
func (c *Client) answer(resp *http.Response, cl *call) *attemptError {
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		b, err := readBody(resp, maxResponseBytes+1)
		if err != nil {
			// Cut off mid-answer: the call is idempotent, ask again.
			return &attemptError{err: fmt.Errorf("raftmaster client: reading %s answer: %w", cl.path, err), retry: true}
		}
		if len(b) > maxResponseBytes {
			return &attemptError{err: fmt.Errorf("raftmaster client: %s answer exceeds %d bytes", cl.path, maxResponseBytes)}
		}
		if cl.out == nil {
			return nil
		}
		if d, ok := cl.out.(answerDecoder); ok {
			err = d.decodeAnswer(b)
		} else {
			err = json.Unmarshal(b, cl.out)
		}
		if err != nil {
			return &attemptError{err: fmt.Errorf("raftmaster client: decoding %s answer: %w", cl.path, err)}
		}
		return nil
	}
	b, readErr := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBytes))
	e := &rpc.Error{}
	if err := json.Unmarshal(b, e); err != nil || e.Code == "" {
		// Not one of ours: a proxy, or a connection cut mid-answer.
		e = &rpc.Error{Code: rpc.CodeInternal, Message: strings.TrimSpace(string(b))}
		switch resp.StatusCode {
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			e.Code = rpc.CodeUnavailable
		}
		if readErr != nil {
			e.Code = rpc.CodeUnavailable
		}
		if resp.StatusCode == http.StatusBadRequest && strings.Contains(e.Message, "HTTP request to an HTTPS server") {
			// Go's answer on a TLS port to a plain-HTTP request.
			e.Message = resp.Request.URL.Host + " serves HTTPS: trust the cluster's CA (client.WithTLS; the CLI's --tls-ca or RAFTMASTER_TLS_CA)"
		}
		if e.Message == "" {
			e.Message = resp.Status
		}
	}
	e.Status = resp.StatusCode
	return &attemptError{err: e, retry: rpc.Retryable(e), retryAfter: parseRetryAfter(resp.Header.Get("Retry-After"))}
}

// answerDecoder is a call's out that decodes its answer itself, from
// the body that it may keep slices of.
type answerDecoder interface {
	decodeAnswer([]byte) error
}

// readBody reads resp's body, up to limit bytes, into a buffer of the
// answer's length when the server gave it (io.ReadAll would grow one,
// copying and clearing as it goes).
func readBody(resp *http.Response, limit int64) ([]byte, error) {
	n := resp.ContentLength
	if n < 0 || n >= limit {
		return io.ReadAll(io.LimitReader(resp.Body, limit))
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(resp.Body, b); err != nil {
		return nil, err
	}
	return b, nil
}

// discard drains a little of the body, so the connection can be reused,
// and closes it.
func discard(resp *http.Response) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBytes))
	resp.Body.Close()
}

// parseRetryAfter reads a Retry-After header in seconds or as a date.
func parseRetryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// route returns where path is served for the client's job: under
// /v1/jobs/{job}/ for a job-scoped endpoint of a job set with WithJob,
// else path itself.
func (c *Client) route(path string) string {
	if c.job == "" || !rpc.JobScoped(path) {
		return path
	}
	return rpc.JobPath(url.PathEscape(c.job), path)
}

// setToken adds the client's bearer token (WithToken), if any, to req.
func (c *Client) setToken(req *http.Request) {
	if c.token != "" {
		req.Header.Set(rpc.HeaderAuthorization, "Bearer "+c.token)
	}
}
