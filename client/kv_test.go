package client_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
	"github.com/raftmaster/raftmaster/rpc"
)

// TestKV: a compare-and-set stores only at the version it names, KVGet
// reads what was stored, each job has its own register, and bad keys and
// values come back as the sentinels.
func TestKV(t *testing.T) {
	ctx := context.Background()
	local := apitest.NewLocal()
	ts := startServer(t, local, nil)
	a := newClient(t, client.WithAddr(ts.URL), client.WithJob("job-a"))
	b := newClient(t, client.WithAddr(ts.URL), client.WithJob("job-b"))

	if v, err := a.KVGet(ctx, "rdzv"); err != nil || v.Found || v.Version != 0 || v.Value != nil {
		t.Fatalf("absent key: %+v, %v", v, err)
	}
	first, err := a.KVCompareAndSet(ctx, "rdzv", 0, []byte("round-1"))
	if err != nil || !first.Swapped || !first.Found || first.Version == 0 || string(first.Value) != "round-1" {
		t.Fatalf("first write: %+v, %v", first, err)
	}
	// b's register is its own: the key is absent there.
	if v, err := b.KVGet(ctx, "rdzv"); err != nil || v.Found {
		t.Fatalf("job b reads job a's key: %+v, %v", v, err)
	}
	lost, err := a.KVCompareAndSet(ctx, "rdzv", 0, []byte("round-1b"))
	if err != nil || lost.Swapped || lost.Version != first.Version || string(lost.Value) != "round-1" {
		t.Fatalf("a write that lost: %+v, %v", lost, err)
	}
	second, err := a.KVCompareAndSet(ctx, "rdzv", lost.Version, []byte("round-2"))
	if err != nil || !second.Swapped || second.Version <= first.Version {
		t.Fatalf("second write: %+v, %v", second, err)
	}
	if v, err := a.KVGet(ctx, "rdzv"); err != nil || !v.Found || v.Version != second.Version || string(v.Value) != "round-2" {
		t.Fatalf("read after the second write: %+v, %v", v, err)
	}
	if got := local.FSM().KV("job-a", "rdzv"); got.Version != second.Version {
		t.Fatalf("the FSM holds %+v", got)
	}

	if _, err := a.KVGet(ctx, "two words"); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("bad key read: %v", err)
	}
	if _, err := a.KVCompareAndSet(ctx, "", 0, nil); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("empty key written: %v", err)
	}
	big := make([]byte, local.FSM().Limits().MaxKVValueBytes+1)
	if _, err := a.KVCompareAndSet(ctx, "big", 0, big); !errors.Is(err, client.ErrLimitExceeded) || !strings.Contains(err.Error(), "max_kv_value") {
		t.Fatalf("oversized value: %v", err)
	}
}

// TestKVRetrySameRequestID: a compare-and-set whose answer was lost is
// retried with the same request id, through the job's route, and the
// register applies it once: the retry reports the swap the first attempt
// made, and the next write gets the next version.
func TestKVRetrySameRequestID(t *testing.T) {
	for _, cut := range []bool{false, true} {
		t.Run(map[bool]string{false: "unknown_outcome", true: "connection_cut"}[cut], func(t *testing.T) {
			ctx := context.Background()
			local := apitest.NewLocal()
			proxy := &faultyProxy{path: rpc.JobPath("job-a", rpc.PathKVCompareAndSet), cut: cut}
			ts := startServer(t, local, func(h http.Handler) http.Handler { proxy.h = h; return proxy })
			c := newClient(t, client.WithAddr(ts.URL), client.WithJob("job-a"))
			res, err := c.KVCompareAndSet(ctx, "k", 0, []byte("v"))
			if err != nil {
				t.Fatal(err)
			}
			var first rpc.KVCompareAndSetResponse
			proxy.retried(t, &first)
			if !first.Swapped || !res.Swapped || res.Version != first.Version || string(res.Value) != "v" {
				t.Fatalf("retry answered %+v, the first attempt %+v", res, first)
			}
			next, err := c.KVCompareAndSet(ctx, "k", res.Version, []byte("w"))
			if err != nil || !next.Swapped || next.Version != res.Version+1 {
				t.Fatalf("next write %+v, %v: want version %d (one write before it)", next, err, res.Version+1)
			}
		})
	}
}

// TestKVAfterClose: a call with the caller's context still fails with
// ErrClientClosed once the client is closed.
func TestKVAfterClose(t *testing.T) {
	ts := startServer(t, apitest.NewLocal(), nil)
	c, err := client.NewClient(client.WithAddr(ts.URL))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := c.KVGet(context.Background(), "k"); !errors.Is(err, client.ErrClientClosed) {
		t.Fatalf("KVGet after Close: %v", err)
	}
	if _, err := c.KVCompareAndSet(context.Background(), "k", 0, nil); !errors.Is(err, client.ErrClientClosed) {
		t.Fatalf("KVCompareAndSet after Close: %v", err)
	}
}

// TestKVStore: the store's calls against the real handler: add, multi-set,
// append, compare by value, multi-get, num-keys, delete and prefix delete,
// with bad input as ErrInvalid.
func TestKVStore(t *testing.T) {
	ctx := context.Background()
	local := apitest.NewLocal()
	ts := startServer(t, local, nil)
	c := newClient(t, client.WithAddr(ts.URL), client.WithJob("job-a"))

	if n, err := c.KVAdd(ctx, "count", 2); err != nil || n != 2 {
		t.Fatalf("add: %d, %v", n, err)
	}
	if n, err := c.KVAdd(ctx, "count", 3); err != nil || n != 5 {
		t.Fatalf("second add: %d, %v", n, err)
	}
	versions, err := c.KVMultiSet(ctx, []client.KVPair{{Key: "r/0/a", Value: []byte("x")}, {Key: "r/0/b", Value: []byte("y")}})
	if err != nil || len(versions) != 2 || versions[1] != versions[0]+1 {
		t.Fatalf("multi-set: %v, %v", versions, err)
	}
	if n, err := c.KVAppend(ctx, "r/1/log", []byte("ab")); err != nil || n != 2 {
		t.Fatalf("append: %d, %v", n, err)
	}
	if n, err := c.KVAppend(ctx, "r/1/log", []byte("c")); err != nil || n != 3 {
		t.Fatalf("second append: %d, %v", n, err)
	}
	if r, err := c.KVCompareValue(ctx, "cs", []byte("x"), []byte("y")); err != nil || r.Swapped || r.Found {
		t.Fatalf("compare-value of an absent key: %+v, %v", r, err)
	}
	if r, err := c.KVCompareValue(ctx, "cs", nil, []byte("first")); err != nil || !r.Swapped || string(r.Value) != "first" {
		t.Fatalf("compare-value creating the key: %+v, %v", r, err)
	}
	if r, err := c.KVCompareValue(ctx, "cs", []byte("first"), []byte("second")); err != nil || !r.Swapped || string(r.Value) != "second" {
		t.Fatalf("compare-value replacing the key: %+v, %v", r, err)
	}
	values, err := c.KVMultiGet(ctx, []string{"count", "absent", "r/1/log"})
	if err != nil || len(values) != 3 || string(values[0].Value) != "5" || values[1].Found || string(values[2].Value) != "abc" {
		t.Fatalf("multi-get: %+v, %v", values, err)
	}
	if n, err := c.KVNumKeys(ctx, ""); err != nil || n != 5 {
		t.Fatalf("num-keys: %d, %v", n, err)
	}
	if n, err := c.KVNumKeys(ctx, "r/"); err != nil || n != 3 {
		t.Fatalf("num-keys under r/: %d, %v", n, err)
	}
	if n, err := c.KVDeletePrefix(ctx, "r/0/"); err != nil || n != 2 {
		t.Fatalf("delete-prefix: %d, %v", n, err)
	}
	cs, _ := c.KVGet(ctx, "cs")
	if r, err := c.KVDelete(ctx, "cs", cs.Version+1); err != nil || r.Deleted || !r.Found || r.Version != cs.Version {
		t.Fatalf("delete of another version: %+v, %v", r, err)
	}
	if r, err := c.KVDelete(ctx, "cs", 0); err != nil || !r.Deleted || r.Version != cs.Version {
		t.Fatalf("delete: %+v, %v", r, err)
	}
	// The deleted version fences nothing back into existence.
	if r, err := c.KVCompareAndSet(ctx, "cs", cs.Version, []byte("back")); err != nil || r.Swapped || r.Found {
		t.Fatalf("compare-and-set of the deleted version: %+v, %v", r, err)
	}
	if got := local.FSM().KVCount("job-a", ""); got != 2 {
		t.Fatalf("the job holds %d keys, want 2", got)
	}

	for what, call := range map[string]func() error{
		"delete":        func() error { _, err := c.KVDelete(ctx, "a b", 0); return err },
		"delete-prefix": func() error { _, err := c.KVDeletePrefix(ctx, ""); return err },
		"add":           func() error { _, err := c.KVAdd(ctx, "r/1/log", 1); return err },
		"multi-set":     func() error { _, err := c.KVMultiSet(ctx, nil); return err },
		"append":        func() error { _, err := c.KVAppend(ctx, "", nil); return err },
		"compare-value": func() error { _, err := c.KVCompareValue(ctx, "\n", nil, nil); return err },
		"multi-get":     func() error { _, err := c.KVMultiGet(ctx, []string{"ok", "not ok"}); return err },
		"num-keys":      func() error { _, err := c.KVNumKeys(ctx, "a b"); return err },
	} {
		if err := call(); !errors.Is(err, client.ErrInvalid) {
			t.Errorf("%s of bad input: %v, want ErrInvalid", what, err)
		}
	}
	if _, err := c.KVMultiSet(ctx, []client.KVPair{{Key: "big", Value: make([]byte, local.FSM().Limits().MaxKVValueBytes+1)}}); !errors.Is(err, client.ErrLimitExceeded) {
		t.Fatalf("an oversized multi-set: %v", err)
	}
}

// TestKVDeleteRetrySameRequestID: a delete whose answer was lost is
// retried with the same request id and applied once: the retry reports
// the first outcome, and a key created again in between survives it.
func TestKVDeleteRetrySameRequestID(t *testing.T) {
	ctx := context.Background()
	local := apitest.NewLocal()
	proxy := &faultyProxy{path: rpc.JobPath("job-a", rpc.PathKVDelete)}
	ts := startServer(t, local, func(h http.Handler) http.Handler { proxy.h = h; return proxy })
	c := newClient(t, client.WithAddr(ts.URL), client.WithJob("job-a"))
	first, err := c.KVCompareAndSet(ctx, "k", 0, []byte("v"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.KVDelete(ctx, "k", 0)
	if err != nil {
		t.Fatal(err)
	}
	var lost rpc.KVDeleteResponse
	proxy.retried(t, &lost)
	if !lost.Deleted || !res.Deleted || res.Version != first.Version {
		t.Fatalf("retry answered %+v, the first attempt %+v", res, lost)
	}
	if local.FSM().KV("job-a", "k").Found {
		t.Fatal("the key survived its delete")
	}
}
