package recordio

import (
	"errors"
	"fmt"
)

// Errors of Glob, IndexGlobs and IndexFiles. Errors about one file are *FileError values
// that wrap the cause, so errors.Is(err, ErrCorrupt) tells a
// damaged file from an unreadable one.
var (
	// ErrNoMatch means none of the patterns matched a file.
	ErrNoMatch = errors.New("no pattern matches a file")
	// ErrBadPattern means a pattern is empty, too long or malformed.
	ErrBadPattern = errors.New("bad file pattern")
	// ErrLimit means the request is over one of the IndexLimits.
	ErrLimit = errors.New("dataset over limit")
	// ErrEmpty means the matched files hold no chunk at all.
	ErrEmpty = errors.New("dataset has no chunks")
	// ErrOutsideRoot means a pattern, or a symbolic link a pattern
	// matched, leads outside the directory GlobRoot expands patterns in.
	ErrOutsideRoot = errors.New("outside the dataset root")
	// ErrNotRegular means a file is a FIFO, a device, a socket or
	// anything else but a regular file, and is not read.
	ErrNotRegular = errors.New("not a regular file")
)

// FileError reports a file that could not be indexed.
type FileError struct {
	// Path is the file's path as the pattern matched it.
	Path string
	// Err is the cause: an os error, or one matching ErrCorrupt.
	Err error
}

// Error returns "recordio: <path>: <cause>".
func (e *FileError) Error() string { return fmt.Sprintf("recordio: %s: %v", e.Path, e.Err) }

// Unwrap returns the cause.
func (e *FileError) Unwrap() error { return e.Err }
