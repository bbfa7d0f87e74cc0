package fsm

import (
	"cmp"
	"slices"
	"time"
)

// state is the whole replicated state: what the cluster shares (the
// clock, the allgather generation counter, the limits, the node registry,
// the de-duplication table) and its jobs. It is only touched by apply
// (under the FSM's write lock) and by read-only queries (under its read
// lock).
type state struct {
	// clock is the FSM time: the largest Now of any applied command.
	clock int64

	// forSnapshot marks a copy made for a snapshot (snapshotCopy): its
	// jobs hold their tasks encoded, and its sessions only the references
	// still live.
	forSnapshot bool

	// graceUntil is the latest LeaderGrace limit: no task lease granted
	// or renewed before it ends earlier, in any job.
	graceUntil int64

	// nextGen numbers allgather joins across every job, so that a
	// generation names one join of one job for ever, even across a
	// delete and a re-create.
	nextGen uint64

	// kvVersion is the last version a register write was given, in any
	// job, so that a version never repeats, even for a key of a job
	// deleted and created again.
	kvVersion uint64

	// limits is the record SetLimits set, zero fields meaning defaults.
	limits Limits

	// protocol is the cluster's protocol level (protocol.go): which
	// commands may be proposed, the semantics apply gives them and the
	// snapshot version written. It only rises.
	protocol uint64

	// era counts the restores that led to this cluster (era.go): each
	// restore starts the next era, from which the counters and the task
	// epochs hand out tokens that the cluster the backup came from never
	// handed out. 0 for a cluster that was never restored.
	era uint64

	// jobs holds every job by name; it is only ranged over through
	// sortedKeys.
	jobs map[string]*job
	// jobSeq numbers the jobs in creation order (job.seq), so that a job
	// deleted and created again under its name is told apart.
	jobSeq uint64
	// stateBytes is the state's size estimate (Limits.MaxStateBytes): the
	// sum of the jobs' jobBytes (derived, not encoded).
	stateBytes int64

	// changes lists what the current apply changed for allgather watches,
	// for the FSM to wake them (takeChanges). Apply never reads it, and
	// it is not encoded: it is not part of the replicated state.
	changes []groupChange
	// kvChanges lists, in the same way, what it changed for the
	// register's watches (takeKVChanges).
	kvChanges []kvChange

	nodes map[string]Registration

	dedup dedupTable

	// sessions holds the open sessions by id (session.go); it is only
	// ranged over through sortedKeys. sessionSeq is the last id given.
	sessions   map[uint64]*session
	sessionSeq uint64
	// graces are the FSM times of the last two LeaderGrace entries, the
	// latest first.
	graces [2]int64
}

// job is the state of one job: its dataset and task queue, its uploads,
// its save-model lease, its allgather groups and its register.
type job struct {
	// cluster is the state the job belongs to: the clock, graceUntil,
	// nextGen, the limits and the other jobs are the cluster's.
	cluster *state

	name string
	// seq is the job's number among every job ever created (state.jobSeq),
	// 0 while it is not among the jobs.
	seq uint64
	// createdAt and lastActivity are the FSM times of the job's creation
	// and of the last command addressed to it that was not rejected.
	createdAt, lastActivity int64

	ds      *dataset
	pass    int
	tasks   []task
	queues  [numQueues]list
	uploads map[string]*upload

	save saveLease

	groups map[string]*group
	// timeouts holds, by group id, the rounds of hard-deadline groups
	// that timed out (allgather.go), oldest first, for their retention.
	timeouts map[string][]timedOutRound
	// groupDeadline is the earliest deadline of a group or of a round in
	// timeouts, 0 when there are none.
	groupDeadline int64

	// kv is the register (kv.go), by key.
	kv map[string]kvEntry

	// pos is the job's data position and cursors (cursor.go).
	pos positions

	// mix is the changing state of a mixture (mixture.go), nil for a
	// dataset of one source.
	mix *mixture

	// Derived, never encoded: rebuilt on restore (recount).

	// leasesExpired counts the leases of the job that ran out on this
	// replica since it started or last restored a snapshot: a metric, in
	// no answer and no hash.
	leasesExpired uint64

	// jobBytes is the job's size estimate (limits.go), its share of the
	// cluster's stateBytes.
	jobBytes int64
	// groupData is the member data of every group together.
	groupData int64
	// staged is the number of chunks the uploads hold together.
	staged int
	// timeoutsDeadline is the earliest end of retention in timeouts, 0
	// when it is empty.
	timeoutsDeadline int64

	// taskSection is, in a copy taken for a snapshot (snapshotCopy), the
	// encoding of the tasks and queues, which the copy holds instead of
	// tasks; nil otherwise.
	taskSection *taskSection
}

func newState() *state {
	return &state{
		protocol: Protocol1,
		jobs:     make(map[string]*job),
		nodes:    make(map[string]Registration),
		dedup:    newDedupTable(),
		sessions: make(map[uint64]*session),
	}
}

// newJob returns an empty job of cluster s, not yet among its jobs.
func (s *state) newJob(name string) *job {
	j := &job{
		cluster: s, name: name, createdAt: s.clock, lastActivity: s.clock,
		uploads:  make(map[string]*upload),
		groups:   make(map[string]*group),
		timeouts: make(map[string][]timedOutRound),
		kv:       make(map[string]kvEntry),
	}
	for q := range j.queues {
		j.queues[q] = emptyList()
	}
	j.jobBytes = j.estimate()
	return j
}

// Result is the outcome of applying one command.
type Result struct {
	// Code is CodeOK or the error's code.
	Code Code
	// Message details a CodeInvalid or CodeLimit rejection.
	Message string
	// Task is the leased task of a successful GetTask.
	Task *Task
	// Granted reports whether RequestSaveModel granted the lease.
	Granted bool
	// Lease is, for a RenewLease that renewed and a RequestSaveModel
	// that granted, how long the lease lasts from the answer's FSM time;
	// for a duplicate, from the retry's FSM time, so that it is what
	// remains of the lease then. Task.Lease is GetTask's.
	Lease time.Duration
	// Generation identifies a Join: watches compare it with the member's
	// current generation to detect a reconnect.
	Generation uint64
	// Ignored reports a command that was accepted but had no effect, such
	// as a second SetDataset, a TaskFailed with a stale epoch, a
	// KVCompareAndSet or KVCompareValue that did not swap or a delete that
	// deleted nothing.
	Ignored bool
	// Swapped reports that a KVCompareAndSet or KVCompareValue stored its
	// value.
	Swapped bool
	// KV is, for a KVCompareAndSet or KVCompareValue, the key afterwards:
	// the value just stored, or, when it did not swap, the key as it is;
	// for a KVAdd, the sum stored and its version; for a KVAppend, the
	// new version (no value); for a KVDelete, the key's version when it
	// ran (no value), Found when the key existed.
	KV *KVValue
	// Deleted is how many keys a KVDelete or KVDeletePrefix deleted.
	Deleted int
	// Sum is the integer a KVAdd stored.
	Sum int64
	// Length is the length of the value a KVAppend left.
	Length int
	// Versions are the versions a KVMultiSet gave its keys, in its order.
	Versions []uint64
	// Cursor describes the cursor a CommitCursor committed or a
	// RestoreCursor restored.
	Cursor *CursorInfo
	// Recorded is how many entries of a ReportProgress or CommitCursor
	// named a current lease; for a RestoreCursor, how many leases it
	// revoked.
	Recorded int
	// Duplicate reports that the request id was seen before and this is
	// the first outcome, replayed.
	Duplicate bool
	// Clock is the FSM time at which the command took effect (for a
	// duplicate, the first time). Zero for a rejected command.
	Clock int64
	// Collected names, sorted, the jobs a Tick deleted because they were
	// idle for Limits.JobTTL, for the node to log.
	Collected []string
	// Session is the id of the session an OpenSession opened or a
	// CloseSession closed.
	Session uint64
	// Ended counts the sessions an ExpireSessions ended.
	Ended int
	// Finish is, for a GetTask that carried a finished task, how its
	// finish went; nil for one that carried none.
	Finish *FinishOutcome
	// More are the tasks a GetTask of Count above 1 leased after Task,
	// in the order it leased them.
	More []*Task
	// MoreFinish is how each of a GetTask's MoreFinished went, in its
	// order.
	MoreFinish []FinishOutcome
	// Renewed is, for a RenewLease with More, how each renewal went,
	// its Meta's first.
	Renewed []RenewOutcome
}

// RenewOutcome is how one renewal of a RenewLease with More went: Code is
// CodeOK, with the Lease a RenewLease of it alone would have answered,
// or the error that one would have got (CodeStaleEpoch, CodeUnknownTask),
// which changed nothing.
type RenewOutcome struct {
	Code  Code
	Lease time.Duration
}

// FinishOutcome is how the finish a GetTask carried went: Code is CodeOK
// when it was counted or Ignored (a finish of a task finished already,
// or of an earlier pass), else the error a TaskFinished of it would have
// got (CodeStaleEpoch, CodeUnknownTask, CodeNoDataset), which changed
// nothing.
type FinishOutcome struct {
	Code    Code
	Ignored bool
}

// number packs the outcome into a de-duplication entry's number (1 +
// code*2 + ignored), 0 for none.
func (o *FinishOutcome) number() int64 {
	if o == nil {
		return 0
	}
	n := 1 + 2*int64(o.Code)
	if o.Ignored {
		n++
	}
	return n
}

// finishOutcome unpacks what number packed.
func finishOutcome(n int64) *FinishOutcome {
	if n <= 0 {
		return nil
	}
	return &FinishOutcome{Code: Code((n - 1) / 2), Ignored: (n-1)%2 == 1}
}

// Err returns the result as an error: nil, a sentinel, or ErrInvalid,
// ErrLimitExceeded, ErrUnknownClient or ErrTooManyClients with the
// message.
func (r *Result) Err() error {
	switch {
	case r.Code == CodeInvalid && r.Message != "":
		return invalidf("%s", r.Message)
	case r.Code == CodeLimit && r.Message != "":
		return &limitError{msg: r.Message}
	case (r.Code == CodeUnknownClient || r.Code == CodeTooManyClients) && r.Message != "":
		return &refusal{msg: r.Message, err: r.Code.Err()}
	}
	return r.Code.Err()
}

// Task is a leased task: its meta and the chunks to read.
type Task struct {
	Meta   TaskMeta
	Chunks []Chunk
	// Pass is the pass the task belongs to: the current pass, which is
	// the one asked for or, for a trainer waiting on the next pass, the
	// one it helps finish.
	Pass int
	// Lease is how long the lease lasts from the answer's FSM time;
	// renew it well before it runs out.
	Lease time.Duration
	// JobNumber is the number the task's job was given at its creation:
	// a job deleted and created again under its name has another, so a
	// reader that sees it change knows that the job it read was deleted.
	JobNumber uint64
	// Session is the session that holds the task (Protocol6), 0 for a
	// lease that runs out: a held task needs no renewal, and goes back to
	// the queue when the session ends. Lease is then 0.
	Session uint64
	// Skip is how many of the task's first records the cursor the job
	// was restored to counts consumed (Protocol7): a reader delivers the
	// ones after them.
	Skip int64
	// Seed is the dataset's seed (Protocol8), which a reader that
	// shuffles the records of a task seeds its shuffle from, with the
	// pass and the task's id, so that every reader of the task shuffles
	// it alike.
	Seed uint64
	// Source is the name of the mixture source the task belongs to
	// (Protocol9), "" for a dataset of one source.
	Source string
}

func errResult(err error) *Result {
	r := &Result{Code: CodeOf(err)}
	switch r.Code {
	case CodeInvalid:
		r.Message = trimInvalid(err.Error())
	case CodeLimit, CodeUnknownClient, CodeTooManyClients:
		r.Message = err.Error()
	}
	return r
}

// trimInvalid drops the "invalid command: " prefix invalidf adds.
func trimInvalid(msg string) string {
	const p = "invalid command: "
	if len(msg) > len(p) && msg[:len(p)] == p {
		return msg[len(p):]
	}
	return msg
}

// rejected reports whether r rejects its command: such a command changed
// nothing, and is not remembered for de-duplication. The de-duplication
// table's refusals (ErrUnknownClient, ErrTooManyClients) are rejections
// too.
func (r *Result) rejected() bool {
	switch r.Code {
	case CodeInvalid, CodeLimit, CodeUnknownClient, CodeTooManyClients:
		return true
	}
	return false
}

// apply applies one decoded command. A command that fails validation, or
// would go past a limit, is rejected with CodeInvalid or CodeLimit and
// leaves the state exactly as it was, as does one the de-duplication table
// refuses (CodeUnknownClient, CodeTooManyClients).
func (s *state) apply(c Command) *Result {
	if err := validate(c); err != nil {
		return errResult(err)
	}
	if err := s.checkLevel(c); err != nil {
		return errResult(err)
	}
	h := c.Hdr()
	if err := s.checkSession(h); err != nil {
		return errResult(err)
	}
	dedupOn := !h.Request.IsZero()
	if dedupOn {
		if r, err := s.dedup.lookup(h.Request, c, s); err != nil {
			return errResult(err)
		} else if r != nil {
			return r
		}
	}
	before := s.clock
	if h.Now > s.clock {
		s.clock = h.Now
	}
	r, seq := s.dispatch(c)
	if r.rejected() {
		// Handlers validate before they mutate, so only the clock moved.
		s.clock = before
		return r
	}
	r.Clock = s.clock
	if dedupOn {
		s.dedup.record(h.Request, c.Type(), r, s.clock, seq, !s.atLeast(Protocol2))
		s.dedup.clients[h.Request.Client].session = h.Session
	}
	if h.Session != 0 {
		s.afterSession(c, r, seq)
	}
	s.dedup.expire(s.clock)
	return r
}

// dispatch runs c's apply function, from its row in commands. A command
// addressed to a job runs on that job. A job that does not exist runs it
// on a new, empty job, which joins the jobs only when the row creates jobs
// and the command is neither rejected nor ignored: so a command that does not create
// answers as it would on an empty job (GetTask: ErrNoDataset; Leave:
// ignored). A command of a creating row is first checked against the
// limits on creating a job, unless it cannot create one (createsNothing).
// It returns the seq of the job the command ran on, 0 for none.
func (s *state) dispatch(c Command) (*Result, uint64) {
	spec := lookup(c.Type())
	switch {
	case spec == nil:
		return errResult(invalidf("unhandled command %v", c.Type())), 0
	case spec.applyJob == nil:
		return spec.apply(s, c), 0
	}
	name := jobName(c.Hdr().Job)
	j := s.jobs[name]
	if j == nil {
		if spec.creates && !(s.atLeast(Protocol2) && createsNothing(c)) {
			if err := s.roomForJob(name); err != nil {
				return errResult(err), 0
			}
		}
		j = s.newJob(name)
	}
	r := spec.applyJob(j, c)
	if r.rejected() {
		return r, 0
	}
	if spec.creates && s.jobs[name] == nil && !r.Ignored {
		s.addJob(j)
	}
	j.lastActivity = s.clock
	return r, j.seq
}

// createsNothing reports a command of a creating type that, addressed to
// a job that does not exist, cannot create it: a compare-and-set that
// expects a version of its key, or a KVCompareValue that expects a value,
// which an empty job does not hold. From Protocol2 on it is answered as
// on an empty job (not swapped, the key absent), changing nothing, rather
// than refused for the limits on creating a job; below, it was refused,
// and old replicas still do.
func createsNothing(c Command) bool {
	switch c := c.(type) {
	case *KVCompareAndSet:
		return c.Version != 0
	case *KVCompareValue:
		return len(c.Expected) != 0
	}
	return false
}

// tick expires every deadline that is due at the current clock, in every
// job, and then deletes the jobs idle for JobTTL.
func (s *state) tick(*Tick) *Result {
	r := &Result{}
	for _, name := range sortedKeys(s.jobs) {
		j := s.jobs[name]
		j.expireTasks()
		j.expireSaveLease()
		j.expireGroups()
		j.expireUploads()
		if j.idleExpired() {
			s.dropJob(j)
			r.Collected = append(r.Collected, name)
		}
	}
	return r
}

// leaderGrace moves every deadline before clock+grace to clock+grace.
func (s *state) leaderGrace(c *LeaderGrace) *Result {
	limit := s.clock + int64(c.Grace)
	s.graceUntil = max(s.graceUntil, limit)
	if s.atLeast(Protocol6) {
		// Below, the snapshot does not hold them.
		s.graces = [2]int64{s.clock, s.graces[0]}
	}
	for _, name := range sortedKeys(s.jobs) {
		s.jobs[name].leaderGrace(limit)
	}
	return &Result{}
}

// leaderGrace moves every deadline of the job before limit to limit.
func (j *job) leaderGrace(limit int64) {
	for i := j.queues[qPending].head; i >= 0; i = j.tasks[i].next {
		if j.tasks[i].deadline >= limit {
			break // pending is sorted by deadline
		}
		j.tasks[i].deadline = limit
	}
	if j.save.holder != "" && j.save.deadline < limit {
		j.save.deadline = limit
	}
	for _, id := range sortedKeys(j.groups) {
		if g := j.groups[id]; g.deadline < limit {
			g.deadline = limit
		}
	}
	for _, id := range sortedKeys(j.timeouts) {
		for i := range j.timeouts[id] {
			j.timeouts[id][i].until = max(j.timeouts[id][i].until, limit)
		}
	}
	j.updateTimeoutsDeadline()
	j.updateGroupDeadline()
	for _, id := range sortedKeys(j.uploads) {
		if u := j.uploads[id]; u.touched+int64(UploadIdleTimeout) < limit {
			u.touched = limit - int64(UploadIdleTimeout)
		}
	}
}

func (s *state) registerNode(c *RegisterNode) *Result {
	n := c.Node
	if _, ok := s.nodes[n.ID]; !ok && len(s.nodes) >= MaxNodes {
		return errResult(invalidf("node registry is full (%d nodes)", MaxNodes))
	}
	s.nodes[n.ID] = n
	return &Result{}
}

func (s *state) removeNode(c *RemoveNode) *Result {
	if _, ok := s.nodes[c.ID]; !ok {
		return &Result{Ignored: true}
	}
	delete(s.nodes, c.ID)
	return &Result{}
}

// sortedKeys returns the keys of m in ascending order. It is the one place
// in this package that ranges over a map, so that no map order can leak
// into a result or a snapshot.
func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
