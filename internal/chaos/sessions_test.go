package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/internal/chaos/history"
	"github.com/raftmaster/raftmaster/rpc"
)

// sessionServer answers an opening with session 7, keep-alives of session
// 7 alive and of others session_expired, and writes under session 9
// session_expired.
func sessionServer(t *testing.T) *httptest.Server {
	expired := func(w http.ResponseWriter) {
		w.WriteHeader(http.StatusGone)
		_ = json.NewEncoder(w).Encode(rpc.Error{Code: rpc.CodeSessionExpired, Message: "ended"})
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == rpc.PathSessions:
			_ = json.NewEncoder(w).Encode(rpc.OpenSessionResponse{Session: 7, TTL: rpc.Duration(time.Second), AppliedAt: time.Unix(0, 42)})
		case r.URL.Path == "/v1/sessions/7/keepalive":
			_ = json.NewEncoder(w).Encode(rpc.KeepAliveResponse{TTL: rpc.Duration(time.Second)})
		case strings.HasSuffix(r.URL.Path, "/keepalive"), r.Header.Get(rpc.HeaderSession) == "9":
			expired(w)
		default:
			_, _ = io.WriteString(w, `{"ignored":false}`)
		}
	}))
	t.Cleanup(ts.Close)
	return ts
}

func post(t *testing.T, c *http.Client, url string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// The wire recorder records the sessions opened, the keep-alives and the
// writes refused session_expired, and hands every answer on unchanged.
func TestSessionWireRecords(t *testing.T) {
	ts := sessionServer(t)
	rec := history.NewRecorder()
	c := &http.Client{Transport: sessionWire{base: http.DefaultTransport, rec: rec, client: 3, job: JobB}}
	if code, body := post(t, c, ts.URL+rpc.PathSessions); code != http.StatusOK || !strings.Contains(body, `"session":7`) {
		t.Fatalf("open: %d %s", code, body)
	}
	post(t, c, ts.URL+"/v1/sessions/7/keepalive")
	if code, body := post(t, c, ts.URL+"/v1/sessions/8/keepalive"); code != http.StatusGone || !strings.Contains(body, rpc.CodeSessionExpired) {
		t.Fatalf("keep-alive of an ended session: %d %s", code, body)
	}
	post(t, c, ts.URL+rpc.PathTaskFinished, rpc.HeaderSession, "9")
	post(t, c, ts.URL+rpc.PathTaskFinished, rpc.HeaderSession, "7") // applied: its call records it
	post(t, c, ts.URL+rpc.PathTaskFinished)                         // no session
	ops := rec.Ops()
	want := []history.Op{
		{Kind: history.OpenSession, Session: 7, AppliedAt: 42},
		{Kind: history.KeepAlive, Session: 7},
		{Kind: history.KeepAlive, Session: 8, Code: rpc.CodeSessionExpired},
		{Kind: history.SessionRefused, Session: 9, Code: rpc.CodeSessionExpired, Path: rpc.PathTaskFinished},
	}
	if len(ops) != len(want) {
		t.Fatalf("recorded %+v, want %d operations", ops, len(want))
	}
	for i, op := range ops {
		w := want[i]
		if op.Kind != w.Kind || op.Session != w.Session || op.Code != w.Code || op.Path != w.Path || op.AppliedAt != w.AppliedAt ||
			op.Client != 3 || op.Job != JobB || op.Return < op.Invoke || !op.Kind.Background() {
			t.Errorf("op %d: %+v, want %+v of client 3 in %s", i, op, w, JobB)
		}
	}
	r := sessionReport(ops)
	if r.Opened != 1 || r.Ended != 2 || r.KeepAlives != 2 || r.KeepAlivesExpired != 1 || r.Refused != 1 {
		t.Errorf("report %+v", r)
	}
}

// A paused actor's requests wait until the pause ends; a cut-off actor's
// fail at once.
func TestGate(t *testing.T) {
	ts := sessionServer(t)
	g := &gate{}
	c := &http.Client{Transport: gatedTransport{base: http.DefaultTransport, g: g}}
	g.stall(stallCut)
	if _, err := c.Post(ts.URL+rpc.PathTaskFinished, "application/json", strings.NewReader("{}")); !errors.Is(err, errCutOff) {
		t.Fatalf("a request while cut off: %v, want errCutOff", err)
	}
	g.end()
	g.stall(stallPause)
	done := make(chan error, 1)
	go func() {
		resp, err := c.Post(ts.URL+rpc.PathTaskFinished, "application/json", strings.NewReader("{}"))
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("a request went through a pause: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	g.end()
	if err := <-done; err != nil {
		t.Fatalf("the request after the pause: %v", err)
	}
	// A request whose context ends while paused gives up.
	g.stall(stallPause)
	defer g.end()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+rpc.PathTaskFinished, strings.NewReader("{}"))
	if _, err := c.Do(req); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a paused request whose context ended: %v", err)
	}
}
