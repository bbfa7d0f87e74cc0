package fsm

import (
	"errors"
	"fmt"
	"math"
)

// Protocol levels. A level names what every replica of a cluster must know
// before a leader may use it: the command types it may propose, the
// semantics apply gives the existing ones, and the snapshot version each
// replica writes. The state holds the cluster's level, which only rises,
// through SetProtocol; a leader proposes SetProtocol only once every server
// of the Raft configuration runs a release that knows the level. So a
// rolling upgrade never puts an entry or a snapshot before a replica that
// cannot read it: until the last node is upgraded, the cluster keeps the
// old level's commands, semantics and snapshot version, and an old replica
// that meets SetProtocol (or anything after it) halts rather than diverge.
const (
	// Protocol1 is the state machine of every release before protocol
	// levels: command types 1 to 18 and snapshot version 4. A state
	// restored from a snapshot of version 4 or older is at this level.
	Protocol1 uint64 = 1
	// Protocol2 adds SetProtocol, registrations that carry each node's
	// release and level, and snapshot version 5.
	Protocol2 uint64 = 2
	// Protocol3 adds client identities bound to the token of their first
	// request (RequestID.Owner, command version 3) and snapshot version 6,
	// which stores each identity's owner.
	Protocol3 uint64 = 3
	// Protocol4 adds the patterns a dataset was set with (the Patterns of
	// SetDataset and DatasetCommit) and snapshot version 7, which stores
	// them with each dataset.
	Protocol4 uint64 = 4
	// Protocol5 adds the register's deletes, its integer add, multi-set,
	// append and compare-by-value (command types 20 to 25), and snapshot
	// version 8, whose de-duplication entries of those commands keep the
	// number their answer carries (KVAdd's sum, KVAppend's length, the
	// keys a delete deleted).
	Protocol5 uint64 = 5
	// Protocol6 adds sessions (command types 26 to 29, Header.Session
	// and Header.Attach in command version 4, tasks held by sessions) and
	// snapshot version 9, which stores them.
	Protocol6 uint64 = 6
	// Protocol7 adds cursors, the data position saved with a model
	// checkpoint (command types 30 to 33, Task.Skip), and snapshot
	// version 10, which stores each job's positions and cursors.
	Protocol7 uint64 = 7
	// Protocol8 adds seeded shuffles: a dataset's Shuffle and Seed (at
	// the end of SetDataset and DatasetCommit), each pass dispatched in
	// the permutation of (Seed, pass) when Shuffle is set, and snapshot
	// version 11, which stores both with each dataset.
	Protocol8 uint64 = 8
	// Protocol9 adds weighted mixtures: a dataset's Sources (at the end
	// of SetDataset and DatasetCommit, after the order), SetWeights
	// (command type 34), and snapshot version 12, which stores the
	// sources with each dataset and each mixture's weights, passes,
	// counts and schedule.
	Protocol9 uint64 = 9
	// Protocol10 adds batches to GetTask: Count, leasing up to that many
	// tasks in one entry, and MoreFinished, finishing several tasks
	// before it leases (at the end of GetTask), and snapshot version 13,
	// whose de-duplication entries of GetTask keep every task leased and
	// every finish's outcome.
	Protocol10 uint64 = 10

	// Protocol is the highest level this build applies.
	Protocol = Protocol10
)

// ErrUpgradePending means a command needs a protocol level the cluster has
// not reached: some server of the Raft configuration runs an older release.
// Nothing was proposed; the leader raises the level once every server is
// upgraded, and the call can be retried then.
var ErrUpgradePending = errors.New("the cluster is not upgraded yet")

// SetProtocol raises the cluster's protocol level to Level. It is proposed
// by a leader that found every server of the Raft configuration able to
// apply Level; a Level at or below the current one is ignored. A replica
// built for a lower level halts on it (Decode answers ErrUnsupported).
type SetProtocol struct {
	Header
	Level uint64
}

func (*SetProtocol) Type() CmdType { return TypeSetProtocol }

func (c *SetProtocol) encode(e *encoder) { e.uvarint(c.Level) }
func (c *SetProtocol) decode(d *decoder) { c.Level = d.uvarint() }

func (c *SetProtocol) validate() error {
	if c.Level < Protocol1 {
		return invalidf("protocol level %d: levels start at %d", c.Level, Protocol1)
	}
	return nil
}

// setProtocol raises the level; it never lowers it.
func (s *state) setProtocol(c *SetProtocol) *Result {
	if c.Level <= s.protocol {
		return &Result{Ignored: true}
	}
	s.protocol = c.Level
	return &Result{}
}

// atLeast reports whether the cluster's protocol level is at least p: the
// semantics of level p are in effect.
func (s *state) atLeast(p uint64) bool { return s.protocol >= p }

// leveled is a command of an existing type with optional trailing fields
// added at a later level: level returns the level its fields need.
// Replicas of the releases before that level refuse the fields as trailing
// bytes, so every replica must refuse them below it.
type leveled interface{ level() uint64 }

// checkLevel refuses a command whose type, or whose fields, need a higher
// level than the state's. The leader checks first (FSM.Allows), so only a
// command from a misbehaving proposer meets this; it is refused on every
// replica alike, before anything is looked up, as replicas of earlier
// releases refuse it when they decode it. Below Protocol2 it also refuses
// a task epoch above math.MaxInt32, as validation did before epochs
// carried an era (era.go).
func (s *state) checkLevel(c Command) error {
	if spec := lookup(c.Type()); spec != nil && spec.since > s.protocol {
		return invalidf("%v needs protocol level %d; the cluster is at %d", c.Type(), spec.since, s.protocol)
	}
	if m, ok := metaOf(c); ok && m.Epoch > math.MaxInt32 && !s.atLeast(Protocol2) {
		return invalidf("task epoch %d out of range", m.Epoch)
	}
	if l, ok := c.(leveled); ok && l.level() > s.protocol {
		return invalidf("%v with these fields needs protocol level %d; the cluster is at %d", c.Type(), l.level(), s.protocol)
	}
	if h := c.Hdr(); (h.Session != 0 || h.Attach) && !s.atLeast(Protocol6) {
		return invalidf("%v under a session needs protocol level %d; the cluster is at %d", c.Type(), Protocol6, s.protocol)
	}
	if c.Hdr().Request.owned() && !s.atLeast(Protocol3) {
		return invalidf("%v with a request owner needs protocol level %d; the cluster is at %d", c.Type(), Protocol3, s.protocol)
	}
	return nil
}

// unsupportedLevel returns ErrUnsupported for a decoded command that needs
// a level this build does not know.
func unsupportedLevel(c Command) error {
	if sp, ok := c.(*SetProtocol); ok && sp.Level > Protocol {
		return fmt.Errorf("%w: protocol level %d, this replica knows 1 to %d", ErrUnsupported, sp.Level, Protocol)
	}
	return nil
}

// snapshotVersionAt is the snapshot version a state at protocol level p
// writes: a replica of the previous release must be able to restore every
// snapshot a leader may send it until the level rises.
func snapshotVersionAt(p uint64) uint64 {
	switch {
	case p >= Protocol10:
		return 13
	case p >= Protocol9:
		return 12
	case p >= Protocol8:
		return 11
	case p >= Protocol7:
		return 10
	case p >= Protocol6:
		return 9
	case p >= Protocol5:
		return 8
	case p >= Protocol4:
		return 7
	case p >= Protocol3:
		return 6
	case p >= Protocol2:
		return 5
	}
	return 4
}

// Protocol returns the cluster's protocol level as this replica has
// applied it.
func (f *FSM) Protocol() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.s.protocol
}

// Allows returns nil when the cluster's level lets a leader propose c, and
// an error wrapping ErrUpgradePending otherwise.
func (f *FSM) Allows(c Command) error {
	spec := lookup(c.Type())
	if spec == nil {
		return invalidf("unknown command type %v", c.Type())
	}
	need := spec.since
	if l, ok := c.(leveled); ok {
		need = max(need, l.level())
	}
	if c.Hdr().Request.owned() {
		need = max(need, Protocol3)
	}
	if level := f.Protocol(); need > level {
		return fmt.Errorf("%w: %v needs protocol level %d, and the cluster is at %d until every node runs a release that knows it",
			ErrUpgradePending, c.Type(), need, level)
	}
	return nil
}
