package client_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
	"github.com/raftmaster/raftmaster/rpc"
)

// admin is a Local backend that records the membership changes asked of
// it.
type admin struct {
	*apitest.Local
	mu    sync.Mutex
	calls []string
}

func (a *admin) record(s string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, s)
}

func (a *admin) AddMember(_ context.Context, req rpc.AddMemberRequest) error {
	a.record("add " + req.ID + " " + req.RaftAddr + " " + req.APIAddr)
	return nil
}

func (a *admin) RemoveMember(_ context.Context, id string) error {
	a.record("remove " + id)
	return nil
}

func (a *admin) Transfer(_ context.Context, id string) error {
	a.record("transfer " + id)
	return nil
}

// TestAdmin checks the operator calls.
func TestAdmin(t *testing.T) {
	b := &admin{Local: apitest.NewLocal()}
	ts := startServer(t, b, nil)
	c := newClient(t, client.WithAddr(ts.URL))

	if err := c.Health(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.RequestSaveModel("t", time.Minute); err != nil || !ok {
		t.Fatal(ok, err)
	}
	st, err := c.Status()
	if err != nil {
		t.Fatal(err)
	}
	if st.NodeID != "local" || st.FSM.SaveHolder != "t" || st.AppliedIndex == 0 {
		t.Fatalf("status %+v", st)
	}
	stale, err := c.StatusStale()
	if err != nil || stale.NodeID != "local" {
		t.Fatalf("stale status %+v, %v", stale, err)
	}
	m, err := c.Members()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Members) != 1 || m.Members[0].ID != "local" || !m.Members[0].Leader {
		t.Fatalf("members %+v", m)
	}
	ds, err := c.DebugState(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	if ds.NodeID != "local" || ds.AppliedIndex != b.FSM().AppliedIndex() || ds.Hash != b.FSM().StateHash() {
		t.Fatalf("debug state %+v, want index %d hash %s", ds, b.FSM().AppliedIndex(), b.FSM().StateHash())
	}

	if err := c.AddMember(rpc.AddMemberRequest{ID: "n2", RaftAddr: "127.0.0.1:7002", APIAddr: "127.0.0.1:8002"}); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveMember("n2"); err != nil {
		t.Fatal(err)
	}
	// The earlier names call the same endpoints.
	if err := c.AddNode("n3", "127.0.0.1:7003", "127.0.0.1:8003"); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveNode("n3"); err != nil {
		t.Fatal(err)
	}
	if err := c.TransferLeadership(""); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	want := []string{"add n2 127.0.0.1:7002 127.0.0.1:8002", "remove n2", "add n3 127.0.0.1:7003 127.0.0.1:8003", "remove n3", "transfer "}
	if len(b.calls) != len(want) {
		t.Fatalf("backend saw %q, want %q", b.calls, want)
	}
	for i := range want {
		if b.calls[i] != want[i] {
			t.Fatalf("backend saw %q, want %q", b.calls, want)
		}
	}
}

// TestHealthUnreachable checks that Health reports a node that does not
// answer, without retrying.
func TestHealthUnreachable(t *testing.T) {
	c := newClient(t, client.WithAddr(deadAddr(t)))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Health(ctx); err == nil {
		t.Fatal("Health of a dead node succeeded")
	}
	if _, err := c.DebugState(deadAddr(t)); err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("DebugState of a dead node: %v, want a connection error", err)
	}
}
