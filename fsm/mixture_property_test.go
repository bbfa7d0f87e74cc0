package fsm

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// checkMixInvariants walks every list of job name and checks each task is
// in exactly one, the per-source counts and leased records, and carried.
func checkMixInvariants(t *testing.T, f *FSM, name string) {
	t.Helper()
	f.mu.RLock()
	defer f.mu.RUnlock()
	j := f.s.jobs[name]
	if j == nil || j.ds == nil {
		return
	}
	seen := make([]int, len(j.tasks))
	walk := func(what string, l *list, q queueID, src int) {
		n, prev := 0, int32(-1)
		for i := l.head; i >= 0; i = j.tasks[i].next {
			if j.tasks[i].queue != q || j.tasks[i].prev != prev {
				t.Fatalf("%s: task %d queue %d prev %d, want %d %d", what, i, j.tasks[i].queue, j.tasks[i].prev, q, prev)
			}
			if src >= 0 && j.ds.sourceOf(i) != src {
				t.Fatalf("%s: task %d of source %d", what, i, j.ds.sourceOf(i))
			}
			seen[i]++
			prev = i
			n++
		}
		if n != l.n || l.tail != prev {
			t.Fatalf("%s: %d linked, n %d, tail %d want %d", what, n, l.n, l.tail, prev)
		}
	}
	for q := range numQueues {
		if q == qTodo && j.mix != nil {
			sum := 0
			for k := range j.mix.src {
				walk(fmt.Sprint("todo of source ", k), &j.mix.src[k].todo, qTodo, k)
				sum += j.mix.src[k].todo.n
			}
			if j.queues[qTodo].n != sum || j.queues[qTodo].head != -1 {
				t.Fatalf("job todo n %d head %d, sources %d", j.queues[qTodo].n, j.queues[qTodo].head, sum)
			}
			continue
		}
		walk(queueNames[q], &j.queues[q], q, -1)
	}
	for i, n := range seen {
		if n != 1 {
			t.Fatalf("task %d in %d lists", i, n)
		}
	}
	if j.mix == nil {
		return
	}
	pass := j.mix.src[0].pass
	for k := range j.mix.src {
		var count [numQueues]int
		var leased int64
		r := j.ds.sources[k]
		for i := r.task0; i < r.task0+r.tasks; i++ {
			tk := &j.tasks[i]
			count[tk.queue]++
			if tk.leased() {
				leased += j.ds.taskRecords(i)
			}
			if tk.carried > 0 && !(tk.leased() || tk.queue == qTodo) {
				t.Fatalf("task %d carried %d in %s", i, tk.carried, queueNames[tk.queue])
			}
		}
		src := &j.mix.src[k]
		if count != src.count || leased != src.leased {
			t.Fatalf("source %d: counts %v leased %d, derived %v %d", k, count, leased, src.count, src.leased)
		}
		pass = min(pass, src.pass)
	}
	if pass != j.pass {
		t.Fatalf("job pass %d, sources' least %d", j.pass, pass)
	}
}

// mixTrainer is a trainer of the random workload: the task it holds.
type mixTrainer struct {
	task *Task
}

// TestMixtureRandomWorkloadKeepsInvariants: random workloads on
// mixtures (leases with and without sessions, finishes, failures, dead
// trainers, progress, lease expiries, renewals, sessions ending, cursors
// committed, restored and deleted, weights and schedules, tight limits)
// leave every task in one list, the per-source counts and leased records
// right, the size estimate the recount's, and a replica restored from the
// snapshot at any point answering as the original.
func TestMixtureRandomWorkloadKeepsInvariants(t *testing.T) {
	seeds := 15
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { randomMixture(t, seed, 1500) })
	}
}

// TestMixtureRandomWorkloadReadsEachSourcePassOnce: in the same random
// workloads, the finishes counted of each task are one per pass of its
// source, less the passes it still owes.
func TestMixtureRandomWorkloadReadsEachSourcePassOnce(t *testing.T) {
	for seed := range uint64(10) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { randomMixtureMode(t, seed, 1500, true) })
	}
}

// ghostCheck checks each task's finishes that counted against its
// source's pass: P - carried, plus one when done in pass P. With reset it
// takes the state's values instead.
func ghostCheck(t *testing.T, f *FSM, credited []int64, reset bool) {
	t.Helper()
	f.mu.RLock()
	defer f.mu.RUnlock()
	j := f.s.jobs[DefaultJob]
	for k := range j.mix.src {
		r := j.ds.sources[k]
		for i := r.task0; i < r.task0+r.tasks; i++ {
			tk := &j.tasks[i]
			if tk.queue == qFailed {
				t.Fatalf("task %d failed", i)
			}
			want := int64(j.mix.src[k].pass) - int64(tk.carried)
			if tk.queue == qDone {
				want++
			}
			if reset {
				credited[i] = want
			} else if credited[i] != want {
				t.Fatalf("task %d (source %d pass %d, carried %d, %s) credited %d, want %d", i, k, j.mix.src[k].pass, tk.carried, queueNames[tk.queue], credited[i], want)
			}
		}
	}
}

func randomMixture(t *testing.T, seed uint64, steps int) { randomMixtureMode(t, seed, steps, false) }

func randomMixtureMode(t *testing.T, seed uint64, steps int, once bool) {
	rng := rand.New(rand.NewPCG(seed, 3))
	a, b := New(), New()
	var index uint64
	now := t0
	var logbuf []string
	apply := func(c Command) *Result {
		t.Helper()
		c.Hdr().Now = now
		bs := Encode(c)
		index++
		before := a.SnapshotBytes()
		ra := a.ApplyEntry(index, bs)
		rb := b.ApplyEntry(index, bs)
		logbuf = append(logbuf, fmt.Sprintf("%d %T%+v -> %v %s", index, c, c, ra.Code, ra.Message))
		if !sameResult(ra, rb) || ra.Message != rb.Message || (ra.Task != nil && ra.Task.Source != rb.Task.Source) {
			t.Fatalf("entry %d %T: %+v vs restored %+v\n%v", index, c, ra, rb, logbuf[max(0, len(logbuf)-30):])
		}
		if ra.rejected() && !bytes.Equal(before, a.SnapshotBytes()) {
			t.Fatalf("rejected %T (%s) changed the state", c, ra.Message)
		}
		return ra
	}
	apply(&SetProtocol{Level: Protocol9})
	p := defaultParams
	p.FailureMax = rng.IntN(3)
	if once {
		p.FailureMax = MaxFailureMax
	}
	p.Shuffle = rng.IntN(2) == 0
	p.Seed = rng.Uint64()
	p.ChunksPerTask = 1 + rng.IntN(3)
	nsrc := 1 + rng.IntN(3)
	var chunks []Chunk
	names := []string{"a", "b", "c"}
	for k := range nsrc {
		n := 1 + rng.IntN(6)
		p.Sources = append(p.Sources, Source{Name: names[k], Weight: uint32(rng.IntN(4)), Chunks: n})
		for i := range n {
			chunks = append(chunks, Chunk{Path: "/d/" + names[k], Offset: int64(i) * 100, Records: uint32(1 + rng.IntN(9))})
		}
	}
	p.Sources[0].Weight++
	if r := apply(&SetDataset{Params: p, Chunks: chunks}); r.Err() != nil {
		t.Fatalf("SetDataset: %v", r.Err())
	}
	trainers := make([]mixTrainer, 5)
	credited := make([]int64, a.Stats(DefaultJob).Tasks)
	var sessions []uint64
	var cursors []uint64
	client := byte(0)
	randWeights := func() []SourceWeight {
		var ws []SourceWeight
		for k := range nsrc {
			if rng.IntN(2) == 0 {
				ws = append(ws, SourceWeight{Name: names[k], Weight: uint32(rng.IntN(3))})
			}
		}
		if rng.IntN(20) == 0 {
			ws = append(ws, SourceWeight{Name: "zz", Weight: 1})
		}
		return ws
	}
	for step := range steps {
		k := rng.IntN(len(trainers))
		tr := &trainers[k]
		switch roll := rng.IntN(100); {
		case roll < 30:
			if tr.task != nil {
				r := apply(&TaskFinished{Meta: tr.task.Meta})
				if r.Err() == nil && !r.Ignored {
					credited[tr.task.Meta.ID-1]++
				}
				tr.task = nil
				break
			}
			h := Header{}
			if len(sessions) > 0 && rng.IntN(2) == 0 {
				h.Session = sessions[rng.IntN(len(sessions))]
			}
			st := a.Stats(DefaultJob)
			pass := st.Pass + rng.IntN(2)
			r := apply(&GetTask{Header: h, Pass: pass})
			if r.Task != nil {
				tr.task = r.Task
			}
		case roll < 38:
			if tr.task != nil {
				apply(&TaskFailed{Meta: tr.task.Meta})
				tr.task = nil
			}
		case roll < 43:
			tr.task = nil // dies
		case roll < 50:
			if tr.task != nil {
				var n int64
				for _, c := range tr.task.Chunks {
					n += int64(c.Records)
				}
				cons := tr.task.Skip + rng.Int64N(n-tr.task.Skip+1)
				if rng.IntN(3) == 0 {
					cons = n
				}
				apply(&ReportProgress{Progress: []TaskProgress{{Meta: tr.task.Meta, Consumed: cons}}})
			}
		case roll < 56:
			now += int64(time.Duration(rng.IntN(12)) * time.Second)
			apply(&Tick{})
		case roll < 60:
			if tr.task != nil {
				apply(&RenewLease{Meta: tr.task.Meta})
			}
		case roll < 64:
			client++
			r := apply(&OpenSession{Header: Header{Request: RequestID{Client: clientID(client), Seq: 1}}, TTL: 10 * time.Second})
			if r.Session != 0 {
				sessions = append(sessions, r.Session)
			}
		case roll < 68:
			if len(sessions) > 0 {
				x := rng.IntN(len(sessions))
				id := sessions[x]
				sessions = append(sessions[:x], sessions[x+1:]...)
				if rng.IntN(2) == 0 {
					apply(&ExpireSessions{IDs: []uint64{id}})
				} else {
					apply(&CloseSession{ID: id})
				}
			}
		case roll < 74:
			var prog []TaskProgress
			for _, o := range trainers {
				if o.task != nil && rng.IntN(2) == 0 {
					var n int64
					for _, c := range o.task.Chunks {
						n += int64(c.Records)
					}
					prog = append(prog, TaskProgress{Meta: o.task.Meta, Consumed: max(o.task.Skip, n-rng.Int64N(2))})
				}
			}
			r := apply(&CommitCursor{Step: int64(step), Progress: prog})
			if r.Cursor != nil {
				cursors = append(cursors, r.Cursor.ID)
			}
		case roll < 78:
			if len(cursors) > 0 {
				r := apply(&RestoreCursor{ID: cursors[rng.IntN(len(cursors))]})
				if r.Err() == nil && once {
					ghostCheck(t, a, credited, true)
				}
				if r.Err() == nil {
					for x := range trainers {
						trainers[x].task = nil
					}
				}
			}
		case roll < 80:
			if len(cursors) > 0 {
				apply(&DeleteCursor{ID: cursors[rng.IntN(len(cursors))]})
			}
		case roll < 88:
			c := &SetWeights{Weights: randWeights()}
			if rng.IntN(2) == 0 {
				c.ReplaceSchedule = true
				at := a.Stats(DefaultJob).Records
				for range rng.IntN(4) {
					at += rng.Int64N(60) + 1
					c.Schedule = append(c.Schedule, WeightStep{AtRecords: at, Weights: randWeights()})
				}
			}
			apply(c)
		case roll < 90:
			// tight state limit so that schedules hit CodeLimit
			var lim int64
			if rng.IntN(2) == 0 {
				a.mu.RLock()
				lim = a.s.stateBytes + rng.Int64N(200)
				a.mu.RUnlock()
			}
			apply(&SetLimits{Limits: Limits{MaxStateBytes: lim}})
		default:
			// replace b by a restore of its own snapshot
			b = restored(t, b.SnapshotBytes())
		}
		checkMixInvariants(t, a, DefaultJob)
		checkMixInvariants(t, b, DefaultJob)
		checkEstimate(t, a)
		checkEstimate(t, b)
		if once {
			ghostCheck(t, a, credited, false)
		}
		if !bytes.Equal(a.SnapshotBytes(), b.SnapshotBytes()) {
			t.Fatalf("step %d: replicas differ\n%v", step, logbuf[max(0, len(logbuf)-30):])
		}
	}
	checkRoundTrip(t, a)
}
