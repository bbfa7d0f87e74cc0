package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
)

// receive returns the Result of w, failing the test after a generous
// deadline.
func receive(t *testing.T, w client.Watcher) client.Result {
	t.Helper()
	select {
	case r := <-w.C:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("no allgather result")
		return client.Result{}
	}
}

// TestAllgather checks that members joining concurrently, each through its
// own client, all receive the same data in the same order, and that ready
// is called once for each.
func TestAllgather(t *testing.T) {
	const n = 8
	ts := startServer(t, apitest.NewLocal(), nil)
	var (
		wg      sync.WaitGroup
		readies [n]atomic.Int32
		results [n]client.Result
	)
	for i := range n {
		c := newClient(t, client.WithAddr(ts.URL))
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, err := c.Join("group", uuid.New(), n, map[string]int{"member": i}, func() { readies[i].Add(1) },
				func(err error) { t.Errorf("member %d timed out: %v", i, err) })
			if err != nil {
				t.Error(err)
				return
			}
			results[i] = receive(t, w)
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for i, r := range results {
		if r.Err != nil {
			t.Fatalf("member %d: %v", i, r.Err)
		}
		if readies[i].Load() != 1 {
			t.Errorf("member %d: ready called %d times", i, readies[i].Load())
		}
		if !reflect.DeepEqual(r.Data, results[0].Data) {
			t.Fatalf("member %d got %v, member 0 got %v", i, r.Data, results[0].Data)
		}
		if len(r.Raw) != n {
			t.Fatalf("member %d: %d raw items", i, len(r.Raw))
		}
		// Data[Rank] is the member's own data.
		if m, ok := r.Data[r.Rank].(map[string]any); !ok || m["member"] != float64(i) {
			t.Fatalf("member %d at rank %d finds %v", i, r.Rank, r.Data[r.Rank])
		}
	}
	members := make(map[float64]bool)
	for _, d := range results[0].Data {
		members[d.(map[string]any)["member"].(float64)] = true
	}
	if len(members) != n {
		t.Fatalf("data %v does not hold every member once", results[0].Data)
	}
}

// TestAllgatherRawResults checks that a join with RawResults receives
// exactly the JSON each member sent, in join order, with its rank and no
// Data, while a join without it in the same group still gets Data.
func TestAllgatherRawResults(t *testing.T) {
	ts := startServer(t, apitest.NewLocal(), nil)
	data := []any{
		"trainer-00000",
		`quote " backslash \ and "[,]{,}"`,
		map[string]any{"addr": "10.0.0.2:29500", "nested": []any{1.5, map[string]any{"k": "]"}}, "html": "<&>"},
		nil,
		[]any{true, -3.0, "é\n"},
	}
	n := len(data)
	watchers := make([]client.Watcher, n)
	for i, d := range data {
		// One client per member, joining in turn so that the join order
		// is known; the last member decodes, as by default.
		c := newClient(t, client.WithAddr(ts.URL))
		w, err := c.JoinContext(context.Background(), "g", uuid.New(), n, d, client.JoinOptions{RawResults: i < n-1})
		if err != nil {
			t.Fatal(err)
		}
		watchers[i] = w
	}
	for i, w := range watchers {
		r := receive(t, w)
		if r.Err != nil {
			t.Fatalf("member %d: %v", i, r.Err)
		}
		if r.Rank != i {
			t.Errorf("member %d has rank %d", i, r.Rank)
		}
		if len(r.Raw) != n {
			t.Fatalf("member %d: %d raw items, want %d", i, len(r.Raw), n)
		}
		for j, d := range data {
			sent, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(r.Raw[j], sent) {
				t.Errorf("member %d: raw item %d is %s, member %d sent %s", i, j, r.Raw[j], j, sent)
			}
		}
		if i < n-1 {
			if r.Data != nil {
				t.Errorf("member %d asked for raw results and got Data %v", i, r.Data)
			}
			continue
		}
		if !reflect.DeepEqual(r.Data, data) {
			t.Errorf("member %d, decoding: Data %#v, want %#v", i, r.Data, data)
		}
	}
}

// tickUntilDone ticks the FSM, as the leader's loop would, until the test
// is done.
func tickUntilDone(t *testing.T, local *apitest.Local) {
	ctx, cancel := context.WithCancel(context.Background())
	ticked := make(chan struct{})
	go func() {
		defer close(ticked)
		tk := time.NewTicker(10 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				if _, err := local.Apply(ctx, &fsm.Tick{}); err != nil && ctx.Err() == nil {
					t.Error(err)
				}
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-ticked })
}

// TestAllgatherDeadline checks that a group with a hard deadline that does
// not fill up in time calls timeout and delivers
// ErrAllGatherTimeoutExceeded.
func TestAllgatherDeadline(t *testing.T) {
	local := apitest.NewLocal()
	ts := startServer(t, local, nil)
	c := newClient(t, client.WithAddr(ts.URL))

	tickUntilDone(t, local)

	var (
		timeouts atomic.Int32
		gotErr   atomic.Value
	)
	w, err := c.JoinWithDeadline("lonely", uuid.New(), 2, "x",
		func() { t.Error("ready called on a group that timed out") },
		func(err error) { timeouts.Add(1); gotErr.Store(err) },
		100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	r := receive(t, w)
	if r.Err != client.ErrAllGatherTimeoutExceeded {
		t.Fatalf("result %v, want ErrAllGatherTimeoutExceeded", r.Err)
	}
	if timeouts.Load() != 1 || gotErr.Load() != client.ErrAllGatherTimeoutExceeded {
		t.Fatalf("timeout called %d times with %v", timeouts.Load(), gotErr.Load())
	}
}

// TestAllgatherTimeoutKeepsGroupOpen checks the original's timeout: the
// callback fires once when the group is late, and the group still
// completes when the last member joins.
func TestAllgatherTimeoutKeepsGroupOpen(t *testing.T) {
	local := apitest.NewLocal()
	ts := startServer(t, local, nil)
	c := newClient(t, client.WithAddr(ts.URL))
	tickUntilDone(t, local)

	var timeouts, readies atomic.Int32
	late := make(chan error, 1)
	w, err := c.JoinWithTimeout("late", uuid.New(), 2, "early",
		func() { readies.Add(1) },
		func(err error) { timeouts.Add(1); late <- err },
		100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-late:
		if err != client.ErrAllGatherTimeoutExceeded {
			t.Fatalf("timeout called with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("timeout not called")
	}
	w2, err := c.JoinWithTimeout("late", uuid.New(), 2, "late", nil, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range []client.Watcher{w, w2} {
		r := receive(t, w)
		if r.Err != nil || len(r.Data) != 2 || r.Rank != i {
			t.Fatalf("member %d: %+v, want the complete data", i, r)
		}
	}
	if timeouts.Load() != 1 || readies.Load() != 1 {
		t.Fatalf("timeout called %d times, ready %d times; want once each", timeouts.Load(), readies.Load())
	}
}

// TestAllgatherRejoinAndLeave checks that a re-join with the same id ends
// the earlier watcher with ErrReconnected, and Leave ends the current one
// with ErrClosed and closes the group.
func TestAllgatherRejoinAndLeave(t *testing.T) {
	local := apitest.NewLocal()
	ts := startServer(t, local, nil)
	c := newClient(t, client.WithAddr(ts.URL))
	id := uuid.New()
	w1, err := c.Join("g", id, 2, 1, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	other := newClient(t, client.WithAddr(ts.URL))
	w2, err := other.Join("g", id, 2, 2, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := receive(t, w1); r.Err != client.ErrReconnected {
		t.Fatalf("replaced watcher got %+v, want ErrReconnected", r)
	}
	w3, err := c.Join("g", id, 2, 3, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := receive(t, w2); !errors.Is(r.Err, client.ErrReconnected) {
		t.Fatalf("replaced watcher of another client got %+v, want ErrReconnected", r)
	}
	if err := c.Leave("g", id); err != nil {
		t.Fatal(err)
	}
	if r := receive(t, w3); r.Err != client.ErrClosed {
		t.Fatalf("watcher after Leave got %+v, want ErrClosed", r)
	}
	if gi, ok := local.FSM().Group(fsm.DefaultJob, "g"); ok {
		t.Fatalf("group still there after its last member left: %+v", gi)
	}
}

// TestAllgatherLeaveSeenByPoller checks that a watcher learns from the
// server that its member left through another client.
func TestAllgatherLeaveSeenByPoller(t *testing.T) {
	ts := startServer(t, apitest.NewLocal(), nil)
	c := newClient(t, client.WithAddr(ts.URL))
	admin := newClient(t, client.WithAddr(ts.URL))
	id := uuid.New()
	w, err := c.Join("g", id, 3, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.Leave("g", id); err != nil {
		t.Fatal(err)
	}
	if r := receive(t, w); r.Err != client.ErrClosed {
		t.Fatalf("watcher got %+v, want ErrClosed", r)
	}
}

// TestAllgatherMismatch checks that a join with another numPeers fails at
// once.
func TestAllgatherMismatch(t *testing.T) {
	ts := startServer(t, apitest.NewLocal(), nil)
	c := newClient(t, client.WithAddr(ts.URL))
	if _, err := c.Join("g", uuid.New(), 3, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Join("g", uuid.New(), 4, nil, nil, nil); !errors.Is(err, client.ErrGroupMismatch) {
		t.Fatalf("join with another numPeers: %v, want ErrGroupMismatch", err)
	}
	if _, err := c.Join("g", uuid.New(), 3, make(chan int), nil, nil); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("join with data that is not JSON: %v, want ErrInvalid", err)
	}
}

// TestAllgatherClose checks that Close ends a waiting watcher.
func TestAllgatherClose(t *testing.T) {
	ts := startServer(t, apitest.NewLocal(), nil)
	c, err := client.NewClient(client.WithAddr(ts.URL), client.WithLogger(testLogger(t, "client")))
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.Join("g", uuid.New(), 2, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if r := receive(t, w); r.Err != client.ErrClientClosed {
		t.Fatalf("watcher after Close got %+v, want ErrClientClosed", r)
	}
	if _, err := c.Join("g", uuid.New(), 2, nil, nil, nil); !errors.Is(err, client.ErrClientClosed) {
		t.Fatalf("Join after Close: %v, want ErrClientClosed", err)
	}
}
