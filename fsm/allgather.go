package fsm

import (
	"slices"
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
}

type member struct {
	id   uuid.UUID
	data []byte
	gen  uint64 // Generation of the join that holds this slot
	left bool   // left after completion; its data stays in the result
}

func (g *group) find(id uuid.UUID) int {
	return slices.IndexFunc(g.members, func(m member) bool { return m.id == id })
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

func (s *state) join(c *Join) *Result {
	g := s.groups[c.Group]
	if g != nil && g.status == groupTimedOut {
		// A join after a timeout starts the rendezvous afresh.
		g = nil
	}
	if g == nil && len(s.groups) >= MaxGroups {
		if _, exists := s.groups[c.Group]; !exists {
			return errResult(invalidf("too many allgather groups (%d)", MaxGroups))
		}
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
	if g != nil && g.status == groupOpen {
		size := g.dataSize + len(c.Data)
		if i >= 0 {
			size -= len(g.members[i].data)
		}
		if size > MaxGroupData {
			return errResult(invalidf("group %q: data exceeds %d bytes", c.Group, MaxGroupData))
		}
	}
	// Validated: from here on the command takes effect.
	if g == nil {
		timeout := c.Timeout
		if timeout == 0 {
			timeout = DefaultTimeout
		}
		g = &group{numPeers: c.NumPeers, timeout: timeout, deadline: s.clock + int64(timeout), failOnTimeout: c.FailOnTimeout}
		s.groups[c.Group] = g
	}
	if g.overdue {
		// An overdue group is kept while members keep arriving.
		g.deadline = s.clock + int64(AbandonedGroupTimeout)
	}
	s.nextGen++
	gen := s.nextGen
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
		g.members = append(g.members, member{id: c.Member, data: c.Data, gen: gen})
		g.dataSize += len(c.Data)
		if len(g.members) == g.numPeers {
			g.status = groupComplete
			g.overdue = false
			g.deadline = s.clock + int64(g.timeout)
		}
	}
	s.updateGroupDeadline()
	return &Result{Generation: gen}
}

func (s *state) leave(c *Leave) *Result {
	g := s.groups[c.Group]
	if g == nil {
		return &Result{Ignored: true}
	}
	i := g.find(c.Member)
	if i < 0 || g.members[i].left {
		return &Result{Ignored: true}
	}
	if g.status == groupComplete {
		g.members[i].left = true
	} else {
		g.dataSize -= len(g.members[i].data)
		g.members = slices.Delete(g.members, i, i+1)
	}
	if g.active() == 0 {
		delete(s.groups, c.Group) // the last member out closes the group
	}
	s.updateGroupDeadline()
	return &Result{}
}

// expireGroups acts on the groups that are due: an open group past its
// timeout fails (failOnTimeout) or becomes overdue; an overdue group that
// got no join for AbandonedGroupTimeout, and a complete or timed-out group
// past its retention, are forgotten.
func (s *state) expireGroups() {
	if s.groupDeadline == 0 || s.groupDeadline > s.clock {
		return
	}
	for _, id := range sortedKeys(s.groups) {
		g := s.groups[id]
		if g.deadline > s.clock {
			continue
		}
		switch {
		case g.status == groupOpen && g.failOnTimeout:
			g.status = groupTimedOut
			g.deadline = s.clock + int64(g.timeout)
		case g.status == groupOpen && !g.overdue:
			g.overdue = true
			g.deadline = s.clock + int64(AbandonedGroupTimeout)
		default:
			delete(s.groups, id)
		}
	}
	s.updateGroupDeadline()
}

func (s *state) updateGroupDeadline() {
	s.groupDeadline = 0
	for _, id := range sortedKeys(s.groups) {
		if d := s.groups[id].deadline; s.groupDeadline == 0 || d < s.groupDeadline {
			s.groupDeadline = d
		}
	}
}
