package client_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
)

// cursorDataset sets a dataset of tasks tasks of perTask records each, "0"
// to "perTask-1" in each, in job (the default job when ""), and returns
// the server's address.
func cursorDataset(t *testing.T, local *apitest.Local, job string, tasks, perTask int) string {
	t.Helper()
	var paths []string
	for range tasks {
		paths = append(paths, writeRecords(t, perTask, 1<<20))
	}
	ts := startServer(t, local, nil)
	failureMax := 3
	resp, err := jobClient(t, ts.URL, job).SetDatasetWithParams(paths, client.DatasetParams{ChunksPerTask: 1, FailureMax: &failureMax})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Tasks != tasks {
		t.Fatalf("%d tasks, want %d", resp.Tasks, tasks)
	}
	return ts.URL
}

// jobClient is a client of job ("" for the default job) at addr.
func jobClient(t *testing.T, addr, job string, opts ...client.Option) *client.Client {
	t.Helper()
	opts = append([]client.Option{client.WithAddr(addr)}, opts...)
	if job != "" {
		opts = append(opts, client.WithJob(job))
	}
	return newClient(t, opts...)
}

// rangeOf is the records "from" to "to-1".
func rangeOf(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, strconv.Itoa(i))
	}
	return out
}

// sorted returns rs sorted.
func sorted(rs []string) []string {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b string) int {
		x, _ := strconv.Atoi(a)
		y, _ := strconv.Atoi(b)
		return x - y
	})
	return rs
}

// TestCursorOneTrainerRestore checks the one-trainer protocol: a cursor
// committed after part of a pass, restored by a new trainer after the old
// one read on, makes the new trainer read exactly the records the cursor
// had not counted.
func TestCursorOneTrainerRestore(t *testing.T) {
	const perTask = 10
	ctx := context.Background()
	local := apitest.NewLocal()
	addr := cursorDataset(t, local, "", 2, perTask)
	c := jobClient(t, addr, "", client.WithBuffer(4*perTask))
	c.StartGetRecords(0)
	nextRecords(t, c, perTask+3) // one task and 3 records of the other
	cur, err := c.CommitCursor(ctx, 13)
	if err != nil {
		t.Fatal(err)
	}
	if cur.Step != 13 || cur.Pass != 0 || cur.Finished != 1 || cur.InFlight != 1 || cur.Records != perTask+3 {
		t.Fatalf("cursor %+v, want step 13, pass 0, 1 task finished, 1 in flight, %d records", cur, perTask+3)
	}
	// The trainer reads on past the checkpoint, then dies.
	if n := restOfPass(t, c); n != perTask-3 {
		t.Fatalf("%d records after the checkpoint, want %d", n, perTask-3)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	r := jobClient(t, addr, "")
	res, err := r.RestoreCursor(ctx, cur.ID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Cursor.ID != cur.ID || res.Cursor.Pass != 0 {
		t.Fatalf("restored %+v, want cursor %d at pass 0", res, cur.ID)
	}
	r.StartGetRecords(res.Cursor.Pass)
	var got []string
	for {
		rec, err := r.NextRecord()
		if errors.Is(err, client.ErrPassBefore) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(rec))
	}
	if want := rangeOf(3, perTask); !slices.Equal(got, want) {
		t.Fatalf("records after the restore %q, want %q: those the cursor had not counted", got, want)
	}
}

// TestCursorSeveralTrainers checks the protocol of several trainers in a
// named job: each reports its progress, one commits; the cursor is
// listed and shown with each trainer's task, and restored at another
// number of trainers it hands out exactly the records not consumed.
func TestCursorSeveralTrainers(t *testing.T) {
	const perTask, job = 10, "cursors"
	ctx := context.Background()
	local := apitest.NewLocal()
	addr := cursorDataset(t, local, job, 3, perTask)
	// No buffer: a reader leases its next task only once the training
	// loop has taken the last record of its current one.
	t1, t2 := jobClient(t, addr, job), jobClient(t, addr, job)
	t1.StartGetRecords(0)
	nextRecords(t, t1, 3)
	t2.StartGetRecords(0)
	nextRecords(t, t2, 5)
	for i, c := range []*client.Client{t1, t2} {
		n, err := c.ReportProgress(ctx)
		if err != nil || n != 1 {
			t.Fatalf("trainer %d: ReportProgress: %d recorded, %v; want 1", i, n, err)
		}
	}
	cur, err := t1.CommitCursor(ctx, 8)
	if err != nil {
		t.Fatal(err)
	}
	if cur.Finished != 0 || cur.InFlight != 2 || cur.Records != 8 {
		t.Fatalf("cursor %+v, want 2 tasks in flight, 8 records", cur)
	}
	list, err := t2.Cursors(ctx)
	if err != nil || list.Job != job || len(list.Cursors) != 1 || list.Cursors[0] != cur {
		t.Fatalf("Cursors: %+v, %v; want job %s with cursor %+v", list, err, job, cur)
	}
	one, err := t2.Cursor(ctx, cur.ID)
	if err != nil {
		t.Fatal(err)
	}
	var consumed []int64
	for _, ct := range one.Tasks {
		consumed = append(consumed, ct.Consumed)
	}
	slices.Sort(consumed)
	if one.Cursor != cur || !slices.Equal(consumed, []int64{3, 5}) {
		t.Fatalf("Cursor: %+v, want the cursor with tasks consumed 3 and 5", one)
	}
	if _, err := t2.Cursor(ctx, cur.ID+1); !errors.Is(err, client.ErrUnknownCursor) {
		t.Fatalf("Cursor of an unknown id: %v, want ErrUnknownCursor", err)
	}

	// One new trainer resumes alone.
	r := jobClient(t, addr, job, client.WithBuffer(100))
	res, err := r.RestoreCursor(ctx, cur.ID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Revoked != 2 {
		t.Fatalf("restore revoked %d leases, want 2", res.Revoked)
	}
	r.StartGetRecords(res.Cursor.Pass)
	got := nextRecords(t, r, 3*perTask-8)
	want := append(append(rangeOf(3, perTask), rangeOf(5, perTask)...), rangeOf(0, perTask)...)
	if !slices.Equal(sorted(got), sorted(want)) {
		t.Fatalf("records after the restore %q, want %q", sorted(got), sorted(want))
	}
	if _, err := r.NextRecord(); !errors.Is(err, client.ErrPassBefore) {
		t.Fatalf("after the rest of the pass: %v, want ErrPassBefore", err)
	}

	deleted, err := r.DeleteCursor(ctx, cur.ID)
	if err != nil || !deleted {
		t.Fatalf("DeleteCursor: %v, %v; want true", deleted, err)
	}
	if deleted, err = r.DeleteCursor(ctx, cur.ID); err != nil || deleted {
		t.Fatalf("DeleteCursor again: %v, %v; want false", deleted, err)
	}
}

// TestCursorFences checks that a commit fenced with a generation a later
// restore passed, or with a trainer that does not hold the save-model
// lease, is refused with ErrCursorFenced.
func TestCursorFences(t *testing.T) {
	ctx := context.Background()
	local := apitest.NewLocal()
	addr := cursorDataset(t, local, "", 2, 10)
	c := jobClient(t, addr, "")
	cur, err := c.CommitCursor(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.RestoreCursor(ctx, cur.ID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Generation <= cur.Generation {
		t.Fatalf("generation %d after the restore, want more than %d", res.Generation, cur.Generation)
	}
	if _, err := c.CommitCursor(ctx, 2, client.WithCursorGeneration(cur.Generation)); !errors.Is(err, client.ErrCursorFenced) {
		t.Fatalf("commit fenced at the generation before the restore: %v, want ErrCursorFenced", err)
	}
	if _, err := c.CommitCursor(ctx, 2, client.WithCursorGeneration(res.Generation)); err != nil {
		t.Fatalf("commit fenced at the current generation: %v", err)
	}

	other := jobClient(t, addr, "")
	if ok, err := other.RequestSaveModel("other", time.Minute); err != nil || !ok {
		t.Fatalf("RequestSaveModel: %v, %v", ok, err)
	}
	if _, err := c.CommitCursor(ctx, 3, client.WithCursorTrainer("me")); !errors.Is(err, client.ErrCursorFenced) {
		t.Fatalf("commit of a trainer without the save-model lease: %v, want ErrCursorFenced", err)
	}
	if _, err := other.CommitCursor(ctx, 3, client.WithCursorTrainer("other")); err != nil {
		t.Fatalf("commit of the save-model lease's holder: %v", err)
	}
}
