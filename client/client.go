package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	"github.com/raftmaster/raftmaster/rpc"
)

// Defaults of the options.
const (
	// DefaultRetry is how long a call keeps retrying when no leader answers.
	DefaultRetry = 2 * time.Minute
	// DefaultFirstContactTimeout is how long a client that has never
	// connected to any of its addresses keeps trying before its call fails
	// with ErrNoContact.
	DefaultFirstContactTimeout = 5 * time.Second
	// defaultPassWaitMin and defaultPassWaitMax bound the wait of the record
	// reader before it asks again for a pass that has not started yet.
	defaultPassWaitMin = time.Second
	defaultPassWaitMax = 3 * time.Second
)

// Client talks to a raftmaster cluster on behalf of a trainer or an
// operator. It is safe for concurrent use. Close stops its goroutines.
type Client struct {
	addrs          []string    // base URLs, "http://host:port"
	rawAddrs       []string    // WithAddrs, normalized by NewClient
	tls            *tls.Config // WithTLS
	hc             *http.Client
	transport      *http.Transport // ours, when WithHTTPClient was not used
	logger         hclog.Logger
	retry          time.Duration
	maxWriteRetry  time.Duration // rpc.MaxWriteRetry; tests shorten it
	bufSize        int
	clientIndexing bool
	openers        map[string]ChunkOpener // WithChunkOpener, by URL scheme
	job            string                 // WithJob; "" for the default job
	token          string                 // WithToken
	passWaitMin    time.Duration
	passWaitMax    time.Duration
	attemptTimeout time.Duration // of an attempt whose call sets none; 0 means defaultAttemptTimeout
	firstContact   time.Duration // WithFirstContactTimeout; 0 waits the retry budget

	// reached is set once a connection to one of the nodes succeeded
	// (TCP, and TLS under WithTLS): from then on the client waits through
	// outages, a full-cluster restart included, for its retry budget.
	reached atomic.Bool
	// waiting is set while a call waits for a leader, so that the wait is
	// logged once.
	waiting atomic.Bool

	id     uuid.UUID
	lanes  lanes // request ids of writes without a session
	sess   sessions
	probes probes // who leads, when an attempt hangs
	ep     endpoints

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	mu     sync.Mutex // guards closed, wg.Add and watchers
	closed bool
	wg     sync.WaitGroup

	ch     chan record
	passMu sync.Mutex // serialises StartGetRecords
	pass   *passRun
	read   readJob   // what GetTask said of the job
	held   heldTasks // the tasks the reader holds, until reported
	// lost is the loss of a session that held tasks of the reader
	// (loseTasks), until RestoreCursor.
	lost sessionLoss
	// closing is set when Close begins: a task its session holds and the
	// training loop has not consumed is left to the session's close.
	closing atomic.Bool
	// ridesOffUntil is when the reader next lets a GetTask carry the
	// finish of a task (GetTaskAfter), after a cluster below protocol
	// level 9 refused one, in unix nanoseconds; rideRetry is how long
	// after the refusal (tests shorten it).
	ridesOffUntil atomic.Int64
	rideRetry     time.Duration

	watchers map[watchKey]map[*poller]struct{}

	etcdEndpoints []string // WithEtcd
	etcdTimeout   time.Duration
	etcdAddrKey   string // WithEtcdPrefix
}

// Option configures a Client.
type Option func(*Client) error

// WithAddrs sets the API addresses of the cluster's nodes ("host:port",
// "http://host:port" or "https://host:port"; "host:port" means HTTPS
// under WithTLS). Any subset that includes a reachable node will do:
// followers redirect to the leader.
func WithAddrs(addrs ...string) Option {
	return func(c *Client) error {
		for _, a := range addrs {
			if _, err := normalizeAddr(a, "http"); err != nil {
				return err
			}
			c.rawAddrs = append(c.rawAddrs, a)
		}
		return nil
	}
}

// WithTLS makes the client speak HTTPS with conf, for a cluster started
// with serve --tls-cert: conf.RootCAs must hold the cluster's CA (see
// raftmaster tls gen), and conf.Certificates may hold a client
// certificate. Addresses without a scheme then mean HTTPS, and a plain-HTTP
// address or redirect is refused. It cannot be combined with
// WithHTTPClient: configure that client's transport instead (an
// *http.Transport with a TLSClientConfig gets the same rules).
func WithTLS(conf *tls.Config) Option {
	return func(c *Client) error {
		if conf == nil {
			return errors.New("raftmaster client: WithTLS: nil TLS configuration")
		}
		c.tls = conf.Clone()
		return nil
	}
}

// WithToken makes the client send token as its bearer token
// (Authorization: Bearer ...) on every request, for a cluster started
// with serve --auth-tokens: a trainer token for trainers, an operator
// token for cluster changes, backups, debug endpoints and job commands.
// The token goes only to the addresses the client was given (WithAddrs,
// WithEtcd) and to the leader one of them reports: a redirect to any
// other host is refused.
func WithToken(token string) Option {
	return func(c *Client) error {
		if token == "" || strings.ContainsAny(token, " \t\r\n") {
			return fmt.Errorf("raftmaster client: WithToken: empty token, or one with white space")
		}
		c.token = token
		return nil
	}
}

// WithJob makes every dataset, task, save-model and allgather call of the
// client address the job named name (a DNS label such as
// "resnet-2026-11-30") instead of the default job: its own dataset,
// passes, save-model lease and groups, which no other job's calls change.
// The job is created by its first dataset, join or save-model request (or
// by CreateJob). A name that breaks the rules is answered ErrInvalid by
// the cluster, stating the rule.
func WithJob(name string) Option {
	return func(c *Client) error {
		if name == "" {
			return fmt.Errorf("raftmaster client: WithJob: empty job name")
		}
		if name != rpc.DefaultJob {
			c.job = name
		}
		return nil
	}
}

// WithAddr sets one API address, as the original's option of the same name.
func WithAddr(addr string) Option { return WithAddrs(addr) }

// WithBuffer sets the capacity of the record channel that StartGetRecords
// fills and NextRecord drains (0, the default, as in the original).
func WithBuffer(n int) Option {
	return func(c *Client) error {
		if n < 0 {
			return fmt.Errorf("raftmaster client: negative buffer size %d", n)
		}
		c.bufSize = n
		return nil
	}
}

// WithHTTPClient sets the HTTP client. The Client uses a copy whose
// CheckRedirect it replaces, since it follows redirects itself. Leave
// hc.Timeout zero: allgather watches are long polls, and every request
// already has its own deadline.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) error {
		if hc == nil {
			return errors.New("raftmaster client: nil HTTP client")
		}
		cp := *hc
		c.hc = &cp
		return nil
	}
}

// WithLogger sets the logger (the default discards everything).
func WithLogger(l hclog.Logger) Option {
	return func(c *Client) error {
		if l == nil {
			l = hclog.NewNullLogger()
		}
		c.logger = l
		return nil
	}
}

// WithRetry sets how long a call keeps retrying while the cluster has no
// leader or its nodes cannot be reached (DefaultRetry by default). Zero
// means a single attempt. A write sends no attempt later than
// rpc.MaxWriteRetry (15 minutes) after its first, whatever the budget, so
// that the cluster, which remembers its outcome for rpc.DedupWindow (30
// minutes), answers every retry with it.
func WithRetry(maxElapsed time.Duration) Option {
	return func(c *Client) error {
		if maxElapsed < 0 {
			return fmt.Errorf("raftmaster client: negative retry budget %v", maxElapsed)
		}
		c.retry = maxElapsed
		return nil
	}
}

// WithFirstContactTimeout sets how long a client that has never connected
// to any of its addresses keeps trying before a call fails with
// ErrNoContact, whose message names each address and what it did
// (connection refused, no connection, a TLS or name-resolution error).
// The default is DefaultFirstContactTimeout (5 s); zero makes the first
// call wait the whole retry budget (WithRetry). Once any node has been
// connected to, the client waits through outages for the retry budget,
// a full-cluster restart included.
func WithFirstContactTimeout(d time.Duration) Option {
	return func(c *Client) error {
		if d < 0 {
			return fmt.Errorf("raftmaster client: negative first-contact timeout %v", d)
		}
		c.firstContact = d
		return nil
	}
}

// WithClientIndexing makes SetDataset expand the globs and index the
// RecordIO files here, and send the chunk list, for masters that cannot see
// the data volume. By default the leader does it, as in the original.
func WithClientIndexing(on bool) Option {
	return func(c *Client) error {
		c.clientIndexing = on
		return nil
	}
}

// NewClient returns a Client for the cluster named by WithAddrs or WithAddr.
func NewClient(opts ...Option) (*Client, error) {
	c := &Client{
		logger:        hclog.NewNullLogger(),
		retry:         DefaultRetry,
		firstContact:  DefaultFirstContactTimeout,
		maxWriteRetry: rpc.MaxWriteRetry,
		passWaitMin:   defaultPassWaitMin,
		passWaitMax:   defaultPassWaitMax,
		rideRetry:     rideRetry,
		id:            uuid.New(),
		watchers:      make(map[watchKey]map[*poller]struct{}),
	}
	for _, opt := range opts {
		if err := opt(c); err != nil {
			return nil, err
		}
	}
	if c.tls != nil && c.hc != nil {
		return nil, errors.New("raftmaster client: WithTLS and WithHTTPClient: set TLS on the HTTP client's transport instead")
	}
	if t, ok := transportOf(c.hc); ok && t.TLSClientConfig != nil {
		// A caller's transport configured for TLS: the same rules as
		// WithTLS (host:port means HTTPS, no plain-HTTP address).
		c.tls = t.TLSClientConfig
	}
	for _, a := range c.rawAddrs {
		u, err := c.normalize(a)
		if err != nil {
			return nil, err
		}
		c.addrs = append(c.addrs, u)
	}
	if c.hc == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 64
		t.TLSClientConfig = c.tls
		c.transport = t
		c.hc = &http.Client{Transport: t}
	}
	// etcd gets its own copy: the API's redirect policy is set below, while
	// the discovery's goroutine may still run.
	etcdHC := *c.hc
	if len(c.etcdEndpoints) > 0 {
		addr, err := c.discoverMaster(&etcdHC)
		if err != nil {
			return nil, err
		}
		base, err := c.normalize(addr)
		if err != nil {
			return nil, fmt.Errorf("raftmaster client: master address in etcd: %w", err)
		}
		c.addrs = append([]string{base}, c.addrs...)
	}
	if len(c.addrs) == 0 {
		return nil, errors.New("raftmaster client: no address: use WithAddrs or WithEtcd")
	}
	c.hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c.logger = c.logger.Named("client")
	c.ep.addrs = c.addrs
	c.lanes.base = c.id
	c.sess.ids.base = uuid.NewSHA1(c.id, []byte("sessions"))
	c.ch = make(chan record, c.bufSize)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if len(c.etcdEndpoints) > 0 {
		c.spawn(func() { c.followMaster(&etcdHC) })
	}
	return c, nil
}

// transportOf returns hc's transport when it is an *http.Transport.
func transportOf(hc *http.Client) (*http.Transport, bool) {
	if hc == nil {
		return nil, false
	}
	t, ok := hc.Transport.(*http.Transport)
	return t, ok
}

// Close stops the record reader, reporting finished the tasks whose
// records the training loop consumed (for 5 seconds at most), then closes
// the Client's session, so that the other tasks it holds go back to the
// queue at once, and stops the allgather watchers and waits for them.
// Watchers still waiting receive ErrClientClosed; calls in flight fail
// with it. Close is idempotent.
func (c *Client) Close() error {
	c.stopReader()
	c.closeSession()
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	if c.transport != nil {
		// Ours alone; a caller's HTTP client is the caller's to clean up.
		c.transport.CloseIdleConnections()
	}
	return nil
}

// spawn runs f in a goroutine that Close waits for. It reports false, and
// does not run f, once the client is closed.
func (c *Client) spawn(f func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
	return true
}

// sleep waits for d or until ctx is done, and reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// callContext returns ctx, ended also when the client is closed, so that a
// call with the caller's context fails with ErrClientClosed after Close.
// Call done when the call returns.
func (c *Client) callContext(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.ctx, cancel)
	if c.ctx.Err() != nil {
		// AfterFunc cancels in a goroutine of its own: after Close, the
		// call must not start before it runs.
		cancel()
	}
	return ctx, func() { stop(); cancel() }
}
