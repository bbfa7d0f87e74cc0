package fsm

import (
	"math"
	"math/bits"
	"slices"
)

// Weighted mixtures (Protocol9). A dataset set with Sources is a mixture:
// its chunk list is the sources' chunks, one source after the other, and
// each source's tasks are cut from its own chunks alone, so that no task
// holds records of two sources.
//
// Each source has its own todo queue and its own passes: once every task
// of a source was handed out in its pass, and at least one finished, its
// tasks go back to its todo in the order of the source's next pass, the
// permutation of (the source's seed, its pass) when the dataset
// shuffles, without waiting for the tasks still out on a lease: a source
// never stops for a straggler, or for a dead trainer's lease to run out,
// which would bend the mixture. Such a task is carried: its next finish
// counts for the pass it was leased in, and puts it back in todo for the
// new pass, so that each pass of a source still finishes each of its
// tasks once; a task whose lease outlives several passes of its source
// (its trainer died, and the lease has not run out yet) owes each of
// them, up to maxCarried passes, after which the source waits. The
// job's pass is the least pass of its sources: a pass of the mixture
// ends when every source has been read through once more.
//
// GetTask chooses the source of the next task by deficit, counted in
// records, not tasks. Each source's share since its weights last changed
// is the records of its finished tasks plus those of its leased ones;
// the source chosen is the one whose share, with the next task it would
// hand out, is the least for its weight: the least (share + next)/weight,
// ties to the first source. So every source stays within about one task
// of its weight's share of the records handed out, whatever the number
// of trainers, and a task that comes back (its lease ran out, it failed,
// its session ended) leaves the share it was counted in, and is handed out
// again before its source falls behind. A source of weight 0 is not read.
//
// SetWeights changes the weights at one log index for every trainer: from
// the next GetTask on, the shares count again from 0 (the tasks out on a
// lease still count in theirs), so the new weights hold from the next task
// and the past is not paid back. A schedule of weights keyed by the job's
// records consumed changes them in the same way at the first task finish
// that reaches each step.
//
// Every finished task adds its records to its source's counts, exactly
// once per pass of the source: a task finished twice is finished once.

// Limits of a mixture.
const (
	// MaxSources bounds the sources of a dataset.
	MaxSources = 16
	// WeightUnit is the weight of 1.0: a weight is a count of millionths,
	// and weights count only relative to each other.
	WeightUnit = 1_000_000
	// MaxWeight bounds one source's weight: 4000.0.
	MaxWeight = 4000 * WeightUnit
	// MaxScheduleSteps bounds the steps of a weight schedule.
	MaxScheduleSteps = 64
	// MaxSourceNameLen bounds a source's name.
	MaxSourceNameLen = 64
	// estSource is the size estimate of a source without its name and
	// patterns, and of a schedule's weight entry without its name.
	estSource = 96
)

// Source is one source of a mixture: a name, a weight and the chunks it
// holds, the next Chunks of the dataset's chunk list after the previous
// sources'.
type Source struct {
	Name string `json:"name"`
	// Weight is the source's weight in millionths (WeightUnit).
	Weight uint32 `json:"weight"`
	// Chunks is how many chunks of the dataset's chunk list are the
	// source's.
	Chunks int `json:"chunks"`
	// Patterns are the file patterns the source was indexed from.
	Patterns []string `json:"patterns,omitempty"`
}

// SourceWeight is a weight given to the source Name, in millionths.
type SourceWeight struct {
	Name   string `json:"name"`
	Weight uint32 `json:"weight"`
}

// WeightStep is one step of a weight schedule: once the job's records
// consumed reach AtRecords, the sources named take these weights (the
// others keep theirs).
type WeightStep struct {
	AtRecords int64          `json:"at_records"`
	Weights   []SourceWeight `json:"weights"`
}

// SetWeights changes a mixture's weights (Protocol9): Weights from the
// next task on (none to keep them), and, with ReplaceSchedule, the
// schedule of later changes becomes Schedule (none to clear it). Steps
// already reached take effect at once, in order.
type SetWeights struct {
	Header
	Weights         []SourceWeight
	ReplaceSchedule bool
	Schedule        []WeightStep
}

func (*SetWeights) Type() CmdType { return TypeSetWeights }

func encodeWeights(e *encoder, ws []SourceWeight) {
	e.uvarint(uint64(len(ws)))
	for _, w := range ws {
		e.string(w.Name)
		e.uint32(w.Weight)
	}
}

func decodeWeights(d *decoder) []SourceWeight {
	var ws []SourceWeight
	for range d.length(2) {
		ws = append(ws, SourceWeight{Name: d.string(), Weight: d.uint32()})
	}
	return ws
}

func (c *SetWeights) encode(e *encoder) {
	encodeWeights(e, c.Weights)
	e.bool(c.ReplaceSchedule)
	e.uvarint(uint64(len(c.Schedule)))
	for _, s := range c.Schedule {
		e.varint(s.AtRecords)
		encodeWeights(e, s.Weights)
	}
}

func (c *SetWeights) decode(d *decoder) {
	c.Weights = decodeWeights(d)
	c.ReplaceSchedule = d.bool()
	for range d.length(2) {
		c.Schedule = append(c.Schedule, WeightStep{AtRecords: d.varint(), Weights: decodeWeights(d)})
	}
}

func (c *SetWeights) validate() error {
	if len(c.Weights) == 0 && !c.ReplaceSchedule {
		return invalidf("a weight change names no weight and no schedule")
	}
	if len(c.Schedule) > 0 && !c.ReplaceSchedule {
		return invalidf("a schedule is given without replacing the schedule")
	}
	if err := validateWeights(c.Weights); err != nil {
		return err
	}
	if len(c.Schedule) > MaxScheduleSteps {
		return invalidf("%d schedule steps exceed %d", len(c.Schedule), MaxScheduleSteps)
	}
	for k, s := range c.Schedule {
		if s.AtRecords < 0 {
			return invalidf("schedule step %d: negative record count %d", k, s.AtRecords)
		}
		if k > 0 && s.AtRecords <= c.Schedule[k-1].AtRecords {
			return invalidf("schedule step %d: at %d records, not after the step before (%d)", k, s.AtRecords, c.Schedule[k-1].AtRecords)
		}
		if len(s.Weights) == 0 {
			return invalidf("schedule step %d names no weight", k)
		}
		if err := validateWeights(s.Weights); err != nil {
			return invalidf("schedule step %d: %s", k, trimInvalid(err.Error()))
		}
	}
	return nil
}

// validateWeights checks a list of weights: at most MaxSources, each of a
// valid name, once, and at most MaxWeight.
func validateWeights(ws []SourceWeight) error {
	if len(ws) > MaxSources {
		return invalidf("%d weights exceed %d sources", len(ws), MaxSources)
	}
	for k, w := range ws {
		if err := validateSourceName(w.Name); err != nil {
			return err
		}
		if w.Weight > MaxWeight {
			return invalidf("source %q: weight %d exceeds %d", w.Name, w.Weight, MaxWeight)
		}
		for _, o := range ws[:k] {
			if o.Name == w.Name {
				return invalidf("source %q is weighted twice", w.Name)
			}
		}
	}
	return nil
}

// ValidateSourceName checks a source's name as a dataset's sources and
// SetWeights require it: 1 to MaxSourceNameLen letters, digits, '_', '-'
// or '.'. The error wraps ErrInvalid.
func ValidateSourceName(name string) error { return validateSourceName(name) }

// WeightUnits converts a weight given as a number, 1.0 being WeightUnit,
// into millionths, rounded to the nearest. The weight must be finite, at
// least 0 and at most MaxWeight/WeightUnit, and one above 0 must not
// round to 0: a source it would silently stop is refused. The error wraps
// ErrInvalid.
func WeightUnits(w float64) (uint32, error) {
	const most = MaxWeight / WeightUnit
	switch {
	case math.IsNaN(w) || math.IsInf(w, 0):
		return 0, invalidf("weight %v is not a finite number", w)
	case w < 0:
		return 0, invalidf("weight %v is negative", w)
	case w > most:
		return 0, invalidf("weight %v exceeds %d", w, most)
	}
	u := uint32(math.Round(w * WeightUnit))
	if u == 0 && w > 0 {
		return 0, invalidf("weight %v is below the smallest, %v", w, 1.0/WeightUnit)
	}
	return u, nil
}

// validateSourceName checks a source's name: 1 to MaxSourceNameLen
// letters, digits, '_', '-' or '.'.
func validateSourceName(name string) error {
	if name == "" || len(name) > MaxSourceNameLen {
		return invalidf("source name %q: length %d out of range [1, %d]", truncate(name), len(name), MaxSourceNameLen)
	}
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-', r == '.':
		default:
			return invalidf("source name %q: only letters, digits, '_', '-' and '.'", truncate(name))
		}
	}
	return nil
}

// validateSources checks a dataset's sources: none, or 1 to MaxSources of
// distinct valid names, each of at least one chunk, weights of at most
// MaxWeight not all 0, and valid patterns.
func validateSources(sources []Source) error {
	if len(sources) > MaxSources {
		return invalidf("%d sources exceed %d", len(sources), MaxSources)
	}
	var total uint64
	var patterns []string
	for k, s := range sources {
		if err := validateSourceName(s.Name); err != nil {
			return err
		}
		for _, o := range sources[:k] {
			if o.Name == s.Name {
				return invalidf("source %q is named twice", s.Name)
			}
		}
		if s.Weight > MaxWeight {
			return invalidf("source %q: weight %d exceeds %d", s.Name, s.Weight, MaxWeight)
		}
		if s.Chunks < 1 || s.Chunks > MaxChunks {
			return invalidf("source %q: %d chunks out of range [1, %d]", s.Name, s.Chunks, MaxChunks)
		}
		total += uint64(s.Weight)
		patterns = append(patterns, s.Patterns...)
	}
	if len(sources) > 0 && total == 0 {
		return invalidf("every source has weight 0")
	}
	return validatePatterns(patterns)
}

func encodeSources(e *encoder, sources []Source) {
	e.uvarint(uint64(len(sources)))
	for _, s := range sources {
		e.string(s.Name)
		e.uint32(s.Weight)
		e.int(s.Chunks)
		e.strings(s.Patterns)
	}
}

func decodeSources(d *decoder) []Source {
	var out []Source
	for range d.length(4) {
		s := Source{Name: d.string(), Weight: d.uint32(), Chunks: d.int(), Patterns: d.strings()}
		if len(s.Patterns) == 0 {
			s.Patterns = nil
		}
		out = append(out, s)
	}
	return out
}

// sourceRange is where one source's chunks and tasks lie in the dataset's
// lists.
type sourceRange struct {
	chunk0, chunks int
	task0, tasks   int
}

// sourceRanges derives the ranges of sources; the chunk counts are
// checked against the chunk list when the dataset is installed.
func sourceRanges(sources []Source, chunksPerTask int) []sourceRange {
	if len(sources) == 0 {
		return nil
	}
	out := make([]sourceRange, len(sources))
	chunk, task := 0, 0
	for k, s := range sources {
		n := (s.Chunks + chunksPerTask - 1) / chunksPerTask
		out[k] = sourceRange{chunk0: chunk, chunks: s.Chunks, task0: task, tasks: n}
		chunk += s.Chunks
		task += n
	}
	return out
}

// sourceOf returns the index of the source task index i belongs to.
func (d *dataset) sourceOf(i int32) int {
	k, found := slices.BinarySearchFunc(d.sources, int(i), func(r sourceRange, i int) int {
		switch {
		case i < r.task0:
			return 1
		case i >= r.task0+r.tasks:
			return -1
		}
		return 0
	})
	if !found {
		panic("fsm: task index outside every source")
	}
	return k
}

// taskSpan returns the chunk indexes [lo, hi) of task index i.
func (d *dataset) taskSpan(i int) (lo, hi int) {
	cpt := d.params.ChunksPerTask
	if len(d.sources) == 0 {
		return i * cpt, min((i+1)*cpt, d.chunks.len())
	}
	r := d.sources[d.sourceOf(int32(i))]
	lo = r.chunk0 + (i-r.task0)*cpt
	return lo, min(lo+cpt, r.chunk0+r.chunks)
}

// checkSources checks that the sources hold the chunk list exactly.
func (d *dataset) checkSources() error {
	if len(d.sources) == 0 {
		return nil
	}
	last := d.sources[len(d.sources)-1]
	if n := last.chunk0 + last.chunks; n != d.chunks.len() {
		return invalidf("the sources hold %d chunks, and the dataset has %d", n, d.chunks.len())
	}
	return nil
}

// mixture is the changing state of a mixture job: the sources' weights,
// passes, queues and counts, and the schedule.
type mixture struct {
	src []mixSource
	// schedule holds the steps not yet reached, in order. Its slices are
	// never modified, so clones share them.
	schedule []WeightStep
	// records counts the records of every task finished, in any pass.
	records int64
}

// mixSource is the changing state of one source.
type mixSource struct {
	weight uint32
	pass   int
	// todo is the source's todo queue; the job's todo list holds none of
	// a mixture's tasks, only their count.
	todo list
	// window counts the records of the source's tasks finished since its
	// weights last changed.
	window int64
	// records and finished count the records and the tasks of the
	// source's finished tasks, in any pass.
	records  int64
	finished int64

	// Derived, never encoded.

	// count holds the source's tasks by queue.
	count [numQueues]int
	// leased counts the records of the source's leased tasks.
	leased int64
}

// newMixture returns the mixture of d, with every queue empty.
func newMixture(d *dataset) *mixture {
	m := &mixture{src: make([]mixSource, len(d.params.Sources))}
	for k, s := range d.params.Sources {
		m.src[k] = mixSource{weight: s.Weight, todo: emptyList()}
	}
	return m
}

// clone returns a copy that later applies cannot change.
func (m *mixture) clone() *mixture {
	if m == nil {
		return nil
	}
	c := *m
	c.src = slices.Clone(m.src)
	return &c
}

// bytes is the size estimate of the mixture's schedule.
func (m *mixture) bytes() int64 {
	var n int64
	for _, s := range m.schedule {
		for _, w := range s.Weights {
			n += estSource + int64(len(w.Name))
		}
	}
	return n
}

// sourcesBytes is the size estimate of a dataset's sources.
func sourcesBytes(sources []Source) int64 {
	var n int64
	for _, s := range sources {
		n += estSource + int64(len(s.Name)) + pathBytes(s.Patterns)
	}
	return n
}

// queueMoved keeps a mixture's counts as task i enters (delta 1) or
// leaves (delta -1) queue q.
func (j *job) queueMoved(q queueID, i int32, delta int) {
	src := &j.mix.src[j.ds.sourceOf(i)]
	src.count[q] += delta
	if q == qPending || q == qHeld {
		src.leased += int64(delta) * j.ds.taskRecords(int(i))
	}
}

// listOf returns the list queue q of task i is linked in: a mixture's
// todo tasks are in their source's.
func (j *job) listOf(q queueID, i int32) *list {
	if q == qTodo && j.mix != nil {
		return &j.mix.src[j.ds.sourceOf(i)].todo
	}
	return &j.queues[q]
}

// eachTodo calls f with every todo task in queue order, a mixture's
// source after source.
func (j *job) eachTodo(f func(i int32)) {
	if j.mix == nil {
		for i := j.queues[qTodo].head; i >= 0; i = j.tasks[i].next {
			f(i)
		}
		return
	}
	for k := range j.mix.src {
		for i := j.mix.src[k].todo.head; i >= 0; i = j.tasks[i].next {
			f(i)
		}
	}
}

// nextTodo returns the task GetTask hands out next: the head of todo, or
// of the source a mixture's deficit chooses; false when there is none.
func (j *job) nextTodo() (int32, bool) {
	if j.mix == nil {
		h := j.queues[qTodo].head
		return h, h >= 0
	}
	best, bestNext, bestWeight := int32(-1), uint64(0), uint64(0)
	for k := range j.mix.src {
		src := &j.mix.src[k]
		if src.weight == 0 || src.todo.n == 0 {
			continue
		}
		next := uint64(max(src.window+src.leased, 0) + j.ds.taskRecords(int(src.todo.head)))
		w := uint64(src.weight)
		// next/w < bestNext/bestWeight, compared exactly in 128 bits.
		ahi, alo := bits.Mul64(next, bestWeight)
		bhi, blo := bits.Mul64(bestNext, w)
		if best < 0 || ahi < bhi || (ahi == bhi && alo < blo) {
			best, bestNext, bestWeight = src.todo.head, next, w
		}
	}
	return best, best >= 0
}

// allFailed reports, for a job with nothing to hand out, whether that is
// for good: every task (of a mixture, of every source it reads) failed
// in its pass.
func (j *job) allFailed() bool {
	if j.mix == nil {
		return j.queues[qDone].n == 0 && j.outstanding() == 0
	}
	for k := range j.mix.src {
		if src := &j.mix.src[k]; src.weight != 0 && src.count[qFailed] != j.ds.sources[k].tasks {
			return false
		}
	}
	return true
}

// finishedInMixture counts task i's records, just finished, in its
// source, and applies the schedule steps they reach.
func (j *job) finishedInMixture(i int32) {
	n := j.ds.taskRecords(int(i))
	src := &j.mix.src[j.ds.sourceOf(i)]
	src.window += n
	src.records += n
	src.finished++
	j.mix.records += n
	j.applyDueSteps()
}

// applyDueSteps applies, in order, the schedule steps the job's records
// consumed have reached.
func (j *job) applyDueSteps() {
	for len(j.mix.schedule) > 0 && j.mix.records >= j.mix.schedule[0].AtRecords {
		before := j.mix.bytes()
		j.setSourceWeights(j.mix.schedule[0].Weights)
		j.mix.schedule = j.mix.schedule[1:]
		j.account(j.mix.bytes() - before)
	}
}

// setSourceWeights gives the named sources their weights and starts every
// source's share again from its leased records. The names were checked.
func (j *job) setSourceWeights(ws []SourceWeight) {
	for _, w := range ws {
		j.mix.src[j.sourceIndex(w.Name)].weight = w.Weight
	}
	for k := range j.mix.src {
		j.mix.src[k].window = 0
	}
}

// sourceIndex returns the index of the source named name, -1 for none.
func (j *job) sourceIndex(name string) int {
	return slices.IndexFunc(j.ds.params.Sources, func(s Source) bool { return s.Name == name })
}

// checkWeights checks that ws names sources of the job and, applied to
// weights, leaves one of them above 0; it returns the weights after.
func (j *job) checkWeights(weights []uint32, ws []SourceWeight) ([]uint32, error) {
	out := slices.Clone(weights)
	for _, w := range ws {
		k := j.sourceIndex(w.Name)
		if k < 0 {
			return nil, invalidf("job %q has no source %q", j.name, w.Name)
		}
		out[k] = w.Weight
	}
	if !slices.ContainsFunc(out, func(w uint32) bool { return w != 0 }) {
		return nil, invalidf("every source of job %q would have weight 0", j.name)
	}
	return out, nil
}

func (j *job) setWeights(c *SetWeights) *Result {
	if j.ds == nil {
		return errResult(ErrNoDataset)
	}
	if j.mix == nil {
		return errResult(invalidf("job %q has one source: its dataset was not set with sources", j.name))
	}
	weights := make([]uint32, len(j.mix.src))
	for k := range j.mix.src {
		weights[k] = j.mix.src[k].weight
	}
	now, err := j.checkWeights(weights, c.Weights)
	if err != nil {
		return errResult(err)
	}
	after := now
	steps := j.mix.schedule
	if c.ReplaceSchedule {
		steps = c.Schedule
	}
	for k, s := range steps {
		if after, err = j.checkWeights(after, s.Weights); err != nil {
			return errResult(invalidf("schedule step %d: %s", k, trimInvalid(err.Error())))
		}
	}
	var grow int64
	if c.ReplaceSchedule {
		grow = (&mixture{schedule: c.Schedule}).bytes() - j.mix.bytes()
		if err := j.room(grow); err != nil {
			return errResult(err)
		}
	}
	if len(c.Weights) > 0 {
		j.setSourceWeights(c.Weights)
	}
	if c.ReplaceSchedule {
		j.mix.schedule = c.Schedule
		j.account(grow)
	}
	j.applyDueSteps()
	return &Result{}
}

// sourceSeed is the seed of source k's permutations: the dataset's,
// mixed with the source's index.
func sourceSeed(seed uint64, k int) uint64 { return mix64(seed ^ uint64(k+1)*golden64) }

// maxCarried bounds the passes a task may owe: a source whose every other
// task was read that many passes ahead of one still out on a lease (its
// trainer died, and the lease has not run out) waits for it, rather than
// owe it more passes, each of which reads it once more when it comes
// back. A source of realistic size never comes near it (a dead lease lasts
// seconds, a pass of the source far longer); a source of a few tasks read
// many times a second may, and waiting there would bend the mixture for
// the rest of the lease, so the bound is generous.
const maxCarried = 255

// mayCarry reports whether no leased task of source k owes maxCarried
// passes already, so that its next pass may start.
func (j *job) mayCarry(k int) bool {
	src := &j.mix.src[k]
	if src.count[qPending]+src.count[qHeld] == 0 {
		return true
	}
	r := j.ds.sources[k]
	for i := r.task0; i < r.task0+r.tasks; i++ {
		if j.tasks[i].carried == maxCarried {
			return false
		}
	}
	return true
}

// fillSource puts every task of source k that is not out on a lease
// into its todo, in the order of its current pass.
func (j *job) fillSource(k int) {
	j.fillSourceWhere(k, func(i int32) bool { return !j.tasks[i].leased() })
}

// fillSourceWhere puts the tasks of source k that keep accepts into its
// todo, in the order of its current pass.
func (j *job) fillSourceWhere(k int, keep func(i int32) bool) {
	r := j.ds.sources[k]
	push := func(i int32) {
		if keep(i) {
			j.pushBack(qTodo, i)
		}
	}
	if !j.ds.params.Shuffle {
		for i := range r.tasks {
			push(int32(r.task0 + i))
		}
		return
	}
	p := newPermutation(sourceSeed(j.ds.params.Seed, k), j.mix.src[k].pass, r.tasks)
	for x := range uint64(r.tasks) {
		push(int32(r.task0) + int32(p.at(x)))
	}
}

// mixtureNextPasses starts the next pass of every source that has no task
// left to do or out on a lease and at least one done, and moves the
// job's pass to the least of its sources'.
func (j *job) mixtureNextPasses() {
	for k := range j.mix.src {
		src := &j.mix.src[k]
		if src.todo.n != 0 || src.count[qDone] == 0 || !j.mayCarry(k) {
			continue
		}
		r := j.ds.sources[k]
		for i := int32(r.task0); i < int32(r.task0+r.tasks); i++ {
			t := &j.tasks[i]
			if t.leased() {
				t.carried++
				continue
			}
			j.unlink(i)
			j.forgetTask(i)
			t.failures, t.passEpoch, t.deadline, t.carried = 0, t.epoch, 0, 0
		}
		src.pass++
		j.fillSource(k)
	}
	pass := j.mix.src[0].pass
	for k := range j.mix.src {
		pass = min(pass, j.mix.src[k].pass)
	}
	j.pass = pass
}

// SourceStats describes one source of a mixture.
type SourceStats struct {
	Name string `json:"name"`
	// Weight is the source's weight now, in millionths.
	Weight uint32 `json:"weight"`
	// Pass is the source's pass.
	Pass    int `json:"pass"`
	Tasks   int `json:"tasks"`
	Todo    int `json:"todo"`
	Pending int `json:"pending"`
	Done    int `json:"done"`
	Failed  int `json:"failed"`
	// Records and Finished count the records and the tasks of the
	// source's finished tasks, in every pass.
	Records  int64 `json:"records"`
	Finished int64 `json:"finished"`
	// Share is the records of the source's finished and leased tasks
	// since its weights last changed, which the deficit compares.
	Share    int64    `json:"share"`
	Patterns []string `json:"patterns,omitempty"`
}

// sourceStats describes the sources of a mixture job, in order.
func (j *job) sourceStats() []SourceStats {
	if j.mix == nil {
		return nil
	}
	out := make([]SourceStats, len(j.mix.src))
	for k := range j.mix.src {
		src := &j.mix.src[k]
		out[k] = SourceStats{
			Name: j.ds.params.Sources[k].Name, Weight: src.weight, Pass: src.pass, Tasks: j.ds.sources[k].tasks,
			Todo: src.todo.n, Pending: src.count[qPending] + src.count[qHeld], Done: src.count[qDone], Failed: src.count[qFailed],
			Records: src.records, Finished: src.finished, Share: src.window + src.leased,
			Patterns: slices.Clone(j.ds.params.Sources[k].Patterns),
		}
	}
	return out
}

// encodeMixture writes the changing state of a mixture job (snapshot
// version 12); the queues are written with the job's.
func encodeMixture(e *encoder, m *mixture) {
	for k := range m.src {
		src := &m.src[k]
		e.uint32(src.weight)
		e.int(src.pass)
		e.varint(src.window)
		e.varint(src.records)
		e.varint(src.finished)
	}
	e.varint(m.records)
	e.uvarint(uint64(len(m.schedule)))
	for _, s := range m.schedule {
		e.varint(s.AtRecords)
		encodeWeights(e, s.Weights)
	}
}

// decodeMixture reads what encodeMixture wrote into m, whose queues are
// already read.
func decodeMixture(d *decoder, m *mixture) {
	for k := range m.src {
		src := &m.src[k]
		src.weight = d.uint32()
		src.pass = d.int()
		src.window = d.varint()
		src.records = d.varint()
		src.finished = d.varint()
	}
	m.records = d.varint()
	for range d.length(2) {
		m.schedule = append(m.schedule, WeightStep{AtRecords: d.varint(), Weights: decodeWeights(d)})
	}
}

// encodeCarried writes the indexes of a mixture's carried tasks, each
// with the passes it owes.
func encodeCarried(e *encoder, j *job) {
	var carried []int32
	for i := range j.tasks {
		if j.tasks[i].carried > 0 {
			carried = append(carried, int32(i))
		}
	}
	e.uvarint(uint64(len(carried)))
	prev := int32(-1)
	for _, i := range carried {
		e.varint(int64(i - prev))
		e.uvarint(uint64(j.tasks[i].carried))
		prev = i
	}
}

// decodeCarried reads what encodeCarried wrote: each a task leased or to
// do (its lease ended), in increasing order.
func decodeCarried(d *decoder, j *job) {
	prev := int64(-1)
	for range d.length(2) {
		i := prev + d.varint()
		n := d.uvarint()
		if d.err == nil && (n == 0 || n > maxCarried || i <= prev || i >= int64(len(j.tasks)) || !(j.tasks[i].leased() || j.tasks[i].queue == qTodo)) {
			d.fail(invalidf("carried task index %d", i))
		}
		if d.err != nil {
			return
		}
		j.tasks[i].carried = uint16(n)
		prev = i
	}
}

// checkMixture verifies a mixture job's invariants after a restore, and
// those of its cursors' mixtures.
func (j *job) checkMixture() error {
	if err := j.checkMixtureState(j.mix); err != nil {
		return err
	}
	for _, c := range j.pos.cursors {
		if c.mix == nil {
			return invalidf("cursor %d of a mixture holds no mixture", c.id)
		}
		if err := j.checkMixtureState(c.mix); err != nil {
			return invalidf("cursor %d: %s", c.id, trimInvalid(err.Error()))
		}
	}
	return nil
}

// checkMixtureState verifies the invariants of m, a mixture of the job's
// dataset: counts in range, a weight above 0, and a valid schedule.
func (j *job) checkMixtureState(m *mixture) error {
	var weights []uint32
	var sum int64
	for k := range m.src {
		src := &m.src[k]
		if src.weight > MaxWeight || src.pass < 0 || src.window < 0 || src.records < 0 || src.finished < 0 {
			return invalidf("source %d: bad counts", k)
		}
		weights = append(weights, src.weight)
		sum += src.records
	}
	if sum != m.records {
		return invalidf("the sources' records (%d) are not the job's (%d)", sum, m.records)
	}
	if !slices.ContainsFunc(weights, func(w uint32) bool { return w != 0 }) {
		return invalidf("every source has weight 0")
	}
	steps := &SetWeights{ReplaceSchedule: true, Schedule: m.schedule}
	if err := steps.validate(); err != nil {
		return err
	}
	after := weights
	for _, s := range m.schedule {
		var err error
		if after, err = j.checkWeights(after, s.Weights); err != nil {
			return err
		}
	}
	return nil
}
