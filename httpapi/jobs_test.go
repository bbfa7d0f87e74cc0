package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/rpc"
)

// chunksOf returns a client-indexed dataset of n one-record chunks.
func chunksOf(name string, n int) rpc.SetDatasetRequest {
	req := rpc.SetDatasetRequest{ChunksPerTask: 1}
	for i := range n {
		req.Chunks = append(req.Chunks, rpc.Chunk{Path: "/data/" + name, Offset: int64(i), Records: 1})
	}
	return req
}

// TestJobRoutes: the job-scoped routes address their job; the plain routes
// are the default job; two jobs never see each other's dataset, passes or
// save-model lease; a deleted job's name starts from nothing.
func TestJobRoutes(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	client := uuid.New()
	seq := uint64(0)
	next := func() []string { seq++; return reqID(client, seq) }

	var ds rpc.SetDatasetResponse
	e.ok(rpc.JobPath("a", rpc.PathDataset), chunksOf("a", 3), &ds, next()...)
	if ds.Ignored || ds.Tasks != 3 {
		t.Fatalf("job a's dataset: %+v", ds)
	}
	e.ok(rpc.JobPath("b", rpc.PathDataset), chunksOf("b", 5), &ds, next()...)
	if ds.Ignored || ds.Tasks != 5 {
		t.Fatalf("job b's dataset (a's must not count): %+v", ds)
	}
	// The default job has none.
	wantError(t, e.post(rpc.PathTaskGet, rpc.GetTaskRequest{Pass: 0}, next()...), rpc.HTTPStatus(rpc.CodeNoDataset), rpc.CodeNoDataset)

	// Job a's pass ends after its 3 tasks; b's pass is untouched.
	for range 3 {
		var got rpc.GetTaskResponse
		e.ok(rpc.JobPath("a", rpc.PathTaskGet), rpc.GetTaskRequest{Pass: 0}, &got, next()...)
		if got.Task.Chunks[0].Path != "/data/a" {
			t.Fatalf("job a was given %q", got.Task.Chunks[0].Path)
		}
		e.ok(rpc.JobPath("a", rpc.PathTaskFinished), rpc.TaskRequest{Meta: got.Task.Meta}, nil, next()...)
	}
	var info rpc.Job
	r := e.get(rpc.JobRoute(rpc.PathJob, "a"))
	r.decode(t, &info)
	if info.Pass != 1 || info.Done != 0 || info.Todo != 3 {
		t.Fatalf("job a after its pass: %+v", info)
	}
	e.get(rpc.JobRoute(rpc.PathJob, "b")).decode(t, &info)
	if info.Pass != 0 || info.Todo != 5 {
		t.Fatalf("job b changed with a's pass: %+v", info)
	}

	// One save-model lease per job.
	var save rpc.SaveModelResponse
	e.ok(rpc.JobPath("a", rpc.PathSaveModel), rpc.SaveModelRequest{TrainerID: "ta", BlockDur: rpc.Duration(60e9)}, &save, next()...)
	if !save.Granted {
		t.Fatal("job a's save-model lease was refused")
	}
	e.ok(rpc.JobPath("b", rpc.PathSaveModel), rpc.SaveModelRequest{TrainerID: "tb", BlockDur: rpc.Duration(60e9)}, &save, next()...)
	if !save.Granted {
		t.Fatal("job b's save-model lease was refused while job a's is held")
	}

	var jobs rpc.JobsResponse
	e.get(rpc.PathJobs).decode(t, &jobs)
	if len(jobs.Jobs) != 2 || jobs.Jobs[0].Name != "a" || jobs.Jobs[1].Name != "b" || jobs.Limits.MaxJobs == 0 {
		t.Fatalf("jobs: %+v", jobs)
	}

	// Delete a; its name starts from nothing, and b goes on.
	e.ok(rpc.JobRoute(rpc.PathJobDelete, "a"), rpc.JobRequest{}, nil, next()...)
	wantError(t, e.get(rpc.JobRoute(rpc.PathJob, "a")), http.StatusNotFound, rpc.CodeUnknownJob)
	wantError(t, e.post(rpc.JobRoute(rpc.PathJobDelete, "a"), rpc.JobRequest{}, next()...), http.StatusNotFound, rpc.CodeUnknownJob)
	e.ok(rpc.JobPath("a", rpc.PathDataset), chunksOf("a2", 2), &ds, next()...)
	if ds.Ignored || ds.Tasks != 2 {
		t.Fatalf("re-created job a's dataset: %+v", ds)
	}
	e.get(rpc.JobRoute(rpc.PathJob, "b")).decode(t, &info)
	if info.Todo != 5 || info.SaveHolder != "tb" {
		t.Fatalf("job b changed when a was deleted: %+v", info)
	}

	// Explicit creation, then again: ignored.
	var jr rpc.JobResponse
	e.ok(rpc.JobRoute(rpc.PathJobCreate, "c"), rpc.JobRequest{}, &jr, next()...)
	if jr.Ignored {
		t.Fatal("creating job c was ignored")
	}
	e.ok(rpc.JobRoute(rpc.PathJobCreate, "c"), rpc.JobRequest{}, &jr, next()...)
	if !jr.Ignored {
		t.Fatal("creating job c twice was not ignored")
	}
}

// TestJobNameRules: a job name that is not a DNS label is refused before
// anything changes, on every kind of route.
func TestJobNameRules(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	before := e.state()
	for _, bad := range []string{"Upper", "-dash", "dash-", "under_score", "a.b"} {
		wantError(t, e.post(rpc.JobPath(bad, rpc.PathDataset), chunksOf("x", 1), reqID(uuid.New(), 1)...), http.StatusBadRequest, rpc.CodeInvalid)
		wantError(t, e.get(rpc.JobRoute(rpc.PathJob, bad)), http.StatusBadRequest, rpc.CodeInvalid)
		wantError(t, e.post(rpc.JobRoute(rpc.PathJobCreate, bad), rpc.JobRequest{}, reqID(uuid.New(), 1)...), http.StatusBadRequest, rpc.CodeInvalid)
		wantError(t, e.get(rpc.JobPath(bad, rpc.PathAllgatherWatch)+"?group=g&member="+uuid.NewString()+"&generation=1&wait=1ms"), http.StatusBadRequest, rpc.CodeInvalid)
	}
	if after := e.state(); after != before {
		t.Fatalf("bad job names changed the state: %+v -> %+v", before, after)
	}
}

// TestLimitExceeded: a request past a limit is answered limit_exceeded,
// naming the limit, and changes nothing.
func TestLimitExceeded(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	res, err := e.local.Apply(context.Background(), &fsm.SetLimits{Limits: fsm.Limits{MaxJobTasks: 2, MaxJobs: 2}})
	if err != nil || res.Err() != nil {
		t.Fatalf("set limits: %v %v", err, res.Err())
	}
	before := e.state()
	r := e.post(rpc.JobPath("a", rpc.PathDataset), chunksOf("a", 3), reqID(uuid.New(), 1)...)
	if msg := wantError(t, r, rpc.HTTPStatus(rpc.CodeLimit), rpc.CodeLimit).Message; !strings.Contains(msg, "max_job_tasks") {
		t.Fatalf("message %q does not name the limit", msg)
	}
	// The refused command is a log entry (the applied index moves) that
	// changes nothing.
	if after := e.state(); after.hash != before.hash {
		t.Fatalf("a refused dataset changed the state: %+v -> %+v", before, after)
	}
	for _, job := range []string{"a", "b"} {
		e.ok(rpc.JobRoute(rpc.PathJobCreate, job), rpc.JobRequest{}, nil, reqID(uuid.New(), 1)...)
	}
	before = e.state()
	r = e.post(rpc.JobRoute(rpc.PathJobCreate, "c"), rpc.JobRequest{}, reqID(uuid.New(), 1)...)
	if msg := wantError(t, r, rpc.HTTPStatus(rpc.CodeLimit), rpc.CodeLimit).Message; !strings.Contains(msg, "max_jobs") {
		t.Fatalf("message %q does not name the limit", msg)
	}
	if after := e.state(); after.hash != before.hash {
		t.Fatalf("a refused job changed the state: %+v -> %+v", before, after)
	}
}
