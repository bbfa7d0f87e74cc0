// Package netfault injects network faults into the Raft links of a cluster
// of real processes on 127.0.0.1.
//
// Every directed link (from, to) gets its own TCP Proxy: node "from" dials
// the proxy instead of node "to"'s Raft address (see Net.DialMap), and the
// proxy forwards each accepted connection to the real address. A Raft RPC
// is a request and its response on one connection opened by the dialer, so
// a proxy always cuts both directions of its connections together; cutting
// link (A, B) but not (B, A) is the one-way fault at cluster level: A's
// RPCs to B are lost while B's RPCs to A still arrive.
//
// A proxy is in one of three modes:
//
//   - Pass forwards bytes in both directions.
//   - Drop is a silent partition: new connections are accepted but nothing
//     is forwarded and nothing is closed (the target is not even dialled),
//     and connections that were open stop forwarding too. Bytes that arrive
//     are discarded; a side that closes its end is let go, the other side is
//     not told.
//   - Reset closes every open connection and each new one at once.
//
// Leaving Drop closes the connections it held, so that both ends notice and
// Raft opens fresh connections through the healed link; a byte stream is
// never resumed after bytes were discarded.
//
// Nothing is logged unless a logger is given with WithLogf.
package netfault

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Mode is the fault a Proxy applies.
type Mode int32

// Proxy modes.
const (
	// Pass forwards traffic.
	Pass Mode = iota
	// Drop blackholes traffic: connections are accepted and kept open but
	// forward nothing in either direction.
	Drop
	// Reset closes existing and new connections immediately.
	Reset
)

// String returns "pass", "drop" or "reset".
func (m Mode) String() string {
	switch m {
	case Pass:
		return "pass"
	case Drop:
		return "drop"
	case Reset:
		return "reset"
	}
	return fmt.Sprintf("mode(%d)", int32(m))
}

// DialTimeout bounds how long a proxy waits to connect to its target.
const DialTimeout = 5 * time.Second

// Option configures a Proxy or a Net.
type Option func(*options)

type options struct {
	logf func(format string, args ...any)
}

// WithLogf sets a logger for connection and mode events.
func WithLogf(logf func(format string, args ...any)) Option {
	return func(o *options) { o.logf = logf }
}

func buildOptions(opts []Option) options {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.logf == nil {
		o.logf = func(string, ...any) {}
	}
	return o
}

// Proxy is a fault-injecting TCP proxy that listens on 127.0.0.1 and
// forwards every accepted connection to one target address. It is safe for
// concurrent use.
type Proxy struct {
	ln     net.Listener
	target string
	name   string
	logf   func(format string, args ...any)
	ctx    context.Context // cancelled by Close, aborts dials
	cancel context.CancelFunc
	wg     sync.WaitGroup // accept loop and every connection's goroutines

	mu     sync.Mutex
	mode   Mode
	closed bool
	conns  map[*conn]struct{}
}

// NewProxy starts a proxy on 127.0.0.1 with a kernel-chosen port that
// forwards to target. It starts in Pass mode.
func NewProxy(target string, opts ...Option) (*Proxy, error) {
	return newProxy(target, "", opts...)
}

func newProxy(target, name string, opts ...Option) (*Proxy, error) {
	o := buildOptions(opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	if name == "" {
		name = ln.Addr().String() + "->" + target
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		ln: ln, target: target, name: name, logf: o.logf,
		ctx: ctx, cancel: cancel,
		conns: map[*conn]struct{}{},
	}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr returns the address the proxy listens on.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target returns the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Mode returns the current mode.
func (p *Proxy) Mode() Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// SetMode switches the fault. Switching to Drop blackholes the open
// connections too; switching to Reset closes them; switching from Drop to
// Pass closes the connections held while dropping, so that new connections
// carry the traffic. When SetMode returns, no byte that is read afterwards
// from a blackholed connection is forwarded.
func (p *Proxy) SetMode(m Mode) {
	if m != Pass && m != Drop && m != Reset {
		panic(fmt.Sprintf("netfault: invalid mode %d", int32(m)))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.mode == m {
		p.mode = m
		return
	}
	p.logf("netfault: %s: %s -> %s (%d open connections)", p.name, p.mode, m, len(p.conns))
	p.mode = m
	for c := range p.conns {
		switch {
		case m == Drop:
			c.blackholed.Store(true)
		case m == Reset || c.blackholed.Load():
			c.closeLocked()
			delete(p.conns, c)
		}
	}
}

// Close stops the proxy: it closes the listener and every connection and
// waits for all of the proxy's goroutines to end. It is safe to call more
// than once.
func (p *Proxy) Close() error {
	p.mu.Lock()
	already := p.closed
	p.closed = true
	for c := range p.conns {
		c.closeLocked()
		delete(p.conns, c)
	}
	p.mu.Unlock()
	p.cancel()
	var err error
	if !already {
		err = p.ln.Close()
	}
	p.wg.Wait()
	return err
}

// conn is one proxied connection: the accepted client side and, once
// dialled, the server side.
type conn struct {
	client     net.Conn
	server     net.Conn // nil until dialled, and forever while dropping
	blackholed atomic.Bool
	// Guarded by Proxy.mu: closed is set once both sides are closed;
	// clientGone and serverGone when one side was let go while dropping.
	closed, clientGone, serverGone bool
}

// closeLocked closes both sides; the caller holds Proxy.mu.
func (c *conn) closeLocked() {
	if c.closed {
		return
	}
	c.closed = true
	c.client.Close()
	if c.server != nil {
		c.server.Close()
	}
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		nc, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors or the like: back off and retry.
			p.logf("netfault: %s: accept: %v", p.name, err)
			t := time.NewTimer(10 * time.Millisecond)
			select {
			case <-p.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		p.handle(nc)
	}
}

// handle registers an accepted connection according to the current mode.
func (p *Proxy) handle(nc net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		nc.Close()
		return
	}
	switch p.mode {
	case Reset:
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // send RST rather than FIN
		}
		nc.Close()
		p.logf("netfault: %s: reset new connection from %s", p.name, nc.RemoteAddr())
		return
	case Drop:
		c := &conn{client: nc}
		c.blackholed.Store(true)
		p.conns[c] = struct{}{}
		p.wg.Add(1)
		go p.pipe(c, nc, nil)
		p.logf("netfault: %s: holding new connection from %s", p.name, nc.RemoteAddr())
		return
	}
	c := &conn{client: nc}
	p.conns[c] = struct{}{}
	p.wg.Add(1)
	go p.dial(c)
}

// dial connects c to the target and starts forwarding.
func (p *Proxy) dial(c *conn) {
	defer p.wg.Done()
	d := net.Dialer{Timeout: DialTimeout}
	sc, err := d.DialContext(p.ctx, "tcp", p.target)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.logf("netfault: %s: dial: %v", p.name, err)
		c.closeLocked()
		delete(p.conns, c)
		return
	}
	if c.closed {
		sc.Close()
		return
	}
	c.server = sc
	p.wg.Add(2)
	go p.pipe(c, c.client, sc)
	go p.pipe(c, sc, c.client)
}

// pipe copies src to dst until src fails. While c is blackholed it reads
// and discards, so that a side that goes away is noticed; dst is nil for a
// connection accepted while dropping.
func (p *Proxy) pipe(c *conn, src, dst net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, rerr := src.Read(buf)
		if n > 0 && dst != nil && !c.blackholed.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				p.finish(c, nil)
				return
			}
		}
		if rerr != nil {
			if c.blackholed.Load() {
				// A partition does not carry the close to the other side.
				p.finish(c, src)
			} else {
				p.finish(c, nil)
			}
			return
		}
	}
}

// finish closes side (only that side) or, when side is nil, the whole
// connection, and forgets the connection once both sides are gone.
func (p *Proxy) finish(c *conn, side net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if side != nil && !c.closed {
		side.Close()
		if side == c.client {
			c.clientGone = true
		} else {
			c.serverGone = true
		}
		if !c.clientGone || (c.server != nil && !c.serverGone) {
			return
		}
	}
	c.closeLocked()
	delete(p.conns, c)
}
