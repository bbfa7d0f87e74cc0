package netfault

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// blackholeWait is how long a read must stay unanswered for a link to count
// as blackholed. It is a timeout on the probe, not a synchronisation.
const blackholeWait = 150 * time.Millisecond

// answerWait bounds a read that must be answered.
const answerWait = 5 * time.Second

// server is a TCP server that answers every line with "name:line".
type server struct {
	name     string
	ln       net.Listener
	accepted atomic.Int64
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
}

func newServer(t *testing.T, name string) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{name: name, ln: ln, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			s.mu.Lock()
			s.conns[c] = struct{}{}
			s.mu.Unlock()
			s.wg.Add(1)
			go s.serve(c)
		}
	}()
	t.Cleanup(s.close)
	return s
}

func (s *server) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		if _, err := io.WriteString(c, s.name+":"+line); err != nil {
			return
		}
	}
}

func (s *server) addr() string { return s.ln.Addr().String() }

func (s *server) close() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, answerWait)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// exchange sends one line and reads the answer within wait.
func exchange(c net.Conn, line string, wait time.Duration) (string, error) {
	if err := c.SetDeadline(time.Now().Add(wait)); err != nil {
		return "", err
	}
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return "", err
	}
	var got []byte
	buf := make([]byte, 1)
	for {
		if _, err := c.Read(buf); err != nil {
			return string(got), err
		}
		if buf[0] == '\n' {
			return string(got), nil
		}
		got = append(got, buf[0])
	}
}

func mustAnswer(t *testing.T, c net.Conn, want string) {
	t.Helper()
	got, err := exchange(c, "ping", answerWait)
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	if got != want+":ping" {
		t.Fatalf("answer %q, want %q", got, want+":ping")
	}
}

func mustBlackhole(t *testing.T, c net.Conn) {
	t.Helper()
	got, err := exchange(c, "ping", blackholeWait)
	if !isTimeout(err) {
		t.Fatalf("exchange through a blackhole: got %q, %v; want a timeout", got, err)
	}
}

// mustClose checks that the connection was closed by the proxy: a read
// fails with something other than a timeout.
func mustClose(t *testing.T, c net.Conn) {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(answerWait)); err != nil {
		t.Fatal(err)
	}
	_, err := c.Read(make([]byte, 1))
	if err == nil || isTimeout(err) {
		t.Fatalf("read from a closed connection: %v; want EOF or reset", err)
	}
}

// mustBeReset dials addr and requires that the connection is torn down
// straight away: either the dial itself fails with a reset or the first
// read does.
func mustBeReset(t *testing.T, addr string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, answerWait)
	if err != nil {
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("dial %s: %v; want success or a reset", addr, err)
		}
		return
	}
	t.Cleanup(func() { c.Close() })
	mustClose(t, c)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded)
}

func newTestProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := NewProxy(target, WithLogf(t.Logf))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestPassThrough(t *testing.T) {
	s := newServer(t, "s")
	p := newTestProxy(t, s.addr())
	if p.Mode() != Pass {
		t.Fatalf("initial mode %v", p.Mode())
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", p.Addr(), answerWait)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			for j := range 20 {
				line := fmt.Sprintf("c%d-%d", i, j)
				got, err := exchange(c, line, answerWait)
				if err != nil || got != "s:"+line {
					errs <- fmt.Errorf("got %q, %v", got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestPassThroughLargePayload(t *testing.T) {
	// A raw echo server, to check that a large stream arrives intact.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c)
	}()
	p := newTestProxy(t, ln.Addr().String())
	c := dial(t, p.Addr())
	defer func() { c.Close(); ln.Close(); <-done }()
	payload := make([]byte, 4<<20)
	rand.Read(payload)
	go func() { c.Write(payload) }()
	got := make([]byte, len(payload))
	c.SetReadDeadline(time.Now().Add(answerWait))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, payload) {
		t.Fatal("payload corrupted")
	}
}

func TestDropBlackholesExistingConnections(t *testing.T) {
	s := newServer(t, "s")
	p := newTestProxy(t, s.addr())
	c := dial(t, p.Addr())
	mustAnswer(t, c, "s")
	p.SetMode(Drop)
	mustBlackhole(t, c)
	// Nothing was closed: the client can still write.
	c.SetWriteDeadline(time.Now().Add(answerWait))
	if _, err := io.WriteString(c, "more\n"); err != nil {
		t.Fatalf("write to a blackholed connection: %v", err)
	}
	mustBlackhole(t, c)
}

func TestDropBlackholesNewConnections(t *testing.T) {
	s := newServer(t, "s")
	p := newTestProxy(t, s.addr())
	p.SetMode(Drop)
	c := dial(t, p.Addr()) // accepted, like a SYN answered by nobody's kernel
	mustBlackhole(t, c)
	if n := s.accepted.Load(); n != 0 {
		t.Fatalf("target accepted %d connections while the link dropped", n)
	}
}

func TestHealAfterDrop(t *testing.T) {
	s := newServer(t, "s")
	p := newTestProxy(t, s.addr())
	old := dial(t, p.Addr())
	mustAnswer(t, old, "s")
	p.SetMode(Drop)
	held := dial(t, p.Addr())
	mustBlackhole(t, held)
	p.SetMode(Pass)
	// The connections that lived through the blackhole are closed, so
	// that their owners reconnect, and new connections work.
	mustClose(t, old)
	mustClose(t, held)
	mustAnswer(t, dial(t, p.Addr()), "s")
}

func TestReset(t *testing.T) {
	s := newServer(t, "s")
	p := newTestProxy(t, s.addr())
	c := dial(t, p.Addr())
	mustAnswer(t, c, "s")
	p.SetMode(Reset)
	mustClose(t, c)
	// A new connection is accepted by the kernel and closed at once. The
	// reset can reach the client before its connect call returns, so a
	// refused dial is as good as a connection that reads a reset.
	mustBeReset(t, p.Addr())
	p.SetMode(Pass)
	mustAnswer(t, dial(t, p.Addr()), "s")
}

func TestDropThenReset(t *testing.T) {
	s := newServer(t, "s")
	p := newTestProxy(t, s.addr())
	c := dial(t, p.Addr())
	mustAnswer(t, c, "s")
	p.SetMode(Drop)
	mustBlackhole(t, c)
	p.SetMode(Reset)
	mustClose(t, c)
}

func TestDialFailureClosesClient(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	p := newTestProxy(t, dead)
	mustClose(t, dial(t, p.Addr()))
}

func TestTargetCloseIsPropagated(t *testing.T) {
	s := newServer(t, "s")
	p := newTestProxy(t, s.addr())
	c := dial(t, p.Addr())
	mustAnswer(t, c, "s")
	s.close()
	mustClose(t, c)
}

func TestCloseWithOpenConnections(t *testing.T) {
	s := newServer(t, "s")
	p, err := NewProxy(s.addr())
	if err != nil {
		t.Fatal(err)
	}
	live := dial(t, p.Addr())
	mustAnswer(t, live, "s")
	p.SetMode(Drop)
	held := dial(t, p.Addr())
	mustBlackhole(t, held)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	mustClose(t, live)
	mustClose(t, held)
	if _, err := net.DialTimeout("tcp", p.Addr(), answerWait); err == nil {
		t.Fatal("dial after Close succeeded")
	}
}

func TestModeString(t *testing.T) {
	for m, want := range map[Mode]string{Pass: "pass", Drop: "drop", Reset: "reset", Mode(9): "mode(9)"} {
		if got := m.String(); got != want {
			t.Errorf("%d: %q, want %q", int32(m), got, want)
		}
	}
}

// cluster is a Net in front of one server per node id.
func newCluster(t *testing.T, ids ...string) *Net {
	t.Helper()
	targets := map[string]string{}
	for _, id := range ids {
		targets[id] = newServer(t, id).addr()
	}
	n, err := NewNet(targets, WithLogf(t.Logf))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// reach reports whether from reaches to through a new connection.
func reach(t *testing.T, n *Net, from, to string) bool {
	t.Helper()
	c := dial(t, n.DialMap(from)[to])
	defer c.Close()
	got, err := exchange(c, "ping", blackholeWait)
	switch {
	case err == nil && got == to+":ping":
		return true
	case isTimeout(err):
		return false
	}
	t.Fatalf("%s->%s: got %q, %v", from, to, got, err)
	return false
}

// checkReach probes every link and compares with the expected cut links.
func checkReach(t *testing.T, n *Net, cut map[[2]string]bool) {
	t.Helper()
	ids := n.IDs()
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := map[[2]string]bool{}
	for _, from := range ids {
		for _, to := range ids {
			if from == to {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := net.DialTimeout("tcp", n.DialMap(from)[to], answerWait)
				if err != nil {
					t.Errorf("dial %s->%s: %v", from, to, err)
					return
				}
				defer c.Close()
				// A link that should pass gets the long wait, so that a
				// slow answer on a loaded machine is not taken for a cut.
				wait := answerWait
				if cut[[2]string{from, to}] {
					wait = blackholeWait
				}
				ans, err := exchange(c, "ping", wait)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil && ans == to+":ping":
				case isTimeout(err):
					got[[2]string{from, to}] = true
				default:
					t.Errorf("%s->%s: got %q, %v", from, to, ans, err)
				}
			}()
		}
	}
	wg.Wait()
	for _, from := range ids {
		for _, to := range ids {
			l := [2]string{from, to}
			if from != to && got[l] != cut[l] {
				t.Errorf("link %s->%s cut=%v, want %v", from, to, got[l], cut[l])
			}
			if from != to && (n.Mode(from, to) == Drop) != cut[l] {
				t.Errorf("link %s->%s mode %v, want cut=%v", from, to, n.Mode(from, to), cut[l])
			}
		}
	}
}

func TestNetDialMap(t *testing.T) {
	n := newCluster(t, "a", "b", "c")
	m := n.DialMap("a")
	if len(m) != 2 || m["b"] == "" || m["c"] == "" || m["b"] == m["c"] {
		t.Fatalf("DialMap(a) = %v", m)
	}
	if m["b"] == n.DialMap("c")["b"] {
		t.Fatal("a->b and c->b share a proxy")
	}
	if !reach(t, n, "a", "b") || !reach(t, n, "c", "a") {
		t.Fatal("links do not pass initially")
	}
}

func TestNetCutOneDirection(t *testing.T) {
	n := newCluster(t, "a", "b", "c")
	n.Cut("a", "b")
	checkReach(t, n, map[[2]string]bool{{"a", "b"}: true})
	n.CutBoth("b", "c")
	checkReach(t, n, map[[2]string]bool{{"a", "b"}: true, {"b", "c"}: true, {"c", "b"}: true})
	n.Heal()
	checkReach(t, n, nil)
}

func TestNetPartition(t *testing.T) {
	n := newCluster(t, "a", "b", "c", "d", "e")
	n.Cut("b", "c") // replaced by the partition below
	n.Partition([]string{"a", "b"}, []string{"c", "d"})
	// e is in no group: isolated.
	cut := map[[2]string]bool{}
	group := map[string]string{"a": "1", "b": "1", "c": "2", "d": "2", "e": "e"}
	for _, x := range n.IDs() {
		for _, y := range n.IDs() {
			if x != y && group[x] != group[y] {
				cut[[2]string{x, y}] = true
			}
		}
	}
	checkReach(t, n, cut)
	n.Heal()
	checkReach(t, n, nil)
}

func TestNetPartitionClosesHeldConnectionsOnHeal(t *testing.T) {
	n := newCluster(t, "a", "b")
	c := dial(t, n.DialMap("a")["b"])
	mustAnswer(t, c, "b")
	n.Partition([]string{"a"}, []string{"b"})
	mustBlackhole(t, c)
	n.Heal()
	mustClose(t, c)
	if !reach(t, n, "a", "b") {
		t.Fatal("a cannot reach b after Heal")
	}
}

func TestNetUnknownIDPanics(t *testing.T) {
	n := newCluster(t, "a", "b")
	for name, f := range map[string]func(){
		"Cut":       func() { n.Cut("a", "x") },
		"CutBoth":   func() { n.CutBoth("x", "a") },
		"DialMap":   func() { n.DialMap("x") },
		"Partition": func() { n.Partition([]string{"a", "x"}) },
		"TwoGroups": func() { n.Partition([]string{"a"}, []string{"a", "b"}) },
		"Self":      func() { n.Cut("a", "a") },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", name)
				}
			}()
			f()
		}()
	}
}

func TestNewNetRejectsEmptyID(t *testing.T) {
	if _, err := NewNet(map[string]string{"": "127.0.0.1:1"}); err == nil {
		t.Fatal("NewNet accepted an empty id")
	}
}

// TestNetConcurrent flips faults while clients talk through every link; it
// is meant for the race detector and the leak check, and ends by checking
// that a healed network works.
func TestNetConcurrent(t *testing.T) {
	n := newCluster(t, "a", "b", "c")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var exchanges atomic.Int64
	progress := make(chan struct{}, 64) // one token per attempted exchange
	for _, from := range n.IDs() {
		for _, to := range n.IDs() {
			if from == to {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					c, err := net.DialTimeout("tcp", n.DialMap(from)[to], answerWait)
					if err != nil {
						continue
					}
					for range 5 {
						_, err := exchange(c, "x", 20*time.Millisecond)
						select {
						case progress <- struct{}{}:
						default:
						}
						if err != nil {
							break
						}
						exchanges.Add(1)
					}
					c.Close()
				}
			}()
		}
	}
	modes := []Mode{Pass, Drop, Reset}
	for i := range 300 {
		// Let a few exchanges run under each configuration.
		for range 3 {
			<-progress
		}
		switch i % 5 {
		case 0:
			n.Partition([]string{"a"}, []string{"b", "c"})
		case 1:
			n.Heal()
		default:
			ids := n.IDs()
			n.SetMode(ids[i%3], ids[(i+1)%3], modes[i%3])
		}
	}
	n.Heal()
	close(stop)
	wg.Wait()
	t.Logf("%d exchanges", exchanges.Load())
	checkReach(t, n, nil)
}

func TestLogf(t *testing.T) {
	s := newServer(t, "s")
	var mu sync.Mutex
	var lines []string
	p, err := NewProxy(s.addr(), WithLogf(func(f string, a ...any) {
		mu.Lock()
		lines = append(lines, fmt.Sprintf(f, a...))
		mu.Unlock()
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.SetMode(Drop)
	p.SetMode(Pass)
	mu.Lock()
	defer mu.Unlock()
	if len(lines) != 2 || !strings.Contains(lines[0], "pass -> drop") {
		t.Fatalf("log %q", lines)
	}
}
