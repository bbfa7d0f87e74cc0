package fsm

import "time"

// queueID names the queue a task is in. Every task is in exactly one.
type queueID uint8

const (
	qTodo queueID = iota
	qPending
	qDone
	qFailed
	// qHeld holds the tasks leased under a session (Protocol6): no
	// deadline ends them; the session's end does (session.go).
	qHeld
	numQueues
)

// queuesBefore9 is the number of queues a snapshot before version 9
// holds: there were no held tasks.
const queuesBefore9 = qHeld

var queueNames = [numQueues]string{"todo", "pending", "done", "failed", "held"}

// task is the mutable state of one task; its chunks are implied by its id
// (task i covers chunks [i*chunksPerTask, (i+1)*chunksPerTask)), so a task
// costs a fixed 32 bytes however long the file paths are.
type task struct {
	deadline  int64  // lease end in FSM time, while pending
	epoch     uint32 // number of dispatches so far
	passEpoch uint32 // epoch when the current pass began
	failures  uint32 // failures and timeouts in this pass
	prev      int32  // queue links, -1 at the ends
	next      int32
	queue     queueID
	// carried counts, for a task of a mixture, the passes its source
	// started while the task was out on a lease of the pass before (or
	// back in todo after one): each of its next finishes but the last
	// counts for one of those passes and puts it back in todo for the
	// next (mixture.go).
	carried uint16
}

// list is an intrusive doubly linked list of task indexes, giving O(1)
// push, pop and removal, and FIFO order for todo.
type list struct {
	head, tail int32
	n          int
}

func emptyList() list { return list{head: -1, tail: -1} }

func (j *job) pushBack(q queueID, i int32) {
	l := j.listOf(q, i)
	if j.mix != nil {
		j.queueMoved(q, i, 1)
		if q == qTodo {
			j.queues[qTodo].n++ // the count of every source's
		}
	}
	t := &j.tasks[i]
	t.queue, t.prev, t.next = q, l.tail, -1
	if l.tail >= 0 {
		j.tasks[l.tail].next = i
	} else {
		l.head = i
	}
	l.tail = i
	l.n++
}

func (j *job) unlink(i int32) {
	t := &j.tasks[i]
	l := j.listOf(t.queue, i)
	if j.mix != nil {
		j.queueMoved(t.queue, i, -1)
		if t.queue == qTodo {
			j.queues[qTodo].n--
		}
	}
	if t.prev >= 0 {
		j.tasks[t.prev].next = t.next
	} else {
		l.head = t.next
	}
	if t.next >= 0 {
		j.tasks[t.next].prev = t.prev
	} else {
		l.tail = t.prev
	}
	t.prev, t.next = -1, -1
	l.n--
}

// insertPending puts task i into pending, which is kept sorted by deadline
// (ties in arrival order). A new deadline is leaseEnd, which no pending
// deadline exceeds, so the scan from the tail stops at once.
func (j *job) insertPending(i int32) {
	l := &j.queues[qPending]
	if j.mix != nil {
		j.queueMoved(qPending, i, 1)
	}
	d := j.tasks[i].deadline
	after := l.tail
	for after >= 0 && j.tasks[after].deadline > d {
		after = j.tasks[after].prev
	}
	t := &j.tasks[i]
	t.queue = qPending
	t.prev = after
	if after >= 0 {
		t.next = j.tasks[after].next
		j.tasks[after].next = i
	} else {
		t.next = l.head
		l.head = i
	}
	if t.next >= 0 {
		j.tasks[t.next].prev = i
	} else {
		l.tail = i
	}
	l.n++
}

// heldLease is what RenewLease answers for a task held by a session: the
// TTL of the session the command names, or MaxSessionTTL, since there is
// nothing to renew.
func (s *state) heldLease(id uint64) time.Duration {
	if ss := s.sessions[id]; ss != nil {
		return time.Duration(ss.ttl)
	}
	return MaxSessionTTL
}

// leaseEnd is the deadline of a lease granted or renewed now: clock plus
// the task timeout, but not before the end of the last LeaderGrace. The
// clock never runs backwards and the timeout is fixed, so it is never
// before any pending deadline.
func (j *job) leaseEnd() int64 {
	return max(j.cluster.clock+int64(j.ds.params.TaskTimeout), j.cluster.graceUntil)
}

// taskIndex checks a task id against the dataset.
func (j *job) taskIndex(id int) (int32, error) {
	if j.ds == nil {
		return 0, ErrNoDataset
	}
	if id < 1 || id > len(j.tasks) {
		return 0, ErrUnknownTask
	}
	return int32(id - 1), nil
}

// taskOf builds the leased view of pending task i as seen at FSM time now.
func (j *job) taskOf(i int32, now int64) *Task {
	t := &Task{Meta: TaskMeta{ID: int(i) + 1, Epoch: j.cluster.wireEpoch(j.tasks[i].epoch)}, Pass: j.pass, JobNumber: j.seq}
	t.Chunks = j.ds.taskChunks(int(i))
	t.Skip = int64(j.taskSkip(i))
	t.Seed = j.ds.params.Seed
	if j.mix != nil {
		t.Source = j.ds.params.Sources[j.ds.sourceOf(i)].Name
	}
	if j.tasks[i].queue == qPending {
		t.Lease = time.Duration(j.tasks[i].deadline - now)
	}
	return t
}

// leaseHeld returns task id's index when it is pending under epoch (its
// wire form) and its lease has not ended at FSM time now.
func (j *job) leaseHeld(id, epoch int, now int64) (int32, bool) {
	i, err := j.taskIndex(id)
	if err != nil {
		return 0, false
	}
	t := &j.tasks[i]
	if t.queue == qHeld {
		return i, j.cluster.wireEpoch(t.epoch) == epoch
	}
	return i, t.queue == qPending && j.cluster.wireEpoch(t.epoch) == epoch && t.deadline > now
}

// leased reports whether task i is out on a lease: pending, or held by a
// session.
func (t *task) leased() bool { return t.queue == qPending || t.queue == qHeld }

// outstanding counts the tasks out on a lease.
func (j *job) outstanding() int { return j.queues[qPending].n + j.queues[qHeld].n }

// getTask leases the first todo task of the current pass. A trainer asking
// for a later pass is waiting for this one to end; if a task of this pass
// came back (its lease expired or it failed), it gets that task rather than
// ErrPassAfter, so that a pass whose trainer died never stalls. A GetTask
// that names the job's number is answered ErrUnknownJob by any other job
// of the name, or none.
func (j *job) getTask(c *GetTask) *Result {
	if c.JobNumber != 0 {
		if !j.cluster.atLeast(Protocol2) {
			// A replica of the previous release cannot decode it, and
			// answers it invalid: so must this one.
			return errResult(invalidf("GetTask names job number %d, which needs protocol level %d; the cluster is at %d",
				c.JobNumber, Protocol2, j.cluster.protocol))
		}
		if c.JobNumber != j.seq { // 0 for a job that does not exist
			return errResult(ErrUnknownJob)
		}
	}
	var finish *FinishOutcome
	var more []FinishOutcome
	if c.Finished.ID != 0 {
		fr := j.taskFinished(&TaskFinished{Meta: c.Finished})
		finish = &FinishOutcome{Code: fr.Code, Ignored: fr.Ignored}
		for _, m := range c.MoreFinished {
			fr := j.taskFinished(&TaskFinished{Meta: m})
			more = append(more, FinishOutcome{Code: fr.Code, Ignored: fr.Ignored})
		}
	}
	r := j.leaseNext(c)
	for n := 1; n < c.Count && r.Code == CodeOK; n++ {
		next := j.leaseNext(c)
		if next.Code != CodeOK {
			break
		}
		r.More = append(r.More, next.Task)
	}
	r.Finish, r.MoreFinish = finish, more
	return r
}

// leaseNext is GetTask without its finish.
func (j *job) leaseNext(c *GetTask) *Result {
	if j.ds == nil {
		return errResult(ErrNoDataset)
	}
	switch {
	case c.Pass < j.pass:
		return errResult(ErrPassBefore)
	}
	i, ok := j.nextTodo()
	switch {
	case !ok && c.Pass > j.pass:
		return errResult(ErrPassAfter)
	case !ok && j.allFailed():
		return errResult(ErrAllTaskFailed)
	case !ok:
		return errResult(ErrNoMoreAvailable)
	}
	j.unlink(i)
	t := &j.tasks[i]
	t.epoch++
	if c.Session != 0 {
		// Held by the session until it ends or the task is finished.
		t.deadline = 0
		j.pushBack(qHeld, i)
		r := &Result{Task: j.taskOf(i, j.cluster.clock)}
		r.Task.Session = c.Session
		return r
	}
	t.deadline = j.leaseEnd()
	j.insertPending(i)
	return &Result{Task: j.taskOf(i, j.cluster.clock)}
}

func (j *job) taskFinished(c *TaskFinished) *Result {
	m := c.Meta
	i, err := j.taskIndex(m.ID)
	if err != nil {
		return errResult(err)
	}
	t := &j.tasks[i]
	strict := j.ds.params.Strict
	epoch, ok := j.cluster.leaseEpoch(m.Epoch)
	switch {
	case !ok || epoch > t.epoch:
		return errResult(ErrStaleEpoch) // never dispatched under that epoch here
	case !t.leased():
		if strict {
			return errResult(ErrStaleEpoch)
		}
		return &Result{Ignored: true}
	case epoch != t.epoch:
		if strict {
			return errResult(ErrStaleEpoch)
		}
		// A late finish from an earlier lease of this pass counts, as in
		// the original master; one from an earlier pass does not.
		if m.Epoch != 0 && epoch <= t.passEpoch {
			return &Result{Ignored: true}
		}
	}
	j.unlink(i)
	t.failures = 0
	if t.carried > 0 {
		// Finished for a pass before; the next one reads it again.
		t.carried--
		t.passEpoch = t.epoch
		j.pushBack(qTodo, i)
	} else {
		j.pushBack(qDone, i)
	}
	j.forgetTask(i)
	if j.mix != nil {
		j.finishedInMixture(i)
	}
	j.maybeNextPass()
	return &Result{}
}

func (j *job) taskFailed(c *TaskFailed) *Result {
	m := c.Meta
	i, err := j.taskIndex(m.ID)
	if err != nil {
		return errResult(err)
	}
	t := &j.tasks[i]
	if epoch, ok := j.cluster.leaseEpoch(m.Epoch); !ok || !t.leased() || epoch != t.epoch {
		return &Result{Ignored: true}
	}
	j.failTask(i)
	j.maybeNextPass()
	return &Result{}
}

// failTask counts a failure of pending task i and re-queues it, or sets it
// aside once it has failed more than failureMax times.
func (j *job) failTask(i int32) {
	j.unlink(i)
	t := &j.tasks[i]
	t.failures++
	if int(t.failures) > j.ds.params.FailureMax {
		if t.carried > 0 {
			// It fails out of a pass it owed; the next one reads it again.
			t.carried--
			t.failures, t.passEpoch = 0, t.epoch
			j.forgetTask(i)
			j.pushBack(qTodo, i)
			return
		}
		j.pushBack(qFailed, i)
		return
	}
	j.pushBack(qTodo, i)
}

func (j *job) renewLease(c *RenewLease) *Result {
	if len(c.More) == 0 {
		return j.renewOne(c.Meta, c.Session)
	}
	if j.ds == nil {
		// As a renewal of one lease answers: the job, deleted maybe, has
		// nothing to renew.
		return errResult(ErrNoDataset)
	}
	r := &Result{}
	for _, m := range append([]TaskMeta{c.Meta}, c.More...) {
		one := j.renewOne(m, c.Session)
		r.Renewed = append(r.Renewed, RenewOutcome{Code: one.Code, Lease: one.Lease})
	}
	return r
}

// renewOne renews the lease m names, as a RenewLease of it alone under
// session would.
func (j *job) renewOne(m TaskMeta, session uint64) *Result {
	i, err := j.taskIndex(m.ID)
	if err != nil {
		return errResult(err)
	}
	t := &j.tasks[i]
	if epoch, ok := j.cluster.leaseEpoch(m.Epoch); !ok || !t.leased() || epoch != t.epoch {
		return errResult(ErrStaleEpoch)
	}
	if t.queue == qHeld {
		// Its session holds it; nothing to renew.
		return &Result{Lease: j.cluster.heldLease(session)}
	}
	j.unlink(i)
	t.deadline = j.leaseEnd()
	j.insertPending(i)
	return &Result{Lease: time.Duration(t.deadline - j.cluster.clock)}
}

// expireTasks fails every pending task whose lease is due.
func (j *job) expireTasks() {
	if j.ds == nil {
		return
	}
	expired := false
	for h := j.queues[qPending].head; h >= 0 && j.tasks[h].deadline <= j.cluster.clock; h = j.queues[qPending].head {
		j.failTask(h)
		j.leasesExpired++
		expired = true
	}
	if expired {
		j.maybeNextPass()
	}
}

// maybeNextPass starts the next pass once no task is left to do or
// pending and at least one was done. Every task goes back to todo with
// its failure count reset, in the pass's order (shuffle.go): the
// permutation of the dataset's seed and the new pass when it shuffles,
// else id order. If every task failed the pass stays, and GetTask
// answers ErrAllTaskFailed, as in the original master.
func (j *job) maybeNextPass() {
	if j.mix != nil {
		j.mixtureNextPasses()
		return
	}
	if j.queues[qTodo].n != 0 || j.outstanding() != 0 || j.queues[qDone].n == 0 {
		return
	}
	j.pass++
	j.forgetPass()
	j.queues[qDone] = emptyList()
	j.queues[qFailed] = emptyList()
	for i := range j.tasks {
		t := &j.tasks[i]
		t.failures = 0
		t.passEpoch = t.epoch
		t.deadline = 0
	}
	j.fillTodo()
}

// setTasks creates n tasks in todo for a new dataset, in the order of
// pass 0.
func (j *job) setTasks(n int) {
	j.tasks = make([]task, n)
	for q := range j.queues {
		j.queues[q] = emptyList()
	}
	j.pass = 0
	j.mix = nil
	if len(j.ds.sources) > 0 {
		j.mix = newMixture(j.ds)
		for k := range j.mix.src {
			j.fillSource(k)
		}
		return
	}
	j.fillTodo()
}

// fillTodo links every task into todo in the current pass's order, as
// pushBack of each in turn would, for a job of one source whose queues
// hold none of them (a new dataset, or a new pass). It writes the links
// in one walk, which for 10 million tasks takes a fraction of the time.
func (j *job) fillTodo() {
	l := &j.queues[qTodo]
	*l = emptyList()
	n := int32(len(j.tasks))
	if n == 0 {
		return
	}
	if !j.ds.params.Shuffle {
		for i := range n {
			t := &j.tasks[i]
			t.queue, t.prev, t.next = qTodo, i-1, i+1
		}
		j.tasks[n-1].next = -1
		l.head, l.tail, l.n = 0, n-1, int(n)
		return
	}
	prev := int32(-1)
	j.eachInPassOrder(j.pass, func(i int32) {
		t := &j.tasks[i]
		t.queue, t.prev, t.next = qTodo, prev, -1
		if prev >= 0 {
			j.tasks[prev].next = i
		} else {
			l.head = i
		}
		prev = i
	})
	l.tail, l.n = prev, int(n)
}

// earliestTaskDeadline returns the deadline of the first pending lease.
func (j *job) earliestTaskDeadline() (int64, bool) {
	if h := j.queues[qPending].head; h >= 0 {
		return j.tasks[h].deadline, true
	}
	return 0, false
}
