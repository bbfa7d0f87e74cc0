package fsm

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"math/bits"
	"slices"
)

// Cursors (Protocol7): the data position saved with a model checkpoint.
//
// A task's records are numbered from 0 over its chunks in order. A
// record is consumed once it is handed to the training loop, and the
// trainers say how far they consumed the tasks they hold with
// ReportProgress, or in the CommitCursor itself. A cursor is the job's
// dispatch at one point of the log: its pass, the tasks finished in it
// (one bit each) and, for every other task, the records of it consumed
// (those a restore skipped, or a holder reported), when there are any.
// RestoreCursor puts the dispatch back there: the records still to train
// in the pass are then exactly those the checkpoint had not trained,
// whatever the number of trainers that read them.
const (
	// MaxJobCursors is how many cursors a job keeps: a commit beyond it
	// drops the oldest.
	MaxJobCursors = 16
	// MaxProgress bounds the entries of one ReportProgress or
	// CommitCursor.
	MaxProgress = 4096
	// estCursor is the size estimate of a cursor without its tasks.
	estCursor = 96
)

// TaskProgress says that the first Consumed records of task Meta.ID,
// leased under Meta.Epoch, were consumed, counting those the task's
// restored cursor skipped.
type TaskProgress struct {
	Meta     TaskMeta
	Consumed int64
}

// ReportProgress records how far the holders of leased tasks consumed
// them, for the job's next cursor. An entry of a task no longer leased
// under its epoch is not recorded; Result.Recorded counts the others.
type ReportProgress struct {
	Header
	Progress []TaskProgress
}

// CommitCursor records Progress, as ReportProgress does, then commits a
// cursor of the job's dispatch; Result.Cursor describes it. TrainerID,
// when set, fences it with the save-model lease: it is refused
// (ErrCursorFenced) while another trainer holds the lease. Generation,
// when not 0, fences it with restores: it is refused once the job's
// restore generation is past it.
type CommitCursor struct {
	Header
	Step       int64
	Progress   []TaskProgress
	TrainerID  string
	Generation uint64
}

// RestoreCursor puts the job's dispatch back to cursor ID and revokes
// every lease.
type RestoreCursor struct {
	Header
	ID uint64
}

// DeleteCursor deletes cursor ID; it is Ignored when there is none.
type DeleteCursor struct {
	Header
	ID uint64
}

func (*ReportProgress) Type() CmdType { return TypeReportProgress }
func (*CommitCursor) Type() CmdType   { return TypeCommitCursor }
func (*RestoreCursor) Type() CmdType  { return TypeRestoreCursor }
func (*DeleteCursor) Type() CmdType   { return TypeDeleteCursor }

func encodeProgress(e *encoder, ps []TaskProgress) {
	e.uvarint(uint64(len(ps)))
	for _, p := range ps {
		encodeMeta(e, p.Meta)
		e.varint(p.Consumed)
	}
}

func decodeProgress(d *decoder) []TaskProgress {
	var ps []TaskProgress
	for range d.length(3) {
		ps = append(ps, TaskProgress{Meta: decodeMeta(d), Consumed: d.varint()})
	}
	return ps
}

func (c *ReportProgress) encode(e *encoder) { encodeProgress(e, c.Progress) }
func (c *ReportProgress) decode(d *decoder) { c.Progress = decodeProgress(d) }

func (c *CommitCursor) encode(e *encoder) {
	e.varint(c.Step)
	encodeProgress(e, c.Progress)
	e.string(c.TrainerID)
	e.uvarint(c.Generation)
}

func (c *CommitCursor) decode(d *decoder) {
	c.Step = d.varint()
	c.Progress = decodeProgress(d)
	c.TrainerID = d.string()
	c.Generation = d.uvarint()
}

func (c *RestoreCursor) encode(e *encoder) { e.uvarint(c.ID) }
func (c *RestoreCursor) decode(d *decoder) { c.ID = d.uvarint() }
func (c *DeleteCursor) encode(e *encoder)  { e.uvarint(c.ID) }
func (c *DeleteCursor) decode(d *decoder)  { c.ID = d.uvarint() }

func validateProgress(ps []TaskProgress) error {
	if len(ps) > MaxProgress {
		return invalidf("%d progress entries: at most %d", len(ps), MaxProgress)
	}
	for _, p := range ps {
		if err := validateMeta(p.Meta); err != nil {
			return err
		}
		if p.Consumed < 0 || p.Consumed > math.MaxUint32 {
			return invalidf("task %d: consumed %d records, out of range", p.Meta.ID, p.Consumed)
		}
	}
	return nil
}

func (c *ReportProgress) validate() error {
	if len(c.Progress) == 0 {
		return invalidf("a progress report names no task")
	}
	return validateProgress(c.Progress)
}

func (c *CommitCursor) validate() error {
	if c.TrainerID != "" {
		if err := validateID("trainer id", c.TrainerID); err != nil {
			return err
		}
	}
	return validateProgress(c.Progress)
}

func (c *RestoreCursor) validate() error { return validateCursorID(c.ID) }
func (c *DeleteCursor) validate() error  { return validateCursorID(c.ID) }

func validateCursorID(id uint64) error {
	if id == 0 {
		return invalidf("cursor ids start at 1")
	}
	return nil
}

// positions is a job's data position: what of its pass the trainers
// consumed, and its cursors. The zero value is a job that never had any.
type positions struct {
	// skip holds, by task index, the records of the task that the last
	// restore counted consumed: a lease of it starts after them. It is
	// cleared with the pass, and a task's entry when it is finished.
	skip map[int32]uint32
	// consumed holds, by task index, the latest progress reported by the
	// holder of the task's lease under epoch; an entry of another epoch,
	// or of a task not leased, is stale and counts for nothing.
	consumed map[int32]progressMark
	// generation starts at 1 and grows by one at each restore; a
	// generation of 0 is the first.
	generation uint64
	// seq is the last cursor id given in the job.
	seq uint64
	// cursors are the job's cursors, oldest first.
	cursors []*cursor
}

// progressMark is a reported consumed offset under the lease of epoch.
type progressMark struct {
	epoch    uint32
	consumed uint32
}

// cursor is one committed position of the job. It is never modified
// once committed, so clones share it.
type cursor struct {
	id         uint64
	step       int64
	pass       int
	created    int64
	generation uint64
	tasks      int
	// done has bit i set when task i was finished.
	done []uint64
	// partial lists the other tasks with records consumed, by index.
	partial []cursorTask
	// mix is, for a mixture job, the mixture's state at the commit
	// (mixture_cursor.go), without its queues; carried lists the carried
	// tasks then, each with the passes it owed (in consumed).
	mix     *mixture
	carried []cursorTask
	// Derived: counts and size, never encoded.
	finished int
	records  int64
}

// cursorTask is a task partly consumed at a cursor.
type cursorTask struct {
	index    int32
	consumed uint32
}

func (c *cursor) bytes() int64 {
	return cursorSize(len(c.done), len(c.partial)) + mixtureCursorBytes(c.mix, len(c.carried))
}

// cursorSize is the size estimate of a cursor of words words of done bits
// and partial tasks partly consumed.
func cursorSize(words, partial int) int64 {
	return estCursor + 8*int64(words) + 8*int64(partial)
}

func (c *cursor) isDone(i int) bool { return c.done[i/64]&(1<<(i%64)) != 0 }

// gen returns the job's restore generation, 1 before any restore.
func (p *positions) gen() uint64 { return max(p.generation, 1) }

// clone returns a copy that later applies cannot change; the cursors are
// immutable and shared.
func (p positions) clone() positions {
	c := p
	c.skip, c.consumed = maps.Clone(p.skip), maps.Clone(p.consumed)
	c.cursors = slices.Clone(p.cursors)
	return c
}

// taskRecords is the number of records of task index i.
func (d *dataset) taskRecords(i int) int64 {
	lo, hi := d.taskSpan(i)
	var n int64
	d.chunks.each(lo, hi, func(c chunkRef) { n += int64(c.records) })
	return n
}

// taskSkip is the records of task i that its lease starts after.
func (j *job) taskSkip(i int32) uint32 { return j.pos.skip[i] }

// positionAt is how many records of task i are consumed now: those its
// lease's holder reported, or else those the last restore skipped.
func (j *job) positionAt(i int32) uint32 {
	n := j.pos.skip[i]
	t := &j.tasks[i]
	if m, ok := j.pos.consumed[i]; ok && t.leased() && m.epoch == t.epoch {
		n = max(n, m.consumed)
	}
	return n
}

// forgetTask drops what the positions hold of task i once it is finished.
func (j *job) forgetTask(i int32) {
	delete(j.pos.skip, i)
	delete(j.pos.consumed, i)
}

// forgetPass drops what the positions hold of the pass that ended.
func (j *job) forgetPass() {
	j.pos.skip, j.pos.consumed = nil, nil
}

// checkProgress checks every entry against the dataset before any is
// recorded: an entry that names a task that does not exist, or more
// records than its task has, or fewer than its restore skipped, refuses
// the whole command.
func (j *job) checkProgress(ps []TaskProgress) error {
	for _, p := range ps {
		i, err := j.taskIndex(p.Meta.ID)
		if err != nil {
			return err
		}
		if n := j.ds.taskRecords(int(i)); p.Consumed > n {
			return invalidf("task %d: consumed %d records of its %d", p.Meta.ID, p.Consumed, n)
		}
		if s := int64(j.taskSkip(i)); p.Consumed < s {
			return invalidf("task %d: consumed %d records, fewer than the %d its restored cursor skips", p.Meta.ID, p.Consumed, s)
		}
	}
	return nil
}

// recordProgress records the entries of tasks leased under their epoch,
// and returns how many it recorded. checkProgress passed.
func (j *job) recordProgress(ps []TaskProgress) int {
	recorded := 0
	for _, p := range ps {
		i := int32(p.Meta.ID - 1)
		t := &j.tasks[i]
		epoch, ok := j.cluster.leaseEpoch(p.Meta.Epoch)
		if !ok || !t.leased() || epoch != t.epoch {
			continue
		}
		if j.pos.consumed == nil {
			j.pos.consumed = make(map[int32]progressMark)
		}
		m := j.pos.consumed[i]
		if m.epoch != t.epoch {
			m = progressMark{epoch: t.epoch}
		}
		m.consumed = max(m.consumed, uint32(p.Consumed)) // progress never goes back
		j.pos.consumed[i] = m
		recorded++
	}
	return recorded
}

func (j *job) reportProgress(c *ReportProgress) *Result {
	if j.ds == nil {
		return errResult(ErrNoDataset)
	}
	if err := j.checkProgress(c.Progress); err != nil {
		return errResult(err)
	}
	return &Result{Recorded: j.recordProgress(c.Progress)}
}

func (j *job) commitCursor(c *CommitCursor) *Result {
	if j.ds == nil {
		return errResult(ErrNoDataset)
	}
	if c.TrainerID != "" && j.save.holder != "" && j.save.holder != c.TrainerID && j.save.deadline > j.cluster.clock {
		return errResult(fmt.Errorf("%w: trainer %q holds the save-model lease", ErrCursorFenced, truncate(j.save.holder)))
	}
	if c.Generation != 0 && c.Generation != j.pos.gen() {
		if c.Generation > j.pos.gen() {
			return errResult(invalidf("generation %d: the job is at generation %d", c.Generation, j.pos.gen()))
		}
		return errResult(fmt.Errorf("%w: the job was restored since generation %d; it is at %d", ErrCursorFenced, c.Generation, j.pos.gen()))
	}
	if err := j.checkProgress(c.Progress); err != nil {
		return errResult(err)
	}
	// The room check takes the size of the cursor of the position as it
	// is before the progress is recorded, so that a refusal changes
	// nothing; counting it does not need the cursor itself.
	delta := j.cursorBytes()
	if len(j.pos.cursors) >= MaxJobCursors {
		delta -= j.pos.cursors[0].bytes()
	}
	if err := j.room(delta); err != nil {
		return errResult(err)
	}
	// Nothing is refused from here on: record the progress, then take the
	// position with it.
	j.recordProgress(c.Progress)
	cur := j.snapshotCursor()
	j.pos.seq++
	cur.id, cur.step, cur.created, cur.generation = j.pos.seq, c.Step, j.cluster.clock, j.pos.gen()
	if len(j.pos.cursors) >= MaxJobCursors {
		j.account(-j.pos.cursors[0].bytes())
		j.pos.cursors = slices.Delete(j.pos.cursors, 0, 1)
	}
	j.pos.cursors = append(j.pos.cursors, cur)
	j.account(cur.bytes())
	info := j.cursorInfo(cur)
	return &Result{Cursor: &info}
}

// snapshotCursor takes the job's position now, without its id and labels.
// A task whose consumed records are all of its records counts finished,
// whether its finish was reported or not.
func (j *job) snapshotCursor() *cursor {
	n := len(j.tasks)
	c := &cursor{pass: j.pass, tasks: n, done: make([]uint64, (n+63)/64)}
	// Walking the done queue reads its tasks in the order they were
	// finished, scattered over memory when that is not index order;
	// scanning the tasks reads them all, in memory order. Walk when few
	// are done.
	if done := j.queues[qDone]; done.n < n/8 {
		for i := done.head; i >= 0; i = j.tasks[i].next {
			c.done[i/64] |= 1 << (i % 64)
		}
	} else {
		for w := range c.done {
			var word uint64
			for b, t := range j.tasks[w*64 : min(w*64+64, n)] {
				if t.queue == qDone {
					word |= 1 << b
				}
			}
			c.done[w] = word
		}
	}
	j.eachPositioned(func(i int32) {
		if c.isDone(int(i)) {
			return
		}
		n := j.positionAt(i)
		switch {
		case n == 0:
		case int64(n) >= j.ds.taskRecords(int(i)):
			c.done[i/64] |= 1 << (i % 64)
		default:
			c.partial = append(c.partial, cursorTask{index: i, consumed: n})
		}
	})
	c.recount(j.ds)
	if j.mix != nil {
		c.mix, c.carried = j.cursorMixture(c)
	}
	return c
}

// cursorBytes is cursorSize of the cursor snapshotCursor would take now,
// counted without taking it.
func (j *job) cursorBytes() int64 {
	partial := 0
	j.eachPositioned(func(i int32) {
		if j.tasks[i].queue == qDone {
			return
		}
		if n := j.positionAt(i); n > 0 && int64(n) < j.ds.taskRecords(int(i)) {
			partial++
		}
	})
	n := cursorSize((len(j.tasks)+63)/64, partial)
	if j.mix != nil {
		n += mixtureCursorBytes(j.mix, j.carriedCount())
	}
	return n
}

// eachPositioned calls f, in index order, with every task that has an
// entry in the job's skipped or consumed records, once.
func (j *job) eachPositioned(f func(i int32)) {
	idx := append(sortedKeys(j.pos.skip), sortedKeys(j.pos.consumed)...)
	slices.Sort(idx)
	for k, i := range idx {
		if k == 0 || idx[k-1] != i {
			f(i)
		}
	}
}

// recount derives the cursor's counts. The records of finished tasks are
// summed over each run of consecutive finished tasks at once, whose chunks
// are consecutive too.
func (c *cursor) recount(d *dataset) {
	c.finished, c.records = 0, 0
	for w, word := range c.done {
		c.finished += bits.OnesCount64(word)
		for word != 0 {
			lo := bits.TrailingZeros64(word)
			run := min(bits.TrailingZeros64(^(word >> lo)), 64-lo)
			c.records += d.rangeRecords(w*64+lo, w*64+lo+run)
			word &^= (1<<run - 1) << lo
		}
	}
	for _, p := range c.partial {
		c.records += int64(p.consumed)
	}
}

// rangeRecords is the number of records of the tasks of index lo to hi-1.
func (d *dataset) rangeRecords(lo, hi int) int64 {
	cpt := d.params.ChunksPerTask
	var n int64
	if len(d.sources) > 0 {
		for i := lo; i < hi; i++ {
			n += d.taskRecords(i)
		}
		return n
	}
	d.chunks.each(lo*cpt, min(hi*cpt, d.chunks.len()), func(c chunkRef) { n += int64(c.records) })
	return n
}

// findCursor returns the index of cursor id in the job's list.
func (j *job) findCursor(id uint64) (int, bool) {
	return slices.BinarySearchFunc(j.pos.cursors, id, func(c *cursor, id uint64) int { return cmp.Compare(c.id, id) })
}

func (j *job) restoreCursor(c *RestoreCursor) *Result {
	k, ok := j.findCursor(c.ID)
	if !ok {
		return errResult(ErrUnknownCursor)
	}
	cur := j.pos.cursors[k]
	if j.ds == nil || cur.tasks != len(j.tasks) {
		// A job's dataset is never replaced, so this cannot happen.
		return errResult(invalidf("cursor %d is of %d tasks, and the job has %d", c.ID, cur.tasks, len(j.tasks)))
	}
	revoked := j.outstanding()
	for q := range j.queues {
		j.queues[q] = emptyList()
	}
	for i := range j.tasks {
		t := &j.tasks[i]
		t.failures, t.deadline, t.carried = 0, 0, 0
		t.queue = numQueues // in no queue until pushed
		// A report under any lease granted so far changes nothing from
		// now on, as at a pass's start.
		t.passEpoch = t.epoch
	}
	if j.mix != nil {
		j.restoreMixture(cur)
	} else {
		// The tasks to do go back in the order of the cursor's pass, so
		// that those not finished are first dispatched as that pass
		// would have.
		j.eachInPassOrder(cur.pass, func(i int32) {
			if !cur.isDone(int(i)) {
				j.pushBack(qTodo, i)
			}
		})
		for i := range j.tasks {
			if cur.isDone(i) {
				j.pushBack(qDone, int32(i))
			}
		}
	}
	j.pass = cur.pass
	j.pos.consumed = nil
	j.pos.skip = nil
	if len(cur.partial) > 0 {
		j.pos.skip = make(map[int32]uint32, len(cur.partial))
		for _, p := range cur.partial {
			j.pos.skip[p.index] = p.consumed
		}
	}
	j.pos.generation = j.pos.gen() + 1
	j.maybeNextPass()
	info := j.cursorInfo(cur)
	return &Result{Cursor: &info, Generation: j.pos.generation, Recorded: revoked}
}

func (j *job) deleteCursor(c *DeleteCursor) *Result {
	k, ok := j.findCursor(c.ID)
	if !ok {
		return &Result{Ignored: true}
	}
	j.account(-j.pos.cursors[k].bytes())
	j.pos.cursors = slices.Delete(j.pos.cursors, k, k+1)
	return &Result{}
}

// CursorInfo describes a cursor.
type CursorInfo struct {
	ID         uint64
	Step       int64
	Pass       int
	Tasks      int
	Finished   int
	InFlight   int
	Records    int64
	Generation uint64
	Bytes      int64
	// Created is the FSM time of the commit.
	Created int64
}

// CursorTask is a task partly consumed at a cursor: its first Consumed
// records were.
type CursorTask struct {
	Task     int
	Consumed int64
}

func (j *job) cursorInfo(c *cursor) CursorInfo {
	return CursorInfo{
		ID: c.id, Step: c.step, Pass: c.pass, Tasks: c.tasks, Finished: c.finished, InFlight: len(c.partial),
		Records: c.records, Generation: c.generation, Bytes: c.bytes(), Created: c.created,
	}
}

// Cursors returns the cursors of job, oldest first, and its restore
// generation; ok is false when the job does not exist.
func (f *FSM) Cursors(job string) (cursors []CursorInfo, generation uint64, ok bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	j := f.s.jobs[jobName(job)]
	if j == nil {
		return nil, 0, false
	}
	for _, c := range j.pos.cursors {
		cursors = append(cursors, j.cursorInfo(c))
	}
	return cursors, j.pos.gen(), true
}

// Cursor returns cursor id of job with its partly consumed tasks; the
// error is ErrUnknownJob or ErrUnknownCursor.
func (f *FSM) Cursor(job string, id uint64) (CursorInfo, []CursorTask, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	j := f.s.jobs[jobName(job)]
	if j == nil {
		return CursorInfo{}, nil, ErrUnknownJob
	}
	k, ok := j.findCursor(id)
	if !ok {
		return CursorInfo{}, nil, ErrUnknownCursor
	}
	c := j.pos.cursors[k]
	tasks := make([]CursorTask, len(c.partial))
	for i, p := range c.partial {
		tasks[i] = CursorTask{Task: int(p.index) + 1, Consumed: int64(p.consumed)}
	}
	return j.cursorInfo(c), tasks, nil
}

// encodePositions writes the job's positions (snapshot version 10): the
// maps in index order, then the cursors.
func encodePositions(sw *snapWriter, j *job) {
	e := &sw.e
	p := &j.pos
	e.uvarint(p.generation)
	e.uvarint(p.seq)
	skip := sortedKeys(p.skip)
	e.uvarint(uint64(len(skip)))
	for _, i := range skip {
		e.int(int(i))
		e.uint32(p.skip[i])
	}
	consumed := sortedKeys(p.consumed)
	e.uvarint(uint64(len(consumed)))
	for _, i := range consumed {
		e.int(int(i))
		e.uint32(p.consumed[i].epoch)
		e.uint32(p.consumed[i].consumed)
	}
	e.uvarint(uint64(len(p.cursors)))
	for _, c := range p.cursors {
		e.uvarint(c.id)
		e.varint(c.step)
		e.int(c.pass)
		e.varint(c.created)
		e.uvarint(c.generation)
		e.int(c.tasks)
		e.uvarint(uint64(len(c.done)))
		for _, w := range c.done {
			e.uvarint(w)
			sw.flushIfFull()
		}
		e.uvarint(uint64(len(c.partial)))
		for _, t := range c.partial {
			e.int(int(t.index))
			e.uint32(t.consumed)
		}
		if j.mix != nil {
			encodeCursorMixture(e, c)
		}
		sw.flushIfFull()
	}
}

// decodePositions reads what encodePositions wrote, checking that every
// index names a task of the job and that the cursors are in id order.
func decodePositions(d *decoder, j *job) {
	p := &j.pos
	p.generation = d.uvarint()
	p.seq = d.uvarint()
	index := func() int32 {
		i := d.int()
		if d.err == nil && (i < 0 || i >= len(j.tasks)) {
			d.fail(fmt.Errorf("job %q: task index %d of %d tasks", j.name, i, len(j.tasks)))
		}
		return int32(i)
	}
	last := int32(-1)
	for range d.length(2) {
		i := index()
		if d.err == nil && i <= last {
			d.fail(fmt.Errorf("job %q: skipped task %d out of order", j.name, i))
		}
		last = i
		if p.skip == nil {
			p.skip = make(map[int32]uint32)
		}
		p.skip[i] = d.uint32()
	}
	last = -1
	for range d.length(3) {
		i := index()
		if d.err == nil && i <= last {
			d.fail(fmt.Errorf("job %q: consumed task %d out of order", j.name, i))
		}
		last = i
		if p.consumed == nil {
			p.consumed = make(map[int32]progressMark)
		}
		p.consumed[i] = progressMark{epoch: d.uint32(), consumed: d.uint32()}
	}
	for range d.length(8) {
		c := &cursor{id: d.uvarint(), step: d.varint(), pass: d.int(), created: d.varint(), generation: d.uvarint(), tasks: d.int()}
		if d.err == nil && (c.id == 0 || c.id > p.seq || (len(p.cursors) > 0 && c.id <= p.cursors[len(p.cursors)-1].id)) {
			d.fail(fmt.Errorf("job %q: cursor %d out of order", j.name, c.id))
		}
		if d.err == nil && c.tasks != len(j.tasks) {
			d.fail(fmt.Errorf("job %q: cursor %d of %d tasks, and the job has %d", j.name, c.id, c.tasks, len(j.tasks)))
		}
		words := d.length(1)
		if d.err == nil && words != (c.tasks+63)/64 {
			d.fail(fmt.Errorf("job %q: cursor %d has %d words for %d tasks", j.name, c.id, words, c.tasks))
		}
		for range words {
			c.done = append(c.done, d.uvarint())
		}
		for range d.length(2) {
			c.partial = append(c.partial, cursorTask{index: index(), consumed: d.uint32()})
		}
		if j.mix != nil && d.err == nil {
			decodeCursorMixture(d, j, c)
		}
		if d.err != nil {
			return
		}
		if j.ds != nil {
			c.recount(j.ds)
		}
		p.cursors = append(p.cursors, c)
	}
	if d.err == nil && len(p.cursors) > MaxJobCursors {
		d.fail(fmt.Errorf("job %q: %d cursors, at most %d", j.name, len(p.cursors), MaxJobCursors))
	}
}

// replayCursor describes, for a retry, cursor id of the job of entry e:
// as it is when the job still holds it, else by its id alone.
func replayCursor(j *job, e *dedupEntry, id uint64) *CursorInfo {
	if j != nil && j.seq == e.job {
		if k, ok := j.findCursor(id); ok {
			info := j.cursorInfo(j.pos.cursors[k])
			return &info
		}
	}
	return &CursorInfo{ID: id}
}
