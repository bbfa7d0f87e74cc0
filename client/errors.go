package client

import (
	"errors"
	"fmt"
	"time"
)

// The sentinels of the wire codes (ErrPassBefore, ...) are in
// errors_gen.go, generated from rpc.ErrorCodes by go generate ./rpc.

// ErrNoContact means the client never connected to any of its addresses
// within its first-contact timeout (WithFirstContactTimeout): wrong
// addresses, a cluster that is not running, or a TLS mismatch. The
// error's message names each address and what it did.
var ErrNoContact = errors.New("raftmaster client: no address of the cluster answered")

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
