package client_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
	"github.com/raftmaster/raftmaster/rpc"
)

// reportingFollower is a follower whose own status names the leader, as
// a node of a real cluster does.
type reportingFollower struct{ *follower }

func (f reportingFollower) Status() rpc.StatusResponse {
	st := f.Local.Status()
	st.State, st.Leader = "Follower", f.leader
	return st
}

// authRecorder records the Authorization headers a listener receives.
type authRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (a *authRecorder) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.seen = append(a.seen, r.Header.Get(rpc.HeaderAuthorization))
		a.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func (a *authRecorder) tokens() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, s := range a.seen {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// TestTokenGoesOnlyToClusterHosts: a node that redirects to a host that
// is neither an address the client was given nor the leader the cluster
// reports does not get the client's token sent there: the call fails,
// saying why, and the third host never sees the Authorization header.
func TestTokenGoesOnlyToClusterHosts(t *testing.T) {
	var third authRecorder
	thirdTS := httptest.NewServer(third.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"granted":true}`))
	})))
	t.Cleanup(thirdTS.Close)
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, thirdTS.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	t.Cleanup(fake.Close)

	c := newClient(t, client.WithAddrs(fake.URL), client.WithToken("secret-token-0123456789"), client.WithRetry(300*time.Millisecond))
	_, err := c.RequestSaveModel("t0", time.Minute)
	if got := third.tokens(); len(got) != 0 {
		t.Fatalf("the third host received the token: %q", got)
	}
	if err == nil || !strings.Contains(err.Error(), "refusing the redirect") {
		t.Fatalf("a redirect to a foreign host: %v, want a refusal", err)
	}
}

// TestTokenFollowsRedirectToReportedLeader: a follower's redirect to a
// leader the client was not given is followed, with the token, once the
// follower's own status names that leader.
func TestTokenFollowsRedirectToReportedLeader(t *testing.T) {
	leader := apitest.NewLocal()
	leader.ID = "leader"
	var leaderAuth authRecorder
	startServer(t, leader, leaderAuth.wrap)
	fb := reportingFollower{&follower{Local: apitest.NewLocal(), leader: rpc.NodeRef{ID: "leader", APIAddr: leader.API}}}
	fb.ID = "follower"
	fts := startServer(t, fb, nil)
	fb.Local.API = strings.TrimPrefix(fts.URL, "http://")

	c := newClient(t, client.WithAddrs(fts.URL), client.WithToken("secret-token-0123456789"))
	if ok, err := c.RequestSaveModel("trainer-0", time.Minute); err != nil || !ok {
		t.Fatalf("through a follower: %v %v", ok, err)
	}
	if holder, _, _ := leader.FSM().SaveModelHolder(fsm.DefaultJob); holder != "trainer-0" {
		t.Fatalf("holder %q", holder)
	}
	if got := leaderAuth.tokens(); len(got) == 0 {
		t.Fatal("the leader never saw the token")
	}
}

// TestRetriesRateLimited: a write answered 429 rate_limited is sent
// again with the same request id after Retry-After, and succeeds.
func TestRetriesRateLimited(t *testing.T) {
	local := apitest.NewLocal()
	var mu sync.Mutex
	var ids []string
	limited := 0
	startServer(t, local, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			ids = append(ids, r.Header.Get(rpc.HeaderRequestID))
			first := limited == 0
			limited++
			mu.Unlock()
			if first {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusTooManyRequests)
				_, _ = w.Write([]byte(`{"code":"rate_limited","message":"over this token's quota of writes"}`))
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	c := newClient(t, client.WithAddrs(local.API), client.WithoutSession()) // counts request ids
	start := time.Now()
	if ok, err := c.RequestSaveModel("t0", time.Minute); err != nil || !ok {
		t.Fatalf("after a 429: %v %v", ok, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ids) != 2 || ids[0] != ids[1] || ids[0] == "" {
		t.Fatalf("request ids %q, want the same one twice", ids)
	}
	if time.Since(start) < time.Second {
		t.Fatal("the retry did not wait for Retry-After")
	}
	var e *rpc.Error
	if !errors.As(&rpc.Error{Code: rpc.CodeRateLimited}, &e) || !rpc.Retryable(e) {
		t.Fatal("rate_limited is not retryable")
	}
}
