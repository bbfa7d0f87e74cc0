package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
	"github.com/raftmaster/raftmaster/internal/procs"
)

// localCluster serves one in-process FSM behind the real HTTP handler and
// describes it as a Cluster of one node, for tests that need no
// processes.
func localCluster(t *testing.T) (*Cluster, *apitest.Local) {
	t.Helper()
	local := apitest.NewLocal()
	ts := httptest.NewUnstartedServer(nil)
	local.API = ts.Listener.Addr().String()
	ts.Config.Handler = httpapi.NewHandler(local, httpapi.Config{}, hclog.NewNullLogger())
	ts.Start()
	t.Cleanup(ts.Close)
	return &Cluster{Backend: BackendRaft, Procs: []*procs.Proc{{ID: local.ID, APIAddr: local.API}}}, local
}

// dataset writes a dataset of n one-chunk tasks in a test directory.
func dataset(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tasks.recordio")
	if err := WriteDataset(path, n); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestBenchPassesAccountForEveryTask: the fixed workload of raftmaster
// bench leases and finishes every task of every pass exactly once, two
// writes per task, and leases nothing of the pass after the last.
func TestBenchPassesAccountForEveryTask(t *testing.T) {
	c, local := localCluster(t)
	o := Options{Nodes: 1, Clients: 3, Tasks: 25, Passes: 2}
	path := dataset(t, o.Tasks)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := o.runPasses(ctx, c, path)
	if err != nil {
		t.Fatal(err)
	}
	if want := 2 * o.Tasks * o.Passes; r.Ops != want {
		t.Errorf("%d operations, want %d: two per task per pass", r.Ops, want)
	}
	if r.Backend != BackendRaft || r.Nodes != 1 || r.Clients != 3 || r.Tasks != 25 || r.Passes != 2 {
		t.Errorf("result describes %+v, not the run", r)
	}
	if r.OpsPerSec <= 0 || r.GetP50 == "-" || r.GetP99 == "-" || r.FinishP50 == "-" || r.FinishP99 == "-" {
		t.Errorf("figures missing: %+v", r)
	}
	st := local.FSM().Stats(fsm.DefaultJob)
	if st.Pass != o.Passes || st.Pending != 0 || st.Todo != o.Tasks {
		t.Errorf("after %d passes the job is at pass %d with %d tasks to do and %d leased; want pass %d, %d to do, none leased",
			o.Passes, st.Pass, st.Todo, st.Pending, o.Passes, o.Tasks)
	}
}

// TestBenchDispatchWithoutLimitGoesOnToTheNextPass: the suite's trainers
// run pass after pass over one dataset.
func TestBenchDispatchWithoutLimitGoesOnToTheNextPass(t *testing.T) {
	c, local := localCluster(t)
	const tasks = 4
	if _, err := c.SetDataset(dataset(t, tasks), time.Minute, time.Minute); err != nil {
		t.Fatal(err)
	}
	cl, err := c.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var d Dispatch
	var ops []Op
	record := func(op Op, t0, t1 time.Time) {
		if t1.Before(t0) {
			t.Errorf("%v recorded from %v to the earlier %v", op, t0, t1)
		}
		ops = append(ops, op)
	}
	for range 2*tasks + 1 {
		if err := d.Pair(context.Background(), cl, record, nil); err != nil {
			t.Fatal(err)
		}
	}
	if want := slices.Repeat([]Op{GetTask, TaskFinished}, 2*tasks+1); !slices.Equal(ops, want) {
		t.Errorf("recorded %v, want %v", ops, want)
	}
	if st := local.FSM().Stats(fsm.DefaultJob); st.Pass != 2 || st.Done != 1 || st.Pending != 0 {
		t.Errorf("at pass %d with %d done and %d leased, want pass 2 with 1 done and none leased", st.Pass, st.Done, st.Pending)
	}
}

// TestBenchReaderWritesOncePerTask: a Reader finishes each task with the
// write that leases the next, goes on to the next pass when a finish ends
// the pass, and its held task is finished by Release.
func TestBenchReaderWritesOncePerTask(t *testing.T) {
	c, local := localCluster(t)
	const tasks = 4
	if _, err := c.SetDataset(dataset(t, tasks), time.Minute, time.Minute); err != nil {
		t.Fatal(err)
	}
	cl, err := c.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var d Dispatch
	var r Reader
	finished, writes := 0, 0
	record := func(t0, t1 time.Time) {
		if t1.Before(t0) {
			t.Errorf("a finish recorded from %v to the earlier %v", t0, t1)
		}
		finished++
	}
	for finished < 2*tasks+1 {
		if err := d.Step(context.Background(), &r, cl, record, nil); err != nil {
			t.Fatal(err)
		}
		if writes++; writes > 100 {
			t.Fatalf("%d writes for %d tasks finished", writes, finished)
		}
	}
	// One write per task, and a GetTask that finishes nothing at the start
	// of each of the three passes.
	if want := 2*tasks + 1 + 3; writes != want {
		t.Errorf("%d writes for %d tasks, want %d", writes, finished, want)
	}
	if !r.Holding() {
		t.Error("the reader holds no task after a finish that leased one")
	}
	if err := d.Release(&r, cl); err != nil {
		t.Fatal(err)
	}
	if r.Holding() {
		t.Error("the reader still holds its task after Release")
	}
	if st := local.FSM().Stats(fsm.DefaultJob); st.Pass != 2 || st.Done != 2 || st.Pending != 0 {
		t.Errorf("at pass %d with %d done and %d leased, want pass 2 with 2 done and none leased", st.Pass, st.Done, st.Pending)
	}
}

// TestBenchDispatchStopsWithItsContext: a trainer waiting for the others
// to finish a pass stops when its context ends.
func TestBenchDispatchStopsWithItsContext(t *testing.T) {
	c, _ := localCluster(t)
	if _, err := c.SetDataset(dataset(t, 1), time.Minute, time.Minute); err != nil {
		t.Fatal(err)
	}
	holder, err := c.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if _, err := holder.GetTask(0); err != nil { // the only task of pass 0, never finished
		t.Fatal(err)
	}
	cl, err := c.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	d := Dispatch{Passes: 2}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err = d.Pair(ctx, cl, func(Op, time.Time, time.Time) { t.Error("a write was recorded") }, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Pair = %v, want the context's end", err)
	}
}

// TestBenchJSONKeys pins the keys of raftmaster bench --json, which
// operators' scripts read.
func TestBenchJSONKeys(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteJSON(&buf, []Result{{Backend: BackendRaft}}); err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("output %s: %v", buf.Bytes(), err)
	}
	var keys []string
	for k := range rows[0] {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := []string{"backend", "clients", "get_task_p50", "get_task_p99", "nodes", "ops", "ops_per_sec", "passes", "ratio",
		"seconds", "task_finished_p50", "task_finished_p99", "tasks_per_pass"}
	if !slices.Equal(keys, want) {
		t.Errorf("keys %v, want %v", keys, want)
	}
}

// TestBenchOptionsBounds: options out of bounds are refused before
// anything starts.
func TestBenchOptionsBounds(t *testing.T) {
	ok := Options{Nodes: 3, Clients: 8, Tasks: 2000, Passes: 1}
	if err := ok.Check(); err != nil {
		t.Fatalf("the defaults are refused: %v", err)
	}
	for _, o := range []Options{
		{Nodes: 0, Clients: 8, Tasks: 2000, Passes: 1},
		{Nodes: 10, Clients: 8, Tasks: 2000, Passes: 1},
		{Nodes: 3, Clients: 0, Tasks: 2000, Passes: 1},
		{Nodes: 3, Clients: 1001, Tasks: 2000, Passes: 1},
		{Nodes: 3, Clients: 8, Tasks: 0, Passes: 1},
		{Nodes: 3, Clients: 8, Tasks: 1_000_001, Passes: 1},
		{Nodes: 3, Clients: 8, Tasks: 2000, Passes: 0},
		{Nodes: 3, Clients: 8, Tasks: 2000, Passes: 101},
	} {
		if err := o.Check(); err == nil {
			t.Errorf("%+v accepted", o)
		}
		if _, err := Compare(context.Background(), o); err == nil {
			t.Errorf("Compare ran %+v", o)
		}
	}
}
