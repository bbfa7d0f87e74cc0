// Package rpc is raftmaster's wire API: HTTP/JSON under /v1/. It holds the
// request and response types that the server and the Go client share, the
// stable error codes, and the HTTP handlers.
//
// A follower answers a request that needs the leader with 307 Temporary
// Redirect to the leader's API address, taken from the node registry; with
// no known leader it answers 503 with Retry-After. Errors are JSON
// {"code": ..., "message": ...}; each seed error has its own code, and
// ErrorFromCode turns a code back into an error that matches the fsm
// sentinel with errors.Is.
//
// Server serves the API over a Backend. Writes go through Backend.Apply
// and need the leader. GET /v1/status is linearizable unless ?stale is
// given; the allgather watch and /v1/debug/state answer from the local FSM
// on any node. Bad input is refused with 4xx before anything is proposed.
//
// Writes carry a request id in the X-Raftmaster-Request-Id header
// ("<client uuid>/<sequence>"). A retry with the same id is answered with
// the first outcome and changes nothing.
package rpc
