package raftnode

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/fsm"
)

// The leader ends a session whose keep-alives stopped, and the task it
// held goes back to todo, counting a failure, on every replica.
func TestLeaderExpiresASessionThatStopsKeepingAlive(t *testing.T) {
	c := newTestCluster(t, 3)
	waitFor(t, "protocol level 6", func() bool { return c.leader().FSM().Protocol() >= fsm.Protocol6 })
	c.setDataset(fsm.RequestID{Client: uuid.New(), Seq: 1}, params(time.Hour), dataset(3))
	id := c.apply(&fsm.OpenSession{Header: fsm.Header{Request: fsm.RequestID{Client: uuid.New(), Seq: 1}}, TTL: 3 * time.Second}).Session
	task := c.apply(&fsm.GetTask{Header: fsm.Header{Request: fsm.RequestID{Client: uuid.New(), Seq: 1}, Session: id}}).Task
	if task == nil || task.Session != id {
		t.Fatalf("GetTask under session %d answered %+v", id, task)
	}
	leader := c.leader()
	for _, f := range c.followers() {
		if _, ok := f.Sessions(); ok {
			t.Fatalf("follower %s has a session tracker", f.ID())
		}
	}
	tracker, ok := leader.Sessions()
	if !ok {
		t.Fatal("the leader has no session tracker")
	}
	for range 5 {
		if _, err := tracker.KeepAlive(id, [16]byte{}, nil); err != nil {
			t.Fatalf("KeepAlive: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // a client's keep-alive period
	}
	// The keep-alives stop.
	waitFor(t, "the session to end and its task to go back to todo", func() bool {
		ts, err := leader.FSM().Task(fsm.DefaultJob, task.Meta.ID)
		_, _, open := leader.FSM().SessionOpen(id)
		return !open && err == nil && ts.Queue == "todo" && ts.Failures == 1
	})
	c.converged()
	if _, err := tracker.KeepAlive(id, [16]byte{}, nil); err == nil {
		t.Fatal("KeepAlive of the ended session succeeded")
	}
}

// A session that keeps alive on the new leader after a fail-over lives on,
// and the new leader checkpoints it once, so that the leader after it
// gives it a fresh TTL too.
func TestSessionKeptAliveSurvivesAFailover(t *testing.T) {
	c := newTestCluster(t, 3)
	waitFor(t, "protocol level 6", func() bool { return c.leader().FSM().Protocol() >= fsm.Protocol6 })
	id := c.apply(&fsm.OpenSession{Header: fsm.Header{Request: fsm.RequestID{Client: uuid.New(), Seq: 1}}, TTL: 3 * time.Second}).Session
	c.converged()
	old := c.leader()
	for i, n := range c.nodes {
		if n == old {
			if err := n.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			c.nodes[i] = nil
		}
	}
	leader := c.leader()
	waitFor(t, "a keep-alive answered by the new leader", func() bool {
		tracker, ok := leader.Sessions()
		if !ok {
			return false
		}
		_, err := tracker.KeepAlive(id, [16]byte{}, nil)
		if errors.Is(err, fsm.ErrSessionExpired) {
			t.Fatalf("the new leader ended the session: %v", err)
		}
		return err == nil
	})
	waitFor(t, "the session's checkpoint in the new term", func() bool {
		latest, _ := leader.FSM().SessionGraces()
		info, ok := leader.FSM().Session(id)
		if !ok {
			t.Fatal("the session ended")
		}
		return info.Seen >= latest
	})
}
