package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
	"github.com/raftmaster/raftmaster/rpc"
)

// idleCluster is a Local backend whose clock a test moves past the
// de-duplication window, behind a handler that records the request id and
// answer status of every compare-and-set, and that loses the answer of the
// compare-and-set numbered lose (counting from 1; 0 for none) after the
// cluster applied it.
type idleCluster struct {
	local  *apitest.Local
	offset atomic.Int64
	lose   int

	mu      sync.Mutex
	ids     []string
	answers []int
}

func newIdleCluster(t *testing.T, lose int) (*idleCluster, *client.Client) {
	ic := &idleCluster{local: apitest.NewLocal(), lose: lose}
	ic.local.Now = func() time.Time { return time.Now().Add(time.Duration(ic.offset.Load())) }
	ts := startServer(t, ic.local, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != rpc.PathKVCompareAndSet {
				h.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			ic.mu.Lock()
			ic.ids = append(ic.ids, r.Header.Get(rpc.HeaderRequestID))
			ic.answers = append(ic.answers, rec.Code)
			lost := len(ic.ids) == ic.lose
			ic.mu.Unlock()
			if lost {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				json.NewEncoder(w).Encode(rpc.Error{Code: rpc.CodeUnknownOutcome, Message: "injected"})
				return
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			w.Write(rec.Body.Bytes())
		})
	})
	return ic, newClient(t, client.WithAddr(ts.URL))
}

// idle moves the cluster's clock past the window and applies a Tick,
// which forgets every client idle that long.
func (ic *idleCluster) idle(t *testing.T) {
	t.Helper()
	ic.offset.Add(int64(rpc.DedupWindow + time.Minute))
	if r, err := ic.local.Apply(context.Background(), &fsm.Tick{}); err != nil || r.Err() != nil {
		t.Fatal(err, r.Err())
	}
	if n := ic.local.FSM().Stats(fsm.DefaultJob).DedupClients; n != 0 {
		t.Fatalf("%d clients held after the window, want 0", n)
	}
}

func (ic *idleCluster) requests() ([]string, []int) {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	return slices.Clone(ic.ids), slices.Clone(ic.answers)
}

// A lane idle past the window keeps working: its next write is refused on
// its first attempt (the cluster forgot the lane's identity), and the
// client sends it again, once, as the first request of a new identity.
func TestIdleLaneTakesANewIdentity(t *testing.T) {
	ic, c := newIdleCluster(t, 0)
	ctx := context.Background()
	first, err := c.KVCompareAndSet(ctx, "k", 0, []byte("a"))
	if err != nil || !first.Swapped {
		t.Fatalf("first compare-and-set: %+v, %v", first, err)
	}
	ic.idle(t)
	second, err := c.KVCompareAndSet(ctx, "k", first.Version, []byte("b"))
	if err != nil || !second.Swapped {
		t.Fatalf("compare-and-set after the window: %+v, %v; want it swapped", second, err)
	}
	ids, answers := ic.requests()
	if len(ids) != 3 || !slices.Equal(answers, []int{http.StatusOK, http.StatusConflict, http.StatusOK}) {
		t.Fatalf("requests %q answered %v; want the refused one sent again once", ids, answers)
	}
	lane, _, _ := strings.Cut(ids[0], "/")
	renewed, _, _ := strings.Cut(ids[2], "/")
	if ids[1] != lane+"/2" || renewed == lane || ids[2] != renewed+"/1" {
		t.Fatalf("request ids %q: want %s/2 refused, then sequence 1 of a new identity", ids, lane)
	}
	third, err := c.KVCompareAndSet(ctx, "k", second.Version, []byte("c"))
	if err != nil || !third.Swapped {
		t.Fatalf("the next write: %+v, %v", third, err)
	}
	if ids, _ := ic.requests(); ids[3] != renewed+"/2" {
		t.Fatalf("the next write went as %q, want %s/2", ids[3], renewed)
	}
}

// A retry refused because the cluster forgot its identity is an error
// whose outcome is unknown, never sent again under a new identity: an
// earlier attempt may have been applied before the cluster forgot it.
func TestRetryOfAnUnknownClientIsAnError(t *testing.T) {
	ic, c := newIdleCluster(t, 2)
	ctx := context.Background()
	first, err := c.KVCompareAndSet(ctx, "k", 0, []byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	ic.idle(t)
	_, err = c.KVCompareAndSet(ctx, "k", first.Version, []byte("b"))
	if !errors.Is(err, client.ErrUnknownClient) || !strings.Contains(err.Error(), "may or may not have applied") {
		t.Fatalf("a retry refused as unknown: %v, want ErrUnknownClient with an unknown outcome", err)
	}
	ids, _ := ic.requests()
	if len(ids) != 3 || ids[1] != ids[2] {
		t.Fatalf("request ids %q: want the lost attempt retried once under its id, and nothing more", ids)
	}
	if v, err := c.KVGet(ctx, "k"); err != nil || v.Version != first.Version {
		t.Fatalf("key %+v, %v; want it at version %d", v, err, first.Version)
	}
}

// A write stops retrying after the longest a write may retry, however
// long the client's budget, so that every attempt lands within the
// cluster's de-duplication window.
func TestWriteRetriesEndWithinTheWindow(t *testing.T) {
	c := newClient(t, client.WithAddrs(deadAddr(t)), client.WithRetry(time.Hour), client.WithMaxWriteRetry(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.KVCompareAndSet(ctx, "k", 0, []byte("a"))
	if err == nil || !strings.Contains(err.Error(), "giving up") {
		t.Fatalf("a write to a dead cluster with an hour's budget: %v, want it to give up", err)
	}
}
