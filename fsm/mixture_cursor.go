package fsm

// Cursors of a mixture job. A cursor of a mixture holds, besides the
// tasks finished in their sources' current passes and the tasks partly
// consumed, the mixture's state at the commit: each source's weight,
// pass, share and counts, the schedule, and the passes carried tasks owe.
// RestoreCursor puts all of it back, so that after a restore each source
// reads the records its pass had not trained at the checkpoint, the
// records counted consumed are those of the checkpoint (and the schedule
// steps reached since take effect again when they are reached again),
// and the weights are those the checkpoint trained with.

// cursorMixture returns the mixture state a cursor keeps: a copy of the
// job's without its queues, and the carried tasks with the passes they
// owe.
func (j *job) cursorMixture(c *cursor) (*mixture, []cursorTask) {
	m := j.mix.clone()
	for k := range m.src {
		src := &m.src[k]
		src.todo, src.count, src.leased = emptyList(), [numQueues]int{}, 0
	}
	// A leased task the cursor counts done had its records all consumed:
	// it counts as finished, as its restore never hands it out again.
	for i := range j.tasks {
		if j.tasks[i].leased() && c.isDone(i) {
			n := j.ds.taskRecords(i)
			src := &m.src[j.ds.sourceOf(int32(i))]
			src.window += n
			src.records += n
			src.finished++
			m.records += n
		}
	}
	var carried []cursorTask
	for i := range j.tasks {
		if n := j.tasks[i].carried; n > 0 {
			carried = append(carried, cursorTask{index: int32(i), consumed: uint32(n)})
		}
	}
	return m, carried
}

// mixtureCursorBytes is the size estimate of the mixture part of a
// cursor of m with carried tasks carried.
func mixtureCursorBytes(m *mixture, carried int) int64 {
	if m == nil {
		return 0
	}
	return estSource*int64(len(m.src)) + m.bytes() + 8*int64(carried)
}

// carriedCount counts the job's carried tasks.
func (j *job) carriedCount() int {
	n := 0
	for i := range j.tasks {
		if j.tasks[i].carried > 0 {
			n++
		}
	}
	return n
}

// restoreMixture puts the job's mixture back to cursor cur: its state,
// then each source's tasks not finished at the cursor in the order of
// the source's pass then, the finished ones in done. The queues are
// empty and no task is leased.
func (j *job) restoreMixture(cur *cursor) {
	before := j.mix.bytes()
	j.mix = cur.mix.clone()
	for k := range j.mix.src {
		j.mix.src[k].todo = emptyList()
	}
	// A carried task the cursor counts done was consumed for a pass it
	// owed: it owes one fewer, and its source's pass reads it again.
	owed := make([]bool, len(j.tasks))
	for _, c := range cur.carried {
		n := uint16(c.consumed)
		if cur.isDone(int(c.index)) {
			n--
			owed[c.index] = true
		}
		j.tasks[c.index].carried = n
	}
	done := func(i int32) bool { return cur.isDone(int(i)) && !owed[i] }
	for k := range j.mix.src {
		j.fillSourceWhere(k, func(i int32) bool { return !done(i) })
	}
	for i := range j.tasks {
		if done(int32(i)) {
			j.pushBack(qDone, int32(i))
		}
	}
	j.account(j.mix.bytes() - before)
	j.applyDueSteps()
}

// encodeCursorMixture writes the mixture part of a cursor.
func encodeCursorMixture(e *encoder, c *cursor) {
	encodeMixture(e, c.mix)
	e.uvarint(uint64(len(c.carried)))
	prev := int32(-1)
	for _, t := range c.carried {
		e.varint(int64(t.index - prev))
		e.uvarint(uint64(t.consumed))
		prev = t.index
	}
}

// decodeCursorMixture reads what encodeCursorMixture wrote into c, for a
// cursor of job j.
func decodeCursorMixture(d *decoder, j *job, c *cursor) {
	c.mix = newMixture(j.ds)
	decodeMixture(d, c.mix)
	prev := int64(-1)
	for range d.length(2) {
		i := prev + d.varint()
		n := d.uvarint()
		if d.err == nil && (n == 0 || n > maxCarried || i <= prev || i >= int64(len(j.tasks))) {
			d.fail(invalidf("cursor %d: carried task index %d owing %d passes", c.id, i, n))
		}
		if d.err != nil {
			return
		}
		c.carried = append(c.carried, cursorTask{index: int32(i), consumed: uint32(n)})
		prev = i
	}
}
