package fsm

import (
	"errors"
	"fmt"
)

// Sentinel errors. Each has a stable Code, so the wire API and the client can
// carry it across the network and errors.Is keeps working on the far side.
var (
	// ErrPassBefore means the caller asked for a pass that has already ended.
	ErrPassBefore = errors.New("pass id is before the current pass")
	// ErrPassAfter means the caller asked for a pass that has not started yet;
	// it should wait for the current pass to finish.
	ErrPassAfter = errors.New("pass id is after the current pass")
	// ErrNoMoreAvailable means every task of the pass is dispatched or done,
	// but some are still pending on other trainers.
	ErrNoMoreAvailable = errors.New("no more available task")
	// ErrAllTaskFailed means every task of the dataset has failed more than
	// failureMax times; the pass cannot complete.
	ErrAllTaskFailed = errors.New("all tasks failed")
	// ErrNoDataset means no dataset has been set yet.
	ErrNoDataset = errors.New("no dataset has been set")
	// ErrUnknownTask means the task id does not exist in the dataset.
	ErrUnknownTask = errors.New("unknown task id")
	// ErrStaleEpoch means the task is no longer leased under the given
	// epoch: it was re-dispatched, finished, or its lease expired.
	ErrStaleEpoch = errors.New("stale task epoch")

	// ErrClosed means the member left, or the group closed, before the
	// allgather completed.
	ErrClosed = errors.New("left before allgather completed")
	// ErrReconnected means another join with the same member id replaced
	// this one.
	ErrReconnected = errors.New("another connection from the same ID was made")
	// ErrAllGatherTimeoutExceeded means the group did not fill up before its
	// timeout.
	ErrAllGatherTimeoutExceeded = errors.New("allgather timeout exceeded")
	// ErrGroupMismatch means a join disagrees with the group's numPeers, or
	// the group is already complete and the member is not part of it.
	ErrGroupMismatch = errors.New("allgather group mismatch")

	// ErrInvalid means the command is malformed or out of limits. It is
	// rejected and changes no state.
	ErrInvalid = errors.New("invalid command")

	// ErrLimitExceeded means the command would take a job or the cluster
	// past one of the replicated Limits. It is rejected and changes no
	// state; its message names the limit.
	ErrLimitExceeded = errors.New("limit exceeded")
	// ErrUnknownJob means the job named does not exist.
	ErrUnknownJob = errors.New("unknown job")

	// ErrUnknownClient means a request names a client id that the
	// de-duplication table does not hold, with a sequence number above 1:
	// the client was forgotten after DedupWindow without requests, or
	// never seen. The request was refused and changed nothing. Its client
	// may send it again as sequence 1 of a new client id only when no
	// attempt of it was sent before; a retry refused this way has an
	// unknown outcome, since its first attempt may have been applied
	// before the client was forgotten.
	ErrUnknownClient = errors.New("unknown client id: forgotten after the de-duplication window, or never seen")
	// ErrTooManyClients means a request under a client id the
	// de-duplication table does not hold was refused because the table
	// holds DedupMaxActiveClients ids used within DedupWindow. It changed
	// nothing; retry with the same request id once an id expires.
	ErrTooManyClients = errors.New("too many client ids used within the de-duplication window")
	// ErrForeignClient means, from Protocol3 on, a request names a client
	// id that a request under another token created: client identities
	// are bound to the token (RequestID.Owner) of their first request.
	// The request was refused and changed nothing.
	ErrForeignClient = errors.New("the client id belongs to another token")

	// ErrSessionExpired refuses a request under a session that has ended
	// (its keep-alives stopped, or it was closed): nothing was applied, and
	// what the session held has been released.
	ErrSessionExpired = errors.New("the session has expired")

	// ErrUnknownCursor means, from Protocol7 on, that the job has no
	// cursor of the id a command names.
	ErrUnknownCursor = errors.New("unknown cursor")
	// ErrCursorFenced refuses a CommitCursor while another trainer holds
	// the save-model lease, or once the job's dispatch was restored after
	// the generation the commit names.
	ErrCursorFenced = errors.New("the cursor commit is fenced off")
)

// Code is the stable identifier of a command outcome, used on the wire.
type Code uint8

// Outcome codes. New codes are only ever added at the end.
const (
	CodeOK Code = iota
	CodePassBefore
	CodePassAfter
	CodeNoMoreAvailable
	CodeAllTaskFailed
	CodeNoDataset
	CodeUnknownTask
	CodeStaleEpoch
	CodeClosed
	CodeReconnected
	CodeAllGatherTimeout
	CodeGroupMismatch
	CodeInvalid
	CodeLimit
	CodeUnknownJob
	CodeUnknownClient
	CodeTooManyClients
	CodeForeignClient
	CodeSessionExpired
	CodeUnknownCursor
	CodeCursorFenced
	numCodes
)

var codeTable = [numCodes]struct {
	name string
	err  error
}{
	CodeOK:               {"ok", nil},
	CodePassBefore:       {"pass_before", ErrPassBefore},
	CodePassAfter:        {"pass_after", ErrPassAfter},
	CodeNoMoreAvailable:  {"no_more_available", ErrNoMoreAvailable},
	CodeAllTaskFailed:    {"all_task_failed", ErrAllTaskFailed},
	CodeNoDataset:        {"no_dataset", ErrNoDataset},
	CodeUnknownTask:      {"unknown_task", ErrUnknownTask},
	CodeStaleEpoch:       {"stale_epoch", ErrStaleEpoch},
	CodeClosed:           {"closed", ErrClosed},
	CodeReconnected:      {"reconnected", ErrReconnected},
	CodeAllGatherTimeout: {"allgather_timeout", ErrAllGatherTimeoutExceeded},
	CodeGroupMismatch:    {"group_mismatch", ErrGroupMismatch},
	CodeInvalid:          {"invalid", ErrInvalid},
	CodeLimit:            {"limit_exceeded", ErrLimitExceeded},
	CodeUnknownJob:       {"unknown_job", ErrUnknownJob},
	CodeUnknownClient:    {"unknown_client", ErrUnknownClient},
	CodeTooManyClients:   {"too_many_clients", ErrTooManyClients},
	CodeForeignClient:    {"foreign_client", ErrForeignClient},
	CodeSessionExpired:   {"session_expired", ErrSessionExpired},
	CodeUnknownCursor:    {"unknown_cursor", ErrUnknownCursor},
	CodeCursorFenced:     {"cursor_fenced", ErrCursorFenced},
}

// String returns the code's stable wire name, such as "pass_before".
func (c Code) String() string {
	if c < numCodes {
		return codeTable[c].name
	}
	return fmt.Sprintf("code_%d", uint8(c))
}

// Err returns the sentinel error of the code, or nil for CodeOK.
func (c Code) Err() error {
	if c < numCodes {
		return codeTable[c].err
	}
	return ErrInvalid
}

// CodeOf returns the code of err: the code of the sentinel it wraps, or
// CodeInvalid for any other non-nil error.
func CodeOf(err error) Code {
	if err == nil {
		return CodeOK
	}
	for c := Code(1); c < numCodes; c++ {
		if errors.Is(err, codeTable[c].err) {
			return c
		}
	}
	return CodeInvalid
}

// ParseCode returns the code named name, and false if there is none.
func ParseCode(name string) (Code, bool) {
	for c := Code(0); c < numCodes; c++ {
		if codeTable[c].name == name {
			return c, true
		}
	}
	return 0, false
}

// invalidf returns an ErrInvalid with a message.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// limitError is an ErrLimitExceeded whose text is its message alone, which
// names the limit: "limit max_job_tasks (1000) exceeded: ...".
type limitError struct{ msg string }

func (e *limitError) Error() string { return e.msg }
func (e *limitError) Unwrap() error { return ErrLimitExceeded }

// refusal is a sentinel error whose text is a message of its own, which
// details the sentinel's cause.
type refusal struct {
	msg string
	err error
}

func (e *refusal) Error() string { return e.msg }
func (e *refusal) Unwrap() error { return e.err }

// limitf returns the ErrLimitExceeded of limit name, whose value is limit,
// with a message saying what the command would have done.
func limitf(name string, limit int64, format string, args ...any) error {
	return &limitError{msg: fmt.Sprintf("limit %s (%d) exceeded: %s", name, limit, fmt.Sprintf(format, args...))}
}
