package fsm

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// cursorHarness returns a harness at Protocol7 with a dataset of n
// one-chunk tasks of 100 records each.
func cursorHarness(t *testing.T, n int) *harness {
	t.Helper()
	h := newHarness(t)
	h.ok(&SetProtocol{Level: Protocol7})
	if n > 0 {
		h.setDataset(n, defaultParams)
	}
	return h
}

func progress(m TaskMeta, consumed int64) []TaskProgress {
	return []TaskProgress{{Meta: m, Consumed: consumed}}
}

func TestCursorRestoresFinishedAndPartlyConsumedTasks(t *testing.T) {
	h := cursorHarness(t, 4)
	a, b, c := h.getTask(0), h.getTask(0), h.getTask(0)
	h.finish(a)
	// b reported 30 records consumed; c 40 in the commit itself.
	if r := h.ok(&ReportProgress{Progress: progress(b, 30)}); r.Recorded != 1 {
		t.Fatalf("ReportProgress recorded %d, want 1", r.Recorded)
	}
	r := h.ok(&CommitCursor{Step: 100, Progress: progress(c, 40)})
	cur := *r.Cursor
	want := CursorInfo{ID: 1, Step: 100, Pass: 0, Tasks: 4, Finished: 1, InFlight: 2, Records: 170, Generation: 1}
	cur.Bytes, cur.Created = 0, 0
	if cur != want {
		t.Fatalf("cursor %+v, want %+v", cur, want)
	}
	// Training goes on past the checkpoint: b and c finish, d is leased.
	h.finish(b)
	h.finish(c)
	d := h.getTask(0)

	r = h.ok(&RestoreCursor{ID: 1})
	if r.Generation != 2 || r.Recorded != 1 || r.Cursor.ID != 1 {
		t.Fatalf("restore answered generation %d, revoked %d, cursor %+v; want 2, 1, cursor 1", r.Generation, r.Recorded, r.Cursor)
	}
	h.wantTask(a.ID, "done", a.Epoch, 0)
	// The revoked holder's reports change nothing.
	h.ignored(&TaskFinished{Meta: d})
	h.fails(&RenewLease{Meta: d}, ErrStaleEpoch)
	if r := h.ok(&ReportProgress{Progress: progress(d, 10)}); r.Recorded != 0 {
		t.Fatalf("a revoked lease's progress was recorded")
	}
	// b and c come back from their first record not consumed, d whole.
	skips := map[int]int64{}
	for range 3 {
		r := h.ok(&GetTask{})
		skips[r.Task.Meta.ID] = r.Task.Skip
		h.finish(r.Task.Meta)
	}
	if want := map[int]int64{b.ID: 30, c.ID: 40, d.ID: 0}; fmt.Sprint(skips) != fmt.Sprint(want) {
		t.Fatalf("skips %v, want %v", skips, want)
	}
	// The pass is over, and the next one starts every task whole.
	if st := h.f.Stats(""); st.Pass != 1 {
		t.Fatalf("pass %d after every task finished, want 1", st.Pass)
	}
	if r := h.ok(&GetTask{Pass: 1}); r.Task.Skip != 0 {
		t.Fatalf("a task of the next pass skips %d records", r.Task.Skip)
	}
}

func TestCursorCountsAWhollyConsumedTaskFinished(t *testing.T) {
	h := cursorHarness(t, 2)
	a := h.getTask(0)
	// Every record handed to the training loop, the finish not sent yet.
	r := h.ok(&CommitCursor{Progress: progress(a, 100)})
	if r.Cursor.Finished != 1 || r.Cursor.InFlight != 0 || r.Cursor.Records != 100 {
		t.Fatalf("cursor %+v: want task %d finished", r.Cursor, a.ID)
	}
	h.ok(&RestoreCursor{ID: 1})
	h.wantTask(a.ID, "done", a.Epoch, 0)
}

func TestCursorRestoreGoesBackAPass(t *testing.T) {
	h := cursorHarness(t, 2)
	a := h.getTask(0)
	h.ok(&CommitCursor{Step: 1, Progress: progress(a, 5)})
	h.finish(a)
	h.finish(h.getTask(0))
	h.finish(h.getTask(1))
	h.ok(&RestoreCursor{ID: 1})
	if st := h.f.Stats(""); st.Pass != 0 || st.Done != 0 || st.Todo != 2 {
		t.Fatalf("after restore: %+v, want pass 0 with 2 tasks to do", st)
	}
	if r := h.ok(&GetTask{}); r.Task.Meta.ID != a.ID || r.Task.Skip != 5 {
		t.Fatalf("first task %+v, want task %d skipping 5", r.Task, a.ID)
	}
}

func TestCursorCommitIsFenced(t *testing.T) {
	h := cursorHarness(t, 2)
	h.ok(&RequestSaveModel{TrainerID: "t1", BlockDur: time.Minute})
	h.fails(&CommitCursor{TrainerID: "t2"}, ErrCursorFenced)
	h.ok(&CommitCursor{TrainerID: "t1"})
	// Once the lease ends, another trainer may commit.
	h.advance(2 * time.Minute)
	h.ok(&CommitCursor{TrainerID: "t2"})
	// A commit of generation 1 is refused once the job was restored.
	h.ok(&CommitCursor{Generation: 1})
	h.ok(&RestoreCursor{ID: 1})
	h.fails(&CommitCursor{Generation: 1}, ErrCursorFenced)
	h.ok(&CommitCursor{Generation: 2})
	h.rejects(&CommitCursor{Generation: 3})
}

func TestCursorBadInputChangesNothing(t *testing.T) {
	h := cursorHarness(t, 2)
	a := h.getTask(0)
	for _, c := range []Command{
		&CommitCursor{Progress: progress(a, 101)},                       // more than the task has
		&CommitCursor{Progress: progress(TaskMeta{ID: 3, Epoch: 1}, 1)}, // no such task
		&CommitCursor{Progress: progress(a, -1)},                        // negative
		&ReportProgress{},                                               // empty
		&ReportProgress{Progress: make([]TaskProgress, MaxProgress+1)},  // too many
		&RestoreCursor{}, // id 0
		&CommitCursor{TrainerID: string(make([]byte, MaxIDLen+1))},                 // hostile id
		&ReportProgress{Progress: progress(TaskMeta{ID: 0, Epoch: 1}, 1)},          // bad meta
		&CommitCursor{Progress: progress(TaskMeta{ID: 1, Epoch: MaxEpoch + 1}, 1)}, // bad epoch
	} {
		before := h.f.SnapshotBytes()
		r := h.apply(c)
		if r.Code == CodeOK {
			t.Fatalf("%v %+v accepted", c.Type(), c)
		}
		if string(before) != string(h.f.SnapshotBytes()) {
			t.Fatalf("%v refused (%v) but changed the state", c.Type(), r.Err())
		}
	}
	h.fails(&RestoreCursor{ID: 9}, ErrUnknownCursor)
	h.ignored(&DeleteCursor{ID: 9})
	// Before a dataset, and below Protocol7.
	h2 := cursorHarness(t, 0)
	h2.fails(&CommitCursor{}, ErrNoDataset)
	h3 := newHarness(t)
	h3.ok(&SetProtocol{Level: Protocol6})
	h3.setDataset(1, defaultParams)
	h3.rejects(&CommitCursor{})
}

func TestCursorsKeepTheNewestAndAreAccounted(t *testing.T) {
	h := cursorHarness(t, 3)
	base := h.f.Stats("").StateBytes
	for i := range MaxJobCursors + 3 {
		h.ok(&CommitCursor{Step: int64(i)})
	}
	list, gen, ok := h.f.Cursors("")
	if !ok || gen != 1 || len(list) != MaxJobCursors || list[0].ID != 4 || list[len(list)-1].ID != MaxJobCursors+3 {
		t.Fatalf("cursors %v (generation %d): want ids 4 to %d", list, gen, MaxJobCursors+3)
	}
	if got, want := h.f.Stats("").StateBytes-base, int64(MaxJobCursors)*list[0].Bytes; got != want {
		t.Fatalf("the cursors add %d bytes to the estimate, want %d", got, want)
	}
	h.fails(&RestoreCursor{ID: 3}, ErrUnknownCursor)
	h.ok(&DeleteCursor{ID: 4})
	if _, _, err := h.f.Cursor("", 4); !errors.Is(err, ErrUnknownCursor) {
		t.Fatalf("deleted cursor: %v", err)
	}
}

func TestCursorRetryAnswersTheFirstCommit(t *testing.T) {
	h := cursorHarness(t, 2)
	req := Header{Request: RequestID{Client: clientID(1), Seq: 1}}
	first := h.ok(&CommitCursor{Header: req, Step: 5})
	h.ok(&CommitCursor{Step: 6})
	again := h.ok(&CommitCursor{Header: req, Step: 5})
	if !again.Duplicate || *again.Cursor != *first.Cursor {
		t.Fatalf("retry answered %+v, want duplicate of %+v", again.Cursor, first.Cursor)
	}
	if list, _, _ := h.f.Cursors(""); len(list) != 2 {
		t.Fatalf("%d cursors after a retried commit, want 2", len(list))
	}
}

func TestCursorStateCost(t *testing.T) {
	// About one bit per task and 8 bytes per task in flight.
	const n = 1 << 16
	h := cursorHarness(t, 0)
	h.ok(&SetDataset{Params: DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Hour}, Chunks: testChunks(n)})
	var inFlight []TaskProgress
	for i := range n / 2 {
		m := h.getTask(0)
		if i%64 == 0 {
			inFlight = append(inFlight, TaskProgress{Meta: m, Consumed: 7})
			continue
		}
		h.finish(m)
	}
	r := h.ok(&CommitCursor{Progress: inFlight})
	if want := int64(estCursor + n/8 + 8*len(inFlight)); r.Cursor.Bytes != want || r.Cursor.InFlight != len(inFlight) {
		t.Fatalf("cursor of %d tasks, %d in flight: %d bytes, want %d", n, len(inFlight), r.Cursor.Bytes, want)
	}
}

// TestCursorExactlyOnceOverFullRestarts runs trainers that consume
// records one at a time and checkpoint with a cursor, crashes all of them
// at random points (between a commit and its model save included) and
// restarts them at a random number from the last complete checkpoint.
// The records trained up to each restored checkpoint, and those of the
// last run, are every record of every pass exactly once.
func TestCursorExactlyOnceOverFullRestarts(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		const passes = 2
		f := New()
		var index uint64
		now := t0
		apply := func(c Command) *Result {
			index++
			now += int64(time.Millisecond)
			c.Hdr().Now = now
			return f.ApplyEntry(index, Encode(c))
		}
		must := func(c Command) *Result {
			r := apply(c)
			if r.Err() != nil {
				rt.Fatalf("%v: %v", c.Type(), r.Err())
			}
			return r
		}
		must(&SetProtocol{Level: Protocol7})
		numTasks := rapid.IntRange(1, 6).Draw(rt, "tasks")
		chunks := make([]Chunk, numTasks*2)
		for i := range chunks {
			chunks[i] = Chunk{Path: "/d", Offset: int64(i), Records: uint32(rapid.IntRange(1, 3).Draw(rt, "records"))}
		}
		must(&SetDataset{Params: DatasetParams{ChunksPerTask: 2, TaskTimeout: time.Hour, FailureMax: 3}, Chunks: chunks})

		type holder struct {
			meta     TaskMeta
			pass     int
			consumed int64
			records  int64
		}
		type record struct{ pass, task, index int }
		var trained, run []record // saved with complete checkpoints; since the last
		checkpoint := must(&CommitCursor{}).Cursor.ID
		trainers := make([]*holder, rapid.IntRange(1, 4).Draw(rt, "trainers"))
		pass := 0
		restart := func(to uint64) {
			run = nil
			must(&RestoreCursor{ID: to})
			trainers = make([]*holder, rapid.IntRange(1, 4).Draw(rt, "trainers"))
			pass = f.Stats("").Pass
		}
		lease := func(k int) {
			r := apply(&GetTask{Pass: pass})
			switch {
			case r.Err() == nil:
				t := r.Task
				n := f.s.jobs[DefaultJob].ds.taskRecords(t.Meta.ID - 1)
				trainers[k] = &holder{meta: t.Meta, pass: t.Pass, consumed: t.Skip, records: n}
			case errors.Is(r.Err(), ErrPassBefore):
				pass++
			}
		}
		consume := func(k int) {
			h := trainers[k]
			run = append(run, record{h.pass, h.meta.ID, int(h.consumed)})
			h.consumed++
			if h.consumed == h.records {
				must(&TaskFinished{Meta: h.meta})
				trainers[k] = nil
			}
		}
		for step := 0; f.Stats("").Pass < passes && step < 400; step++ {
			k := rapid.IntRange(0, len(trainers)-1).Draw(rt, "trainer")
			switch rapid.SampledFrom([]string{"work", "work", "work", "work", "checkpoint", "crash"}).Draw(rt, "action") {
			case "work":
				if trainers[k] == nil {
					lease(k)
				} else {
					consume(k)
				}
			case "checkpoint":
				var ps []TaskProgress
				for _, h := range trainers {
					if h != nil {
						ps = append(ps, TaskProgress{Meta: h.meta, Consumed: h.consumed})
					}
				}
				if rapid.Bool().Draw(rt, "report first") && len(ps) > 0 {
					must(&ReportProgress{Progress: ps})
					ps = nil
				}
				id := must(&CommitCursor{Progress: ps}).Cursor.ID
				if rapid.IntRange(0, 3).Draw(rt, "crash before the save") == 0 {
					restart(checkpoint)
					continue
				}
				trained, run, checkpoint = append(trained, run...), nil, id
			case "crash":
				restart(checkpoint)
			}
		}
		// The last run reads to the end without faults.
		for step := 0; f.Stats("").Pass < passes; step++ {
			if step > 10000 {
				rt.Fatalf("the passes do not end: %+v", f.Stats(""))
			}
			k := step % len(trainers)
			if trainers[k] == nil {
				lease(k)
			} else {
				consume(k)
			}
		}
		seen := map[record]int{}
		for _, r := range append(trained, run...) {
			seen[r]++
		}
		for p := range passes {
			for id := 1; id <= numTasks; id++ {
				n := f.s.jobs[DefaultJob].ds.taskRecords(id - 1)
				for i := range int(n) {
					if c := seen[record{p, id, i}]; c != 1 {
						rt.Fatalf("pass %d task %d record %d trained %d times", p, id, i, c)
					}
					delete(seen, record{p, id, i})
				}
			}
		}
		if len(seen) != 0 {
			rt.Fatalf("records trained that no pass has: %v", seen)
		}
	})
}
