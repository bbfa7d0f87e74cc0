package integration

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/internal/proccluster"
	"github.com/raftmaster/raftmaster/rpc"
)

// TestAllgatherAcrossNodes: 16 members, each talking to a different node,
// all receive the same data in the same order.
func TestAllgatherAcrossNodes(t *testing.T) {
	needsProcesses(t)
	c := proccluster.Start(t, proccluster.Options{})
	c.WaitReady()
	const members = 16
	results := make([][]any, members)
	var readies sync.WaitGroup
	var wg sync.WaitGroup
	for i := range members {
		cl := newClient(t, client.WithAddr(c.Procs[i%len(c.Procs)].APIAddr))
		wg.Add(1)
		readies.Add(1)
		go func() {
			defer wg.Done()
			w, err := cl.Join("rendezvous", uuid.New(), members, map[string]any{"rank_hint": i, "host": fmt.Sprintf("10.0.0.%d", i)},
				readies.Done, func(err error) { t.Errorf("member %d: timeout callback: %v", i, err) })
			if err != nil {
				t.Errorf("member %d: join: %v", i, err)
				readies.Done()
				return
			}
			select {
			case res := <-w.C:
				if res.Err != nil {
					t.Errorf("member %d: %v", i, res.Err)
					return
				}
				results[i] = res.Data
			case <-time.After(2 * time.Minute):
				t.Errorf("member %d: no result", i)
			}
		}()
	}
	wg.Wait()
	readies.Wait()
	if t.Failed() {
		return
	}
	for i := 1; i < members; i++ {
		if !reflect.DeepEqual(results[i], results[0]) {
			t.Fatalf("member %d got %v, member 0 got %v", i, results[i], results[0])
		}
	}
	if len(results[0]) != members {
		t.Fatalf("got %d entries, want %d", len(results[0]), members)
	}
	hints := map[float64]bool{}
	for _, d := range results[0] {
		hints[d.(map[string]any)["rank_hint"].(float64)] = true
	}
	if len(hints) != members {
		t.Fatalf("data of %d distinct members, want %d: %v", len(hints), members, results[0])
	}
	c.Converged(30 * time.Second)
}

// watchGate is an HTTP proxy in front of one node that holds every
// allgather watch request until Release: a member whose polls are late,
// as when its process is descheduled or its network is slow. Everything
// else passes through.
type watchGate struct {
	addr    string
	release chan struct{}
	held    atomic.Int32
}

func newWatchGate(t *testing.T, upstream string) *watchGate {
	t.Helper()
	g := &watchGate{release: make(chan struct{})}
	target := &url.URL{Scheme: "http", Host: upstream}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == rpc.PathAllgatherWatch {
			g.held.Add(1)
			select {
			case <-g.release:
			case <-r.Context().Done():
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(g.Release)
	g.addr = srv.Listener.Addr().String()
	return g
}

// Release lets every held watch, and every later one, through.
func (g *watchGate) Release() {
	select {
	case <-g.release:
	default:
		close(g.release)
	}
}

// receiveWithin returns the Watcher's result, failing the test after a
// minute.
func receiveWithin(t *testing.T, what string, w client.Watcher) client.Result {
	t.Helper()
	select {
	case res := <-w.C:
		return res
	case <-time.After(time.Minute):
		t.Fatalf("%s: no result", what)
	}
	return client.Result{}
}

// TestAllgatherHardTimeoutStaysFinal: every member of a hard-deadline
// group that times out gets its timeout callback and
// ErrAllGatherTimeoutExceeded, even one whose poll arrives only after
// other members started the group afresh: the answer for its join does
// not turn into "closed".
func TestAllgatherHardTimeoutStaysFinal(t *testing.T) {
	needsProcesses(t)
	c := proccluster.Start(t, proccluster.Options{})
	c.WaitReady()
	waitProtocol2(t, c)
	gate := newWatchGate(t, c.Leader().APIAddr)
	var lateTimeouts atomic.Int32
	late := newClient(t, client.WithAddr(gate.addr))
	wLate, err := late.JoinWithDeadline("strict", uuid.New(), 3, "late", nil,
		func(err error) {
			if err != client.ErrAllGatherTimeoutExceeded {
				t.Errorf("late member's timeout callback with %v", err)
			}
			lateTimeouts.Add(1)
		}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	direct := newClient(t, client.WithAddrs(c.APIAddrs()...))
	b := uuid.New()
	var timeouts atomic.Int32
	wB, err := direct.JoinWithDeadline("strict", b, 3, "b", nil, func(error) { timeouts.Add(1) }, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if res := receiveWithin(t, "member b", wB); res.Err != client.ErrAllGatherTimeoutExceeded || timeouts.Load() != 1 {
		t.Fatalf("member b: %v, timeout callback called %d times; want ErrAllGatherTimeoutExceeded once", res.Err, timeouts.Load())
	}
	c.WaitFor("the late member's watch to be held", time.Minute, func() bool { return gate.held.Load() > 0 })

	// The group starts afresh: member b joins again with a newcomer, and
	// the new round completes.
	newcomer := newClient(t, client.WithAddrs(c.APIAddrs()...))
	wB2, err := direct.JoinWithDeadline("strict", b, 2, "b2", nil, nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	wC, err := newcomer.JoinWithDeadline("strict", uuid.New(), 2, "c", nil, nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for name, w := range map[string]client.Watcher{"b's new join": wB2, "the newcomer": wC} {
		if res := receiveWithin(t, name, w); res.Err != nil || len(res.Data) != 2 {
			t.Fatalf("%s in the new round: %+v", name, res)
		}
	}

	gate.Release()
	res := receiveWithin(t, "the late member", wLate)
	if res.Err != client.ErrAllGatherTimeoutExceeded || lateTimeouts.Load() != 1 {
		t.Fatalf("the late member got %v, its timeout callback called %d times; want ErrAllGatherTimeoutExceeded and one call",
			res.Err, lateTimeouts.Load())
	}
}

// TestAllgatherCompleteKeptForLatePoller: a member whose poll arrives
// after the group's timeout has passed again since completion still gets
// the completed data: a complete group's result is kept for the group's
// timeout or fsm.ResultRetention, the longer.
func TestAllgatherCompleteKeptForLatePoller(t *testing.T) {
	needsProcesses(t)
	c := proccluster.Start(t, proccluster.Options{})
	c.WaitReady()
	waitProtocol2(t, c)
	gate := newWatchGate(t, c.Leader().APIAddr)
	const groupTimeout = time.Second
	var readies atomic.Int32
	late := newClient(t, client.WithAddr(gate.addr))
	wLate, err := late.JoinWithTimeout("kept", uuid.New(), 2, "late", func() { readies.Add(1) }, nil, groupTimeout)
	if err != nil {
		t.Fatal(err)
	}
	direct := newClient(t, client.WithAddrs(c.APIAddrs()...))
	wB, err := direct.JoinWithTimeout("kept", uuid.New(), 2, "b", nil, nil, groupTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if res := receiveWithin(t, "member b", wB); res.Err != nil || len(res.Data) != 2 {
		t.Fatalf("member b: %+v", res)
	}
	// An open group keeps the leader ticking, so that FSM time goes on
	// whether the complete group is still kept or not.
	if _, err := direct.JoinWithTimeout("keeps-time", uuid.New(), 2, "x", nil, nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	st, err := direct.Status()
	if err != nil {
		t.Fatal(err)
	}
	completedBy := st.FSM.Clock
	c.WaitFor("the group's timeout to pass twice since completion, in FSM time", time.Minute, func() bool {
		st, err := direct.Status()
		return err == nil && st.FSM.Clock.Sub(completedBy) > 2*groupTimeout+time.Second
	})
	if gate.held.Load() == 0 {
		t.Fatalf("the late member's watch was not held")
	}
	gate.Release()
	res := receiveWithin(t, "the late member", wLate)
	if res.Err != nil || !reflect.DeepEqual(res.Data, []any{"late", "b"}) || res.Rank != 0 || readies.Load() != 1 {
		t.Fatalf("the late member got %+v (ready called %d times); want the data [late b] at rank 0", res, readies.Load())
	}
}
