package fsm

import "time"

// queueID names the queue a task is in. Every task is in exactly one.
type queueID uint8

const (
	qTodo queueID = iota
	qPending
	qDone
	qFailed
	numQueues
)

var queueNames = [numQueues]string{"todo", "pending", "done", "failed"}

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
}

// list is an intrusive doubly linked list of task indexes, giving O(1)
// push, pop and removal, and FIFO order for todo.
type list struct {
	head, tail int32
	n          int
}

func emptyList() list { return list{head: -1, tail: -1} }

func (s *job) pushBack(q queueID, i int32) {
	l := &s.queues[q]
	t := &s.tasks[i]
	t.queue, t.prev, t.next = q, l.tail, -1
	if l.tail >= 0 {
		s.tasks[l.tail].next = i
	} else {
		l.head = i
	}
	l.tail = i
	l.n++
}

func (s *job) unlink(i int32) {
	t := &s.tasks[i]
	l := &s.queues[t.queue]
	if t.prev >= 0 {
		s.tasks[t.prev].next = t.next
	} else {
		l.head = t.next
	}
	if t.next >= 0 {
		s.tasks[t.next].prev = t.prev
	} else {
		l.tail = t.prev
	}
	t.prev, t.next = -1, -1
	l.n--
}

// insertPending puts task i into pending, which is kept sorted by deadline
// (ties in arrival order). A new deadline is leaseEnd, which no pending
// deadline exceeds, so the scan from the tail stops at once.
func (s *job) insertPending(i int32) {
	l := &s.queues[qPending]
	d := s.tasks[i].deadline
	after := l.tail
	for after >= 0 && s.tasks[after].deadline > d {
		after = s.tasks[after].prev
	}
	t := &s.tasks[i]
	t.queue = qPending
	t.prev = after
	if after >= 0 {
		t.next = s.tasks[after].next
		s.tasks[after].next = i
	} else {
		t.next = l.head
		l.head = i
	}
	if t.next >= 0 {
		s.tasks[t.next].prev = i
	} else {
		l.tail = i
	}
	l.n++
}

// leaseEnd is the deadline of a lease granted or renewed now: clock plus
// the task timeout, but not before the end of the last LeaderGrace. The
// clock never runs backwards and the timeout is fixed, so it is never
// before any pending deadline.
func (s *job) leaseEnd() int64 {
	return max(s.clock+int64(s.ds.params.TaskTimeout), s.graceUntil)
}

// taskIndex checks a task id against the dataset.
func (s *job) taskIndex(id int) (int32, error) {
	if s.ds == nil {
		return 0, ErrNoDataset
	}
	if id < 1 || id > len(s.tasks) {
		return 0, ErrUnknownTask
	}
	return int32(id - 1), nil
}

// taskOf builds the leased view of pending task i as seen at FSM time now.
func (s *job) taskOf(i int32, now int64) *Task {
	t := &Task{Meta: TaskMeta{ID: int(i) + 1, Epoch: s.wireEpoch(s.tasks[i].epoch)}, Pass: s.pass, JobNumber: s.seq}
	t.Chunks = s.ds.taskChunks(int(i))
	t.Lease = time.Duration(s.tasks[i].deadline - now)
	return t
}

// leaseHeld returns task id's index when it is pending under epoch (its
// wire form) and its lease has not ended at FSM time now.
func (s *job) leaseHeld(id, epoch int, now int64) (int32, bool) {
	i, err := s.taskIndex(id)
	if err != nil {
		return 0, false
	}
	t := &s.tasks[i]
	return i, t.queue == qPending && s.wireEpoch(t.epoch) == epoch && t.deadline > now
}

// getTask leases the first todo task of the current pass. A trainer asking
// for a later pass is waiting for this one to end; if a task of this pass
// came back (its lease expired or it failed), it gets that task rather than
// ErrPassAfter, so that a pass whose trainer died never stalls. A GetTask
// that names the job's number is answered ErrUnknownJob by any other job
// of the name, or none.
func (s *job) getTask(c *GetTask) *Result {
	if c.JobNumber != 0 {
		if !s.atLeast(Protocol2) {
			// A replica of the previous release cannot decode it, and
			// answers it invalid: so must this one.
			return errResult(invalidf("GetTask names job number %d, which needs protocol level %d; the cluster is at %d",
				c.JobNumber, Protocol2, s.protocol))
		}
		if c.JobNumber != s.seq { // 0 for a job that does not exist
			return errResult(ErrUnknownJob)
		}
	}
	if s.ds == nil {
		return errResult(ErrNoDataset)
	}
	switch {
	case c.Pass < s.pass:
		return errResult(ErrPassBefore)
	case c.Pass > s.pass && s.queues[qTodo].n == 0:
		return errResult(ErrPassAfter)
	}
	todo := &s.queues[qTodo]
	if todo.n == 0 {
		if s.queues[qDone].n == 0 && s.queues[qPending].n == 0 {
			return errResult(ErrAllTaskFailed)
		}
		return errResult(ErrNoMoreAvailable)
	}
	i := todo.head
	s.unlink(i)
	t := &s.tasks[i]
	t.epoch++
	t.deadline = s.leaseEnd()
	s.insertPending(i)
	return &Result{Task: s.taskOf(i, s.clock)}
}

func (s *job) taskFinished(c *TaskFinished) *Result {
	m := c.Meta
	i, err := s.taskIndex(m.ID)
	if err != nil {
		return errResult(err)
	}
	t := &s.tasks[i]
	strict := s.ds.params.Strict
	epoch, ok := s.leaseEpoch(m.Epoch)
	switch {
	case !ok || epoch > t.epoch:
		return errResult(ErrStaleEpoch) // never dispatched under that epoch here
	case t.queue != qPending:
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
	s.unlink(i)
	t.failures = 0
	s.pushBack(qDone, i)
	s.maybeNextPass()
	return &Result{}
}

func (s *job) taskFailed(c *TaskFailed) *Result {
	m := c.Meta
	i, err := s.taskIndex(m.ID)
	if err != nil {
		return errResult(err)
	}
	t := &s.tasks[i]
	if epoch, ok := s.leaseEpoch(m.Epoch); !ok || t.queue != qPending || epoch != t.epoch {
		return &Result{Ignored: true}
	}
	s.failTask(i)
	s.maybeNextPass()
	return &Result{}
}

// failTask counts a failure of pending task i and re-queues it, or sets it
// aside once it has failed more than failureMax times.
func (s *job) failTask(i int32) {
	s.unlink(i)
	t := &s.tasks[i]
	t.failures++
	if int(t.failures) > s.ds.params.FailureMax {
		s.pushBack(qFailed, i)
		return
	}
	s.pushBack(qTodo, i)
}

func (s *job) renewLease(c *RenewLease) *Result {
	m := c.Meta
	i, err := s.taskIndex(m.ID)
	if err != nil {
		return errResult(err)
	}
	t := &s.tasks[i]
	if epoch, ok := s.leaseEpoch(m.Epoch); !ok || t.queue != qPending || epoch != t.epoch {
		return errResult(ErrStaleEpoch)
	}
	s.unlink(i)
	t.deadline = s.leaseEnd()
	s.insertPending(i)
	return &Result{Lease: time.Duration(t.deadline - s.clock)}
}

// expireTasks fails every pending task whose lease is due.
func (s *job) expireTasks() {
	if s.ds == nil {
		return
	}
	expired := false
	for h := s.queues[qPending].head; h >= 0 && s.tasks[h].deadline <= s.clock; h = s.queues[qPending].head {
		s.failTask(h)
		s.leasesExpired++
		expired = true
	}
	if expired {
		s.maybeNextPass()
	}
}

// maybeNextPass starts the next pass once no task is left to do or
// pending and at least one was done. Every task goes back to todo in id
// order with its failure count reset. If every task failed the pass stays,
// and GetTask answers ErrAllTaskFailed, as in the original master.
func (s *job) maybeNextPass() {
	if s.queues[qTodo].n != 0 || s.queues[qPending].n != 0 || s.queues[qDone].n == 0 {
		return
	}
	s.pass++
	s.queues[qDone] = emptyList()
	s.queues[qFailed] = emptyList()
	for i := range s.tasks {
		t := &s.tasks[i]
		t.failures = 0
		t.passEpoch = t.epoch
		t.deadline = 0
		s.pushBack(qTodo, int32(i))
	}
}

// setTasks creates n tasks in todo for a new dataset.
func (s *job) setTasks(n int) {
	s.tasks = make([]task, n)
	for q := range s.queues {
		s.queues[q] = emptyList()
	}
	for i := range s.tasks {
		s.pushBack(qTodo, int32(i))
	}
	s.pass = 0
}

// earliestTaskDeadline returns the deadline of the first pending lease.
func (s *job) earliestTaskDeadline() (int64, bool) {
	if h := s.queues[qPending].head; h >= 0 {
		return s.tasks[h].deadline, true
	}
	return 0, false
}
