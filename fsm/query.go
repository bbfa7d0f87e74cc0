package fsm

import (
	"slices"
	"time"

	"github.com/google/uuid"
)

// Stats summarises one job and the cluster. Computing it is O(1) in the
// number of tasks.
type Stats struct {
	// Job is the job the other job fields describe; an unknown job's are
	// those of an empty job.
	Job        string `json:"job"`
	Clock      int64  `json:"clock"`
	HasDataset bool   `json:"has_dataset"`
	Pass       int    `json:"pass"`
	// Files counts the dataset's files that hold chunks.
	Files  int `json:"files"`
	Chunks int `json:"chunks"`
	Tasks  int `json:"tasks"`
	Todo   int `json:"todo"`
	// Pending counts the tasks out on a lease, Held those of them held by
	// sessions.
	Pending int           `json:"pending"`
	Held    int           `json:"held,omitempty"`
	Done    int           `json:"done"`
	Failed  int           `json:"failed"`
	Params  DatasetParams `json:"params"`
	// Patterns are the file patterns the dataset was set with, as given;
	// none when unknown (a dataset set before Protocol4, or given as a
	// chunk list).
	Patterns []string `json:"patterns,omitempty"`
	// Sources describe a mixture's sources, in order; none for a
	// dataset of one source. Schedule holds the weight steps not yet
	// reached, and Records the records of every task finished.
	Sources      []SourceStats `json:"sources,omitempty"`
	Schedule     []WeightStep  `json:"schedule,omitempty"`
	Records      int64         `json:"records,omitempty"`
	Uploads      int           `json:"uploads"`
	SaveHolder   string        `json:"save_holder,omitempty"`
	SaveDeadline int64         `json:"save_deadline,omitempty"`
	Groups       int           `json:"groups"`
	// Jobs counts the jobs, StateBytes is the size estimate of the whole
	// state (Limits.MaxStateBytes).
	Jobs         int    `json:"jobs"`
	StateBytes   int64  `json:"state_bytes"`
	Nodes        int    `json:"nodes"`
	DedupClients int    `json:"dedup_clients"`
	AppliedIndex uint64 `json:"applied_index"`
}

// Stats returns the counts per queue, the pass, the lease holder and the
// table sizes of job ("" is DefaultJob), and the cluster's table sizes.
func (f *FSM) Stats(job string) Stats {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s := f.s
	st := Stats{
		Job: jobName(job), Clock: s.clock, Jobs: len(s.jobs), StateBytes: s.stateBytes,
		Nodes: len(s.nodes), DedupClients: s.dedup.n, AppliedIndex: f.applied.Load(),
	}
	j := s.jobs[st.Job]
	if j == nil {
		return st
	}
	st.HasDataset, st.Pass, st.Tasks = j.ds != nil, j.pass, len(j.tasks)
	st.Todo, st.Pending, st.Done, st.Failed = j.queues[qTodo].n, j.outstanding(), j.queues[qDone].n, j.queues[qFailed].n
	st.Held = j.queues[qHeld].n
	st.Uploads, st.Groups = len(j.uploads), len(j.groups)
	if j.ds != nil {
		st.Chunks, st.Files = j.ds.chunks.len(), len(j.ds.paths)
		st.Params, st.Patterns = j.ds.params, slices.Clone(j.ds.patterns)
		st.Params.Sources = slices.Clone(j.ds.params.Sources)
	}
	if j.mix != nil {
		st.Sources, st.Schedule, st.Records = j.sourceStats(), slices.Clone(j.mix.schedule), j.mix.records
	}
	st.SaveHolder, st.SaveDeadline, _ = j.saveHolder()
	return st
}

// LeasesExpired counts the task leases of job that ran out on this replica
// since it started or last restored a snapshot (a Prometheus counter: it
// starts again from 0 then); 0 for an unknown job.
func (f *FSM) LeasesExpired(job string) uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if j := f.s.jobs[jobName(job)]; j != nil {
		return j.leasesExpired
	}
	return 0
}

// JobInfo describes one job.
type JobInfo struct {
	Name string `json:"name"`
	// Number is the job's number among every job the cluster created,
	// in creation order: a job deleted and created again gets a new one.
	Number uint64 `json:"number"`
	// CreatedAt and LastActivity are the FSM times of the job's creation
	// and of the last command addressed to it that was not rejected.
	CreatedAt    int64 `json:"created_at"`
	LastActivity int64 `json:"last_activity"`
	HasDataset   bool  `json:"has_dataset"`
	Pass         int   `json:"pass"`
	Tasks        int   `json:"tasks"`
	Todo         int   `json:"todo"`
	Pending      int   `json:"pending"`
	// Held counts the pending tasks held by sessions.
	Held    int `json:"held,omitempty"`
	Done    int `json:"done"`
	Failed  int `json:"failed"`
	Uploads int `json:"uploads"`
	Groups  int `json:"groups"`
	// KVKeys counts the keys of the job's register.
	KVKeys int `json:"kv_keys"`
	// SaveHolder holds the save-model lease until SaveDeadline.
	SaveHolder   string `json:"save_holder,omitempty"`
	SaveDeadline int64  `json:"save_deadline,omitempty"`
	// Bytes is the job's size estimate (Limits.MaxStateBytes).
	Bytes int64 `json:"bytes"`
	// CollectAt is when JobTTL deletes the job unless a command addresses
	// it first; zero while JobTTL is off or the job holds a task lease, a
	// save-model holder or an allgather group.
	CollectAt int64 `json:"collect_at,omitempty"`
}

func (j *job) info() JobInfo {
	ji := JobInfo{
		Name: j.name, Number: j.seq, CreatedAt: j.createdAt, LastActivity: j.lastActivity, HasDataset: j.ds != nil,
		Pass: j.pass, Tasks: len(j.tasks),
		Todo: j.queues[qTodo].n, Pending: j.outstanding(), Held: j.queues[qHeld].n, Done: j.queues[qDone].n, Failed: j.queues[qFailed].n,
		Uploads: len(j.uploads), Groups: len(j.groups), KVKeys: len(j.kv), Bytes: j.jobBytes,
	}
	ji.SaveHolder, ji.SaveDeadline, _ = j.saveHolder()
	ji.CollectAt, _ = j.ttlDeadline()
	return ji
}

// Jobs returns every job, sorted by name.
func (f *FSM) Jobs() []JobInfo {
	f.mu.RLock()
	defer f.mu.RUnlock()
	names := sortedKeys(f.s.jobs)
	out := make([]JobInfo, 0, len(names))
	for _, name := range names {
		out = append(out, f.s.jobs[name].info())
	}
	return out
}

// Job returns the job named name ("" is DefaultJob), and false when it
// does not exist.
func (f *FSM) Job(name string) (JobInfo, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	j := f.s.jobs[jobName(name)]
	if j == nil {
		return JobInfo{}, false
	}
	return j.info(), true
}

// DatasetInfo describes a job's dataset.
type DatasetInfo struct {
	Params DatasetParams
	// Patterns are the file patterns the dataset was set with, as given;
	// none when unknown (a dataset set before Protocol4, or given as a
	// chunk list).
	Patterns []string
	// Files counts the dataset's files, Chunks its chunks.
	Files  int
	Chunks int
	// Paths are the first of the dataset's files, in the order of their
	// first chunk.
	Paths []string
}

// Dataset returns the dataset of the job named name ("" is DefaultJob),
// with at most maxPaths of its file paths, and false when the job does
// not exist or has no dataset.
func (f *FSM) Dataset(name string, maxPaths int) (DatasetInfo, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	j := f.s.jobs[jobName(name)]
	if j == nil || j.ds == nil {
		return DatasetInfo{}, false
	}
	d := j.ds
	return DatasetInfo{Params: d.params, Patterns: slices.Clone(d.patterns), Files: len(d.paths), Chunks: d.chunks.len(),
		Paths: slices.Clone(d.paths[:min(max(maxPaths, 0), len(d.paths))])}, true
}

// Limits returns the limits in effect: the replicated record with every
// zero field replaced by its default.
func (f *FSM) Limits() Limits {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.s.effectiveLimits()
}

// LimitsRecord returns the limits record as SetLimits last set it, zero
// fields meaning their defaults: the record a change of some fields
// starts from.
func (f *FSM) LimitsRecord() Limits {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.s.limits
}

// Clock returns the FSM time in unix nanoseconds.
func (f *FSM) Clock() int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.s.clock
}

// Pass returns the current pass of job ("" is DefaultJob); 0 for an
// unknown job.
func (f *FSM) Pass(job string) int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if j := f.s.jobs[jobName(job)]; j != nil {
		return j.pass
	}
	return 0
}

// NextDeadline returns the earliest FSM time at which a Tick has work: in
// some job a task lease, the save-model lease, an allgather group or a
// staged upload falls due, or the job is idle for JobTTL. It is false when
// nothing is waiting.
func (f *FSM) NextDeadline() (int64, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var best int64
	ok := false
	consider := func(d int64) {
		if !ok || d < best {
			best, ok = d, true
		}
	}
	for _, name := range sortedKeys(f.s.jobs) {
		s := f.s.jobs[name]
		if d, has := s.earliestTaskDeadline(); has {
			consider(d)
		}
		if s.save.holder != "" {
			consider(s.save.deadline)
		}
		if s.groupDeadline != 0 {
			consider(s.groupDeadline)
		}
		for _, id := range sortedKeys(s.uploads) {
			consider(s.uploads[id].touched + int64(UploadIdleTimeout))
		}
		if d, has := s.ttlDeadline(); has {
			consider(d)
		}
	}
	return best, ok
}

// SaveModelHolder returns the trainer holding the save-model lease of job
// ("" is DefaultJob) and the lease's end, or false when nobody holds it at
// the FSM clock.
func (f *FSM) SaveModelHolder(job string) (string, int64, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if j := f.s.jobs[jobName(job)]; j != nil {
		return j.saveHolder()
	}
	return "", 0, false
}

// saveHolder returns the save-model holder and its lease's end, or false
// when nobody holds it at the FSM clock.
func (j *job) saveHolder() (string, int64, bool) {
	l := j.save
	if l.holder == "" || l.deadline <= j.cluster.clock {
		return "", 0, false
	}
	return l.holder, l.deadline, true
}

// TaskState describes one task, for debugging and tests.
type TaskState struct {
	Meta     TaskMeta `json:"meta"`
	Queue    string   `json:"queue"`
	Failures int      `json:"failures"`
	Deadline int64    `json:"deadline,omitempty"`
	// Carried counts, for a task of a mixture, the passes of its source
	// it still owes besides the current one (mixture.go).
	Carried int `json:"carried,omitempty"`
}

// Task returns the state of task id of job ("" is DefaultJob). An unknown
// job answers ErrNoDataset, as an empty one does.
func (f *FSM) Task(job string, id int) (TaskState, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	j := f.s.jobs[jobName(job)]
	if j == nil {
		return TaskState{}, ErrNoDataset
	}
	i, err := j.taskIndex(id)
	if err != nil {
		return TaskState{}, err
	}
	t := j.tasks[i]
	ts := TaskState{Meta: TaskMeta{ID: id, Epoch: j.cluster.wireEpoch(t.epoch)}, Queue: queueNames[t.queue], Failures: int(t.failures), Carried: int(t.carried)}
	if t.queue == qPending {
		ts.Deadline = t.deadline
	}
	return ts, nil
}

// MemberInfo describes one allgather member.
type MemberInfo struct {
	ID         uuid.UUID `json:"id"`
	Generation uint64    `json:"generation"`
	DataLen    int       `json:"data_len"`
	Left       bool      `json:"left,omitempty"`
}

// GroupInfo describes one allgather group; Members are in join order.
type GroupInfo struct {
	ID       string        `json:"id"`
	NumPeers int           `json:"num_peers"`
	Status   string        `json:"status"`
	Timeout  time.Duration `json:"timeout"`
	Deadline int64         `json:"deadline"`
	// FailOnTimeout is set for a group whose timeout is a hard deadline.
	FailOnTimeout bool `json:"fail_on_timeout,omitempty"`
	// Overdue is set for an open group past its timeout.
	Overdue bool         `json:"overdue,omitempty"`
	Members []MemberInfo `json:"members"`
}

func groupInfo(id string, g *group) GroupInfo {
	gi := GroupInfo{ID: id, NumPeers: g.numPeers, Status: groupStatusNames[g.status], Timeout: g.timeout, Deadline: g.deadline,
		FailOnTimeout: g.failOnTimeout, Overdue: g.overdue}
	for _, m := range g.members {
		gi.Members = append(gi.Members, MemberInfo{ID: m.id, Generation: m.gen, DataLen: len(m.data), Left: m.left})
	}
	return gi
}

// Groups returns every allgather group of job ("" is DefaultJob), sorted
// by id.
func (f *FSM) Groups(job string) []GroupInfo {
	f.mu.RLock()
	defer f.mu.RUnlock()
	j := f.s.jobs[jobName(job)]
	if j == nil {
		return []GroupInfo{}
	}
	ids := sortedKeys(j.groups)
	out := make([]GroupInfo, 0, len(ids))
	for _, id := range ids {
		out = append(out, groupInfo(id, j.groups[id]))
	}
	return out
}

// Group returns one allgather group of job ("" is DefaultJob).
func (f *FSM) Group(job, id string) (GroupInfo, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	j := f.s.jobs[jobName(job)]
	if j == nil {
		return GroupInfo{}, false
	}
	g, ok := j.groups[id]
	if !ok {
		return GroupInfo{}, false
	}
	return groupInfo(id, g), true
}

// WatchStatus is what a member's watch sees.
type WatchStatus uint8

// Watch outcomes. Every status but WatchPending is final for a
// generation: from Protocol2 a complete or timed-out answer stays for the
// round's retention (ResultRetention or the group's timeout, the longer),
// unless the job is deleted or, for a complete group, every member left
// it.
const (
	WatchPending     WatchStatus = iota // the group is still filling up
	WatchComplete                       // Data holds every member's data
	WatchReconnected                    // a later join replaced this one
	WatchClosed                         // the member left or the group closed
	WatchTimedOut                       // the group timed out
)

// WatchResult is the state of one member's join.
type WatchResult struct {
	Status WatchStatus
	// Data is every member's data in join order, when complete:
	// Gathered.Data(), shared by every watch of the completion, so read
	// it and never modify it.
	Data [][]byte
	// Rank is the member's index in Data.
	Rank int
	// Overdue is set, while the status is WatchPending, once the group
	// has passed its timeout without filling up: the original's
	// ErrAllGatherTimeoutExceeded notice. The group stays open.
	Overdue bool
	// Gathered is, when complete, the completion Data belongs to: the
	// same pointer for every watch of it, with a memo for its encoding.
	Gathered *Gathered
}

// Err returns the allgather error of a final status, or nil.
func (w WatchResult) Err() error {
	switch w.Status {
	case WatchReconnected:
		return ErrReconnected
	case WatchClosed:
		return ErrClosed
	case WatchTimedOut:
		return ErrAllGatherTimeoutExceeded
	}
	return nil
}

// Watch returns the state of the join with generation gen of member in
// group of job ("" is DefaultJob). Generations are handed out in log order, so a replica whose
// counter is below gen has not applied that join yet: it answers
// WatchPending rather than judge the member from a state that predates
// its join. It costs the same whatever the group's size: the member is
// looked up by id, and a complete group's data is gathered once. A
// deleted job's members see WatchClosed.
func (f *FSM) Watch(job, groupID string, memberID uuid.UUID, gen uint64) WatchResult {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.s.watch(jobName(job), groupID, memberID, gen)
}

// WatchWait is Watch for a long poll: with a pending answer it returns a
// Wait whose channels say when to look again, with a final one a nil Wait.
// The Wait wakes only for what may change this answer (the group's
// outcome, this member's slot, the job's deletion), not for every applied
// entry, nor for any other job's group of the same id. The caller must
// Release it once it stops waiting on it.
func (f *FSM) WatchWait(job, groupID string, memberID uuid.UUID, gen uint64) (WatchResult, *Wait) {
	job = jobName(job)
	// The read lock keeps out every apply from the look to the
	// registration, and an apply notifies only after it released its
	// write lock: a change after the look closes what is registered.
	f.mu.RLock()
	defer f.mu.RUnlock()
	res := f.s.watch(job, groupID, memberID, gen)
	switch {
	case res.Status != WatchPending:
		return res, nil // final: nothing to wait for
	case gen > f.s.nextGen:
		// The join is not applied here yet: any entry may be the one.
		return res, &Wait{Group: f.Changed()}
	}
	return res, f.waitGroup(job, groupID, memberID)
}

func (s *state) watch(job, groupID string, memberID uuid.UUID, gen uint64) WatchResult {
	if gen > s.nextGen {
		return WatchResult{Status: WatchPending}
	}
	j := s.jobs[job]
	if j == nil {
		return WatchResult{Status: WatchClosed}
	}
	if r := j.timedOutRound(groupID, gen); r != nil {
		return r.watch(memberID, gen)
	}
	g := j.groups[groupID]
	if g == nil {
		return WatchResult{Status: WatchClosed}
	}
	i := g.find(memberID)
	// From Protocol2 a member that left a complete group keeps its
	// answer: the group's data, until the group is forgotten.
	keptAfterLeave := g.status == groupComplete && s.atLeast(Protocol2)
	switch {
	case i < 0 || (g.members[i].left && !keptAfterLeave):
		return WatchResult{Status: WatchClosed}
	case g.members[i].gen > gen:
		return WatchResult{Status: WatchReconnected}
	case g.members[i].gen < gen:
		// gen is applied here, so it is no join of this member to this
		// group: one of another group, or one handed out by the cluster
		// a backup came from after the backup (era.go).
		return WatchResult{Status: WatchClosed}
	case g.status == groupTimedOut:
		return WatchResult{Status: WatchTimedOut}
	case g.status == groupOpen:
		return WatchResult{Status: WatchPending, Overdue: g.overdue}
	}
	return WatchResult{Status: WatchComplete, Data: g.gathered.data, Rank: i, Gathered: g.gathered}
}

// Registrations returns the node registry sorted by id.
func (f *FSM) Registrations() []Registration {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]Registration, 0, len(f.s.nodes))
	for _, id := range sortedKeys(f.s.nodes) {
		out = append(out, f.s.nodes[id])
	}
	return out
}

// Registration returns the registry entry of id.
func (f *FSM) Registration(id string) (Registration, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	n, ok := f.s.nodes[id]
	return n, ok
}

// RegistrationByRaftAddr returns the registry entry whose Raft address is addr.
func (f *FSM) RegistrationByRaftAddr(addr string) (Registration, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	nodes := make([]Registration, 0, len(f.s.nodes))
	for _, id := range sortedKeys(f.s.nodes) {
		nodes = append(nodes, f.s.nodes[id])
	}
	i := slices.IndexFunc(nodes, func(n Registration) bool { return n.RaftAddr == addr })
	if i < 0 {
		return Registration{}, false
	}
	return nodes[i], true
}
