// Package httpapi serves raftmaster's wire API (package rpc) for one
// replica: Handler routes each path with the standard library's method
// patterns to a handler over a Backend, which the Raft node and the etcd
// master both implement.
//
// Writes go through Backend.Apply and need the leader; a follower
// redirects. GET /v1/status is linearizable unless ?stale is given; the
// allgather watch and /v1/debug/state answer from the local FSM on any
// node. Bad input is refused with 4xx before anything is proposed. The
// state machine's types never reach the wire: convert.go translates them.
//
// Sessions open and close through the log; their keep-alives are answered
// by the leader's SessionKeeper (a Backend that is a SessionBackend) and
// replicate nothing. A write under a session carries it in
// rpc.HeaderSession, which goes into the command's header.
package httpapi
