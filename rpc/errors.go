package rpc

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Wire codes. The outcomes of the state machine come first, named as in
// the original; each has a sentinel error below. The rest are the transport's.
// ErrorCodes gives each its status and its names in the clients.
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
	CodeSessionExpired   = "session_expired"  // 410: the request's session has ended; nothing changed, its leases were released
	CodeUnknownCursor    = "unknown_cursor"   // 404: the job has no cursor of that id; nothing changed
	CodeCursorFenced     = "cursor_fenced"    // 409: the cursor's commit is fenced off; nothing changed

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
	// ErrSessionExpired means the request was made under a session that
	// has ended: its keep-alives stopped for its TTL, or it was closed.
	// Nothing was applied, and what the session held (its tasks, its
	// keys, its save-model lease) was released when it ended. It is
	// answered 410.
	ErrSessionExpired = errors.New("the session has expired")
	// ErrUnknownCursor means the job has no cursor of that id: it was
	// never committed, was deleted, or was dropped as the job's oldest.
	ErrUnknownCursor = errors.New("unknown cursor")
	// ErrCursorFenced means a cursor commit was refused: another trainer
	// holds the save-model lease, or the job's dispatch was restored
	// after the generation the commit names.
	ErrCursorFenced = errors.New("the cursor commit is fenced off")
)

//go:generate go run ./internal/errorsgen

// ErrorCode describes one wire code: how the server sends it and how the
// clients name it. ErrorCodes is the one list of them; the Go client's
// re-exported sentinels (client/errors_gen.go) and the Python client's
// exception classes (python/raftmaster/errors.py) are generated from it
// by go generate, and a test fails when they fall behind.
type ErrorCode struct {
	// Code is the wire code, one of the Code constants.
	Code string
	// Name names the code in the clients: the Go client's sentinel is
	// "Err"+Name (rpc's own is the same), the Python client's exception
	// class is Name.
	Name string
	// Status is the HTTP status the code is sent with (CodeNotLeader's is
	// that of a node that cannot redirect; it is normally a 307).
	Status int
	// Retryable marks the codes after which the request may be sent
	// again with the same request id (see Retryable).
	Retryable bool
	// Sentinel is the error an *Error of the code unwraps to, for the
	// outcomes of the state machine; nil for the transport's codes, which
	// have none.
	Sentinel error
	// Doc says what the error means to a client's caller, as a sentence
	// starting in lower case: the Go client's sentinel is documented as
	// "Err<Name> means <Doc>", the Python class with Doc capitalised.
	Doc string
}

// ErrorCodes lists every wire code, the outcomes of the state machine
// first, in the order of the Code constants.
var ErrorCodes = []ErrorCode{
	{Code: CodePassBefore, Name: "PassBefore", Status: http.StatusConflict, Sentinel: ErrPassBefore,
		Doc: "the pass asked for has already ended."},
	{Code: CodePassAfter, Name: "PassAfter", Status: http.StatusConflict, Sentinel: ErrPassAfter,
		Doc: "the pass asked for has not started yet; wait for the current pass to finish."},
	{Code: CodeNoMoreAvailable, Name: "NoMoreAvailable", Status: http.StatusConflict, Sentinel: ErrNoMoreAvailable,
		Doc: "every task of the pass is dispatched or done, but some are still pending on other trainers."},
	{Code: CodeAllTaskFailed, Name: "AllTaskFailed", Status: http.StatusConflict, Sentinel: ErrAllTaskFailed,
		Doc: "every task has failed more often than the dataset allows; the pass cannot complete."},
	{Code: CodeNoDataset, Name: "NoDataset", Status: http.StatusConflict, Sentinel: ErrNoDataset,
		Doc: "no dataset has been set yet."},
	{Code: CodeUnknownTask, Name: "UnknownTask", Status: http.StatusNotFound, Sentinel: ErrUnknownTask,
		Doc: "the task id does not exist in the dataset."},
	{Code: CodeStaleEpoch, Name: "StaleEpoch", Status: http.StatusConflict, Sentinel: ErrStaleEpoch,
		Doc: "the task is no longer leased under that epoch."},
	{Code: CodeClosed, Name: "Closed", Status: http.StatusConflict, Sentinel: ErrClosed,
		Doc: "the member left, or the group closed, before the allgather completed."},
	{Code: CodeReconnected, Name: "Reconnected", Status: http.StatusConflict, Sentinel: ErrReconnected,
		Doc: "a later join with the same member id replaced this one."},
	{Code: CodeAllGatherTimeout, Name: "AllGatherTimeoutExceeded", Status: http.StatusConflict, Sentinel: ErrAllGatherTimeoutExceeded,
		Doc: "the allgather group did not fill up in time."},
	{Code: CodeGroupMismatch, Name: "GroupMismatch", Status: http.StatusConflict, Sentinel: ErrGroupMismatch,
		Doc: "a join disagrees with the group's number of peers, or the group is complete and the member is not part of it."},
	{Code: CodeInvalid, Name: "Invalid", Status: http.StatusBadRequest, Sentinel: ErrInvalid,
		Doc: "the request is malformed or out of limits; nothing changed."},
	{Code: CodeLimit, Name: "LimitExceeded", Status: http.StatusConflict, Sentinel: ErrLimitExceeded,
		Doc: "the request would take its job or the cluster past a configured limit, which the message names; nothing changed."},
	{Code: CodeUnknownJob, Name: "UnknownJob", Status: http.StatusNotFound, Sentinel: ErrUnknownJob,
		Doc: "the job named does not exist; from a task request, a task report or the record reader, " +
			"it means that the job the client was reading was deleted."},
	{Code: CodeUnknownClient, Name: "UnknownClient", Status: http.StatusConflict, Sentinel: ErrUnknownClient,
		Doc: "the cluster no longer remembers the identity a retried write was sent under " +
			"(it forgot it after the de-duplication window): the write may or may not have applied. " +
			"A first attempt refused so is sent again under a new identity, and never fails with it."},
	{Code: CodeTooManyClients, Name: "TooManyClients", Status: http.StatusServiceUnavailable, Retryable: true, Sentinel: ErrTooManyClients,
		Doc: "the cluster had no room for a new identity for as long as the call retried: " +
			"its table of identities used within the de-duplication window was full."},
	{Code: CodeForeignClient, Name: "ForeignClient", Status: http.StatusForbidden, Sentinel: ErrForeignClient,
		Doc: "the cluster refused a write because its identity was created under another token: " +
			"identities are bound to the token of their first request. Nothing changed."},
	{Code: CodeSessionExpired, Name: "SessionExpired", Status: http.StatusGone, Sentinel: ErrSessionExpired,
		Doc: "the call was made under a session that has ended, because its keep-alives stopped for its TTL or it was closed: " +
			"nothing was applied, and the tasks, keys and save-model lease it held were released. The client opens a new session."},
	{Code: CodeUnknownCursor, Name: "UnknownCursor", Status: http.StatusNotFound, Sentinel: ErrUnknownCursor,
		Doc: "the job has no cursor of that id: it was never committed, was deleted, or was dropped as the job's oldest. Nothing changed."},
	{Code: CodeCursorFenced, Name: "CursorFenced", Status: http.StatusConflict, Sentinel: ErrCursorFenced,
		Doc: "a cursor commit was refused: another trainer holds the save-model lease, " +
			"or the job's dispatch was restored after the generation the commit names. Nothing changed."},

	{Code: CodeNotLeader, Name: "NotLeader", Status: http.StatusServiceUnavailable, Retryable: true,
		Doc: "the node does not lead and could not redirect (503); retried."},
	{Code: CodeNoLeader, Name: "NoLeader", Status: http.StatusServiceUnavailable, Retryable: true,
		Doc: "no leader is known (503); retried."},
	{Code: CodeUnknownOutcome, Name: "UnknownOutcome", Status: http.StatusServiceUnavailable, Retryable: true,
		Doc: "the write may or may not have applied (503); retried with the same request id."},
	{Code: CodeTooLarge, Name: "TooLarge", Status: http.StatusRequestEntityTooLarge,
		Doc: "the request body is over the limit (413)."},
	{Code: CodeNotFound, Name: "NotFound", Status: http.StatusNotFound,
		Doc: "no such endpoint, or no such cluster member (404)."},
	{Code: CodeMethod, Name: "MethodNotAllowed", Status: http.StatusMethodNotAllowed,
		Doc: "the endpoint does not take that method (405)."},
	{Code: CodeInternal, Name: "Internal", Status: http.StatusInternalServerError,
		Doc: "the server failed, or the answer was not one of the API's (500)."},
	{Code: CodeUnavailable, Name: "Unavailable", Status: http.StatusServiceUnavailable, Retryable: true,
		Doc: "the node is not ready: catching up or shutting down (503); retried."},
	{Code: CodeUnauthorized, Name: "Unauthorized", Status: http.StatusUnauthorized,
		Doc: "no token, or one the server does not know (401); nothing changed."},
	{Code: CodeForbidden, Name: "Forbidden", Status: http.StatusForbidden,
		Doc: "the token's role may not use the endpoint, or the token does not cover the job (403); nothing changed."},
	{Code: CodeRateLimited, Name: "RateLimited", Status: http.StatusTooManyRequests, Retryable: true,
		Doc: "the token is over its quota of writes or of new identities (429); " +
			"retried with the same request id after Retry-After, and nothing changed."},
}

// errorCodes indexes ErrorCodes by code.
var errorCodes = indexErrorCodes(ErrorCodes)

func indexErrorCodes(list []ErrorCode) map[string]*ErrorCode {
	m := make(map[string]*ErrorCode, len(list))
	for i := range list {
		c := &list[i]
		if _, dup := m[c.Code]; dup {
			panic("rpc: wire code " + c.Code + " is listed twice in ErrorCodes")
		}
		m[c.Code] = c
	}
	return m
}

// Sentinel returns the sentinel error of an outcome code, or nil when the
// code has none.
func Sentinel(code string) error {
	if c, ok := errorCodes[code]; ok {
		return c.Sentinel
	}
	return nil
}

// Error is the JSON error body, and the error the client returns for it.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// AppliedAt is the FSM time of an error of the original that an applied command
	// returned (such as pass_after), zero for other errors.
	AppliedAt time.Time `json:"applied_at,omitzero"`
	// Finish is, for an error answer to a GetTaskRequest that carried a
	// finished task, how that finish went: the finish is applied even
	// when no task is leased (pass_before, no_more_available, ...).
	Finish *FinishOutcome `json:"finish,omitempty"`
	// MoreFinish is, likewise, how each of the request's MoreFinished
	// went.
	MoreFinish []FinishOutcome `json:"more_finish,omitempty"`
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
func (e *Error) Unwrap() error { return Sentinel(e.Code) }

// ErrorFromCode returns the error for a code and message received on the
// wire.
func ErrorFromCode(code, message string, status int) error {
	return &Error{Code: code, Message: message, Status: status}
}

// HTTPStatus returns the status an error code is sent with: its
// ErrorCodes entry's, or 500 for a code that is not one of them.
func HTTPStatus(code string) int {
	if c, ok := errorCodes[code]; ok {
		return c.Status
	}
	return http.StatusInternalServerError
}

// Retryable reports whether a request that failed with err may be sent
// again with the same request id: the server had no leader, lost it,
// could not tell whether the write applied, or had no room for a new
// client id yet, or the token was over its quota (the codes marked
// Retryable in ErrorCodes).
func Retryable(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	c, ok := errorCodes[e.Code]
	return ok && c.Retryable
}

// Errorf builds an Error with a formatted message.
func Errorf(code string, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Status: HTTPStatus(code)}
}
