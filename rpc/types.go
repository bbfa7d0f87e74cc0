package rpc

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
)

// HeaderRequestID carries "<client uuid>/<sequence>" on every write.
const HeaderRequestID = "X-Raftmaster-Request-Id"

// The de-duplication window. The cluster remembers each client id's recent
// outcomes until DedupWindow of cluster time has passed without a request
// from it, and answers a retry within the window with the first outcome;
// no flood of other clients makes it forget one sooner. A client sends no
// attempt of a write later than MaxWriteRetry after its first, half the
// window, so that every retry lands well inside it.
const (
	DedupWindow   = 30 * time.Minute
	MaxWriteRetry = DedupWindow / 2
)

// HeaderNode is set on every answer to the id of the node that answered,
// so that a client knows which node it talks to under which address.
const HeaderNode = "X-Raftmaster-Node"

// HeaderUnreachable lists, comma separated, the API addresses ("host:port")
// that refused the client's connections a moment ago. A node that would
// redirect to one of them (it still believes that node leads, as followers
// do until they notice a dead leader) waits for another leader instead.
const HeaderUnreachable = "X-Raftmaster-Unreachable"

// API paths.
const (
	PathDataset        = "/v1/dataset"
	PathWeights        = "/v1/weights"
	PathTaskGet        = "/v1/task/get"
	PathTaskFinished   = "/v1/task/finished"
	PathTaskFailed     = "/v1/task/failed"
	PathTaskRenew      = "/v1/task/renew"
	PathSaveModel      = "/v1/savemodel"
	PathAllgatherJoin  = "/v1/allgather/join"
	PathAllgatherLeave = "/v1/allgather/leave"
	PathAllgatherWatch = "/v1/allgather/watch"
	PathStatus         = "/v1/status"
	PathCluster        = "/v1/cluster"
	// PathClusterAddMember and PathClusterRemoveMember change the
	// membership. The first path says "join", the name it had before
	// membership was called membership: servers of every release serve it.
	PathClusterAddMember    = "/v1/cluster/join"
	PathClusterRemoveMember = "/v1/cluster/remove"
	PathClusterTransfer     = "/v1/cluster/transfer"
	PathDebugState          = "/v1/debug/state"
	PathHealthz             = "/healthz"
	PathReadyz              = "/readyz"
	PathJobs                = "/v1/jobs"
	PathJob                 = "/v1/jobs/{job}"
	PathJobCreate           = "/v1/jobs/{job}/create"
	PathJobDelete           = "/v1/jobs/{job}/delete"
	PathBackup              = "/v1/backup"
	PathKVGet               = "/v1/kv/get"
	PathKVCompareAndSet     = "/v1/kv/cas"
	PathKVDelete            = "/v1/kv/delete"
	PathKVDeletePrefix      = "/v1/kv/delete-prefix"
	PathKVAdd               = "/v1/kv/add"
	PathKVMultiSet          = "/v1/kv/multi-set"
	PathKVAppend            = "/v1/kv/append"
	PathKVCompareValue      = "/v1/kv/compare-set"
	PathKVMultiGet          = "/v1/kv/multi-get"
	PathKVNumKeys           = "/v1/kv/num-keys"
	PathKVWatch             = "/v1/kv/watch"
	PathLimits              = "/v1/limits"
	PathLimitsSet           = "/v1/limits/set"
)

// DefaultJob is the job of the routes outside /v1/jobs/{job}/: every
// cluster has it, and clients that name no job use it.
const DefaultJob = "default"

// JobParam is the path parameter that names a job.
const JobParam = "job"

// JobPath returns where a job-scoped endpoint (Endpoint.Job) of job is
// served: JobPath("a", PathTaskGet) is "/v1/jobs/a/task/get". The path
// without the prefix serves the default job. With job "{job}" it returns
// the route pattern.
func JobPath(job, path string) string {
	return "/v1/jobs/" + job + strings.TrimPrefix(path, "/v1")
}

// JobRoute fills the job into one of the job routes (PathJob,
// PathJobCreate, PathJobDelete).
func JobRoute(path, job string) string {
	return strings.Replace(path, "{"+JobParam+"}", job, 1)
}

// Duration is a time.Duration that is written in JSON as a Go duration
// string such as "1m30s".
type Duration time.Duration

// String is d as a Go duration, such as "1m30s".
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes d as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"30s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Chunk is one RecordIO chunk: file, byte offset of its header and record
// count.
type Chunk struct {
	Path    string `json:"path"`
	Offset  int64  `json:"offset"`
	Records uint32 `json:"records"`
}

// SetDatasetRequest sets the dataset. Either Globs, which the leader
// expands and indexes, or Chunks, already indexed by the client (for
// masters that cannot see the trainers' data volume). Zero settings take
// the server's defaults.
type SetDatasetRequest struct {
	Globs         []string `json:"globs,omitempty"`
	Chunks        []Chunk  `json:"chunks,omitempty"`
	ChunksPerTask int      `json:"chunks_per_task,omitempty"`
	TaskTimeout   Duration `json:"task_timeout,omitempty"`
	FailureMax    *int     `json:"failure_max,omitempty"`
	Strict        bool     `json:"strict,omitempty"`
	// Shuffle, true when absent, dispatches each pass's tasks in a
	// permutation of (seed, pass), the same whatever the number of
	// trainers and whatever faults happen; false keeps id order.
	Shuffle *bool `json:"shuffle,omitempty"`
	// Seed seeds the permutation and the trainers' shuffles within a
	// task; when absent the leader draws one, which the dataset records
	// (Job.Params). A cluster not yet upgraded to protocol level 8 keeps
	// id order and records no seed: a request with a seed, or with
	// shuffle true, is then answered unavailable; one with neither is
	// served in id order.
	Seed *uint64 `json:"seed,omitempty"`
	// Sources make the dataset a weighted mixture (protocol level 9):
	// each source is a set of globs with a weight, in place of Globs and
	// Chunks, which must then be absent.
	Sources []SourceSpec `json:"sources,omitempty"`
}

// SourceSpec is one source of a mixture: a name, a weight and its globs.
// Weights are relative: 0.5, 0.3 and 0.2 mix as 5, 3 and 2 do. A weight is
// at most 4000, with six decimals; a source of weight 0 is not read until
// its weight changes.
type SourceSpec struct {
	Name   string   `json:"name"`
	Weight float64  `json:"weight"`
	Globs  []string `json:"globs"`
}

// SetWeightsRequest changes a mixture's weights (PathWeights): Weights,
// by source name, take effect from the next task (the sources not named
// keep theirs); with ReplaceSchedule, Schedule replaces the steps of
// weights to come (none clears them). At least one of the two is given.
type SetWeightsRequest struct {
	Weights         map[string]float64 `json:"weights,omitempty"`
	ReplaceSchedule bool               `json:"replace_schedule,omitempty"`
	Schedule        []WeightStep       `json:"schedule,omitempty"`
}

// WeightStep is a step of a weight schedule: once the job's records
// consumed (the records of its finished tasks, in every pass) reach
// AtRecords, the sources named take these weights. Steps are in
// increasing AtRecords.
type WeightStep struct {
	AtRecords int64              `json:"at_records"`
	Weights   map[string]float64 `json:"weights"`
}

// SetWeightsResponse describes the mixture's sources after the change.
type SetWeightsResponse struct {
	Sources  []SourceStatus `json:"sources"`
	Schedule []WeightStep   `json:"schedule,omitempty"`
}

// SourceStatus describes one source of a mixture.
type SourceStatus struct {
	Name   string  `json:"name"`
	Weight float64 `json:"weight"`
	// Pass is the source's own pass: each source cycles through its
	// tasks at its own pace, and the job's pass is the least of them.
	Pass    int `json:"pass"`
	Tasks   int `json:"tasks"`
	Todo    int `json:"todo"`
	Pending int `json:"pending"`
	Done    int `json:"done"`
	Failed  int `json:"failed"`
	// Records and Finished count the records and the tasks of the
	// source's finished tasks, in every pass: exact, each finish once.
	Records  int64    `json:"records"`
	Finished int64    `json:"finished"`
	Globs    []string `json:"globs,omitempty"`
}

// SetDatasetResponse reports the dataset. Ignored is true when a dataset
// was already set: the first one is honoured, as in the original master.
// A request retried with its request id gets its first outcome: one that
// installed the dataset is not ignored, Files then counting the files
// that hold its chunks.
type SetDatasetResponse struct {
	Ignored bool `json:"ignored"`
	Files   int  `json:"files"`
	Chunks  int  `json:"chunks"`
	Tasks   int  `json:"tasks"`
	// CurrentPatterns are the globs the job's dataset was set with, as
	// its first request gave them: this request's when it set the
	// dataset, when Ignored those of the dataset the job reads, which a
	// caller compares with its own; a mixture's are its sources' globs,
	// one source after the other. Absent when they are unknown: the
	// dataset was given as chunks, or set before the cluster reached
	// protocol level 4 (a release before it, or a rolling upgrade not
	// yet finished).
	CurrentPatterns []string `json:"current_patterns,omitempty"`
	// Shuffle and Seed are the order of the job's dataset, as
	// CurrentPatterns are its patterns: whether each pass is shuffled,
	// and the seed (absent when none was recorded: a dataset set before
	// the cluster reached protocol level 8).
	Shuffle bool   `json:"shuffle"`
	Seed    uint64 `json:"seed,omitempty"`
}

// GetTaskRequest leases the next task of Pass.
type GetTaskRequest struct {
	Pass int `json:"pass"`
	// JobNumber, when set, is the job_number of an earlier answer: the
	// job the caller reads. When that job has been deleted, and maybe
	// created again under its name, the answer is unknown_job and nothing
	// is leased. A cluster not yet upgraded to protocol level 2 leases as
	// if it were absent.
	JobNumber uint64 `json:"job_number,omitempty"`
	// Finished, when set, is the task the caller finished (protocol
	// level 9): one log entry finishes it, as PathTaskFinished would, and
	// leases the next task, so that reading costs one write per task.
	// The answer's Finish says how the finish went, on an error answer
	// too (the finish counted even when no task was left to lease). A
	// cluster below level 9 answers unavailable and changes nothing.
	Finished *TaskMeta `json:"finished,omitempty"`
	// Count, when above 1, leases up to that many tasks in one log entry
	// (protocol level 10), for a reader that prefetches: the first is the
	// answer's Task, the rest its More, fewer when fewer are left. At
	// most 32.
	Count int `json:"count,omitempty"`
	// MoreFinished are further tasks the caller finished, with Finished
	// set (protocol level 10): each is finished after it, in order, by
	// the same entry, and the answer's MoreFinish says how each went. A
	// reader that leased a batch reports the whole batch with its next
	// request. At most 31 (32 finishes with Finished).
	MoreFinished []TaskMeta `json:"more_finished,omitempty"`
}

// FinishOutcome is how the finish a GetTaskRequest carried went: Code is
// empty when it counted (Ignored when it was a finish of a task finished
// already, or of an earlier lease of another pass), else the error code
// PathTaskFinished would have answered (stale_epoch, unknown_task,
// no_dataset), and the finish changed nothing.
type FinishOutcome struct {
	Code    string `json:"code,omitempty"`
	Ignored bool   `json:"ignored,omitempty"`
}

// TaskMeta identifies one dispatch of a task: its id and the epoch of the
// lease. Each dispatch increments the epoch. A cluster restored from a
// backup carries its era (how many restores led to it) above the low 32
// bits, so its epochs exceed 2^32 and an epoch of the cluster the backup
// came from is stale there.
type TaskMeta struct {
	ID    int `json:"id"`
	Epoch int `json:"epoch"`
}

// Task is a leased task.
type Task struct {
	Meta   TaskMeta `json:"meta"`
	Chunks []Chunk  `json:"chunks"`
	// Pass is the pass the task belongs to. It is the pass asked for, or
	// the one before when the caller waits for it to end and a task of it
	// came back (its trainer died or failed it).
	Pass int `json:"pass"`
	// Lease is how long the lease lasts from now; renew it (PathTaskRenew)
	// well before it runs out.
	Lease Duration `json:"lease"`
	// Session, when set, is the session that holds the task (the one the
	// request was made under): the task needs no renewal, and goes back
	// to the queue when the session ends.
	Session uint64 `json:"session,omitempty"`
	// Skip, when set, is how many of the task's first records a restored
	// cursor counts as trained already (protocol level 7): the reader
	// delivers the records after them, and reports its consumed offsets
	// (TaskProgress.Consumed) counting them.
	Skip int64 `json:"skip,omitempty"`
	// Seed is the dataset's seed (protocol level 8; absent when none was
	// recorded). A reader that shuffles the records of a task seeds its
	// shuffle with it, the pass and the task's id, so that every reader
	// of the task, and a reader restored from a cursor, shuffles it
	// alike.
	Seed uint64 `json:"seed,omitempty"`
	// Source is the name of the mixture source the task belongs to;
	// absent for a dataset of one source.
	Source string `json:"source,omitempty"`
}

// GetTaskResponse carries the leased task. AppliedAt, here and in the other
// write responses, is the FSM time at which the command took effect (RFC
// 3339 with nanoseconds); a retried request gets the first answer's time.
// FSM time is the cluster's own clock (see package fsm): compare it with
// other FSM times, not with a wall clock.
type GetTaskResponse struct {
	Task      Task      `json:"task"`
	AppliedAt time.Time `json:"applied_at"`
	// JobNumber is the number the job was given when it was created. A
	// job deleted and created again under its name gets another, so a
	// reader that remembers it knows when the job it read is gone.
	// Absent from servers that predate it.
	JobNumber uint64 `json:"job_number,omitempty"`
	// Finish says how the finish the request carried went; absent when it
	// carried none.
	Finish *FinishOutcome `json:"finish,omitempty"`
	// More are the tasks a request of Count above 1 leased after Task, in
	// the order they were leased.
	More []Task `json:"more,omitempty"`
	// MoreFinish says how each of the request's MoreFinished went, in
	// its order.
	MoreFinish []FinishOutcome `json:"more_finish,omitempty"`
	// Replayed marks the answer to a retry of a request already applied:
	// it carries the tasks of the first answer still leased to the
	// caller, which for a batch may be fewer than it leased.
	Replayed bool `json:"replayed,omitempty"`
}

// TaskRequest reports on a task: finished, failed or renew.
type TaskRequest struct {
	Meta TaskMeta `json:"meta"`
	// More, in a renewal only, are further leases to renew in the same
	// log entry (protocol level 10), for a caller that holds a batch
	// without a session: the answer's Renewed says how each went, Meta's
	// first. At most 31 (32 leases with Meta).
	More []TaskMeta `json:"more,omitempty"`
}

// RenewOutcome is how one renewal of a batch went: Code is empty when it
// renewed, with the lease's Lease, else the error a renewal of it alone
// would have got (stale_epoch, unknown_task), which changed nothing.
type RenewOutcome struct {
	Code  string   `json:"code,omitempty"`
	Lease Duration `json:"lease,omitempty"`
}

// TaskResponse says whether the report had no effect (a stale or late
// report, which the original master also accepted silently).
type TaskResponse struct {
	Ignored   bool      `json:"ignored"`
	AppliedAt time.Time `json:"applied_at"`
	// Lease, in the answer to a renewal, is how long the renewed lease
	// lasts from the answer: renew again well before it runs out. The
	// answer to a retried renewal says what remains of the lease at the
	// retry, which may be less than from AppliedAt, the first time.
	Lease Duration `json:"lease,omitempty"`
	// Renewed, in the answer to a renewal with More, says how each
	// renewal went, the request's Meta first; a retried request's says
	// what remains of each lease still held.
	Renewed []RenewOutcome `json:"renewed,omitempty"`
}

// SaveModelRequest asks for the save-model lease.
type SaveModelRequest struct {
	TrainerID string   `json:"trainer_id"`
	BlockDur  Duration `json:"block_dur"`
}

// SaveModelResponse says whether the lease was granted.
type SaveModelResponse struct {
	Granted   bool      `json:"granted"`
	AppliedAt time.Time `json:"applied_at"`
	// Replayed marks the answer to a retry of a request already applied
	// (at AppliedAt): Granted then says whether the caller holds the lease
	// now, not whether the first request got it.
	Replayed bool `json:"replayed,omitempty"`
	// Lease, while Granted, is how long the caller holds the lease from
	// the answer: block_dur, or, for a replayed answer, what remains of
	// the lease at the retry. Absent when not granted, and from servers
	// that predate it.
	Lease Duration `json:"lease,omitempty"`
}

// JoinRequest adds a member to an allgather group. Data is any JSON value.
type JoinRequest struct {
	Group    string          `json:"group"`
	Member   uuid.UUID       `json:"member"`
	NumPeers int             `json:"num_peers"`
	Data     json.RawMessage `json:"data"`
	// Timeout is when the members are told that the group is late
	// (ErrAllGatherTimeoutExceeded); the group stays open unless
	// FailOnTimeout makes it a hard deadline that fails the group. Only
	// the join that creates the group sets either.
	Timeout       Duration `json:"timeout,omitempty"`
	FailOnTimeout bool     `json:"fail_on_timeout,omitempty"`
}

// JoinResponse identifies the join; watches name its generation. From
// protocol level 2, a re-join after the group completed answers the
// generation of the member's completed join.
type JoinResponse struct {
	Generation uint64 `json:"generation"`
}

// LeaveRequest removes a member from an allgather group.
type LeaveRequest struct {
	Group  string    `json:"group"`
	Member uuid.UUID `json:"member"`
}

// Watch query parameters of PathAllgatherWatch (GET).
const (
	WatchParamGroup      = "group"
	WatchParamMember     = "member"
	WatchParamGeneration = "generation"
	WatchParamWait       = "wait" // a Go duration, at most MaxWatchWait
	// WatchParamSeenOverdue ("true") tells the server the caller already
	// knows the group is overdue, so only a final outcome ends the wait.
	WatchParamSeenOverdue = "seen_overdue"
)

// WatchResponse is the answer to a watch: Status "pending" when the wait
// ran out or the group became overdue (poll again) or "complete" with every
// member's data in join order and the caller's rank. Overdue is set on a
// pending answer once the group has passed its timeout without filling up:
// tell the trainer (the original's timeout callback) and poll again with
// seen_overdue. The final failures (closed, reconnected, timed out) are
// error responses with their codes. From protocol level 2 a final answer
// does not change: a complete or timed-out one stays for the group's
// timeout or five minutes, the longer, after the group finished (a
// complete group goes earlier once every member has left it); after that
// a watch answers closed.
type WatchResponse struct {
	Status  string            `json:"status"`
	Data    []json.RawMessage `json:"data,omitempty"`
	Rank    int               `json:"rank"`
	Overdue bool              `json:"overdue,omitempty"`
}

// Watch statuses.
const (
	WatchPending  = "pending"
	WatchComplete = "complete"
)

// NodeRef names a node and where its API listens.
type NodeRef struct {
	ID      string `json:"id"`
	APIAddr string `json:"api_addr,omitempty"`
}

// StatusResponse describes the answering node and the state summary.
type StatusResponse struct {
	// NodeID is the node's Raft server id: its name, then "~" and its
	// incarnation, which changes when the node comes back with an empty
	// data directory. A node whose data directory was made by a release
	// before incarnations keeps its name as its id.
	NodeID string `json:"node_id"`
	// Name is the node's name (serve --node-id), the same in every
	// incarnation.
	Name         string  `json:"name,omitempty"`
	RaftAddr     string  `json:"raft_addr"`
	APIAddr      string  `json:"api_addr"`
	State        string  `json:"state"`
	Leader       NodeRef `json:"leader"`
	Term         uint64  `json:"term"`
	LastIndex    uint64  `json:"last_index"`
	CommitIndex  uint64  `json:"commit_index"`
	AppliedIndex uint64  `json:"applied_index"`
	LastContact  string  `json:"last_contact"`
	Ready        bool    `json:"ready"`
	// Voter reports whether the node is a voter of its latest
	// configuration; a new incarnation votes only once it is.
	Voter bool `json:"voter"`
	// Registered reports whether the node is a voter whose entry in the
	// node registry, as it has applied it, holds its addresses and, from
	// protocol level 2, its release: nothing of its registration is left
	// to propose.
	Registered bool `json:"registered"`
	// Configuration is the node's latest Raft configuration, as it knows
	// it (empty on the etcd backend).
	Configuration []ConfigServer `json:"configuration,omitempty"`
	// Servers is how many servers the node's Raft configuration lists: 0
	// while it belongs to no cluster yet (a node with an empty data
	// directory that has neither bootstrapped nor been added), and on the
	// etcd backend.
	Servers int   `json:"servers"`
	FSM     Stats `json:"fsm"`
	// Version is the build of the answering node.
	Version string `json:"version"`
	// Protocol is the highest protocol level the answering node's build
	// applies; absent (0) from releases before protocol levels, which
	// apply level 1.
	Protocol uint64 `json:"protocol"`
	// ClusterProtocol is the protocol level of the state as this node has
	// applied it: a leader raises it once every server's Protocol reaches
	// the next level.
	ClusterProtocol uint64 `json:"cluster_protocol"`
}

// ConfigServer is a server of a Raft configuration.
type ConfigServer struct {
	// ID is the server id (name~incarnation).
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	Voter    bool   `json:"voter"`
}

// Member is one server of the Raft configuration, with what its own status
// endpoint reported (Error says why it could not be reached).
type Member struct {
	// ID is the server id (name~incarnation); Name the node's name.
	ID       string `json:"id"`
	Name     string `json:"name,omitempty"`
	RaftAddr string `json:"raft_addr"`
	APIAddr  string `json:"api_addr"`
	// Suffrage is the member's role as Raft names it: Voter or Nonvoter
	// (Master, for a master of the etcd backend).
	Suffrage     string `json:"suffrage"`
	Leader       bool   `json:"leader"`
	State        string `json:"state"`
	Term         uint64 `json:"term"`
	LastIndex    uint64 `json:"last_index"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	LastContact  string `json:"last_contact"`
	// Version is the member's release and Protocol the highest protocol
	// level its build applies: as it reports them itself, or else as the
	// node registry recorded them (from protocol level 2 on). Absent when
	// neither says.
	Version  string `json:"version,omitempty"`
	Protocol uint64 `json:"protocol,omitempty"`
	Error    string `json:"error,omitempty"`
}

// ClusterResponse lists the members and summarises the state.
type ClusterResponse struct {
	Leader  NodeRef  `json:"leader"`
	Members []Member `json:"members"`
	FSM     Stats    `json:"fsm"`
	Groups  []Group  `json:"groups"`
	// Jobs summarises every job, sorted by name.
	Jobs []Job `json:"jobs"`
	// ClusterProtocol is the cluster's protocol level, as the answering
	// node has applied it.
	ClusterProtocol uint64 `json:"cluster_protocol"`
}

// AddMemberRequest adds a member (or refreshes its registry entry when it
// is one already): PathClusterAddMember. A node of an earlier release, or
// one whose data directory an earlier release made, becomes a voter at
// once; a new incarnation of a node becomes a non-voter, promoted to voter
// once it has caught up.
type AddMemberRequest struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	APIAddr  string `json:"api_addr"`
	// Protocol is the highest protocol level the new member's build
	// applies; absent (0) from releases before protocol levels. A cluster
	// refuses a node below its own level.
	Protocol uint64 `json:"protocol,omitempty"`
	// Version is the new member's release, which the node registry
	// records from protocol level 2 on; absent from releases before
	// protocol levels.
	Version string `json:"version,omitempty"`
	// LastIndex is the last index of the new member's log: a new
	// incarnation, added as a non-voter, is promoted once it is close to
	// the leader's commit index.
	LastIndex uint64 `json:"last_index,omitempty"`
}

// RemoveMemberRequest removes a member from the cluster:
// PathClusterRemoveMember.
type RemoveMemberRequest struct {
	ID string `json:"id"`
}

// The names the membership's requests and paths had before, kept for Go
// programs that use them.
type (
	// Deprecated: use AddMemberRequest.
	AddVoterRequest = AddMemberRequest
	// Deprecated: use RemoveMemberRequest.
	RemoveRequest = RemoveMemberRequest
)

// The paths' earlier Go names.
const (
	// Deprecated: use PathClusterAddMember.
	PathClusterAddVoter = PathClusterAddMember
	// Deprecated: use PathClusterRemoveMember.
	PathClusterRemove = PathClusterRemoveMember
)

// TransferRequest moves leadership, to ID when set, else to the most
// up-to-date follower.
type TransferRequest struct {
	ID string `json:"id,omitempty"`
}

// DebugStateResponse is one replica's applied index and a hash of its FSM
// snapshot; equal indexes must give equal hashes.
type DebugStateResponse struct {
	NodeID       string `json:"node_id"`
	AppliedIndex uint64 `json:"applied_index"`
	Hash         string `json:"hash"`
}

// LeaveResponse says whether the leave had no effect: the member was not
// in the group, or had already left.
type LeaveResponse struct {
	Ignored bool `json:"ignored"`
}

// OKResponse is the body of /healthz, /readyz and the cluster changes.
type OKResponse struct {
	Status string `json:"status"`
}

// DatasetParams are a dataset's task-queue settings.
type DatasetParams struct {
	ChunksPerTask int      `json:"chunks_per_task"`
	TaskTimeout   Duration `json:"task_timeout"`
	FailureMax    int      `json:"failure_max"`
	Strict        bool     `json:"strict"`
	// Shuffle is true when each pass's tasks are first dispatched in the
	// permutation of (Seed, pass), false in id order.
	Shuffle bool `json:"shuffle"`
	// Seed is the dataset's seed; absent when none was recorded (a
	// dataset set before the cluster reached protocol level 8).
	Seed uint64 `json:"seed,omitempty"`
}

// Stats summarises the replicated state.
type Stats struct {
	// Clock is the FSM time of the last applied command.
	Clock      time.Time     `json:"clock"`
	HasDataset bool          `json:"has_dataset"`
	Pass       int           `json:"pass"`
	Chunks     int           `json:"chunks"`
	Tasks      int           `json:"tasks"`
	Todo       int           `json:"todo"`
	Pending    int           `json:"pending"`
	Held       int           `json:"held,omitempty"` // the pending tasks held by sessions, which need no renewal
	Done       int           `json:"done"`
	Failed     int           `json:"failed"`
	Params     DatasetParams `json:"params"`
	Uploads    int           `json:"uploads"`
	// SaveHolder holds the save-model lease until SaveDeadline.
	SaveHolder   string    `json:"save_holder,omitempty"`
	SaveDeadline time.Time `json:"save_deadline,omitzero"`
	Groups       int       `json:"groups"`
	Nodes        int       `json:"nodes"`
	DedupClients int       `json:"dedup_clients"`
	AppliedIndex uint64    `json:"applied_index"`
	// Jobs is how many jobs exist; the rest of the summary is the
	// default job's.
	Jobs int `json:"jobs"`
	// StateBytes is the estimated size of the whole state, which
	// Limits.MaxStateBytes bounds.
	StateBytes int64 `json:"state_bytes"`
}

// Job summarises one job.
type Job struct {
	Name string `json:"name"`
	// CreatedAt and LastActivity are the FSM times of the job's creation
	// and of the last command addressed to it.
	CreatedAt    time.Time `json:"created_at"`
	LastActivity time.Time `json:"last_activity"`
	HasDataset   bool      `json:"has_dataset"`
	Pass         int       `json:"pass"`
	Tasks        int       `json:"tasks"`
	Todo         int       `json:"todo"`
	Pending      int       `json:"pending"`
	Held         int       `json:"held,omitempty"` // the pending tasks held by sessions, which need no renewal
	Done         int       `json:"done"`
	Failed       int       `json:"failed"`
	Uploads      int       `json:"uploads"`
	Groups       int       `json:"groups"`
	// KVKeys counts the keys of the job's register.
	KVKeys int `json:"kv_keys"`
	// SaveHolder holds the job's save-model lease until SaveDeadline.
	SaveHolder   string    `json:"save_holder,omitempty"`
	SaveDeadline time.Time `json:"save_deadline,omitzero"`
	// Bytes is the job's share of the state's size estimate.
	Bytes int64 `json:"bytes"`
	// CollectAt is when the job TTL deletes the job unless it is used
	// first; absent while the TTL is off or the job is in use.
	CollectAt time.Time `json:"collect_at,omitzero"`
	// Files and Chunks count the dataset's files and chunks.
	Files  int `json:"files"`
	Chunks int `json:"chunks"`
	// Patterns are the globs the dataset was set with, as given; absent
	// when unknown (a dataset given as chunks, or set before the cluster
	// reached protocol level 4).
	Patterns []string `json:"patterns,omitempty"`
	// Params are the dataset's task-queue settings; absent without a
	// dataset.
	Params *DatasetParams `json:"params,omitempty"`
	// Paths are the dataset's files in the order of their first chunk, in
	// the answer about one job only (PathJob): the first MaxJobPaths of
	// them, Files counting them all.
	Paths []string `json:"paths,omitempty"`
	// Sources describe a mixture's sources, in order, in the answer about
	// one job only; Schedule holds the weight steps not yet reached and
	// Records the records of every finished task.
	Sources  []SourceStatus `json:"sources,omitempty"`
	Schedule []WeightStep   `json:"schedule,omitempty"`
	Records  int64          `json:"records,omitempty"`
}

// MaxJobPaths bounds the file paths of a job's dataset that PathJob
// answers with.
const MaxJobPaths = 1000

// Limits are the limits in effect, the same on every replica: part of the
// replicated state, which a new cluster's first leader sets from its serve
// flags (--max-jobs, ...) and PathLimitsSet changes. Each limit's JSON
// name is its flag's (max_kv_value_bytes for --max-kv-value-bytes). The
// two limits that had other names before are also written under them, for
// clients of earlier releases, and read under them from servers of
// earlier releases.
type Limits struct {
	MaxJobs      int `json:"max_jobs"`
	MaxJobTasks  int `json:"max_job_tasks"`
	MaxJobChunks int `json:"max_job_chunks"`
	MaxJobGroups int `json:"max_job_groups"`
	// MaxJobGroupBytes bounds the allgather data of one job's groups
	// together. Also written as max_job_group_data, its earlier name.
	MaxJobGroupBytes int64 `json:"max_job_group_bytes"`
	MaxStateBytes    int64 `json:"max_state_bytes"`
	// JobTTL is how long an idle job lives; 0 when collection is off.
	JobTTL Duration `json:"job_ttl"`
	// MaxJobKVKeys bounds the keys of a job's register.
	MaxJobKVKeys int `json:"max_job_kv_keys"`
	// MaxKVValueBytes bounds the bytes of one register value. Also
	// written as max_kv_value, its earlier name.
	MaxKVValueBytes int64 `json:"max_kv_value_bytes"`
}

// LimitsRequest changes the cluster's limits (PathLimitsSet): only the
// fields given change, the others keep their values. 0 sets a limit to
// its default (job_ttl 0: collection off); a value below 0 or above its
// ceiling is refused, and nothing changes. The server also takes the
// earlier names of two limits, max_job_group_data and max_kv_value, and
// the Go client sends those, which servers of every release read.
type LimitsRequest struct {
	MaxJobs      *int `json:"max_jobs,omitempty"`
	MaxJobTasks  *int `json:"max_job_tasks,omitempty"`
	MaxJobChunks *int `json:"max_job_chunks,omitempty"`
	MaxJobGroups *int `json:"max_job_groups,omitempty"`
	// MaxJobGroupBytes is also read as max_job_group_data, its earlier
	// name.
	MaxJobGroupBytes *int64    `json:"max_job_group_bytes,omitempty"`
	MaxStateBytes    *int64    `json:"max_state_bytes,omitempty"`
	JobTTL           *Duration `json:"job_ttl,omitempty"`
	MaxJobKVKeys     *int      `json:"max_job_kv_keys,omitempty"`
	// MaxKVValueBytes is also read as max_kv_value, its earlier name.
	MaxKVValueBytes *int64 `json:"max_kv_value_bytes,omitempty"`
}

// JobsResponse lists every job, sorted by name, with the limits.
type JobsResponse struct {
	Jobs       []Job  `json:"jobs"`
	Limits     Limits `json:"limits"`
	StateBytes int64  `json:"state_bytes"`
}

// JobRequest is the body of a job create or delete: empty, as the job is
// in the path.
type JobRequest struct{}

// JobResponse answers a job create or delete.
type JobResponse struct {
	// Ignored reports a create of a job that exists already.
	Ignored bool `json:"ignored,omitempty"`
}

// Group describes an allgather group; Members are in join order.
type Group struct {
	ID       string   `json:"id"`
	NumPeers int      `json:"num_peers"`
	Status   string   `json:"status"` // open, complete or timed_out (a hard deadline before protocol level 2)
	Timeout  Duration `json:"timeout"`
	// Deadline is, while open, the timeout (or, once overdue, when an
	// abandoned group is dropped); afterwards, the end of its retention.
	Deadline      time.Time     `json:"deadline"`
	FailOnTimeout bool          `json:"fail_on_timeout,omitempty"`
	Overdue       bool          `json:"overdue,omitempty"`
	Members       []GroupMember `json:"members"`
}

// GroupMember is one member of an allgather group.
type GroupMember struct {
	ID         uuid.UUID `json:"id"`
	Generation uint64    `json:"generation"`
	DataLen    int       `json:"data_len"`
	Left       bool      `json:"left,omitempty"`
}

// The media types of an endpoint with a Stream, which the request's Accept
// header chooses between.
const (
	ContentTypeJSON   = "application/json"
	ContentTypeStream = "application/octet-stream"
)

// The header fields of a streamed backup (PathBackup with Accept:
// ContentTypeStream): two headers, then the state, then two trailers.
const (
	// HeaderBackupIndex is the last log entry the backup includes.
	HeaderBackupIndex = "X-Raftmaster-Backup-Index"
	// HeaderBackupVersion is the build of the node that took the backup.
	HeaderBackupVersion = "X-Raftmaster-Backup-Version"
	// TrailerBackupSha256 is the SHA-256 of the state streamed, in hex.
	TrailerBackupSha256 = "X-Raftmaster-Backup-Sha256"
	// TrailerBackupSize is the length of the state streamed, in bytes.
	TrailerBackupSize = "X-Raftmaster-Backup-Size"
)

// BackupResponse is a consistent copy of the whole state, taken by the
// leader: the state machine's snapshot encoding at Index. It is the answer
// to a request that does not ask for the stream, and holds the whole state
// in one body.
type BackupResponse struct {
	// Version is the build of the node that took it.
	Version string `json:"version"`
	// Index is the last log entry the copy includes.
	Index uint64 `json:"index"`
	// StateHash is the SHA-256 of Snapshot, in hex: the state hash that
	// /v1/debug/state reports for this state.
	StateHash string `json:"state_hash"`
	// Snapshot is the state's snapshot encoding (base64 in JSON).
	Snapshot []byte `json:"snapshot"`
}

// KVParamKey is the query parameter of PathKVGet that names the key.
const KVParamKey = "key"

// KVGetResponse is what a job's register holds under Key: its value and
// version, or Found false, Version 0 and no value when the key, or the
// job, does not exist.
type KVGetResponse struct {
	Key   string `json:"key"`
	Found bool   `json:"found"`
	// Value is the key's value (base64 in JSON).
	Value []byte `json:"value"`
	// Version identifies the value: the token to give a compare-and-set
	// that replaces it. It is never 0 for a key that exists, and no key
	// of any job is ever given it again.
	Version uint64 `json:"version"`
}

// Query parameters of PathKVWatch (GET), besides KVParamKey.
const (
	// KVWatchParamAfter is the version the caller knows the key at: the
	// watch answers once the key's version differs from it. 0 (the
	// default) waits until the key exists.
	KVWatchParamAfter = "after"
	// KVWatchParamWait is how long the watch may wait, a Go duration
	// such as "30s", as the allgather watch's wait: 0 answers at once,
	// and more than the server's limit (httpapi.Limits.MaxWatchWait)
	// waits that limit.
	KVWatchParamWait = "wait"
)

// KVWatchResponse is the answer to a watch of a register key: what the
// key holds, as KVGetResponse says, once its version differs from the
// one the watch was given (a key deleted is Found false at Version 0), or
// as it is when the wait ran out with TimedOut set.
type KVWatchResponse struct {
	Key   string `json:"key"`
	Found bool   `json:"found"`
	// Value is the key's value (base64 in JSON).
	Value []byte `json:"value"`
	// Version is the key's version, 0 when it does not exist.
	Version uint64 `json:"version"`
	// TimedOut reports that the wait ran out with the key as the watch
	// was given it: the same version, or still absent. Watch again with
	// the same version to go on waiting.
	TimedOut bool `json:"timed_out"`
}

// KVCompareAndSetRequest stores Value under Key in the job's register if
// the key's version is Version; Version 0 means that the key must not
// exist. A key is 1 to 256 bytes of printable ASCII without spaces ('!'
// to '~').
type KVCompareAndSetRequest struct {
	Key     string `json:"key"`
	Version uint64 `json:"version"`
	// Value is the value to store (base64 in JSON), at most the cluster's
	// max_kv_value_bytes.
	Value []byte `json:"value"`
}

// KVCompareAndSetResponse says whether the value was stored, and what the
// key holds afterwards: the value just stored and its new version, or,
// when the versions did not match, the key's current value and version
// (Found false when it does not exist). A retry with the same request id
// that swapped answers the same; one that did not swap answers the key
// as it is then.
type KVCompareAndSetResponse struct {
	Key       string    `json:"key"`
	Swapped   bool      `json:"swapped"`
	Found     bool      `json:"found"`
	Value     []byte    `json:"value"`
	Version   uint64    `json:"version"`
	AppliedAt time.Time `json:"applied_at"`
}

// KVDeleteRequest deletes Key from the job's register; with Version, only
// while the key is at that version (a conditional delete).
type KVDeleteRequest struct {
	Key string `json:"key"`
	// Version, when not 0, deletes the key only if it is at this version.
	Version uint64 `json:"version,omitempty"`
}

// KVDeleteResponse says whether the key was deleted, and its version when
// the delete ran: the version deleted, or the one a conditional delete
// did not match (Found false and Version 0 when the key did not exist).
// A retry with the same request id answers the same.
type KVDeleteResponse struct {
	Key       string    `json:"key"`
	Deleted   bool      `json:"deleted"`
	Found     bool      `json:"found"`
	Version   uint64    `json:"version"`
	AppliedAt time.Time `json:"applied_at"`
}

// KVDeletePrefixRequest deletes every key of the job's register that
// starts with Prefix, which follows the rule of keys.
type KVDeletePrefixRequest struct {
	Prefix string `json:"prefix"`
}

// KVDeletePrefixResponse says how many keys the prefix delete deleted; a
// retry with the same request id answers the same.
type KVDeletePrefixResponse struct {
	Prefix    string    `json:"prefix"`
	Deleted   int       `json:"deleted"`
	AppliedAt time.Time `json:"applied_at"`
}

// KVAddRequest adds Amount to the integer that Key holds in decimal ASCII,
// 0 when the key does not exist (torch's Store.add).
type KVAddRequest struct {
	Key    string `json:"key"`
	Amount int64  `json:"amount"`
}

// KVAddResponse is the sum stored and its version. A retry with the same
// request id answers the same sum, whatever was added since.
type KVAddResponse struct {
	Key       string    `json:"key"`
	Value     int64     `json:"value"`
	Version   uint64    `json:"version"`
	AppliedAt time.Time `json:"applied_at"`
}

// KVPair is a key and its value.
type KVPair struct {
	Key string `json:"key"`
	// Value is the value (base64 in JSON).
	Value []byte `json:"value"`
}

// KVMultiSetRequest stores each value under its key, all of them or, past
// a limit, none. The keys are distinct; the values together are at most
// the cluster's max_kv_value_bytes.
type KVMultiSetRequest struct {
	Pairs []KVPair `json:"pairs"`
}

// KVMultiSetResponse gives the version each key was given, in the order
// of the request.
type KVMultiSetResponse struct {
	Versions  []uint64  `json:"versions"`
	AppliedAt time.Time `json:"applied_at"`
}

// KVAppendRequest appends Value to the value of Key, creating the key.
type KVAppendRequest struct {
	Key string `json:"key"`
	// Value is the bytes to append (base64 in JSON).
	Value []byte `json:"value"`
}

// KVAppendResponse is the length of the value afterwards, and its
// version.
type KVAppendResponse struct {
	Key       string    `json:"key"`
	Length    int       `json:"length"`
	Version   uint64    `json:"version"`
	AppliedAt time.Time `json:"applied_at"`
}

// KVCompareValueRequest stores Desired under Key if the key holds
// Expected, or if it does not exist and Expected is empty: the
// compare_set of torch's c10d stores, by value.
type KVCompareValueRequest struct {
	Key string `json:"key"`
	// Expected is the value the key must hold (base64 in JSON); empty
	// also matches a key that does not exist.
	Expected []byte `json:"expected"`
	// Desired is the value to store (base64 in JSON), at most the
	// cluster's max_kv_value_bytes.
	Desired []byte `json:"desired"`
}

// KVCompareValueResponse says whether the value was stored, and what the
// key holds afterwards (Found false when it does not exist). c10d's
// compare_set returns Value when the key exists, else Expected. A retry
// with the same request id that swapped answers the same; one that did
// not swap answers the key as it is then.
type KVCompareValueResponse struct {
	Key       string    `json:"key"`
	Swapped   bool      `json:"swapped"`
	Found     bool      `json:"found"`
	Value     []byte    `json:"value"`
	Version   uint64    `json:"version"`
	AppliedAt time.Time `json:"applied_at"`
}

// KVMultiGetRequest names the keys to read, at most the cluster's
// max_job_kv_keys of them.
type KVMultiGetRequest struct {
	Keys []string `json:"keys"`
}

// KVMultiGetResponse holds what each key holds, in the order of the
// request, all read at one point of the log.
type KVMultiGetResponse struct {
	Values []KVGetResponse `json:"values"`
}

// KVParamPrefix is the query parameter of PathKVNumKeys that names the
// prefix of the keys to count.
const KVParamPrefix = "prefix"

// KVNumKeysResponse counts the keys of the job's register under Prefix,
// or all of them when Prefix is empty.
type KVNumKeysResponse struct {
	Prefix string `json:"prefix"`
	Count  int    `json:"count"`
}
