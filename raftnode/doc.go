// Package raftnode runs one raftmaster replica: hashicorp/raft with a
// raft-boltdb log and stable store, a file snapshot store and a TCP
// transport, around the deterministic fsm.FSM.
//
// It bootstraps from a static peer list (every node bootstraps the same
// configuration when it has no state) or starts empty to be joined; adds,
// removes and transfers leadership; stamps the leader's clock into every
// command; and maps Raft's errors to "not leader" (the client redirects)
// and "unknown outcome" (the client retries with the same request id).
//
// On gaining leadership a node calls Barrier, so that it has applied
// everything committed by earlier terms, registers its API address in the
// FSM's node registry, proposes LeaderGrace so that leases do not expire
// because there was no leader for a while, and then runs the Tick proposer,
// driven by the FSM's earliest deadline. On losing leadership it stops.
package raftnode
