// Package fsm is raftmaster's deterministic replicated state machine: for
// each of many jobs, the task queue of the data dispatcher, the save-model
// lease, allgather groups and a register (a compare-and-set store of keys);
// and, shared by the cluster, the node registry, the de-duplication table
// and the replicated limits. Every replica applies the same Raft log through
// FSM.ApplyEntry and reaches byte-identical state. The package depends on
// the standard library and github.com/google/uuid only: raftnode adapts
// the FSM to hashicorp/raft, and a test keeps it that way.
//
// # Determinism
//
// Apply reads nothing but the log entry. The proposing leader stamps its
// time into each command (Header.Now, unix nanoseconds) and the FSM keeps
// clock = max(clock, Now), so time never runs backwards inside the FSM.
// Task ids come from the dataset's chunk order,
// allgather generations from a counter. Maps are only iterated in sorted key
// order (sortedKeys), so no map order reaches a result or a snapshot. A
// test in this package fails the build if a non-test file uses the wall
// clock, randomness, the os or net packages, or ranges over a map elsewhere.
//
// # Time
//
// FSM time is cluster time, not any machine's wall clock. A leader stamps
// Now from its monotonic clock, continuing from the FSM clock it found
// after its take-over barrier (internal/leader.Clock); only the first
// leader of a new cluster, whose log holds no time, starts from its wall
// clock. So a leader whose wall clock runs ahead, lags, or jumps by hours
// while it leads moves no deadline: every lease, save-model block and group
// timeout runs for its real length, before and after a fail-over. Time
// without a leader does not count, which is the fail-over grace's intent
// too. While anything waits on a deadline the leader proposes a Tick at
// least every second, so a new leader continues from a time at most about
// a second old. FSM time therefore lags the wall clock by the time the
// cluster spent without a leader; it is only compared with itself.
//
// The FSM does not bound how far one stamp may jump: it cannot tell an
// idle hour from a skewed clock, and clamping would make FSM time fall
// behind the leader's, so that leases would end early by the leader's
// measure. Stamps come from leaders that never read a wall clock after the
// first, which is where the bound belongs.
//
// # Encoding
//
// A command is a version byte, a type byte, the header (Now, client id,
// sequence number, job) and a payload of varints and length-prefixed
// strings. Version 2 added the job, a length-prefixed string after the
// sequence number; version 1 entries, written before jobs existed, still
// decode, addressed to DefaultJob. Version 3 (Protocol3) adds the request
// id's owner, 16 bytes after the job; it is written only for a command
// that carries one, every other command keeping its version 2 bytes.
// Version 4 (Protocol6) adds the session and the attach flag after the
// owner, for a command under a session.
// Each type is registered once, in one ordered table (commands in
// command.go): its number, its name, its constructor for Decode, its
// validator of the limits and its apply function. Decode, validation and
// dispatch all look the type up there, and the comment at the table lists
// the steps of adding a command. Type numbers are written in logs on disk:
// types are only ever added at the end, never renumbered or reused.
//
// The state holds the cluster's protocol level (protocol.go), raised by
// SetProtocol once the leader found every server of the Raft
// configuration running a release that knows it. A command type added
// after the first level is proposed only at its level (Allows; leaders
// answer ErrUpgradePending below it, and apply refuses it on every replica
// alike), the semantics a level gives existing commands apply only from
// that level, and a state writes the snapshot version of its level. So a
// rolling upgrade never shows a replica an entry or a snapshot it cannot
// read, and replicas of two releases apply the same log to the same state.
//
// A type with IgnorableFlag set is skipped by a replica that does not know
// it. An entry whose command version or (non-ignorable) type this replica
// does not know, ErrUnsupported, was written by a newer version, as in a
// rolling upgrade done in the wrong order: the FSM halts (Halted,
// HaltErr), applies nothing more and refuses to snapshot, and the node
// stops, rather than skip the entry and diverge from the replicas that
// apply it. Bytes of a known command that do not decode, and commands
// outside the limits (limits.go; Now must lie between 1970 and 2116, so
// that no deadline overflows; a job name must be a DNS label), are
// answered with CodeInvalid and change nothing on every replica alike.
//
// # Jobs
//
// One quorum serves many jobs. Each job has its own dataset and task
// queue, passes, uploads, save-model lease and allgather groups; the FSM
// clock, the LeaderGrace limit, the node registry, the de-duplication
// table and the allgather generation counter are the cluster's, so
// generations are unique across jobs (a watch of a deleted job's join
// never matches a join of the job created again). A job's name is a DNS
// label: 1 to 63 characters of a-z, 0-9 and '-', starting and ending with
// a letter or digit. Every job's command names its job in Header.Job; ""
// is DefaultJob ("default"), so commands written before jobs existed, and
// clients that know no jobs, address the default job. The cluster-wide
// commands (Tick, RegisterNode, RemoveNode, LeaderGrace, SetLimits) name
// none.
//
// No job exists at first. SetDataset, DatasetPart, RequestSaveModel,
// Join and a KVCompareAndSet that stores create the job they address;
// CreateJob creates it empty (an
// existing job is ignored). Every other command to a job that does not
// exist is answered as an empty job answers it, which is how the default
// job behaved before it held anything: GetTask, TaskFinished, TaskFailed
// and RenewLease answer ErrNoDataset, DatasetCommit an unknown upload,
// Leave is ignored. A command that is rejected creates nothing. A
// KVCompareAndSet that expects a version (not 0) cannot create its job, so
// to a job that does not exist it is answered as a compare-and-set that
// did not swap, the key absent, even when MaxJobs is reached; before
// Protocol2 it was refused with CodeLimit there, as old replicas still do.
//
// DeleteJob deletes its job, named explicitly, with everything it holds;
// the watches of its groups answer ErrClosed. An unknown job answers
// ErrUnknownJob. Every job is numbered at its creation, and GetTask's
// answers carry the number (Task.JobNumber), so that a reader can tell
// the job it read from one created again under its name: a GetTask that
// names the number (GetTask.JobNumber, from Protocol2) is answered
// ErrUnknownJob, leasing nothing, once that job is gone. The default job may be deleted too: it then starts empty,
// like any job created again, whose first dataset counts afresh. A retried
// GetTask or RenewLease whose job was deleted and created again since
// answers ErrStaleEpoch.
//
// A job's last activity is the FSM time of the last command addressed to
// it that was not rejected (a duplicate changes nothing, so it does not
// count). When Limits.JobTTL is positive, a Tick deletes every job that
// has no task lease out, no save-model holder, no allgather group and no
// kept round that timed out, and whose last activity is JobTTL old, after expiring what is due; its
// Result.Collected names them, for the node to log. NextDeadline includes
// the earliest such collection. LeaderGrace does not move it.
//
// # Limits
//
// SetLimits replaces the cluster's Limits record (a zero field is its
// default, limits.go): MaxJobs, and per job MaxJobTasks, MaxJobChunks,
// MaxJobGroups, MaxJobGroupBytes, MaxJobKVKeys and MaxKVValueBytes,
// MaxStateBytes on a size estimate of the whole state computed from
// content sizes, and JobTTL. A command that
// would pass a limit is answered CodeLimit (ErrLimitExceeded), whose
// message names the limit, and changes nothing. The fixed limits of
// limits.go remain ceilings that no record may raise.
//
// A dataset too large for one entry is proposed in DatasetPart entries
// cut by SplitChunks, which measures each part with this encoding.
//
// # Commands
//
// SetDataset installs the chunk list, already indexed by the leader, with
// chunksPerTask, the task timeout, failureMax and the strict flag. Task i
// covers chunks [i*chunksPerTask, (i+1)*chunksPerTask). The first dataset
// is honoured and starts pass 0; later ones are accepted and ignored, as in
// the original master.
//
// From Protocol4 a dataset records the file patterns its chunks were
// indexed from, as the caller gave them (SetDataset.Patterns, or
// DatasetCommit.Patterns for a dataset in parts): at most MaxPatterns, each
// of 1 to MaxPathLen bytes, MaxPatternBytes together. Stats and Dataset
// answer them, and they count in the size estimate. A later dataset is
// ignored whatever its patterns and leaves them, so that its caller can be
// told which patterns the job reads and that its own were not used. The
// patterns are an optional field at the end of the command, written only
// when there are some: below Protocol4 a command with them is refused as
// invalid on every replica alike, as replicas of earlier releases refuse
// the trailing bytes, and a leader leaves them out, so that a dataset set
// then, or given as a chunk list, records none (the patterns are unknown).
//
// DatasetPart and DatasetCommit set a dataset too large for one entry:
// parts 0, 1, ... append chunks to a staged upload, and the commit, which
// names the number of parts and chunks, turns it into the dataset. A staged
// upload that gets no part for UploadIdleTimeout is dropped by Tick.
//
// GetTask(pass) leases the first todo task: its epoch is incremented and
// it becomes pending until clock+timeout. The answer carries the task's
// pass and the lease's remaining length (Task.Pass, Task.Lease). It
// answers ErrPassBefore for an earlier pass, ErrAllTaskFailed when nothing
// is todo, pending or done, and ErrNoMoreAvailable when nothing is todo
// but some tasks are pending or done.
//
// From Protocol10 a GetTask is a batch: Count leases up to that many
// tasks in one entry, as that many GetTasks in a row would (the first in
// Result.Task, the rest in Result.More), stopping at the first that finds
// none; and MoreFinished finishes further tasks after Finished, each as
// a TaskFinished of it would, its outcome in Result.MoreFinish. A reader
// that prefetches reports a batch and leases the next in one entry, so
// that n tasks cost one entry. Both are bounded by MaxTasksPerGet.
//
// Epochs are per task. On the wire an epoch carries the cluster's era
// above its low 32 bits (see Eras); an epoch of another era names no lease
// of this cluster: TaskFinished and RenewLease answer it ErrStaleEpoch,
// TaskFailed ignores it. Below Protocol2 an epoch above math.MaxInt32 is
// refused as invalid, as before eras.
//
// A trainer that asks for a later pass is waiting for the current one to
// end. If a task of the current pass is todo (its lease expired, or it was
// reported failed, after the others had moved on), that trainer is given
// it, with Task.Pass naming the current pass; otherwise it gets
// ErrPassAfter. So a pass whose trainer died holding a task never stalls:
// the task comes back when its lease runs out, and whoever waits takes it.
// Exactly-once per pass holds as before, since the task is still one of
// the current pass's. Trainers keep their leases short and renew them
// while they read (the Go client renews in the background), so a dead
// trainer's task comes back within one lease.
//
// TaskFinished{ID, Epoch} moves a pending task to done. As in the original
// master, a late finish from an earlier lease of the same pass is accepted
// (epoch 0 means "any lease"), while one from an earlier pass, or for a task
// that is not pending, is ignored. An epoch the task was never leased under
// is refused with ErrStaleEpoch. With a strict dataset any epoch but the
// current lease's is refused with ErrStaleEpoch.
//
// TaskFailed{ID, Epoch} counts a failure of the current lease: the task
// goes back to the end of todo, or to failed once it has failed more than
// failureMax times. A stale epoch is ignored.
//
// RenewLease{ID, Epoch} moves the current lease's deadline to
// clock+timeout (or the end of a leader's grace, if later), and answers
// how long the lease lasts (Result.Lease); any other epoch gets
// ErrStaleEpoch.
//
// When no task is todo or pending and at least one is done, the pass
// counter increments and every task, done or failed, goes back to todo in
// the pass's order (see Seeded shuffles) with its failure count reset.
// When every task has failed the pass does not end, and GetTask answers
// ErrAllTaskFailed.
//
// # Seeded shuffles
//
// From Protocol8 a dataset has a seed and a shuffle flag
// (DatasetParams.Seed and Shuffle, set with SetDataset or DatasetCommit;
// the leader draws the seed when the caller gives none). A pass's order
// is the order todo is filled in when the pass starts (SetDataset and
// DatasetCommit for pass 0, the end of the previous pass, RestoreCursor):
// with Shuffle, the permutation of the task ids that shuffle.go derives
// from (Seed, pass) and the number of tasks, a Feistel network with cycle
// walking that needs no memory per task; without it, id order. A task
// that comes back (its lease ran out, it failed, its session ended) goes
// to the end of todo, as always. So the tasks of a pass are first
// dispatched in the pass's order, whatever the number of trainers and
// whatever faults happen. The seed and the flag are an optional field at
// the end of the command, after the patterns (an empty list of patterns
// when there are none), written only when one is set: below Protocol8 a
// command with them is refused as invalid on every replica alike, and a
// leader leaves them out, so that every dataset set then is in id order.
//
// Tick expires what is due at the clock, in every job: each pending lease
// counts as a failure (re-dispatch or fail, as the original's timeout
// check), an expired save-model lease is released, open allgather groups
// time out, finished groups and kept rounds past their retention are
// forgotten, and idle uploads are dropped; then jobs idle for JobTTL are
// deleted.
//
// LeaderGrace{Grace} is proposed by a new leader: every deadline before
// clock+Grace (task leases, the save-model leases, allgather groups, idle
// uploads, the retention of kept rounds, in every job) moves to
// clock+Grace, so that trainers are not punished for an
// interval without a leader. A task lease granted or renewed before
// clock+Grace ends no earlier either: pending leases then always end in the
// order they were granted, which keeps every dispatch O(1).
//
// RequestSaveModel{TrainerID, BlockDur} grants the save-model lease when
// nobody holds it, when the lease has expired, or when the holder asks
// again; the lease then ends at clock+BlockDur, and Result.Lease is
// BlockDur. Otherwise it answers Granted=false. At most one trainer holds it at any FSM time.
//
// Join{Group, Member, NumPeers, Data, Timeout, FailOnTimeout} adds a
// member to an allgather group, creating the group with the timeout
// (DefaultTimeout when zero) and its kind. Members keep their join order,
// so a member's index in the completed data is its rank. A re-join with
// the same member id replaces the data and the generation, and the earlier
// join's watch sees ErrReconnected. When NumPeers members have joined the
// group is complete; a member that joins again after completion gets the
// completed result: from Protocol2 its join is the completed join again,
// answered with that join's generation (before, a new generation, and the
// completed join's watch saw ErrReconnected). A join with another
// numPeers, or by a stranger after completion, gets ErrGroupMismatch.
//
// A group that has not filled up when its timeout passes becomes overdue,
// as in the original: watches report it (WatchResult.Overdue, the original's
// ErrAllGatherTimeoutExceeded callback), the group stays open, and it
// still completes when the last member joins (on Kubernetes some pods are
// scheduled late). An overdue group that gets no join for
// AbandonedGroupTimeout is forgotten, and its watches see ErrClosed. With
// FailOnTimeout the timeout is a hard deadline instead: the group is timed
// out for every member (ErrAllGatherTimeoutExceeded) and the next join
// starts it afresh.
//
// Final answers stay final. Every watch status but pending is final for
// its generation, and from Protocol2 a complete or timed-out answer does
// not change for the round's retention: the group's timeout or
// ResultRetention (five minutes), the longer, from the moment it became
// final. A complete group is kept that long with its data, or until every
// member has left it (each has read it, as Determined's callers leave),
// whichever comes first; a member that left keeps its answer meanwhile.
// A hard-deadline round that times out keeps no data: the group is
// forgotten at once, freeing its place and its data among the job's
// limits, and the round is kept, as each member's generation then
// (timedOutRound, estRound plus estRoundMember per member in the size
// estimate, bounded by MaxStateBytes), so that its watches answer
// ErrAllGatherTimeoutExceeded even after the next join starts the group
// afresh, and a member of it that had re-joined within it sees
// ErrReconnected. Once the retention ends, a watch of the round answers
// ErrClosed (or ErrReconnected for a member in a later round). Before
// Protocol2, complete and timed-out groups are forgotten one timeout after
// they finish, a timed-out group stays among the groups with its data
// until then or until the next join replaces it, whose watches then see
// ErrClosed, and a member that left a complete group sees ErrClosed; a
// timed-out group of Protocol1 that a join replaces from Protocol2 is kept
// as a round for what is left of its retention.
//
// Watch(job, group, member, gen) never judges a join from a state that predates
// it: generations are handed out in log order, so a replica whose counter
// is below gen (a follower behind, a new leader before its barrier)
// answers WatchPending, and a watch there waits, instead of answering
// ErrClosed for a member it has not seen join. A gen at or below the
// counter that is no join of this member to this group (another group's,
// or one that the cluster a backup came from handed out after the backup)
// answers ErrClosed, or ErrReconnected when the member joined since.
//
// Leave{Group, Member} removes a member: before completion its data leaves
// the group, after completion it is only marked gone (from Protocol2 its
// watch still answers the data). When the last member leaves, the group
// closes and watches see ErrClosed.
//
// RegisterNode and RemoveNode maintain nodeID -> {raftAddr, apiAddr}, so
// any replica can say where the leader's API is. From Protocol2 on an entry
// also holds the node's release and the highest level its build applies,
// written as optional trailing fields; below Protocol2 a RegisterNode that
// carries them is refused with CodeInvalid on every replica, as releases
// before protocol levels refuse its trailing bytes.
//
// # Register
//
// Each job has a register: keys, each with a value and a version, for a
// rendezvous backend such as torchrun's, which reads a state with a
// fencing token and replaces it only if the token is still current.
// KVCompareAndSet{Key, Version, Value} stores Value when the key's
// version is Version, 0 meaning that the key must not exist, and answers
// Swapped with the new version; otherwise it changes nothing and answers
// Ignored with the key's current value and version (not found, version 0,
// when absent). A version is a cluster-wide counter: it increases with
// every write, in any job, so it never repeats for a key, not even after
// the job is deleted and created again. A key is 1 to MaxKVKeyLen bytes of
// printable ASCII without spaces; a value over Limits.MaxKVValueBytes, a new
// key past Limits.MaxJobKVKeys and a write past MaxStateBytes are answered
// CodeLimit. FSM.KV reads a key; the API reads it at the leader after a
// read barrier, so reads and writes together are linearizable. The
// register is deleted with its job. Its keys do not keep a job from
// JobTTL, but every write counts as the job's activity.
//
// From Protocol5 the register has the writes of a c10d store (torch's
// Store), each one log entry, so that each is atomic and a retry of it is
// applied once:
//
//   - KVDelete{Key, Version} deletes the key, or, when Version is not 0,
//     only the value of that version; it answers Deleted (1 or 0) and the
//     key's version when it ran. KVDeletePrefix{Prefix} deletes every key
//     that starts with Prefix and answers how many. A prefix follows the
//     rule of keys. A register holds at most MaxJobKVKeysCeiling keys, so
//     one entry's work is bounded. Deletes create no job, and a delete
//     that deletes nothing is Ignored.
//   - KVAdd{Key, Delta} adds Delta to the integer the key holds in
//     decimal ASCII (0 when it does not exist, as c10d's add) and stores
//     the sum in decimal under a new version; it answers the sum. A value
//     that is not a decimal integer of 64 bits, or a sum past 64 bits, is
//     answered CodeInvalid and changes nothing.
//   - KVMultiSet{Pairs} stores every value under its key, each under a
//     new version in its order, or, past a limit, none. The keys are
//     distinct, and the values together are within MaxKVValueBytes, so
//     that the entry is no larger than a compare-and-set's.
//   - KVAppend{Key, Value} appends Value to the key's value, creating the
//     key, under a new version; it answers the new length. The value it
//     makes is within MaxKVValueBytes.
//   - KVCompareValue{Key, Expected, Desired} is c10d's compareSet: it
//     stores Desired when the key holds Expected, or does not exist and
//     Expected is empty, and answers the key afterwards (Swapped when it
//     stored). One that expects a value cannot create its job, as a
//     compare-and-set that expects a version.
//
// A delete frees the key's place among MaxJobKVKeys and its bytes in the
// size estimate. Versions stay monotonic across deletes: the counter is
// never rewound, so a key created again takes a version above every one
// it had, and a compare-and-set fenced by a version of the deleted value
// finds the key absent and swaps nothing: nothing deleted comes back.
// The store's reads (FSM.KVMulti, several keys at one point of the log,
// and FSM.KVCount, the keys under a prefix) are not log entries: the API
// answers them at the leader after a read barrier, as a KV read.
// FSM.KVWatchWait reads a key and registers a wait that every write or
// delete of that key, the deletion of its job and a restore wake (and
// nothing else): the long poll of the register's watch. The waits are
// not state.
//
// # Sessions
//
// From Protocol6 a client process may hold a session (session.go): an
// OpenSession entry opens it with a TTL (MinSessionTTL to MaxSessionTTL;
// at most MaxSessions at once) and answers its id, numbered from a
// cluster counter that starts each era at era<<EraShift. Keep-alives are
// not in the state: the leader keeps them in memory (internal/sessions)
// and ends a session that misses them for its TTL with ExpireSessions, so
// that the state holds no session deadline and no Tick is due for one.
//
// A command names its session in Header.Session (command version 4). A
// request under a session that does not exist (closed, expired, never
// opened) is refused with ErrSessionExpired before the de-duplication
// table is read: neither applied nor replayed. A request id's client is
// bound to the session of its first request (0 for none), and a later
// request of that client under another session is refused, with
// ErrSessionExpired when its own has ended, so that no retry of an ended
// session is applied under another name. A session of another owner is
// refused with ErrForeignClient.
//
// A GetTask under a session leases its task to the session: the task is
// held (queue "held", no deadline; Task.Session names the session), and
// neither Tick nor LeaderGrace moves it. TaskFinished and TaskFailed treat
// it as pending; RenewLease changes nothing and answers the session's
// TTL. A pass ends only when no task is todo, pending or held. A
// RequestSaveModel granted under a session, and the keys a register write
// stores with Header.Attach, belong to the session too, until the lease is
// granted again or the key written again.
//
// CloseSession ends a session at its client's request: its held tasks go
// back to the end of todo counting no failure, its keys are deleted, its
// save-model lease released. ExpireSessions, the leader's, ends each
// session it names the same way, except that each held task counts a
// failure, as a lease that ran out. Both release everything in the one
// entry. CheckpointSessions records the leader's keep-alives: each
// session's Seen becomes the clock. Every command applied under a session
// moves its Seen too. LeaderGrace keeps the FSM times of the last two
// graces (SessionGraces), from which a new leader tells the sessions that
// showed life under the leader before it (a fresh TTL) from those that did
// not (no second grace).
//
// # Cursors
//
// From Protocol7 a job has a data position (cursor.go). ReportProgress
// records, for each task its entries name that is leased under the
// entry's epoch, how many of its records were consumed (handed to a
// training loop); an entry of a lease no longer held is not recorded, and
// an entry naming a task that does not exist, or more records than its
// task has, or fewer than its restore skipped, refuses the command.
// CommitCursor records its own entries the same way, then takes the
// job's position as a cursor: the pass, a bitmap of the tasks finished in
// it (a task whose every record is consumed counts finished), and the
// consumed offset of every other task that has one, in task order; a job
// keeps MaxJobCursors of them, the oldest dropped, counted in the state's
// size estimate. A commit naming a trainer is refused with
// ErrCursorFenced while another trainer holds the save-model lease; one
// naming a generation, once the job's restore generation is past it.
//
// RestoreCursor puts the job back to a cursor in one entry: its pass; its
// finished tasks done; every other task to do in the order of the
// cursor's pass (id order, or its permutation when the dataset
// shuffles), its failures
// reset, a task with a consumed offset handed out with Task.Skip set to
// it. Every task's pass epoch becomes its epoch, so that a finish,
// failure, renewal or progress report of any lease granted before the
// restore changes nothing, as at a pass's start; the tasks sessions held
// are theirs no more. The job's restore generation, 1 before any
// restore, grows by one. A task's skip and reported offsets are dropped
// when it is finished and when the pass ends.
//
// # Idempotency
//
// A command with a non-zero RequestID is de-duplicated: a retry with the
// same id returns the first outcome (for GetTask, the same task and epoch)
// and changes nothing. An answer that grants something for a time is
// replayed only while it still holds, judged at the retry's FSM time (the
// later of the clock and the retry's stamp), since a retry may come after
// the grant has run out and passed to someone else:
//
//   - RequestSaveModel: Granted says whether the caller holds the lease
//     now, so two trainers never both hear "granted" at once, and Lease
//     what remains of it, so that the holder does not count on the
//     length the first answer gave.
//   - GetTask: the same task, with the lease's remaining length, while the
//     lease is current; once it has ended, ErrStaleEpoch (ask again). A
//     batch's retry gets the tasks of the batch still leased to it, in
//     the order they were leased (the first of them as Task), and
//     ErrStaleEpoch only when none is; its finishes' outcomes are
//     replayed as they were. Only a client's latest outcome keeps the
//     further leases: a retry of an earlier one, which no client sends,
//     gets its first lease alone.
//   - RenewLease with More: each renewal as it went, and, for one that
//     renewed, what remains of its lease, or ErrStaleEpoch once it has
//     ended.
//   - RenewLease: the lease's remaining length while the lease is
//     current; ErrStaleEpoch once it has ended.
//   - KVCompareAndSet: a swap is the first outcome, with the version it
//     stored. One that did not swap changed nothing, so its retry answers
//     the key as it is at the retry, which lies within the caller's call;
//     if the key now holds the version the command expected (its job was
//     deleted since), that answer would contradict "not swapped", and the
//     retry is refused with ErrInvalid instead. It never writes twice.
//     KVCompareValue is replayed so too, the contradiction being a key
//     that now holds the value it expected.
//   - KVDelete, KVDeletePrefix, KVAdd, KVMultiSet and KVAppend: the first
//     outcome, which the entry holds whole: the version and the number
//     the answer carries (a retried add answers the sum it made, not the
//     key's value at the retry). Snapshot version 8 keeps the number.
//
// Every other replay (TaskFinished, TaskFailed, Join's generation, Leave,
// SetDataset, node registry changes) is the first outcome, which time does
// not change. The table keeps the last DedupPerClient outcomes of each
// client, and forgets a client after DedupWindow (30 minutes) of FSM time
// without requests; every bound depends only on the log, so every replica
// forgets the same ids. A retry older than what its client's table still
// holds (at or below its floor, the highest sequence number it dropped) is
// refused with ErrInvalid rather than applied twice. Commands rejected as
// invalid are not remembered.
//
// From Protocol2 on the window is a promise: a client id used within
// DedupWindow is never forgotten, whatever other clients do, so a retry
// within the window is always answered with its first outcome. Two
// refusals keep it, both decided by the log alone and changing nothing:
//
//   - A client id the table does not hold, with a sequence number above
//     1, is refused with ErrUnknownClient: its client was forgotten after
//     the window (or skipped its first request), and its request may be
//     the late retry of one applied before. Sequence 0 or 1 starts a new
//     client. A client that meets this refusal on the first attempt of a
//     request, which no earlier attempt can have applied, sends it again
//     as sequence 1 of a new id; on a retry, the outcome is unknown.
//   - A new client id is refused with ErrTooManyClients (retry later)
//     while the table holds DedupMaxActiveClients (262,144) ids used
//     within the window of the command's time. Clients already held never
//     notice.
//
// From Protocol3 on a client id is bound to its owner: the API stamps each
// request id with a hash of the bearer token it came with
// (RequestID.Owner, in command version 3), and the table keeps the owner
// of a client's first request that carried one, also in the snapshot
// (version 6). A request of another owner under the id is refused with
// ErrForeignClient before anything is looked up or replayed: a token
// cannot read another token's answers, add requests to its client, nor
// move its floor. A cluster without tokens stamps no owner and binds
// nothing.
//
// This is the session model of the Raft dissertation (§6.3), a client id
// standing for a session that its first request opens. The only retry
// that can still be applied twice is one of sequence 1 that arrives after
// its client was forgotten, more than DedupWindow after it was first
// applied; the clients give up on a write well before (the Go and Python
// clients send no attempt of a write later than rpc.MaxWriteRetry, 15
// minutes, after its first).
// The table takes about 140 bytes per client plus 64 per outcome kept, at
// most about 300 MB at DedupMaxActiveClients clients of DedupPerClient
// outcomes each (BenchmarkDedupFullTable), and about 315 bytes per such
// client in a snapshot. A batch (Protocol10) adds a byte per outcome of
// its further finishes or renewals, and, in a client's latest outcome
// only (the one request a client may still retry), 16 bytes per further
// lease: at most about 600 bytes per client more. At Protocol1 the table holds at most
// DedupMaxClients clients, evicting the least recently used to take a new
// one, and a forgotten client's request is applied as new, as releases
// before Protocol2 did; the snapshot form of the table is the same at both
// levels.
//
// # Eras
//
// A backup restored into a new cluster carries the state of the cluster
// it came from, which may go on, or whose clients may hold tokens it
// handed out after the backup: register versions, generations, task epochs
// and job numbers. NextEra, which raftnode.RestoreDataDir applies to the backup's
// snapshot, starts the next era (state.era, at most MaxEra) at Protocol2:
// the uint64 counters continue from era<<EraShift (2^40) at least, and
// the epochs on the wire carry the era above 32 bits. The old cluster, of
// the era before, started its counters at (era-1)<<EraShift or 0, so it
// would have to hand out 2^40 values of one counter to reach the new
// era's; and an epoch of another era is told apart exactly. So the new
// cluster hands out none of the old cluster's tokens, and refuses each:
// no key holds an old version (a compare-and-set naming it is not
// swapped), an old epoch is stale, and a watch of an old generation
// answers ErrClosed or ErrReconnected. era.go states the bound.
//
// # Snapshots
//
// Snapshot copies the task arrays (32 bytes a task, no pointers) and the
// small tables and shares the immutable chunk lists; Snapshot.WriteTo
// streams the versioned encoding while ApplyEntry goes on: version 4 writes
// the cluster's part, then every job in name order, each with its
// register in key order; version 5, written from Protocol2, adds the
// protocol level and the era to the cluster's part, each registry entry's
// release, and each job's kept rounds that timed out after its register;
// version 6, from Protocol3, each de-duplication client's owner; version
// 7, from Protocol4, each dataset's patterns after its chunks (older
// versions restore with datasets of no patterns); version 8, from
// Protocol5, the number of each de-duplication entry of KVAdd, KVAppend,
// KVDelete and KVDeletePrefix; version 9, from Protocol6, each
// de-duplication client's session, the held queue of each job, and the
// sessions after the jobs; version 10, from Protocol7, each job's
// positions and cursors; version 11, from Protocol8, each dataset's
// shuffle flag and seed after its patterns (older versions restore with
// datasets in id order and no seed).
// Version 3, written before the register existed,
// restores with empty registers; versions 1 and 2, written before jobs
// existed, restore as the default job. Restore decodes
// into a fresh state, checks in every job that every task is in exactly
// one queue and that the limits and the other invariants Apply keeps hold,
// and swaps it in.
package fsm
