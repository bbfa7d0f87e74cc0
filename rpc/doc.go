// Package rpc is raftmaster's wire contract: the HTTP/JSON API under /v1/
// that the server (package httpapi) serves and every client speaks. It
// holds the paths, the request and response types, the error codes and
// their sentinel errors, and nothing else, so that a client links no
// server code. Endpoints lists every route with its method, body types
// and query parameters; the server registers its routes from it.
//
// rpc/openapi.json writes the same contract down for other languages as
// an OpenAPI 3 document. It is generated from Endpoints, ErrorCodes, the
// types and their doc comments (rpc/internal/openapigen), and the
// clients' error sentinels and classes are generated from ErrorCodes
// (rpc/internal/errorsgen); tests fail when a generated file falls
// behind. After a change to the contract, rewrite them with
//
//	go generate ./rpc
//
// JSON keys are snake_case; durations are Go duration strings such as
// "30s"; times are RFC 3339 strings with nanoseconds. Times in answers are
// FSM time, the cluster's own clock, which is only compared with itself.
//
// A follower answers a request that needs the leader with 307 Temporary
// Redirect to the leader's API address; with no known leader it answers
// 503 with Retry-After. Errors are JSON {"code": ..., "message": ...};
// each error of the original has its own code, and ErrorFromCode turns a code back
// into an *Error that matches the code's sentinel (ErrPassBefore, ...)
// with errors.Is.
//
// Writes carry a request id in the X-Raftmaster-Request-Id header
// ("<client uuid>/<sequence>"). A retry with the same id within
// DedupWindow of the client's last request is answered with the first
// outcome and changes nothing; clients stop retrying a write after
// MaxWriteRetry. A client id the cluster does not remember is refused past
// sequence 1 (409 unknown_client: it was forgotten, or never seen), and a
// new client id is refused while the cluster remembers as many as it
// holds within the window (503 too_many_clients, with Retry-After). A
// client that meets unknown_client on the first attempt of a write may
// send it again as sequence 1 of a new client id; on a retry the write's
// outcome is unknown.
package rpc

//go:generate go run ./internal/openapigen
