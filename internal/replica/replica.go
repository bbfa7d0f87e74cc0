// Package replica runs one raftmaster replica of either backend: its state
// (a Raft node, or a master of the etcd backend), the HTTP API in front of
// it, the loop that registers a Raft node with its cluster, and the order
// in which it all stops. The serve command and the tests start replicas
// here and nowhere else.
package replica

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/internal/certs"
	"github.com/raftmaster/raftmaster/internal/etcdmaster"
	"github.com/raftmaster/raftmaster/internal/leader"
	"github.com/raftmaster/raftmaster/internal/metrics"
	"github.com/raftmaster/raftmaster/internal/version"
	"github.com/raftmaster/raftmaster/raftnode"
	"github.com/raftmaster/raftmaster/rpc"
)

// Config configures what every replica has, whatever its backend: the
// HTTP API in front of it.
type Config struct {
	// HTTPAddr is the address the API listens on.
	HTTPAddr string
	// API configures the HTTP handlers.
	API httpapi.Config
	// Logger receives all logs.
	Logger hclog.Logger
	// Token is the bearer token the node presents to the other nodes
	// (to become a member and register) when the API requires tokens: an operator
	// token of the shared token file.
	Token string
	// TLS, when set, serves the API over HTTPS and runs Raft over mutual
	// TLS with the node's certificate; the node's own requests to the
	// other nodes go over HTTPS and trust only the CA.
	TLS *certs.Store
	// HTTP bounds the API server's connections and requests; zero fields
	// take their defaults.
	HTTP HTTPLimits
}

// scheme is the scheme of the API of every node of the cluster.
func (cfg Config) scheme() string {
	if cfg.TLS != nil {
		return "https"
	}
	return "http"
}

// httpClient is the client the node asks the other nodes with: over TLS
// with its own certificate, trusting the CA, when the cluster uses TLS.
func (cfg Config) httpClient(timeout time.Duration) *http.Client {
	if cfg.TLS == nil {
		return &http.Client{Timeout: timeout}
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialTLSContext = cfg.TLS.DialContext
	// Through a proxy, net/http would not use DialTLSContext: the node
	// would present no certificate and trust the system's roots.
	t.Proxy = nil
	return &http.Client{Timeout: timeout, Transport: t}
}

// Raft configures a replica of the Raft backend.
type Raft struct {
	// Node configures Raft. Node.APIAddr defaults to the HTTP listener's
	// address.
	Node raftnode.Config
	// Members lists API addresses of members of a running cluster, to
	// ask for membership; empty when the node bootstraps from Node.Peers
	// or restarts.
	Members []string
	// BootstrapExpect, when above 0, lets a node with no state bootstrap
	// a new cluster of the first BootstrapExpect Members addresses, once all
	// of them answer and none has state of a cluster (see bootstrap.go).
	// Node.Peers must be empty then.
	BootstrapExpect int
}

// Etcd configures a master of the etcd backend. Master.APIAddr defaults to
// the HTTP listener's address.
type Etcd struct {
	Master etcdmaster.Config
}

// Replica is a running replica: its state (a Raft node or an etcd master)
// and the HTTP API in front of it.
type Replica struct {
	log     hclog.Logger
	apiAddr string
	node    *raftnode.Node // nil for the etcd backend
	ln      net.Listener
	http    *http.Server
	// stopState hands the state over (leadership, the etcd lock) and
	// stops it.
	stopState func(ctx context.Context) error
	// stopped is closed when the state stops on its own, and why says
	// why: a Raft log entry from a newer version, a lost etcd session.
	stopped <-chan struct{}
	why     func() error
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// listen opens the API listener and returns the address to advertise:
// advertise when set, else the listener's.
func listen(cfg *Config, advertise string) (net.Listener, string, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return nil, "", fmt.Errorf("http listener: %w", err)
	}
	if advertise == "" {
		advertise = ln.Addr().String()
	}
	ln = limitListener(ln, cfg.HTTP)
	if cfg.TLS != nil {
		ln = tls.NewListener(ln, cfg.TLS.APIServer())
	}
	return ln, advertise, nil
}

// MetricsPath serves the replica's metrics in Prometheus format, beside
// the API and without its routing: raft's own, every job's state and the
// API's requests (package metrics).
const MetricsPath = "/metrics"

// newMetrics returns a replica's metrics, or nil, logged, when they
// cannot be made: the replica then serves without them.
func newMetrics(log hclog.Logger, mc metrics.Config) *metrics.Metrics {
	m, err := metrics.New(mc)
	if err != nil {
		log.Error("metrics are off", "error", err)
		return nil
	}
	return m
}

// raftLeadership is a Raft node's view of leadership, for the metrics.
func raftLeadership(n *raftnode.Node) metrics.Leadership {
	_, known := n.Leader()
	voters := 0
	for _, s := range n.Configuration() {
		if s.Voter {
			voters++
		}
	}
	return metrics.Leadership{
		HasLeader: known, IsLeader: n.IsLeader(),
		Raft: &metrics.RaftView{
			Term: n.Raft().CurrentTerm(), LeaderChanges: n.LeaderChanges(),
			Voter: n.IsVoter(), Voters: voters,
		},
	}
}

// serve starts the HTTP API over b on r's listener, with MetricsPath
// when m is not nil.
func (r *Replica) serve(cfg Config, b httpapi.Backend, m *metrics.Metrics) {
	mux := http.NewServeMux()
	if m != nil {
		cfg.API.Observer = m
		mux.Handle("GET "+MetricsPath, promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	}
	if cfg.API.HTTPClient == nil {
		cfg.API.HTTPClient = cfg.httpClient(0)
	}
	mux.Handle("/", httpapi.NewHandler(b, cfg.API, cfg.Logger.Named("http")))
	r.http = boundedServer(mux, cfg.HTTP)
	r.http.ErrorLog = cfg.Logger.Named("http").StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		if err := r.http.Serve(r.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			r.log.Error("http server stopped", "error", err)
		}
	}()
}

// StartRaft listens, starts Raft and serves the API. It returns once the
// listeners are up; becoming a member and registering go on in the
// background.
func StartRaft(cfg Config, rc Raft) (*Replica, error) {
	ln, apiAddr, err := listen(&cfg, rc.Node.APIAddr)
	if err != nil {
		return nil, err
	}
	rc.Node.APIAddr = apiAddr
	rc.Node.Logger = cfg.Logger
	if cfg.TLS != nil {
		rc.Node.PeerTLS = cfg.TLS
	}
	peers := newPeerAPI(cfg)
	rc.Node.PeerLevel = func(ctx context.Context, server fsm.Registration) (uint64, error) {
		if server.APIAddr == "" {
			return 0, errors.New("it has not registered its API address yet")
		}
		st, err := fetchStatus(ctx, peers, server.APIAddr)
		return max(st.Protocol, fsm.Protocol1), err
	}
	// The metrics come first, to time the node's work from its start;
	// they read the node once it exists.
	var started atomic.Pointer[raftnode.Node]
	m := newMetrics(cfg.Logger, metrics.Config{
		FSM: func() *fsm.FSM {
			if n := started.Load(); n != nil {
				return n.FSM()
			}
			return nil
		},
		Leadership: func() metrics.Leadership {
			if n := started.Load(); n != nil {
				return raftLeadership(n)
			}
			return metrics.Leadership{}
		},
	})
	if m != nil {
		rc.Node.Recorder = m
		rc.Node.SessionObserver = m
	}
	node, err := raftnode.New(rc.Node)
	if err != nil {
		ln.Close()
		return nil, err
	}
	started.Store(node)
	ctx, cancel := context.WithCancel(context.Background())
	r := &Replica{
		log: cfg.Logger, apiAddr: apiAddr, node: node, ln: ln, cancel: cancel,
		stopState: node.Shutdown, stopped: node.Halted(), why: node.HaltErr,
	}
	r.serve(cfg, raftBackend{node}, m)
	if rc.BootstrapExpect > 0 && node.Servers() == 0 {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			found(ctx, r.log, node, rc.Members, rc.BootstrapExpect, peers)
		}()
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		register(ctx, r.log, node, rc.Members, peers)
	}()
	if rc.Node.Limits != nil {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			reportLimitFlags(ctx, r.log, node, *rc.Node.Limits)
		}()
	}
	r.log.Info("raftmaster node started", "id", rc.Node.ID, "raft", node.RaftAddr(), "api", apiAddr)
	return r, nil
}

// StartEtcd listens, connects to etcd, campaigns for the master lock in
// the background and serves the API: standby masters redirect to the
// active one.
func StartEtcd(cfg Config, ec Etcd) (*Replica, error) {
	ln, apiAddr, err := listen(&cfg, ec.Master.APIAddr)
	if err != nil {
		return nil, err
	}
	ec.Master.APIAddr = apiAddr
	if ec.Master.Logger == nil {
		ec.Master.Logger = cfg.Logger
	}
	// The metrics come first, to count what the master's session tracker
	// does from its first term; they read the master once it exists.
	var started atomic.Pointer[etcdmaster.Master]
	mc := newMetrics(cfg.Logger, metrics.Config{
		FSM: func() *fsm.FSM {
			if m := started.Load(); m != nil {
				return m.FSM()
			}
			return nil
		},
		Leadership: func() metrics.Leadership {
			m := started.Load()
			if m == nil {
				return metrics.Leadership{}
			}
			_, known := m.Leader()
			return metrics.Leadership{HasLeader: known, IsLeader: m.Active()}
		},
	})
	if mc != nil {
		ec.Master.SessionObserver = mc
	}
	m, err := etcdmaster.Start(ec.Master)
	if err != nil {
		ln.Close()
		return nil, err
	}
	started.Store(m)
	r := &Replica{
		log: cfg.Logger, apiAddr: apiAddr, ln: ln, cancel: func() {},
		stopState: m.Shutdown, stopped: m.Lost(),
		why: func() error {
			return errors.New("lost the etcd session: this master can no longer prove it holds the lock")
		},
	}
	r.serve(cfg, m, mc)
	r.log.Info("raftmaster etcd-backend master started", "id", ec.Master.ID, "api", apiAddr,
		"etcd", strings.Join(ec.Master.Store.Endpoints, ","))
	return r, nil
}

// Node returns the Raft node, or nil for a master of the etcd backend.
func (r *Replica) Node() *raftnode.Node { return r.node }

// APIAddr returns the advertised API address.
func (r *Replica) APIAddr() string { return r.apiAddr }

// Stopped returns a channel that is closed when the replica's state stops
// on its own; Err then says why, and the process should exit with it.
func (r *Replica) Stopped() <-chan struct{} { return r.stopped }

// Err says why the replica stopped on its own.
func (r *Replica) Err() error { return r.why() }

// Shutdown hands the state over first (leadership, the etcd lock), so that
// another replica takes over while this one finishes its requests, then
// stops the HTTP server.
func (r *Replica) Shutdown(ctx context.Context) error {
	r.cancel()
	err := r.stopState(ctx)
	if herr := r.http.Shutdown(ctx); herr != nil && err == nil {
		err = herr
	}
	r.wg.Wait()
	return err
}

// register makes sure the cluster has this node as a member with the
// role of voter: with Members addresses, or the addresses its --peers
// gave, it asks the cluster to add it; otherwise, as a follower of a
// bootstrapped
// cluster, it asks the leader to record its API address in the node
// registry. A new incarnation of a node (one that came back with an empty
// data directory) is added as a non-voter and promoted once it has caught
// up, so it asks again until it is a voter. The leader registers itself.
//
// The registry records each node's release from protocol level 2 on.
// Below it (a rolling upgrade under way) the node waits, asking nothing,
// and once the level has risen it asks again, so that its entry gains its
// release.
func register(ctx context.Context, log hclog.Logger, node *raftnode.Node, members []string, peers peerAPI) {
	backoff := 200 * time.Millisecond
	logged := false
	for attempt := 0; ; attempt++ {
		self := rpc.AddMemberRequest{ID: node.ID(), RaftAddr: node.RaftAddr(), APIAddr: node.APIAddr(),
			Protocol: fsm.Protocol, Version: version.String(), LastIndex: node.Raft().LastIndex()}
		level := node.FSM().Protocol()
		if node.Registered() {
			if level >= fsm.Protocol {
				log.Info("node registered", "id", self.ID, "version", self.Version)
				return
			}
			if !logged {
				log.Info("node registered; its release will be once the cluster's protocol level rises", "id", self.ID, "level", level)
				logged = true
			}
			if !leader.Sleep(ctx, levelWait) {
				return
			}
			continue
		}
		var targets []string
		if node.IsLeader() {
			targets = nil // the leader loop registers the leader
		} else if leader, ok := node.Leader(); ok && leader.APIAddr != "" {
			targets = []string{leader.APIAddr}
		} else if len(members) > 0 {
			targets = members
		} else {
			targets = node.MembersToAsk()
		}
		for _, addr := range targets {
			err := postAddMember(ctx, peers, addr, self)
			if byEarlierRelease(err) {
				err = addMemberEarlierRelease(ctx, peers, addr, self)
			}
			if err == nil {
				break
			}
			if attempt%10 == 0 {
				log.Warn("asking to become a member of the cluster", "via", addr, "error", err)
			}
		}
		if !sleepBackoff(ctx, &backoff) {
			return
		}
	}
}

// reportLimitFlags logs, once at start, each limit on which the node's
// flags differ from the cluster's: when the node has caught up and the
// cluster is at protocol level 2, from which leaders no longer propose
// their flags (before, a leader may still be setting them). A node that
// leads then says it at its take-over instead.
func reportLimitFlags(ctx context.Context, log hclog.Logger, node *raftnode.Node, flags fsm.Limits) {
	for !node.Ready() || node.FSM().Protocol() < fsm.Protocol2 {
		if !leader.Sleep(ctx, 500*time.Millisecond) {
			return
		}
	}
	if !node.IsLeader() {
		leader.LogLimitFlags(log, flags, node.FSM().Limits())
	}
}

// levelWait is how often a registered node below this build's protocol
// level looks whether the level has risen.
const levelWait = 2 * time.Second

// sleepBackoff waits *backoff, then doubles it up to 2 s; it reports false
// when ctx ended first.
func sleepBackoff(ctx context.Context, backoff *time.Duration) bool {
	if !leader.Sleep(ctx, *backoff) {
		return false
	}
	*backoff = min(2**backoff, 2*time.Second)
	return true
}

// peerAPI is how a node calls the other nodes' API: over HTTPS with its
// own certificate when the cluster uses TLS, following the leader's
// redirects, with the operator token when tokens are on.
type peerAPI struct {
	client *http.Client
	scheme string
	token  string
}

// newPeerAPI returns the peerAPI of a node configured by cfg.
func newPeerAPI(cfg Config) peerAPI {
	client := cfg.httpClient(10 * time.Second)
	client.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("too many redirects")
		}
		if cfg.TLS != nil && req.URL.Scheme != "https" {
			return fmt.Errorf("refusing a redirect to plain HTTP (%s) under TLS", req.URL.Redacted())
		}
		// The leader may be on another host, where net/http would not
		// send the token on.
		setToken(req, cfg.Token)
		return nil
	}
	return peerAPI{client: client, scheme: cfg.scheme(), token: cfg.Token}
}

// url is the URL of path on the API of the node at addr.
func (p peerAPI) url(addr, path string) string { return p.scheme + "://" + addr + path }

// postAddMember asks the node at addr to add req as a member; the HTTP
// client follows the leader redirect.
func postAddMember(ctx context.Context, p peerAPI, addr string, req rpc.AddMemberRequest) error {
	body, _ := json.Marshal(req)
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url(addr, rpc.PathClusterAddMember), bytes.NewReader(body))
	if err != nil {
		return err
	}
	hr.Header.Set("Content-Type", "application/json")
	setToken(hr, p.token)
	resp, err := p.client.Do(hr)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return &addMemberRefused{status: resp.StatusCode, msg: string(bytes.TrimSpace(msg))}
	}
	return nil
}

// addMemberRefused is a request for membership that the cluster answered
// with an error.
type addMemberRefused struct {
	status int
	msg    string
}

func (e *addMemberRefused) Error() string {
	return fmt.Sprintf("%d %s: %s", e.status, http.StatusText(e.status), e.msg)
}

// byEarlierRelease reports whether err is the answer of a leader of a
// release before protocol levels to a request for membership: it refuses the fields
// it does not know (protocol, version, last_index) as invalid JSON.
func byEarlierRelease(err error) bool {
	r, ok := errors.AsType[*addMemberRefused](err)
	return ok && r.status == http.StatusBadRequest && strings.Contains(r.msg, "unknown field")
}

// addMemberEarlierRelease asks a leader of a release before protocol levels, in
// a rolling upgrade, to add or register this node, in that release's
// terms. Only a node whose server id is its name (its data directory was
// made by such a release) may be: that leader would add a new incarnation
// as a voter at once, before it has caught up, which is how an empty node
// could count towards a quorum. A new incarnation waits for an upgraded
// leader instead.
func addMemberEarlierRelease(ctx context.Context, p peerAPI, addr string, self rpc.AddMemberRequest) error {
	if raftnode.NameOf(self.ID) != self.ID {
		return fmt.Errorf("the leader runs an earlier release, which would make this new incarnation (%s) a voter before it caught up: "+
			"this node becomes a member once an upgraded node leads (upgrade the leader)", self.ID)
	}
	return postAddMember(ctx, p, addr, rpc.AddMemberRequest{ID: self.ID, RaftAddr: self.RaftAddr, APIAddr: self.APIAddr})
}

// setToken adds a bearer token to req, when there is one.
func setToken(req *http.Request, token string) {
	if token != "" {
		req.Header.Set(rpc.HeaderAuthorization, "Bearer "+token)
	}
}
