package raftnode

import (
	"context"
	"crypto/tls"
	"net"
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

// handshakeTimeout bounds a TLS handshake on Raft's port, so that a peer
// that connects and says nothing holds no goroutine for long.
const handshakeTimeout = 10 * time.Second

// tlsStreamLayer is a raft.StreamLayer over TCP and mutual TLS. Accepted
// connections finish their handshake before raft sees them: a peer whose
// certificate the CA did not sign never reaches a Raft handler, and the
// refusal is logged.
type tlsStreamLayer struct {
	ln        net.Listener
	advertise net.Addr
	conf      PeerTLS
	log       hclog.Logger

	accepted chan net.Conn
	done     chan struct{}
	once     sync.Once
	wg       sync.WaitGroup
}

var _ raft.StreamLayer = (*tlsStreamLayer)(nil)

// newTLSStreamLayer serves Raft over mutual TLS on ln; advertise is the
// address other nodes dial.
func newTLSStreamLayer(ln net.Listener, advertise net.Addr, conf PeerTLS, log hclog.Logger) *tlsStreamLayer {
	s := &tlsStreamLayer{
		ln: ln, advertise: advertise, conf: conf, log: log,
		accepted: make(chan net.Conn), done: make(chan struct{}),
	}
	s.wg.Add(1)
	go s.acceptLoop()
	return s
}

// maxHandshakes bounds the handshakes in progress: connections beyond it
// wait in the kernel's backlog, so that a flood of connections that never
// finish their handshake cannot exhaust the process's files.
const maxHandshakes = 64

// acceptLoop accepts connections until Close, backing off on errors (too
// many open files, for one) rather than giving up: a listener that stopped
// would cut the node off from Raft for good.
func (s *tlsStreamLayer) acceptLoop() {
	defer s.wg.Done()
	slots := make(chan struct{}, maxHandshakes)
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
			s.handshake(conn)
		}()
	}
}

// handshake completes the server side of the handshake and hands the
// connection to Accept.
func (s *tlsStreamLayer) handshake(raw net.Conn) {
	defer s.wg.Done()
	conn := tls.Server(raw, s.conf.PeerServer())
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	defer cancel()
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := conn.HandshakeContext(ctx); err != nil {
		s.log.Warn("refused a Raft connection", "from", raw.RemoteAddr(), "error", err)
		raw.Close()
		return
	}
	select {
	case s.accepted <- conn:
	case <-s.done:
		conn.Close()
	}
}

// Accept returns the next connection whose handshake succeeded.
func (s *tlsStreamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-s.accepted:
		return c, nil
	case <-s.done:
		return nil, net.ErrClosed
	}
}

// Close stops listening; it is idempotent.
func (s *tlsStreamLayer) Close() error {
	var err error
	s.once.Do(func() {
		close(s.done)
		err = s.ln.Close()
	})
	return err
}

// Addr is the advertised address.
func (s *tlsStreamLayer) Addr() net.Addr { return s.advertise }

// Dial connects to a peer and completes the handshake within timeout.
func (s *tlsStreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	host, _, err := net.SplitHostPort(string(address))
	if err != nil {
		return nil, err
	}
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: s.conf.PeerClient(host)}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return d.DialContext(ctx, "tcp", string(address))
}
