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
// A call may go under a session (history.Op.Session). A task a GetTask
// leases under a session is held by it (the answer names the holder,
// history.Op.Holder) and has no deadline: it goes back to todo when the
// session ends (the leader's ExpireSessions, or a close), or when the
// leader revokes it for lack of progress, which it does no sooner than the
// task timeout after the lease, in FSM time. The cluster refuses a request
// under a session that has ended with session_expired before it applies
// or replays anything, and gives the refusal no FSM time; a session never
// opens again. So every answer with an FSM time to a call under a session
// shows the session open at that time, and a session_expired answer shows
// it ended before the answer. Such an answer refused the call's first
// attempt (nothing applied; the client sends a call that asks for a grant
// again under a new session, and fails a report), or a retry, whose
// earlier attempt may have been applied before the end. The checkers
// take it as an unknown outcome that returned when the refusal did. A
// keep-alive answered session_expired proves no end:
// the leader answers so while the entry that ends the session is in
// flight, and that entry may fail.
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
//     becomes pending in pass p with epoch e until t+TaskTimeout; a task
//     held by a session only until the earlier of t+TaskTimeout (a
//     revocation) and the last FSM time at which the history shows the
//     session open (it may have ended right after). GetTask
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
//     FinishAndGet(finished (id, e), pass p), a GetTask that carries the
//     task its caller finished (protocol level 9), is one log entry that
//     applies TaskFinished(id, e) and then GetTask(p), and its answer, an
//     error of the lease too, says how the finish went (history.Op.Finish).
//     When the finish and the lease concern one task it is one step: the
//     finish's rule, then the lease's from every state the finish may
//     leave. Otherwise its finish is checked in the finished task's
//     partition and its lease in the leased task's, each with the call's
//     interval and FSM time (the partitions are independent, as for every
//     operation). The finish is answered as a TaskFinished would be; an
//     answer of the lease (a task, or pass_before, no_more_available, ...)
//     that says nothing of the finish is illegal, since the finish is
//     applied before the lease; a refusal before it (unknown_job, ...)
//     finished nothing. The lease is checked as a GetTask is, left out
//     when it failed. A retry answered stale_epoch, its lease ended since,
//     replays the finish's outcome (checked without an FSM time) and leased
//     a task of unknown epoch, as an unknown GetTask. An unknown outcome
//     may or may not have finished, and relaxes the epoch rule.
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
// The job's register, checked with porcupine one key at a time. State
// {found, value, version}, initially absent (version 0). KVGet answers
// the state. KVCAS(v, x) swaps iff the key is at version v (0: absent);
// its answer is then x at a new version above v, the key's state from
// then on. When it does not swap its answer is the key as it is, at a
// version other than v. KVCompareValue(e, x) is the same by value: it
// swaps iff the key holds e (is absent, for e empty). KVDelete(v) deletes
// the key iff it exists at version v (any, for 0), and answers the
// version it deleted, or the one it did not match, or that the key is
// absent. KVAdd(n) stores the sum of the key's decimal integer (0 when
// absent) and n, and answers it; KVAppend(b) stores the key's value
// followed by b, and answers its length; both answer the new version,
// which is above the key's. KVMultiSet and KVDeletePrefix write several
// keys in one entry: each key they cover is checked on its own, as a set
// to the value at the version answered for it, or a delete (a prefix
// delete that deleted no key shows every key under the prefix absent). A
// history in which every key on its own is linearizable need not be one
// as a whole, so this is weaker than linearizability of the register,
// never wrong. A write refused with an error code changed nothing; one
// whose outcome is unknown returns at the end of the history and may or
// may not have taken effect: if it did, the key's version is only known
// to be above the one before until an answer reports it. A read whose
// outcome is unknown is left out.
//
// # KVVersionsUnique
//
// Versions come from one counter and are never given out twice: no two
// known writes (swaps, adds, appends, sets) report one version, and every
// answer that reports a key at a version names the same key for it, and
// the same value when both answers say it.
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
// is in 1..NumTasks. A FinishAndGet counts as its finish (as its answer
// reports it) and its lease, here and in SessionHolds.
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
// # SessionHolds
//
// A task held by a session is held by it alone. A GetTask under a session
// leases the task to it (the answer names it as the holder), and every
// answer of one lease (task and epoch) names the same holder. A task held
// by session S under epoch e is leased again only once released: by a
// finish or a failure of epoch e (accepted, or of unknown outcome, before
// the new lease), by the leader's revocation, no sooner than the task
// timeout after the lease, or by the end of S. So a new lease within the
// task timeout, with no finish or failure of e that could have come before
// it, shows that S had ended: an answer applied under S at a later FSM
// time, or to a call invoked after the new lease returned, is a violation.
//
// # SessionEnds
//
// No write of a session that has ended is applied: once the cluster has
// answered a write under a session session_expired (the call's answer, or
// an attempt the client went past, history.SessionRefused), no write under
// the session invoked after that answer is answered with an FSM time.
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
