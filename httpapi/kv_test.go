package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
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

// TestKVStoreRoutes: each of the store's writes and reads does what its
// endpoint says, through the plain and the job's routes, and the answers
// carry the outcome.
func TestKVStoreRoutes(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	job := func(path string) string { return rpc.JobPath("a", path) }

	// add counts from 0, in decimal.
	var add rpc.KVAddResponse
	e.ok(job(rpc.PathKVAdd), rpc.KVAddRequest{Key: "n", Amount: 3}, &add)
	e.ok(job(rpc.PathKVAdd), rpc.KVAddRequest{Key: "n", Amount: -5}, &add)
	if add.Value != -2 || add.Version == 0 || add.AppliedAt.IsZero() || string(e.kvGet(job(rpc.PathKVGet), "n").Value) != "-2" {
		t.Fatalf("add: %+v", add)
	}
	// multi-set stores every pair, versions in order.
	var ms rpc.KVMultiSetResponse
	e.ok(job(rpc.PathKVMultiSet), rpc.KVMultiSetRequest{Pairs: []rpc.KVPair{{Key: "r/0/a", Value: []byte("1")}, {Key: "r/0/b", Value: []byte{0, 0xff}}}}, &ms)
	if len(ms.Versions) != 2 || ms.Versions[1] != ms.Versions[0]+1 || ms.Versions[0] <= add.Version {
		t.Fatalf("multi-set: %+v", ms)
	}
	// append creates and extends.
	var ap rpc.KVAppendResponse
	e.ok(job(rpc.PathKVAppend), rpc.KVAppendRequest{Key: "r/1/log", Value: []byte("ab")}, &ap)
	e.ok(job(rpc.PathKVAppend), rpc.KVAppendRequest{Key: "r/1/log", Value: []byte("c")}, &ap)
	if ap.Length != 3 || string(e.kvGet(job(rpc.PathKVGet), "r/1/log").Value) != "abc" {
		t.Fatalf("append: %+v", ap)
	}
	// compare-set by value, c10d's.
	var cv rpc.KVCompareValueResponse
	e.ok(job(rpc.PathKVCompareValue), rpc.KVCompareValueRequest{Key: "cs", Expected: []byte("x"), Desired: []byte("y")}, &cv)
	if cv.Swapped || cv.Found {
		t.Fatalf("compare-set of an absent key expecting a value: %+v", cv)
	}
	e.ok(job(rpc.PathKVCompareValue), rpc.KVCompareValueRequest{Key: "cs", Desired: []byte("first")}, &cv)
	if !cv.Swapped || string(cv.Value) != "first" || cv.Version == 0 {
		t.Fatalf("compare-set of an absent key expecting nothing: %+v", cv)
	}
	e.ok(job(rpc.PathKVCompareValue), rpc.KVCompareValueRequest{Key: "cs", Expected: []byte("other"), Desired: []byte("second")}, &cv)
	if cv.Swapped || string(cv.Value) != "first" {
		t.Fatalf("compare-set expecting another value: %+v", cv)
	}
	// multi-get reads in the order asked, absent keys included.
	var mg rpc.KVMultiGetResponse
	e.ok(job(rpc.PathKVMultiGet), rpc.KVMultiGetRequest{Keys: []string{"r/0/b", "absent", "n"}}, &mg)
	if len(mg.Values) != 3 || !bytes.Equal(mg.Values[0].Value, []byte{0, 0xff}) || mg.Values[0].Version != ms.Versions[1] ||
		mg.Values[1].Found || mg.Values[1].Key != "absent" || string(mg.Values[2].Value) != "-2" {
		t.Fatalf("multi-get: %+v", mg)
	}
	// num-keys counts all, or under a prefix.
	count := func(path string, q string) int {
		var n rpc.KVNumKeysResponse
		r := e.get(path + q)
		if r.status != http.StatusOK {
			t.Fatalf("GET %s%s: %d %s", path, q, r.status, r.body)
		}
		r.decode(t, &n)
		return n.Count
	}
	if n, nr := count(job(rpc.PathKVNumKeys), ""), count(job(rpc.PathKVNumKeys), "?prefix=r/"); n != 5 || nr != 3 {
		t.Fatalf("num-keys: %d, under r/: %d", n, nr)
	}
	// delete-prefix deletes under the prefix only.
	var dp rpc.KVDeletePrefixResponse
	e.ok(job(rpc.PathKVDeletePrefix), rpc.KVDeletePrefixRequest{Prefix: "r/0/"}, &dp)
	if dp.Deleted != 2 || count(job(rpc.PathKVNumKeys), "?prefix=r/") != 1 {
		t.Fatalf("delete-prefix: %+v", dp)
	}
	// delete: conditional, then not.
	v := e.kvGet(job(rpc.PathKVGet), "cs").Version
	var del rpc.KVDeleteResponse
	e.ok(job(rpc.PathKVDelete), rpc.KVDeleteRequest{Key: "cs", Version: v + 100}, &del)
	if del.Deleted || !del.Found || del.Version != v {
		t.Fatalf("delete of another version: %+v", del)
	}
	e.ok(job(rpc.PathKVDelete), rpc.KVDeleteRequest{Key: "cs", Version: v}, &del)
	if !del.Deleted || del.Version != v || e.kvGet(job(rpc.PathKVGet), "cs").Found {
		t.Fatalf("delete: %+v", del)
	}
	// A compare-and-set fenced by the deleted version cannot bring it back.
	if got := e.cas(job(rpc.PathKVCompareAndSet), "cs", v, "back"); got.Swapped || got.Found {
		t.Fatalf("compare-and-set of a deleted version: %+v", got)
	}
	e.ok(job(rpc.PathKVDelete), rpc.KVDeleteRequest{Key: "cs"}, &del)
	if del.Deleted || del.Found || del.Version != 0 {
		t.Fatalf("delete of an absent key: %+v", del)
	}
	// None of it touched the default job.
	if n := count(rpc.PathKVNumKeys, ""); n != 0 {
		t.Fatalf("the default job has %d keys", n)
	}
}

// TestKVStoreRefusalsChangeNothing: an add to a value that is no integer
// and an append past the value limit are refused by the state machine,
// which decides them from the key, and change nothing.
func TestKVStoreRefusalsChangeNothing(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	e.cas(rpc.PathKVCompareAndSet, "text", 0, "text")
	before := e.state().hash
	msg := wantError(t, e.post(rpc.PathKVAdd, rpc.KVAddRequest{Key: "text", Amount: 1}), http.StatusBadRequest, rpc.CodeInvalid).Message
	if !strings.Contains(msg, `key "text" holds "text", which is not a decimal integer`) {
		t.Fatalf("message %q", msg)
	}
	msg = wantError(t, e.post(rpc.PathKVAppend, rpc.KVAppendRequest{Key: "text", Value: make([]byte, fsm.DefaultMaxKVValueBytes)}),
		http.StatusConflict, rpc.CodeLimit).Message
	if !strings.Contains(msg, "appending 1048576 bytes to the 4 of key") {
		t.Fatalf("message %q", msg)
	}
	// A multi-set of more new keys than a job holds, all or nothing.
	pairs := make([]rpc.KVPair, fsm.DefaultMaxJobKVKeys)
	for i := range pairs {
		pairs[i] = rpc.KVPair{Key: fmt.Sprintf("k%d", i)}
	}
	msg = wantError(t, e.post(rpc.PathKVMultiSet, rpc.KVMultiSetRequest{Pairs: pairs}), http.StatusConflict, rpc.CodeLimit).Message
	if !strings.Contains(msg, "limit max_job_kv_keys (1024) exceeded: 1024 new keys would make 1025 keys") {
		t.Fatalf("message %q", msg)
	}
	if e.state().hash != before {
		t.Fatal("a refused write changed the state")
	}
	// Once the limit is lowered below the keys there are, replacing them
	// is no growth.
	e.ok(rpc.PathKVMultiSet, rpc.KVMultiSetRequest{Pairs: pairs[:1023]}, nil)
	if _, err := e.local.Apply(context.Background(), &fsm.SetLimits{Limits: fsm.Limits{MaxJobKVKeys: 10}}); err != nil {
		t.Fatal(err)
	}
	e.ok(rpc.PathKVMultiSet, rpc.KVMultiSetRequest{Pairs: pairs[:1023]}, nil)
}

// TestKVStoreRetries: a retried delete is applied once, even after the key
// was created again, and a retried add answers the sum it made.
func TestKVStoreRetries(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	first := e.cas(rpc.PathKVCompareAndSet, "k", 0, "v")
	id := reqID(uuid.New(), 1)
	var del, again rpc.KVDeleteResponse
	e.ok(rpc.PathKVDelete, rpc.KVDeleteRequest{Key: "k"}, &del, id...)
	recreated := e.cas(rpc.PathKVCompareAndSet, "k", 0, "new")
	before := e.state()
	e.ok(rpc.PathKVDelete, rpc.KVDeleteRequest{Key: "k"}, &again, id...)
	if !again.Deleted || again.Version != first.Version || !again.AppliedAt.Equal(del.AppliedAt) {
		t.Fatalf("retried delete %+v, want the first outcome %+v", again, del)
	}
	if e.state().hash != before.hash || e.kvGet(rpc.PathKVGet, "k").Version != recreated.Version {
		t.Fatal("the retried delete deleted the key created again")
	}

	add := reqID(uuid.New(), 1)
	var sum, retry rpc.KVAddResponse
	e.ok(rpc.PathKVAdd, rpc.KVAddRequest{Key: "n", Amount: 1}, &sum, add...)
	e.ok(rpc.PathKVAdd, rpc.KVAddRequest{Key: "n", Amount: 10}, nil)
	e.ok(rpc.PathKVAdd, rpc.KVAddRequest{Key: "n", Amount: 1}, &retry, add...)
	if retry.Value != 1 || retry.Version != sum.Version || string(e.kvGet(rpc.PathKVGet, "n").Value) != "11" {
		t.Fatalf("retried add %+v, first %+v", retry, sum)
	}
}

// TestKVMultiGetBound: a multi-get whose keys hold more than one answer
// carries is refused, and reading them in parts works.
func TestKVMultiGetBound(t *testing.T) {
	httpapi.SetMaxKVMultiGetBytes(t, 10)
	e := newEnv(t, testConfig(), nil, nil)
	e.cas(rpc.PathKVCompareAndSet, "a", 0, "123456")
	e.cas(rpc.PathKVCompareAndSet, "b", 0, "789012")
	msg := wantError(t, e.post(rpc.PathKVMultiGet, rpc.KVMultiGetRequest{Keys: []string{"a", "b"}}), http.StatusRequestEntityTooLarge, rpc.CodeTooLarge).Message
	if !strings.Contains(msg, "hold 12 bytes together") {
		t.Fatalf("message %q", msg)
	}
	var part rpc.KVMultiGetResponse
	e.ok(rpc.PathKVMultiGet, rpc.KVMultiGetRequest{Keys: []string{"b"}}, &part)
	if len(part.Values) != 1 || string(part.Values[0].Value) != "789012" {
		t.Fatalf("part: %+v", part)
	}
}

// level4 is a backend at protocol level 4 whose leader, as raftnode's,
// proposes nothing the level does not allow.
type level4 struct{ *level1 }

func (b level4) Apply(ctx context.Context, c fsm.Command) (*fsm.Result, error) {
	if err := b.f.Allows(c); err != nil {
		return nil, err
	}
	return b.level1.Apply(ctx, c)
}

// TestKVStoreBelowProtocol5: a cluster below protocol level 5 answers the
// store's writes unavailable, proposing nothing, while its reads, which
// need no new command, work.
func TestKVStoreBelowProtocol5(t *testing.T) {
	b := level4{&level1{f: fsm.New()}}
	if r, _ := b.level1.Apply(context.Background(), &fsm.SetProtocol{Level: fsm.Protocol4}); r.Code != fsm.CodeOK {
		t.Fatal(r)
	}
	e := newEnv(t, testConfig(), func(l *apitest.Local) httpapi.Backend { b.Local = l; return b }, nil)
	e.cas(rpc.PathKVCompareAndSet, "k", 0, "1")
	before := b.f.StateHash()
	for path, body := range map[string]any{
		rpc.PathKVDelete:       rpc.KVDeleteRequest{Key: "k"},
		rpc.PathKVDeletePrefix: rpc.KVDeletePrefixRequest{Prefix: "k"},
		rpc.PathKVAdd:          rpc.KVAddRequest{Key: "k", Amount: 1},
		rpc.PathKVMultiSet:     rpc.KVMultiSetRequest{Pairs: []rpc.KVPair{{Key: "k", Value: []byte("2")}}},
		rpc.PathKVAppend:       rpc.KVAppendRequest{Key: "k", Value: []byte("2")},
		rpc.PathKVCompareValue: rpc.KVCompareValueRequest{Key: "k", Expected: []byte("1"), Desired: []byte("2")},
	} {
		r := e.post(path, body)
		msg := wantError(t, r, http.StatusServiceUnavailable, rpc.CodeUnavailable).Message
		if !strings.Contains(msg, "needs protocol level 5") || r.header.Get("Retry-After") == "" {
			t.Errorf("%s: %q, Retry-After %q", path, msg, r.header.Get("Retry-After"))
		}
	}
	if b.f.StateHash() != before {
		t.Fatal("a refused write changed the state")
	}
	var mg rpc.KVMultiGetResponse
	e.ok(rpc.PathKVMultiGet, rpc.KVMultiGetRequest{Keys: []string{"k"}}, &mg)
	if len(mg.Values) != 1 || string(mg.Values[0].Value) != "1" {
		t.Fatalf("multi-get at level 4: %+v", mg)
	}
}

// TestKVStaleCompareAndSetIsAnsweredWithoutAnEntry: a compare-and-set
// that names a version its key has left is answered "not swapped", with
// the key's value, and no log entry (the applied index and the state stay
// as they were). A retry of one that swapped is still answered by the
// log, with its first outcome; one naming a version not given yet, or 0,
// goes through the log too; one under an ended session is refused, not
// answered.
func TestKVStaleCompareAndSetIsAnsweredWithoutAnEntry(t *testing.T) {
	e := newEnv(t, testConfig(), func(l *apitest.Local) httpapi.Backend { return newFake(l) }, nil)
	first := e.cas(rpc.PathKVCompareAndSet, "k", 0, "one")
	id := reqID(uuid.New(), 1)
	second := e.cas(rpc.PathKVCompareAndSet, "k", first.Version, "two", id...)
	third := e.cas(rpc.PathKVCompareAndSet, "k", second.Version, "three")
	if !second.Swapped || !third.Swapped {
		t.Fatalf("set-up: %+v %+v", second, third)
	}

	before := e.state()
	stale := e.cas(rpc.PathKVCompareAndSet, "k", first.Version, "late")
	if stale.Swapped || !stale.Found || stale.Version != third.Version || string(stale.Value) != "three" {
		t.Fatalf("stale compare-and-set answered %+v, want not swapped at %d holding three", stale, third.Version)
	}
	if after := e.state(); after != before {
		t.Fatalf("a stale compare-and-set changed the state or went through the log: %+v, then %+v", before, after)
	}

	// A client's first request reaches the log, which admits the client:
	// its next ones may then be answered without it, and one that swaps
	// after them is not refused as a client that skipped numbers.
	lane := uuid.New()
	for seq := uint64(1); seq <= 3; seq++ {
		before := e.state()
		if r := e.cas(rpc.PathKVCompareAndSet, "k", first.Version, "late", reqID(lane, seq)...); r.Swapped {
			t.Fatalf("stale compare-and-set %d swapped: %+v", seq, r)
		}
		if through := e.state().applied != before.applied; through != (seq == 1) {
			t.Fatalf("request %d of a new client went through the log: %v", seq, through)
		}
	}
	if r := e.cas(rpc.PathKVCompareAndSet, "k", third.Version, "four", reqID(lane, 4)...); !r.Swapped {
		t.Fatalf("the client's next compare-and-set at the key's version answered %+v", r)
	}
	third.Version = e.kvGet(rpc.PathKVGet, "k").Version

	retry := e.cas(rpc.PathKVCompareAndSet, "k", first.Version, "two", id...)
	if !retry.Swapped || retry.Version != second.Version || !retry.AppliedAt.Equal(second.AppliedAt) {
		t.Fatalf("the retry of a compare-and-set that swapped answered %+v, want its first outcome %+v", retry, second)
	}

	for _, version := range []uint64{0, third.Version + 100} {
		before := e.state()
		r := e.cas(rpc.PathKVCompareAndSet, "k", version, "x", reqID(uuid.New(), 1)...)
		if r.Swapped {
			t.Fatalf("version %d swapped: %+v", version, r)
		}
		if after := e.state(); after.applied == before.applied {
			t.Fatalf("the compare-and-set at version %d did not go through the log", version)
		}
	}

	s := e.openSession(time.Minute)
	if r := e.closeSession(s.Session); r.status != http.StatusOK {
		t.Fatalf("close session: %d %s", r.status, r.body)
	}
	r := e.post(rpc.PathKVCompareAndSet, rpc.KVCompareAndSetRequest{Key: "k", Version: first.Version, Value: []byte("x")}, under(s.Session)...)
	wantError(t, r, http.StatusGone, rpc.CodeSessionExpired)
}
