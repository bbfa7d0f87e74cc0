package httpapi_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/rpc"
)

// kvWatchPath is a register watch of key at path (a plain or job-scoped
// PathKVWatch); timeout < 0 leaves the timeout out.
func kvWatchPath(path, key string, after uint64, timeout time.Duration) string {
	q := url.Values{rpc.KVParamKey: {key}, rpc.KVWatchParamAfter: {strconv.FormatUint(after, 10)}}
	if timeout >= 0 {
		q.Set(rpc.KVWatchParamWait, timeout.String())
	}
	return path + "?" + q.Encode()
}

// kvWatchAnswer requires a 200 answer to a register watch and decodes it.
func kvWatchAnswer(t *testing.T, r response) rpc.KVWatchResponse {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("watch: status %d: %s", r.status, r.body)
	}
	var out rpc.KVWatchResponse
	r.decode(t, &out)
	return out
}

// TestKVWatchWakesOnWrite: a watch of an absent key answers once the key
// is written, and a watch at a version once it is written again, each
// with the key's new value and version; a write to the key in another
// job, or to another key, does not answer it.
func TestKVWatchWakesOnWrite(t *testing.T) {
	e, waiting := watchEnv(t)
	w := e.startWatch(kvWatchPath(rpc.JobPath("a", rpc.PathKVWatch), "k", 0, 50*time.Second))
	<-waiting
	e.cas(rpc.PathKVCompareAndSet, "k", 0, "default job")
	e.cas(rpc.JobPath("a", rpc.PathKVCompareAndSet), "other", 0, "other key")
	first := e.cas(rpc.JobPath("a", rpc.PathKVCompareAndSet), "k", 0, "v1")
	got := kvWatchAnswer(t, <-w)
	if got.Key != "k" || !got.Found || got.TimedOut || got.Version != first.Version || string(got.Value) != "v1" {
		t.Fatalf("watch of an absent key answered %+v, want v1 at version %d", got, first.Version)
	}

	w = e.startWatch(kvWatchPath(rpc.JobPath("a", rpc.PathKVWatch), "k", first.Version, 50*time.Second))
	<-waiting
	var add rpc.KVAppendResponse
	e.ok(rpc.JobPath("a", rpc.PathKVAppend), rpc.KVAppendRequest{Key: "k", Value: []byte("+")}, &add)
	got = kvWatchAnswer(t, <-w)
	if !got.Found || got.TimedOut || got.Version != add.Version || got.Version == first.Version || string(got.Value) != "v1+" {
		t.Fatalf("watch at version %d answered %+v, want v1+ at version %d", first.Version, got, add.Version)
	}
}

// TestKVWatchAnswersAtOnce: a key that already differs from the version
// given answers without waiting: one that exists for after 0, one at
// another version, and one absent for a version (deleted meanwhile).
func TestKVWatchAnswersAtOnce(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	v := e.cas(rpc.PathKVCompareAndSet, "k", 0, "v").Version
	for _, tc := range []struct {
		name  string
		key   string
		after uint64
		found bool
	}{
		{"an existing key, after 0", "k", 0, true},
		{"a key at another version", "k", v + 100, true},
		{"an absent key, after a version", "absent", v, false},
	} {
		got := kvWatchAnswer(t, e.get(kvWatchPath(rpc.PathKVWatch, tc.key, tc.after, time.Hour)))
		if got.TimedOut || got.Found != tc.found || tc.found && (got.Version != v || string(got.Value) != "v") || !tc.found && (got.Version != 0 || got.Value != nil) {
			t.Errorf("%s: %+v", tc.name, got)
		}
	}
}

// TestKVWatchWakesOnDelete: a watch at the key's version answers found
// false when the key is deleted, and so does one when its job is.
func TestKVWatchWakesOnDelete(t *testing.T) {
	e, waiting := watchEnv(t)
	v := e.cas(rpc.PathKVCompareAndSet, "k", 0, "v").Version
	w := e.startWatch(kvWatchPath(rpc.PathKVWatch, "k", v, 50*time.Second))
	<-waiting
	e.ok(rpc.PathKVDelete, rpc.KVDeleteRequest{Key: "k"}, nil)
	if got := kvWatchAnswer(t, <-w); got.Found || got.TimedOut || got.Version != 0 || got.Value != nil {
		t.Fatalf("watch of a deleted key answered %+v", got)
	}

	v = e.cas(rpc.JobPath("j", rpc.PathKVCompareAndSet), "k", 0, "v").Version
	w = e.startWatch(kvWatchPath(rpc.JobPath("j", rpc.PathKVWatch), "k", v, 50*time.Second))
	<-waiting
	e.ok(rpc.JobRoute(rpc.PathJobDelete, "j"), rpc.JobRequest{}, nil)
	if got := kvWatchAnswer(t, <-w); got.Found || got.TimedOut || got.Version != 0 {
		t.Fatalf("watch of a key of a deleted job answered %+v", got)
	}
}

// TestKVWatchTimesOut: once the timeout passes with the key unchanged,
// the watch answers the key as it is, timed out: an existing key at the
// version given, or one that is still absent.
func TestKVWatchTimesOut(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	v := e.cas(rpc.PathKVCompareAndSet, "k", 0, "v").Version
	for _, timeout := range []time.Duration{0, 20 * time.Millisecond} {
		got := kvWatchAnswer(t, e.get(kvWatchPath(rpc.PathKVWatch, "k", v, timeout)))
		if !got.TimedOut || !got.Found || got.Version != v || string(got.Value) != "v" {
			t.Errorf("timeout %v at the key's version: %+v", timeout, got)
		}
		got = kvWatchAnswer(t, e.get(kvWatchPath(rpc.PathKVWatch, "absent", 0, timeout)))
		if !got.TimedOut || got.Found || got.Version != 0 {
			t.Errorf("timeout %v of an absent key: %+v", timeout, got)
		}
	}
}

// TestKVWatchTimeoutCap: a timeout over the server's MaxWatchWait, and a
// watch that gives none when the default is over it, wait MaxWatchWait
// and answer timed out.
func TestKVWatchTimeoutCap(t *testing.T) {
	cfg := testConfig()
	cfg.Limits.MaxWatchWait = 30 * time.Millisecond
	e := newEnv(t, cfg, nil, nil)
	for _, timeout := range []time.Duration{time.Hour, -1} {
		got := kvWatchAnswer(t, e.get(kvWatchPath(rpc.PathKVWatch, "absent", 0, timeout)))
		if !got.TimedOut || got.Found {
			t.Errorf("timeout %v: %+v", timeout, got)
		}
	}
	// Milliseconds past what a time.Duration holds are cut to the limit
	// too.
	got := kvWatchAnswer(t, e.get(rpc.PathKVWatch+"?key=absent&wait=1000h"))
	if !got.TimedOut {
		t.Errorf("the largest timeout: %+v", got)
	}
}

// TestKVWatchRedirectsWhenLeadershipMoves: a node that stops leading
// while a watch waits answers it with a redirect to the new leader, the
// same watch.
func TestKVWatchRedirectsWhenLeadershipMoves(t *testing.T) {
	var fake *fakeBackend
	waiting := make(chan struct{}, 1)
	e := newEnv(t, testConfig(), func(l *localBackend) rpcBackend { fake = newFake(l); return fake }, func() {
		select {
		case waiting <- struct{}{}:
		default:
		}
	})
	path := kvWatchPath(rpc.PathKVWatch, "k", 0, 50*time.Second)
	w := e.startWatch(path)
	<-waiting
	fake.follower(httpapi.ErrNotLeader, rpc.NodeRef{ID: "n2", APIAddr: "10.0.0.2:8080"}, true)
	r := <-w
	wantError(t, r, http.StatusTemporaryRedirect, rpc.CodeNotLeader)
	if loc := r.header.Get("Location"); loc != "http://10.0.0.2:8080"+path {
		t.Fatalf("Location %q, want the same watch at the new leader", loc)
	}
}

// The register watch's timeout parameter documents the server's default
// and limit.
func TestKVWatchTimeoutDoc(t *testing.T) {
	for _, ep := range rpc.Endpoints {
		for _, p := range ep.Query {
			if ep.Path != rpc.PathKVWatch || p.Name != rpc.KVWatchParamWait {
				continue
			}
			for _, d := range []time.Duration{httpapi.DefaultWatchWait, httpapi.DefaultMaxWatchWait} {
				if s := fmt.Sprintf("%gs", d.Seconds()); !strings.Contains(p.Doc, s) {
					t.Errorf("the doc of %s does not say %s: %q", p.Name, s, p.Doc)
				}
			}
			return
		}
	}
	t.Errorf("%s has no %s parameter", rpc.PathKVWatch, rpc.KVWatchParamWait)
}
