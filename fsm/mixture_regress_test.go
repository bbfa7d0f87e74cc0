package fsm

import (
	"testing"
	"time"
)

// smallMix returns a harness at Protocol9 whose default job is a mixture
// of sources of the given sizes and weights, of chunks of 10 records.
func smallMix(t *testing.T, sizes []int, weights []uint32) *harness {
	t.Helper()
	h := newHarness(t)
	h.ok(&SetProtocol{Level: Protocol9})
	p := defaultParams
	var chunks []Chunk
	for k, n := range sizes {
		name := string(rune('a' + k))
		p.Sources = append(p.Sources, Source{Name: name, Weight: weights[k], Chunks: n})
		for i := range n {
			chunks = append(chunks, Chunk{Path: "/d/" + name, Offset: int64(i) * 100, Records: 10})
		}
	}
	h.ok(&SetDataset{Params: p, Chunks: chunks})
	return h
}

// TestMixtureCarriedTaskConsumedAtACursor: a carried task whose records
// were all consumed at a cursor paid the pass it owed; the restore puts it
// in todo for the current pass, and the state's snapshot restores.
func TestMixtureCarriedTaskConsumedAtACursor(t *testing.T) {
	h := smallMix(t, []int{2, 1}, []uint32{1, 0})
	t1 := h.getTask(0)
	t2 := h.getTask(0)
	h.finish(t2) // source a starts pass 1; t1 carried
	if ts, _ := h.f.Task(DefaultJob, t1.ID); ts.Carried != 1 {
		t.Fatalf("t1 %+v", ts)
	}
	c := h.ok(&CommitCursor{Progress: []TaskProgress{{Meta: t1, Consumed: 10}}})
	h.ok(&RestoreCursor{ID: c.Cursor.ID})
	ts, _ := h.f.Task(DefaultJob, t1.ID)
	t.Logf("after restore: %+v", ts)
	b := h.f.SnapshotBytes()
	g := New()
	if err := g.Restore(readCloser(b)); err != nil {
		t.Fatalf("Restore: %v", err)
	}
}

// TestMixtureCarriedTaskThatFailsOut: a carried task that fails past
// failureMax gives up the pass it owed and goes back to todo for the
// current one, and the state's snapshot restores.
func TestMixtureCarriedTaskThatFailsOut(t *testing.T) {
	h := newHarness(t)
	h.ok(&SetProtocol{Level: Protocol9})
	p := defaultParams
	p.FailureMax = 0
	p.Sources = []Source{{Name: "a", Weight: 1, Chunks: 2}}
	h.ok(&SetDataset{Params: p, Chunks: testChunks(2)})
	t1 := h.getTask(0)
	t2 := h.getTask(0)
	h.finish(t2) // source a starts pass 1; t1 carried
	h.fail(t1)   // failures 1 > failureMax 0: failed, still carried
	ts, _ := h.f.Task(DefaultJob, t1.ID)
	t.Logf("after fail: %+v", ts)
	if err := New().Restore(readCloser(h.f.SnapshotBytes())); err != nil {
		t.Fatalf("Restore: %v", err)
	}
}

// TestSetWeightsIsCheckedAgainstTheSchedule: weights that a step of the
// schedule kept would bring to all 0 are refused.
func TestSetWeightsIsCheckedAgainstTheSchedule(t *testing.T) {
	h := smallMix(t, []int{2, 2}, []uint32{1, 1})
	h.ok(&SetWeights{ReplaceSchedule: true, Schedule: []WeightStep{{AtRecords: 1 << 40, Weights: []SourceWeight{{Name: "b", Weight: 0}}}}})
	r := h.apply(&SetWeights{Weights: []SourceWeight{{Name: "a", Weight: 0}}})
	t.Logf("SetWeights a=0 answered %v %s", r.Code, r.Message)
	if err := New().Restore(readCloser(h.f.SnapshotBytes())); err != nil {
		t.Fatalf("Restore: %v", err)
	}
}

// TestMixtureSourcePassForgetsRestoredSkips: a source's next pass reads
// a task that a restore had partly skipped from its first record.
func TestMixtureSourcePassForgetsRestoredSkips(t *testing.T) {
	h := newHarness(t)
	h.ok(&SetProtocol{Level: Protocol9})
	p := defaultParams
	p.FailureMax = 0
	p.Sources = []Source{{Name: "a", Weight: 1, Chunks: 2}}
	h.ok(&SetDataset{Params: p, Chunks: testChunks(2)})
	t1 := h.getTask(0)
	c := h.ok(&CommitCursor{Progress: []TaskProgress{{Meta: t1, Consumed: 50}}})
	h.ok(&RestoreCursor{ID: c.Cursor.ID})
	r := h.ok(&GetTask{})
	if r.Task.Meta.ID != t1.ID || r.Task.Skip != 50 {
		t.Fatalf("first lease %+v", r.Task)
	}
	h.fail(r.Task.Meta) // failed out of pass 0
	t2 := h.getTask(0)
	h.finish(t2) // source a's pass 1 starts
	if st := h.f.Stats(DefaultJob); st.Sources[0].Pass != 1 {
		t.Fatalf("pass %d", st.Sources[0].Pass)
	}
	for range 2 {
		r = h.ok(&GetTask{Pass: 1})
		if r.Task.Skip != 0 {
			t.Fatalf("task %d in pass 1 skips %d records", r.Task.Meta.ID, r.Task.Skip)
		}
	}
}

// TestMixtureCursorCountsConsumedTasks: a task a cursor counts done
// because its records were all consumed counts in its source's records.
func TestMixtureCursorCountsConsumedTasks(t *testing.T) {
	h := smallMix(t, []int{3, 1}, []uint32{1, 0})
	t1 := h.getTask(0)
	c := h.ok(&CommitCursor{Progress: []TaskProgress{{Meta: t1, Consumed: 10}}})
	h.ok(&RestoreCursor{ID: c.Cursor.ID})
	st := h.f.Stats(DefaultJob)
	t.Logf("source a: done %d finished %d records %d; job records %d; cursor finished %d",
		st.Sources[0].Done, st.Sources[0].Finished, st.Sources[0].Records, st.Records, c.Cursor.Finished)
	for range 2 {
		h.finish(h.getTask(0))
	}
	st = h.f.Stats(DefaultJob)
	t.Logf("after the pass: source a pass %d finished %d records %d (3 tasks of 10 trained)", st.Sources[0].Pass, st.Sources[0].Finished, st.Sources[0].Records)
	if st.Sources[0].Records != 30 {
		t.Errorf("source a counts %d records of the 30 trained in its pass", st.Sources[0].Records)
	}
}

// TestMixtureUploadedInParts: a mixture set in parts is the one set in one
// entry, and its size estimate is the recount's.
func TestMixtureUploadedInParts(t *testing.T) {
	h := newHarness(t)
	h.ok(&SetProtocol{Level: Protocol9})
	p := defaultParams
	p.Sources = []Source{{Name: "a", Weight: 1, Chunks: 3, Patterns: []string{"/x/*"}}, {Name: "b", Weight: 2, Chunks: 2}}
	h.ok(&DatasetPart{UploadID: "u", Part: 0, Chunks: testChunks(3)})
	h.ok(&DatasetPart{UploadID: "u", Part: 1, Chunks: testChunks(5)[3:]})
	bad := p
	bad.Sources = []Source{{Name: "a", Weight: 1, Chunks: 3}, {Name: "b", Weight: 2, Chunks: 3}}
	h.rejects(&DatasetCommit{UploadID: "u", Parts: 2, NumChunks: 5, Params: bad})
	h.ok(&DatasetCommit{UploadID: "u", Parts: 2, NumChunks: 5, Params: p})
	st := h.f.Stats(DefaultJob)
	if len(st.Sources) != 2 || st.Tasks != 5 {
		t.Fatalf("%+v", st)
	}
	checkEstimate(t, h.f)
	for _, c := range DatasetCommands("j2", RequestID{}, p, nil, testChunks(5), "up", 200) {
		h.ok(c)
	}
	if st := h.f.Stats("j2"); len(st.Sources) != 2 {
		t.Fatalf("split: %+v", st.Sources)
	}
}

// TestMixtureStragglerOwesAtMostMaxCarriedPasses: while a dead trainer
// holds a task of a small source, the source runs maxCarried passes
// ahead at most and then waits; once the lease runs out, the task is read
// for each pass it owes, and the source goes on.
func TestMixtureStragglerOwesAtMostMaxCarriedPasses(t *testing.T) {
	h := smallMix(t, []int{2, 1}, []uint32{1, 0})
	h.getTask(0) // its trainer dies
	ahead := 0
	for {
		r := h.apply(&GetTask{Pass: h.f.Stats(DefaultJob).Pass})
		if r.Code == CodeNoMoreAvailable {
			break
		}
		if r.Err() != nil || r.Task.Meta.ID != 2 {
			t.Fatalf("GetTask: %v %+v", r.Err(), r.Task)
		}
		h.finish(r.Task.Meta)
		ahead++
	}
	if ahead != maxCarried+1 {
		t.Fatalf("the source read its other task %d times while the first was out, want %d", ahead, maxCarried+1)
	}
	if ts, _ := h.f.Task(DefaultJob, 1); ts.Carried != maxCarried {
		t.Fatalf("the straggler owes %d passes, want %d", ts.Carried, maxCarried)
	}
	h.advance(time.Minute)
	h.tick()
	reads := 0
	for range maxCarried + 1 {
		m := h.getTask(h.f.Stats(DefaultJob).Pass)
		if m.ID == 1 {
			reads++
		}
		h.finish(m)
	}
	if reads != maxCarried+1 {
		t.Fatalf("the straggler was read %d times for the %d passes it owed", reads, maxCarried+1)
	}
	if st := h.f.Stats(DefaultJob); st.Sources[0].Pass != maxCarried+1 || st.Sources[0].Finished != 2*(maxCarried+1) {
		t.Fatalf("source a after the straggler: %+v", st.Sources[0])
	}
}
