package httpapi

import (
	"context"
	"errors"
	"time"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/rpc"
)

// Errors a Backend returns; the handlers turn them into wire codes.
var (
	// ErrNotLeader means this node is not the leader; the handler redirects.
	ErrNotLeader = errors.New("not the leader")
	// ErrNoLeader means no leader is known.
	ErrNoLeader = errors.New("no leader")
	// ErrUnknownOutcome means a write may or may not have been applied.
	ErrUnknownOutcome = errors.New("outcome unknown")
	// ErrNotReady means the node cannot serve the read yet.
	ErrNotReady = errors.New("not ready")
)

// Backend is what the handlers need from a replica. raftnode provides it
// through a small adapter; tests can run the handlers over a single local
// FSM.
type Backend interface {
	// NodeID is this node's id.
	NodeID() string
	// FSM is the local replica of the state, for stale reads and watches.
	FSM() *fsm.FSM
	// Apply stamps the leader's time into c, proposes it and waits for the
	// result. It fails with ErrNotLeader, ErrNoLeader or ErrUnknownOutcome.
	Apply(ctx context.Context, c fsm.Command) (*fsm.Result, error)
	// SetDataset proposes a dataset, in several entries when it is large,
	// recording patterns (fsm.DatasetCommands).
	SetDataset(ctx context.Context, job string, req fsm.RequestID, params fsm.DatasetParams, patterns []string, chunks []fsm.Chunk) (*fsm.Result, error)
	// ReadBarrier returns once this node is the leader and has applied
	// everything committed before the call (a linearizable read point).
	ReadBarrier(ctx context.Context) error
	// Leader returns the leader's id and API address, when known.
	Leader() (rpc.NodeRef, bool)
	// Status describes this node; the handler adds the state summary and
	// the version.
	Status() rpc.StatusResponse
	// Members lists the Raft configuration with registry addresses; the
	// per-node fields of other nodes are left for the handler to fill.
	Members(ctx context.Context) ([]rpc.Member, error)
	// AddMember adds a member, or refreshes its registry entry.
	AddMember(ctx context.Context, req rpc.AddMemberRequest) error
	// RemoveMember removes a member and its registry entry. It fails
	// with an *Error of CodeNotFound when id is not a member.
	RemoveMember(ctx context.Context, id string) error
	// Transfer hands leadership to id, or to any follower when id is "".
	// It fails with an *Error of CodeNotFound when id is not a member.
	Transfer(ctx context.Context, id string) error
	// Ready reports whether the node has a leader and has caught up.
	Ready() bool
}

// FollowerReads is implemented by a Backend whose nodes that do not lead
// may hold no up-to-date copy of the state (the etcd backend's standbys).
// When ServesFollowerReads reports false, such a node sends watches to the
// leader instead of answering them from its own FSM.
type FollowerReads interface {
	ServesFollowerReads() bool
}

// SessionKeeper is the leader's table of session keep-alives
// (internal/sessions): it lives in the leader's memory for one term, and
// nothing it does is replicated but the entries that end sessions.
type SessionKeeper interface {
	// KeepAlive restarts session id's TTL and records the progress of the
	// tasks it holds; it answers how long the session lives from now. A
	// session that has ended answers fsm.ErrSessionExpired, one of another
	// owner fsm.ErrForeignClient, and a keeper whose leader's term has
	// ended sessions.ErrStopped (the client is sent to the leader).
	KeepAlive(id uint64, owner [16]byte, progress []rpc.SessionProgress) (time.Duration, error)
	// Touch counts a request made under session id as a keep-alive.
	Touch(id uint64)
	// Remaining is how long session id lives without a keep-alive.
	Remaining(id uint64) (time.Duration, bool)
}

// SessionBackend is a Backend that keeps sessions alive: Sessions
// returns the leader's keeper, false when this node does not lead (or has
// not taken over yet).
type SessionBackend interface {
	Sessions() (SessionKeeper, bool)
}
