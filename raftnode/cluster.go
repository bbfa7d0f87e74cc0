package raftnode

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/raft"
	"github.com/raftmaster/raftmaster/fsm"
)

// Member is one server of the Raft configuration with its registry entry.
type Member struct {
	ID       string
	Name     string
	RaftAddr string
	APIAddr  string
	Suffrage string
	Leader   bool
	// Version and Protocol are the release the node registered, from
	// protocol level 2 on; empty before.
	Version  string
	Protocol uint64
}

// Members lists the Raft configuration, sorted as Raft keeps it.
func (n *Node) Members() ([]Member, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	_, leaderID := n.raft.LeaderWithID()
	var out []Member
	for _, s := range f.Configuration().Servers {
		entry, _ := n.fsm.Registration(string(s.ID))
		out = append(out, Member{
			ID: string(s.ID), Name: NameOf(string(s.ID)), RaftAddr: string(s.Address), APIAddr: entry.APIAddr,
			Suffrage: s.Suffrage.String(), Leader: s.ID == leaderID, Version: entry.Version, Protocol: entry.Protocol,
		})
	}
	return out, nil
}

// Servers returns how many servers this node's Raft configuration lists:
// 0 until the node has bootstrapped a cluster or been sent one by a
// leader, which also means it has no state of a cluster.
func (n *Node) Servers() int {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return 0
	}
	return len(f.Configuration().Servers)
}

// IsVoter reports whether this node is a voter of its latest
// configuration: a node added as a new incarnation is not, until
// the leader promotes it, and until then it votes for no one.
func (n *Node) IsVoter() bool { return n.isVoter() }

// CatchUpSlack is how many entries a non-voter may lag the leader's commit
// index and still be promoted: about what is in flight under load.
const CatchUpSlack = 256

// AddMember brings the server reg.ID, at reg.RaftAddr, with its API at
// reg.APIAddr, one step closer to being a member of the cluster with the
// role of voter, and
// records reg in the registry, its release from protocol level 2 on;
// lastIndex is the last index of its log. The node asks again until it is
// a voter and its entry is complete.
//
//   - Every other server of the same node name (a previous incarnation,
//     whose volume was lost) or at the same Raft address leaves the
//     configuration and the registry first.
//   - A server id with an incarnation is added as a non-voter, and is
//     promoted once its log is within CatchUpSlack of the commit index.
//     Until the promotion it refuses to vote (voteGate), so a node that
//     lost its data never counts towards a quorum.
//   - A server id without one, a node of an earlier release, becomes a
//     voter at once, as it did then.
//
// A voter already listed at that address only has its registry entry
// refreshed.
func (n *Node) AddMember(ctx context.Context, reg fsm.Registration, lastIndex uint64) error {
	id, raftAddr := reg.ID, reg.RaftAddr
	if !n.IsLeader() {
		return ErrNotLeader
	}
	if err := CheckNodeName(NameOf(id)); err != nil {
		return fmt.Errorf("%w: server id %q: %v", fsm.ErrInvalid, id, err)
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return mapRaftError(err)
	}
	name := NameOf(id)
	var self *raft.Server
	for _, s := range f.Configuration().Servers {
		switch {
		case string(s.ID) == id:
			self = &s
		case s.ID == raft.ServerID(n.id) && (NameOf(string(s.ID)) == name || string(s.Address) == raftAddr):
			return fmt.Errorf("%w: server %s at %s is this leader: a node may not replace the leader; "+
				"start the new node with another name or address", fsm.ErrInvalid, s.ID, s.Address)
		case NameOf(string(s.ID)) == name:
			n.log.Warn("removing the previous incarnation of a node that came back empty", "node", name, "old", s.ID, "new", id)
			if err := n.removeMember(ctx, string(s.ID)); err != nil {
				return err
			}
		case string(s.Address) == raftAddr:
			n.log.Info("removing a stale member at the new member's address", "id", s.ID, "addr", s.Address)
			if err := n.removeMember(ctx, string(s.ID)); err != nil {
				return err
			}
		}
	}
	for _, reg := range n.fsm.Registrations() {
		if reg.ID != id && NameOf(reg.ID) == name && !n.hasServer(reg.ID) {
			if _, err := n.propose(ctx, &fsm.RemoveNode{ID: reg.ID}); err != nil {
				return err
			}
		}
	}
	legacy := name == id
	switch {
	case self == nil && legacy:
		n.log.Info("adding voter", "id", id, "raft_addr", raftAddr)
		if err := n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, n.cfg.ApplyTimeout).Error(); err != nil {
			return mapRaftError(err)
		}
	case self == nil:
		n.log.Info("adding a new incarnation as a non-voter until it catches up", "id", id, "raft_addr", raftAddr)
		if err := n.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, n.cfg.ApplyTimeout).Error(); err != nil {
			return mapRaftError(err)
		}
	case string(self.Address) != raftAddr:
		n.log.Info("server moved to a new Raft address", "id", id, "from", self.Address, "to", raftAddr)
		add := n.raft.AddNonvoter
		if self.Suffrage == raft.Voter {
			add = n.raft.AddVoter
		}
		if err := add(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, n.cfg.ApplyTimeout).Error(); err != nil {
			return mapRaftError(err)
		}
	case self.Suffrage != raft.Voter:
		commit := n.raft.CommitIndex()
		if lastIndex+CatchUpSlack < commit {
			n.log.Debug("non-voter catching up", "id", id, "last_index", lastIndex, "commit_index", commit)
			break
		}
		n.log.Info("promoting a caught-up non-voter", "id", id, "last_index", lastIndex, "commit_index", commit)
		if err := n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, n.cfg.ApplyTimeout).Error(); err != nil {
			return mapRaftError(err)
		}
	}
	reg = reg.AtLevel(n.fsm.Protocol())
	if cur, ok := n.fsm.Registration(id); ok && cur == reg {
		return nil
	}
	_, err := n.propose(ctx, &fsm.RegisterNode{Node: reg})
	return err
}

// removeMember removes the member id from the configuration and the
// registry.
func (n *Node) removeMember(ctx context.Context, id string) error {
	if err := n.raft.RemoveServer(raft.ServerID(id), 0, n.cfg.ApplyTimeout).Error(); err != nil {
		return mapRaftError(err)
	}
	if _, ok := n.fsm.Registration(id); !ok {
		return nil
	}
	_, err := n.propose(ctx, &fsm.RemoveNode{ID: id})
	return err
}

// RemoveMember removes the member id, a server id or a node name, from
// the configuration and the registry. A
// leader asked to remove itself first hands leadership over and answers
// ErrNotLeader, so the caller retries on the new leader.
func (n *Node) RemoveMember(ctx context.Context, id string) error {
	if !n.IsLeader() {
		return ErrNotLeader
	}
	id = n.resolve(id)
	if id == n.id {
		if err := n.raft.LeadershipTransfer().Error(); err != nil {
			return mapRaftError(err)
		}
		return ErrNotLeader
	}
	if !n.hasServer(id) {
		if _, ok := n.fsm.Registration(id); !ok {
			return fmt.Errorf("%w: %q", ErrUnknownMember, id)
		}
	} else if err := n.raft.RemoveServer(raft.ServerID(id), 0, n.cfg.ApplyTimeout).Error(); err != nil {
		return mapRaftError(err)
	}
	n.log.Info("removed member", "id", id)
	_, err := n.propose(ctx, &fsm.RemoveNode{ID: id})
	return err
}

// resolve returns the server id that idOrName names: the id itself, or
// the server of the configuration whose node name it is.
func (n *Node) resolve(idOrName string) string {
	f := n.raft.GetConfiguration()
	if f.Error() != nil || n.hasServer(idOrName) {
		return idOrName
	}
	for _, s := range f.Configuration().Servers {
		if NameOf(string(s.ID)) == idOrName {
			return string(s.ID)
		}
	}
	for _, reg := range n.fsm.Registrations() {
		if NameOf(reg.ID) == idOrName {
			return reg.ID
		}
	}
	return idOrName
}

func (n *Node) hasServer(id string) bool {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == id {
			return true
		}
	}
	return false
}

// TransferLeadership hands leadership to id, a server id or a node name,
// or to the most up-to-date follower when id is empty.
func (n *Node) TransferLeadership(ctx context.Context, id string) error {
	if !n.IsLeader() {
		return ErrNotLeader
	}
	if id == "" {
		return mapRaftError(n.raft.LeadershipTransfer().Error())
	}
	id = n.resolve(id)
	if id == n.id {
		return nil // already the leader
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return mapRaftError(err)
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == id {
			return mapRaftError(n.raft.LeadershipTransferToServer(s.ID, s.Address).Error())
		}
	}
	return fmt.Errorf("%w: %q", ErrUnknownMember, id)
}

// Status is this node's view of Raft.
type Status struct {
	State        string
	Term         uint64
	LastIndex    uint64
	CommitIndex  uint64
	AppliedIndex uint64
	// LastContact is the time since the leader was last heard from; zero
	// on the leader, negative when never.
	LastContact time.Duration
}

// Status returns this node's Raft state and indexes.
func (n *Node) Status() Status {
	st := Status{
		State: n.raft.State().String(), Term: n.raft.CurrentTerm(),
		LastIndex: n.raft.LastIndex(), CommitIndex: n.raft.CommitIndex(), AppliedIndex: n.raft.AppliedIndex(),
	}
	if !n.IsLeader() {
		if lc := n.raft.LastContact(); lc.IsZero() {
			st.LastContact = -1
		} else {
			st.LastContact = time.Since(lc)
		}
	}
	return st
}

// SetDataset proposes a dataset, with the patterns it records, as
// fsm.DatasetCommands cuts it for MaxEntryBytes: one SetDataset entry, or
// DatasetPart entries under a fresh upload id and a DatasetCommit. The request id goes on the final entry,
// so a retried call is answered by de-duplication. When a dataset is
// already set, or gets set by another upload while this one is under way,
// no further part is proposed: the final entry alone is, and the FSM
// answers it Ignored (a commit also drops what this upload staged). Only
// job's own dataset counts: another job's leaves this upload going.
func (n *Node) SetDataset(ctx context.Context, job string, req fsm.RequestID, params fsm.DatasetParams, patterns []string, chunks []fsm.Chunk) (*fsm.Result, error) {
	if !n.IsLeader() {
		return nil, ErrNotLeader
	}
	upload := "upload-" + uuid.NewString()
	cmds := fsm.DatasetCommands(job, req, params, patterns, chunks, upload, n.cfg.MaxEntryBytes)
	last := len(cmds) - 1
	if last > 0 {
		if r, err := n.proposeParts(ctx, job, upload, cmds[:last]); r != nil || err != nil {
			return r, err
		}
	}
	return n.Apply(ctx, cmds[last])
}

// partsInFlight is how many DatasetPart entries of one upload the leader
// keeps proposed and not yet applied: raft logs and replicates them
// together, rather than one round trip and one disk sync each.
const partsInFlight = 8

// proposeParts proposes the DatasetPart entries of an upload in order,
// partsInFlight at a time. It returns the result of a part that was
// rejected, or an error, and stops proposing then; it returns neither
// when every part applied, or when a part was ignored or the job has a
// dataset (set by another upload: the rest could only be ignored), for
// the commit to be proposed. Parts already proposed when one fails are
// refused as out of order, or ignored, and the upload expires.
func (n *Node) proposeParts(ctx context.Context, job, upload string, parts []fsm.Command) (*fsm.Result, error) {
	if !n.IsLeader() {
		return nil, ErrNotLeader
	}
	var queue []proposal
	waited, stop := 0, false
	var failed *fsm.Result
	var ferr error
	awaitOldest := func() {
		r, err := n.await(queue[0])
		queue = queue[1:]
		i := waited
		waited++
		switch {
		case stop:
		case err != nil:
			ferr, stop = err, true
		case r.Code != fsm.CodeOK:
			failed, stop = r, true
		case r.Ignored:
			stop = true // a dataset was set before this part applied
		default:
			n.log.Debug("dataset part applied", "upload", upload, "part", i, "of", len(parts))
		}
	}
	for i, c := range parts {
		if len(queue) == partsInFlight {
			awaitOldest()
		}
		if stop {
			break
		}
		// The local FSM is the leader's applied state: once the job has
		// a dataset, the rest of the parts could only be ignored.
		if n.fsm.Stats(job).HasDataset {
			n.log.Info("dataset set by another upload; abandoning this one", "upload", upload, "parts_sent", i, "of", len(parts))
			break
		}
		if !n.leaderReady.Load() {
			ferr, stop = ErrNotReady, true
			break
		}
		if err := n.fsm.Allows(c); err != nil {
			ferr, stop = err, true
			break
		}
		p, err := n.enqueue(ctx, c)
		if err != nil {
			ferr, stop = err, true
			break
		}
		queue = append(queue, p)
	}
	for len(queue) > 0 {
		awaitOldest()
	}
	return failed, ferr
}
