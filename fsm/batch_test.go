package fsm

import (
	"slices"
	"testing"
	"time"
)

// batchIDs returns the ids of the tasks a GetTask leased, first first.
func batchIDs(r *Result) []int {
	var ids []int
	if r.Task != nil {
		ids = append(ids, r.Task.Meta.ID)
	}
	for _, t := range r.More {
		ids = append(ids, t.Meta.ID)
	}
	return ids
}

// batchMetas returns the metas of the tasks a GetTask leased.
func batchMetas(r *Result) []TaskMeta {
	var ms []TaskMeta
	if r.Task != nil {
		ms = append(ms, r.Task.Meta)
	}
	for _, t := range r.More {
		ms = append(ms, t.Meta)
	}
	return ms
}

// TestGetTaskBatchReadsEveryPassOnceAtOneEntryPerBatch: a reader that
// leases four tasks at a time and reports them with its next GetTask
// reads every task of every pass exactly once, at one entry per batch.
func TestGetTaskBatchReadsEveryPassOnceAtOneEntryPerBatch(t *testing.T) {
	h := newHarness(t)
	h.ok(&SetProtocol{Level: Protocol10})
	h.setDataset(10, defaultParams)
	before := h.index
	var held []TaskMeta
	seen := map[int]map[int]bool{}
	pass, batches := 0, 0
	for pass < 3 {
		c := &GetTask{Pass: pass, Count: 4}
		if len(held) > 0 {
			c.Finished, c.MoreFinished = held[0], held[1:]
		}
		r := h.apply(c)
		batches++
		if len(held) > 0 {
			outcomes := append([]FinishOutcome{*r.Finish}, r.MoreFinish...)
			if len(outcomes) != len(held) {
				t.Fatalf("%d outcomes for %d finishes", len(outcomes), len(held))
			}
			for i, o := range outcomes {
				if o.Code != CodeOK || o.Ignored {
					t.Fatalf("the finish of %+v went %+v", held[i], o)
				}
			}
		}
		held = nil
		switch r.Code {
		case CodeOK:
		case CodePassBefore, CodeNoMoreAvailable:
			// The last batch of the pass was short, or the pass ended
			// with the finishes this entry carried.
			if r.Code == CodePassBefore {
				pass++
			}
			continue
		default:
			t.Fatalf("GetTask(%d): %v", pass, r.Err())
		}
		for _, task := range append([]*Task{r.Task}, r.More...) {
			if seen[task.Pass] == nil {
				seen[task.Pass] = map[int]bool{}
			}
			if seen[task.Pass][task.Meta.ID] {
				t.Fatalf("task %d leased twice in pass %d", task.Meta.ID, task.Pass)
			}
			seen[task.Pass][task.Meta.ID] = true
		}
		held = batchMetas(r)
	}
	for p := range 3 {
		if len(seen[p]) != 10 {
			t.Fatalf("pass %d read %d of 10 tasks", p, len(seen[p]))
		}
	}
	// Per pass of 10 tasks: batches of 4, 4 and 2, then one that
	// finishes the last 2 and is told the pass ended.
	if n := h.index - before; n != uint64(batches) || batches != 12 {
		t.Fatalf("%d entries, %d batches for 30 tasks in 3 passes, want 12", n, batches)
	}
}

// TestGetTaskBatchStopsWhenNoneIsLeft: a batch larger than what is left
// leases what is left; one that leases none is answered as a GetTask of
// one task is.
func TestGetTaskBatchStopsWhenNoneIsLeft(t *testing.T) {
	h := newHarness(t)
	h.ok(&SetProtocol{Level: Protocol10})
	h.setDataset(3, defaultParams)
	r := h.ok(&GetTask{Count: MaxTasksPerGet})
	if got := batchIDs(r); len(got) != 3 || got[0] != 1 || got[1] != 2 || got[2] != 3 {
		t.Fatalf("leased %v, want [1 2 3]", got)
	}
	h.fails(&GetTask{Count: 5}, ErrNoMoreAvailable)
	for _, id := range []int{1, 2, 3} {
		h.wantTask(id, "pending", 1, 0)
	}
}

// TestGetTaskBatchRetryReplaysWhatIsStillHeld: a retried batch gets the
// tasks still leased to it, and the outcomes of its finishes; none once
// the first lease ended.
func TestGetTaskBatchRetryReplaysWhatIsStillHeld(t *testing.T) {
	h := newHarness(t)
	h.ok(&SetProtocol{Level: Protocol10})
	h.setDataset(8, defaultParams)
	a, b := h.getTask(0), h.getTask(0)
	req := Header{Request: RequestID{Client: clientID(7), Seq: 1}}
	first := h.ok(&GetTask{Header: req, Count: 3, Finished: a, MoreFinished: []TaskMeta{b, {ID: 99, Epoch: 1}}})
	if got := batchIDs(first); len(got) != 3 {
		t.Fatalf("leased %v, want 3 tasks", got)
	}
	if first.Finish.Code != CodeOK || len(first.MoreFinish) != 2 || first.MoreFinish[0].Code != CodeOK || first.MoreFinish[1].Code != CodeUnknownTask {
		t.Fatalf("finishes went %+v, %+v", first.Finish, first.MoreFinish)
	}
	// One of the three is finished meanwhile: the retry gets the other
	// two, and the same outcomes, and changes nothing.
	h.finish(first.More[0].Meta)
	again := h.ok(&GetTask{Header: req, Count: 3, Finished: a, MoreFinished: []TaskMeta{b, {ID: 99, Epoch: 1}}})
	if !again.Duplicate || again.Task.Meta != first.Task.Meta || len(again.More) != 1 || again.More[0].Meta != first.More[1].Meta {
		t.Fatalf("retry leased %v, want %v without %d", batchIDs(again), batchIDs(first), first.More[0].Meta.ID)
	}
	if *again.Finish != *first.Finish || len(again.MoreFinish) != 2 || again.MoreFinish[1] != first.MoreFinish[1] {
		t.Fatalf("retry's finishes %+v %+v, first %+v %+v", again.Finish, again.MoreFinish, first.Finish, first.MoreFinish)
	}
	checkRoundTrip(t, h.f)
	// The first task is finished too (a late finish of an earlier lease
	// would do the same): the retry gets the one still held as its task.
	h.finish(first.Task.Meta)
	third := h.ok(&GetTask{Header: req, Count: 3, Finished: a, MoreFinished: []TaskMeta{b, {ID: 99, Epoch: 1}}})
	if got := batchIDs(third); len(got) != 1 || got[0] != first.More[1].Meta.ID {
		t.Fatalf("a retry after the first task was finished leased %v, want [%d]", got, first.More[1].Meta.ID)
	}
	// Once the leases end, the retry gets none.
	h.advance(defaultParams.TaskTimeout + time.Second)
	h.tick()
	late := h.apply(&GetTask{Header: req, Count: 3, Finished: a, MoreFinished: []TaskMeta{b, {ID: 99, Epoch: 1}}})
	if late.Code != CodeStaleEpoch || late.Task != nil || len(late.More) != 0 {
		t.Fatalf("a retry after the leases ended: %v, leased %v", late.Err(), batchIDs(late))
	}
}

// TestGetTaskBatchUnderASessionIsHeldAndReleasedTogether: a batch leased
// under a session is held by it, and its close returns every task.
func TestGetTaskBatchUnderASessionIsHeldAndReleasedTogether(t *testing.T) {
	h := newHarness(t)
	h.ok(&SetProtocol{Level: Protocol10})
	h.setDataset(6, defaultParams)
	id := h.open(1, 5*time.Second)
	r := h.ok(&GetTask{Header: under(2, 1, id), Count: 4})
	for _, task := range append([]*Task{r.Task}, r.More...) {
		if task.Session != id {
			t.Fatalf("task %d: session %d, want %d", task.Meta.ID, task.Session, id)
		}
		h.wantTask(task.Meta.ID, "held", 1, 0)
	}
	checkRoundTrip(t, h.f)
	h.ok(&CloseSession{Header: Header{Request: RequestID{Client: clientID(1), Seq: 2}}, ID: id})
	for _, m := range batchMetas(r) {
		h.wantTask(m.ID, "todo", 1, 0)
	}
}

// TestGetTaskBatchBadInput: a batch out of bounds, more finishes without
// a first, a task finished twice, or a batch below Protocol10 is refused
// and changes nothing.
func TestGetTaskBatchBadInput(t *testing.T) {
	h := newHarness(t)
	h.ok(&SetProtocol{Level: Protocol10})
	h.setDataset(4, defaultParams)
	a, b := h.getTask(0), h.getTask(0)
	h.rejects(&GetTask{Count: MaxTasksPerGet + 1})
	h.rejects(&GetTask{MoreFinished: []TaskMeta{a}})
	h.rejects(&GetTask{Finished: a, MoreFinished: []TaskMeta{b, a}})
	h.rejects(&GetTask{Finished: a, MoreFinished: []TaskMeta{{ID: 0, Epoch: 1}}})
	many := make([]TaskMeta, MaxTasksPerGet)
	for i := range many {
		many[i] = TaskMeta{ID: i + 10, Epoch: 1}
	}
	h.rejects(&GetTask{Finished: a, MoreFinished: many})

	old := newHarness(t)
	old.ok(&SetProtocol{Level: Protocol9})
	old.setDataset(4, defaultParams)
	m := old.getTask(0)
	old.rejects(&GetTask{Count: 2})
	old.rejects(&GetTask{Finished: m, MoreFinished: []TaskMeta{{ID: 2, Epoch: 1}}})
}

// TestGetTaskBatchSnapshotVersions: a state at Protocol9 writes snapshot
// version 12, which a replica of the previous release reads, and from
// Protocol10 version 13, which keeps a batch's de-duplication entry; both
// restore to the same bytes.
func TestGetTaskBatchSnapshotVersions(t *testing.T) {
	h := newHarness(t)
	h.ok(&SetProtocol{Level: Protocol9})
	h.setDataset(6, defaultParams)
	h.ok(&GetTask{Header: Header{Request: RequestID{Client: clientID(5), Seq: 1}}})
	if v := snapshotVersionOf(t, h.f); v != 12 {
		t.Fatalf("snapshot version %d at Protocol9, want 12", v)
	}
	checkRoundTrip(t, h.f)
	h.ok(&SetProtocol{Level: Protocol10})
	h.ok(&GetTask{Header: Header{Request: RequestID{Client: clientID(5), Seq: 2}}, Count: 3})
	if v := snapshotVersionOf(t, h.f); v != 13 {
		t.Fatalf("snapshot version %d at Protocol10, want 13", v)
	}
	checkRoundTrip(t, h.f)
}

// TestRenewLeaseBatch: one RenewLease renews several leases, each as it
// would alone, a stale one refused without failing the others; a retry
// says how each went and what remains of the leases still held.
func TestRenewLeaseBatch(t *testing.T) {
	h := newHarness(t)
	h.ok(&SetProtocol{Level: Protocol10})
	h.setDataset(4, defaultParams)
	a, b, c := h.getTask(0), h.getTask(0), h.getTask(0)
	h.advance(10 * time.Second)
	req := Header{Request: RequestID{Client: clientID(8), Seq: 1}}
	stale := TaskMeta{ID: c.ID, Epoch: c.Epoch + 3}
	r := h.ok(&RenewLease{Header: req, Meta: a, More: []TaskMeta{stale, b}})
	want := []RenewOutcome{{Code: CodeOK, Lease: defaultParams.TaskTimeout}, {Code: CodeStaleEpoch}, {Code: CodeOK, Lease: defaultParams.TaskTimeout}}
	if !slices.Equal(r.Renewed, want) {
		t.Fatalf("renewed %+v, want %+v", r.Renewed, want)
	}
	// c's lease was not renewed: it ends 10 s before a's and b's.
	h.advance(defaultParams.TaskTimeout - 5*time.Second)
	h.tick()
	h.wantTask(c.ID, "todo", 1, 1)
	h.wantTask(a.ID, "pending", 1, 0)
	// b is finished meanwhile: the retry says a's lease holds for what
	// remains of it, b's has ended.
	h.finish(b)
	again := h.ok(&RenewLease{Header: req, Meta: a, More: []TaskMeta{stale, b}})
	want = []RenewOutcome{{Code: CodeOK, Lease: 5 * time.Second}, {Code: CodeStaleEpoch}, {Code: CodeStaleEpoch}}
	if !again.Duplicate || !slices.Equal(again.Renewed, want) {
		t.Fatalf("retry renewed %+v (duplicate %v), want %+v", again.Renewed, again.Duplicate, want)
	}
	checkRoundTrip(t, h.f)
	h.rejects(&RenewLease{Meta: a, More: []TaskMeta{a}})
	h.rejects(&RenewLease{Meta: a, More: make([]TaskMeta, MaxTasksPerGet)})

	old := newHarness(t)
	old.ok(&SetProtocol{Level: Protocol9})
	old.setDataset(4, defaultParams)
	m, n := old.getTask(0), old.getTask(0)
	old.rejects(&RenewLease{Meta: m, More: []TaskMeta{n}})
}

// TestGetTaskBatchOnlyTheLatestKeepsItsLeases: a client's next request
// drops the further leases of the batch before it from the table, which
// a retry of that batch, which no client sends, then does not get.
func TestGetTaskBatchOnlyTheLatestKeepsItsLeases(t *testing.T) {
	h := newHarness(t)
	h.ok(&SetProtocol{Level: Protocol10})
	h.setDataset(8, defaultParams)
	req := func(seq uint64) Header { return Header{Request: RequestID{Client: clientID(9), Seq: seq}} }
	first := h.ok(&GetTask{Header: req(1), Count: 3})
	h.ok(&GetTask{Header: req(2)})
	again := h.ok(&GetTask{Header: req(1), Count: 3})
	if !again.Duplicate || again.Task.Meta != first.Task.Meta || len(again.More) != 0 {
		t.Fatalf("an earlier batch's retry leased %v, want its first task alone", batchIDs(again))
	}
}

// TestRenewLeaseBatchWithoutADataset: a batch renewal on a job without a
// dataset is answered ErrNoDataset, as one renewal is.
func TestRenewLeaseBatchWithoutADataset(t *testing.T) {
	h := newHarness(t)
	h.ok(&SetProtocol{Level: Protocol10})
	h.ok(&KVCompareAndSet{Key: "k", Value: []byte("v")}) // the job exists, without a dataset
	h.fails(&RenewLease{Meta: TaskMeta{ID: 1, Epoch: 1}, More: []TaskMeta{{ID: 2, Epoch: 1}}}, ErrNoDataset)
}
