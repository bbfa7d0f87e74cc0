package recordio

import (
	"errors"
	"fmt"
)

// ErrCorrupt is matched (with errors.Is) by every error about damaged or
// malformed RecordIO data: a bad magic number, checksum, size, record count,
// compressed stream or record framing, and truncation.
var ErrCorrupt = errors.New("recordio: corrupt data")

// ChunkError reports a failure to read one chunk. Its message names the file
// (when known), the chunk and the chunk's byte offset.
type ChunkError struct {
	// Path is the file's path, or "" when reading from an io.ReadSeeker.
	Path string
	// Chunk is the chunk's number, counting from 0: its position in the
	// file, or in the Index it was read through (the same for an Index from
	// LoadIndex). It is -1 for a one-chunk Index, as from ChunkIndex or
	// NewChunkIndex, which gives only the offset.
	Chunk int
	// Offset is the byte offset of the chunk's header in the file.
	Offset int64
	// Err is the underlying error. Corruption matches ErrCorrupt.
	Err error
}

// Error implements error.
func (e *ChunkError) Error() string {
	where := "chunk"
	if e.Chunk >= 0 {
		where = fmt.Sprintf("chunk %d", e.Chunk)
	}
	if e.Path == "" {
		return fmt.Sprintf("recordio: %s at offset %d: %v", where, e.Offset, e.Err)
	}
	return fmt.Sprintf("recordio: %s: %s at offset %d: %v", e.Path, where, e.Offset, e.Err)
}

// Unwrap returns the underlying error.
func (e *ChunkError) Unwrap() error { return e.Err }

// corruptError describes damaged data; it matches ErrCorrupt.
type corruptError struct {
	msg string
	err error
}

func (e *corruptError) Error() string        { return e.msg }
func (e *corruptError) Unwrap() error        { return e.err }
func (e *corruptError) Is(target error) bool { return target == ErrCorrupt }

// corruptf returns an error matching ErrCorrupt. A %w verb in format wraps
// its operand as well.
func corruptf(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &corruptError{msg: err.Error(), err: errors.Unwrap(err)}
}
