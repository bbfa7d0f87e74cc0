package httpapi_test

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/rpc"
)

func watchPath(group string, member uuid.UUID, gen uint64, wait string) string {
	q := url.Values{}
	q.Set(rpc.WatchParamGroup, group)
	q.Set(rpc.WatchParamMember, member.String())
	q.Set(rpc.WatchParamGeneration, fmt.Sprint(gen))
	if wait != "" {
		q.Set(rpc.WatchParamWait, wait)
	}
	return rpc.PathAllgatherWatch + "?" + q.Encode()
}

// watchEnv is an env whose watches signal each time they block.
func watchEnv(t *testing.T) (*env, chan struct{}) {
	waiting := make(chan struct{}, 100)
	e := newEnv(t, testConfig(), nil, func() {
		select {
		case waiting <- struct{}{}:
		default:
		}
	})
	return e, waiting
}

// startWatch runs a watch in the background and returns its response.
func (e *env) startWatch(path string) <-chan response {
	ch := make(chan response, 1)
	go func() {
		req, err := http.NewRequest(http.MethodGet, e.ts.URL+path, nil)
		if err != nil {
			ch <- response{status: -1, body: []byte(err.Error())}
			return
		}
		resp, err := e.client.Do(req)
		if err != nil {
			ch <- response{status: -1, body: []byte(err.Error())}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		ch <- response{status: resp.StatusCode, header: resp.Header, body: b}
	}()
	return ch
}

func (e *env) join(group string, member uuid.UUID, numPeers int, data string) uint64 {
	e.t.Helper()
	var j rpc.JoinResponse
	e.ok(rpc.PathAllgatherJoin, map[string]any{"group": group, "member": member, "num_peers": numPeers, "data": data}, &j)
	return j.Generation
}

func TestWatchCompletesWhenLastMemberJoins(t *testing.T) {
	e, waiting := watchEnv(t)
	a, b, c := uuid.New(), uuid.New(), uuid.New()
	ga := e.join("g", a, 3, "a")
	gb := e.join("g", b, 3, "b")
	wa := e.startWatch(watchPath("g", a, ga, "50s"))
	wb := e.startWatch(watchPath("g", b, gb, "50s"))
	<-waiting
	<-waiting
	e.join("g", c, 3, "c")
	for i, ch := range []<-chan response{wa, wb} {
		r := <-ch
		var w rpc.WatchResponse
		r.decode(t, &w)
		if r.status != http.StatusOK || w.Status != rpc.WatchComplete || w.Rank != i || len(w.Data) != 3 || string(w.Data[2]) != `"c"` {
			t.Fatalf("watch %d: %d %s", i, r.status, r.body)
		}
	}
}

func TestWatchPendingAfterWait(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	a := uuid.New()
	g := e.join("g", a, 2, "a")
	for _, wait := range []string{"0s", "20ms"} {
		r := e.get(watchPath("g", a, g, wait))
		var w rpc.WatchResponse
		r.decode(t, &w)
		if r.status != http.StatusOK || w.Status != rpc.WatchPending || w.Data != nil {
			t.Fatalf("wait %s: %d %s", wait, r.status, r.body)
		}
	}
}

func TestWatchReconnected(t *testing.T) {
	e, waiting := watchEnv(t)
	a := uuid.New()
	g1 := e.join("g", a, 2, "first")
	w := e.startWatch(watchPath("g", a, g1, "50s"))
	<-waiting
	g2 := e.join("g", a, 2, "second")
	if g2 <= g1 {
		t.Fatalf("re-join generation %d after %d", g2, g1)
	}
	r := <-w
	wantError(t, r, http.StatusConflict, "reconnected")
	// The new generation is still pending.
	r = e.get(watchPath("g", a, g2, "0s"))
	var wr rpc.WatchResponse
	r.decode(t, &wr)
	if wr.Status != rpc.WatchPending {
		t.Fatalf("new generation: %s", r.body)
	}
}

func TestWatchClosedByLeave(t *testing.T) {
	e, waiting := watchEnv(t)
	a := uuid.New()
	g := e.join("g", a, 2, "a")
	w := e.startWatch(watchPath("g", a, g, "50s"))
	<-waiting
	e.ok(rpc.PathAllgatherLeave, rpc.LeaveRequest{Group: "g", Member: a}, nil)
	wantError(t, <-w, http.StatusConflict, "closed")
}

func TestWatchTimedOut(t *testing.T) {
	e, waiting := watchEnv(t)
	a := uuid.New()
	var j rpc.JoinResponse
	e.ok(rpc.PathAllgatherJoin, map[string]any{"group": "g", "member": a, "num_peers": 2, "data": 1, "timeout": "1s", "fail_on_timeout": true}, &j)
	w := e.startWatch(watchPath("g", a, j.Generation, "50s"))
	<-waiting
	e.clock.Advance(2e9)
	if _, err := e.local.Apply(t.Context(), &fsm.Tick{}); err != nil {
		t.Fatal(err)
	}
	wantError(t, <-w, http.StatusConflict, "allgather_timeout")
}

// A follower that has not applied a join yet waits for it instead of
// answering closed.
func TestWatchOnLaggingFollower(t *testing.T) {
	var fake *fakeBackend
	waiting := make(chan struct{}, 100)
	e := newEnv(t, testConfig(), func(l *localBackend) rpcBackend {
		fake = newFake(l)
		return fake
	}, func() {
		select {
		case waiting <- struct{}{}:
		default:
		}
	})
	fake.follower(httpapi.ErrNotLeader, rpc.NodeRef{ID: "leader", APIAddr: "127.0.0.1:1"}, true)
	a := uuid.New()
	// The follower knows entry 1 is committed but has applied nothing.
	fake.mu.Lock()
	fake.commitIndex = 1
	fake.mu.Unlock()
	w := e.startWatch(watchPath("g", a, 1, "50s"))
	<-waiting
	res, err := e.local.Apply(t.Context(), &fsm.Join{Group: "g", Member: a, NumPeers: 1, Data: []byte(`"a"`)})
	if err != nil || res.Generation != 1 {
		t.Fatalf("join: %+v %v", res, err)
	}
	r := <-w
	var wr rpc.WatchResponse
	r.decode(t, &wr)
	if r.status != http.StatusOK || wr.Status != rpc.WatchComplete {
		t.Fatalf("follower watch: %d %s", r.status, r.body)
	}
	// Caught up, a member that is not there is closed at once.
	wantError(t, e.get(watchPath("g", uuid.New(), 1, "50s")), http.StatusConflict, "closed")
}

// By default a group that passes its timeout stays open: the watch says
// so once, then waits for the group to fill up.
func TestWatchOverdue(t *testing.T) {
	e, waiting := watchEnv(t)
	a, b := uuid.New(), uuid.New()
	var j rpc.JoinResponse
	e.ok(rpc.PathAllgatherJoin, map[string]any{"group": "g", "member": a, "num_peers": 2, "data": 1, "timeout": "1s"}, &j)
	w := e.startWatch(watchPath("g", a, j.Generation, "50s"))
	<-waiting
	e.clock.Advance(2e9)
	if _, err := e.local.Apply(t.Context(), &fsm.Tick{}); err != nil {
		t.Fatal(err)
	}
	r := <-w
	var wr rpc.WatchResponse
	r.decode(t, &wr)
	if r.status != http.StatusOK || wr.Status != rpc.WatchPending || !wr.Overdue {
		t.Fatalf("watch after the timeout: %d %s, want pending and overdue", r.status, r.body)
	}
	w = e.startWatch(watchPath("g", a, j.Generation, "50s") + "&" + rpc.WatchParamSeenOverdue + "=true")
	<-waiting
	e.join("g", b, 2, "b")
	r = <-w
	r.decode(t, &wr)
	if r.status != http.StatusOK || wr.Status != rpc.WatchComplete || len(wr.Data) != 2 {
		t.Fatalf("watch of the late group: %d %s, want complete", r.status, r.body)
	}
	wantError(t, e.get(watchPath("g", a, j.Generation, "0s")+"&"+rpc.WatchParamSeenOverdue+"=maybe"), http.StatusBadRequest, "invalid")
}

// A leader that has not applied a join yet (before its take-over barrier)
// waits for it instead of answering closed.
func TestWatchOnLeaderBehindTheJoin(t *testing.T) {
	e, waiting := watchEnv(t)
	a := uuid.New()
	w := e.startWatch(watchPath("g", a, 1, "50s"))
	select {
	case <-waiting:
	case r := <-w:
		t.Fatalf("a leader without the join answered %d %s, want it to wait", r.status, r.body)
	}
	res, err := e.local.Apply(t.Context(), &fsm.Join{Group: "g", Member: a, NumPeers: 1, Data: []byte(`"a"`)})
	if err != nil || res.Generation != 1 {
		t.Fatalf("join: %+v %v", res, err)
	}
	r := <-w
	var wr rpc.WatchResponse
	r.decode(t, &wr)
	if r.status != http.StatusOK || wr.Status != rpc.WatchComplete {
		t.Fatalf("leader watch: %d %s, want complete", r.status, r.body)
	}
}
