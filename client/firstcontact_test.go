package client_test

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
	"github.com/raftmaster/raftmaster/rpc"
)

// silentAddr returns the address of a node that accepts connections and
// never says a word: under TLS, a handshake that never ends.
func silentAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				<-done
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		l.Close()
		close(done)
		wg.Wait()
	})
	return l.Addr().String()
}

// TestFirstContactFailsFast checks that a client that has never reached
// the cluster gives up soon, long before its retry budget, with an error
// that names each address and what it did.
func TestFirstContactFailsFast(t *testing.T) {
	dead := deadAddr(t)
	c := newClient(t, client.WithAddrs(dead), client.WithRetry(2*time.Minute))
	// The old client retried for its whole budget (2 minutes): this
	// bound, well under it, is what it would hit first.
	err := statusWithin(t, c, 25*time.Second)
	if err == nil {
		t.Fatal("status of a closed port answered")
	}
	if !errors.Is(err, client.ErrNoContact) {
		t.Fatalf("error %v: want ErrNoContact", err)
	}
	if msg := err.Error(); !strings.Contains(msg, dead) || !strings.Contains(msg, "connection refused") {
		t.Fatalf("error %q: want it to name %s and connection refused", msg, dead)
	}
}

// TestFirstContactNamesEveryAddress checks that the error names every
// address given, a silent one too, with what each did.
func TestFirstContactNamesEveryAddress(t *testing.T) {
	dead, silent := deadAddr(t), silentAddr(t)
	c := newClient(t, client.WithAddrs(dead, silent), client.WithFirstContactTimeout(2*time.Second), client.WithTLS(&tls.Config{}))
	err := statusWithin(t, c, 25*time.Second)
	if !errors.Is(err, client.ErrNoContact) {
		t.Fatalf("error %v: want ErrNoContact", err)
	}
	msg := err.Error()
	for _, want := range []string{dead + ": connection refused", silent + ": no connection within"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("error %q: want %q in it", msg, want)
		}
	}
}

// TestFirstContactTimeoutZeroWaitsTheBudget checks that a zero first-
// contact timeout keeps retrying for the whole retry budget, as a client
// that reached the cluster before does.
func TestFirstContactTimeoutZeroWaitsTheBudget(t *testing.T) {
	c := newClient(t, client.WithAddrs(deadAddr(t)), client.WithFirstContactTimeout(0), client.WithRetry(7*time.Second))
	err := statusWithin(t, c, time.Minute)
	if err == nil || errors.Is(err, client.ErrNoContact) || !strings.Contains(err.Error(), "giving up") {
		t.Fatalf("error %v: want the retry budget's give-up error", err)
	}
}

// statusWithin asks c for the cluster's status and returns its error,
// failing the test when the call has not returned within limit.
func statusWithin(t *testing.T, c *client.Client, limit time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := c.Status()
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		t.Fatalf("status still waiting after %v", limit)
		return nil
	}
}

// lockedBuffer is a log destination safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestWaitForLeaderIsLoggedOnce checks that a client that reached the
// cluster and then waits for a leader says so once, however many times
// it retries, and says when the cluster answers again.
func TestWaitForLeaderIsLoggedOnce(t *testing.T) {
	local := apitest.NewLocal()
	var noLeader atomic.Int32
	noLeader.Store(-1)
	ts := startServer(t, local, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if noLeader.Add(-1) >= 0 {
				w.Header().Set(rpc.HeaderNode, "n1")
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				json.NewEncoder(w).Encode(rpc.Error{Code: rpc.CodeNoLeader, Message: "no leader"})
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	var logs lockedBuffer
	c := newClient(t, client.WithAddrs(ts.URL), client.WithLogger(hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})))
	if _, err := c.Status(); err != nil {
		t.Fatal(err)
	}
	noLeader.Store(4) // the next four requests find no leader
	if _, err := c.Status(); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if n := strings.Count(out, "waiting for the cluster's leader"); n != 1 {
		t.Fatalf("the wait for a leader logged %d times, want once:\n%s", n, out)
	}
	if !strings.Contains(out, "the cluster answers again") {
		t.Fatalf("no word that the cluster answers again:\n%s", out)
	}
}

// TestRecordReaderFailsFastAtFirstContact checks that NextRecord of a
// client that never reached its addresses returns ErrNoContact instead of
// waiting on.
func TestRecordReaderFailsFastAtFirstContact(t *testing.T) {
	dead := deadAddr(t)
	c := newClient(t, client.WithAddrs(dead), client.WithFirstContactTimeout(time.Second))
	c.StartGetRecords(0)
	done := make(chan error, 1)
	go func() {
		_, err := c.NextRecord()
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, client.ErrNoContact) || !strings.Contains(err.Error(), dead) {
			t.Fatalf("NextRecord: %v; want ErrNoContact naming %s", err, dead)
		}
	case <-time.After(25 * time.Second):
		t.Fatal("NextRecord still waiting after 25s")
	}
}
