package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
	"github.com/raftmaster/raftmaster/rpc"
)

// TestKVWatch: through a follower, which redirects it, a watch of an
// absent key waits at the leader and returns the value once it is
// written; a watch at the key's version returns it timed out, and one
// after the key's deletion returns it gone. A server whose limit is below
// the watch's timeout is asked again until the timeout passes, and the
// context ends the wait.
func TestKVWatch(t *testing.T) {
	ctx := context.Background()
	leader := apitest.NewLocal()
	leader.ID = "leader"
	var leaderHits counter
	startServerWith(t, leader, httpapi.Config{Limits: httpapi.Limits{MaxWatchWait: 20 * time.Millisecond}}, leaderHits.wrap)
	fb := &follower{Local: apitest.NewLocal(), leader: rpc.NodeRef{ID: "leader", APIAddr: leader.API}}
	fb.ID = "follower"
	fts := startServer(t, fb, nil)
	c := newClient(t, client.WithAddrs(fts.URL), client.WithJob("job-a"))
	watches := func() int {
		leaderHits.mu.Lock()
		defer leaderHits.mu.Unlock()
		return leaderHits.n[rpc.JobPath("job-a", rpc.PathKVWatch)]
	}

	type outcome struct {
		res client.KVWatchResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := c.KVWatch(ctx, "k", 0, time.Minute)
		done <- outcome{res, err}
	}()
	waitFor(t, "the watch at the leader", 10*time.Second, func() bool { return watches() > 0 })
	set, err := c.KVCompareAndSet(ctx, "k", 0, []byte("v"))
	if err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.err != nil || got.res.TimedOut || !got.res.Found || got.res.Version != set.Version || string(got.res.Value) != "v" {
		t.Fatalf("watch of an absent key: %+v, %v; want v at version %d", got.res, got.err, set.Version)
	}

	// The server waits at most 20 ms: a watch of 100 ms asks it again.
	before := watches()
	for _, timeout := range []time.Duration{0, 100 * time.Millisecond} {
		res, err := c.KVWatch(ctx, "k", set.Version, timeout)
		if err != nil || !res.TimedOut || !res.Found || res.Version != set.Version || string(res.Value) != "v" {
			t.Fatalf("timeout %v at the key's version: %+v, %v", timeout, res, err)
		}
	}
	if n := watches() - before; n < 3 {
		t.Errorf("the two watches asked the leader %d times; the second one, longer than its limit, must ask again", n)
	}

	if _, err := c.KVDelete(ctx, "k", 0); err != nil {
		t.Fatal(err)
	}
	if res, err := c.KVWatch(ctx, "k", set.Version, time.Minute); err != nil || res.TimedOut || res.Found || res.Version != 0 {
		t.Fatalf("watch of a deleted key: %+v, %v", res, err)
	}

	cctx, cancel := context.WithCancel(ctx)
	go func() {
		res, err := c.KVWatch(cctx, "k", 0, time.Hour)
		done <- outcome{res, err}
	}()
	before = watches()
	waitFor(t, "the watch at the leader", 10*time.Second, func() bool { return watches() > before })
	cancel()
	if got := <-done; !errors.Is(got.err, context.Canceled) {
		t.Fatalf("a watch whose context ended: %+v, %v", got.res, got.err)
	}

	if _, err := c.KVWatch(ctx, "two words", 0, time.Second); !errors.Is(err, client.ErrInvalid) {
		t.Fatalf("a watch of a bad key: %v", err)
	}
}
