// Package chaos is raftmaster's fault-injection harness. It starts real
// "raftmaster serve" processes on 127.0.0.1 with a fault-injecting TCP
// proxy on every Raft link, runs a trainer workload through the Go client
// while a seeded schedule kills, pauses, partitions, restarts and shifts the
// clocks of nodes, records every operation, and then checks the history:
// linearizability of the task leases and the save-model lease (porcupine),
// exact pass accounting, a single save-model holder at any FSM time,
// identical allgather results, convergence of every replica to the same
// state hash, and that operations resume with a majority up.
//
// A run is reproducible from its seed: the schedule and every random choice
// of the workload derive from it (timing still varies from run to run).
package chaos
