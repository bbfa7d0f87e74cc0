// Package backup is the file format of raftmaster backup and restore.
//
// Version 2, which backup writes, is written as the state arrives: a first
// line naming the format, the state machine's snapshot encoding, then a
// trailer: a line of JSON describing the copy (Header) and a last line of
// fixed length that gives the JSON line's length, so that a reader finds
// the description at the end of the file without reading the state.
// Version 1, which earlier releases wrote and restore still reads, puts
// the JSON line right after the first line, before the state.
//
// Either way the description records the snapshot's length and SHA-256,
// the state hash, and File.CopyState checks both while it copies the
// state, so a corrupt, truncated or padded file is refused (ErrCorrupt)
// and what was copied is to be thrown away.
package backup

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
)

// The first lines of the two versions; they have the same length.
const (
	magicV1 = "raftmaster-backup v1\n"
	magicV2 = "raftmaster-backup v2\n"
)

// endPrefix starts the last line of a version 2 file, which is endPrefix,
// the length of the JSON line before it in endDigits digits, and "\n".
const (
	endPrefix = "raftmaster-backup-end "
	endDigits = 8
	endLen    = int64(len(endPrefix) + endDigits + 1)
)

// maxSnapshot bounds the snapshot a backup file may announce, and
// maxHeaderLine the description's JSON line.
const (
	maxSnapshot   = 64 << 30
	maxHeaderLine = 64 << 10
)

// copyBuffer is the size of the reads and writes that copy the state.
const copyBuffer = 1 << 20

// Header describes the copy in a backup file.
type Header struct {
	// Version is the build of the node that took the copy.
	Version string `json:"version"`
	// Index is the last log entry the copy includes.
	Index uint64 `json:"index"`
	// StateHash is the SHA-256 of the snapshot, in hex.
	StateHash string `json:"state_hash"`
	// Size is the snapshot's length in bytes.
	Size int64 `json:"size"`
}

// ErrCorrupt means the file is not a whole, intact backup.
var ErrCorrupt = errors.New("not an intact raftmaster backup")

// Writer writes a version 2 backup file: the state through Write, then
// the description with Finish.
type Writer struct {
	w   *bufio.Writer
	sum hash.Hash
	n   int64
	err error
}

// NewWriter starts a backup file on w, writing its first line.
func NewWriter(w io.Writer) (*Writer, error) {
	bw := bufio.NewWriterSize(w, copyBuffer)
	if _, err := bw.WriteString(magicV2); err != nil {
		return nil, err
	}
	return &Writer{w: bw, sum: sha256.New()}, nil
}

// Write writes the next bytes of the state's snapshot encoding.
func (w *Writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	n, err := w.w.Write(p)
	w.sum.Write(p[:n])
	w.n += int64(n)
	w.err = err
	return n, err
}

// Finish writes the description of the copy, taken at index by a node of
// the given version, with the length and hash of what Write wrote, and
// flushes the file to the writer NewWriter was given (it does not close
// or sync it).
func (w *Writer) Finish(version string, index uint64) (Header, error) {
	h := Header{Version: version, Index: index, StateHash: hex.EncodeToString(w.sum.Sum(nil)), Size: w.n}
	if w.err != nil {
		return h, w.err
	}
	line, err := json.Marshal(h)
	if err != nil {
		return h, err
	}
	line = append(line, '\n')
	if len(line) > maxHeaderLine {
		return h, fmt.Errorf("backup: description of %d bytes, at most %d", len(line), maxHeaderLine)
	}
	w.w.Write(line)
	fmt.Fprintf(w.w, "%s%0*d\n", endPrefix, endDigits, len(line))
	w.err = errors.New("backup: the file is finished")
	return h, w.w.Flush()
}

// Write writes a whole backup file of snapshot, taken at index by a node
// of the given version, to w.
func Write(w io.Writer, version string, index uint64, snapshot []byte) (Header, error) {
	bw, err := NewWriter(w)
	if err != nil {
		return Header{}, err
	}
	if _, err := bw.Write(snapshot); err != nil {
		return Header{}, err
	}
	return bw.Finish(version, index)
}

// File is an opened backup file whose description has been read and
// whose state has not.
type File struct {
	// Header describes the copy, as the file says.
	Header Header
	// Format is the file's format version, 1 or 2.
	Format int
	state  *io.SectionReader
}

// Open reads the description of the backup file in r, of size bytes. It
// checks the format and that the file's length is what the description
// says; the state itself is checked by CopyState.
func Open(r io.ReaderAt, size int64) (*File, error) {
	first := make([]byte, len(magicV2))
	if _, err := r.ReadAt(first, 0); err != nil {
		return nil, fmt.Errorf("%w: the file does not start with %q or %q", ErrCorrupt, magicV2[:len(magicV2)-1], magicV1[:len(magicV1)-1])
	}
	switch string(first) {
	case magicV1:
		return openV1(r, size)
	case magicV2:
		return openV2(r, size)
	}
	return nil, fmt.Errorf("%w: the file does not start with %q or %q", ErrCorrupt, magicV2[:len(magicV2)-1], magicV1[:len(magicV1)-1])
}

// openV1 reads a version 1 file: its description follows the first line.
func openV1(r io.ReaderAt, size int64) (*File, error) {
	start := int64(len(magicV1))
	br := bufio.NewReader(io.NewSectionReader(r, start, min(size-start, maxHeaderLine)))
	line, err := br.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("%w: no header line", ErrCorrupt)
	}
	h, err := decodeHeader(line)
	if err != nil {
		return nil, err
	}
	off := start + int64(len(line))
	if got := size - off; got != h.Size {
		return nil, fmt.Errorf("%w: %d bytes of snapshot, the header says %d (truncated or padded)", ErrCorrupt, got, h.Size)
	}
	return &File{Header: h, Format: 1, state: io.NewSectionReader(r, off, h.Size)}, nil
}

// openV2 reads a version 2 file: its description is at its end.
func openV2(r io.ReaderAt, size int64) (*File, error) {
	start := int64(len(magicV2))
	if size < start+endLen {
		return nil, fmt.Errorf("%w: %d bytes, too short to end with the description (truncated)", ErrCorrupt, size)
	}
	end := make([]byte, endLen)
	if _, err := r.ReadAt(end, size-endLen); err != nil {
		return nil, fmt.Errorf("%w: reading its last line: %v", ErrCorrupt, err)
	}
	digits, ok := bytes.CutPrefix(end, []byte(endPrefix))
	n, err := strconv.Atoi(string(bytes.TrimSuffix(digits, []byte("\n"))))
	if !ok || end[endLen-1] != '\n' || err != nil || n < 2 || n > maxHeaderLine || int64(n) > size-start-endLen {
		return nil, fmt.Errorf("%w: the file does not end with its description (truncated or padded)", ErrCorrupt)
	}
	line := make([]byte, n)
	if _, err := r.ReadAt(line, size-endLen-int64(n)); err != nil {
		return nil, fmt.Errorf("%w: reading the description: %v", ErrCorrupt, err)
	}
	h, err := decodeHeader(line)
	if err != nil {
		return nil, err
	}
	got := size - endLen - int64(n) - start
	if got != h.Size {
		return nil, fmt.Errorf("%w: %d bytes of snapshot, the description says %d", ErrCorrupt, got, h.Size)
	}
	return &File{Header: h, Format: 2, state: io.NewSectionReader(r, start, h.Size)}, nil
}

// decodeHeader decodes a description line, strictly.
func decodeHeader(line []byte) (Header, error) {
	var h Header
	if len(line) == 0 || line[len(line)-1] != '\n' {
		return h, fmt.Errorf("%w: the description is not a line", ErrCorrupt)
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return h, fmt.Errorf("%w: header: %v", ErrCorrupt, err)
	}
	if h.Size < 0 || h.Size > maxSnapshot {
		return h, fmt.Errorf("%w: snapshot size %d", ErrCorrupt, h.Size)
	}
	if b, err := hex.DecodeString(h.StateHash); err != nil || len(b) != sha256.Size {
		return h, fmt.Errorf("%w: state hash %q is not a SHA-256 in hex", ErrCorrupt, h.StateHash)
	}
	return h, nil
}

// CopyState copies the snapshot to w and checks its length and SHA-256
// against the description. An error means that what w received is not
// the copy and is to be thrown away.
func (f *File) CopyState(w io.Writer) error {
	sum := sha256.New()
	src := &readErr{r: io.NewSectionReader(f.state, 0, f.Header.Size)}
	n, err := io.CopyBuffer(io.MultiWriter(w, sum), src, make([]byte, copyBuffer))
	switch {
	case src.err != nil:
		return fmt.Errorf("reading the backup's state: %w", src.err)
	case err != nil:
		return err
	case n != f.Header.Size:
		return fmt.Errorf("%w: %d bytes of snapshot, the description says %d (truncated)", ErrCorrupt, n, f.Header.Size)
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != f.Header.StateHash {
		return fmt.Errorf("%w: the snapshot's hash is %s, the description says %s", ErrCorrupt, got, f.Header.StateHash)
	}
	return nil
}

// readErr remembers the error of the reader it wraps, other than io.EOF,
// so that a failed copy can say which side failed.
type readErr struct {
	r   io.Reader
	err error
}

func (r *readErr) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		r.err = err
	}
	return n, err
}
