package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
	"github.com/raftmaster/raftmaster/rpc"
)

// sessionLocal is a Local backend that keeps sessions: its keeper answers
// from the state alone, so a session lives until the test ends it.
type sessionLocal struct{ *apitest.Local }

func (l sessionLocal) Sessions() (httpapi.SessionKeeper, bool) { return stateKeeper{l.Local}, true }

type stateKeeper struct{ l *apitest.Local }

func (k stateKeeper) KeepAlive(id uint64, _ [16]byte, _ []rpc.SessionProgress) (time.Duration, error) {
	ttl, _, open := k.l.FSM().SessionOpen(id)
	if !open {
		return 0, fsm.ErrSessionExpired
	}
	return ttl, nil
}

func (stateKeeper) Touch(uint64) {}

func (k stateKeeper) Remaining(id uint64) (time.Duration, bool) {
	ttl, _, open := k.l.FSM().SessionOpen(id)
	return ttl, open
}

// CallSession sends a write under the Client's session, opening it first,
// and says which session that was; once the session has ended, the next
// write goes under a new one, and a Client without sessions says 0.
func TestCallSessionNamesTheSession(t *testing.T) {
	b := sessionLocal{apitest.NewLocal()}
	ts := startServer(t, b, nil)
	b.API = ts.Listener.Addr().String()
	c := newClient(t, client.WithAddr(ts.URL), client.WithSessionTTL(time.Second))
	if _, err := c.SetDatasetWithParams([]string{writeRecords(t, 4, 1)}, client.DatasetParams{ChunksPerTask: 1, Strict: true}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var resp rpc.GetTaskResponse
	s1, err := c.CallSession(ctx, rpc.PathTaskGet, rpc.GetTaskRequest{}, &resp)
	if err != nil {
		t.Fatal(err)
	}
	if s1 == 0 || s1 != c.Session() || resp.Task.Session != s1 {
		t.Fatalf("CallSession went under session %d, the client's is %d, the task is held by %d", s1, c.Session(), resp.Task.Session)
	}
	if info, ok := b.FSM().Session(s1); !ok || len(info.Tasks) != 1 || info.Tasks[0].Meta.ID != resp.Task.Meta.ID {
		t.Fatalf("session %d in the state: %+v, %v; want it holding task %d", s1, info, ok, resp.Task.Meta.ID)
	}

	// The session ends: the next write is refused at its first attempt
	// and goes again under a new session.
	if _, err := b.Apply(ctx, &fsm.ExpireSessions{IDs: []uint64{s1}}); err != nil {
		t.Fatal(err)
	}
	var tr rpc.TaskResponse
	s2, err := c.CallSession(ctx, rpc.PathTaskFinished, rpc.TaskRequest{Meta: resp.Task.Meta}, &tr)
	if !errors.Is(err, client.ErrStaleEpoch) {
		t.Fatalf("finishing the task of an ended session: %v, want ErrStaleEpoch", err)
	}
	if s2 == 0 || s2 == s1 || s2 != c.Session() {
		t.Fatalf("the write after session %d ended went under session %d, the client's is %d", s1, s2, c.Session())
	}

	plain := newClient(t, client.WithAddr(ts.URL), client.WithoutSession())
	var lease rpc.GetTaskResponse
	s, err := plain.CallSession(ctx, rpc.PathTaskGet, rpc.GetTaskRequest{}, &lease)
	if err != nil || s != 0 || lease.Task.Meta.ID == 0 || lease.Task.Session != 0 {
		t.Fatalf("a client without sessions: session %d, task %d held by %d, %v", s, lease.Task.Meta.ID, lease.Task.Session, err)
	}
}
