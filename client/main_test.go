package client_test

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
	"github.com/raftmaster/raftmaster/recordio"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testWriter sends log lines to t.Log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

func testLogger(t testing.TB, name string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: name, Output: testWriter{t}, Level: hclog.Info})
}

// startServer serves the API of b on 127.0.0.1. When b is a *apitest.Local
// (or wraps one) its API address is set to the server's, so that it can name itself as
// the leader. wrap, when not nil, wraps the handler.
func startServer(t *testing.T, b httpapi.Backend, wrap func(http.Handler) http.Handler) *httptest.Server {
	t.Helper()
	return startServerWith(t, b, httpapi.Config{}, wrap)
}

// startServerWith is startServer with the handler's configuration cfg.
func startServerWith(t *testing.T, b httpapi.Backend, cfg httpapi.Config, wrap func(http.Handler) http.Handler) *httptest.Server {
	t.Helper()
	ts := httptest.NewUnstartedServer(nil)
	var l *apitest.Local
	switch b := b.(type) {
	case *apitest.Local:
		l = b
	case *apitest.SessionLocal:
		l = b.Local
	case *follower:
		l = b.Local
	case *admin:
		l = b.Local
	}
	if l != nil {
		l.API = ts.Listener.Addr().String()
	}
	var h http.Handler = httpapi.NewHandler(b, cfg, testLogger(t, "server"))
	if wrap != nil {
		h = wrap(h)
	}
	ts.Config.Handler = h
	ts.Start()
	t.Cleanup(ts.Close)
	return ts
}

// newClient returns a client of addrs that is closed at the end of the
// test.
func newClient(t *testing.T, opts ...client.Option) *client.Client {
	t.Helper()
	opts = append([]client.Option{client.WithLogger(testLogger(t, "client")), client.WithPassWait(10*time.Millisecond, 50*time.Millisecond)}, opts...)
	c, err := client.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// writeRecords writes the records "0", "1", ... "n-1" to a RecordIO file
// with chunks of at most maxChunk record bytes, and returns its path.
func writeRecords(t *testing.T, n, maxChunk int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "data.recordio")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := recordio.NewWriter(f, maxChunk, recordio.Snappy)
	for i := range n {
		if _, err := w.Write([]byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// deadAddr returns an address on which nothing listens.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// counter counts the requests a handler serves, by path.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		if c.n == nil {
			c.n = make(map[string]int)
		}
		c.n[r.URL.Path]++
		c.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func (c *counter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.n {
		n += v
	}
	return n
}

func (c *counter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprint(c.n)
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
