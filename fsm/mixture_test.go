package fsm

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// mixChunks returns n chunks of source name, of 1 to 10 records each,
// drawn from rng.
func mixChunks(rng *rand.Rand, name string, n int) []Chunk {
	out := make([]Chunk, n)
	for i := range out {
		out[i] = Chunk{Path: fmt.Sprintf("/data/%s-%02d.recordio", name, i%4), Offset: int64(i) * 4096, Records: uint32(1 + rng.IntN(10))}
	}
	return out
}

// mixHarness returns a harness at Protocol9 whose default job is a
// mixture of sources of the given sizes and weights (in millionths), and
// the chunks it was set with.
func mixHarness(t *testing.T, rng *rand.Rand, shuffle bool, sizes []int, weights []uint32) (*harness, []Chunk) {
	t.Helper()
	h := newHarness(t)
	h.ok(&SetProtocol{Level: Protocol9})
	p := defaultParams
	p.Shuffle, p.Seed, p.FailureMax = shuffle, 99, 20
	var chunks []Chunk
	for k, n := range sizes {
		name := string(rune('a' + k))
		p.Sources = append(p.Sources, Source{Name: name, Weight: weights[k], Chunks: n, Patterns: []string{"/data/" + name + "-*"}})
		chunks = append(chunks, mixChunks(rng, name, n)...)
	}
	h.ok(&SetDataset{Params: p, Chunks: chunks})
	return h, chunks
}

// finishLog is the tasks of a mixture in the order their finishes were
// applied: each one's source and records.
type finishLog struct {
	source  []int
	records []int64
}

// worstWindow returns, over every window of width records that starts
// at a task boundary of the log, the largest distance between a
// source's share of the window and its target, in percentage points. A
// window ends part-way through a task: that task counts pro rata.
func (l *finishLog) worstWindow(targets []float64, width int64) float64 {
	n := len(l.records)
	var worst float64
	counts := make([]float64, len(targets))
	end, filled := 0, int64(0) // tasks [start, end) are wholly in the window
	for start := 0; start < n; start++ {
		for end < n && filled+l.records[end] <= width {
			counts[l.source[end]] += float64(l.records[end])
			filled += l.records[end]
			end++
		}
		if end == n && filled < width {
			break // the rest is shorter than a window
		}
		part := make([]float64, len(targets))
		copy(part, counts)
		if end < n {
			part[l.source[end]] += float64(width - filled)
		}
		for k, target := range targets {
			if d := 100 * abs(part[k]/float64(width)-target); d > worst {
				worst = d
			}
		}
		counts[l.source[start]] -= float64(l.records[start])
		filled -= l.records[start]
	}
	return worst
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// runMixture drives h's mixture with trainers trainers for steps
// commands: each holds at most one task, finishes it most of the time,
// fails it sometimes, and sometimes dies, its task left leased until its
// lease runs out (every 300 steps the live trainers renew their leases
// and the clock moves past the dead ones'). It returns the log of
// finishes.
func runMixture(t *testing.T, h *harness, rng *rand.Rand, ts *trainerSet, steps int, onFinish func(*finishLog)) *finishLog {
	t.Helper()
	log := &finishLog{}
	held, passes, trainers := ts.held, ts.passes, len(ts.held)
	timeout := defaultParams.TaskTimeout
	for step := range steps {
		if step%300 == 299 {
			h.advance(timeout / 2)
			for _, task := range held {
				if task != nil {
					h.ok(&RenewLease{Meta: task.Meta})
				}
			}
			h.advance(timeout/2 + time.Second)
			h.tick()
		}
		k := step % trainers // trainers of one speed take turns
		switch task, roll := held[k], rng.IntN(1000); {
		case task == nil:
			// A trainer asks for the pass it is in, and moves on to the
			// next when the job's pass ended, as the clients do.
			r := h.apply(&GetTask{Pass: passes[k]})
			switch err := r.Err(); {
			case err == nil:
				held[k] = r.Task
			case errors.Is(err, ErrPassBefore):
				passes[k]++
			}
		case roll < 960:
			r := h.ok(&TaskFinished{Meta: task.Meta})
			held[k] = nil
			if r.Ignored {
				break
			}
			log.source = append(log.source, int(task.Source[0]-'a'))
			log.records = append(log.records, taskRecordsOf(task))
			if onFinish != nil {
				onFinish(log)
			}
		case roll < 990:
			h.ok(&TaskFailed{Meta: task.Meta})
			held[k] = nil
		default:
			held[k] = nil // the trainer dies, and another takes its place
		}
	}
	return log
}

// trainerSet is the trainers of runMixture: the task each holds and the
// pass each is in.
type trainerSet struct {
	held   []*Task
	passes []int
}

func newTrainers(n int) *trainerSet {
	return &trainerSet{held: make([]*Task, n), passes: make([]int, n)}
}

// taskRecordsOf sums the records of a task's chunks.
func taskRecordsOf(t *Task) int64 {
	var n int64
	for _, c := range t.Chunks {
		n += int64(c.Records)
	}
	return n
}

// TestMixtureWindowsFollowTheWeights: three sources at 0.5/0.3/0.2, tasks
// of 1 to 10 records, 16 trainers that finish, fail and die: every window
// of 10,000 records, in the order the finishes were applied, is within
// one percentage point of the weights, and the per-source counts are the
// records of the finished tasks exactly.
func TestMixtureWindowsFollowTheWeights(t *testing.T) {
	for seed := range uint64(12) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 1))
			h, _ := mixHarness(t, rng, true, []int{400, 250, 90}, []uint32{500_000, 300_000, 200_000})
			log := runMixture(t, h, rng, newTrainers(16), 60_000, nil)
			if n := len(log.records); n < 5000 {
				t.Fatalf("only %d tasks finished", n)
			}
			if w := log.worstWindow([]float64{0.5, 0.3, 0.2}, 10_000); w > 1 {
				t.Fatalf("a window of 10,000 records is %.2f points off the weights", w)
			}
			wantCounts(t, h, log)
			st := h.f.Stats(DefaultJob)
			if st.Sources[2].Pass <= st.Sources[0].Pass || st.Pass != min(st.Sources[0].Pass, st.Sources[1].Pass, st.Sources[2].Pass) {
				t.Fatalf("the small source should cycle fastest, and the job's pass be the least: %+v", st.Sources)
			}
		})
	}
}

// wantCounts fails the test unless each source's counts are those of the
// log's finishes.
func wantCounts(t *testing.T, h *harness, log *finishLog) {
	t.Helper()
	st := h.f.Stats(DefaultJob)
	records, finished := make([]int64, len(st.Sources)), make([]int64, len(st.Sources))
	var total int64
	for i, k := range log.source {
		records[k] += log.records[i]
		finished[k]++
		total += log.records[i]
	}
	for k, s := range st.Sources {
		if s.Records != records[k] || s.Finished != finished[k] {
			t.Fatalf("source %s counts %d records in %d tasks, the finishes %d in %d", s.Name, s.Records, s.Finished, records[k], finished[k])
		}
	}
	if st.Records != total {
		t.Fatalf("the job counts %d records, the finishes %d", st.Records, total)
	}
}

// TestSetWeightsHoldsFromTheNextTask: once SetWeights is applied, the
// windows of records finished after the tasks then out on a lease follow
// the new weights, not the old, and the past is not paid back.
func TestSetWeightsHoldsFromTheNextTask(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	h, _ := mixHarness(t, rng, true, []int{300, 300, 300}, []uint32{500_000, 300_000, 200_000})
	ts := newTrainers(16)
	runMixture(t, h, rng, ts, 20_000, nil)
	h.ok(&SetWeights{Weights: []SourceWeight{{Name: "a", Weight: 100_000}, {Name: "c", Weight: 600_000}}})
	st := h.f.Stats(DefaultJob)
	if got := []uint32{st.Sources[0].Weight, st.Sources[1].Weight, st.Sources[2].Weight}; !slices.Equal(got, []uint32{100_000, 300_000, 600_000}) {
		t.Fatalf("weights after the change %v", got)
	}
	log := runMixture(t, h, rng, ts, 40_000, nil)
	// The first finishes after the change may be of tasks leased before
	// it: skip 16 of them, one per trainer.
	after := &finishLog{source: log.source[16:], records: log.records[16:]}
	if w := after.worstWindow([]float64{0.1, 0.3, 0.6}, 10_000); w > 1 {
		t.Fatalf("after SetWeights, a window is %.2f points off the new weights", w)
	}
}

// TestWeightScheduleTakesEffectAtItsRecords: the steps of a schedule take
// effect at the first finish that reaches them, and are then dropped.
func TestWeightScheduleTakesEffectAtItsRecords(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	h, _ := mixHarness(t, rng, false, []int{200, 200}, []uint32{1, 1})
	h.ok(&SetWeights{ReplaceSchedule: true, Schedule: []WeightStep{
		{AtRecords: 2000, Weights: []SourceWeight{{Name: "a", Weight: 3}}},
		{AtRecords: 5000, Weights: []SourceWeight{{Name: "b", Weight: 0}}},
	}})
	if st := h.f.Stats(DefaultJob); len(st.Schedule) != 2 {
		t.Fatalf("schedule %+v", st.Schedule)
	}
	var at2000, at5000 []uint32
	runMixture(t, h, rng, newTrainers(4), 20_000, func(*finishLog) {
		st := h.f.Stats(DefaultJob)
		w := []uint32{st.Sources[0].Weight, st.Sources[1].Weight}
		switch {
		case st.Records >= 5000 && at5000 == nil:
			at5000 = w
		case st.Records >= 2000 && st.Records < 5000 && at2000 == nil:
			at2000 = w
		}
	})
	if !slices.Equal(at2000, []uint32{3, 1}) || !slices.Equal(at5000, []uint32{3, 0}) {
		t.Fatalf("weights at 2000 records %v, at 5000 %v", at2000, at5000)
	}
	st := h.f.Stats(DefaultJob)
	if len(st.Schedule) != 0 {
		t.Fatalf("steps left: %+v", st.Schedule)
	}
	// Source b has weight 0: no more of its tasks are handed out.
	for range 50 {
		r := h.ok(&GetTask{Pass: h.f.Stats(DefaultJob).Pass})
		if r.Task.Source != "a" {
			t.Fatalf("a task of source %q, of weight 0", r.Task.Source)
		}
		h.ok(&TaskFinished{Meta: r.Task.Meta})
	}
}

// TestMixtureSourcePassesAreExactlyOnce: within each pass of a source,
// each of its tasks is finished once, and a source starts its next pass
// only when its tasks are all done.
func TestMixtureSourcePassesAreExactlyOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	h, _ := mixHarness(t, rng, true, []int{7, 3}, []uint32{1, 1})
	seen := map[string]map[int]int{} // source/pass -> task -> finishes
	for range 200 {
		r := h.ok(&GetTask{Pass: h.f.Stats(DefaultJob).Pass})
		st := h.f.Stats(DefaultJob)
		k := int(r.Task.Source[0] - 'a')
		key := fmt.Sprintf("%s/%d", r.Task.Source, st.Sources[k].Pass)
		if rng.IntN(5) == 0 {
			h.ok(&TaskFailed{Meta: r.Task.Meta})
			continue
		}
		h.ok(&TaskFinished{Meta: r.Task.Meta})
		if seen[key] == nil {
			seen[key] = map[int]int{}
		}
		seen[key][r.Task.Meta.ID]++
	}
	for key, tasks := range seen {
		for id, n := range tasks {
			if n != 1 {
				t.Fatalf("%s: task %d finished %d times", key, id, n)
			}
		}
	}
	for pass := range 5 {
		if n := len(seen[fmt.Sprintf("a/%d", pass)]); n != 7 {
			t.Fatalf("pass %d of source a finished %d of its 7 tasks", pass, n)
		}
		if n := len(seen[fmt.Sprintf("b/%d", pass)]); n != 3 {
			t.Fatalf("pass %d of source b finished %d of its 3 tasks", pass, n)
		}
	}
}

// TestMixtureTasksHoldOneSource: a task never spans two sources, and its
// chunks are its source's.
func TestMixtureTasksHoldOneSource(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	h := newHarness(t)
	h.ok(&SetProtocol{Level: Protocol9})
	p := defaultParams
	p.ChunksPerTask = 4
	p.Sources = []Source{{Name: "a", Weight: 1, Chunks: 5}, {Name: "b", Weight: 1, Chunks: 6}}
	h.ok(&SetDataset{Params: p, Chunks: append(mixChunks(rng, "a", 5), mixChunks(rng, "b", 6)...)})
	if st := h.f.Stats(DefaultJob); st.Tasks != 4 {
		t.Fatalf("%d tasks, want 2 of 4 and 1 chunks and 2 of 4 and 2", st.Tasks)
	}
	for range 4 {
		r := h.ok(&GetTask{})
		for _, c := range r.Task.Chunks {
			if c.Path[len("/data/"):][:1] != r.Task.Source {
				t.Fatalf("task %d of source %s holds chunk %s", r.Task.Meta.ID, r.Task.Source, c.Path)
			}
		}
	}
}

// TestMixtureBadInput: bad sources and weights are refused and change
// nothing.
func TestMixtureBadInput(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	h, chunks := mixHarness(t, rng, false, []int{3, 3}, []uint32{1, 2})
	for _, c := range []*SetWeights{
		{Weights: []SourceWeight{{Name: "z", Weight: 1}}},
		{Weights: []SourceWeight{{Name: "a", Weight: 0}, {Name: "b", Weight: 0}}},
		{Weights: []SourceWeight{{Name: "a", Weight: MaxWeight + 1}}},
		{Weights: []SourceWeight{{Name: "a", Weight: 1}, {Name: "a", Weight: 2}}},
		{Weights: []SourceWeight{{Name: "bad name", Weight: 1}}},
		{},
		{ReplaceSchedule: true, Schedule: []WeightStep{{AtRecords: 5, Weights: []SourceWeight{{Name: "a", Weight: 1}}}, {AtRecords: 5, Weights: []SourceWeight{{Name: "b", Weight: 1}}}}},
		{ReplaceSchedule: true, Schedule: []WeightStep{{AtRecords: 5, Weights: []SourceWeight{{Name: "q", Weight: 1}}}}},
		{ReplaceSchedule: true, Schedule: []WeightStep{{AtRecords: 5, Weights: []SourceWeight{{Name: "a", Weight: 0}}}, {AtRecords: 9, Weights: []SourceWeight{{Name: "b", Weight: 0}}}}},
	} {
		h.rejects(c)
	}

	// A dataset of one source takes no weights.
	h.ok(&SetDataset{Header: Header{Job: "plain"}, Params: defaultParams, Chunks: testChunks(2)})
	h.rejects(&SetWeights{Header: Header{Job: "plain"}, Weights: []SourceWeight{{Name: "a", Weight: 1}}})
	h.fails(&SetWeights{Header: Header{Job: "none"}, Weights: []SourceWeight{{Name: "a", Weight: 1}}}, ErrNoDataset)

	bad := func(mod func(p *DatasetParams) []string) {
		t.Helper()
		p := defaultParams
		p.Sources = []Source{{Name: "a", Weight: 1, Chunks: 3}, {Name: "b", Weight: 1, Chunks: 3}}
		patterns := mod(&p)
		h.rejects(&SetDataset{Header: Header{Job: "other"}, Params: p, Chunks: chunks, Patterns: patterns})
	}
	bad(func(p *DatasetParams) []string { p.Sources[1].Chunks = 2; return nil })
	bad(func(p *DatasetParams) []string { p.Sources[1].Chunks = 4; return nil })
	bad(func(p *DatasetParams) []string { p.Sources[1].Name = "a"; return nil })
	bad(func(p *DatasetParams) []string { p.Sources[0].Weight, p.Sources[1].Weight = 0, 0; return nil })
	bad(func(p *DatasetParams) []string { p.Sources[0].Chunks = 0; return nil })
	bad(func(p *DatasetParams) []string { return []string{"/data/*"} })
	bad(func(p *DatasetParams) []string {
		for i := range MaxSources {
			p.Sources = append(p.Sources, Source{Name: fmt.Sprint("s", i), Weight: 1, Chunks: 1})
		}
		return nil
	})
}

// TestMixtureNeedsProtocol9: below Protocol9 sources and SetWeights are
// refused.
func TestMixtureNeedsProtocol9(t *testing.T) {
	h := newHarness(t)
	h.ok(&SetProtocol{Level: Protocol8})
	p := defaultParams
	p.Sources = []Source{{Name: "a", Weight: 1, Chunks: 2}}
	h.rejects(&SetDataset{Params: p, Chunks: testChunks(2)})
	h.rejects(&SetWeights{Weights: []SourceWeight{{Name: "a", Weight: 1}}})
}

// TestMixtureSurvivesSnapshots: a mixture restored from its snapshot
// hands out the same tasks as the original.
func TestMixtureSurvivesSnapshots(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	h, _ := mixHarness(t, rng, true, []int{30, 20, 5}, []uint32{5, 3, 2})
	runMixture(t, h, rng, newTrainers(6), 2000, nil)
	h.ok(&SetWeights{Weights: []SourceWeight{{Name: "a", Weight: 4}}, ReplaceSchedule: true,
		Schedule: []WeightStep{{AtRecords: 1 << 40, Weights: []SourceWeight{{Name: "c", Weight: 9}}}}})
	other := restored(t, h.f.SnapshotBytes())
	for i := range 300 {
		get := Encode(&GetTask{Header: Header{Now: h.now}, Pass: h.f.Stats(DefaultJob).Pass})
		a := h.f.ApplyEntry(h.index+uint64(i)+1, get)
		b := other.ApplyEntry(h.index+uint64(i)+1, get)
		if errors.Is(a.Err(), ErrNoMoreAvailable) && errors.Is(b.Err(), ErrNoMoreAvailable) {
			break
		}
		if a.Err() != nil || b.Err() != nil || a.Task.Meta != b.Task.Meta || a.Task.Source != b.Task.Source {
			t.Fatalf("GetTask %d: %+v and %+v after a restore", i, a, b)
		}
	}
}

// TestMixtureCursorRestoresTheMixture: a cursor of a mixture keeps each
// source's pass, finished tasks, weights and counts, and the schedule; a
// restore puts them back, so that each source's pass then reads exactly
// the tasks it had not finished at the cursor, and the records counted
// are the cursor's.
func TestMixtureCursorRestoresTheMixture(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	h, _ := mixHarness(t, rng, true, []int{40, 25, 9}, []uint32{5, 3, 2})
	ts := newTrainers(8)
	runMixture(t, h, rng, ts, 3000, nil)
	h.ok(&SetWeights{Weights: []SourceWeight{{Name: "b", Weight: 4}}, ReplaceSchedule: true,
		Schedule: []WeightStep{{AtRecords: 1 << 40, Weights: []SourceWeight{{Name: "c", Weight: 1}}}}})
	r := h.ok(&CommitCursor{Step: 100})
	at := h.f.Stats(DefaultJob)
	// Which tasks each source finished in its pass at the cursor.
	doneAt, owed := map[int]bool{}, map[int]int{}
	for id := 1; id <= at.Tasks; id++ {
		ts, _ := h.f.Task(DefaultJob, id)
		doneAt[id], owed[id] = ts.Queue == "done", ts.Carried
	}
	runMixture(t, h, rng, ts, 3000, nil)
	h.ok(&SetWeights{Weights: []SourceWeight{{Name: "a", Weight: 9}}, ReplaceSchedule: true})
	h.ok(&RestoreCursor{ID: r.Cursor.ID})
	st := h.f.Stats(DefaultJob)
	for k, s := range st.Sources {
		a := at.Sources[k]
		if s.Weight != a.Weight || s.Pass != a.Pass || s.Records != a.Records || s.Finished != a.Finished || s.Done != a.Done {
			t.Fatalf("source %s after the restore %+v, at the cursor %+v", s.Name, s, a)
		}
	}
	if st.Records != at.Records || len(st.Schedule) != 1 || st.Pending != 0 {
		t.Fatalf("after the restore: %d records, schedule %+v, %d pending; at the cursor %d records", st.Records, st.Schedule, st.Pending, at.Records)
	}
	// Each source's pass now reads the tasks it had not finished at the
	// cursor, once each, and then the next pass starts.
	passOf := func(source string) int { return h.f.Stats(DefaultJob).Sources[source[0]-'a'].Pass }
	read := map[int]int{}
	for range 2 * st.Tasks {
		r := h.ok(&GetTask{Pass: h.f.Stats(DefaultJob).Pass})
		k := int(r.Task.Source[0] - 'a')
		if passOf(r.Task.Source) != at.Sources[k].Pass {
			h.ok(&TaskFinished{Meta: r.Task.Meta})
			continue
		}
		read[r.Task.Meta.ID]++
		h.ok(&TaskFinished{Meta: r.Task.Meta})
	}
	for id := 1; id <= st.Tasks; id++ {
		if want := map[bool]int{true: 0, false: 1}[doneAt[id]] + owed[id]; read[id] != want {
			t.Fatalf("task %d read %d times in its source's restored pass, want %d", id, read[id], want)
		}
	}
}
