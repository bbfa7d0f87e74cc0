package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"

	"github.com/raftmaster/raftmaster/rpc"
)

// BackupInfo describes a backup that BackupTo wrote.
type BackupInfo struct {
	// Version is the build of the node that took it.
	Version string
	// Index is the last log entry it includes.
	Index uint64
	// StateHash is the SHA-256 of the state, in hex: the bytes written
	// were checked against it.
	StateHash string
	// Size is the state's length in bytes.
	Size int64
}

// ErrBackupCorrupt means that a backup stream was cut short, or that its
// bytes do not match the length and SHA-256 the server sent after them:
// what the writer received is not the backup and is to be thrown away.
var ErrBackupCorrupt = errors.New("raftmaster client: damaged backup stream")

// backupAccept asks for the stream, and lets a server of an earlier
// release, which knows only the JSON answer, give that.
const backupAccept = rpc.ContentTypeStream + ", " + rpc.ContentTypeJSON + ";q=0.5"

// BackupTo takes an online, consistent copy of the whole state from the
// leader, every write acknowledged before the call included, and writes
// the state's snapshot encoding to w as it arrives, so that its size
// matters to neither side. It checks the bytes against the length and
// SHA-256 the leader sends after them, and returns ErrBackupCorrupt when
// they differ or the stream is cut short. Until the leader starts to
// answer, the call follows redirects and retries like any other; once
// bytes have gone to w, a failure ends it (the caller throws w's content
// away and calls again). Only ctx (and Close) bounds how long the copy
// takes.
func (c *Client) BackupTo(ctx context.Context, w io.Writer) (BackupInfo, error) {
	var info BackupInfo
	err := c.do(ctx, &call{method: http.MethodGet, path: rpc.PathBackup, accept: backupAccept,
		stream: func(resp *http.Response) error { return readBackup(resp, w, &info) }})
	return info, err
}

// readBackup reads a backup answer into w and info.
func readBackup(resp *http.Response, w io.Writer, info *BackupInfo) error {
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch ct {
	case rpc.ContentTypeStream:
	case rpc.ContentTypeJSON:
		return readBackupJSON(resp.Body, w, info)
	default:
		return fmt.Errorf("raftmaster client: %s answered as %q", rpc.PathBackup, resp.Header.Get("Content-Type"))
	}
	index, err := strconv.ParseUint(resp.Header.Get(rpc.HeaderBackupIndex), 10, 64)
	if err != nil {
		return fmt.Errorf("raftmaster client: %s: bad %s header %q", rpc.PathBackup, rpc.HeaderBackupIndex, resp.Header.Get(rpc.HeaderBackupIndex))
	}
	info.Index, info.Version = index, resp.Header.Get(rpc.HeaderBackupVersion)
	sum := sha256.New()
	body := &readErr{r: resp.Body}
	n, err := io.CopyBuffer(io.MultiWriter(w, sum), body, make([]byte, 256<<10))
	switch {
	case body.err != nil:
		return fmt.Errorf("%w: the stream broke off after %d bytes: %v", ErrBackupCorrupt, n, body.err)
	case err != nil:
		return fmt.Errorf("raftmaster client: writing the backup: %w", err)
	}
	wantSum, wantSize := resp.Trailer.Get(rpc.TrailerBackupSha256), resp.Trailer.Get(rpc.TrailerBackupSize)
	if wantSum == "" || wantSize == "" {
		return fmt.Errorf("%w: the stream ended after %d bytes without its length and hash (cut short)", ErrBackupCorrupt, n)
	}
	if wantSize != strconv.FormatInt(n, 10) {
		return fmt.Errorf("%w: %d bytes received, the server sent %s", ErrBackupCorrupt, n, wantSize)
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != wantSum {
		return fmt.Errorf("%w: the bytes received hash to %s, the server sent %s", ErrBackupCorrupt, got, wantSum)
	}
	info.StateHash, info.Size = wantSum, n
	return nil
}

// readBackupJSON reads the JSON answer of a server of an earlier release:
// the whole state in one body, within the client's answer limit.
func readBackupJSON(body io.Reader, w io.Writer, info *BackupInfo) error {
	b, err := io.ReadAll(io.LimitReader(body, maxResponseBytes+1))
	if err != nil {
		return fmt.Errorf("%w: reading the answer: %v", ErrBackupCorrupt, err)
	}
	if len(b) > maxResponseBytes {
		return fmt.Errorf("raftmaster client: %s answer exceeds %d bytes: the server predates streamed backups", rpc.PathBackup, maxResponseBytes)
	}
	var resp rpc.BackupResponse
	if err := json.Unmarshal(b, &resp); err != nil {
		return fmt.Errorf("raftmaster client: decoding %s answer: %w", rpc.PathBackup, err)
	}
	sum := sha256.Sum256(resp.Snapshot)
	if got := hex.EncodeToString(sum[:]); got != resp.StateHash {
		return fmt.Errorf("%w: the state received hashes to %s, the server sent %s", ErrBackupCorrupt, got, resp.StateHash)
	}
	if _, err := io.Copy(w, bytes.NewReader(resp.Snapshot)); err != nil {
		return fmt.Errorf("raftmaster client: writing the backup: %w", err)
	}
	*info = BackupInfo{Version: resp.Version, Index: resp.Index, StateHash: resp.StateHash, Size: int64(len(resp.Snapshot))}
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
