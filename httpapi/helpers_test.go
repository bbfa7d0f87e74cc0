package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
	"github.com/raftmaster/raftmaster/recordio"
	"github.com/raftmaster/raftmaster/rpc"
)

// testLogger sends the server's logs to t.Log.
func testLogger(t *testing.T) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Debug, Output: logWriter{t}})
}

type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// fakeClock is a controllable time source for apitest.Local.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// env is a Server over a backend, behind an httptest.Server.
type env struct {
	t      *testing.T
	local  *apitest.Local
	clock  *fakeClock
	server *httpapi.Handler
	ts     *httptest.Server
	// client does not follow redirects, so tests see the 307s.
	client *http.Client
}

// testConfig has small limits so the tests can reach them.
func testConfig() httpapi.Config {
	return httpapi.Config{
		DatasetDefaults: fsm.DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Minute, FailureMax: 2},
		LeaderWait:      50 * time.Millisecond,
		Limits: httpapi.Limits{
			MaxBodyBytes:        8 << 10,
			MaxDatasetBodyBytes: 64 << 10,
			MaxMemberData:       1 << 10,
			MaxNumPeers:         8,
			MaxGlobs:            4,
			MaxFiles:            4,
			MaxChunks:           50,
			MaxWatchWait:        time.Minute,
			MaxDuration:         time.Hour,
		},
	}
}

// newEnv starts a server over a fresh Local backend, or over wrap(local)
// when wrap is given.
func newEnv(t *testing.T, cfg httpapi.Config, wrap func(*apitest.Local) httpapi.Backend, hook func()) *env {
	t.Helper()
	local := apitest.NewLocal()
	clock := newFakeClock()
	local.Now = clock.Now
	var b httpapi.Backend = local
	if wrap != nil {
		b = wrap(local)
	}
	s := httpapi.NewHandler(b, cfg, testLogger(t))
	if hook != nil {
		httpapi.SetWatchHook(s, hook)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	local.API = strings.TrimPrefix(ts.URL, "http://")
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &env{t: t, local: local, clock: clock, server: s, ts: ts, client: client}
}

// response is what a request got back.
type response struct {
	status int
	header http.Header
	body   []byte
}

// decode unmarshals the body into v.
func (r response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decoding %q: %v", r.body, err)
	}
}

// apiError decodes an error body.
func (r response) apiError(t *testing.T) rpc.Error {
	t.Helper()
	var e rpc.Error
	r.decode(t, &e)
	return e
}

// do sends a request with a raw body (nil for none) and optional header
// pairs.
func (e *env) do(method, path string, body []byte, header ...string) response {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, e.ts.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// post sends v as JSON.
func (e *env) post(path string, v any, header ...string) response {
	e.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.do(http.MethodPost, path, b, header...)
}

// ok posts v, requires a 200 and decodes the answer into out (if not nil).
func (e *env) ok(path string, v, out any, header ...string) {
	e.t.Helper()
	r := e.post(path, v, header...)
	if r.status != http.StatusOK {
		e.t.Fatalf("POST %s: status %d: %s", path, r.status, r.body)
	}
	if out != nil {
		r.decode(e.t, out)
	}
}

// get sends a GET.
func (e *env) get(path string) response {
	e.t.Helper()
	return e.do(http.MethodGet, path, nil)
}

// wantError checks the status and code of an error response.
func wantError(t *testing.T, r response, status int, code string) rpc.Error {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d (body %s)", r.status, status, r.body)
	}
	e := r.apiError(t)
	if e.Code != code {
		t.Fatalf("code %q, want %q (message %q)", e.Code, code, e.Message)
	}
	if e.Message == "" {
		t.Errorf("code %q has no message", e.Code)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	return e
}

// fsmState is what must not change after a rejected request.
type fsmState struct {
	hash    string
	applied uint64
}

func (e *env) state() fsmState {
	f := e.local.FSM()
	return fsmState{hash: f.StateHash(), applied: f.AppliedIndex()}
}

// setDataset installs a dataset of n chunks straight through the backend.
func (e *env) setDataset(n int, params fsm.DatasetParams) {
	e.t.Helper()
	chunks := make([]fsm.Chunk, n)
	for i := range chunks {
		chunks[i] = fsm.Chunk{Path: fmt.Sprintf("/data/f%d", i), Offset: 0, Records: 10}
	}
	res, err := e.local.SetDataset(context.Background(), fsm.DefaultJob, fsm.RequestID{}, params, nil, chunks)
	if err != nil || res.Err() != nil {
		e.t.Fatalf("set dataset: %v %v", err, res.Err())
	}
}

// reqID returns the header pair of a request id.
func reqID(client uuid.UUID, seq uint64) []string {
	return []string{rpc.HeaderRequestID, fmt.Sprintf("%s/%d", client, seq)}
}

// writeRecordIO writes a RecordIO file of n records in chunks of about
// chunk bytes and returns its path.
func writeRecordIO(t *testing.T, dir, name string, n, chunk int) string {
	t.Helper()
	path := filepath.Join(dir, name)
	var buf bytes.Buffer
	w := recordio.NewWriter(&buf, chunk, recordio.NoCompression)
	for i := range n {
		if _, err := fmt.Fprintf(w, "%s record %d", name, i); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
