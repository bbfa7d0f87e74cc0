package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/rpc"
)

// cursorPath is path (rpc.PathCursor or rpc.PathCursorRestore) of cursor
// id of job.
func cursorPath(job, path string, id uint64) string {
	return strings.Replace(rpc.JobPath(job, path), "{"+rpc.CursorParam+"}", fmt.Sprint(id), 1)
}

// A trainer commits a cursor with its progress; the cursor is listed and
// shown with its partly consumed task; a restore hands that task out
// again from its first record not consumed, and revokes the lease.
func TestCursorCommitRestoreOverHTTP(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	e.setDataset(3, fsm.DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Minute, FailureMax: 2})
	var a, b rpc.GetTaskResponse
	e.ok(rpc.PathTaskGet, rpc.GetTaskRequest{}, &a, reqID(uuid.New(), 1)...)
	e.ok(rpc.PathTaskGet, rpc.GetTaskRequest{}, &b, reqID(uuid.New(), 1)...)
	e.ok(rpc.PathTaskFinished, rpc.TaskRequest{Meta: a.Task.Meta}, nil, reqID(uuid.New(), 1)...)

	var rep rpc.ReportProgressResponse
	e.ok(rpc.PathTaskProgress, rpc.ReportProgressRequest{Progress: []rpc.TaskProgress{{Meta: b.Task.Meta, Consumed: 4}}}, &rep, reqID(uuid.New(), 1)...)
	if rep.Recorded != 1 {
		t.Fatalf("progress recorded %d, want 1", rep.Recorded)
	}
	commit := reqID(uuid.New(), 1)
	var c rpc.CommitCursorResponse
	e.ok(rpc.PathCursors, rpc.CommitCursorRequest{Step: 42, TrainerID: "t0"}, &c, commit...)
	if c.Cursor.ID != 1 || c.Cursor.Step != 42 || c.Cursor.Finished != 1 || c.Cursor.InFlight != 1 || c.Cursor.Records != 14 || c.Cursor.Generation != 1 {
		t.Fatalf("cursor %+v", c.Cursor)
	}
	// A retry answers the same cursor and commits no other.
	var again rpc.CommitCursorResponse
	e.ok(rpc.PathCursors, rpc.CommitCursorRequest{Step: 42, TrainerID: "t0"}, &again, commit...)
	if again.Cursor != c.Cursor {
		t.Fatalf("retry answered %+v, want %+v", again.Cursor, c.Cursor)
	}

	r := e.get(rpc.PathCursors)
	var list rpc.ListCursorsResponse
	r.decode(t, &list)
	if r.status != http.StatusOK || len(list.Cursors) != 1 || list.Generation != 1 || list.Cursors[0] != c.Cursor {
		t.Fatalf("list: %d %s", r.status, r.body)
	}
	r = e.get(cursorPath(fsm.DefaultJob, rpc.PathCursor, 1))
	var one rpc.CursorResponse
	r.decode(t, &one)
	if r.status != http.StatusOK || len(one.Tasks) != 1 || one.Tasks[0] != (rpc.CursorTask{Task: b.Task.Meta.ID, Consumed: 4}) {
		t.Fatalf("inspect: %d %s", r.status, r.body)
	}

	var res rpc.RestoreCursorResponse
	e.ok(cursorPath(fsm.DefaultJob, rpc.PathCursorRestore, 1), struct{}{}, &res, reqID(uuid.New(), 1)...)
	if res.Generation != 2 || res.Revoked != 1 {
		t.Fatalf("restore: %+v", res)
	}
	// The revoked lease cannot be renewed.
	wantError(t, e.post(rpc.PathTaskRenew, rpc.TaskRequest{Meta: b.Task.Meta}, reqID(uuid.New(), 1)...), http.StatusConflict, rpc.CodeStaleEpoch)
	var again2 rpc.GetTaskResponse
	e.ok(rpc.PathTaskGet, rpc.GetTaskRequest{}, &again2, reqID(uuid.New(), 1)...)
	if again2.Task.Meta.ID != b.Task.Meta.ID || again2.Task.Skip != 4 {
		t.Fatalf("first task after the restore: %+v, want task %d skipping 4", again2.Task, b.Task.Meta.ID)
	}
	// A commit fenced at generation 1 is refused now.
	wantError(t, e.post(rpc.PathCursors, rpc.CommitCursorRequest{Generation: 1}, reqID(uuid.New(), 1)...), http.StatusConflict, rpc.CodeCursorFenced)

	var del rpc.DeleteCursorResponse
	r = e.do(http.MethodDelete, cursorPath(fsm.DefaultJob, rpc.PathCursor, 1), nil, reqID(uuid.New(), 1)...)
	r.decode(t, &del)
	if r.status != http.StatusOK || !del.Deleted {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	wantError(t, e.get(cursorPath(fsm.DefaultJob, rpc.PathCursor, 1)), http.StatusNotFound, rpc.CodeUnknownCursor)
	wantError(t, e.post(cursorPath(fsm.DefaultJob, rpc.PathCursorRestore, 1), struct{}{}, reqID(uuid.New(), 1)...), http.StatusNotFound, rpc.CodeUnknownCursor)
	wantError(t, e.get(cursorPath("nojob", rpc.PathCursor, 1)), http.StatusNotFound, rpc.CodeUnknownJob)
	wantError(t, e.get(rpc.JobPath("nojob", rpc.PathCursors)), http.StatusNotFound, rpc.CodeUnknownJob)
}

// Malformed cursor requests are refused before anything is proposed.
func TestCursorBadInputOverHTTP(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	e.setDataset(2, fsm.DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Minute, FailureMax: 2})
	before := e.state()
	for _, tc := range []struct {
		method, path, body string
	}{
		{http.MethodPost, rpc.PathTaskProgress, `{"progress":[]}`},
		{http.MethodPost, rpc.PathTaskProgress, `{"progress":[{"meta":{"id":0,"epoch":1},"consumed":1}]}`},
		{http.MethodPost, rpc.PathTaskProgress, `{"progress":[{"meta":{"id":1,"epoch":1},"consumed":-1}]}`},
		{http.MethodPost, rpc.PathTaskProgress, `{"progress":[{"meta":{"id":1,"epoch":1},"consumed":11}]}`},
		{http.MethodPost, rpc.PathCursors, `{"step":1,"trainer_id":"` + strings.Repeat("x", 600) + `"}`},
		{http.MethodPost, rpc.PathCursors, `{"step":"one"}`},
		{http.MethodPost, strings.Replace(rpc.PathCursorRestore, "{id}", "0", 1), `{}`},
		{http.MethodPost, strings.Replace(rpc.PathCursorRestore, "{id}", "x", 1), `{}`},
		{http.MethodDelete, strings.Replace(rpc.PathCursor, "{id}", "-1", 1), ``},
	} {
		r := e.do(tc.method, tc.path, []byte(tc.body), reqID(uuid.New(), 1)...)
		if r.status/100 != 4 {
			t.Errorf("%s %s %s: %d %s, want a 4xx", tc.method, tc.path, tc.body, r.status, r.body)
		}
		if e.state().hash != before.hash {
			t.Fatalf("%s %s %s changed the state", tc.method, tc.path, tc.body)
		}
	}
}
