package raftnode

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
)

// tcpStream is raft's StreamLayer over TCP, advertising the configured
// address as written. raft's own TCP transport resolves the advertised
// name once, at start-up, and fails when it does not resolve: a pod whose
// DNS record is not published yet would crash-loop, and the name would be
// frozen to the address it had then. Here a name is only looked up when a
// peer dials it, and Raft retries a dial that fails.
type tcpStream struct {
	ln        *net.TCPListener
	advertise net.Addr
}

// advertisedAddr is an address kept as host:port text, name or IP.
type advertisedAddr string

func (a advertisedAddr) Network() string { return "tcp" }
func (a advertisedAddr) String() string  { return string(a) }

func (s *tcpStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(address), timeout)
}

func (s *tcpStream) Accept() (net.Conn, error) { return s.ln.Accept() }
func (s *tcpStream) Close() error              { return s.ln.Close() }
func (s *tcpStream) Addr() net.Addr            { return s.advertise }

// CheckAdvertise refuses an address other nodes could not dial: not
// host:port, no host, a port out of range, or an unspecified IP such as
// 0.0.0.0. Port 0 is allowed: the bound port is advertised then.
func CheckAdvertise(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("raftnode: raft advertise address %q: want host:port", addr)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("raftnode: raft advertise address %q: bad port", addr)
	}
	if host == "" {
		return fmt.Errorf("raftnode: raft advertise address %q: no host; other nodes could not dial it", addr)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("raftnode: raft advertise address %q is unspecified; other nodes could not dial it (set the advertised address)", addr)
	}
	return nil
}

// openTCPTransport listens for Raft on RaftAddr, over mutual TLS when
// PeerTLS is set, and advertises RaftAdvertise, or the bound address when
// its port is 0.
func (n *Node) openTCPTransport() error {
	l, err := net.Listen("tcp", n.cfg.RaftAddr)
	if err != nil {
		return fmt.Errorf("raftnode: raft transport on %s: %w", n.cfg.RaftAddr, err)
	}
	var advertise net.Addr = advertisedAddr(n.cfg.RaftAdvertise)
	if _, port, _ := net.SplitHostPort(n.cfg.RaftAdvertise); port == "0" {
		// The listener picked a port: advertise what it bound. Otherwise
		// keep the configured form, which may be a stable host name.
		advertise = l.Addr()
		n.cfg.RaftAdvertise = l.Addr().String()
		if err := CheckAdvertise(n.cfg.RaftAdvertise); err != nil {
			l.Close()
			return err
		}
	}
	var stream raft.StreamLayer = &tcpStream{ln: l.(*net.TCPListener), advertise: advertise}
	if n.cfg.PeerTLS != nil {
		stream = newTLSStreamLayer(l, advertise, n.cfg.PeerTLS, n.log.Named("transport"))
	}
	tc := &raft.NetworkTransportConfig{Stream: stream, MaxPool: 4, Timeout: 10 * time.Second, Logger: n.log.Named("transport")}
	if len(n.cfg.DialOverride) > 0 {
		tc.ServerAddressProvider = dialOverride(n.cfg.DialOverride)
	}
	n.trans = raft.NewNetworkTransportWithConfig(tc)
	return nil
}
