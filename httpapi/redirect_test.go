package httpapi_test

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/rpc"
)

func fakeEnv(t *testing.T) (*env, *fakeBackend) {
	var fake *fakeBackend
	e := newEnv(t, testConfig(), func(l *localBackend) rpcBackend { fake = newFake(l); return fake }, nil)
	return e, fake
}

// A follower redirects every request that needs the leader, keeping the
// path and query, and changes nothing itself.
func TestFollowerRedirects(t *testing.T) {
	e, fake := fakeEnv(t)
	fake.follower(httpapi.ErrNotLeader, rpc.NodeRef{ID: "n2", APIAddr: "10.0.0.2:8080"}, true)
	member := uuid.NewString()
	cases := []struct {
		method, path, body string
	}{
		{http.MethodPost, rpc.PathTaskGet + "?trace=1", `{"pass":0}`},
		{http.MethodPost, rpc.PathTaskFinished, `{"meta":{"id":1,"epoch":1}}`},
		{http.MethodPost, rpc.PathTaskFailed, `{"meta":{"id":1,"epoch":1}}`},
		{http.MethodPost, rpc.PathTaskRenew, `{"meta":{"id":1,"epoch":1}}`},
		{http.MethodPost, rpc.PathSaveModel, `{"trainer_id":"t","block_dur":"1s"}`},
		{http.MethodPost, rpc.PathAllgatherJoin, `{"group":"g","member":"` + member + `","num_peers":2,"data":1}`},
		{http.MethodPost, rpc.PathAllgatherLeave, `{"group":"g","member":"` + member + `"}`},
		// A follower redirects before it looks at the files: this glob
		// matches nothing, and the answer is still the redirect.
		{http.MethodPost, rpc.PathDataset, `{"globs":["/does/not/exist-*"]}`},
		{http.MethodPost, rpc.PathDataset, `{"chunks":[{"path":"/a","offset":0,"records":1}]}`},
		{http.MethodGet, rpc.PathStatus, ``},
		{http.MethodGet, rpc.PathStatus + "?verbose=1", ``},
		{http.MethodGet, rpc.PathCluster, ``},
		{http.MethodPost, rpc.PathClusterAddMember, `{"id":"n4","raft_addr":"a:1","api_addr":"a:2"}`},
		{http.MethodPost, rpc.PathClusterRemoveMember, `{"id":"n3"}`},
		{http.MethodPost, rpc.PathClusterTransfer, `{}`},
	}
	for _, tc := range cases {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			before := e.state()
			var body []byte
			if tc.method == http.MethodPost {
				body = []byte(tc.body)
			}
			r := e.do(tc.method, tc.path, body, reqID(uuid.New(), 1)...)
			wantError(t, r, http.StatusTemporaryRedirect, rpc.CodeNotLeader)
			if loc := r.header.Get("Location"); loc != "http://10.0.0.2:8080"+tc.path {
				t.Errorf("Location %q", loc)
			}
			if after := e.state(); after != before {
				t.Error("a redirected request changed the state")
			}
		})
	}
}

// Reads that may be stale are answered by any node.
func TestFollowerServesStaleReads(t *testing.T) {
	e, fake := fakeEnv(t)
	fake.follower(httpapi.ErrNotLeader, rpc.NodeRef{ID: "n2", APIAddr: "10.0.0.2:8080"}, true)
	for _, p := range []string{rpc.PathStatus + "?stale", rpc.PathStatus + "?stale=true", rpc.PathDebugState, rpc.PathHealthz, rpc.PathReadyz} {
		if r := e.get(p); r.status != http.StatusOK {
			t.Errorf("GET %s: %d %s", p, r.status, r.body)
		}
	}
	// The watch answers from the follower's FSM.
	a := uuid.New()
	res, err := e.local.Apply(t.Context(), &fsm.Join{Group: "g", Member: a, NumPeers: 1, Data: []byte(`{"x":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	r := e.get(watchPath("g", a, res.Generation, "0s"))
	var w rpc.WatchResponse
	r.decode(t, &w)
	if r.status != http.StatusOK || w.Status != rpc.WatchComplete || string(w.Data[0]) != `{"x":1}` {
		t.Fatalf("follower watch: %d %s", r.status, r.body)
	}
}

// Without a known leader that serves after LeaderWait, or when the leader
// is unknown to the registry, the answer is 503 no_leader with
// Retry-After; an unknown outcome is 503 unknown_outcome, retryable at once
// with the same request id.
func TestNoLeaderAndUnknownOutcome(t *testing.T) {
	cases := []struct {
		name   string
		err    error
		leader rpc.NodeRef
		known  bool
		code   string
	}{
		{"no leader known", httpapi.ErrNotLeader, rpc.NodeRef{}, false, rpc.CodeNoLeader},
		{"leader without API address", httpapi.ErrNotLeader, rpc.NodeRef{ID: "n2"}, true, rpc.CodeNoLeader},
		{"backend says no leader", httpapi.ErrNoLeader, rpc.NodeRef{}, false, rpc.CodeNoLeader},
		{"unknown outcome", httpapi.ErrUnknownOutcome, rpc.NodeRef{ID: "local"}, true, rpc.CodeUnknownOutcome},
		{"leader not ready", httpapi.ErrNotReady, rpc.NodeRef{ID: "local", APIAddr: "127.0.0.1:1"}, true, rpc.CodeNoLeader},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, fake := fakeEnv(t)
			fake.follower(tc.err, tc.leader, tc.known)
			fake.mu.Lock()
			fake.notReady = tc.err == httpapi.ErrNotReady
			fake.mu.Unlock()
			for _, req := range []struct{ method, path, body string }{
				{http.MethodPost, rpc.PathTaskGet, `{"pass":0}`},
				{http.MethodPost, rpc.PathSaveModel, `{"trainer_id":"t","block_dur":"1s"}`},
				{http.MethodGet, rpc.PathStatus, ``},
			} {
				var body []byte
				if req.method == http.MethodPost {
					body = []byte(req.body)
				}
				r := e.do(req.method, req.path, body)
				got := wantError(t, r, http.StatusServiceUnavailable, tc.code)
				if want := map[bool]string{true: "1", false: ""}[tc.code == rpc.CodeNoLeader]; r.header.Get("Retry-After") != want {
					t.Errorf("%s: Retry-After %q, want %q", req.path, r.header.Get("Retry-After"), want)
				}
				if !rpc.Retryable(rpc.ErrorFromCode(got.Code, got.Message, r.status)) {
					t.Errorf("%s: %q not retryable", req.path, got.Code)
				}
			}
		})
	}
}

// During an election a request waits for the new leader and is then
// redirected to it, rather than answered no_leader for the client to sleep
// on; a leader that finishes taking over redirects to itself.
func TestRequestWaitsForTheNewLeader(t *testing.T) {
	var fake *fakeBackend
	cfg := testConfig()
	cfg.LeaderWait = time.Minute
	e := newEnv(t, cfg, func(l *localBackend) rpcBackend { fake = newFake(l); return fake }, nil)
	for _, tc := range []struct {
		name   string
		before func()
		after  func()
		want   string
	}{
		{"follower during an election", func() { fake.follower(httpapi.ErrNotLeader, rpc.NodeRef{}, false) },
			func() { fake.follower(httpapi.ErrNotLeader, rpc.NodeRef{ID: "n2", APIAddr: "127.0.0.1:9"}, true) },
			"http://127.0.0.1:9" + rpc.PathTaskGet},
		{"leader taking over", func() {
			fake.follower(httpapi.ErrNotReady, rpc.NodeRef{ID: "local", APIAddr: "127.0.0.1:7"}, true)
			fake.mu.Lock()
			fake.notReady = true
			fake.mu.Unlock()
		}, func() {
			fake.mu.Lock()
			fake.notReady = false
			fake.mu.Unlock()
		}, "http://127.0.0.1:7" + rpc.PathTaskGet},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.before()
			done := make(chan response, 1)
			go func() { done <- e.do(http.MethodPost, rpc.PathTaskGet, []byte(`{"pass":0}`)) }()
			select {
			case r := <-done:
				t.Fatalf("answered %d %s before there was a leader", r.status, r.body)
			case <-time.After(100 * time.Millisecond):
			}
			tc.after()
			r := <-done
			if r.status != http.StatusTemporaryRedirect || r.header.Get("Location") != tc.want {
				t.Fatalf("got %d to %q, want 307 to %s", r.status, r.header.Get("Location"), tc.want)
			}
		})
	}
}

// A follower redirects a write before it reads its body: a body that is
// malformed, or larger than any limit, is answered with the redirect, not
// with the error that reading it would give.
func TestFollowerRedirectsBeforeReadingTheBody(t *testing.T) {
	e, fake := fakeEnv(t)
	fake.follower(httpapi.ErrNotLeader, rpc.NodeRef{ID: "n2", APIAddr: "10.0.0.2:8080"}, true)
	for _, tc := range []struct {
		path string
		body []byte
	}{
		{rpc.PathKVCompareAndSet, []byte(`{"key":`)},
		{rpc.PathDataset, []byte(`not json`)},
		{rpc.PathTaskGet, bytes.Repeat([]byte(" "), 8<<20)},
	} {
		r := e.do(http.MethodPost, tc.path, tc.body)
		wantError(t, r, http.StatusTemporaryRedirect, rpc.CodeNotLeader)
	}
}
