package fsm

import (
	"bytes"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
)

// groupStatus is the life cycle of an allgather group.
type groupStatus uint8

const (
	groupOpen     groupStatus = iota // waiting for members
	groupComplete                    // all numPeers joined; data is final
	groupTimedOut                    // did not fill up in time
)

var groupStatusNames = [...]string{"open", "complete", "timed_out"}

// group is an allgather group. Members are kept in join order, so a
// member's index in the completed data is its rank.
type group struct {
	numPeers int
	timeout  time.Duration
	// deadline is, while open, the timeout or, once overdue, the end of
	// AbandonedGroupTimeout; when complete or timed out, the end of its
	// retention.
	deadline int64
	status   groupStatus
	// failOnTimeout makes the timeout fail the group; otherwise it only
	// sets overdue and the group stays open.
	failOnTimeout bool
	overdue       bool
	members       []member
	dataSize      int

	// Derived from members, never encoded: rebuilt on restore, so no
	// snapshot or hash sees them.

	// index maps a member id to its slot in members. It is only looked
	// up, never ranged over, and has one entry per member (at most
	// numPeers, which MaxPeers bounds).
	index map[uuid.UUID]int32
	// gathered is, once the group is complete, every member's data in
	// join order, shared by every watch of this completion. Data does not
	// change after completion (a re-join keeps the completed data, a
	// leave only marks the member gone), so it stays valid until the
	// group is forgotten or closed, and goes with it.
	gathered *Gathered
}

// Gathered is the data of one completion of a group: every member's data
// in join order. The FSM builds it once, when the last member joins, and
// every watch of that completion shares it: it never changes, and it is
// dropped with the group. It holds pointers to the members' data, not
// copies, and at most one encoding of them (Encoded).
type Gathered struct {
	data [][]byte

	once    sync.Once
	encoded []byte
}

// Data returns every member's data in join order. The slice is shared:
// read it, never modify it.
func (g *Gathered) Data() [][]byte { return g.data }

// Encoded returns encode(Data()), computed by the first call and shared by
// every later one, so that the watches of a completion encode its data
// once between them. Every caller must pass the same encoding; the result
// is shared too and must not be modified.
func (g *Gathered) Encoded(encode func(data [][]byte) []byte) []byte {
	g.once.Do(func() { g.encoded = encode(g.data) })
	return g.encoded
}

// gather returns the Gathered of a complete group's members.
func gather(members []member) *Gathered {
	data := make([][]byte, len(members))
	for i, m := range members {
		data[i] = m.data
	}
	return &Gathered{data: data}
}

type member struct {
	id   uuid.UUID
	data []byte
	gen  uint64 // Generation of the join that holds this slot
	left bool   // left after completion; its data stays in the result
}

// find returns the slot of member id, or -1.
func (g *group) find(id uuid.UUID) int {
	if i, ok := g.index[id]; ok {
		return int(i)
	}
	return -1
}

// derive rebuilds what is derived from the members: the index and, for a
// complete group, the gathered data. A duplicate member id keeps the
// later slot, which check reports.
func (g *group) derive() {
	g.index = make(map[uuid.UUID]int32, len(g.members))
	for i, m := range g.members {
		g.index[m.id] = int32(i)
	}
	g.gathered = nil
	if g.status == groupComplete {
		g.gathered = gather(g.members)
	}
}

// clone returns a copy of g that later applies to g do not change.
// Member data and the gathered data are immutable and shared.
func (g *group) clone() *group {
	c := *g
	c.members = slices.Clone(g.members)
	c.index = maps.Clone(g.index)
	return &c
}

// groupChange is what an apply changed for the allgather watches: one
// member's slot, or, with member uuid.Nil (never a member's id: Join
// refuses it), the outcome of the whole group (it completed, timed out,
// turned overdue, closed or was forgotten). The FSM takes the changes
// after each apply to wake only the watches they concern; they are not
// state.
type groupChange struct {
	job, group string
	member     uuid.UUID
}

// changedGroup records that the outcome of group id changed for every
// member.
func (j *job) changedGroup(id string) {
	j.cluster.changes = append(j.cluster.changes, groupChange{job: j.name, group: id})
}

// changedMember records that member's slot in group id changed.
func (j *job) changedMember(id string, member uuid.UUID) {
	j.cluster.changes = append(j.cluster.changes, groupChange{job: j.name, group: id, member: member})
}

// groupBytes is the size estimate of group id (limits.go).
func groupBytes(id string, g *group) int64 {
	return estGroup + int64(len(id)) + estMember*int64(len(g.members)) + int64(g.dataSize)
}

// takeChanges returns the changes recorded since the last call.
func (s *state) takeChanges() []groupChange {
	c := s.changes
	s.changes = nil
	return c
}

// active counts the members that have not left.
func (g *group) active() int {
	n := 0
	for _, m := range g.members {
		if !m.left {
			n++
		}
	}
	return n
}

func (j *job) join(c *Join) *Result {
	old := j.groups[c.Group]
	g := old
	if g != nil && g.status == groupTimedOut {
		// A join after a timeout starts the rendezvous afresh.
		g = nil
	}
	if g != nil && g.numPeers != c.NumPeers {
		return errResult(ErrGroupMismatch)
	}
	i := -1
	if g != nil {
		i = g.find(c.Member)
	}
	if g != nil && g.status == groupComplete && i < 0 {
		return errResult(ErrGroupMismatch)
	}
	if g != nil && g.status == groupComplete && j.cluster.atLeast(Protocol2) {
		// A re-join after completion is the member's completed join
		// again: the same generation, whose answer is final.
		g.members[i].left = false
		j.changedMember(c.Group, c.Member)
		return &Result{Generation: g.members[i].gen}
	}
	// What the group holds after the join.
	members, size := 1, len(c.Data)
	if g != nil {
		members, size = len(g.members), g.dataSize
		switch {
		case g.status == groupComplete: // a re-join changes no data
		case i >= 0:
			size += len(c.Data) - len(g.members[i].data)
		default:
			members++
			size += len(c.Data)
		}
	}
	if g != nil && g.status == groupOpen && size > MaxGroupData {
		return errResult(invalidf("group %q: data exceeds %d bytes", c.Group, MaxGroupData))
	}
	var oldBytes, oldData, retired int64
	if old != nil {
		oldBytes, oldData = groupBytes(c.Group, old), int64(old.dataSize)
	}
	retire := g == nil && old != nil && j.cluster.atLeast(Protocol2)
	if retire {
		// The timed-out round is kept, without its data, for what is
		// left of its retention.
		retired = roundBytes(c.Group, len(old.members))
	}
	if err := j.checkJoin(c.Group, old == nil, int64(size)-oldData,
		estGroup+int64(len(c.Group))+estMember*int64(members)+int64(size)-oldBytes+retired); err != nil {
		return errResult(err)
	}
	// Validated: from here on the command takes effect.
	if retire {
		j.retire(c.Group, old, old.deadline)
		oldBytes, oldData = 0, 0
	}
	if g == nil {
		timeout := c.Timeout
		if timeout == 0 {
			timeout = DefaultTimeout
		}
		g = &group{numPeers: c.NumPeers, timeout: timeout, deadline: j.cluster.clock + int64(timeout), failOnTimeout: c.FailOnTimeout,
			index: make(map[uuid.UUID]int32)}
		j.groups[c.Group] = g
		j.changedGroup(c.Group) // new, or a timed-out group started afresh
	}
	if g.overdue {
		// An overdue group is kept while members keep arriving.
		g.deadline = j.cluster.clock + int64(AbandonedGroupTimeout)
	}
	j.cluster.nextGen++
	gen := j.cluster.nextGen
	switch {
	case g.status == groupComplete:
		// A re-join after completion gets the completed result.
		g.members[i].gen = gen
		g.members[i].left = false
	case i >= 0:
		g.dataSize += len(c.Data) - len(g.members[i].data)
		g.members[i].data = c.Data
		g.members[i].gen = gen
	default:
		g.index[c.Member] = int32(len(g.members))
		g.members = append(g.members, member{id: c.Member, data: c.Data, gen: gen})
		g.dataSize += len(c.Data)
		if len(g.members) == g.numPeers {
			g.status = groupComplete
			g.overdue = false
			g.deadline = j.cluster.clock + j.cluster.retention(g.timeout)
			g.gathered = gather(g.members)
			j.changedGroup(c.Group)
		}
	}
	j.changedMember(c.Group, c.Member)
	j.updateGroupDeadline()
	j.account(groupBytes(c.Group, g) - oldBytes)
	j.groupData += int64(g.dataSize) - oldData
	return &Result{Generation: gen}
}

// checkJoin checks a join against the job's limits: whether it adds a
// group, and how much it adds to the job's group data and size estimate.
func (j *job) checkJoin(id string, newGroup bool, data, bytes int64) error {
	l := j.cluster.effectiveLimits()
	if newGroup && len(j.groups) >= l.MaxJobGroups {
		return limitf("max_job_groups", int64(l.MaxJobGroups), "job %q would have %d allgather groups", j.name, len(j.groups)+1)
	}
	if total := j.groupData + data; data > 0 && total > l.MaxJobGroupBytes {
		return limitf("max_job_group_bytes", l.MaxJobGroupBytes, "job %q would hold %d bytes of allgather data (group %q)", j.name, total, id)
	}
	return j.room(bytes)
}

func (j *job) leave(c *Leave) *Result {
	g := j.groups[c.Group]
	if g == nil {
		return &Result{Ignored: true}
	}
	i := g.find(c.Member)
	if i < 0 || g.members[i].left {
		return &Result{Ignored: true}
	}
	oldBytes, oldData := groupBytes(c.Group, g), g.dataSize
	if g.status == groupComplete {
		g.members[i].left = true
	} else {
		// The members after the slot move up one rank.
		g.dataSize -= len(g.members[i].data)
		g.members = slices.Delete(g.members, i, i+1)
		delete(g.index, c.Member)
		for k := i; k < len(g.members); k++ {
			g.index[g.members[k].id] = int32(k)
		}
	}
	j.changedMember(c.Group, c.Member)
	j.account(groupBytes(c.Group, g) - oldBytes)
	j.groupData += int64(g.dataSize - oldData)
	if g.active() == 0 {
		j.dropGroup(c.Group) // the last member out closes the group
		j.changedGroup(c.Group)
	}
	j.updateGroupDeadline()
	return &Result{}
}

// expireGroups acts on the groups that are due: an open group past its
// timeout fails (failOnTimeout) or becomes overdue; an overdue group that
// got no join for AbandonedGroupTimeout, and a complete or timed-out group
// past its retention, are forgotten, as are the rounds in timeouts past
// theirs.
func (j *job) expireGroups() {
	if j.groupDeadline == 0 || j.groupDeadline > j.cluster.clock {
		return
	}
	for _, id := range sortedKeys(j.groups) {
		g := j.groups[id]
		if g.deadline > j.cluster.clock {
			continue
		}
		switch {
		case g.status == groupOpen && g.failOnTimeout && j.cluster.atLeast(Protocol2):
			j.retire(id, g, j.cluster.clock+j.cluster.retention(g.timeout))
		case g.status == groupOpen && g.failOnTimeout:
			g.status = groupTimedOut
			g.deadline = j.cluster.clock + int64(g.timeout)
		case g.status == groupOpen && !g.overdue:
			g.overdue = true
			g.deadline = j.cluster.clock + int64(AbandonedGroupTimeout)
		default:
			j.dropGroup(id)
		}
		j.changedGroup(id)
	}
	j.expireTimeouts()
	j.updateGroupDeadline()
}

// dropGroup forgets group id.
func (j *job) dropGroup(id string) {
	g := j.groups[id]
	j.account(-groupBytes(id, g))
	j.groupData -= int64(g.dataSize)
	delete(j.groups, id)
}

// updateGroupDeadline recomputes the earliest deadline of the groups and
// of the rounds in timeouts (timeoutsDeadline, kept by their changes).
func (j *job) updateGroupDeadline() {
	j.groupDeadline = j.timeoutsDeadline
	for _, id := range sortedKeys(j.groups) {
		if d := j.groups[id].deadline; j.groupDeadline == 0 || d < j.groupDeadline {
			j.groupDeadline = d
		}
	}
}

// retention is how long the outcome of a round of a group with timeout is
// kept once final. From Protocol2 it is timeout or ResultRetention, the
// longer; before, timeout.
func (s *state) retention(timeout time.Duration) int64 {
	if s.atLeast(Protocol2) {
		return int64(max(timeout, ResultRetention))
	}
	return int64(timeout)
}

// timedOutRound is what is kept, from Protocol2, of a round of a
// hard-deadline group that timed out: the generation each member held
// then, so that the watches of those joins keep answering
// ErrAllGatherTimeoutExceeded after the next join starts the group afresh.
// The members' data is dropped at the timeout, since no answer needs it,
// and the group's place among the job's groups is freed.
type timedOutRound struct {
	// lastGen is the generation counter when the round timed out: every
	// join of the round has a generation at or below it, and every join
	// of a later round of the group one above it.
	lastGen uint64
	// until is the end of the round's retention.
	until int64
	// members are sorted by id. They are never modified, so clones share
	// them.
	members []roundMember
}

// roundMember is a member of a round that timed out, and the generation
// of the join that held its slot.
type roundMember struct {
	id  uuid.UUID
	gen uint64
}

func compareRoundMember(m roundMember, id uuid.UUID) int { return bytes.Compare(m.id[:], id[:]) }

// roundBytes is the size estimate of a kept round of group id (limits.go).
func roundBytes(id string, members int) int64 {
	return estRound + int64(len(id)) + estRoundMember*int64(members)
}

// retire forgets group id, whose round timed out, and keeps the round in
// timeouts until until. The state's estimate shrinks: a round costs less
// than the group it was.
func (j *job) retire(id string, g *group, until int64) {
	r := timedOutRound{lastGen: j.cluster.nextGen, until: until, members: make([]roundMember, len(g.members))}
	for i, m := range g.members {
		r.members[i] = roundMember{id: m.id, gen: m.gen}
	}
	slices.SortFunc(r.members, func(a, b roundMember) int { return compareRoundMember(a, b.id) })
	j.dropGroup(id)
	j.timeouts[id] = append(j.timeouts[id], r)
	j.account(roundBytes(id, len(r.members)))
	j.updateTimeoutsDeadline()
}

// expireTimeouts forgets the rounds in timeouts whose retention has ended.
func (j *job) expireTimeouts() {
	if j.timeoutsDeadline == 0 || j.timeoutsDeadline > j.cluster.clock {
		return
	}
	for _, id := range sortedKeys(j.timeouts) {
		kept := j.timeouts[id][:0:0]
		for _, r := range j.timeouts[id] {
			if r.until > j.cluster.clock {
				kept = append(kept, r)
				continue
			}
			j.account(-roundBytes(id, len(r.members)))
		}
		if len(kept) == 0 {
			delete(j.timeouts, id)
		} else {
			j.timeouts[id] = kept
		}
	}
	j.updateTimeoutsDeadline()
}

// updateTimeoutsDeadline recomputes timeoutsDeadline.
func (j *job) updateTimeoutsDeadline() {
	j.timeoutsDeadline = 0
	for _, id := range sortedKeys(j.timeouts) {
		for _, r := range j.timeouts[id] {
			if j.timeoutsDeadline == 0 || r.until < j.timeoutsDeadline {
				j.timeoutsDeadline = r.until
			}
		}
	}
}

// timedOutRound returns the kept round of group id that generation gen
// belongs to, or nil: the oldest whose lastGen is at or above gen. A gen
// of an earlier round that is no longer kept finds the oldest kept one,
// which answers closed or reconnected, never the timeout.
func (j *job) timedOutRound(id string, gen uint64) *timedOutRound {
	rounds := j.timeouts[id]
	for i := range rounds {
		if gen <= rounds[i].lastGen {
			return &rounds[i]
		}
	}
	return nil
}

// watch is what the join gen of member sees of the round: the timeout
// when it held its slot then, reconnected when a later join of the member
// did, closed when the member was not in the round.
func (r *timedOutRound) watch(member uuid.UUID, gen uint64) WatchResult {
	i, ok := slices.BinarySearchFunc(r.members, member, compareRoundMember)
	switch {
	case !ok || r.members[i].gen < gen:
		return WatchResult{Status: WatchClosed}
	case r.members[i].gen > gen:
		return WatchResult{Status: WatchReconnected}
	}
	return WatchResult{Status: WatchTimedOut}
}
