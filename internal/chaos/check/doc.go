// Package check decides whether a history of client operations recorded in
// a fault-injection run ([history.Op]) is one that raftmaster's specification
// allows. Every checker reports a violation only when no execution of the
// specified state machine could have produced what the clients saw, so a
// failure is a bug (in the system or in the recording), never noise.
//
// # What the history guarantees
//
// The workload uses a strict dataset (a finish for anything but the current
// lease is refused with stale_epoch) and a failureMax so large that no task
// is ever set aside as failed. AppliedAt is the FSM clock (unix ns) right
// after a command was applied; a de-duplicated retry reports the same
// AppliedAt as the first attempt, and FSM time never decreases in log order.
// An operation whose Return is history.Never, or whose Code is not an FSM
// outcome (unknown_outcome, not_leader, a transport error, ...), has an
// unknown outcome: it may have taken effect at any time after its invoke,
// or never. A known operation with AppliedAt 0 is checked without the
// FSM-time rules. Task leases expire only through Tick commands, which the
// history does not show, at some FSM time at or after their deadline; a new
// leader may extend any deadline (LeaderGrace) but never shortens one. So a
// deadline computed from the history is a lower bound of the real one.
//
// # Linearizable
//
// Linearizable checks with porcupine that the operations can be put in one
// order that respects real time (an operation that returned before another
// was invoked comes first), FSM time (AppliedAt never decreases along the
// order) and this sequential model:
//
//   - Task leases, one partition per task id. State {epoch, status
//     (todo, pending, done), pass, deadline, clock}, initially
//     {0, todo, 0, 0, 0}. GetTask(pass p) answered with (id, e) at t is legal
//     iff e == epoch+1 and either the task is todo and p == pass, or pending
//     with t >= deadline and p == pass (the lease expired and the task was
//     dispatched again), or done and p > pass (a new pass began); the task
//     becomes pending in pass p with epoch e until t+TaskTimeout. GetTask
//     operations that failed or whose outcome is unknown name no task and
//     are left out; if any GetTask outcome is unknown, an invisible dispatch
//     may have used an epoch, so the rule relaxes to e > epoch.
//     TaskFinished(id, e) is accepted only for the current pending lease
//     (then done); stale_epoch is legal for anything else, and for the
//     current lease only once its deadline has passed (it expired: todo).
//     TaskFailed(id, e) accepted needs the current pending lease (then todo);
//     ignored is legal for anything else, and for the current lease only
//     after its deadline (todo). Unknown outcomes may or may not have taken
//     effect. Any other answer (ignored finish, unexpected code) is illegal.
//   - The save-model lease, one partition. State {holder, deadline}.
//     RequestSaveModel(trainer, d) granted at t is legal iff there is no
//     holder, the trainer holds it, or t >= deadline; it then holds until
//     t+d. Denied is legal iff another trainer holds it and, when
//     Config.Grace > 0, t < deadline+Grace.
//
// A failure comes with a porcupine visualization (an HTML file) and a text
// explanation: for each failing partition, the longest linearizable prefix,
// its end state and why none of the operations that could come next can.
// A check that times out is Unknown, which is not a pass.
//
// # KVLinearizable
//
// The job's compare-and-set register, checked with porcupine one key at a
// time. State {found, value, version}, initially absent (version 0).
// KVGet answers the state. KVCAS(v, x) swaps iff the key is at version v
// (0: absent); its answer is then x at a new version above v, the key's
// state from then on. When it does not swap its answer is the key as it
// is, at a version other than v. A compare-and-set refused with an error
// code changed nothing; one whose outcome is unknown returns at the end of
// the history and may or may not have swapped: if it did, its version is
// only known to be above v until an answer reports the key. A read whose
// outcome is unknown is left out.
//
// # KVVersionsUnique
//
// Versions come from one counter and are never given out twice: no two
// known swaps report one version, and every answer that reports a key at
// a version names the same key and value for it.
//
// # PassAccounting
//
// Each accepted finish belongs to the pass of the GetTask that dispatched
// its (id, epoch). For every pass below the highest pass the history shows
// to have begun, every task 1..NumTasks has an accepted finish in that pass,
// or an unknown-outcome finish of a lease of that pass ("task lost"). No
// task is finished twice in one pass, and no task is dispatched in a pass
// by a GetTask invoked after (in real time) or applied after (in FSM time)
// an accepted finish of the same task in the same pass. Every (id, epoch) is
// dispatched once, every finish names a dispatched lease, and every task id
// is in 1..NumTasks.
//
// # SingleSaveHolder
//
// At most one trainer holds the save-model lease at any FSM time: taking the
// known grants in AppliedAt order, a grant to another trainer before the
// current holder's deadline (its grant time plus its BlockDur) is a
// violation.
//
// # Allgather
//
// Every successful watch of one group sees the same data; its length is the
// group's NumPeers; the entry at the watcher's rank is the data of one of
// that member's joins invoked before the group completed (not necessarily
// the last: a re-join after completion is answered with the completed
// result); distinct members have distinct ranks; and every entry is the
// data of some join of the group. A group id is assumed to complete once
// per history: the workload does not reuse ids.
//
// # Jobs
//
// A history may hold the operations of several jobs (history.Op.Job), each
// with its own dataset, passes, save-model lease and groups. PerJob runs
// every checker above on each job's operations on their own.
// NoCrossing checks that the jobs never cross: a task leased in a job
// names only files of that job's dataset, and a task id always the same
// files; a save-model denial in a job is explained by a grant (known, or an
// unknown outcome) to another trainer of the same job that may have been
// applied before it; a successful watch in a job is of a member that
// joined the group in that job, and every entry of its result is the data
// of a join of the group in that job.
//
// # OneLeaderPerTerm
//
// Not a check of the client history but of the cluster itself: Raft's
// election safety, which hashicorp/raft's fuzzy verifier checks as well.
// The input is every election any node won ([LeaderClaim]: node and term),
// read with [ParseLeaderClaims] from the "election won" lines Raft writes to
// each node's log. In every term at most one node may have won; the same
// node claiming a term twice is one leader. Two nodes in one term are a
// violation even if they never led at the same moment: a log entry is
// named by its index and term, so entries written by two leaders of one
// term can be taken for each other, and a committed entry can be lost.
package check
