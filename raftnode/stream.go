package raftnode

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// PeerTLS gives the TLS configurations of Raft's mutual TLS. It is asked
// at every handshake, so that reloaded certificates take effect on the
// next connection without a restart.
type PeerTLS interface {
	// PeerServer configures an accepted connection: it must require and
	// verify the peer's certificate.
	PeerServer() *tls.Config
	// PeerClient configures a connection to the node whose name is node
	// ("" when unknown) at host, the host of the Raft address dialled.
	PeerClient(host, node string) *tls.Config
}

// A connection to the Raft port starts, after the TLS handshake when TLS
// is on, with a preamble byte:
//
//   - preambleTarget, then the length (a uvarint) and the bytes of the
//     server id the dialer means to reach. The node admits the connection
//     only when that is its own server id, so that an RPC addressed to a
//     previous incarnation of the node, lost with its volume, never reaches
//     the new one. Raft's RPCs follow.
//   - preambleProbe: the node answers its Hello as JSON and closes. Nodes
//     with empty data directories ask their --peers with it whether a
//     cluster exists.
//   - a Raft RPC type byte (0 to 4): a dialer of an earlier release, which
//     names no server. It is admitted until the cluster's protocol level
//     shows that every server runs a release that sends the preamble.
const (
	preambleTarget byte = 0xF0
	preambleProbe  byte = 0xF1
	// maxRaftRPCType is the highest RPC type byte of hashicorp/raft's
	// network transport (rpcRequestPreVote).
	maxRaftRPCType byte = 4
	// maxTargetLen bounds the server id of a preamble.
	maxTargetLen = 256
	// targetSep separates the dialled address from the server id in the
	// addresses the node's ServerAddressProvider hands the transport.
	targetSep = "#"
)

// preambleTimeout bounds a TLS handshake and the preamble on Raft's port,
// from accept, so that a connection that says nothing holds nothing for
// long. A peer on a working network needs a few round trips.
const preambleTimeout = 3 * time.Second

// maxPending bounds the connections being admitted (handshake and
// preamble) at once, and maxPendingPerIP those from one source address. A
// new connection is never refused or kept waiting for a slot: it evicts a
// pending one instead, first the oldest that has sent nothing, then the
// oldest. Connections that open and stay silent therefore cannot keep a
// peer's handshake out, and cannot exhaust the process's files.
const (
	maxPending      = 256
	maxPendingPerIP = 16
)

// Hello is what a node answers a probe on its Raft port: who it is and
// whether it holds state of a cluster.
type Hello struct {
	ServerID string `json:"server_id"`
	Name     string `json:"name"`
	RaftAddr string `json:"raft_addr"`
	APIAddr  string `json:"api_addr"`
	// Servers, Term and LastIndex are as in the API's status: all zero
	// for a node that holds no state of a cluster.
	Servers   int    `json:"servers"`
	Term      uint64 `json:"term"`
	LastIndex uint64 `json:"last_index"`
	// LeaderAPI is the API address of the leader this node knows, if any.
	LeaderAPI string `json:"leader_api,omitempty"`
	// Configuration is the node's latest Raft configuration.
	Configuration []ConfigServer `json:"configuration,omitempty"`
}

// ConfigServer is a server of a Raft configuration.
type ConfigServer struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	Voter    bool   `json:"voter"`
}

// FoundersListing returns the configuration of a node that holds state and
// lists serverID as a voter: a cluster that serverID helped found and
// whose bootstrap it missed, having probed its peers before one of them
// bootstrapped. A server id names one incarnation, made when its data
// directory was, so an empty node can only be listed as a voter by a
// founder that learnt its id from a probe: it then bootstraps the same
// configuration, which its peers' logs start with.
func FoundersListing(serverID string, configuration []ConfigServer) ([]Peer, bool) {
	listed := false
	peers := make([]Peer, 0, len(configuration))
	for _, s := range configuration {
		listed = listed || (s.ID == serverID && s.Voter)
		peers = append(peers, Peer{ID: s.ID, RaftAddr: s.RaftAddr})
	}
	return peers, listed
}

// HasState reports whether the node holds state of a cluster: a
// configuration, a log entry or a term.
func (h Hello) HasState() bool { return h.Servers > 0 || h.Term > 0 || h.LastIndex > 0 }

// streamGate is what the Raft port asks the node.
type streamGate interface {
	// serverID is the node's own server id.
	serverID() string
	// requireTarget reports whether a connection must name its target.
	requireTarget() bool
	// hello describes the node for a probe.
	hello() Hello
	// admits says whether a peer that presented cert (verified by TLS)
	// may send Raft RPCs: nil when it may, or why not.
	admits(cert *x509.Certificate) error
}

// peerStream is raft's StreamLayer over TCP, and mutual TLS when tls is
// set. Accepted connections finish their handshake and preamble before
// raft sees them: a peer whose certificate the CA did not sign, or that
// addresses another server, never reaches a Raft handler, and the refusal
// is logged. The advertised address is kept as written, and a host name
// is only looked up when a peer dials it.
type peerStream struct {
	ln        net.Listener
	advertise net.Addr
	tls       PeerTLS
	gate      streamGate
	log       hclog.Logger

	pending  pendingSet
	accepted chan net.Conn
	done     chan struct{}
	once     sync.Once
	wg       sync.WaitGroup
}

var _ raft.StreamLayer = (*peerStream)(nil)

// newPeerStream serves Raft on ln; advertise is the address other nodes
// dial.
func newPeerStream(ln net.Listener, advertise net.Addr, conf PeerTLS, gate streamGate, log hclog.Logger) *peerStream {
	s := &peerStream{
		ln: ln, advertise: advertise, tls: conf, gate: gate, log: log,
		accepted: make(chan net.Conn), done: make(chan struct{}),
	}
	s.pending.log = log
	s.wg.Add(1)
	go s.acceptLoop()
	return s
}

// acceptLoop accepts connections until Close, backing off on errors (too
// many open files, for one) rather than giving up: a listener that stopped
// would cut the node off from Raft for good. Each connection is admitted
// in its own goroutine, under the pending bounds.
func (s *peerStream) acceptLoop() {
	defer s.wg.Done()
	backoff := 5 * time.Millisecond
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.done:
				return
			case <-time.After(backoff):
			}
			s.log.Warn("raft listener: accept failed; retrying", "error", err, "backoff", backoff)
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		pc := s.pending.add(conn)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			c := s.admit(pc)
			s.pending.remove(pc)
			if c != nil {
				select {
				case s.accepted <- c:
				case <-s.done:
					c.Close()
				}
			}
		}()
	}
}

// pendingConn is a connection being admitted; it notes whether the peer
// has sent anything yet.
type pendingConn struct {
	net.Conn
	ip    string
	seq   uint64
	spoke atomic.Bool
}

func (c *pendingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.spoke.Store(true)
	}
	return n, err
}

// pendingSet is the connections being admitted, oldest first.
type pendingSet struct {
	mu    sync.Mutex
	conns []*pendingConn
	seq   uint64
	log   hclog.Logger
}

// add registers conn, evicting pending connections beyond the bounds.
func (p *pendingSet) add(conn net.Conn) *pendingConn {
	ip := ""
	if a, ok := conn.RemoteAddr().(*net.TCPAddr); ok {
		ip = a.IP.String()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq++
	pc := &pendingConn{Conn: conn, ip: ip, seq: p.seq}
	sameIP := 0
	for _, c := range p.conns {
		if c.ip == ip {
			sameIP++
		}
	}
	if sameIP >= maxPendingPerIP {
		p.evict(func(c *pendingConn) bool { return c.ip == ip })
	}
	if len(p.conns) >= maxPending {
		p.evict(func(*pendingConn) bool { return true })
	}
	p.conns = append(p.conns, pc)
	return pc
}

// evict closes and forgets the oldest pending connection that match
// admits, preferring one that has sent nothing.
func (p *pendingSet) evict(match func(*pendingConn) bool) {
	victim := -1
	for i, c := range p.conns {
		if !match(c) {
			continue
		}
		if !c.spoke.Load() {
			victim = i
			break
		}
		if victim < 0 {
			victim = i
		}
	}
	if victim < 0 {
		return
	}
	c := p.conns[victim]
	p.conns = append(p.conns[:victim], p.conns[victim+1:]...)
	c.Conn.Close()
	p.log.Debug("evicted a Raft connection that had not finished its handshake", "from", c.RemoteAddr(), "had_sent", c.spoke.Load())
}

// remove forgets pc once its admission is over.
func (p *pendingSet) remove(pc *pendingConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, c := range p.conns {
		if c == pc {
			p.conns = append(p.conns[:i], p.conns[i+1:]...)
			return
		}
	}
}

// admit completes the handshake and reads the preamble of raw; it returns
// the connection to hand to raft, or nil when it was refused or answered.
func (s *peerStream) admit(pc *pendingConn) net.Conn {
	var raw net.Conn = pc
	ctx, cancel := context.WithTimeout(context.Background(), preambleTimeout)
	defer cancel()
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	conn := raw
	var peer *x509.Certificate
	if s.tls != nil {
		tc := tls.Server(raw, s.tls.PeerServer())
		if err := tc.HandshakeContext(ctx); err != nil {
			if pc.spoke.Load() {
				s.log.Warn("refused a Raft connection", "from", raw.RemoteAddr(), "error", err)
			}
			raw.Close()
			return nil
		}
		conn = tc
		peer = tc.ConnectionState().PeerCertificates[0]
	}
	deadline, _ := ctx.Deadline()
	_ = conn.SetReadDeadline(deadline)
	var first [1]byte
	if _, err := io.ReadFull(conn, first[:]); err != nil {
		conn.Close()
		return nil
	}
	switch b := first[0]; {
	case b == preambleTarget:
		target, err := readTarget(conn)
		if err != nil {
			s.log.Warn("refused a Raft connection: bad preamble", "from", raw.RemoteAddr(), "error", err)
			conn.Close()
			return nil
		}
		if err := s.admitPeer(peer); err != nil {
			s.log.Warn("refused a Raft connection", "from", raw.RemoteAddr(), "error", err)
			conn.Close()
			return nil
		}
		if self := s.gate.serverID(); target != self {
			s.log.Warn("refused a Raft connection addressed to another server: a previous incarnation of this node, "+
				"or a peer with a stale configuration", "from", raw.RemoteAddr(), "addressed_to", target, "this_server", self)
			conn.Close()
			return nil
		}
		_ = conn.SetReadDeadline(time.Time{})
		return conn
	case b == preambleProbe:
		_ = conn.SetWriteDeadline(deadline)
		_ = json.NewEncoder(conn).Encode(s.gate.hello())
		conn.Close()
		return nil
	case b <= maxRaftRPCType:
		if s.gate.requireTarget() {
			s.log.Warn("refused a Raft connection that names no server: every server of the cluster sends one",
				"from", raw.RemoteAddr())
			conn.Close()
			return nil
		}
		if err := s.admitPeer(peer); err != nil {
			s.log.Warn("refused a Raft connection", "from", raw.RemoteAddr(), "error", err)
			conn.Close()
			return nil
		}
		_ = conn.SetReadDeadline(time.Time{})
		return &prefixConn{Conn: conn, prefix: first[:]}
	default:
		s.log.Warn("refused a Raft connection: not a Raft peer", "from", raw.RemoteAddr(), "first_byte", fmt.Sprintf("%#x", b))
		conn.Close()
		return nil
	}
}

// admitPeer admits a Raft peer by its certificate, nil when TLS is off.
func (s *peerStream) admitPeer(peer *x509.Certificate) error {
	if peer == nil {
		return nil
	}
	return s.gate.admits(peer)
}

// readTarget reads the server id of a preambleTarget.
func readTarget(r io.Reader) (string, error) {
	n, err := binary.ReadUvarint(byteReader{r})
	if err != nil {
		return "", err
	}
	if n == 0 || n > maxTargetLen {
		return "", fmt.Errorf("server id of %d bytes", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	return string(b), nil
}

// byteReader reads one byte at a time, so that nothing past the preamble
// is consumed.
type byteReader struct{ r io.Reader }

func (b byteReader) ReadByte() (byte, error) {
	var p [1]byte
	_, err := io.ReadFull(b.r, p[:])
	return p[0], err
}

// prefixConn gives back the bytes read ahead of the connection.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// Accept returns the next connection admitted.
func (s *peerStream) Accept() (net.Conn, error) {
	select {
	case c := <-s.accepted:
		return c, nil
	case <-s.done:
		return nil, net.ErrClosed
	}
}

// Close stops listening; it is idempotent.
func (s *peerStream) Close() error {
	var err error
	s.once.Do(func() {
		close(s.done)
		err = s.ln.Close()
	})
	return err
}

// Addr is the advertised address.
func (s *peerStream) Addr() net.Addr { return s.advertise }

// Dial connects to a peer within timeout. An address that names a server
// (host:port#id, as the node's ServerAddressProvider gives them) sends
// the preamble that names it.
func (s *peerStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	addr, target, _ := strings.Cut(string(address), targetSep)
	node := ""
	if target != "" {
		node = NameOf(target)
	}
	conn, err := dialPeer(addr, node, s.tls, timeout)
	if err != nil || target == "" {
		return conn, err
	}
	pre := append([]byte{preambleTarget}, binary.AppendUvarint(nil, uint64(len(target)))...)
	_ = conn.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := conn.Write(append(pre, target...)); err != nil {
		conn.Close()
		return nil, err
	}
	_ = conn.SetWriteDeadline(time.Time{})
	return conn, nil
}

// dialPeer connects to addr, over mutual TLS when conf is set, verifying
// the peer's certificate against node, the name of the node meant ("" when
// unknown), or the host of addr.
func dialPeer(addr, node string, conf PeerTLS, timeout time.Duration) (net.Conn, error) {
	if conf == nil {
		return net.DialTimeout("tcp", addr, timeout)
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: conf.PeerClient(host, node)}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return d.DialContext(ctx, "tcp", addr)
}

// ProbeRaft asks the node at Raft address addr for its Hello, over mutual
// TLS when conf is set; the node's certificate must be valid for the host
// of addr.
func ProbeRaft(ctx context.Context, addr string, conf PeerTLS) (Hello, error) {
	return ProbeNode(ctx, addr, "", conf)
}

// ProbeNode is ProbeRaft of the node named node: a certificate that names
// a node (a cluster key's, tls gen --node-ids) must name that one.
func ProbeNode(ctx context.Context, addr, node string, conf PeerTLS) (Hello, error) {
	timeout := preambleTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	conn, err := dialPeer(addr, node, conf, timeout)
	if err != nil {
		return Hello{}, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write([]byte{preambleProbe}); err != nil {
		return Hello{}, err
	}
	var h Hello
	if err := json.NewDecoder(io.LimitReader(conn, 64<<10)).Decode(&h); err != nil {
		if errors.Is(err, io.EOF) {
			return Hello{}, fmt.Errorf("%s closed the probe: a raftmaster of an earlier release, or not a raftmaster Raft port", addr)
		}
		return Hello{}, fmt.Errorf("probe of %s: %w", addr, err)
	}
	return h, nil
}
