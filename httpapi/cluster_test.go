package httpapi_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
	"github.com/raftmaster/raftmaster/internal/version"
	"github.com/raftmaster/raftmaster/rpc"
)

func TestStatus(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	e.setDataset(2, fsm.DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Minute})
	for _, p := range []string{rpc.PathStatus, rpc.PathStatus + "?stale"} {
		r := e.get(p)
		var st rpc.StatusResponse
		r.decode(t, &st)
		if r.status != http.StatusOK || st.NodeID != "local" || st.State != "Leader" || st.FSM.Tasks != 2 || !st.Ready || st.Version == "" {
			t.Errorf("GET %s: %d %s", p, r.status, r.body)
		}
		// snake_case keys, durations as strings, times as RFC 3339.
		for _, want := range []string{`"chunks_per_task":1`, `"task_timeout":"1m0s"`, `"clock":"20`} {
			if !strings.Contains(string(r.body), want) {
				t.Errorf("GET %s: %s lacks %s", p, r.body, want)
			}
		}
	}
	if r := e.do(http.MethodHead, rpc.PathStatus, nil); r.status != http.StatusOK {
		t.Errorf("HEAD status: %d", r.status)
	}
}

func TestDebugState(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	e.join("g", uuid.New(), 2, "a")
	r := e.get(rpc.PathDebugState)
	var d rpc.DebugStateResponse
	r.decode(t, &d)
	f := e.local.FSM()
	if r.status != http.StatusOK || d.NodeID != "local" || d.AppliedIndex != f.AppliedIndex() || d.Hash != f.StateHash() {
		t.Fatalf("debug state: %d %s", r.status, r.body)
	}
}

func TestHealthAndReady(t *testing.T) {
	e, fake := fakeEnv(t)
	for _, p := range []string{rpc.PathHealthz, rpc.PathReadyz} {
		r := e.get(p)
		if r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != `{"status":"ok"}` {
			t.Errorf("GET %s: %d %s", p, r.status, r.body)
		}
	}
	fake.mu.Lock()
	fake.notReady = true
	fake.mu.Unlock()
	r := e.get(rpc.PathReadyz)
	wantError(t, r, http.StatusServiceUnavailable, rpc.CodeUnavailable)
	if r.header.Get("Retry-After") == "" {
		t.Error("no Retry-After")
	}
	if r := e.get(rpc.PathHealthz); r.status != http.StatusOK {
		t.Errorf("healthz while not ready: %d", r.status)
	}
}

func TestClusterChanges(t *testing.T) {
	e, fake := fakeEnv(t)
	e.ok(rpc.PathClusterAddMember, rpc.AddMemberRequest{ID: "n4", RaftAddr: "10.0.0.4:7000", APIAddr: "10.0.0.4:8080"}, nil)
	e.ok(rpc.PathClusterRemoveMember, rpc.RemoveMemberRequest{ID: "n3"}, nil)
	e.ok(rpc.PathClusterTransfer, rpc.TransferRequest{ID: "n2"}, nil)
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if len(fake.joined) != 1 || fake.joined[0].ID != "n4" || fake.joined[0].APIAddr != "10.0.0.4:8080" {
		t.Errorf("joined %+v", fake.joined)
	}
	if len(fake.removed) != 1 || fake.removed[0] != "n3" {
		t.Errorf("removed %q", fake.removed)
	}
	if len(fake.transferred) != 1 || fake.transferred[0] != "n2" {
		t.Errorf("transferred %q", fake.transferred)
	}
}

// GET /v1/cluster asks every member for its status, concurrently, and
// reports the ones it cannot reach.
func TestClusterFanOut(t *testing.T) {
	// A second node, answering its own status.
	other := apitest.NewLocal()
	other.ID = "n2"
	ots := httptest.NewServer(httpapi.NewHandler(other, httpapi.Config{}, testLogger(t)))
	t.Cleanup(ots.Close)
	// A node that is gone.
	gone := httptest.NewServer(http.NotFoundHandler())
	goneAddr := strings.TrimPrefix(gone.URL, "http://")
	gone.Close()

	e, fake := fakeEnv(t)
	e.join("g", uuid.New(), 2, "a")
	fake.mu.Lock()
	fake.members = []rpc.Member{
		{ID: "local", APIAddr: e.local.API, Suffrage: "Voter", Leader: true},
		{ID: "n2", APIAddr: strings.TrimPrefix(ots.URL, "http://"), Suffrage: "Voter"},
		{ID: "n3", APIAddr: goneAddr, Suffrage: "Voter", Version: "v-registered", Protocol: fsm.Protocol},
		{ID: "n4", Suffrage: "Nonvoter"},
	}
	fake.mu.Unlock()

	r := e.get(rpc.PathCluster)
	var c rpc.ClusterResponse
	r.decode(t, &c)
	if r.status != http.StatusOK || len(c.Members) != 4 {
		t.Fatalf("cluster: %d %s", r.status, r.body)
	}
	if m := c.Members[0]; m.State != "Leader" || m.Term != 1 || m.AppliedIndex != e.local.FSM().AppliedIndex() || m.Error != "" {
		t.Errorf("self %+v", m)
	}
	if m := c.Members[1]; m.State != "Leader" || m.Term != 1 || m.Error != "" {
		t.Errorf("n2 %+v", m)
	}
	if m := c.Members[2]; m.Error == "" || m.State != "" || m.Version != "v-registered" || m.Protocol != fsm.Protocol {
		t.Errorf("unreachable n3 %+v; want the version it registered", m)
	}
	// The members that answered say their own version and level.
	for _, m := range c.Members[:2] {
		if m.Version != version.String() || m.Protocol != fsm.Protocol {
			t.Errorf("%s reports version %q level %d, want %q level %d", m.ID, m.Version, m.Protocol, version.String(), fsm.Protocol)
		}
	}
	if c.ClusterProtocol != e.local.FSM().Protocol() {
		t.Errorf("cluster_protocol %d, want the state's %d", c.ClusterProtocol, e.local.FSM().Protocol())
	}
	if m := c.Members[3]; m.Error == "" {
		t.Errorf("n4 without address %+v", m)
	}
	if c.Leader.ID != "local" || c.FSM.Groups != 1 || len(c.Groups) != 1 || c.Groups[0].ID != "g" {
		t.Errorf("summary %+v", c)
	}
}

// Requests are logged at debug level with their outcome, never with their
// bodies.
func TestRequestLogOmitsBodies(t *testing.T) {
	var mu sync.Mutex
	var buf bytes.Buffer
	logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: &lockedWriter{mu: &mu, w: &buf}})
	local := apitest.NewLocal()
	ts := httptest.NewServer(httpapi.NewHandler(local, httpapi.Config{}, logger))
	defer ts.Close()
	resp, err := http.Post(ts.URL+rpc.PathAllgatherJoin, "application/json",
		strings.NewReader(`{"group":"g","member":"`+uuid.NewString()+`","num_peers":2,"data":"sekrit-payload"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ts.Close()
	mu.Lock()
	defer mu.Unlock()
	out := buf.String()
	if !strings.Contains(out, "path=/v1/allgather/join") || !strings.Contains(out, "status=200") {
		t.Errorf("request not logged: %q", out)
	}
	if strings.Contains(out, "sekrit") {
		t.Errorf("log contains the body: %q", out)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
