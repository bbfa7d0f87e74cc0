package client

import (
	"errors"
	"fmt"
	"time"

	"github.com/raftmaster/raftmaster/rpc"
)

// The seeds' sentinel errors, re-exported so that trainer code can match
// them with errors.Is while importing only this package. An error that
// crossed the wire is an *rpc.Error whose Unwrap returns one of these.
var (
	// ErrNoContact means the client never connected to any of its
	// addresses within its first-contact timeout (WithFirstContactTimeout):
	// wrong addresses, a cluster that is not running, or a TLS mismatch.
	// The error's message names each address and what it did.
	ErrNoContact = errors.New("raftmaster client: no address of the cluster answered")
	// ErrPassBefore means the pass asked for has already ended.
	ErrPassBefore = rpc.ErrPassBefore
	// ErrPassAfter means the pass asked for has not started yet.
	ErrPassAfter = rpc.ErrPassAfter
	// ErrNoMoreAvailable means every task of the pass is dispatched or done.
	ErrNoMoreAvailable = rpc.ErrNoMoreAvailable
	// ErrAllTaskFailed means every task has failed more than failureMax
	// times.
	ErrAllTaskFailed = rpc.ErrAllTaskFailed
	// ErrNoDataset means no dataset has been set yet.
	ErrNoDataset = rpc.ErrNoDataset
	// ErrUnknownTask means the task id does not exist.
	ErrUnknownTask = rpc.ErrUnknownTask
	// ErrStaleEpoch means the task is no longer leased under that epoch.
	ErrStaleEpoch = rpc.ErrStaleEpoch
	// ErrClosed means the member left, or the group closed, before the
	// allgather completed.
	ErrClosed = rpc.ErrClosed
	// ErrReconnected means a later join with the same member id replaced
	// this one.
	ErrReconnected = rpc.ErrReconnected
	// ErrAllGatherTimeoutExceeded means the group did not fill up in time.
	ErrAllGatherTimeoutExceeded = rpc.ErrAllGatherTimeoutExceeded
	// ErrGroupMismatch means a join disagrees with the group's numPeers, or
	// the group is complete and the member is not part of it.
	ErrGroupMismatch = rpc.ErrGroupMismatch
	// ErrInvalid means the request is malformed or out of limits.
	ErrInvalid = rpc.ErrInvalid
	// ErrLimitExceeded means the request would take its job or the
	// cluster past a configured limit, which the error's message names;
	// nothing changed.
	ErrLimitExceeded = rpc.ErrLimitExceeded
	// ErrUnknownJob means the job named does not exist: from GetTask, the
	// record reader and task reports, that the job the client read was
	// deleted (see GetTask).
	ErrUnknownJob = rpc.ErrUnknownJob
	// ErrUnknownClient means the cluster refused a retried write because
	// it no longer remembers the identity the write was sent under: the
	// write may or may not have applied. (A first attempt refused so is
	// sent again under a new identity, and never returns it.)
	ErrUnknownClient = rpc.ErrUnknownClient
	// ErrTooManyClients means the cluster had no room for a new
	// identity for as long as the call retried (the cluster's table of
	// identities used within its de-duplication window was full).
	ErrTooManyClients = rpc.ErrTooManyClients
	// ErrForeignClient means the cluster refused a write because its
	// identity was created under another token: identities are bound to
	// the token of their first request. Nothing changed.
	ErrForeignClient = rpc.ErrForeignClient
)

// ErrClientClosed is returned by calls made after Close, by NextRecord once
// the client is closed, and delivered to watchers still waiting at Close.
var ErrClientClosed = errors.New("raftmaster client closed")

// DefaultTimeout is the allgather group timeout when Join is given none.
const DefaultTimeout = 10 * time.Minute

// ChunkError is the error NextRecord returns for a chunk of a task that
// could not be read. The task's records are not delivered and the task is
// reported failed; the records after it come with the next NextRecord.
// Damaged data matches recordio.ErrCorrupt with errors.Is; other errors
// (a missing file, an I/O error) do not.
type ChunkError struct {
	// Path is the RecordIO file.
	Path string
	// Chunk is the position of the chunk in the task's chunk list
	// (Task.Chunks), counting from 0; Offset says where it is in the file.
	Chunk int
	// Offset is the byte offset of the chunk's header in the file.
	Offset int64
	// Task is the lease of the task the chunk belongs to.
	Task TaskMeta
	// Err is what went wrong: recordio's account of the damage, or the
	// I/O error.
	Err error
}

// Error names the file, the chunk's offset and the task.
func (e *ChunkError) Error() string {
	return fmt.Sprintf("raftmaster client: %s: chunk at offset %d (chunk %d of task %d, epoch %d): %v",
		e.Path, e.Offset, e.Chunk, e.Task.ID, e.Task.Epoch, e.Err)
}

// Unwrap returns the underlying error.
func (e *ChunkError) Unwrap() error { return e.Err }
