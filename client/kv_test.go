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
