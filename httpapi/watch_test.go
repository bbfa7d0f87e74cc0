package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
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

// BenchmarkWatchComplete measures the in-process server alone (apitest,
// no Raft): n watches of one group wait on raw HTTP long polls, and each
// iteration is the time from the last join's answer to the last complete
// body read, reported as median-s, min-s and max-s. The processes'
// figures are internal/integration's BenchmarkAllgatherScale.
func BenchmarkWatchComplete(b *testing.B) {
	for _, n := range []int{64, 1024, 4096} {
		b.Run(fmt.Sprintf("peers=%d", n), func(b *testing.B) {
			local := apitest.NewLocal()
			ts := httptest.NewServer(httpapi.NewHandler(local, httpapi.Config{}, hclog.NewNullLogger()))
			defer ts.Close()
			tr := &http.Transport{MaxIdleConnsPerHost: 2 * n}
			defer tr.CloseIdleConnections()
			hc := &http.Client{Transport: tr}
			var samples []time.Duration
			for i := range b.N {
				samples = append(samples, watchRendezvous(b, hc, ts.URL, fmt.Sprintf("g%d", i), n))
			}
			slices.Sort(samples)
			b.ReportMetric(samples[len(samples)/2].Seconds(), "median-s")
			b.ReportMetric(samples[0].Seconds(), "min-s")
			b.ReportMetric(samples[len(samples)-1].Seconds(), "max-s")
		})
	}
}

// watchRendezvous joins n-1 members, parks their watches, joins the last
// and returns the time from its answer to the last result.
func watchRendezvous(b *testing.B, hc *http.Client, base, group string, n int) time.Duration {
	b.Helper()
	join := func(i int, id uuid.UUID) uint64 {
		body, _ := json.Marshal(rpc.JoinRequest{Group: group, Member: id, NumPeers: n, Data: json.RawMessage(fmt.Sprintf(`"10.0.%d.%d:29500"`, i>>8, i&255))})
		resp, err := hc.Post(base+rpc.PathAllgatherJoin, "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		var j rpc.JoinResponse
		if err := json.NewDecoder(resp.Body).Decode(&j); err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("join: %s %v", resp.Status, err)
		}
		return j.Generation
	}
	var arrived sync.WaitGroup
	var mu sync.Mutex
	var last time.Time
	watch := func(id uuid.UUID, gen uint64) {
		defer arrived.Done()
		for {
			resp, err := hc.Get(base + watchPath(group, id, gen, "60s"))
			if err != nil {
				b.Error(err)
				return
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			at := time.Now()
			if err != nil || resp.StatusCode != http.StatusOK {
				b.Errorf("watch: %s %v %.200s", resp.Status, err, body)
				return
			}
			if bytes.HasPrefix(body, []byte(`{"status":"pending"`)) {
				continue
			}
			mu.Lock()
			if at.After(last) {
				last = at
			}
			mu.Unlock()
			return
		}
	}
	var setup sync.WaitGroup
	arrived.Add(n)
	for i := range n - 1 {
		setup.Go(func() {
			id := uuid.New()
			gen := join(i, id)
			go watch(id, gen)
		})
	}
	setup.Wait()
	// Let the watches park; only the interval after the last join counts.
	time.Sleep(200*time.Millisecond + time.Duration(n)*50*time.Microsecond)
	id := uuid.New()
	gen := join(n-1, id)
	acked := time.Now()
	go watch(id, gen)
	arrived.Wait()
	return last.Sub(acked)
}

// wantComplete fails the test unless r is, byte for byte, the JSON of a
// complete rpc.WatchResponse with data and rank, with its length.
func wantComplete(t *testing.T, r response, rank int, data ...string) {
	t.Helper()
	raw := make([]json.RawMessage, len(data))
	for i, d := range data {
		raw[i] = json.RawMessage(d)
	}
	want, err := json.Marshal(rpc.WatchResponse{Status: rpc.WatchComplete, Data: raw, Rank: rank})
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, '\n')
	if r.status != http.StatusOK || !bytes.Equal(r.body, want) {
		t.Fatalf("watch answered %d %s, want %s", r.status, r.body, want)
	}
	if ct, cl := r.header.Get("Content-Type"), r.header.Get("Content-Length"); ct != "application/json" || cl != fmt.Sprint(len(want)) {
		t.Fatalf("Content-Type %q, Content-Length %q, want application/json and %d", ct, cl, len(want))
	}
}

// The shared encoding of a completion is what json.Marshal makes of the
// response: values compacted and HTML-escaped, data that is not JSON sent
// as a string; only the rank differs between the members.
func TestWatchCompleteBody(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	a, b, c := uuid.New(), uuid.New(), uuid.New()
	spaced := `{ "host" : "<a&b>",  "ranks": [1, 2] }`
	var j rpc.JoinResponse
	e.ok(rpc.PathAllgatherJoin, map[string]any{"group": "g", "member": a, "num_peers": 3, "data": "x"}, &j)
	ga := j.Generation
	body := fmt.Sprintf(`{"group": "g", "member": %q, "num_peers": 3, "data": %s}`, b, spaced)
	r := e.do(http.MethodPost, rpc.PathAllgatherJoin, []byte(body))
	if r.status != http.StatusOK {
		t.Fatalf("join: %d %s", r.status, r.body)
	}
	r.decode(t, &j)
	gb := j.Generation
	// Not JSON: only a command that bypasses the API can carry it.
	res, err := e.local.Apply(t.Context(), &fsm.Join{Group: "g", Member: c, NumPeers: 3, Data: []byte("not json")})
	if err != nil || res.Err() != nil {
		t.Fatalf("join: %v %v", err, res.Err())
	}
	data := []string{`"x"`, spaced, `"not json"`}
	for rank, m := range []struct {
		id  uuid.UUID
		gen uint64
	}{{a, ga}, {b, gb}, {c, res.Generation}, {a, ga}} {
		wantComplete(t, e.get(watchPath("g", m.id, m.gen, "0s")), rank%3, data...)
	}
}

// A completion's answer stays right whatever follows: a re-join after
// completion is the completed join again, a leave keeps the member's
// answer, the group closes when every member has left, and a new
// completion under the same group id answers its own data.
func TestWatchCompleteAfterChanges(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	a, b := uuid.New(), uuid.New()
	ga, gb := e.join("g", a, 2, "a"), e.join("g", b, 2, "b")
	wantComplete(t, e.get(watchPath("g", a, ga, "0s")), 0, `"a"`, `"b"`)
	wantComplete(t, e.get(watchPath("g", b, gb, "0s")), 1, `"a"`, `"b"`)

	if again := e.join("g", a, 2, "ignored"); again != ga { // a re-join after completion
		t.Fatalf("a re-join after completion got generation %d, want the completed join's %d", again, ga)
	}
	wantComplete(t, e.get(watchPath("g", a, ga, "0s")), 0, `"a"`, `"b"`)
	e.ok(rpc.PathAllgatherLeave, rpc.LeaveRequest{Group: "g", Member: b}, nil)
	wantComplete(t, e.get(watchPath("g", b, gb, "0s")), 1, `"a"`, `"b"`)
	wantComplete(t, e.get(watchPath("g", a, ga, "0s")), 0, `"a"`, `"b"`)

	e.ok(rpc.PathAllgatherLeave, rpc.LeaveRequest{Group: "g", Member: a}, nil) // the group closes
	wantError(t, e.get(watchPath("g", b, gb, "0s")), http.StatusConflict, "closed")
	gb = e.join("g", b, 2, "b2")
	ga = e.join("g", a, 2, "a2")
	wantComplete(t, e.get(watchPath("g", b, gb, "0s")), 0, `"b2"`, `"a2"`)
	wantComplete(t, e.get(watchPath("g", a, ga, "0s")), 1, `"b2"`, `"a2"`)
}

// A waiting watch sleeps through every change that cannot change its
// answer (other groups, tasks, ticks, another member's join to its open
// group) and wakes once, when its group completes.
func TestWatchWakesOnlyForItsGroup(t *testing.T) {
	var waits atomic.Int32
	waiting := make(chan struct{}, 1)
	e := newEnv(t, testConfig(), nil, func() {
		waits.Add(1)
		select {
		case waiting <- struct{}{}:
		default:
		}
	})
	a, b, c := uuid.New(), uuid.New(), uuid.New()
	ga := e.join("g", a, 3, "a")
	w := e.startWatch(watchPath("g", a, ga, "50s"))
	select {
	case <-waiting:
	case r := <-w:
		t.Fatalf("watch answered %d %s before the group completed", r.status, r.body)
	}
	e.join("other", b, 1, "b")
	e.join("other2", b, 2, "b")
	e.ok(rpc.PathAllgatherLeave, rpc.LeaveRequest{Group: "other2", Member: b}, nil)
	e.setDataset(2, fsm.DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Minute, FailureMax: 2})
	for range 3 {
		if _, err := e.local.Apply(t.Context(), &fsm.Tick{}); err != nil {
			t.Fatal(err)
		}
	}
	e.join("g", b, 3, "b")
	e.join("g", c, 3, "c")
	r := <-w
	var wr rpc.WatchResponse
	r.decode(t, &wr)
	if wr.Status != rpc.WatchComplete || wr.Rank != 0 || len(wr.Data) != 3 {
		t.Fatalf("watch: %d %s", r.status, r.body)
	}
	if n := waits.Load(); n != 1 {
		t.Fatalf("the watch waited %d times, want once: something else woke it", n)
	}
}
