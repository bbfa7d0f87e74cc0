package fsm

import (
	"cmp"
	"slices"
	"time"
)

// state is the whole replicated state. It is only touched by apply (under
// the FSM's write lock) and by read-only queries (under its read lock).
type state struct {
	// clock is the FSM time: the largest Now of any applied command.
	clock int64

	ds      *dataset
	pass    int
	tasks   []task
	queues  [numQueues]list
	uploads map[string]*upload
	// graceUntil is the latest LeaderGrace limit: no task lease granted
	// or renewed before it ends earlier.
	graceUntil int64

	save saveLease

	groups        map[string]*group
	nextGen       uint64
	groupDeadline int64 // earliest group deadline, 0 when there are no groups
	// changes lists what the current apply changed for allgather watches,
	// for the FSM to wake them (takeChanges). Apply never reads it, and
	// it is not encoded: it is not part of the replicated state.
	changes []groupChange

	nodes map[string]Registration

	dedup dedupTable
}

func newState() *state {
	s := &state{
		uploads: make(map[string]*upload),
		groups:  make(map[string]*group),
		nodes:   make(map[string]Registration),
		dedup:   newDedupTable(),
	}
	for q := range s.queues {
		s.queues[q] = emptyList()
	}
	return s
}

// Result is the outcome of applying one command.
type Result struct {
	// Code is CodeOK or the error's code.
	Code Code
	// Message details a CodeInvalid rejection.
	Message string
	// Task is the leased task of a successful GetTask.
	Task *Task
	// Granted reports whether RequestSaveModel granted the lease.
	Granted bool
	// Generation identifies a Join: watches compare it with the member's
	// current generation to detect a reconnect.
	Generation uint64
	// Ignored reports a command that was accepted but had no effect, such
	// as a second SetDataset or a TaskFailed with a stale epoch.
	Ignored bool
	// Duplicate reports that the request id was seen before and this is
	// the first outcome, replayed.
	Duplicate bool
	// Clock is the FSM time at which the command took effect (for a
	// duplicate, the first time). Zero for a rejected command.
	Clock int64
}

// Err returns the result as an error: nil, a sentinel, or ErrInvalid
// wrapped with the message.
func (r *Result) Err() error {
	if r.Code == CodeInvalid && r.Message != "" {
		return invalidf("%s", r.Message)
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
}

func errResult(err error) *Result {
	r := &Result{Code: CodeOf(err)}
	if r.Code == CodeInvalid {
		r.Message = trimInvalid(err.Error())
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

// apply applies one decoded command. A command that fails validation is
// rejected with CodeInvalid and leaves the state exactly as it was.
func (s *state) apply(c Command) *Result {
	if err := validate(c); err != nil {
		return errResult(err)
	}
	h := c.Hdr()
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
	r := s.dispatch(c)
	if r.Code == CodeInvalid {
		// Handlers validate before they mutate, so only the clock moved.
		s.clock = before
		return r
	}
	r.Clock = s.clock
	if dedupOn {
		s.dedup.record(h.Request, c.Type(), r, s.clock)
	}
	s.dedup.expire(s.clock)
	return r
}

// dispatch runs c's apply function, from its row in commands.
func (s *state) dispatch(c Command) *Result {
	if spec := lookup(c.Type()); spec != nil {
		return spec.apply(s, c)
	}
	return errResult(invalidf("unhandled command %v", c.Type()))
}

// tick expires every deadline that is due at the current clock.
func (s *state) tick(*Tick) *Result {
	s.expireTasks()
	s.expireSaveLease()
	s.expireGroups()
	s.expireUploads()
	return &Result{}
}

// leaderGrace moves every deadline before clock+grace to clock+grace.
func (s *state) leaderGrace(c *LeaderGrace) *Result {
	limit := s.clock + int64(c.Grace)
	s.graceUntil = max(s.graceUntil, limit)
	for i := s.queues[qPending].head; i >= 0; i = s.tasks[i].next {
		if s.tasks[i].deadline >= limit {
			break // pending is sorted by deadline
		}
		s.tasks[i].deadline = limit
	}
	if s.save.holder != "" && s.save.deadline < limit {
		s.save.deadline = limit
	}
	for _, id := range sortedKeys(s.groups) {
		if g := s.groups[id]; g.deadline < limit {
			g.deadline = limit
		}
	}
	s.updateGroupDeadline()
	for _, id := range sortedKeys(s.uploads) {
		if u := s.uploads[id]; u.touched+int64(UploadIdleTimeout) < limit {
			u.touched = limit - int64(UploadIdleTimeout)
		}
	}
	return &Result{}
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
