package integration

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/internal/proccluster"
	"github.com/raftmaster/raftmaster/rpc"
)

const (
	trainerToken  = "trainer-token-0123456789"
	operatorToken = "operator-token-0123456789"
	laterToken    = "trainer-token-added-later"
)

// TestTokenMatrix starts a cluster that requires tokens (serve
// --auth-tokens) and sends every endpoint a request with no token, an
// unknown token, a trainer's and an operator's: public endpoints answer
// everyone, trainer endpoints answer 401 without a known token, operator
// endpoints also 403 to a trainer, and no refusal changes the state. The
// register's routes, sent valid requests, answer 200 to a trainer and an
// operator. The
// nodes register with each other through the operator token; SIGHUP
// reloads the file.
func TestTokenMatrix(t *testing.T) {
	needsProcesses(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "tokens")
	writeTokens := func(lines ...string) {
		if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeTokens("# role token", "trainer "+trainerToken, "operator "+operatorToken)
	t.Setenv("RAFTMASTER_TOKEN", operatorToken) // for the cluster's own checks and the CLI
	c := proccluster.Start(t, proccluster.Options{Args: []string{"--auth-tokens", file}})
	// Registration goes through the leader's operator endpoint: the
	// cluster is ready only if the nodes' own token works.
	c.WaitReady()
	leader := c.Leader()
	base := "http://" + leader.APIAddr

	do := func(method, path, token string, body []byte) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(rpc.HeaderRequestID, uuid.NewString()+"/1")
		}
		if token != "" {
			req.Header.Set(rpc.HeaderAuthorization, "Bearer "+token)
		}
		hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.Bytes()
	}
	hash := func() string {
		t.Helper()
		status, body := do(http.MethodGet, rpc.PathDebugState, operatorToken, nil)
		var st rpc.DebugStateResponse
		if status != http.StatusOK || json.Unmarshal(body, &st) != nil {
			t.Fatalf("debug state: %d %s", status, body)
		}
		return st.Hash
	}
	samples := map[string]string{
		rpc.PathClusterTransfer:     `{"id":"no-such-node"}`,
		rpc.PathClusterRemoveMember: `{"id":"no-such-node"}`,
		rpc.PathAllgatherWatch:      "?group=g&member=5b0e2a6c-6a43-4f3e-9a57-2f7d3c1e8b90&generation=1&wait=1ms",
		rpc.PathKVGet:               "?key=k",
		rpc.PathKVCompareAndSet:     `{"key":"k","version":0,"value":"dg=="}`,
	}
	// succeeds lists the endpoints whose samples are valid requests, which
	// a role that may call them gets a 200 for.
	succeeds := map[string]bool{rpc.PathKVGet: true, rpc.PathKVCompareAndSet: true}
	for _, ep := range rpc.Endpoints {
		path := rpc.JobRoute(ep.Path, rpc.DefaultJob)
		var body []byte
		if ep.Method == http.MethodGet {
			path += samples[ep.Path]
		} else {
			body = []byte(`{}`)
			if s, ok := samples[ep.Path]; ok {
				body = []byte(s)
			}
		}
		for _, tc := range []struct {
			who, token string
		}{{"no token", ""}, {"an unknown token", "not-a-token-at-all-0000"}, {"a trainer", trainerToken}, {"an operator", operatorToken}} {
			want := 0 // allowed: anything but 401 and 403
			switch {
			case ep.Access == rpc.AccessPublic:
			case tc.token != trainerToken && tc.token != operatorToken:
				want = http.StatusUnauthorized
			case ep.Access == rpc.AccessOperator && tc.token == trainerToken:
				want = http.StatusForbidden
			}
			before := ""
			if want != 0 {
				before = hash()
			}
			status, answer := do(ep.Method, path, tc.token, body)
			switch {
			case want == 0 && (status == http.StatusUnauthorized || status == http.StatusForbidden):
				t.Errorf("%s %s by %s: %d %s, want it allowed", ep.Method, path, tc.who, status, answer)
			case want == 0 && succeeds[ep.Path] && status != http.StatusOK:
				t.Errorf("%s %s by %s: %d %s, want 200", ep.Method, path, tc.who, status, answer)
			case want != 0 && status != want:
				t.Errorf("%s %s by %s: %d %s, want %d", ep.Method, path, tc.who, status, answer, want)
			case want != 0:
				if after := hash(); after != before {
					t.Errorf("%s %s by %s was refused but changed the state", ep.Method, path, tc.who)
				}
			}
		}
	}
	if status, _ := do(http.MethodGet, "/metrics", "", nil); status != http.StatusOK {
		t.Errorf("/metrics without a token: %d", status)
	}

	// The Go client with a trainer token works; without one it is told why.
	tc := newClient(t, client.WithAddrs(c.APIAddrs()...), client.WithToken(trainerToken))
	if _, err := tc.RequestSaveModel("t0", time.Second); err != nil {
		t.Fatalf("a trainer's client: %v", err)
	}
	if _, err := newClient(t, client.WithAddrs(c.APIAddrs()...), client.WithRetry(time.Second)).RequestSaveModel("t1", time.Second); err == nil || !strings.Contains(err.Error(), "token") {
		t.Fatalf("a client without a token: %v", err)
	}

	// SIGHUP reloads the file on every node.
	writeTokens("trainer "+trainerToken, "trainer "+laterToken, "operator "+operatorToken)
	for _, p := range c.Procs {
		if err := p.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitFor("the new token to be accepted", time.Minute, func() bool {
		status, _ := do(http.MethodGet, rpc.PathStatus, laterToken, nil)
		return status == http.StatusOK
	})
}
