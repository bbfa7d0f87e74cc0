package client_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
	"github.com/raftmaster/raftmaster/rpc"
)

// twoTasks sets a dataset of two tasks of perTask records each, "0" to
// "perTask-1" in each, and returns a client of it whose record channel
// holds them all.
func twoTasks(t *testing.T, perTask int, wrap func(http.Handler) http.Handler) (*apitest.Local, *client.Client) {
	t.Helper()
	a, b := writeRecords(t, perTask, 1<<20), writeRecords(t, perTask, 1<<20)
	local := apitest.NewLocal()
	ts := startServer(t, local, wrap)
	c := newClient(t, client.WithAddr(ts.URL), client.WithBuffer(4*perTask))
	// A task handed back is dispatched again rather than set aside.
	failureMax := 3
	resp, err := c.SetDatasetWithParams([]string{a, b}, client.DatasetParams{ChunksPerTask: 1, FailureMax: &failureMax})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Tasks != 2 {
		t.Fatalf("%d tasks, want 2", resp.Tasks)
	}
	return local, c
}

// nextRecords takes n records and returns them.
func nextRecords(t *testing.T, c *client.Client, n int) []string {
	t.Helper()
	var out []string
	for range n {
		r, err := c.NextRecord()
		if err != nil {
			t.Fatalf("after %d records: %v", len(out), err)
		}
		out = append(out, string(r))
	}
	return out
}

// restOfPass takes records until the pass ends, and returns how many.
func restOfPass(t *testing.T, c *client.Client) int {
	t.Helper()
	n := 0
	for {
		_, err := c.NextRecord()
		if errors.Is(err, client.ErrPassBefore) {
			return n
		}
		if err != nil {
			t.Fatalf("after %d records: %v", n, err)
		}
		n++
	}
}

// TestReaderFinishesTaskOnceConsumed checks that a task whose records are
// all in the record channel is not reported finished until NextRecord has
// returned the last of them, that the reader meanwhile goes on with the
// next task, and that Progress shows the consumed offsets of the tasks
// held.
func TestReaderFinishesTaskOnceConsumed(t *testing.T) {
	const perTask = 10
	local, c := twoTasks(t, perTask, nil)
	c.StartGetRecords(0)
	nextRecords(t, c, 1)
	// The reader leases the second task while the first one's records wait
	// in the channel.
	waitFor(t, "the reader to lease the second task", 10*time.Second, func() bool {
		// Leased at the cluster, and its answer in the reader's hands.
		return local.FSM().Stats(fsm.DefaultJob).Pending == 2 && client.HeldTasks(c) == 2
	})
	if st := local.FSM().Stats(fsm.DefaultJob); st.Done != 0 {
		t.Fatalf("%d tasks done after 1 record consumed, want 0: a task is finished once consumed, not buffered", st.Done)
	}
	p := c.Progress()
	if len(p) != 1 || p[0].Consumed != 1 {
		t.Fatalf("progress %+v, want one task with 1 record consumed", p)
	}
	first := p[0].Meta

	nextRecords(t, c, perTask-2)
	if st := local.FSM().Stats(fsm.DefaultJob); st.Done != 0 {
		t.Fatalf("%d tasks done with one record of the first task not consumed, want 0", st.Done)
	}
	if p := c.Progress(); len(p) != 1 || p[0].Meta != first || p[0].Consumed != perTask-1 {
		t.Fatalf("progress %+v, want task %v with %d records consumed", p, first, perTask-1)
	}
	nextRecords(t, c, 1)
	waitFor(t, "the first task to be finished", 10*time.Second, func() bool {
		return local.FSM().Stats(fsm.DefaultJob).Done == 1
	})
	waitFor(t, "the finished task to leave the progress", 10*time.Second, func() bool { return len(c.Progress()) == 0 })

	if n := restOfPass(t, c); n != perTask {
		t.Fatalf("%d records of the second task, want %d", n, perTask)
	}
	if st := local.FSM().Stats(fsm.DefaultJob); st.Pass != 1 || st.Failed != 0 {
		t.Fatalf("pass %d, %d failed; want pass 1, none failed", st.Pass, st.Failed)
	}
}

// TestReaderHandsBackTasksNotConsumed checks that a new StartGetRecords
// hands back the tasks whose records were not all consumed, and finishes
// the one that was, although its records were consumed just before.
func TestReaderHandsBackTasksNotConsumed(t *testing.T) {
	const perTask = 10
	local, c := twoTasks(t, perTask, nil)
	c.StartGetRecords(0)
	nextRecords(t, c, 1)
	waitFor(t, "the reader to lease the second task", 10*time.Second, func() bool {
		// Leased at the cluster, and its answer in the reader's hands.
		return local.FSM().Stats(fsm.DefaultJob).Pending == 2 && client.HeldTasks(c) == 2
	})
	// All of the first task, none of the second, then a new pass at once.
	nextRecords(t, c, perTask-1)
	c.StartGetRecords(0)
	if n := restOfPass(t, c); n != perTask {
		t.Fatalf("%d records after StartGetRecords again, want %d: the second task only", n, perTask)
	}
	if st := local.FSM().Stats(fsm.DefaultJob); st.Pass != 1 {
		t.Fatalf("pass %d, want 1", st.Pass)
	}

	// Part of a task, then a new pass: the part is read again.
	c.StartGetRecords(1)
	got := nextRecords(t, c, 3)
	waitFor(t, "the reader to lease the second task", 10*time.Second, func() bool {
		// Leased at the cluster, and its answer in the reader's hands.
		return local.FSM().Stats(fsm.DefaultJob).Pending == 2 && client.HeldTasks(c) == 2
	})
	c.StartGetRecords(1)
	if n := restOfPass(t, c); n != 2*perTask {
		t.Fatalf("%d records after StartGetRecords again, having consumed %q; want %d: both tasks again", n, got, 2*perTask)
	}
}

// TestReaderHonoursSkip checks that a task dispatched with Skip delivers
// its records from Skip on, counts the skipped ones in its consumed
// offset, and is finished once the others are consumed.
func TestReaderHonoursSkip(t *testing.T) {
	const perTask, skip = 10, 4
	local, c := twoTasks(t, perTask, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != rpc.PathTaskGet {
				h.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			body := rec.Body.Bytes()
			if rec.Code == http.StatusOK {
				var resp map[string]any
				if err := json.Unmarshal(body, &resp); err != nil {
					t.Error(err)
				}
				resp["task"].(map[string]any)["skip"] = skip
				body, _ = json.Marshal(resp)
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.Header().Del("Content-Length")
			w.WriteHeader(rec.Code)
			w.Write(body)
		})
	})
	c.StartGetRecords(0)
	got := nextRecords(t, c, 1)
	if got[0] != strconv.Itoa(skip) {
		t.Fatalf("first record %q, want %q: the task skips its first %d", got[0], strconv.Itoa(skip), skip)
	}
	if p := c.Progress(); len(p) != 1 || p[0].Consumed != skip+1 {
		t.Fatalf("progress %+v, want one task with %d records consumed, the skipped ones included", p, skip+1)
	}
	got = append(got, nextRecords(t, c, perTask-skip-1)...)
	var want []string
	for i := skip; i < perTask; i++ {
		want = append(want, strconv.Itoa(i))
	}
	if !bytes.Equal([]byte(joinRecords(got)), []byte(joinRecords(want))) {
		t.Fatalf("records %q of the first task, want %q", got, want)
	}
	waitFor(t, "the first task to be finished", 10*time.Second, func() bool {
		return local.FSM().Stats(fsm.DefaultJob).Done == 1
	})
	if n := restOfPass(t, c); n != perTask-skip {
		t.Fatalf("%d records of the second task, want %d", n, perTask-skip)
	}
}

// joinRecords joins records with commas.
func joinRecords(rs []string) string {
	var b bytes.Buffer
	for i, r := range rs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(r)
	}
	return b.String()
}

// TestReaderCloseFinishesConsumedTask checks that Close reports finished
// a task whose records were all consumed, rather than handing it back
// with the client's other tasks.
func TestReaderCloseFinishesConsumedTask(t *testing.T) {
	const perTask = 10
	local, c := twoTasks(t, perTask, nil)
	c.StartGetRecords(0)
	nextRecords(t, c, 1)
	waitFor(t, "the reader to lease the second task", 10*time.Second, func() bool {
		// Leased at the cluster, and its answer in the reader's hands.
		return local.FSM().Stats(fsm.DefaultJob).Pending == 2 && client.HeldTasks(c) == 2
	})
	nextRecords(t, c, perTask-1)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if st := local.FSM().Stats(fsm.DefaultJob); st.Done != 1 || st.Pending != 0 || st.Todo != 1 {
		t.Fatalf("after Close: %d done, %d pending, %d to do; want the consumed task done and the other to do", st.Done, st.Pending, st.Todo)
	}
}
