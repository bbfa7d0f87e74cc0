package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/rpc"
)

// CallSession sends a write under the Client's session, opening it first,
// and says which session that was. Once the session has ended, a report
// on what it held fails, nothing applied, and a call that asks for a
// grant goes under a new session; a Client without sessions says 0.
func TestCallSessionNamesTheSession(t *testing.T) {
	local, url := sessionServer(t, 4, 1, nil)
	c := newClient(t, client.WithAddr(url), client.WithSessionTTL(time.Minute))
	ctx := context.Background()
	var resp rpc.GetTaskResponse
	s1, err := c.CallSession(ctx, rpc.PathTaskGet, rpc.GetTaskRequest{}, &resp)
	if err != nil {
		t.Fatal(err)
	}
	if s1 == 0 || s1 != c.Session() || resp.Task.Session != s1 {
		t.Fatalf("CallSession went under session %d, the client's is %d, the task is held by %d", s1, c.Session(), resp.Task.Session)
	}
	if info, ok := local.FSM().Session(s1); !ok || len(info.Tasks) != 1 || info.Tasks[0].Meta.ID != resp.Task.Meta.ID {
		t.Fatalf("session %d in the state: %+v, %v; want it holding task %d", s1, info, ok, resp.Task.Meta.ID)
	}

	// The session ends: the finish is refused, and said to be of it.
	end := func(id uint64) {
		t.Helper()
		if r, err := local.Apply(ctx, &fsm.ExpireSessions{IDs: []uint64{id}}); err != nil || r.Ended != 1 {
			t.Fatalf("ending session %d: %+v, %v", id, r, err)
		}
	}
	end(s1)
	var tr rpc.TaskResponse
	s, err := c.CallSession(ctx, rpc.PathTaskFinished, rpc.TaskRequest{Meta: resp.Task.Meta}, &tr)
	if !errors.Is(err, client.ErrSessionExpired) || s != s1 {
		t.Fatalf("finishing the task of ended session %d: session %d, %v; want ErrSessionExpired of it", s1, s, err)
	}
	if ts, err := local.FSM().Task("", resp.Task.Meta.ID); err != nil || ts.Queue != "todo" {
		t.Fatalf("the task of the ended session: %+v, %v; want it todo", ts, err)
	}

	// A lease goes under a new session, also when the session ends
	// while the client still takes it for open.
	s2, err := c.CallSession(ctx, rpc.PathTaskGet, rpc.GetTaskRequest{}, &resp)
	if err != nil || s2 == 0 || s2 == s1 || s2 != c.Session() || resp.Task.Session != s2 {
		t.Fatalf("a lease after session %d ended: under session %d, held by %d, the client's is %d, %v", s1, s2, resp.Task.Session, c.Session(), err)
	}
	end(s2)
	s3, err := c.CallSession(ctx, rpc.PathTaskGet, rpc.GetTaskRequest{}, &resp)
	if err != nil || s3 == 0 || s3 == s2 || s3 != c.Session() || resp.Task.Session != s3 {
		t.Fatalf("a lease after session %d ended: under session %d, held by %d, the client's is %d, %v", s2, s3, resp.Task.Session, c.Session(), err)
	}

	plain := newClient(t, client.WithAddr(url), client.WithoutSession())
	var lease rpc.GetTaskResponse
	s, err = plain.CallSession(ctx, rpc.PathTaskGet, rpc.GetTaskRequest{}, &lease)
	if err != nil || s != 0 || lease.Task.Meta.ID == 0 || lease.Task.Session != 0 {
		t.Fatalf("a client without sessions: session %d, task %d held by %d, %v", s, lease.Task.Meta.ID, lease.Task.Session, err)
	}
}
