package raftnode

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
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
	// PeerClient configures a connection to serverName, the host of the
	// peer's Raft address.
	PeerClient(serverName string) *tls.Config
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
// so that a peer that connects and says nothing holds no goroutine for
// long.
const preambleTimeout = 10 * time.Second

// maxAdmissions bounds the connections being admitted (handshake and
// preamble) at once: connections beyond it wait in the kernel's backlog, so
// that a flood of connections that never finish cannot exhaust the
// process's files.
const maxAdmissions = 64

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
	s.wg.Add(1)
	go s.acceptLoop()
	return s
}

// acceptLoop accepts connections until Close, backing off on errors (too
// many open files, for one) rather than giving up: a listener that stopped
// would cut the node off from Raft for good.
func (s *peerStream) acceptLoop() {
	defer s.wg.Done()
	slots := make(chan struct{}, maxAdmissions)
	backoff := 5 * time.Millisecond
	for {
		select {
		case slots <- struct{}{}:
		case <-s.done:
			return
		}
		conn, err := s.ln.Accept()
		if err != nil {
			<-slots
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
		s.wg.Add(1)
		go func() {
			defer func() { <-slots }()
			defer s.wg.Done()
			if c := s.admit(conn); c != nil {
				select {
				case s.accepted <- c:
				case <-s.done:
					c.Close()
				}
			}
		}()
	}
}

// admit completes the handshake and reads the preamble of raw; it returns
// the connection to hand to raft, or nil when it was refused or answered.
func (s *peerStream) admit(raw net.Conn) net.Conn {
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
	if s.tls != nil {
		tc := tls.Server(raw, s.tls.PeerServer())
		if err := tc.HandshakeContext(ctx); err != nil {
			s.log.Warn("refused a Raft connection", "from", raw.RemoteAddr(), "error", err)
			raw.Close()
			return nil
		}
		conn = tc
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
		_ = conn.SetReadDeadline(time.Time{})
		return &prefixConn{Conn: conn, prefix: first[:]}
	default:
		s.log.Warn("refused a Raft connection: not a Raft peer", "from", raw.RemoteAddr(), "first_byte", fmt.Sprintf("%#x", b))
		conn.Close()
		return nil
	}
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
	conn, err := dialPeer(addr, s.tls, timeout)
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
// the peer's certificate against the host of addr.
func dialPeer(addr string, conf PeerTLS, timeout time.Duration) (net.Conn, error) {
	if conf == nil {
		return net.DialTimeout("tcp", addr, timeout)
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: conf.PeerClient(host)}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return d.DialContext(ctx, "tcp", addr)
}

// ProbeRaft asks the node at Raft address addr for its Hello, over mutual
// TLS when conf is set.
func ProbeRaft(ctx context.Context, addr string, conf PeerTLS) (Hello, error) {
	timeout := preambleTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	conn, err := dialPeer(addr, conf, timeout)
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
