package httpapi_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
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

// TestReplayedLeases: the answer to a retried save-model request or lease
// renewal says how much of the lease remains at the retry, not the length
// the first answer gave, so that the holder does not count on time it
// does not have.
func TestReplayedLeases(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	e.setDataset(2, fsm.DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Minute})
	client := uuid.New()

	var save rpc.SaveModelResponse
	e.ok(rpc.PathSaveModel, rpc.SaveModelRequest{TrainerID: "t1", BlockDur: rpc.Duration(time.Minute)}, &save, reqID(client, 1)...)
	if !save.Granted || save.Replayed || time.Duration(save.Lease) != time.Minute {
		t.Fatalf("save-model grant %+v, want granted for 1m", save)
	}
	var task rpc.GetTaskResponse
	e.ok(rpc.PathTaskGet, rpc.GetTaskRequest{}, &task)
	var renew rpc.TaskResponse
	e.ok(rpc.PathTaskRenew, rpc.TaskRequest{Meta: task.Task.Meta}, &renew, reqID(client, 2)...)
	if time.Duration(renew.Lease) != time.Minute {
		t.Fatalf("renewal %+v, want a lease of 1m", renew)
	}

	e.clock.Advance(20 * time.Second)
	before := e.state()
	var saveAgain rpc.SaveModelResponse
	e.ok(rpc.PathSaveModel, rpc.SaveModelRequest{TrainerID: "t1", BlockDur: rpc.Duration(time.Minute)}, &saveAgain, reqID(client, 1)...)
	if !saveAgain.Granted || !saveAgain.Replayed || time.Duration(saveAgain.Lease) != 40*time.Second || !saveAgain.AppliedAt.Equal(save.AppliedAt) {
		t.Fatalf("retried save-model request 20s later %+v, want the first answer (%v) with 40s of lease left", saveAgain, save.AppliedAt)
	}
	var renewAgain rpc.TaskResponse
	e.ok(rpc.PathTaskRenew, rpc.TaskRequest{Meta: task.Task.Meta}, &renewAgain, reqID(client, 2)...)
	if time.Duration(renewAgain.Lease) != 40*time.Second || !renewAgain.AppliedAt.Equal(renew.AppliedAt) {
		t.Fatalf("retried renewal 20s later %+v, want the first answer (%v) with 40s of lease left", renewAgain, renew.AppliedAt)
	}
	if e.state().hash != before.hash {
		t.Fatal("a retry changed the state")
	}

	// Once the lease is another's, a retry grants nothing and says no
	// lease.
	e.clock.Advance(time.Minute)
	e.ok(rpc.PathSaveModel, rpc.SaveModelRequest{TrainerID: "t2", BlockDur: rpc.Duration(time.Minute)}, &save)
	var lost rpc.SaveModelResponse
	e.ok(rpc.PathSaveModel, rpc.SaveModelRequest{TrainerID: "t1", BlockDur: rpc.Duration(time.Minute)}, &lost, reqID(client, 1)...)
	if lost.Granted || lost.Lease != 0 {
		t.Fatalf("retried save-model request while t2 holds the lease %+v, want not granted, no lease", lost)
	}
	r := e.post(rpc.PathTaskRenew, rpc.TaskRequest{Meta: task.Task.Meta}, reqID(client, 2)...)
	wantError(t, r, http.StatusConflict, rpc.CodeStaleEpoch)
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

// TestGetTaskOfADeletedJob: a GetTask that gives the job_number of an
// earlier answer is answered unknown_job once that job is deleted, even
// after a job of the name is created again, and leases nothing; without
// it, a missing job answers no_dataset, as a job not created yet.
func TestGetTaskOfADeletedJob(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	set := func() {
		if _, err := e.local.SetDataset(context.Background(), "j", fsm.RequestID{}, fsm.DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Minute},
			nil, []fsm.Chunk{{Path: "/data/a", Records: 1}, {Path: "/data/b", Records: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	set()
	path := rpc.JobPath("j", rpc.PathTaskGet)
	var first rpc.GetTaskResponse
	e.ok(path, rpc.GetTaskRequest{}, &first)
	if first.JobNumber == 0 {
		t.Fatalf("GetTask answered no job number: %+v", first)
	}
	var again rpc.GetTaskResponse
	e.ok(path, rpc.GetTaskRequest{JobNumber: first.JobNumber}, &again)
	if again.JobNumber != first.JobNumber {
		t.Fatalf("job number %d, then %d", first.JobNumber, again.JobNumber)
	}
	e.ok(rpc.JobRoute(rpc.PathJobDelete, "j"), rpc.JobRequest{}, nil)
	wantError(t, e.post(path, rpc.GetTaskRequest{JobNumber: first.JobNumber}), http.StatusNotFound, rpc.CodeUnknownJob)
	wantError(t, e.post(path, rpc.GetTaskRequest{}), http.StatusConflict, rpc.CodeNoDataset)
	set()
	wantError(t, e.post(path, rpc.GetTaskRequest{JobNumber: first.JobNumber}), http.StatusNotFound, rpc.CodeUnknownJob)
	if st := e.local.FSM().Stats("j"); st.Pending != 0 {
		t.Fatalf("the job created again leased a task to a reader of the deleted one: %+v", st)
	}
}

// level1 is a backend whose state is at protocol level 1, as in a cluster
// not upgraded yet: it applies commands to an FSM of its own.
type level1 struct {
	*apitest.Local
	mu  sync.Mutex
	f   *fsm.FSM
	idx uint64
}

func (b *level1) FSM() *fsm.FSM { return b.f }

func (b *level1) Apply(_ context.Context, c fsm.Command) (*fsm.Result, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c.Hdr().Now = time.Now().UnixNano()
	b.idx++
	return b.f.ApplyEntry(b.idx, fsm.Encode(c)), nil
}

// TestGetTaskJobNumberBelowProtocol2: a cluster below protocol level 2,
// whose older replicas could not read a GetTask that names the job's
// number, is sent none, and leases as before.
func TestGetTaskJobNumberBelowProtocol2(t *testing.T) {
	b := &level1{f: fsm.New()}
	e := newEnv(t, testConfig(), func(l *apitest.Local) httpapi.Backend { b.Local = l; return b }, nil)
	if _, err := b.Apply(context.Background(), &fsm.SetDataset{Params: fsm.DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Minute},
		Chunks: []fsm.Chunk{{Path: "/data/a", Records: 1}, {Path: "/data/b", Records: 1}}}); err != nil {
		t.Fatal(err)
	}
	var got rpc.GetTaskResponse
	e.ok(rpc.PathTaskGet, rpc.GetTaskRequest{JobNumber: 99}, &got)
	if got.Task.Meta.ID == 0 {
		t.Fatalf("GetTask at protocol level 1: %+v", got)
	}
}
