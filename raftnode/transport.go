package raftnode

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
	"github.com/raftmaster/raftmaster/fsm"
)

// advertisedAddr is an address kept as host:port text, name or IP.
type advertisedAddr string

func (a advertisedAddr) Network() string { return "tcp" }
func (a advertisedAddr) String() string  { return string(a) }

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
	stream := newPeerStream(l, advertise, n.cfg.PeerTLS, n, n.log.Named("transport"))
	tc := &raft.NetworkTransportConfig{
		Stream: stream, MaxPool: 4, Timeout: 10 * time.Second, Logger: n.log.Named("transport"),
		ServerAddressProvider: dialTargets{n},
	}
	n.trans = raft.NewNetworkTransportWithConfig(tc)
	return nil
}

// dialTargets is the transport's raft.ServerAddressProvider: it names the
// server each dial means to reach, as host:port#id, so that the stream
// layer sends the preamble that the peer checks against its own server id.
// The address is the server's in the latest configuration, or the
// DialOverride of its node name. For this node's own id, which raft only
// encodes into its RPC headers, it is the plain advertised address. Below
// protocol level 2 a server may run an earlier release, whose transport
// would take the preamble for an unknown RPC: the address is then plain.
type dialTargets struct{ n *Node }

func (d dialTargets) ServerAddr(id raft.ServerID) (raft.ServerAddress, error) {
	if string(id) == d.n.id {
		return raft.ServerAddress(d.n.cfg.RaftAdvertise), nil
	}
	addr, ok := d.n.cfg.DialOverride[NameOf(string(id))]
	if !ok {
		r := d.n.rp.Load()
		if r == nil {
			return "", fmt.Errorf("raft is not running")
		}
		for _, s := range r.GetConfiguration().Configuration().Servers {
			if s.ID == id {
				addr, ok = string(s.Address), true
				break
			}
		}
	}
	if !ok {
		return "", fmt.Errorf("server %s is not in the configuration", id)
	}
	if d.n.transportLevel() < fsm.Protocol2 {
		return raft.ServerAddress(addr), nil
	}
	return raft.ServerAddress(addr + targetSep + string(id)), nil
}
