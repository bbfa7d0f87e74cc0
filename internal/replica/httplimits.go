package replica

import (
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/net/netutil"
)

// Defaults of HTTPLimits; a zero field takes its default.
const (
	// DefaultReadHeaderTimeout bounds the wait for a request's headers,
	// from the connection's opening or the end of its previous request.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout bounds the reading of a request's body.
	DefaultReadTimeout = time.Minute
	// DefaultWriteTimeout bounds a write of the answer that makes no
	// progress: a client that stops reading is cut off after it.
	DefaultWriteTimeout = time.Minute
	// DefaultIdleTimeout is how long a kept-alive connection may wait
	// for its next request: above the longest long-poll hold (a watch's
	// 60 s and a leader wait), so that a client's pooled connection
	// outlives any answer it waits for.
	DefaultIdleTimeout = 2 * time.Minute
	// DefaultMaxHeaderBytes bounds a request's headers.
	DefaultMaxHeaderBytes = 64 << 10
	// DefaultMaxConnections bounds the connections open at once: room
	// for 10,000 trainers each holding a few.
	DefaultMaxConnections = 32768
)

// HTTPLimits bound the connections and requests of the API server.
type HTTPLimits struct {
	// ReadHeaderTimeout bounds the wait for a request's headers: a
	// connection that sends none is closed after it.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds the reading of a request's body, from the end of
	// its headers; a request without a body is not bounded by it, so that
	// a long-poll watch can hold.
	ReadTimeout time.Duration
	// WriteTimeout bounds each write of the answer, renewed as the answer
	// makes progress: it cuts off a client that stops reading, not a
	// long answer (a backup) or a long hold.
	WriteTimeout time.Duration
	// IdleTimeout bounds the wait of a kept-alive connection between
	// requests.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers.
	MaxHeaderBytes int
	// MaxConnections bounds the connections open at once; the listener
	// accepts no more until one closes.
	MaxConnections int
}

func (l HTTPLimits) withDefaults() HTTPLimits {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	def(&l.ReadTimeout, DefaultReadTimeout)
	def(&l.WriteTimeout, DefaultWriteTimeout)
	def(&l.IdleTimeout, DefaultIdleTimeout)
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if l.MaxConnections <= 0 {
		l.MaxConnections = DefaultMaxConnections
	}
	return l
}

// limitListener caps the connections ln hands out at once.
func limitListener(ln net.Listener, l HTTPLimits) net.Listener {
	return netutil.LimitListener(ln, l.withDefaults().MaxConnections)
}

// boundedServer returns the API's http.Server over h with l's bounds.
// The body and write bounds are set per request (boundRequest), since a
// server-wide ReadTimeout would also end the long-poll holds.
func boundedServer(h http.Handler, l HTTPLimits) *http.Server {
	l = l.withDefaults()
	return &http.Server{
		Handler:           boundRequest(h, l),
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
	}
}

// boundRequest sets a request's read deadline while its body is read and
// a write deadline that each write of its answer renews.
func boundRequest(h http.Handler, l HTTPLimits) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		// A deadline an earlier request of the connection set must not
		// cut this one's answer.
		_ = rc.SetWriteDeadline(time.Time{})
		if r.Body != nil && r.Body != http.NoBody {
			if rc.SetReadDeadline(time.Now().Add(l.ReadTimeout)) == nil {
				r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
			}
		}
		h.ServeHTTP(&deadlineWriter{ResponseWriter: w, rc: rc, timeout: l.WriteTimeout}, r)
	})
}

// deadlineBody lifts the read deadline once the body has been read to its
// end or closed: net/http goes on reading the connection in the
// background, to notice a client that goes away, and a deadline there
// would cancel the request while its handler still works.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	once sync.Once
}

func (b *deadlineBody) lift() { b.once.Do(func() { _ = b.rc.SetReadDeadline(time.Time{}) }) }

// Read reads the body, lifting the deadline at its end.
func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.lift()
	}
	return n, err
}

// Close closes the body and lifts the deadline.
func (b *deadlineBody) Close() error {
	err := b.ReadCloser.Close()
	b.lift()
	return err
}

// deadlineWriter renews the connection's write deadline before each write
// of the answer, at most once a second.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	renewed time.Time
}

func (w *deadlineWriter) renew() {
	if now := time.Now(); now.Sub(w.renewed) >= time.Second {
		w.renewed = now
		_ = w.rc.SetWriteDeadline(now.Add(w.timeout))
	}
}

// WriteHeader renews the deadline and writes the header.
func (w *deadlineWriter) WriteHeader(code int) {
	w.renew()
	w.ResponseWriter.WriteHeader(code)
}

// Write renews the deadline and writes b.
func (w *deadlineWriter) Write(b []byte) (int, error) {
	w.renew()
	return w.ResponseWriter.Write(b)
}

// Flush renews the deadline and flushes what is buffered.
func (w *deadlineWriter) Flush() {
	w.renew()
	_ = w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
