package fsm

import (
	"slices"
	"testing"
	"time"
)

// scenario is one table-test case: a sequence of commands and checks run
// against a fresh harness, followed by a snapshot round trip.
type scenario struct {
	name string
	run  func(h *harness)
}

func runScenarios(t *testing.T, cases []scenario) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.run(newHarness(t)) })
	}
}

// withParams returns defaultParams changed by fn.
func withParams(fn func(p *DatasetParams)) DatasetParams {
	p := defaultParams
	fn(&p)
	return p
}

func TestTaskQueue(t *testing.T) {
	runScenarios(t, []scenario{
		{"no dataset", func(h *harness) {
			h.fails(&GetTask{Pass: 0}, ErrNoDataset)
			h.fails(&TaskFinished{Meta: TaskMeta{ID: 1, Epoch: 1}}, ErrNoDataset)
			h.fails(&RenewLease{Meta: TaskMeta{ID: 1, Epoch: 1}}, ErrNoDataset)
		}},
		{"chunks per task", func(h *harness) {
			h.setDataset(5, withParams(func(p *DatasetParams) { p.ChunksPerTask = 2 }))
			if st := h.f.Stats(DefaultJob); st.Tasks != 3 || st.Chunks != 5 || st.Todo != 3 {
				h.t.Fatalf("stats %+v, want 3 tasks of 5 chunks", st)
			}
			want := testChunks(5)
			for id, chunks := range [][]Chunk{want[0:2], want[2:4], want[4:5]} {
				r := h.ok(&GetTask{Pass: 0})
				if r.Task.Meta != (TaskMeta{ID: id + 1, Epoch: 1}) || !slices.Equal(r.Task.Chunks, chunks) {
					h.t.Fatalf("task %+v, want id %d with chunks %v", r.Task, id+1, chunks)
				}
			}
			h.fails(&TaskFinished{Meta: TaskMeta{ID: 4, Epoch: 1}}, ErrUnknownTask)
		}},
		{"pass before and after", func(h *harness) {
			h.setDataset(2, defaultParams)
			a, b := h.getTask(0), h.getTask(0)
			h.fails(&GetTask{Pass: 1}, ErrPassAfter)
			h.finish(a)
			h.finish(b)
			if h.f.Pass(DefaultJob) != 1 {
				h.t.Fatalf("pass %d, want 1", h.f.Pass(DefaultJob))
			}
			h.fails(&GetTask{Pass: 0}, ErrPassBefore)
			if m := h.getTask(1); m != (TaskMeta{ID: 1, Epoch: 2}) {
				h.t.Fatalf("pass 1 leased %+v, want task 1 epoch 2", m)
			}
			h.getTask(1)
			h.fails(&GetTask{Pass: 2}, ErrPassAfter)
		}},
		{"a trainer waiting on the next pass takes a task that came back", func(h *harness) {
			h.setDataset(2, defaultParams)
			dead := h.getTask(0) // its trainer dies
			h.finish(h.getTask(0))
			h.fails(&GetTask{Pass: 0}, ErrNoMoreAvailable)
			h.fails(&GetTask{Pass: 1}, ErrPassAfter)
			h.advance(defaultParams.TaskTimeout)
			h.tick()
			r := h.ok(&GetTask{Pass: 1})
			if r.Task.Meta.ID != dead.ID || r.Task.Pass != 0 {
				h.t.Fatalf("task %+v, want task %d of pass 0", r.Task, dead.ID)
			}
			h.fails(&GetTask{Pass: 1}, ErrPassAfter)
			h.finish(r.Task.Meta)
			if h.f.Pass(DefaultJob) != 1 {
				h.t.Fatalf("pass %d, want 1: pass 0 is done", h.f.Pass(DefaultJob))
			}
			if r := h.ok(&GetTask{Pass: 1}); r.Task.Pass != 1 {
				h.t.Fatalf("task %+v, want one of pass 1", r.Task)
			}
		}},
		{"no more available while pending", func(h *harness) {
			h.setDataset(2, defaultParams)
			a, b := h.getTask(0), h.getTask(0)
			h.fails(&GetTask{Pass: 0}, ErrNoMoreAvailable)
			h.finish(a)
			h.fails(&GetTask{Pass: 0}, ErrNoMoreAvailable)
			h.wantTask(b.ID, "pending", 1, 0)
		}},
		{"all failed", func(h *harness) {
			h.setDataset(2, withParams(func(p *DatasetParams) { p.FailureMax = 0 }))
			a, b := h.getTask(0), h.getTask(0)
			h.fail(a)
			h.fails(&GetTask{Pass: 0}, ErrNoMoreAvailable)
			h.fail(b)
			h.fails(&GetTask{Pass: 0}, ErrAllTaskFailed)
			if st := h.f.Stats(DefaultJob); st.Failed != 2 || st.Pass != 0 {
				h.t.Fatalf("stats %+v, want 2 failed in pass 0", st)
			}
		}},
		{"timeout re-dispatches", func(h *harness) {
			h.setDataset(1, defaultParams)
			m := h.getTask(0)
			ts := h.wantTask(m.ID, "pending", 1, 0)
			if ts.Deadline != h.now+int64(10*time.Second) {
				h.t.Fatalf("deadline %d, want now+10s", ts.Deadline)
			}
			if d, ok := h.f.NextDeadline(); !ok || d != ts.Deadline {
				h.t.Fatalf("NextDeadline %d %v, want %d", d, ok, ts.Deadline)
			}
			h.advance(10*time.Second - 1)
			h.tick()
			h.wantTask(m.ID, "pending", 1, 0)
			h.advance(1)
			h.tick()
			h.wantTask(m.ID, "todo", 1, 1)
			if m2 := h.getTask(0); m2 != (TaskMeta{ID: m.ID, Epoch: 2}) {
				h.t.Fatalf("re-dispatched %+v, want epoch 2", m2)
			}
		}},
		{"failureMax moves a task to failed", func(h *harness) {
			h.setDataset(2, withParams(func(p *DatasetParams) { p.FailureMax = 1 }))
			m := h.getTask(0)
			h.fail(m)
			h.wantTask(m.ID, "todo", 1, 1)
			other := h.getTask(0) // the failed task went to the end of todo
			if other.ID == m.ID {
				h.t.Fatalf("failed task re-dispatched before the rest of todo")
			}
			m = h.getTask(0)
			h.advance(10 * time.Second)
			h.tick() // a timeout counts as a failure too
			h.wantTask(m.ID, "failed", 2, 2)
			h.wantTask(other.ID, "todo", 1, 1)
		}},
		{"stale epoch TaskFailed is ignored", func(h *harness) {
			h.setDataset(1, defaultParams)
			m1 := h.getTask(0)
			h.advance(10 * time.Second)
			h.tick()
			m2 := h.getTask(0)
			h.ignored(&TaskFailed{Meta: m1})
			h.ignored(&TaskFailed{Meta: TaskMeta{ID: m1.ID, Epoch: 7}})
			h.wantTask(m2.ID, "pending", 2, 1)
			h.fail(m2)
			h.wantTask(m2.ID, "todo", 2, 2)
			h.ignored(&TaskFailed{Meta: m2}) // no longer pending
		}},
		{"late finish accepted in default mode", func(h *harness) {
			h.setDataset(2, defaultParams)
			m1 := h.getTask(0)
			h.advance(10 * time.Second)
			h.tick()
			m2 := h.getTask(0)
			if m2.ID != 2 {
				h.t.Fatalf("got %+v, want task 2 first", m2)
			}
			m3 := h.getTask(0)
			if m3 != (TaskMeta{ID: m1.ID, Epoch: 2}) {
				h.t.Fatalf("got %+v, want task 1 epoch 2", m3)
			}
			h.finish(m1) // the timed-out trainer finishes after all
			h.wantTask(m1.ID, "done", 2, 0)
			h.ignored(&TaskFinished{Meta: m3}) // no longer pending
			h.fails(&TaskFinished{Meta: TaskMeta{ID: m2.ID, Epoch: 5}}, ErrStaleEpoch)
			h.finish(TaskMeta{ID: m2.ID}) // epoch 0 means any lease
			if h.f.Pass(DefaultJob) != 1 {
				h.t.Fatalf("pass %d, want 1", h.f.Pass(DefaultJob))
			}
		}},
		{"late finish from an earlier pass is ignored", func(h *harness) {
			h.setDataset(1, defaultParams)
			m1 := h.getTask(0)
			h.finish(m1)
			m2 := h.getTask(1)
			h.ignored(&TaskFinished{Meta: m1})
			h.wantTask(m2.ID, "pending", 2, 0)
			h.finish(m2)
			h.wantTask(m2.ID, "todo", 2, 0) // pass 2 began
		}},
		{"strict mode refuses late finish", func(h *harness) {
			h.setDataset(1, withParams(func(p *DatasetParams) { p.Strict = true }))
			m1 := h.getTask(0)
			h.advance(10 * time.Second)
			h.tick()
			h.fails(&TaskFinished{Meta: m1}, ErrStaleEpoch) // in todo
			m2 := h.getTask(0)
			h.fails(&TaskFinished{Meta: m1}, ErrStaleEpoch)
			h.fails(&TaskFinished{Meta: TaskMeta{ID: m1.ID}}, ErrStaleEpoch)
			h.wantTask(m2.ID, "pending", 2, 1)
			h.finish(m2)
			h.fails(&TaskFinished{Meta: m2}, ErrStaleEpoch) // pass 1 now
		}},
		{"renew lease", func(h *harness) {
			h.setDataset(1, defaultParams)
			m := h.getTask(0)
			h.advance(8 * time.Second)
			h.ok(&RenewLease{Meta: m})
			ts := h.wantTask(m.ID, "pending", 1, 0)
			if ts.Deadline != h.now+int64(10*time.Second) {
				h.t.Fatalf("renewed deadline %d, want now+10s", ts.Deadline)
			}
			h.advance(9 * time.Second)
			h.tick()
			h.wantTask(m.ID, "pending", 1, 0)
			h.fails(&RenewLease{Meta: TaskMeta{ID: m.ID, Epoch: 2}}, ErrStaleEpoch)
			h.fails(&RenewLease{Meta: TaskMeta{ID: m.ID, Epoch: 0}}, ErrStaleEpoch)
			h.fails(&RenewLease{Meta: TaskMeta{ID: 2, Epoch: 1}}, ErrUnknownTask)
			h.advance(time.Second)
			h.tick()
			h.wantTask(m.ID, "todo", 1, 1)
			h.fails(&RenewLease{Meta: m}, ErrStaleEpoch) // expired
		}},
		{"pass advance resets failure counts", func(h *harness) {
			h.setDataset(3, withParams(func(p *DatasetParams) { p.FailureMax = 0 }))
			a, b, c := h.getTask(0), h.getTask(0), h.getTask(0)
			h.ok(&TaskFailed{Meta: a})
			h.wantTask(a.ID, "failed", 1, 1)
			h.finish(b)
			h.fail(c)
			// Nothing todo or pending, one done: the next pass starts with
			// every task, the failed ones included, in id order.
			if st := h.f.Stats(DefaultJob); st.Pass != 1 || st.Todo != 3 || st.Failed != 0 || st.Done != 0 {
				h.t.Fatalf("stats %+v, want pass 1 with 3 todo", st)
			}
			for id := 1; id <= 3; id++ {
				h.wantTask(id, "todo", 1, 0)
			}
			if m := h.getTask(1); m != (TaskMeta{ID: 1, Epoch: 2}) {
				h.t.Fatalf("pass 1 began with %+v, want task 1", m)
			}
		}},
		{"pass ends on timeout", func(h *harness) {
			h.setDataset(2, withParams(func(p *DatasetParams) { p.FailureMax = 0 }))
			a, b := h.getTask(0), h.getTask(0)
			h.finish(a)
			h.advance(time.Minute)
			h.tick()
			if st := h.f.Stats(DefaultJob); st.Pass != 1 || st.Todo != 2 {
				h.t.Fatalf("stats %+v, want pass 1 after %+v timed out", st, b)
			}
		}},
		{"clock never runs backwards", func(h *harness) {
			h.setDataset(1, defaultParams)
			m := h.getTask(0)
			deadline := h.now + int64(10*time.Second)
			h.now -= int64(time.Hour) // a new leader with a slow clock
			h.tick()
			if h.f.Clock() != t0 {
				h.t.Fatalf("clock %d went backwards", h.f.Clock())
			}
			h.ok(&RenewLease{Meta: m})
			if ts := h.wantTask(m.ID, "pending", 1, 0); ts.Deadline != deadline {
				h.t.Fatalf("deadline %d, want %d from the FSM clock", ts.Deadline, deadline)
			}
		}},
	})
}
