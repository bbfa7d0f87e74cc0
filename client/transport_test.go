package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
	"github.com/raftmaster/raftmaster/rpc"
)

// follower is a Backend that is not the leader and names leader as the
// one that is.
type follower struct {
	*apitest.Local
	leader rpc.NodeRef
}

func (f *follower) Apply(context.Context, fsm.Command) (*fsm.Result, error) {
	return nil, httpapi.ErrNotLeader
}

func (f *follower) SetDataset(context.Context, string, fsm.RequestID, fsm.DatasetParams, []string, []fsm.Chunk) (*fsm.Result, error) {
	return nil, httpapi.ErrNotLeader
}

func (f *follower) ReadBarrier(context.Context) error { return httpapi.ErrNotLeader }

func (f *follower) Leader() (rpc.NodeRef, bool) { return f.leader, true }

// TestRedirect checks that the client skips an address that refuses
// connections, follows a follower's redirect to the leader and then goes
// to the leader directly.
func TestRedirect(t *testing.T) {
	leader := apitest.NewLocal()
	leader.ID = "leader"
	var leaderHits, followerHits counter
	startServer(t, leader, leaderHits.wrap)
	fb := &follower{Local: apitest.NewLocal(), leader: rpc.NodeRef{ID: "leader", APIAddr: leader.API}}
	fb.ID = "follower"
	fts := startServer(t, fb, followerHits.wrap)

	c := newClient(t, client.WithAddrs(deadAddr(t), fts.URL), client.WithoutSession()) // counts requests
	ok, err := c.RequestSaveModel("trainer-0", time.Minute)
	if err != nil || !ok {
		t.Fatalf("RequestSaveModel through a follower: %v, %v; want granted", ok, err)
	}
	if followerHits.total() != 1 || leaderHits.total() != 1 {
		t.Fatalf("follower served %v, leader %v; want one request each", followerHits.String(), leaderHits.String())
	}
	if holder, _, ok := leader.FSM().SaveModelHolder(fsm.DefaultJob); !ok || holder != "trainer-0" {
		t.Fatalf("leader's save-model holder %q, %v; want trainer-0", holder, ok)
	}
	// The client remembers the leader: no more redirects.
	for range 3 {
		if ok, err := c.RequestSaveModel("trainer-0", time.Minute); err != nil || !ok {
			t.Fatalf("RequestSaveModel: %v, %v", ok, err)
		}
	}
	st, err := c.Status()
	if err != nil {
		t.Fatal(err)
	}
	if st.NodeID != "leader" {
		t.Fatalf("status answered by %q, want the leader", st.NodeID)
	}
	if followerHits.total() != 1 || leaderHits.total() != 5 {
		t.Fatalf("follower served %v, leader %v; want 1 and 5 requests", followerHits.String(), leaderHits.String())
	}
}

// TestRedirectLoop checks that a redirect loop ends when the retry budget
// is spent.
func TestRedirectLoop(t *testing.T) {
	a := &follower{Local: apitest.NewLocal()}
	a.ID = "a"
	b := &follower{Local: apitest.NewLocal()}
	b.ID = "b"
	// Each names the other as the leader: a stale registry during an
	// election can do that for a moment.
	ats := httptest.NewUnstartedServer(nil)
	bts := httptest.NewUnstartedServer(nil)
	a.leader = rpc.NodeRef{ID: "b", APIAddr: bts.Listener.Addr().String()}
	b.leader = rpc.NodeRef{ID: "a", APIAddr: ats.Listener.Addr().String()}
	ats.Config.Handler = httpapi.NewHandler(a, httpapi.Config{}, testLogger(t, "a"))
	bts.Config.Handler = httpapi.NewHandler(b, httpapi.Config{}, testLogger(t, "b"))
	ats.Start()
	t.Cleanup(ats.Close)
	bts.Start()
	t.Cleanup(bts.Close)
	c := newClient(t, client.WithAddr(ats.URL), client.WithRetry(300*time.Millisecond))
	_, err := c.RequestSaveModel("t", time.Minute)
	if err == nil || !strings.Contains(err.Error(), "redirects") {
		t.Fatalf("RequestSaveModel in a redirect loop: %v, want a redirect error", err)
	}
}

// faultyProxy forwards requests to h, but answers the first request to
// path with 503 unknown_outcome after h has applied it. It records the
// request ids of path and the answer h gave the first time.
type faultyProxy struct {
	h    http.Handler
	path string
	cut  bool // cut the connection instead of answering 503

	mu    sync.Mutex
	ids   []string
	first []byte
}

func (p *faultyProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != p.path {
		p.h.ServeHTTP(w, r)
		return
	}
	p.mu.Lock()
	p.ids = append(p.ids, r.Header.Get(rpc.HeaderRequestID))
	n := len(p.ids)
	p.mu.Unlock()
	if n > 1 {
		p.h.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	p.h.ServeHTTP(rec, r)
	p.mu.Lock()
	p.first = rec.Body.Bytes()
	p.mu.Unlock()
	if p.cut {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(http.StatusServiceUnavailable)
	json.NewEncoder(w).Encode(rpc.Error{Code: rpc.CodeUnknownOutcome, Message: "injected"})
}

// retried decodes into first the answer the first request to the path
// got, failing the test unless the path was asked exactly twice, under
// one request id.
func (p *faultyProxy) retried(t *testing.T, first any) {
	t.Helper()
	p.mu.Lock()
	ids, body := slices.Clone(p.ids), p.first
	p.mu.Unlock()
	if len(ids) != 2 || ids[0] == "" || ids[0] != ids[1] {
		t.Fatalf("request ids %q, want two equal ids", ids)
	}
	if err := json.Unmarshal(body, first); err != nil {
		t.Fatalf("first answer %q: %v", body, err)
	}
}

// TestRetrySameRequestID checks that a write whose outcome was unknown is
// retried with the same request id, so the cluster applies it once: the
// retried GetTask returns the task the first attempt leased.
func TestRetrySameRequestID(t *testing.T) {
	for _, cut := range []bool{false, true} {
		name := "unknown_outcome"
		if cut {
			name = "connection_cut"
		}
		t.Run(name, func(t *testing.T) {
			path := writeRecords(t, 50, 4)
			local := apitest.NewLocal()
			proxy := &faultyProxy{path: rpc.PathTaskGet, cut: cut}
			ts := startServer(t, local, func(h http.Handler) http.Handler { proxy.h = h; return proxy })
			c := newClient(t, client.WithAddr(ts.URL))
			if err := c.SetDataset([]string{path}); err != nil {
				t.Fatal(err)
			}
			task, err := c.GetTask(0)
			if err != nil {
				t.Fatal(err)
			}
			var first rpc.GetTaskResponse
			proxy.retried(t, &first)
			if task.Meta != first.Task.Meta || len(task.Chunks) != len(first.Task.Chunks) {
				t.Fatalf("retry returned %+v, the first attempt leased %+v", task.Meta, first.Task.Meta)
			}
			if st := local.FSM().Stats(fsm.DefaultJob); st.Pending != 1 {
				t.Fatalf("%d pending tasks, want 1", st.Pending)
			}
			// A new call gets a new request id and a new task.
			task2, err := c.GetTask(0)
			if err != nil {
				t.Fatal(err)
			}
			if task2.Meta.ID == task.Meta.ID {
				t.Fatalf("second GetTask leased task %d again", task.Meta.ID)
			}
		})
	}
}

// TestRetriedGrantSaysWhatRemains: a save-model request whose answer was
// lost is retried with its request id 20s of cluster time after the
// cluster granted it; the grant the caller gets says what remains of the
// lease then, not the whole blockDur.
func TestRetriedGrantSaysWhatRemains(t *testing.T) {
	local := apitest.NewLocal()
	now := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	local.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	proxy := &faultyProxy{path: rpc.PathSaveModel}
	ts := startServer(t, local, func(h http.Handler) http.Handler {
		proxy.h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(w, r)
			mu.Lock()
			now = now.Add(20 * time.Second) // the retry comes 20s later
			mu.Unlock()
		})
		return proxy
	})
	c := newClient(t, client.WithAddr(ts.URL))
	g, err := c.RequestSaveModelLease("t", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var first rpc.SaveModelResponse
	proxy.retried(t, &first)
	if !first.Granted || time.Duration(first.Lease) != time.Minute {
		t.Fatalf("first answer %+v, want granted for 1m", first)
	}
	if !g.Granted || g.Lease != 40*time.Second {
		t.Fatalf("retried grant %+v, want granted with the 40s that remain", g)
	}
}

// TestRequestIDs checks that every write gets a fresh request id and reads
// get none.
func TestRequestIDs(t *testing.T) {
	var (
		mu  sync.Mutex
		ids = map[string]int{}
		get int
	)
	record := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			if id := r.Header.Get(rpc.HeaderRequestID); id != "" {
				ids[id]++
			} else if r.Method == http.MethodGet {
				get++
			}
			mu.Unlock()
			h.ServeHTTP(w, r)
		})
	}
	ts := startServer(t, apitest.NewLocal(), record)
	c := newClient(t, client.WithAddr(ts.URL), client.WithoutSession()) // counts request ids
	for range 3 {
		if _, err := c.RequestSaveModel("t", time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.StatusStale(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ids) != 3 || get != 1 {
		t.Fatalf("request ids %v and %d reads without one; want 3 distinct ids, 1 read", ids, get)
	}
	for id, n := range ids {
		if n != 1 || !strings.Contains(id, "/") {
			t.Fatalf("request id %q used %d times", id, n)
		}
	}
}

// TestUnreachable checks that a cluster that cannot be reached fails a
// call once the retry budget is spent, with the connection error.
func TestUnreachable(t *testing.T) {
	c := newClient(t, client.WithAddrs(deadAddr(t), deadAddr(t)), client.WithRetry(200*time.Millisecond))
	start := time.Now()
	_, err := c.GetTask(0)
	if err == nil || !strings.Contains(err.Error(), "giving up") {
		t.Fatalf("GetTask on a dead cluster: %v, want a give-up error", err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("gave up after %v, budget was 200ms", el)
	}
}

// TestErrorsAcrossWire checks that the original's errors match the re-exported
// sentinels after crossing the wire, and are not retried.
func TestErrorsAcrossWire(t *testing.T) {
	path := writeRecords(t, 50, 100)
	local := apitest.NewLocal()
	ts := startServer(t, local, nil)
	c := newClient(t, client.WithAddr(ts.URL))
	check := func(what string, err, want error, code string, status int) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Fatalf("%s: %v, want %v", what, err, want)
		}
		var re *rpc.Error
		if !errors.As(err, &re) || re.Code != code || re.Status != status {
			t.Fatalf("%s: %#v, want an *rpc.Error with code %s and status %d", what, err, code, status)
		}
	}

	_, err := c.GetTask(0)
	check("GetTask without a dataset", err, client.ErrNoDataset, "no_dataset", http.StatusConflict)

	zero := 0
	if _, err := c.SetDatasetWithParams([]string{path}, client.DatasetParams{ChunksPerTask: 1000, FailureMax: &zero}); err != nil {
		t.Fatal(err)
	}
	resp, err := c.SetDatasetWithParams([]string{path}, client.DatasetParams{})
	if err != nil || !resp.Ignored {
		t.Fatalf("second SetDataset: %+v, %v; want ignored", resp, err)
	}
	task, err := c.GetTask(0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.GetTask(1)
	check("GetTask of the next pass", err, client.ErrPassAfter, "pass_after", http.StatusConflict)
	_, err = c.GetTask(0)
	check("GetTask with every task leased", err, client.ErrNoMoreAvailable, "no_more_available", http.StatusConflict)
	err = c.TaskFinished(client.TaskMeta{ID: 999, Epoch: 1})
	check("TaskFinished of no task", err, client.ErrUnknownTask, "unknown_task", http.StatusNotFound)
	err = c.RenewLease(client.TaskMeta{ID: task.Meta.ID, Epoch: task.Meta.Epoch + 1})
	check("RenewLease of another epoch", err, client.ErrStaleEpoch, "stale_epoch", http.StatusConflict)
	if err := c.RenewLease(task.Meta); err != nil {
		t.Fatal(err)
	}
	if err := c.TaskFailed(task.Meta); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetTask(0)
	check("GetTask with every task failed", err, client.ErrAllTaskFailed, "all_task_failed", http.StatusConflict)
	_, err = c.RequestSaveModel("", time.Minute)
	check("RequestSaveModel without a trainer", err, client.ErrInvalid, "invalid", http.StatusBadRequest)
}

// TestPassBefore checks ErrPassBefore and a finished task.
func TestPassBefore(t *testing.T) {
	path := writeRecords(t, 10, 100)
	ts := startServer(t, apitest.NewLocal(), nil)
	c := newClient(t, client.WithAddr(ts.URL))
	if _, err := c.SetDatasetWithParams([]string{path}, client.DatasetParams{ChunksPerTask: 1000}); err != nil {
		t.Fatal(err)
	}
	task, err := c.GetTask(0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.TaskFinished(task.Meta); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetTask(0); !errors.Is(err, client.ErrPassBefore) {
		t.Fatalf("GetTask of an ended pass: %v, want ErrPassBefore", err)
	}
}

// TestRequestSaveModel checks that the save-model lease is granted to one
// trainer at a time.
func TestRequestSaveModel(t *testing.T) {
	ts := startServer(t, apitest.NewLocal(), nil)
	c := newClient(t, client.WithAddr(ts.URL))
	for _, tc := range []struct {
		trainer string
		want    bool
	}{{"a", true}, {"b", false}, {"a", true}, {"b", false}} {
		got, err := c.RequestSaveModel(tc.trainer, time.Hour)
		if err != nil || got != tc.want {
			t.Fatalf("RequestSaveModel(%q): %v, %v; want %v", tc.trainer, got, err, tc.want)
		}
	}
}

// TestNewClientOptions checks the options' validation.
func TestNewClientOptions(t *testing.T) {
	for _, opts := range [][]client.Option{
		nil,
		{client.WithAddr("")},
		{client.WithAddr("ftp://x:1")},
		{client.WithAddr("x:1"), client.WithBuffer(-1)},
		{client.WithAddr("x:1"), client.WithRetry(-time.Second)},
		{client.WithAddr("x:1"), client.WithHTTPClient(nil)},
	} {
		if c, err := client.NewClient(opts...); err == nil {
			c.Close()
			t.Errorf("NewClient(%d options) succeeded, want an error", len(opts))
		}
	}
	c, err := client.NewClient(client.WithAddrs("a:1", "http://b:2/", "https://c:3"), client.WithHTTPClient(&http.Client{}), client.WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := c.GetTask(0); !errors.Is(err, client.ErrClientClosed) {
		t.Fatalf("GetTask after Close: %v, want ErrClientClosed", err)
	}
}

// TestConcurrentRetriesOfASharedClient: many goroutines share one Client,
// and the first answer to each of their writes is lost after the write was
// applied. Every retry must still be recognised, however many newer writes
// the Client made in between: each goroutine gets the task its first
// attempt leased, and no task is leased twice.
func TestConcurrentRetriesOfASharedClient(t *testing.T) {
	const writers = 3 * fsm.DedupPerClient
	path := writeRecords(t, 200, 1)
	local := apitest.NewLocal()
	var (
		mu      sync.Mutex
		seen    = map[string]bool{}
		firsts  int
		release = make(chan struct{})
	)
	lose := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := r.Header.Get(rpc.HeaderRequestID)
			mu.Lock()
			first := r.URL.Path == rpc.PathTaskGet && !seen[id]
			seen[id] = true
			if first {
				firsts++
				if firsts == writers {
					close(release)
				}
			}
			mu.Unlock()
			if !first {
				h.ServeHTTP(w, r)
				return
			}
			h.ServeHTTP(httptest.NewRecorder(), r) // applied, answer lost
			// Hold every answer until all first attempts are applied, so
			// that each retry comes after every other write.
			select {
			case <-release:
			case <-time.After(30 * time.Second):
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			json.NewEncoder(w).Encode(rpc.Error{Code: rpc.CodeUnknownOutcome, Message: "injected"})
		})
	}
	ts := startServer(t, local, lose)
	c := newClient(t, client.WithAddr(ts.URL))
	if _, err := c.SetDatasetWithParams([]string{path}, client.DatasetParams{ChunksPerTask: 1}); err != nil {
		t.Fatal(err)
	}
	tasks := make([]client.Task, writers)
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tasks[i], errs[i] = c.GetTask(0)
		}()
	}
	wg.Wait()
	leased := map[int]bool{}
	for i := range writers {
		if errs[i] != nil {
			t.Fatalf("writer %d: %v", i, errs[i])
		}
		if leased[tasks[i].Meta.ID] {
			t.Fatalf("task %d returned to two writers", tasks[i].Meta.ID)
		}
		leased[tasks[i].Meta.ID] = true
	}
	if st := local.FSM().Stats(fsm.DefaultJob); st.Pending != writers {
		t.Fatalf("%d tasks leased, want %d: a retry was applied twice", st.Pending, writers)
	}
}

// TestAbandonsAnUnresponsiveLeader: the node the client is talking to
// holds the request without answering, as a paused leader does, while
// another node leads. The client asks the others who leads, abandons the
// attempt and completes the call there, well inside a retry budget that a
// full attempt timeout would exhaust.
func TestAbandonsAnUnresponsiveLeader(t *testing.T) {
	hold := make(chan struct{})
	paused := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hold:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(hold); paused.Close() })
	leader := startServer(t, apitest.NewLocal(), nil)
	c := newClient(t, client.WithAddrs(paused.URL, leader.URL), client.WithRetry(4500*time.Millisecond))
	ok, err := c.RequestSaveModel("t", time.Minute)
	if err != nil || !ok {
		t.Fatalf("RequestSaveModel: %v, %v; want it granted by the other node", ok, err)
	}
}

// TestSlowLeaderUnderAnotherAddressIsKept: the client knows the leader as
// localhost:P while the cluster advertises 127.0.0.1:P. A write that takes
// longer than the probe delay must not be abandoned: the leader itself
// still answers that it leads.
func TestSlowLeaderUnderAnotherAddressIsKept(t *testing.T) {
	local := apitest.NewLocal()
	var attempts atomic.Int32
	slow := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == rpc.PathSaveModel {
				attempts.Add(1)
				time.Sleep(1500 * time.Millisecond)
			}
			h.ServeHTTP(w, r)
		})
	}
	leader := startServer(t, local, slow)
	_, port, _ := net.SplitHostPort(local.API)
	follower := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(rpc.StatusResponse{NodeID: "f", State: "Follower", Ready: true,
			Leader: rpc.NodeRef{ID: local.ID, APIAddr: local.API}})
	}))
	defer follower.Close()
	_ = leader
	c := newClient(t, client.WithAddrs("localhost:"+port, follower.URL))
	if ok, err := c.RequestSaveModel("t", time.Minute); err != nil || !ok {
		t.Fatalf("RequestSaveModel: %v, %v", ok, err)
	}
	if n := attempts.Load(); n != 1 {
		t.Fatalf("the slow leader got %d attempts, want 1", n)
	}
}

// TestRefusedNodeIsNamedUnreachable: a node that refuses connections (a
// killed leader) is named in the header of the next attempts, so that a
// follower that still believes it leads waits for the next leader instead
// of redirecting there.
func TestRefusedNodeIsNamedUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close() // nothing listens there any more: connections are refused
	local := apitest.NewLocal()
	var named atomic.Value
	ts := startServer(t, local, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if v := r.Header.Get(rpc.HeaderUnreachable); v != "" {
				named.Store(v)
			}
			h.ServeHTTP(w, r)
		})
	})
	c := newClient(t, client.WithAddrs(dead, ts.URL))
	if _, err := c.RequestSaveModel("t", time.Minute); err != nil {
		t.Fatal(err)
	}
	if got, _ := named.Load().(string); got != dead {
		t.Fatalf("the live node was told %q is unreachable, want %q", got, dead)
	}
}

// TestHeldAttemptIsNotMovedToADeadLeader: the leader was killed (its port
// refuses connections) and the followers, one of which holds the write
// until the next leader serves, still name it as the leader in their
// status, as followers do until their election timeout. The client's
// probes of who leads must not abandon the held attempt for the dead
// node: each such move would send the write again, and leave it off the
// followers, in a backoff, when the next leader is elected.
func TestHeldAttemptIsNotMovedToADeadLeader(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close() // the killed leader: connections are refused

	release := make(chan struct{})
	var writes, probes atomic.Int32
	var unreachable atomic.Value
	follower := func(id string) *httptest.Server {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			if r.URL.Path == rpc.PathStatus {
				probes.Add(1)
				json.NewEncoder(w).Encode(rpc.StatusResponse{NodeID: id, State: "Follower", Ready: true,
					Leader: rpc.NodeRef{ID: "killed", APIAddr: dead}})
				return
			}
			writes.Add(1)
			unreachable.Store(r.Header.Get(rpc.HeaderUnreachable))
			select { // held until the next leader serves
			case <-release:
			case <-r.Context().Done():
				return
			}
			w.Write([]byte("{}"))
		}))
		t.Cleanup(ts.Close)
		return ts
	}
	f1, f2 := follower("f1"), follower("f2")

	c := newClient(t, client.WithAddrs(dead, f1.URL, f2.URL))
	done := make(chan error, 1)
	go func() { done <- c.Call(context.Background(), rpc.PathSaveModel, map[string]any{}, nil) }()
	// Three probe rounds of both followers: the held attempt had every
	// chance to be moved.
	waitFor(t, "three probe rounds", 30*time.Second, func() bool { return probes.Load() >= 6 })
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := writes.Load(); n != 1 {
		t.Fatalf("the followers got the write %d times, want once: the held attempt was moved to the dead leader", n)
	}
	if got, _ := unreachable.Load().(string); got != dead {
		t.Fatalf("the follower was told %q is unreachable, want %q", got, dead)
	}
}
