package client

import (
	"errors"

	"github.com/raftmaster/raftmaster/fsm"
)

// The seeds' sentinel errors, re-exported so that trainer code can match
// them with errors.Is while importing only this package. An error that
// crossed the wire is an *rpc.Error whose Unwrap returns one of these.
var (
	// ErrPassBefore means the pass asked for has already ended.
	ErrPassBefore = fsm.ErrPassBefore
	// ErrPassAfter means the pass asked for has not started yet.
	ErrPassAfter = fsm.ErrPassAfter
	// ErrNoMoreAvailable means every task of the pass is dispatched or done.
	ErrNoMoreAvailable = fsm.ErrNoMoreAvailable
	// ErrAllTaskFailed means every task has failed more than failureMax
	// times.
	ErrAllTaskFailed = fsm.ErrAllTaskFailed
	// ErrNoDataset means no dataset has been set yet.
	ErrNoDataset = fsm.ErrNoDataset
	// ErrUnknownTask means the task id does not exist.
	ErrUnknownTask = fsm.ErrUnknownTask
	// ErrStaleEpoch means the task is no longer leased under that epoch.
	ErrStaleEpoch = fsm.ErrStaleEpoch
	// ErrClosed means the member left, or the group closed, before the
	// allgather completed.
	ErrClosed = fsm.ErrClosed
	// ErrReconnected means a later join with the same member id replaced
	// this one.
	ErrReconnected = fsm.ErrReconnected
	// ErrAllGatherTimeoutExceeded means the group did not fill up in time.
	ErrAllGatherTimeoutExceeded = fsm.ErrAllGatherTimeoutExceeded
	// ErrGroupMismatch means a join disagrees with the group's numPeers, or
	// the group is complete and the member is not part of it.
	ErrGroupMismatch = fsm.ErrGroupMismatch
	// ErrInvalid means the request is malformed or out of limits.
	ErrInvalid = fsm.ErrInvalid
)

// ErrClientClosed is returned by calls made after Close, by NextRecord once
// the client is closed, and delivered to watchers still waiting at Close.
var ErrClientClosed = errors.New("raftmaster client closed")

// DefaultTimeout is the allgather group timeout when Join is given none.
const DefaultTimeout = fsm.DefaultTimeout
