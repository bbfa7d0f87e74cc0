package fsm

import (
	"testing"
)

// TestGetTaskFinishesTheLastTaskInTheSameEntry: a trainer that reads
// with GetTask carrying the task it finished reads every pass exactly
// once at one entry per task, and each answer says how the finish went.
func TestGetTaskFinishesTheLastTaskInTheSameEntry(t *testing.T) {
	h := newHarness(t)
	h.ok(&SetProtocol{Level: Protocol9})
	h.setDataset(10, defaultParams)
	before := h.index
	var last TaskMeta
	seen := map[int]map[int]bool{}
	pass := 0
	for pass < 3 {
		r := h.apply(&GetTask{Pass: pass, Finished: last})
		if last.ID != 0 && (r.Finish == nil || r.Finish.Code != CodeOK || r.Finish.Ignored) {
			t.Fatalf("the finish of task %+v went %+v", last, r.Finish)
		}
		switch r.Code {
		case CodeOK:
		case CodePassBefore:
			pass++
			last = TaskMeta{}
			continue
		default:
			t.Fatalf("GetTask(%d): %v", pass, r.Err())
		}
		if seen[r.Task.Pass] == nil {
			seen[r.Task.Pass] = map[int]bool{}
		}
		if seen[r.Task.Pass][r.Task.Meta.ID] {
			t.Fatalf("task %d leased twice in pass %d", r.Task.Meta.ID, r.Task.Pass)
		}
		seen[r.Task.Pass][r.Task.Meta.ID] = true
		last = r.Task.Meta
	}
	for p := range 3 {
		if len(seen[p]) != 10 {
			t.Fatalf("pass %d read %d of 10 tasks", p, len(seen[p]))
		}
	}
	// 30 tasks, and one GetTask more per pass that only finished the
	// pass's last task and was told the pass ended.
	if n := h.index - before; n != 33 {
		t.Fatalf("%d entries for 30 tasks in 3 passes, want 33", n)
	}
}

// TestGetTaskFinishOutcomes: a finish that a TaskFinished would refuse or
// ignore is reported so, and the lease is granted all the same; a retry
// replays both.
func TestGetTaskFinishOutcomes(t *testing.T) {
	h := newHarness(t)
	h.ok(&SetProtocol{Level: Protocol9})
	p := defaultParams
	p.Strict = true
	h.setDataset(4, p)
	a := h.getTask(0)
	h.finish(a)
	// Finished already, in strict mode: a stale epoch.
	r := h.ok(&GetTask{Finished: a})
	if r.Finish == nil || r.Finish.Code != CodeStaleEpoch || r.Task == nil {
		t.Fatalf("a second finish: %+v, task %+v", r.Finish, r.Task)
	}
	h.finish(r.Task.Meta)
	// An unknown task.
	r = h.ok(&GetTask{Finished: TaskMeta{ID: 99, Epoch: 1}})
	if r.Finish == nil || r.Finish.Code != CodeUnknownTask || r.Task == nil {
		t.Fatalf("an unknown task's finish: %+v, task %+v", r.Finish, r.Task)
	}
	// A retry is answered with the first outcome, finish included.
	req := Header{Request: RequestID{Client: clientID(3), Seq: 1}}
	held := r.Task.Meta
	first := h.ok(&GetTask{Header: req, Finished: held})
	again := h.ok(&GetTask{Header: req, Finished: held})
	if !again.Duplicate || again.Finish == nil || *again.Finish != *first.Finish || again.Task == nil || again.Task.Meta != first.Task.Meta {
		t.Fatalf("retry %+v (finish %+v), first %+v (finish %+v)", again, again.Finish, first, first.Finish)
	}
	if ts, _ := h.f.Task(DefaultJob, held.ID); ts.Queue != "done" {
		t.Fatalf("task %d is %s after its finish rode a GetTask", held.ID, ts.Queue)
	}
	// With no task left, the finish still counts.
	last := first.Task.Meta
	r = h.apply(&GetTask{Finished: last})
	if r.Finish == nil || r.Finish.Code != CodeOK {
		t.Fatalf("the last finish: %+v (%v)", r.Finish, r.Err())
	}
	if st := h.f.Stats(DefaultJob); st.Pass != 1 {
		t.Fatalf("the pass did not end with its last finish: %+v", st)
	}
}

// TestGetTaskFinishNeedsProtocol9: below Protocol9 a GetTask carrying a
// finish is refused and changes nothing.
func TestGetTaskFinishNeedsProtocol9(t *testing.T) {
	h := newHarness(t)
	h.ok(&SetProtocol{Level: Protocol8})
	h.setDataset(4, defaultParams)
	m := h.getTask(0)
	h.rejects(&GetTask{Finished: m})
	h.rejects(&GetTask{Finished: TaskMeta{ID: 1, Epoch: -1}})
}
