package fsm

import (
	"slices"
	"time"

	"github.com/google/uuid"
)

// Stats summarises the state. Computing it is O(1) in the number of tasks.
type Stats struct {
	Clock        int64         `json:"clock"`
	HasDataset   bool          `json:"has_dataset"`
	Pass         int           `json:"pass"`
	Chunks       int           `json:"chunks"`
	Tasks        int           `json:"tasks"`
	Todo         int           `json:"todo"`
	Pending      int           `json:"pending"`
	Done         int           `json:"done"`
	Failed       int           `json:"failed"`
	Params       DatasetParams `json:"params"`
	Uploads      int           `json:"uploads"`
	SaveHolder   string        `json:"save_holder,omitempty"`
	SaveDeadline int64         `json:"save_deadline,omitempty"`
	Groups       int           `json:"groups"`
	Nodes        int           `json:"nodes"`
	DedupClients int           `json:"dedup_clients"`
	AppliedIndex uint64        `json:"applied_index"`
}

// Stats returns counts per queue, the pass, the lease holder and table
// sizes.
func (f *FSM) Stats() Stats {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s := f.s
	st := Stats{
		Clock: s.clock, HasDataset: s.ds != nil, Pass: s.pass, Tasks: len(s.tasks),
		Todo: s.queues[qTodo].n, Pending: s.queues[qPending].n,
		Done: s.queues[qDone].n, Failed: s.queues[qFailed].n,
		Uploads: len(s.uploads), Groups: len(s.groups), Nodes: len(s.nodes),
		DedupClients: s.dedup.n, AppliedIndex: f.applied.Load(),
	}
	if s.ds != nil {
		st.Chunks = len(s.ds.chunks)
		st.Params = s.ds.params
	}
	if s.save.holder != "" && s.save.deadline > s.clock {
		st.SaveHolder, st.SaveDeadline = s.save.holder, s.save.deadline
	}
	return st
}

// Clock returns the FSM time in unix nanoseconds.
func (f *FSM) Clock() int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.s.clock
}

// Pass returns the current pass.
func (f *FSM) Pass() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.s.pass
}

// NextDeadline returns the earliest FSM time at which a Tick has work: a
// task lease, the save-model lease, an allgather group or a staged upload
// falls due. It is false when nothing is waiting.
func (f *FSM) NextDeadline() (int64, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s := f.s
	var best int64
	ok := false
	consider := func(d int64) {
		if !ok || d < best {
			best, ok = d, true
		}
	}
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
	return best, ok
}

// SaveModelHolder returns the trainer holding the save-model lease and the
// lease's end, or false when nobody holds it at the FSM clock.
func (f *FSM) SaveModelHolder() (string, int64, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	l := f.s.save
	if l.holder == "" || l.deadline <= f.s.clock {
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
}

// Task returns the state of task id.
func (f *FSM) Task(id int) (TaskState, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	i, err := f.s.taskIndex(id)
	if err != nil {
		return TaskState{}, err
	}
	t := f.s.tasks[i]
	ts := TaskState{Meta: TaskMeta{ID: id, Epoch: int(t.epoch)}, Queue: queueNames[t.queue], Failures: int(t.failures)}
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

// Groups returns every allgather group, sorted by id.
func (f *FSM) Groups() []GroupInfo {
	f.mu.RLock()
	defer f.mu.RUnlock()
	ids := sortedKeys(f.s.groups)
	out := make([]GroupInfo, 0, len(ids))
	for _, id := range ids {
		out = append(out, groupInfo(id, f.s.groups[id]))
	}
	return out
}

// Group returns one allgather group.
func (f *FSM) Group(id string) (GroupInfo, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	g, ok := f.s.groups[id]
	if !ok {
		return GroupInfo{}, false
	}
	return groupInfo(id, g), true
}

// WatchStatus is what a member's watch sees.
type WatchStatus uint8

// Watch outcomes. Every status but WatchPending is final for a generation.
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
	// has passed its timeout without filling up: the seed's
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
// group. Generations are handed out in log order, so a replica whose
// counter is below gen has not applied that join yet: it answers
// WatchPending rather than judge the member from a state that predates
// its join. It costs the same whatever the group's size: the member is
// looked up by id, and a complete group's data is gathered once.
func (f *FSM) Watch(groupID string, memberID uuid.UUID, gen uint64) WatchResult {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.s.watch(groupID, memberID, gen)
}

// WatchWait is Watch for a long poll: with a pending answer it returns a
// Wait whose channels say when to look again, with a final one a nil Wait.
// The Wait wakes only for what may change this answer (the group's
// outcome, this member's slot), not for every applied entry. The caller
// must Release it once it stops waiting on it.
func (f *FSM) WatchWait(groupID string, memberID uuid.UUID, gen uint64) (WatchResult, *Wait) {
	// The read lock keeps out every apply from the look to the
	// registration, and an apply notifies only after it released its
	// write lock: a change after the look closes what is registered.
	f.mu.RLock()
	defer f.mu.RUnlock()
	res := f.s.watch(groupID, memberID, gen)
	switch {
	case res.Status != WatchPending:
		return res, nil // final: nothing to wait for
	case gen > f.s.nextGen:
		// The join is not applied here yet: any entry may be the one.
		return res, &Wait{Group: f.Changed()}
	}
	return res, f.waitGroup(groupID, memberID)
}

func (s *state) watch(groupID string, memberID uuid.UUID, gen uint64) WatchResult {
	if gen > s.nextGen {
		return WatchResult{Status: WatchPending}
	}
	g := s.groups[groupID]
	if g == nil {
		return WatchResult{Status: WatchClosed}
	}
	i := g.find(memberID)
	switch {
	case i < 0 || g.members[i].left:
		return WatchResult{Status: WatchClosed}
	case g.members[i].gen > gen:
		return WatchResult{Status: WatchReconnected}
	case g.members[i].gen < gen:
		// A join this replica has not applied yet; the caller waits.
		return WatchResult{Status: WatchPending}
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
