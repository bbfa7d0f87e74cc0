package etcdmaster

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/fsm"
)

// The active master ends a session whose keep-alives stopped, and the task
// it held goes back to todo, counting a failure; a standby keeps no
// sessions.
func TestActiveMasterExpiresASessionThatStopsKeepingAlive(t *testing.T) {
	a, b := activeAndStandby(t)
	mustApply(t, a, dataset())
	id := mustApply(t, a, &fsm.OpenSession{Header: fsm.Header{Request: fsm.RequestID{Client: uuid.New(), Seq: 1}}, TTL: 2 * time.Second}).Session
	task := mustApply(t, a, &fsm.GetTask{Header: fsm.Header{Request: fsm.RequestID{Client: uuid.New(), Seq: 1}, Session: id}}).Task
	if task == nil || task.Session != id {
		t.Fatalf("GetTask under session %d answered %+v", id, task)
	}
	if _, ok := b.Sessions(); ok {
		t.Fatal("the standby has a session keeper")
	}
	keeper, ok := a.Sessions()
	if !ok {
		t.Fatal("the active master has no session keeper")
	}
	if _, err := keeper.KeepAlive(id, [16]byte{}, nil); err != nil {
		t.Fatalf("KeepAlive: %v", err)
	}
	waitFor(t, "the session to end and its task to go back to todo", func() bool {
		ts, err := a.FSM().Task(fsm.DefaultJob, task.Meta.ID)
		_, _, open := a.FSM().SessionOpen(id)
		return !open && err == nil && ts.Queue == "todo" && ts.Failures == 1
	})
}
