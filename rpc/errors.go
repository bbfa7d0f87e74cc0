package rpc

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/raftmaster/raftmaster/fsm"
)

// Codes that are not FSM outcomes. FSM outcomes use fsm.Code's names
// ("pass_before", "invalid", ...).
const (
	CodeNotLeader      = "not_leader"      // 307 to the leader, or 503 when unknown
	CodeNoLeader       = "no_leader"       // 503: no leader known; retry
	CodeUnknownOutcome = "unknown_outcome" // 503: may or may not have applied; retry with the same request id
	CodeTooLarge       = "too_large"       // 413: body over the limit
	CodeNotFound       = "not_found"       // 404: no such endpoint, or no such cluster member
	CodeMethod         = "method_not_allowed"
	CodeInternal       = "internal"
	CodeUnavailable    = "unavailable" // 503: not ready (catching up, shutting down)
)

// Error is the JSON error body, and the error the client returns for it.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// AppliedAt is the FSM time of a seed error that an applied command
	// returned (such as pass_after), zero for other errors.
	AppliedAt int64 `json:"applied_at,omitempty"`
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

// Unwrap returns the fsm sentinel of the code, so that errors.Is(err,
// fsm.ErrPassBefore) holds for an error that crossed the wire.
func (e *Error) Unwrap() error {
	if c, ok := fsm.ParseCode(e.Code); ok && c != fsm.CodeOK {
		return c.Err()
	}
	return nil
}

// ErrorFromCode returns the error for a code and message received on the
// wire.
func ErrorFromCode(code, message string, status int) error {
	return &Error{Code: code, Message: message, Status: status}
}

// HTTPStatus returns the status an error code is sent with.
func HTTPStatus(code string) int {
	switch code {
	case "invalid":
		return http.StatusBadRequest
	case "unknown_task", CodeNotFound:
		return http.StatusNotFound
	case CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case CodeMethod:
		return http.StatusMethodNotAllowed
	case CodeNotLeader, CodeNoLeader, CodeUnknownOutcome, CodeUnavailable:
		return http.StatusServiceUnavailable
	case CodeInternal:
		return http.StatusInternalServerError
	}
	if _, ok := fsm.ParseCode(code); ok {
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}

// Retryable reports whether a request that failed with err may be sent
// again with the same request id: the server had no leader, lost it, or
// could not tell whether the write applied.
func Retryable(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code {
	case CodeNotLeader, CodeNoLeader, CodeUnknownOutcome, CodeUnavailable:
		return true
	}
	return false
}

// Errorf builds an Error with a formatted message.
func Errorf(code string, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Status: HTTPStatus(code)}
}
