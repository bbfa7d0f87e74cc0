// Package chaos is raftmaster's fault-injection harness. It starts real
// "raftmaster serve" processes on 127.0.0.1 with a fault-injecting TCP
// proxy on every Raft link, runs a trainer workload through the Go client
// while a seeded schedule kills, pauses, partitions, restarts and shifts the
// clocks of nodes, records every operation, and then checks the history:
// linearizability of the task leases and the save-model lease (porcupine),
// exact pass accounting, a single save-model holder at any FSM time,
// identical allgather results, convergence of every replica to the same
// state hash, and that operations resume with a majority up. It also
// checks Raft's election safety: at most one node won the election of any
// term, read from the "election won" lines in every node's log (see
// leaderClaims for why the logs and not polling).
//
// "make chaos-variants" runs the same checks against deliberately broken
// builds, each of which must be caught within five runs: a client that
// retries with a fresh request id (chaos_broken_client), an FSM that loses
// a pending task when it restores a snapshot (chaos_broken_fsm), and a
// Raft stable store that never persists the current term and vote
// (chaos_broken_votes, under a schedule of paused and isolated leaders
// with one CrashAll per run), which the one-leader-per-term check must be
// the one to report.
//
// A run is reproducible from its seed: the schedule and every random choice
// of the workload derive from it (timing still varies from run to run).
package chaos
