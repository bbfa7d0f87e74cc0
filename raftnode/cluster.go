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
	RaftAddr string
	APIAddr  string
	Suffrage string
	Leader   bool
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
			ID: string(s.ID), RaftAddr: string(s.Address), APIAddr: entry.APIAddr,
			Suffrage: s.Suffrage.String(), Leader: s.ID == leaderID,
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

// AddVoter adds a voter, or only refreshes its registry entry when it is
// already a voter at that address. A server at the same address under
// another id is removed first: it is a previous life of the same node.
func (n *Node) AddVoter(ctx context.Context, id, raftAddr, apiAddr string) error {
	if !n.IsLeader() {
		return ErrNotLeader
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return mapRaftError(err)
	}
	member := false
	for _, s := range f.Configuration().Servers {
		switch {
		case string(s.ID) == id && string(s.Address) == raftAddr && s.Suffrage == raft.Voter:
			member = true
		case string(s.ID) != id && string(s.Address) == raftAddr:
			n.log.Info("removing stale server at the joining address", "id", s.ID, "addr", s.Address)
			if err := n.raft.RemoveServer(s.ID, 0, n.cfg.ApplyTimeout).Error(); err != nil {
				return mapRaftError(err)
			}
		}
	}
	if !member {
		n.log.Info("adding voter", "id", id, "raft_addr", raftAddr)
		if err := n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, n.cfg.ApplyTimeout).Error(); err != nil {
			return mapRaftError(err)
		}
	}
	if cur, ok := n.fsm.Registration(id); ok && cur.RaftAddr == raftAddr && cur.APIAddr == apiAddr {
		return nil
	}
	_, err := n.propose(ctx, &fsm.RegisterNode{Node: fsm.Registration{ID: id, RaftAddr: raftAddr, APIAddr: apiAddr}})
	return err
}

// RemoveServer removes id from the configuration and the registry. A
// leader asked to remove itself first hands leadership over and answers
// ErrNotLeader, so the caller retries on the new leader.
func (n *Node) RemoveServer(ctx context.Context, id string) error {
	if !n.IsLeader() {
		return ErrNotLeader
	}
	if id == n.cfg.ID {
		if err := n.raft.LeadershipTransfer().Error(); err != nil {
			return mapRaftError(err)
		}
		return ErrNotLeader
	}
	if !n.hasServer(id) {
		if _, ok := n.fsm.Registration(id); !ok {
			return fmt.Errorf("%w: %q", ErrUnknownServer, id)
		}
	} else if err := n.raft.RemoveServer(raft.ServerID(id), 0, n.cfg.ApplyTimeout).Error(); err != nil {
		return mapRaftError(err)
	}
	n.log.Info("removed server", "id", id)
	_, err := n.propose(ctx, &fsm.RemoveNode{ID: id})
	return err
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

// TransferLeadership hands leadership to id, or to the most up-to-date
// follower when id is empty.
func (n *Node) TransferLeadership(ctx context.Context, id string) error {
	if !n.IsLeader() {
		return ErrNotLeader
	}
	if id == "" {
		return mapRaftError(n.raft.LeadershipTransfer().Error())
	}
	if id == n.cfg.ID {
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
	return fmt.Errorf("%w: %q", ErrUnknownServer, id)
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

// SetDataset proposes a dataset as fsm.DatasetCommands cuts it for
// MaxEntryBytes: one SetDataset entry, or DatasetPart entries under a fresh
// upload id and a DatasetCommit. The request id goes on the final entry,
// so a retried call is answered by de-duplication. When a dataset is
// already set, or gets set by another upload while this one is under way,
// no further part is proposed: the final entry alone is, and the FSM
// answers it Ignored (a commit also drops what this upload staged). Only
// job's own dataset counts: another job's leaves this upload going.
func (n *Node) SetDataset(ctx context.Context, job string, req fsm.RequestID, params fsm.DatasetParams, chunks []fsm.Chunk) (*fsm.Result, error) {
	if !n.IsLeader() {
		return nil, ErrNotLeader
	}
	upload := "upload-" + uuid.NewString()
	cmds := fsm.DatasetCommands(job, req, params, chunks, upload, n.cfg.MaxEntryBytes)
	last := len(cmds) - 1
	for i, c := range cmds[:last] {
		// The local FSM is the leader's applied state: once the job has
		// a dataset, the rest of the parts could only be ignored.
		if n.fsm.Stats(job).HasDataset {
			n.log.Info("dataset set by another upload; abandoning this one", "upload", upload, "parts_sent", i, "of", last)
			break
		}
		r, err := n.Apply(ctx, c)
		if err != nil {
			return nil, err
		}
		if r.Code != fsm.CodeOK {
			return r, nil
		}
		if r.Ignored {
			break // a dataset was set before this part applied
		}
		n.log.Debug("dataset part applied", "upload", upload, "part", i, "of", last)
	}
	return n.Apply(ctx, cmds[last])
}
