package integration

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/internal/proccluster"
)

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestReachedClientWaitsThroughFullRestart kills every node of a cluster
// that a client has reached: its next write waits, well past the
// first-contact timeout, says once that it waits for a leader, and
// succeeds once the nodes are back.
func TestReachedClientWaitsThroughFullRestart(t *testing.T) {
	needsProcesses(t)
	c := proccluster.Start(t, proccluster.Options{})
	var logs syncBuffer
	const firstContact = time.Second
	cl := newClient(t, client.WithAddrs(c.APIAddrs()...), client.WithFirstContactTimeout(firstContact),
		client.WithLogger(hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})))
	if _, err := cl.RequestSaveModel("trainer-0", time.Second); err != nil {
		t.Fatal(err)
	}
	for _, p := range c.Procs {
		c.Kill(p)
	}
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		_, err := cl.RequestSaveModel("trainer-1", time.Second)
		done <- err
	}()
	c.WaitFor("the client to say it waits for a leader", time.Minute, func() bool {
		return strings.Contains(logs.String(), "waiting for the cluster's leader")
	})
	// The outage outlasts the first-contact timeout, which must not end
	// the call of a client that reached the cluster.
	c.WaitFor("the outage to outlast the first-contact timeout", time.Minute, func() bool {
		select {
		case err := <-done:
			t.Fatalf("the write ended while every node was down: %v", err)
		default:
		}
		return time.Since(start) > 3*firstContact
	})
	for _, p := range c.Procs {
		c.Restart(p)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("write after a full restart: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the write did not end within 2 minutes of the restart")
	}
	if n := strings.Count(logs.String(), "waiting for the cluster's leader"); n != 1 {
		t.Fatalf("the wait for a leader logged %d times, want once:\n%s", n, logs.String())
	}
}
