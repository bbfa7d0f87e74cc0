package etcdmaster

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/internal/etcdtest"
	"github.com/raftmaster/raftmaster/rpc"
	"github.com/raftmaster/raftmaster/store"
)

func startMaster(t *testing.T, endpoint, id string) *Master {
	t.Helper()
	return startMasterWith(t, id, store.EtcdConfig{Endpoints: []string{endpoint}, TTL: 2 * time.Second})
}

func startMasterWith(t *testing.T, id string, sc store.EtcdConfig) *Master {
	t.Helper()
	m, err := Start(Config{ID: id, APIAddr: id + ":8080", Store: sc, FailoverGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Shutdown(context.Background()) })
	return m
}

// activeAndStandby starts master a, waits for it to be active, then
// starts master b, which stands by, and waits for b to know a.
func activeAndStandby(t *testing.T) (a, b *Master) {
	t.Helper()
	e := etcdtest.Start(t)
	a = startMaster(t, e.Endpoint, "a")
	waitFor(t, "a to be active", a.Active)
	b = startMaster(t, e.Endpoint, "b")
	waitFor(t, "b to see a", func() bool { l, ok := b.Leader(); return ok && l.ID == "a" })
	return a, b
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var trainer = uuid.MustParse("00000000-0000-0000-0000-000000000001")

func dataset() *fsm.SetDataset {
	return &fsm.SetDataset{
		Header: fsm.Header{Request: fsm.RequestID{Client: trainer, Seq: 1}},
		Params: fsm.DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Minute, FailureMax: 2},
		Chunks: []fsm.Chunk{{Path: "/d/a", Offset: 0, Records: 10}, {Path: "/d/a", Offset: 100, Records: 10}},
	}
}

func mustApply(t *testing.T, m *Master, c fsm.Command) *fsm.Result {
	t.Helper()
	r, err := m.Apply(context.Background(), c)
	if err != nil {
		t.Fatalf("apply %T: %v", c, err)
	}
	if r.Code != fsm.CodeOK {
		t.Fatalf("apply %T: code %v %s", c, r.Code, r.Message)
	}
	return r
}

// TestStandbyTakesOverWithTheState: the active master serves and saves; a
// standby refuses writes and points at it; after a hand-over the standby
// serves the very same state, and the old master refuses writes.
func TestStandbyTakesOverWithTheState(t *testing.T) {
	a, b := activeAndStandby(t)

	mustApply(t, a, dataset())
	task := mustApply(t, a, &fsm.GetTask{Header: fsm.Header{Request: fsm.RequestID{Client: trainer, Seq: 2}}}).Task
	if task == nil {
		t.Fatal("no task dispatched")
	}
	if _, err := b.Apply(context.Background(), &fsm.GetTask{}); !errors.Is(err, httpapi.ErrNotLeader) {
		t.Fatalf("standby apply: %v, want ErrNotLeader", err)
	}
	if err := b.ReadBarrier(context.Background()); !errors.Is(err, httpapi.ErrNotLeader) {
		t.Fatalf("standby read barrier: %v, want ErrNotLeader", err)
	}
	if err := a.ReadBarrier(context.Background()); err != nil {
		t.Fatalf("active read barrier: %v", err)
	}
	members, err := a.Members(context.Background())
	if err != nil || len(members) != 2 || !members[0].Leader || members[1].Leader {
		t.Fatalf("members %+v, %v; want a (active) and b", members, err)
	}

	if err := a.Transfer(context.Background(), "b"); !errors.Is(err, fsm.ErrInvalid) {
		t.Fatalf("transfer to a named master: %v, want ErrInvalid", err)
	}
	if err := a.Transfer(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b to be active", b.Active)
	if a.Active() {
		t.Fatal("both masters active")
	}
	// b has a's state: the pending task, and the dedup memory of the
	// GetTask, so a retry returns the same task instead of a new one.
	st := b.FSM().Stats(fsm.DefaultJob)
	if st.Pending != 1 || st.Todo != 1 {
		t.Fatalf("after the hand-over: %+v, want 1 pending and 1 todo", st)
	}
	again := mustApply(t, b, &fsm.GetTask{Header: fsm.Header{Request: fsm.RequestID{Client: trainer, Seq: 2}}})
	if again.Task == nil || again.Task.Meta != task.Meta {
		t.Fatalf("retried GetTask after the hand-over gave %+v, want %+v", again.Task, task.Meta)
	}
	if _, err := a.Apply(context.Background(), &fsm.GetTask{}); !errors.Is(err, httpapi.ErrNotLeader) {
		t.Fatalf("old master apply: %v, want ErrNotLeader", err)
	}
}

// TestDeposedMasterStepsDown: when etcd ends the active master's session
// behind its back (an expired lease), its next write is not acknowledged,
// it stops serving, and the standby's state holds only acknowledged writes.
func TestDeposedMasterStepsDown(t *testing.T) {
	e := etcdtest.Start(t)
	a := startMaster(t, e.Endpoint, "a")
	waitFor(t, "a to be active", a.Active)
	b := startMaster(t, e.Endpoint, "b")
	mustApply(t, a, dataset())
	acked := a.FSM().Stats(fsm.DefaultJob)

	if _, err := a.st.Client().Revoke(context.Background(), a.st.Lease()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b to be active", b.Active)
	_, err := a.Apply(context.Background(), &fsm.GetTask{})
	if !errors.Is(err, httpapi.ErrNotLeader) && !errors.Is(err, httpapi.ErrUnknownOutcome) {
		t.Fatalf("deposed master's write: %v, want not-leader or unknown outcome", err)
	}
	if a.Active() {
		t.Fatal("deposed master still active")
	}
	if got := a.FSM().Stats(fsm.DefaultJob); got.Pending != acked.Pending || got.Todo != acked.Todo {
		t.Fatalf("the deposed master published an unsaved command: %+v, want %+v", got, acked)
	}
	select {
	case <-a.Lost():
	case <-time.After(30 * time.Second):
		t.Fatal("deposed master did not report its lost session")
	}
	got := b.FSM().Stats(fsm.DefaultJob)
	if got.Todo != acked.Todo || got.Pending != acked.Pending {
		t.Fatalf("new master has %+v, want the acknowledged %+v", got, acked)
	}
}

func TestCorruptSavedStateIsRefused(t *testing.T) {
	for name, blob := range map[string][]byte{
		"not gzip":     []byte("garbage"),
		"gzip garbage": gzipped(t, []byte("not a snapshot")),
	} {
		state, err := decodeState(blob)
		if err == nil {
			err = fsm.New().Restore(nopCloser(state))
		}
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if state, err := decodeState(nil); err != nil || fsm.New().Restore(nopCloser(state)) != nil {
		t.Fatalf("no saved state must load as an empty FSM: %v", err)
	}
}

// TestStateTooLargeForEtcd: a command that would make the state outgrow
// what etcd stores is refused with too_large and changes nothing; the
// master stays active and serves the next command.
func TestStateTooLargeForEtcd(t *testing.T) {
	e := etcdtest.Start(t)
	m := startMasterWith(t, "a", store.EtcdConfig{Endpoints: []string{e.Endpoint}, TTL: 2 * time.Second, MaxStateBytes: StateHeadroom + 4096})
	waitFor(t, "a to be active", m.Active)
	before := m.FSM().StateHash()
	big := dataset()
	big.Chunks = nil
	for i := range 5000 {
		big.Chunks = append(big.Chunks, fsm.Chunk{Path: fmt.Sprintf("/d/%d", i), Records: 1})
	}
	_, err := m.Apply(context.Background(), big)
	var re *rpc.Error
	if !errors.As(err, &re) || re.Code != rpc.CodeTooLarge {
		t.Fatalf("oversized state: %v, want a too_large error", err)
	}
	if m.FSM().StateHash() != before || !m.Active() {
		t.Fatalf("a refused command changed the state (or the master stepped down)")
	}
	mustApply(t, m, dataset())
	if !m.FSM().Stats(fsm.DefaultJob).HasDataset {
		t.Fatal("the next command was not applied")
	}
}

// TestStandbyRedirectsWatches: a standby holds no current state, so an
// allgather watch sent to it goes to the active master.
func TestStandbyRedirectsWatches(t *testing.T) {
	_, b := activeAndStandby(t)
	srv := httptest.NewServer(httpapi.NewHandler(b, httpapi.Config{}, nil))
	defer srv.Close()
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	q := url.Values{rpc.WatchParamGroup: {"g"}, rpc.WatchParamMember: {uuid.NewString()}, rpc.WatchParamGeneration: {"1"}}
	resp, err := hc.Get(srv.URL + rpc.PathAllgatherWatch + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTemporaryRedirect || !strings.HasPrefix(resp.Header.Get("Location"), "http://a:8080/") {
		t.Fatalf("standby watch: %s to %q, want 307 to a", resp.Status, resp.Header.Get("Location"))
	}
}

// TestRemoveUnknownMaster: the etcd backend has no membership changes, but
// a remove naming no master at all is not_found, as with Raft.
func TestRemoveUnknownMaster(t *testing.T) {
	e := etcdtest.Start(t)
	a := startMaster(t, e.Endpoint, "a")
	waitFor(t, "a to be active", a.Active)
	waitFor(t, "a to be listed", func() bool {
		m, err := a.Members(context.Background())
		return err == nil && len(m) == 1
	})
	var re *rpc.Error
	if err := a.RemoveMember(context.Background(), "nosuch"); !errors.As(err, &re) || re.Code != rpc.CodeNotFound {
		t.Fatalf("remove unknown master: %v, want code %q", err, rpc.CodeNotFound)
	}
	if err := a.RemoveMember(context.Background(), "a"); !errors.Is(err, fsm.ErrInvalid) {
		t.Fatalf("remove a listed master: %v, want ErrInvalid", err)
	}
}

// TestKVRegister: the etcd backend serves the register's routes through
// the same FSM: a compare-and-set through the active master's API is
// saved with the state, a standby sends reads to the active master rather
// than answer from its own copy, and after a hand-over the new active
// master reads the key at its version and answers a retried
// compare-and-set with its first outcome.
func TestKVRegister(t *testing.T) {
	a, b := activeAndStandby(t)
	api := func(m *Master) string {
		srv := httptest.NewServer(httpapi.NewHandler(m, httpapi.Config{}, nil))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	aURL, bURL := api(a), api(b)
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	id := []string{rpc.HeaderRequestID, uuid.NewString() + "/1"}
	cas := func(base string, version uint64, value string) (int, rpc.KVCompareAndSetResponse) {
		t.Helper()
		body := fmt.Sprintf(`{"key":"rdzv","version":%d,"value":%q}`, version, base64.StdEncoding.EncodeToString([]byte(value)))
		req, _ := http.NewRequest(http.MethodPost, base+rpc.JobPath("job-a", rpc.PathKVCompareAndSet), strings.NewReader(body))
		req.Header.Set(id[0], id[1])
		return send[rpc.KVCompareAndSetResponse](t, hc, req)
	}
	get := func(base string) (int, rpc.KVGetResponse) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+rpc.JobPath("job-a", rpc.PathKVGet)+"?key=rdzv", nil)
		return send[rpc.KVGetResponse](t, hc, req)
	}

	status, first := cas(aURL, 0, "round-1")
	if status != http.StatusOK || !first.Swapped || first.Version == 0 {
		t.Fatalf("cas on the active master: %d %+v", status, first)
	}
	if status, v := get(aURL); status != http.StatusOK || v.Version != first.Version || string(v.Value) != "round-1" {
		t.Fatalf("get on the active master: %d %+v", status, v)
	}
	if status, _ := get(bURL); status != http.StatusTemporaryRedirect {
		t.Fatalf("get on the standby: %d, want a redirect to the active master", status)
	}
	if status, _ := cas(bURL, 0, "round-1"); status != http.StatusTemporaryRedirect {
		t.Fatalf("cas on the standby: %d, want a redirect to the active master", status)
	}

	if err := a.Transfer(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b to be active", b.Active)
	if status, v := get(bURL); status != http.StatusOK || v.Version != first.Version || string(v.Value) != "round-1" {
		t.Fatalf("get after the hand-over: %d %+v", status, v)
	}
	// The retry of the first compare-and-set, whose answer a client might
	// have lost in the hand-over, is answered as the first was.
	if status, again := cas(bURL, 0, "round-1"); status != http.StatusOK || !again.Swapped || again.Version != first.Version {
		t.Fatalf("retried cas after the hand-over: %d %+v, want %+v", status, again, first)
	}
	if got := b.FSM().KV("job-a", "rdzv"); got.Version != first.Version {
		t.Fatalf("the retry wrote again: %+v", got)
	}
}

// send sends req and returns the status and, for a 200, the answer.
func send[T any](t *testing.T, hc *http.Client, req *http.Request) (int, T) {
	t.Helper()
	var out T
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
	}
	return resp.StatusCode, out
}

// TestLimitFlagsSetANewStateOnly: the first master of a new state sets
// its limits from its flags; a master that takes over later keeps them,
// whatever its own flags, as a Raft leader does.
func TestLimitFlagsSetANewStateOnly(t *testing.T) {
	e := etcdtest.Start(t)
	sc := store.EtcdConfig{Endpoints: []string{e.Endpoint}, TTL: 2 * time.Second}
	start := func(id string, l fsm.Limits) *Master {
		m, err := Start(Config{ID: id, APIAddr: id + ":8080", Store: sc, FailoverGrace: time.Second, Limits: &l})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Shutdown(context.Background()) })
		return m
	}
	initial := fsm.Limits{MaxJobs: 3, JobTTL: time.Hour}
	a := start("a", initial)
	waitFor(t, "a to be active", a.Active)
	if got := a.FSM().Limits(); got != initial.Effective() {
		t.Fatalf("limits of a new state %+v, want a's flags %+v", got, initial.Effective())
	}
	b := start("b", fsm.Limits{MaxJobs: 9})
	waitFor(t, "b to see a", func() bool { l, ok := b.Leader(); return ok && l.ID == "a" })
	if err := a.Transfer(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b to be active", b.Active)
	if got := b.FSM().Limits(); got != initial.Effective() {
		t.Fatalf("limits after b took over %+v, want the initial %+v", got, initial.Effective())
	}
}
