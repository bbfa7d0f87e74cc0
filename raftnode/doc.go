// Package raftnode runs one raftmaster replica: hashicorp/raft with a
// raft-boltdb log and stable store, a file snapshot store and a TCP
// transport, around the deterministic fsm.FSM.
//
// It bootstraps from a static peer list (every node bootstraps the same
// configuration when it has no state) or starts empty, to be added as a
// member; adds and removes members and transfers leadership; stamps the leader's clock into every
// command (leader.TermClock: FSM time continued on this node's monotonic
// clock, never its wall clock); and maps Raft's errors to "not leader" (the client redirects)
// and "unknown outcome" (the client retries with the same request id).
//
// On gaining leadership a node calls Barrier, so that it has applied
// everything committed by earlier terms, then runs leader.TakeOver, which
// the etcd backend shares: it starts the term's clock from the FSM's time,
// registers its API address in the FSM's node registry and proposes
// LeaderGrace so that leases do not expire because there was no leader
// for a while. Then it runs the Tick proposer (leader.Ticker), driven by
// the FSM's earliest deadline. On losing leadership it stops.
//
// The raft.FSM adapter lives here (fsm_adapter.go), so that package fsm
// needs nothing but the standard library. A log entry the FSM cannot
// decode because a newer version wrote it halts the FSM; the node then
// stops Raft and Halted is closed, so that the process exits rather than
// diverges.
package raftnode
