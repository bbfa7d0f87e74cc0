package replica

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/raftnode"
	"github.com/raftmaster/raftmaster/rpc"
)

// startSingle starts a bootstrapped one-node cluster and waits until it
// leads and has registered itself.
func startSingle(t *testing.T) *Replica {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	raftAddr := l.Addr().String()
	l.Close()
	s, err := StartRaft(Config{HTTPAddr: "127.0.0.1:0"}, Raft{Node: raftnode.Config{
		ID: "n1", DataDir: t.TempDir(), RaftAddr: raftAddr,
		Peers:            []raftnode.Peer{{ID: "n1", RaftAddr: raftAddr}},
		HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: time.Second, LeaderLeaseTimeout: 500 * time.Millisecond,
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if s.Node().LeaderReady() && s.Node().FSM().Protocol() == fsm.Protocol && s.Node().Registered() {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for the node to lead, register and raise the protocol level")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// post sends v to path and decodes the error body, if any.
func post(t *testing.T, s *Replica, path string, v any) (int, rpc.Error) {
	t.Helper()
	body, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post("http://"+s.APIAddr()+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var e rpc.Error
	if resp.StatusCode != http.StatusOK {
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatalf("error body %q: %v", b, err)
		}
	}
	return resp.StatusCode, e
}

// TestUnknownMemberIsNotFound: removing, or handing leadership to, a node
// that is not in the cluster answers 404 not_found through the real
// backend, and changes neither the configuration nor the state.
func TestUnknownMemberIsNotFound(t *testing.T) {
	s := startSingle(t)
	f := s.Node().FSM()
	hash, applied := f.StateHash(), f.AppliedIndex()
	for _, tc := range []struct {
		path string
		body any
	}{
		{rpc.PathClusterRemoveMember, rpc.RemoveMemberRequest{ID: "nosuch"}},
		{rpc.PathClusterTransfer, rpc.TransferRequest{ID: "nosuch"}},
	} {
		status, e := post(t, s, tc.path, tc.body)
		if status != http.StatusNotFound || e.Code != rpc.CodeNotFound || e.Message == "" {
			t.Errorf("POST %s: %d %+v, want 404 %q with a message", tc.path, status, e, rpc.CodeNotFound)
		}
	}
	servers, err := s.Node().Members()
	if err != nil || len(servers) != 1 || servers[0].Name != "n1" || !servers[0].Leader {
		t.Fatalf("servers %+v, %v; want n1 alone, leading", servers, err)
	}
	if f.StateHash() != hash || f.AppliedIndex() != applied {
		t.Fatalf("state changed: index %d -> %d", applied, f.AppliedIndex())
	}
}
