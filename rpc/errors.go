package rpc

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Wire codes. The outcomes of the state machine come first, named as in
// the original; each has a sentinel error below. The rest are the transport's.
const (
	CodePassBefore       = "pass_before"
	CodePassAfter        = "pass_after"
	CodeNoMoreAvailable  = "no_more_available"
	CodeAllTaskFailed    = "all_task_failed"
	CodeNoDataset        = "no_dataset"
	CodeUnknownTask      = "unknown_task"
	CodeStaleEpoch       = "stale_epoch"
	CodeClosed           = "closed"
	CodeReconnected      = "reconnected"
	CodeAllGatherTimeout = "allgather_timeout"
	CodeGroupMismatch    = "group_mismatch"
	CodeInvalid          = "invalid" // 400: malformed or out of limits; nothing changed
	CodeLimit            = "limit_exceeded"
	CodeUnknownJob       = "unknown_job"
	CodeUnknownClient    = "unknown_client"   // 409: the request id's client is not held; nothing changed
	CodeTooManyClients   = "too_many_clients" // 503: no room for a new client id; retry with the same id
	CodeForeignClient    = "foreign_client"   // 403: the request id's client belongs to another token; nothing changed

	CodeNotLeader      = "not_leader"      // 307 to the leader, or 503 when unknown
	CodeNoLeader       = "no_leader"       // 503: no leader known; retry
	CodeUnknownOutcome = "unknown_outcome" // 503: may or may not have applied; retry with the same request id
	CodeTooLarge       = "too_large"       // 413: body over the limit
	CodeNotFound       = "not_found"       // 404: no such endpoint, or no such cluster member
	CodeMethod         = "method_not_allowed"
	CodeInternal       = "internal"
	CodeUnavailable    = "unavailable"  // 503: not ready (catching up, shutting down)
	CodeUnauthorized   = "unauthorized" // 401: no token, or one the server does not know (serve --auth-tokens)
	CodeForbidden      = "forbidden"    // 403: the token's role may not use the endpoint, or it does not cover the job
	CodeRateLimited    = "rate_limited" // 429: the token is over its quota; retry with the same request id after Retry-After
)

// The original's sentinel errors. An *Error whose code names one unwraps to it,
// so errors.Is works on the far side of the wire.
var (
	// ErrPassBefore means the pass asked for has already ended.
	ErrPassBefore = errors.New("pass id is before the current pass")
	// ErrPassAfter means the pass asked for has not started yet; wait for
	// the current pass to finish.
	ErrPassAfter = errors.New("pass id is after the current pass")
	// ErrNoMoreAvailable means every task of the pass is dispatched or
	// done, but some are still pending on other trainers.
	ErrNoMoreAvailable = errors.New("no more available task")
	// ErrAllTaskFailed means every task has failed more than failureMax
	// times; the pass cannot complete.
	ErrAllTaskFailed = errors.New("all tasks failed")
	// ErrNoDataset means no dataset has been set yet.
	ErrNoDataset = errors.New("no dataset has been set")
	// ErrUnknownTask means the task id does not exist in the dataset.
	ErrUnknownTask = errors.New("unknown task id")
	// ErrStaleEpoch means the task is no longer leased under that epoch.
	ErrStaleEpoch = errors.New("stale task epoch")
	// ErrClosed means the member left, or the group closed, before the
	// allgather completed.
	ErrClosed = errors.New("left before allgather completed")
	// ErrReconnected means another join with the same member id replaced
	// this one.
	ErrReconnected = errors.New("another connection from the same ID was made")
	// ErrAllGatherTimeoutExceeded means the group did not fill up in time.
	ErrAllGatherTimeoutExceeded = errors.New("allgather timeout exceeded")
	// ErrGroupMismatch means a join disagrees with the group's numPeers,
	// or the group is complete and the member is not part of it.
	ErrGroupMismatch = errors.New("allgather group mismatch")
	// ErrInvalid means the request is malformed or out of limits; nothing
	// changed.
	ErrInvalid = errors.New("invalid command")
	// ErrLimitExceeded means the request would take a job or the cluster
	// past one of its configured limits, which the message names; nothing
	// changed.
	ErrLimitExceeded = errors.New("limit exceeded")
	// ErrUnknownJob means the job named does not exist.
	ErrUnknownJob = errors.New("unknown job")
	// ErrUnknownClient means the request id's client id is not among
	// those the cluster remembers, and its sequence number is above 1:
	// the client was forgotten after DedupWindow without requests, or
	// never seen. Nothing changed. A client that gets it on the first
	// attempt of a write sends the write again as sequence 1 of a new
	// client id; on a retry the write's outcome is unknown, since an
	// earlier attempt may have been applied before the client was
	// forgotten.
	ErrUnknownClient = errors.New("unknown client id: forgotten after the de-duplication window, or never seen")
	// ErrTooManyClients means the request id's client id is new and the
	// cluster already remembers as many client ids used within
	// DedupWindow as it holds. Nothing changed; it is answered 503 with
	// Retry-After, and the write may be retried with the same request id.
	ErrTooManyClients = errors.New("too many client ids used within the de-duplication window")
	// ErrForeignClient means the request id's client id was created by a
	// request under another token: client ids are bound to their token.
	// Nothing changed; it is answered 403.
	ErrForeignClient = errors.New("the client id belongs to another token")
)

// sentinels maps the codes that have a sentinel error to it.
var sentinels = map[string]error{
	CodePassBefore:       ErrPassBefore,
	CodePassAfter:        ErrPassAfter,
	CodeNoMoreAvailable:  ErrNoMoreAvailable,
	CodeAllTaskFailed:    ErrAllTaskFailed,
	CodeNoDataset:        ErrNoDataset,
	CodeUnknownTask:      ErrUnknownTask,
	CodeStaleEpoch:       ErrStaleEpoch,
	CodeClosed:           ErrClosed,
	CodeReconnected:      ErrReconnected,
	CodeAllGatherTimeout: ErrAllGatherTimeoutExceeded,
	CodeGroupMismatch:    ErrGroupMismatch,
	CodeInvalid:          ErrInvalid,
	CodeLimit:            ErrLimitExceeded,
	CodeUnknownJob:       ErrUnknownJob,
	CodeUnknownClient:    ErrUnknownClient,
	CodeTooManyClients:   ErrTooManyClients,
	CodeForeignClient:    ErrForeignClient,
}

// Sentinel returns the sentinel error of an outcome code, or nil when the
// code has none.
func Sentinel(code string) error { return sentinels[code] }

// Error is the JSON error body, and the error the client returns for it.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// AppliedAt is the FSM time of an error of the original that an applied command
	// returned (such as pass_after), zero for other errors.
	AppliedAt time.Time `json:"applied_at,omitzero"`
	// Status is the HTTP status the error came with (not serialised).
	Status int `json:"-"`
}

// Error returns "code: message".
func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code
	}
	return e.Code + ": " + e.Message
}

// Unwrap returns the sentinel of the code, so that errors.Is(err,
// ErrPassBefore) holds for an error that crossed the wire.
func (e *Error) Unwrap() error { return sentinels[e.Code] }

// ErrorFromCode returns the error for a code and message received on the
// wire.
func ErrorFromCode(code, message string, status int) error {
	return &Error{Code: code, Message: message, Status: status}
}

// HTTPStatus returns the status an error code is sent with.
func HTTPStatus(code string) int {
	switch code {
	case CodeInvalid:
		return http.StatusBadRequest
	case CodeUnknownTask, CodeUnknownJob, CodeNotFound:
		return http.StatusNotFound
	case CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case CodeMethod:
		return http.StatusMethodNotAllowed
	case CodeUnauthorized:
		return http.StatusUnauthorized
	case CodeForbidden, CodeForeignClient:
		return http.StatusForbidden
	case CodeRateLimited:
		return http.StatusTooManyRequests
	case CodeNotLeader, CodeNoLeader, CodeUnknownOutcome, CodeUnavailable, CodeTooManyClients:
		return http.StatusServiceUnavailable
	case CodeInternal:
		return http.StatusInternalServerError
	}
	if _, ok := sentinels[code]; ok {
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}

// Retryable reports whether a request that failed with err may be sent
// again with the same request id: the server had no leader, lost it,
// could not tell whether the write applied, or had no room for a new
// client id yet, or the token was over its quota.
func Retryable(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code {
	case CodeNotLeader, CodeNoLeader, CodeUnknownOutcome, CodeUnavailable, CodeTooManyClients, CodeRateLimited:
		return true
	}
	return false
}

// Errorf builds an Error with a formatted message.
func Errorf(code string, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Status: HTTPStatus(code)}
}
