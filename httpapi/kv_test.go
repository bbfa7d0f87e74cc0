package httpapi_test

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/rpc"
)

// kvGet reads key at path (a plain or job-scoped PathKVGet).
func (e *env) kvGet(path, key string) rpc.KVGetResponse {
	e.t.Helper()
	r := e.get(path + "?" + url.Values{rpc.KVParamKey: {key}}.Encode())
	if r.status != http.StatusOK {
		e.t.Fatalf("GET %s %q: status %d: %s", path, key, r.status, r.body)
	}
	var out rpc.KVGetResponse
	r.decode(e.t, &out)
	return out
}

// cas posts a compare-and-set to path and decodes the answer.
func (e *env) cas(path, key string, version uint64, value string, header ...string) rpc.KVCompareAndSetResponse {
	e.t.Helper()
	var out rpc.KVCompareAndSetResponse
	e.ok(path, rpc.KVCompareAndSetRequest{Key: key, Version: version, Value: []byte(value)}, &out, header...)
	return out
}

// TestKVRoutes: a compare-and-set stores only at the expected version,
// the read sees what was stored, the value travels as base64, each job
// has its own register, and a deleted job's register is gone.
func TestKVRoutes(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	if got := e.kvGet(rpc.PathKVGet, "rdzv"); got.Found || got.Version != 0 || got.Value != nil || got.Key != "rdzv" {
		t.Fatalf("absent key reads %+v", got)
	}
	first := e.cas(rpc.PathKVCompareAndSet, "rdzv", 0, "state-1")
	if !first.Swapped || !first.Found || first.Version == 0 || string(first.Value) != "state-1" || first.AppliedAt.IsZero() {
		t.Fatalf("first write: %+v", first)
	}
	// The wire form is base64.
	r := e.get(rpc.PathKVGet + "?key=rdzv")
	if !bytes.Contains(r.body, []byte(`"value":"c3RhdGUtMQ=="`)) {
		t.Fatalf("GET body %s does not carry the value in base64", r.body)
	}
	// A stale token is answered with the current state, which it does
	// not change.
	stale := e.cas(rpc.PathKVCompareAndSet, "rdzv", 0, "state-x")
	if stale.Swapped || !stale.Found || stale.Version != first.Version || string(stale.Value) != "state-1" {
		t.Fatalf("stale write: %+v", stale)
	}
	second := e.cas(rpc.PathKVCompareAndSet, "rdzv", first.Version, "state-2")
	if !second.Swapped || second.Version <= first.Version {
		t.Fatalf("second write: %+v", second)
	}
	if got := e.kvGet(rpc.PathKVGet, "rdzv"); !got.Found || got.Version != second.Version || string(got.Value) != "state-2" {
		t.Fatalf("read after the second write: %+v", got)
	}

	// Job a's register is its own.
	a := e.cas(rpc.JobPath("a", rpc.PathKVCompareAndSet), "rdzv", 0, "a-1")
	if !a.Swapped || a.Version == second.Version {
		t.Fatalf("job a's first write: %+v", a)
	}
	if got := e.kvGet(rpc.JobPath("a", rpc.PathKVGet), "rdzv"); string(got.Value) != "a-1" {
		t.Fatalf("job a reads %+v", got)
	}
	if got := e.kvGet(rpc.PathKVGet, "rdzv"); string(got.Value) != "state-2" {
		t.Fatalf("job a's write changed the default job's key: %+v", got)
	}
	var job rpc.Job
	e.get(rpc.JobRoute(rpc.PathJob, "a")).decode(t, &job)
	if job.KVKeys != 1 {
		t.Fatalf("job a: %+v", job)
	}
	e.ok(rpc.JobRoute(rpc.PathJobDelete, "a"), rpc.JobRequest{}, nil)
	if got := e.kvGet(rpc.JobPath("a", rpc.PathKVGet), "rdzv"); got.Found {
		t.Fatalf("deleted job's key reads %+v", got)
	}
	// An invalid job name is refused before anything is proposed.
	wantError(t, e.get(rpc.JobPath("Bad_Job", rpc.PathKVGet)+"?key=k"), http.StatusBadRequest, rpc.CodeInvalid)
}

// TestKVRetry: a retried compare-and-set with the same request id is
// answered with the first outcome, even after the key moved on, and does
// not write again.
func TestKVRetry(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	id := reqID(uuid.New(), 1)
	first := e.cas(rpc.PathKVCompareAndSet, "k", 0, "mine", id...)
	other := e.cas(rpc.PathKVCompareAndSet, "k", first.Version, "theirs")
	before := e.state()
	retry := e.cas(rpc.PathKVCompareAndSet, "k", 0, "mine", id...)
	if !retry.Swapped || retry.Version != first.Version || string(retry.Value) != "mine" || !retry.AppliedAt.Equal(first.AppliedAt) {
		t.Fatalf("retry %+v, want the first outcome %+v", retry, first)
	}
	if after := e.state(); after.hash != before.hash {
		t.Fatal("the retry changed the state")
	}
	if got := e.kvGet(rpc.PathKVGet, "k"); got.Version != other.Version || string(got.Value) != "theirs" {
		t.Fatalf("the retry wrote again: %+v", got)
	}
}

// TestKVValueLimit: a value of the cluster's limit fits, although it is
// far above the usual body limit; one byte more is refused before it is
// proposed; the limit the leader replicates is the one enforced.
func TestKVValueLimit(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	big := strings.Repeat("v", fsm.DefaultMaxKVValueBytes)
	if got := e.cas(rpc.PathKVCompareAndSet, "big", 0, big); !got.Swapped || len(got.Value) != fsm.DefaultMaxKVValueBytes {
		t.Fatalf("a value of the limit: swapped %v, %d bytes", got.Swapped, len(got.Value))
	}
	if got := e.kvGet(rpc.PathKVGet, "big"); string(got.Value) != big {
		t.Fatalf("read back %d bytes", len(got.Value))
	}
	if _, err := e.local.Apply(context.Background(), &fsm.SetLimits{Limits: fsm.Limits{MaxKVValueBytes: 4, MaxJobKVKeys: 2}}); err != nil {
		t.Fatal(err)
	}
	before := e.state()
	msg := wantError(t, e.post(rpc.PathKVCompareAndSet, rpc.KVCompareAndSetRequest{Key: "k", Value: []byte("12345")}), http.StatusConflict, rpc.CodeLimit).Message
	if !strings.Contains(msg, "max_kv_value_bytes (4)") {
		t.Fatalf("message %q", msg)
	}
	if e.state() != before {
		t.Fatal("a value over the limit changed the state or reached the log")
	}
	e.cas(rpc.PathKVCompareAndSet, "k", 0, "1234")
	msg = wantError(t, e.post(rpc.PathKVCompareAndSet, rpc.KVCompareAndSetRequest{Key: "k2", Value: []byte("1")}), http.StatusConflict, rpc.CodeLimit).Message
	if !strings.Contains(msg, "max_job_kv_keys (2)") {
		t.Fatalf("message %q", msg)
	}
	var jobs rpc.JobsResponse
	e.get(rpc.PathJobs).decode(t, &jobs)
	if jobs.Limits.MaxKVValueBytes != 4 || jobs.Limits.MaxJobKVKeys != 2 {
		t.Fatalf("limits %+v", jobs.Limits)
	}
}

// TestKVGetNeedsTheLeader: the read goes through the read barrier; a node
// that cannot pass it, because it does not lead, answers from no local
// state but redirects.
func TestKVGetNeedsTheLeader(t *testing.T) {
	var fake *fakeBackend
	e := newEnv(t, testConfig(), func(l *localBackend) rpcBackend { fake = newFake(l); return fake }, nil)
	e.cas(rpc.PathKVCompareAndSet, "k", 0, "v")
	fake.follower(httpapi.ErrNotLeader, rpc.NodeRef{ID: "n2", APIAddr: "10.0.0.2:8080"}, true)
	r := e.get(rpc.JobPath("j", rpc.PathKVGet) + "?key=k")
	wantError(t, r, http.StatusTemporaryRedirect, rpc.CodeNotLeader)
	if loc := r.header.Get("Location"); loc != "http://10.0.0.2:8080"+rpc.JobPath("j", rpc.PathKVGet)+"?key=k" {
		t.Fatalf("Location %q", loc)
	}
}

// TestKVMissAtMaxJobs: at max_jobs, a compare-and-set that expects a
// version of a job that does not exist cannot create it, so it is
// answered as a compare-and-set that did not swap, the key absent, and
// changes nothing; one that would swap is still refused at the limit.
func TestKVMissAtMaxJobs(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	if _, err := e.local.Apply(context.Background(), &fsm.SetLimits{Limits: fsm.Limits{MaxJobs: 1}}); err != nil {
		t.Fatal(err)
	}
	e.cas(rpc.JobPath("a", rpc.PathKVCompareAndSet), "k", 0, "v")
	miss := e.cas(rpc.JobPath("b", rpc.PathKVCompareAndSet), "k", 3, "w")
	if miss.Swapped || miss.Found || miss.Version != 0 || miss.Value != nil {
		t.Fatalf("a compare-and-set of a missing job at max_jobs: %+v, want not swapped and the key absent", miss)
	}
	wantError(t, e.get(rpc.JobRoute(rpc.PathJob, "b")), http.StatusNotFound, rpc.CodeUnknownJob)
	before := e.state()
	msg := wantError(t, e.post(rpc.JobPath("b", rpc.PathKVCompareAndSet), rpc.KVCompareAndSetRequest{Key: "k", Value: []byte("w")}),
		http.StatusConflict, rpc.CodeLimit).Message
	if !strings.Contains(msg, "max_jobs (1)") {
		t.Fatalf("message %q", msg)
	}
	if e.state().hash != before.hash {
		t.Fatal("a compare-and-set refused at the limit changed the state")
	}
}
