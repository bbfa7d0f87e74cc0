package integration

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/internal/proccluster"
	"github.com/raftmaster/raftmaster/rpc"
)

// postWithID posts body to path on addr with the request id id, following
// the leader redirect, and decodes the answer into out.
func postWithID(t *testing.T, addr, path, id string, body, out any) int {
	t.Helper()
	b, _ := json.Marshal(body)
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if id != "" {
		req.Header.Set(rpc.HeaderRequestID, id)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode
}

// A trainer whose save-model grant has expired and passed to another must
// not be told "granted" again when it retries its first request: two
// trainers would save at once.
func TestSaveModelRetryAfterLeaseMoved(t *testing.T) {
	needsProcesses(t)
	c := proccluster.Start(t, proccluster.Options{})
	c.WaitReady()
	addr := follower(c).APIAddr // the redirect is part of the path
	reqA := uuid.NewString() + "/1"
	save := func(trainer, id string) bool {
		var out rpc.SaveModelResponse
		if st := postWithID(t, addr, rpc.PathSaveModel, id, rpc.SaveModelRequest{TrainerID: trainer, BlockDur: rpc.Duration(2 * time.Second)}, &out); st != http.StatusOK {
			t.Fatalf("save-model request of %s: HTTP %d", trainer, st)
		}
		return out.Granted
	}
	if !save("A", reqA) {
		t.Fatal("A's first request was not granted")
	}
	if !save("A", reqA) {
		t.Fatal("A's retry while it holds the lease was not granted")
	}
	// B asks until A's lease has run out and B holds it.
	c.WaitFor("B to get the save-model lease", time.Minute, func() bool {
		return save("B", uuid.NewString()+"/1")
	})
	if save("A", reqA) {
		t.Fatal("A's retried request answered granted while B holds the lease")
	}
	var st rpc.StatusResponse
	c.WaitFor("a status", 30*time.Second, func() bool {
		var err error
		st, err = proccluster.Status(t.Context(), c.Leader().APIAddr)
		return err == nil
	})
	if st.FSM.SaveHolder != "B" {
		t.Fatalf("save-model holder %q, want B", st.FSM.SaveHolder)
	}
}

// As in the original, a group that does not fill up in time calls every
// member's timeout callback and stays open: a late member still completes
// it. JoinWithDeadline is the hard deadline that fails the group instead.
func TestAllgatherLateMember(t *testing.T) {
	needsProcesses(t)
	c := proccluster.Start(t, proccluster.Options{})
	c.WaitReady()
	const members = 3
	var readies atomic.Int32
	late := make(chan int, members)
	var ws []client.Watcher
	join := func(i int) {
		cl := newClient(t, client.WithAddr(c.Procs[i%len(c.Procs)].APIAddr))
		w, err := cl.JoinWithTimeout("late", uuid.New(), members, i,
			func() { readies.Add(1) },
			func(err error) {
				if err != client.ErrAllGatherTimeoutExceeded {
					t.Errorf("member %d: timeout callback with %v", i, err)
				}
				late <- i
			}, 2*time.Second)
		if err != nil {
			t.Fatalf("member %d: join: %v", i, err)
		}
		ws = append(ws, w)
	}
	join(0)
	join(1)
	for range members - 1 {
		select {
		case <-late:
		case <-time.After(time.Minute):
			t.Fatal("the timeout callback was not called on every member of the late group")
		}
	}
	join(2)
	for i, w := range ws {
		select {
		case res := <-w.C:
			if res.Err != nil || len(res.Data) != members || res.Rank != i {
				t.Fatalf("member %d: %+v, want all %d members' data at rank %d", i, res, members, i)
			}
		case <-time.After(time.Minute):
			t.Fatalf("member %d: no result", i)
		}
	}
	if n := readies.Load(); n != members {
		t.Fatalf("ready called %d times, want %d", n, members)
	}

	// The hard deadline fails the group for every member.
	var fails atomic.Int32
	for i := range 2 {
		cl := newClient(t, client.WithAddr(c.Procs[i].APIAddr))
		w, err := cl.JoinWithDeadline("strict", uuid.New(), members, i, nil,
			func(error) { fails.Add(1) }, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case res := <-w.C:
			if res.Err != client.ErrAllGatherTimeoutExceeded {
				t.Fatalf("member %d of the strict group: %v, want ErrAllGatherTimeoutExceeded", i, res.Err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("member %d of the strict group: no result", i)
		}
	}
	if fails.Load() != 2 {
		t.Fatalf("timeout callback called %d times on the strict group, want 2", fails.Load())
	}
}
