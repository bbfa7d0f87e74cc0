// Package backup is the file format of raftmaster backup and restore: a
// first line naming the format, a line of JSON describing the copy, then
// the state machine's snapshot encoding. The SHA-256 of the snapshot is
// the state hash the header records, so a corrupt or truncated file is
// refused before anything is written.
package backup

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/raftmaster/raftmaster/fsm"
)

// magic is the first line of a backup file.
const magic = "raftmaster-backup v1"

// maxSnapshot bounds the snapshot a backup file may announce.
const maxSnapshot = 64 << 30

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

// Write writes a backup file of snapshot, taken at index by a node of the
// given version, to w.
func Write(w io.Writer, version string, index uint64, snapshot []byte) (Header, error) {
	sum := sha256.Sum256(snapshot)
	h := Header{Version: version, Index: index, StateHash: hex.EncodeToString(sum[:]), Size: int64(len(snapshot))}
	line, err := json.Marshal(h)
	if err != nil {
		return h, err
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%s\n%s\n", magic, line)
	if _, err := bw.Write(snapshot); err != nil {
		return h, err
	}
	return h, bw.Flush()
}

// Read reads a backup file and checks it whole: its format line, its
// header, the snapshot's length and hash, and that the snapshot decodes
// into a state that keeps every invariant. It returns the header and the
// snapshot.
func Read(r io.Reader) (Header, []byte, error) {
	br := bufio.NewReader(r)
	var h Header
	first, err := br.ReadString('\n')
	if err != nil || first != magic+"\n" {
		return h, nil, fmt.Errorf("%w: the file does not start with %q", ErrCorrupt, magic)
	}
	line, err := br.ReadBytes('\n')
	if err != nil {
		return h, nil, fmt.Errorf("%w: no header line", ErrCorrupt)
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return h, nil, fmt.Errorf("%w: header: %v", ErrCorrupt, err)
	}
	if h.Size < 0 || h.Size > maxSnapshot {
		return h, nil, fmt.Errorf("%w: snapshot size %d", ErrCorrupt, h.Size)
	}
	snapshot, err := io.ReadAll(io.LimitReader(br, h.Size+1))
	if err != nil {
		return h, nil, err
	}
	if int64(len(snapshot)) != h.Size {
		return h, nil, fmt.Errorf("%w: %d bytes of snapshot, the header says %d (truncated or padded)", ErrCorrupt, len(snapshot), h.Size)
	}
	sum := sha256.Sum256(snapshot)
	if got := hex.EncodeToString(sum[:]); got != h.StateHash {
		return h, nil, fmt.Errorf("%w: the snapshot's hash is %s, the header says %s", ErrCorrupt, got, h.StateHash)
	}
	if err := fsm.New().Restore(io.NopCloser(bytes.NewReader(snapshot))); err != nil {
		return h, nil, fmt.Errorf("%w: the snapshot does not restore: %v", ErrCorrupt, err)
	}
	return h, snapshot, nil
}
