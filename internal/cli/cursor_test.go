package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
	"github.com/raftmaster/raftmaster/rpc"
)

// TestCursorCommands: cursor list shows a job's cursors as a table or
// JSON, inspect one with its partly consumed tasks, restore puts the
// job's dispatch back to one, and delete deletes one, once; a cursor the
// job does not have, or a bad ID, is a clear error.
func TestCursorCommands(t *testing.T) {
	const job = "cj"
	local := apitest.NewLocal()
	ts := httptest.NewServer(httpapi.NewHandler(local, httpapi.Config{}, nil))
	t.Cleanup(ts.Close)
	local.API = strings.TrimPrefix(ts.URL, "http://")
	cursor := func(args ...string) (int, string, string) {
		return runCLI(append([]string{"cursor", args[0], "--addr", local.API, "--retry", "5s", "--job", job}, args[1:]...)...)
	}
	ctx := context.Background()
	apply := func(c fsm.Command) *fsm.Result {
		t.Helper()
		res, err := local.Apply(ctx, c)
		if err != nil || res.Err() != nil {
			t.Fatalf("%T: %v %v", c, err, res.Err())
		}
		return res
	}
	chunks := []fsm.Chunk{{Path: "/data/a", Records: 5}, {Path: "/data/b", Records: 5}, {Path: "/data/c", Records: 5}}
	if res, err := local.SetDataset(ctx, job, fsm.RequestID{}, fsm.DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Minute}, nil, chunks); err != nil || res.Err() != nil {
		t.Fatal(res, err)
	}
	req := func() fsm.Header { return fsm.Header{Job: job, Request: fsm.RequestID{Client: uuid.New(), Seq: 1}} }
	a := apply(&fsm.GetTask{Header: req()}).Task
	b := apply(&fsm.GetTask{Header: req()}).Task
	apply(&fsm.TaskFinished{Header: req(), Meta: a.Meta})
	first := apply(&fsm.CommitCursor{Header: req(), Step: 100, Progress: []fsm.TaskProgress{{Meta: b.Meta, Consumed: 2}}}).Cursor
	second := apply(&fsm.CommitCursor{Header: req(), Step: 200}).Cursor

	code, out, errOut := cursor("list")
	if code != 0 {
		t.Fatalf("cursor list: exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "ID  STEP  PASS  FINISHED  IN FLIGHT  RECORDS") || !strings.Contains(out, "2 cursors of job cj") {
		t.Errorf("cursor list:\n%s", out)
	}
	if f := strings.Fields(lineWith(out, " 100 ")); len(f) < 7 || f[0] != fmt.Sprint(first.ID) || f[2] != "0" || f[3] != "1/3" || f[4] != "1" || f[5] != "7" {
		t.Errorf("the first cursor's line %q in:\n%s", f, out)
	}
	code, out, errOut = cursor("list", "--json")
	var list rpc.ListCursorsResponse
	if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil || list.Job != job || len(list.Cursors) != 2 || list.Cursors[1].ID != second.ID {
		t.Fatalf("cursor list --json: exit %d, %v: %s%s", code, err, out, errOut)
	}

	code, out, errOut = cursor("inspect", fmt.Sprint(first.ID))
	if code != 0 || !strings.Contains(out, "step:       100") || !strings.Contains(out, "1 finished, 1 partly consumed, of 3") ||
		!strings.Contains(lineWith(out, fmt.Sprintf("%d  ", b.Meta.ID)), "2") {
		t.Fatalf("cursor inspect: exit %d:\n%s%s", code, out, errOut)
	}
	code, out, errOut = cursor("inspect", fmt.Sprint(first.ID), "-o", "json")
	var one rpc.CursorResponse
	if err := json.Unmarshal([]byte(out), &one); code != 0 || err != nil || len(one.Tasks) != 1 || one.Tasks[0].Consumed != 2 {
		t.Fatalf("cursor inspect -o json: exit %d, %v: %s%s", code, err, out, errOut)
	}

	code, out, errOut = cursor("restore", fmt.Sprint(first.ID))
	if code != 0 || !strings.Contains(out, fmt.Sprintf("job cj restored to cursor %d (step 100): pass 0", first.ID)) || !strings.Contains(out, "1 leases revoked") {
		t.Fatalf("cursor restore: exit %d, %q, %q", code, out, errOut)
	}
	if again := apply(&fsm.GetTask{Header: req()}).Task; again.Meta.ID != b.Meta.ID || again.Skip != 2 {
		t.Fatalf("first task after the restore: %+v, want task %d skipping 2", again, b.Meta.ID)
	}

	if code, out, errOut := cursor("delete", fmt.Sprint(second.ID)); code != 0 || out != fmt.Sprintf("cursor %d of job cj deleted\n", second.ID) {
		t.Fatalf("cursor delete: exit %d, %q, %q", code, out, errOut)
	}
	if code, out, errOut := cursor("delete", fmt.Sprint(second.ID)); code != 0 || !strings.Contains(out, "nothing changed") {
		t.Fatalf("second delete: exit %d, %q, %q", code, out, errOut)
	}
	for _, cmd := range []string{"inspect", "restore"} {
		if code, _, errOut := cursor(cmd, fmt.Sprint(second.ID)); code == 0 || !strings.Contains(errOut, fmt.Sprintf("job cj has no cursor %d", second.ID)) {
			t.Errorf("cursor %s of a deleted cursor: exit %d, %q", cmd, code, errOut)
		}
	}
	for _, args := range [][]string{{"inspect"}, {"restore", "abc"}, {"delete", "0"}, {"inspect", "1", "2"}} {
		if code, _, errOut := cursor(args...); code == 0 || !strings.Contains(errOut, "cursor ID") {
			t.Errorf("cursor %q: exit %d, %q", args, code, errOut)
		}
	}
}
