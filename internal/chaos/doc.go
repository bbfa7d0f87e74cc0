// Package chaos is raftmaster's fault-injection harness. It starts real
// "raftmaster serve" processes on 127.0.0.1 with a fault-injecting TCP
// proxy on every Raft link, runs a trainer workload through the Go client
// while a seeded schedule kills, pauses, partitions, restarts and shifts the
// clocks of nodes and replaces their volumes, records every operation, and
// then checks the history.
//
// Every run drives two jobs at once on the one cluster: the default job,
// whose clients use the plain paths, and "job-b" (JobB), whose clients use
// /v1/jobs/job-b/... (client.WithJob). Each job has its own dataset, in
// RecordIO files named after it in a directory of its own, and its own
// three trainers, two save-model contenders, three allgather gatherers and
// three clients that read and write four keys of its register: mostly
// compare-and-sets, and every write of the register store (deletes,
// prefix deletes, adds to a counter key, multi-key sets, appends and
// compare-values).
// Every operation in the history names its job (history.Op.Job; empty, in
// histories written before jobs, is the default job), and every leased
// task the files of its chunks.
//
// Two of each job's three trainers lease their tasks under sessions of one
// second (sessionTTL), the third without. By default two of the three
// (Config.FinishAndGet: the first, under a session, and the third)
// report a finished task on their next GetTask (rpc.GetTaskRequest.Finished,
// protocol level 9, history.FinishAndGet), one log entry that finishes it
// and leases the next, rather than by a TaskFinished of their own; the
// answer, an error too, says how the finish went. A trainer under a session
// stalls now and then right after it leased a task, for two to four TTLs:
// paused, its requests and answers (keep-alives included) held back as a
// stopped process's, or cut off, its requests failing while its call
// retries. Its session then ends and the task goes to another trainer,
// and the stalled one's later calls are refused session_expired; faults
// that isolate a leader end sessions too. The history records the session
// each task call went under and the holder its answer names, and, as the
// cluster answered them on the wire, the sessions opened, the keep-alives
// and the attempts refused session_expired that the client went past.
//
// Per job, on that job's operations alone (check.PerJob): linearizability
// of the task leases (a held task goes back when its session may have
// ended) and the save-model lease (porcupine), exact pass accounting, a
// single save-model holder at any FSM time, identical allgather results,
// linearizability of the register per key (porcupine) and versions never
// given to two writes, that a task held by a session is held by it alone
// (leased again within the task timeout only once the session ended), and
// that no write of an ended session is applied; and that operations of the job resume within a minute
// of each fault being healed. Across jobs, that they never cross
// (check.NoCrossing): a task leased in a job names only files of that
// job's dataset (and a task id always the same files); a save-model denial
// in a job is explained by a grant to another trainer of the same job,
// never only by one of the other job; and an allgather result in a job
// holds only the data of that job's joins of the group, although both
// jobs' gatherers use the same group ids. Cluster-wide, as before: every
// replica converges to the same state hash, and Raft's election safety
// holds: at most one node won the election of any term, read from the
// "election won" lines in every node's log (see leaderClaims for why the
// logs and not polling). The report and the summary of "make chaos" give
// the operations of each job.
//
// Two faults replace a node's volume: SIGKILL, its data directory
// deleted, a restart on an empty one. WipeNode does it to the leader or a
// follower alone; WipeAmidKills does it the way a lost volume loses
// acknowledged writes when an empty node may vote: a minority of the other
// nodes is killed first and misses writes, then the wiped node and every
// node holding those writes crash, and the wiped node restarts empty with
// the lagging ones, a majority in number, while the others come back only
// when the fault is healed. The node returns as a new incarnation, under a
// new server id, which the leader adds as a non-voter and promotes once
// caught up. A wipe goes ahead only while, counting it, at most a minority
// of the nodes lack their data (wiped and not promoted yet; see volumes
// for why nodes that are merely down do not count), and waits up to a
// minute for the promotions it needs; a promotion that does not come is a
// violation. So is a membership that has not settled to one voter per
// node, every old incarnation removed, 90 seconds after the last fault.
// Every incarnation appends to its node's one log file, and the
// one-leader-per-term check counts the elections of each incarnation
// under its own server id: two incarnations of a node winning one term
// are two leaders.
//
// "make chaos-variants" runs the same checks against deliberately broken
// builds, each of which must be caught within five runs: a client that
// retries with a fresh request id (chaos_broken_client), an FSM that loses
// a pending task when it restores a snapshot (chaos_broken_fsm), a
// Raft stable store that never persists the current term and vote
// (chaos_broken_votes, under a schedule of paused and isolated leaders
// with one CrashAll per run), which the one-leader-per-term check must be
// the one to report, and an FSM that applies the requests of an ended
// session, opening it again (chaos_broken_sessions), which the check that
// sessions hold their tasks alone must report: a stalled trainer's call
// is applied under its session after the task the session held went to
// another. The client is run a second time, and then the
// register's linearizability check must be the one to report it: a compare-and-set whose answer was
// lost is applied twice, and the retry answers that it did not swap, at
// the version its first attempt wrote.
//
// The chaos_broken_finish build makes the cluster look, through the
// trainers' transport (brokenFinish), like one whose GetTask drops the
// finish it carries yet answers it accepted: the task goes out again in
// the pass it was reported finished in, which pass accounting reports as
// a task finished twice in a pass, and the task leases' linearizability
// as a dispatch of a task done in that pass:
//
//	CHAOS_EXPECT_VIOLATION='finished twice in pass' go test -count=1 -tags chaos_broken_finish -run '^TestChaosExpectViolation$' ./internal/chaos/
//
// A run is reproducible from its seed: the schedule and every random choice
// of the workload derive from it (timing still varies from run to run).
package chaos
