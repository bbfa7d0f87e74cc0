package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/rpc"
)

func TestTaskLifecycle(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	e.setDataset(3, fsm.DatasetParams{ChunksPerTask: 2, TaskTimeout: time.Minute, FailureMax: 1})

	var got rpc.GetTaskResponse
	e.ok(rpc.PathTaskGet, rpc.GetTaskRequest{Pass: 0}, &got)
	if got.Task.Meta.ID != 1 || got.Task.Meta.Epoch != 1 || len(got.Task.Chunks) != 2 {
		t.Fatalf("first task %+v", got.Task)
	}
	if c := got.Task.Chunks[1]; c.Path != "/data/f1" || c.Records != 10 {
		t.Errorf("chunk %+v", c)
	}

	var rr rpc.TaskResponse
	e.ok(rpc.PathTaskRenew, rpc.TaskRequest{Meta: got.Task.Meta}, &rr)
	if rr.Ignored || time.Duration(rr.Lease) != time.Minute {
		t.Errorf("renew: %+v, want a lease of the task timeout, 1m", rr)
	}
	e.ok(rpc.PathTaskFailed, rpc.TaskRequest{Meta: got.Task.Meta}, &rr)
	if rr.Ignored {
		t.Error("failure ignored")
	}
	// A stale failure report of the same lease has no effect.
	e.ok(rpc.PathTaskFailed, rpc.TaskRequest{Meta: got.Task.Meta}, &rr)
	if !rr.Ignored {
		t.Error("stale failure not ignored")
	}

	var second rpc.GetTaskResponse
	e.ok(rpc.PathTaskGet, rpc.GetTaskRequest{Pass: 0}, &second)
	if second.Task.Meta.ID != 2 || len(second.Task.Chunks) != 1 {
		t.Fatalf("second task %+v", second.Task)
	}
	e.ok(rpc.PathTaskFinished, rpc.TaskRequest{Meta: second.Task.Meta}, &rr)
	if rr.Ignored {
		t.Error("finish ignored")
	}
	ts, err := e.local.FSM().Task(fsm.DefaultJob, 2)
	if err != nil || ts.Queue != "done" {
		t.Errorf("task 2: %+v %v", ts, err)
	}
}

func TestGetTaskDedup(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	e.setDataset(4, fsm.DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Minute})
	client := uuid.New()

	var a, b, c rpc.GetTaskResponse
	e.ok(rpc.PathTaskGet, rpc.GetTaskRequest{}, &a, reqID(client, 1)...)
	before := e.state()
	e.ok(rpc.PathTaskGet, rpc.GetTaskRequest{}, &b, reqID(client, 1)...)
	if a.Task.Meta != b.Task.Meta {
		t.Fatalf("retry leased %+v, first %+v", b.Task.Meta, a.Task.Meta)
	}
	if after := e.state(); after.hash != before.hash {
		t.Error("a retried request changed the state")
	}
	e.ok(rpc.PathTaskGet, rpc.GetTaskRequest{}, &c, reqID(client, 2)...)
	if c.Task.Meta.ID == a.Task.Meta.ID {
		t.Fatalf("a new request id got the same task %+v", c.Task.Meta)
	}
	if st := e.local.FSM().Stats(fsm.DefaultJob); st.Pending != 2 {
		t.Errorf("%d pending tasks, want 2", st.Pending)
	}
}

func TestSaveModel(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	var r rpc.SaveModelResponse
	e.ok(rpc.PathSaveModel, rpc.SaveModelRequest{TrainerID: "t1", BlockDur: rpc.Duration(time.Minute)}, &r)
	if !r.Granted {
		t.Fatal("first request not granted")
	}
	e.ok(rpc.PathSaveModel, rpc.SaveModelRequest{TrainerID: "t2", BlockDur: rpc.Duration(time.Minute)}, &r)
	if r.Granted {
		t.Fatal("second trainer granted while t1 holds the lease")
	}
	e.clock.Advance(2 * time.Minute)
	e.ok(rpc.PathSaveModel, rpc.SaveModelRequest{TrainerID: "t2", BlockDur: rpc.Duration(time.Minute)}, &r)
	if !r.Granted {
		t.Fatal("not granted after the lease expired")
	}
}

func TestAllgatherJoinLeave(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	a, b := uuid.New(), uuid.New()
	var ja, jb rpc.JoinResponse
	e.ok(rpc.PathAllgatherJoin, map[string]any{"group": "g", "member": a, "num_peers": 2, "data": map[string]int{"port": 1}}, &ja)
	e.ok(rpc.PathAllgatherJoin, map[string]any{"group": "g", "member": b, "num_peers": 2, "data": "b", "timeout": "5m"}, &jb)
	if ja.Generation == 0 || jb.Generation <= ja.Generation {
		t.Fatalf("generations %d, %d", ja.Generation, jb.Generation)
	}
	r := e.get(watchPath("g", a, ja.Generation, "0s"))
	var w rpc.WatchResponse
	r.decode(t, &w)
	if r.status != http.StatusOK || w.Status != rpc.WatchComplete || w.Rank != 0 || len(w.Data) != 2 ||
		string(w.Data[0]) != `{"port":1}` || string(w.Data[1]) != `"b"` {
		t.Fatalf("watch: %d %s", r.status, r.body)
	}

	var lr rpc.LeaveResponse
	e.ok(rpc.PathAllgatherLeave, rpc.LeaveRequest{Group: "g", Member: a}, &lr)
	if lr.Ignored {
		t.Error("leave ignored")
	}
	e.ok(rpc.PathAllgatherLeave, rpc.LeaveRequest{Group: "g", Member: a}, &lr)
	if !lr.Ignored {
		t.Error("second leave not ignored")
	}
	gs := e.local.FSM().Groups(fsm.DefaultJob)
	if len(gs) != 1 || gs[0].NumPeers != 2 || !gs[0].Members[0].Left {
		t.Errorf("groups %+v", gs)
	}
}
