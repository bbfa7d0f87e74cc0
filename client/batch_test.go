package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
	"github.com/raftmaster/raftmaster/rpc"
)

// TestGetTasksReadsAPassInBatches: GetTasks leases several tasks in one
// call and reports the batch before with the next, each finish's outcome
// in order; a pass of 7 tasks read 3 at a time costs 4 writes, the last
// only finishing, every task once.
func TestGetTasksReadsAPassInBatches(t *testing.T) {
	path := writeRecords(t, 7, 1)
	local := apitest.NewLocal()
	var gets atomic.Int64
	ts := startServer(t, local, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == rpc.PathTaskGet {
				gets.Add(1)
			}
			h.ServeHTTP(w, r)
		})
	})
	c := newClient(t, client.WithAddr(ts.URL))
	if _, err := c.SetDatasetWithParams([]string{path}, client.DatasetParams{ChunksPerTask: 1}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	seen := map[int]bool{}
	var held []client.TaskMeta
	for {
		tasks, outcomes, err := c.GetTasks(ctx, 0, 3, held)
		if len(outcomes) != len(held) {
			t.Fatalf("%d outcomes for %d finishes", len(outcomes), len(held))
		}
		for i, o := range outcomes {
			if !o.Answered || o.Err != nil || o.Ignored {
				t.Fatalf("the finish of %+v: %+v", held[i], o)
			}
		}
		if errors.Is(err, client.ErrPassBefore) {
			break
		}
		if err != nil {
			t.Fatalf("GetTasks: %v", err)
		}
		held = held[:0]
		for _, task := range tasks {
			if seen[task.Meta.ID] {
				t.Fatalf("task %d leased twice", task.Meta.ID)
			}
			seen[task.Meta.ID] = true
			held = append(held, task.Meta)
		}
	}
	if len(seen) != 7 || gets.Load() != 4 {
		t.Fatalf("read %d of 7 tasks in %d calls, want 4", len(seen), gets.Load())
	}
	if st := local.FSM().Stats(fsm.DefaultJob); st.Pass != 1 || st.Done != 0 {
		t.Fatalf("after the pass: %+v", st)
	}
}

// TestGetTasksRetriedAfterALostAnswer: a batch whose answer is lost is
// retried with its request id and answered with the same tasks, leased
// once.
func TestGetTasksRetriedAfterALostAnswer(t *testing.T) {
	path := writeRecords(t, 5, 1)
	local := apitest.NewLocal()
	var lost atomic.Bool
	ts := startServer(t, local, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != rpc.PathTaskGet || lost.Swap(true) {
				h.ServeHTTP(w, r)
				return
			}
			h.ServeHTTP(httptest.NewRecorder(), r) // applied, answer lost
			answerError(w, rpc.CodeUnknownOutcome)
		})
	})
	c := newClient(t, client.WithAddr(ts.URL))
	if _, err := c.SetDatasetWithParams([]string{path}, client.DatasetParams{ChunksPerTask: 1}); err != nil {
		t.Fatal(err)
	}
	tasks, _, err := c.GetTasks(context.Background(), 0, 4, nil)
	if err != nil || len(tasks) != 4 {
		t.Fatalf("GetTasks retried: %d tasks, %v", len(tasks), err)
	}
	ids := map[int]bool{}
	for _, task := range tasks {
		if ids[task.Meta.ID] || task.Meta.Epoch != 1 {
			t.Fatalf("tasks %+v: want 4 tasks, each leased once", tasks)
		}
		ids[task.Meta.ID] = true
	}
	if st := local.FSM().Stats(fsm.DefaultJob); st.Pending != 4 || st.Todo != 1 {
		t.Fatalf("after the retried batch: %+v, want 4 pending and 1 todo", st)
	}
}

// TestGetTasksBadInput: a batch out of bounds fails before anything is
// sent.
func TestGetTasksBadInput(t *testing.T) {
	c := newClient(t, client.WithAddr("http://127.0.0.1:1"))
	for _, n := range []int{0, client.MaxTasksPerGet + 1} {
		if _, _, err := c.GetTasks(context.Background(), 0, n, nil); err == nil {
			t.Fatalf("GetTasks of %d tasks: no error", n)
		}
	}
	if _, _, err := c.GetTasks(context.Background(), 0, 1, make([]client.TaskMeta, client.MaxTasksPerGet+1)); err == nil {
		t.Fatal("GetTasks of too many finishes: no error")
	}
}

// TestRenewLeases: RenewLeases renews a batch held without a session in
// one write, each outcome in order, a stale lease not failing the others.
func TestRenewLeases(t *testing.T) {
	path := writeRecords(t, 4, 1)
	local := apitest.NewLocal()
	var renews atomic.Int64
	ts := startServer(t, local, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == rpc.PathTaskRenew {
				renews.Add(1)
			}
			h.ServeHTTP(w, r)
		})
	})
	c := newClient(t, client.WithAddr(ts.URL))
	if _, err := c.SetDatasetWithParams([]string{path}, client.DatasetParams{ChunksPerTask: 1}); err != nil {
		t.Fatal(err)
	}
	tasks, _, err := c.GetTasks(context.Background(), 0, 3, nil)
	if err != nil || len(tasks) != 3 {
		t.Fatalf("GetTasks: %d tasks, %v", len(tasks), err)
	}
	stale := client.TaskMeta{ID: tasks[1].Meta.ID, Epoch: tasks[1].Meta.Epoch + 2}
	out, err := c.RenewLeases(context.Background(), []client.TaskMeta{tasks[0].Meta, stale, tasks[2].Meta})
	if err != nil || len(out) != 3 || renews.Load() != 1 {
		t.Fatalf("RenewLeases: %+v, %v in %d writes", out, err, renews.Load())
	}
	if out[0].Err != nil || out[0].Lease <= 0 || !errors.Is(out[1].Err, client.ErrStaleEpoch) || out[2].Err != nil || out[2].Lease <= 0 {
		t.Fatalf("RenewLeases outcomes %+v", out)
	}
	if _, err := c.RenewLeases(context.Background(), nil); err == nil {
		t.Fatal("RenewLeases of no lease: no error")
	}
}
