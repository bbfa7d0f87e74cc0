package client_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
	"github.com/raftmaster/raftmaster/rpc"
)

// localOnly are the exported methods of *client.Client that never talk
// to the cluster, and so need no context.
var localOnly = map[string]bool{
	"Close":    true,
	"Session":  true,
	"Progress": true,
}

// joinForms are the allgather joins, whose positional settings
// JoinContext takes in a JoinOptions.
var joinForms = map[string]bool{"Join": true, "JoinWithTimeout": true, "JoinWithDeadline": true}

// TestEveryClusterCallTakesAContext keeps the convention of database/sql:
// every exported method that talks to the cluster either takes a
// context.Context first, or has a form named with the suffix Context that
// takes one first, then the same parameters, and returns the same
// results. The allgather joins share JoinContext, which takes their
// settings in a JoinOptions.
func TestEveryClusterCallTakesAContext(t *testing.T) {
	ctxType := reflect.TypeFor[context.Context]()
	typ := reflect.TypeFor[*client.Client]()
	takesCtx := func(m reflect.Method) bool { return m.Type.NumIn() > 1 && m.Type.In(1) == ctxType }
	ins := func(m reflect.Method, from int) []reflect.Type {
		var out []reflect.Type
		for i := from; i < m.Type.NumIn(); i++ {
			out = append(out, m.Type.In(i))
		}
		return out
	}
	outs := func(m reflect.Method) []reflect.Type {
		var out []reflect.Type
		for i := range m.Type.NumOut() {
			out = append(out, m.Type.Out(i))
		}
		return out
	}
	for i := range typ.NumMethod() {
		m := typ.Method(i)
		switch {
		case takesCtx(m) || localOnly[m.Name]:
			continue
		case strings.HasSuffix(m.Name, "Context"):
			t.Errorf("%s does not take a context.Context as its first parameter", m.Name)
			continue
		}
		name := m.Name + "Context"
		if joinForms[m.Name] {
			name = "JoinContext"
		}
		cm, ok := typ.MethodByName(name)
		if !ok {
			t.Errorf("%s talks to the cluster and has no %s(ctx, ...) form (or list it in localOnly if it does not)", m.Name, name)
			continue
		}
		if !takesCtx(cm) {
			t.Errorf("%s does not take a context.Context as its first parameter", name)
			continue
		}
		if !reflect.DeepEqual(outs(m), outs(cm)) {
			t.Errorf("%s returns %v, %s %v", m.Name, outs(m), name, outs(cm))
		}
		want, got := ins(m, 1), ins(cm, 2)
		if joinForms[m.Name] {
			// The member and its data, then the options.
			want = append(want[:4:4], reflect.TypeFor[client.JoinOptions]())
		}
		if !reflect.DeepEqual(want, got) {
			t.Errorf("%s takes %v after its context, want %v as %s", name, got, want, m.Name)
		}
	}
	for name := range localOnly {
		if _, ok := typ.MethodByName(name); !ok {
			t.Errorf("localOnly names %s, which *client.Client does not have", name)
		}
	}
}

// leaderless is a node that knows no leader, as during an election: it
// holds every request that needs one for the server's leader wait, then
// answers 503 no_leader, which the client retries.
type leaderless struct{ *follower }

func (leaderless) Leader() (rpc.NodeRef, bool) { return rpc.NodeRef{}, false }

func (leaderless) Ready() bool { return false }

// contextCall is a call of one of the client's Context forms.
type contextCall struct {
	name string
	path string // the path its request goes to
	call func(ctx context.Context, c *client.Client) error
}

// contextCalls is a representative set: reads, writes, task and
// allgather calls.
var contextCalls = []contextCall{
	{"StatusContext", rpc.PathStatus, func(ctx context.Context, c *client.Client) error {
		_, err := c.StatusContext(ctx)
		return err
	}},
	{"LimitsContext", rpc.PathLimits, func(ctx context.Context, c *client.Client) error {
		_, err := c.LimitsContext(ctx)
		return err
	}},
	{"SetDatasetContext", rpc.PathDataset, func(ctx context.Context, c *client.Client) error {
		return c.SetDatasetContext(ctx, []string{"/data/*.recordio"})
	}},
	{"GetTaskContext", rpc.PathTaskGet, func(ctx context.Context, c *client.Client) error {
		_, err := c.GetTaskContext(ctx, 0)
		return err
	}},
	{"TaskFinishedContext", rpc.PathTaskFinished, func(ctx context.Context, c *client.Client) error {
		return c.TaskFinishedContext(ctx, client.TaskMeta{ID: 1, Epoch: 1})
	}},
	{"RequestSaveModelContext", rpc.PathSaveModel, func(ctx context.Context, c *client.Client) error {
		_, err := c.RequestSaveModelContext(ctx, "trainer-0", time.Minute)
		return err
	}},
	{"CreateJobContext", rpc.JobRoute(rpc.PathJobCreate, "j"), func(ctx context.Context, c *client.Client) error {
		_, err := c.CreateJobContext(ctx, "j")
		return err
	}},
	{"AddMemberContext", rpc.PathClusterAddMember, func(ctx context.Context, c *client.Client) error {
		return c.AddMemberContext(ctx, rpc.AddMemberRequest{ID: "n4", RaftAddr: "127.0.0.1:1", APIAddr: "127.0.0.1:2"})
	}},
	{"JoinContext", rpc.PathAllgatherJoin, func(ctx context.Context, c *client.Client) error {
		_, err := c.JoinContext(ctx, "g", uuid.New(), 2, nil, client.JoinOptions{})
		return err
	}},
	{"LeaveContext", rpc.PathAllgatherLeave, func(ctx context.Context, c *client.Client) error {
		return c.LeaveContext(ctx, "g", uuid.New())
	}},
}

// leaderlessClient serves a node without a leader and returns a client of
// it, whose retry budget outlasts any test, and the node's request count.
func leaderlessClient(t *testing.T) (*client.Client, *counter) {
	t.Helper()
	var hits counter
	// A short wait for a leader: a handler that has not read a write's
	// body does not see its client go, and would wait out the default
	// 3 s before the test server can close.
	ts := startServerWith(t, leaderless{&follower{Local: apitest.NewLocal()}}, httpapi.Config{LeaderWait: 100 * time.Millisecond}, hits.wrap)
	return newClient(t, client.WithAddr(ts.URL), client.WithRetry(time.Hour)), &hits
}

// within runs call in a goroutine, then meanwhile (when not nil), and
// returns call's error, failing the test when call has not returned within
// a minute: a call that waited for its retry budget (an hour) would not.
func within(t *testing.T, call func() error, meanwhile func()) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- call() }()
	if meanwhile != nil {
		meanwhile()
	}
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatal("the call did not return")
		return nil
	}
}

// TestContextCancelEndsACallWithoutALeader checks that cancelling the
// context of a call that is waiting for a leader, in an attempt or between
// two, ends it with context.Canceled, long before its retry budget.
func TestContextCancelEndsACallWithoutALeader(t *testing.T) {
	for _, cc := range contextCalls {
		t.Run(cc.name, func(t *testing.T) {
			t.Parallel()
			c, hits := leaderlessClient(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			err := within(t, func() error { return cc.call(ctx, c) }, func() {
				waitFor(t, "the first request", 30*time.Second, func() bool { return hits.get(cc.path) > 0 })
				cancel()
			})
			if !errors.Is(err, context.Canceled) || errors.Is(err, client.ErrClientClosed) {
				t.Fatalf("%s cancelled while the cluster has no leader: %v, want context.Canceled", cc.name, err)
			}
		})
	}
}

// TestContextDeadlineBoundsACallWithoutALeader checks that a context's
// deadline ends a call that is waiting for a leader, with
// context.DeadlineExceeded, long before its retry budget.
func TestContextDeadlineBoundsACallWithoutALeader(t *testing.T) {
	for _, cc := range contextCalls {
		t.Run(cc.name, func(t *testing.T) {
			t.Parallel()
			c, _ := leaderlessClient(t)
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			err := within(t, func() error { return cc.call(ctx, c) }, nil)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%s past its deadline while the cluster has no leader: %v, want context.DeadlineExceeded", cc.name, err)
			}
		})
	}
}

// TestCancelledContextSendsNothing checks that a call whose context is
// already done sends no request, and says why.
func TestCancelledContextSendsNothing(t *testing.T) {
	var hits counter
	ts := startServer(t, apitest.NewLocal(), hits.wrap)
	c := newClient(t, client.WithAddr(ts.URL))
	cause := errors.New("the trainer is shutting down")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	for _, cc := range contextCalls {
		if err := cc.call(ctx, c); !errors.Is(err, context.Canceled) || !errors.Is(err, cause) {
			t.Errorf("%s with a cancelled context: %v, want context.Canceled and its cause", cc.name, err)
		}
	}
	if n := hits.total(); n != 0 {
		t.Fatalf("calls with a cancelled context sent %d requests: %v", n, hits.String())
	}
}

// TestContextCancelEndsRetriesOfAnUnreachableCluster checks that cancelling
// a call to a cluster whose nodes refuse every connection stops its
// retries.
func TestContextCancelEndsRetriesOfAnUnreachableCluster(t *testing.T) {
	var dials atomic.Int32
	d := &net.Dialer{}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return d.DialContext(ctx, network, addr)
	}}}
	c := newClient(t, client.WithAddrs(deadAddr(t), deadAddr(t)), client.WithHTTPClient(hc),
		client.WithRetry(time.Hour), client.WithFirstContactTimeout(0))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := within(t, func() error {
		_, err := c.GetTaskContext(ctx, 0)
		return err
	}, func() {
		waitFor(t, "a few attempts", 30*time.Second, func() bool { return dials.Load() >= 3 })
		cancel()
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("GetTaskContext cancelled while no node answers: %v, want context.Canceled", err)
	}
}

// TestJoinContextEndsTheWatch checks that the context of JoinContext
// bounds the watch: the Watcher receives its error, and the member stays
// in the group, which completes for the others.
func TestJoinContextEndsTheWatch(t *testing.T) {
	ts := startServer(t, apitest.NewLocal(), nil)
	c := newClient(t, client.WithAddr(ts.URL))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := c.JoinContext(ctx, "g", uuid.New(), 2, "first", client.JoinOptions{
		OnReady:   func() { t.Error("OnReady called on a cancelled watch") },
		OnTimeout: func(err error) { t.Errorf("OnTimeout called on a cancelled watch: %v", err) },
	})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if r := receive(t, w); !errors.Is(r.Err, context.Canceled) {
		t.Fatalf("watcher of a cancelled join got %+v, want context.Canceled", r)
	}
	var readies atomic.Int32
	w2, err := c.JoinContext(context.Background(), "g", uuid.New(), 2, "second", client.JoinOptions{OnReady: func() { readies.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	r := receive(t, w2)
	if r.Err != nil || len(r.Data) != 2 || r.Data[0] != "first" || r.Rank != 1 {
		t.Fatalf("second member got %+v, want both members' data", r)
	}
	if readies.Load() != 1 {
		t.Fatalf("OnReady called %d times, want once", readies.Load())
	}
}

// TestJoinOptionsFailOnTimeout checks that JoinOptions.FailOnTimeout
// makes Timeout a hard deadline, as JoinWithDeadline does.
func TestJoinOptionsFailOnTimeout(t *testing.T) {
	local := apitest.NewLocal()
	ts := startServer(t, local, nil)
	c := newClient(t, client.WithAddr(ts.URL))
	tickUntilDone(t, local)
	var timeouts atomic.Int32
	w, err := c.JoinContext(context.Background(), "lonely", uuid.New(), 2, "x", client.JoinOptions{
		OnTimeout:     func(error) { timeouts.Add(1) },
		Timeout:       100 * time.Millisecond,
		FailOnTimeout: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	// Without FailOnTimeout the group would stay open, and no result come.
	if r := receive(t, w); r.Err != client.ErrAllGatherTimeoutExceeded || timeouts.Load() != 1 {
		t.Fatalf("result %+v after %d timeouts, want ErrAllGatherTimeoutExceeded after one", r, timeouts.Load())
	}
}

// TestNextRecordContext checks that NextRecordContext stops waiting when
// its context ends, and that the pass goes on for the next call.
func TestNextRecordContext(t *testing.T) {
	ts := startServer(t, apitest.NewLocal(), nil)
	c := newClient(t, client.WithAddr(ts.URL))
	c.StartGetRecords(0) // no dataset yet: the reader waits for one
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := within(t, func() error {
		_, err := c.NextRecordContext(ctx)
		return err
	}, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("NextRecordContext past its deadline: %v, want context.DeadlineExceeded", err)
	}
	path := writeRecords(t, 5, 100)
	if err := c.SetDataset([]string{path}); err != nil {
		t.Fatal(err)
	}
	got := 0
	err = within(t, func() error {
		for {
			_, err := c.NextRecordContext(context.Background())
			if err != nil {
				return err
			}
			got++
		}
	}, nil)
	if !errors.Is(err, client.ErrNoMoreAvailable) && !errors.Is(err, client.ErrPassBefore) || got != 5 {
		t.Fatalf("after a cancelled wait: %d records, then %v; want 5, then the end of the pass", got, err)
	}
}

// TestStartGetRecordsContext checks that the end of the context of
// StartGetRecordsContext stops the reader, which hands its task back, and
// makes NextRecord return the context's error.
func TestStartGetRecordsContext(t *testing.T) {
	path := writeRecords(t, 5, 100) // one chunk: one task
	var hits counter
	ts := startServer(t, apitest.NewLocal(), hits.wrap)
	c := newClient(t, client.WithAddr(ts.URL))
	failureMax := 3 // a task handed back counts as a failure
	if _, err := c.SetDatasetWithParams([]string{path}, client.DatasetParams{FailureMax: &failureMax}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.StartGetRecordsContext(ctx, 0)
	// The reader holds the task once a record has come, and waits to
	// deliver the next.
	if _, err := c.NextRecord(); err != nil {
		t.Fatal(err)
	}
	cancel()
	for range 2 {
		if _, err := c.NextRecord(); !errors.Is(err, context.Canceled) {
			t.Fatalf("NextRecord after the pass's context ended: %v, want context.Canceled", err)
		}
	}
	waitFor(t, "the task handed back", 30*time.Second, func() bool { return hits.get(rpc.PathTaskFailed) > 0 })
	other := newClient(t, client.WithAddr(ts.URL))
	if task, err := other.GetTask(0); err != nil || len(task.Chunks) != 1 {
		t.Fatalf("the task after the reader stopped: %+v, %v; want it leased again", task, err)
	}
}
