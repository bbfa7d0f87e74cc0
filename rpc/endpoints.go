package rpc

import (
	"net/http"

	"github.com/google/uuid"
)

// Endpoint describes one route of the API: the server registers its routes
// from Endpoints and rpc/openapi.json is generated from them.
type Endpoint struct {
	// Method is the HTTP method the path accepts ("GET" also serves
	// HEAD); any other method is answered 405 with Allow.
	Method string
	// Path is one of the Path constants.
	Path string
	// Summary says in a sentence or two what the endpoint does.
	Summary string
	// Request is the zero value of the JSON request body's type, nil when
	// the endpoint takes no body (every GET).
	Request any
	// Response is the zero value of the type of the 200 answer's body.
	Response any
	// Write marks a command of the replicated state machine: it reads the
	// HeaderRequestID header, and a retry with the same id is answered
	// with the first outcome. The cluster changes are not such commands
	// and ignore the header.
	Write bool
	// Redirects marks an endpoint that a node which does not lead may
	// answer with 307 Temporary Redirect to the leader (a status request
	// only without ?stale, a watch only on a standby of the etcd backend).
	Redirects bool
	// Access is who may call the endpoint when the server requires tokens
	// (serve --auth-tokens): AccessTrainer (the default when empty),
	// AccessOperator, or AccessPublic for no token at all.
	Access string
	// Job marks an endpoint of one job: it is served at Path for the
	// default job and at JobPath(job, Path) for any job. A trainer token
	// scoped to jobs may call it only for a job it covers.
	Job bool
	// Query lists the query parameters: a GET's, or those a POST takes
	// beside its body (ParamAttach).
	Query []Param
	// Operation names the endpoint in openapi.json (its operationId) when
	// the name of its Path constant does not: on a path that several
	// methods serve.
	Operation string
	// NoSession marks a write that is not made under a session: it
	// refuses the HeaderSession header, which every other write takes.
	NoSession bool
	// Stream, when set, is the answer the endpoint streams, instead of
	// Response's JSON, to a request whose Accept header names
	// Stream.ContentType.
	Stream *Stream
	// Errors lists the error codes the endpoint may answer with, besides
	// CodeMethod and CodeInternal, which any endpoint may, and the
	// CodeNotLeader of a redirect; HTTPStatus gives each one's status.
	Errors []string
}

// Param is a query parameter of an endpoint.
type Param struct {
	// Name is the parameter's name, such as WatchParamGroup.
	Name string
	// Doc says what the parameter means.
	Doc string
	// Required marks a parameter the request must give.
	Required bool
	// Type is the zero value of the Go type whose text form the value is
	// written in: "" for a string, uint64(0), Duration(0), uuid.Nil, false.
	Type any
}

// Stream describes an answer streamed as raw bytes (Endpoint.Stream):
// its length need not be known, or fit in memory, on either side.
type Stream struct {
	// ContentType is the media type of the body, which the request's
	// Accept header names to have it.
	ContentType string
	// Doc says what the body holds.
	Doc string
	// Headers are sent before the body.
	Headers []Param
	// Trailers are sent after the body, as HTTP trailers: they hold what
	// is only known once the body is written. A body that ends without
	// them was cut short.
	Trailers []Param
}

// The access levels of endpoints (Endpoint.Access). A token of the
// operator role may call every endpoint.
const (
	AccessPublic   = "public"
	AccessTrainer  = "trainer"
	AccessOperator = "operator"
)

// HeaderAuthorization carries "Bearer <token>" when the server requires
// tokens.
const HeaderAuthorization = "Authorization"

// ParamStale is the query parameter of PathStatus and PathCluster that
// asks for a stale read: any node answers from its local state. It is
// given with any value, or none.
const ParamStale = "stale"

// Error codes common to the endpoints of a kind.
var (
	// writeErrors may answer any state-machine command.
	writeErrors = []string{CodeInvalid, CodeTooLarge, CodeNoLeader, CodeUnknownOutcome, CodeUnavailable}
	// requestErrors may answer any write that carries a request id: the
	// de-duplication table's refusals, and a token's quota.
	requestErrors = codes(writeErrors, CodeUnknownClient, CodeTooManyClients, CodeForeignClient, CodeSessionExpired, CodeRateLimited)
	// leaderReadErrors may answer a read that needs the leader.
	leaderReadErrors = []string{CodeNoLeader, CodeUnavailable}
)

// attachParam is the query parameter of the register writes that store
// keys.
var attachParam = Param{
	Name: ParamAttach,
	Doc: "true to attach the keys the write stores to the session of its " + HeaderSession + " header, which it needs: " +
		"they are deleted when the session ends, unless written again since.",
	Type: false,
}

// codes returns base followed by more, in a new slice.
func codes(base []string, more ...string) []string {
	return append(append([]string(nil), base...), more...)
}

// Endpoints is every route of the API, one per Path constant.
var Endpoints = []Endpoint{
	{
		Method: http.MethodPost, Path: PathDataset,
		Summary: "Set the dataset: globs that the leader expands and indexes, or chunks already indexed by the client, " +
			"or sources, each a name, a weight and globs that the leader indexes apart, for a weighted mixture (protocol level 9: " +
			"a cluster below it answers unavailable). " +
			"The first dataset counts; later requests are answered with ignored set and change nothing.",
		Request: SetDatasetRequest{}, Response: SetDatasetResponse{},
		Write: true, Redirects: true, Job: true, NoSession: true, Errors: codes(requestErrors, CodeLimit),
	},
	{
		Method: http.MethodPost, Path: PathWeights,
		Summary: "Change the weights of the job's mixture (a dataset set with sources): the weights given, by source name, hold " +
			"from the next task every trainer leases, and the sources not named keep theirs; with replace_schedule, the schedule " +
			"replaces the steps of weights to come (none clears it). The answer describes the sources after the change. " +
			"An unknown source, a weight that is negative, not a number or above 4000, weights that would all be 0, and a job " +
			"whose dataset has one source are refused (invalid) and change nothing. Needs protocol level 9: a cluster below it " +
			"answers unavailable.",
		Request: SetWeightsRequest{}, Response: SetWeightsResponse{},
		Write: true, Redirects: true, Job: true, Errors: codes(requestErrors, CodeNoDataset, CodeLimit),
	},
	{
		Method: http.MethodPost, Path: PathTaskGet,
		Summary: "Lease the next task of a pass. Renew the lease (" + PathTaskRenew + ") well before it runs out. " +
			"Give the job_number of an earlier answer to be told unknown_job, rather than no_dataset or another job's task, " +
			"once the job read is deleted. Give the task just read as finished to have the same entry finish it, as " +
			PathTaskFinished + " would, before it leases the next (protocol level 9: a cluster below it answers unavailable and " +
			"changes nothing): the answer's finish says how the finish went, on an error answer too (pass_before, " +
			"no_more_available, ...), since it counts even when no task is left; a retry with the same request id replays both.",
		Request: GetTaskRequest{}, Response: GetTaskResponse{},
		Write: true, Redirects: true, Job: true,
		Errors: codes(requestErrors, CodeNoDataset, CodePassBefore, CodePassAfter, CodeNoMoreAvailable, CodeAllTaskFailed, CodeStaleEpoch,
			CodeUnknownJob),
	},
	{
		Method: http.MethodPost, Path: PathTaskFinished,
		Summary: "Report a leased task done.",
		Request: TaskRequest{}, Response: TaskResponse{},
		Write: true, Redirects: true, Job: true, Errors: codes(requestErrors, CodeNoDataset, CodeUnknownTask, CodeStaleEpoch),
	},
	{
		Method: http.MethodPost, Path: PathTaskFailed,
		Summary: "Report a leased task failed: it is dispatched again, or set aside once it has failed more than failure_max times.",
		Request: TaskRequest{}, Response: TaskResponse{},
		Write: true, Redirects: true, Job: true, Errors: codes(requestErrors, CodeNoDataset, CodeUnknownTask),
	},
	{
		Method: http.MethodPost, Path: PathTaskRenew,
		Summary: "Extend the lease of a task by the task timeout.",
		Request: TaskRequest{}, Response: TaskResponse{},
		Write: true, Redirects: true, Job: true, Errors: codes(requestErrors, CodeNoDataset, CodeUnknownTask, CodeStaleEpoch),
	},
	{
		Method: http.MethodPost, Path: PathTaskProgress,
		Summary: "Record how many records of each task it holds the caller's training loop has consumed, for the job's next cursor: " +
			"with several trainers, each reports before one of them commits the cursor. An entry of a task no longer leased under " +
			"its meta is not recorded; recorded counts the others. At most 4096 entries. Needs protocol level 7.",
		Request: ReportProgressRequest{}, Response: ReportProgressResponse{},
		Write: true, Redirects: true, Job: true, Errors: codes(requestErrors, CodeNoDataset),
	},
	{
		Method: http.MethodPost, Path: PathCursors, Operation: "commitCursor",
		Summary: "Commit a cursor of the job's dispatch, to be saved with the model checkpoint: the pass, the tasks finished in it " +
			"(one bit each) and the consumed offset of each task in flight (the progress given here, or reported before). " +
			"Fenced: refused (cursor_fenced) while another trainer holds the save-model lease (trainer_id), or once the job was " +
			"restored after the generation given. A job keeps its newest cursors up to the cluster's limit, dropping the oldest. " +
			"Needs protocol level 7.",
		Request: CommitCursorRequest{}, Response: CommitCursorResponse{},
		Write: true, Redirects: true, Job: true, Errors: codes(requestErrors, CodeNoDataset, CodeLimit, CodeCursorFenced),
	},
	{
		Method: http.MethodGet, Path: PathCursors, Operation: "listCursors",
		Summary:  "List the job's cursors, oldest first, and its restore generation. The leader answers, after a read barrier.",
		Response: ListCursorsResponse{}, Redirects: true, Job: true, Errors: codes(leaderReadErrors, CodeUnknownJob),
	},
	{
		Method: http.MethodGet, Path: PathCursor, Operation: "inspectCursor",
		Summary:  "Show one cursor of the job with its partly consumed tasks. The leader answers, after a read barrier.",
		Response: CursorResponse{}, Redirects: true, Job: true, Errors: codes(leaderReadErrors, CodeInvalid, CodeUnknownJob, CodeUnknownCursor),
	},
	{
		Method: http.MethodPost, Path: PathCursorRestore,
		Summary: "Put the job's dispatch back to a cursor, in one entry: the pass is the cursor's; the tasks it counts finished are " +
			"finished, each task it counts partly consumed is dispatched again from its first record not consumed (task.skip), and " +
			"every other task is to do; every lease is revoked, so that its holder's reports change nothing, and the job's restore " +
			"generation grows. The records still to train in the pass are then exactly those the checkpoint had not trained, " +
			"whatever the number of trainers. Needs protocol level 7.",
		Request: RestoreCursorRequest{}, Response: RestoreCursorResponse{}, Write: true, Redirects: true, Job: true,
		Errors: codes(requestErrors, CodeUnknownJob, CodeUnknownCursor, CodeNoDataset),
	},
	{
		Method: http.MethodDelete, Path: PathCursor, Operation: "deleteCursor",
		Summary:  "Delete a cursor of the job; deleted is false when it did not exist. Needs protocol level 7.",
		Response: DeleteCursorResponse{}, Write: true, Redirects: true, Job: true, Errors: codes(requestErrors, CodeUnknownJob),
	},
	{
		Method: http.MethodPost, Path: PathSaveModel,
		Summary: "Ask for the save-model lease: granted to one trainer at a time, for block_dur.",
		Request: SaveModelRequest{}, Response: SaveModelResponse{},
		Write: true, Redirects: true, Job: true, Errors: codes(requestErrors, CodeLimit),
	},
	{
		Method: http.MethodPost, Path: PathAllgatherJoin,
		Summary: "Join an allgather group with a JSON value; watch (" + PathAllgatherWatch + ") the generation it returns for the outcome.",
		Request: JoinRequest{}, Response: JoinResponse{},
		Write: true, Redirects: true, Job: true, Errors: codes(requestErrors, CodeGroupMismatch, CodeLimit),
	},
	{
		Method: http.MethodPost, Path: PathAllgatherLeave,
		Summary: "Leave an allgather group; the last member out closes it.",
		Request: LeaveRequest{}, Response: LeaveResponse{},
		Write: true, Redirects: true, Job: true, Errors: codes(requestErrors),
	},
	{
		Method: http.MethodGet, Path: PathAllgatherWatch,
		Summary: "Long poll for the outcome of a join. Any node answers from its local replica " +
			"(a standby of the etcd backend redirects to the active master). " +
			"The final failures are errors: closed, reconnected, allgather_timeout. " +
			"From protocol level 2 a final answer stays for the group's timeout or five minutes, the longer.",
		Response: WatchResponse{}, Redirects: true, Job: true,
		Query: []Param{
			{Name: WatchParamGroup, Doc: "The group joined.", Required: true, Type: ""},
			{Name: WatchParamMember, Doc: "The member that joined.", Required: true, Type: uuid.Nil},
			{Name: WatchParamGeneration, Doc: "The generation the join returned (at least 1).", Required: true, Type: uint64(0)},
			{Name: WatchParamWait, Doc: "How long to wait for an outcome before answering pending, " +
				"a Go duration at most the server's limit (60s unless configured); 30s when left out.", Type: Duration(0)},
			{Name: WatchParamSeenOverdue, Doc: "true when the caller already knows the group is overdue, " +
				"so that only a final outcome ends the wait.", Type: false},
		},
		Errors: codes(leaderReadErrors, CodeInvalid, CodeClosed, CodeReconnected, CodeAllGatherTimeout),
	},
	{
		Method: http.MethodGet, Path: PathKVGet,
		Summary: "Read a key of the job's register: its value and version, or found false. " +
			"The read is linearizable: only the leader answers, after a read barrier, so it sees every compare-and-set acknowledged before it.",
		Response: KVGetResponse{}, Redirects: true, Job: true,
		Query: []Param{
			{Name: KVParamKey, Doc: "The key: 1 to 256 bytes of printable ASCII without spaces.", Required: true, Type: ""},
		},
		Errors: codes(leaderReadErrors, CodeInvalid),
	},
	{
		Method: http.MethodPost, Path: PathKVCompareAndSet,
		Summary: "Store a value under a key of the job's register if the key's version is the one given (0: the key must not exist); " +
			"the value then gets a new version, which no key is ever given again. Otherwise nothing changes and the answer " +
			"carries the key's current value and version. This is the compare-and-set of a rendezvous backend such as torchrun's, " +
			"the version being its fencing token.",
		Request: KVCompareAndSetRequest{}, Response: KVCompareAndSetResponse{},
		Query: []Param{attachParam},
		Write: true, Redirects: true, Job: true, Errors: codes(requestErrors, CodeLimit),
	},
	{
		Method: http.MethodPost, Path: PathKVDelete,
		Summary: "Delete a key of the job's register; with a version, only while the key is at that version. " +
			"The answer says whether it deleted, and the key's version when it ran. " +
			"A key deleted and created again takes a new version, so a compare-and-set fenced by a deleted value's version swaps nothing. " +
			"Needs protocol level 5: a cluster below it answers unavailable.",
		Request: KVDeleteRequest{}, Response: KVDeleteResponse{},
		Write: true, Redirects: true, Job: true, Errors: codes(requestErrors),
	},
	{
		Method: http.MethodPost, Path: PathKVDeletePrefix,
		Summary: "Delete every key of the job's register that starts with the prefix, in one entry, and say how many. " +
			"Needs protocol level 5.",
		Request: KVDeletePrefixRequest{}, Response: KVDeletePrefixResponse{},
		Write: true, Redirects: true, Job: true, Errors: codes(requestErrors),
	},
	{
		Method: http.MethodPost, Path: PathKVAdd,
		Summary: "Add an amount to the integer a key holds in decimal ASCII, 0 when the key does not exist, " +
			"and store the sum under a new version (torch's Store.add). A value that is not a decimal integer, " +
			"or a sum past 64 bits, is invalid and changes nothing. A retry answers the sum the first attempt made. " +
			"Needs protocol level 5.",
		Request: KVAddRequest{}, Response: KVAddResponse{},
		Query: []Param{attachParam},
		Write: true, Redirects: true, Job: true, Errors: codes(requestErrors, CodeLimit),
	},
	{
		Method: http.MethodPost, Path: PathKVMultiSet,
		Summary: "Store several keys in one entry, each under a new version: all of them, or, past a limit, none. " +
			"The keys are distinct, and the values together at most max_kv_value_bytes. Needs protocol level 5.",
		Request: KVMultiSetRequest{}, Response: KVMultiSetResponse{},
		Query: []Param{attachParam},
		Write: true, Redirects: true, Job: true, Errors: codes(requestErrors, CodeLimit),
	},
	{
		Method: http.MethodPost, Path: PathKVAppend,
		Summary: "Append bytes to the value of a key, creating it, under a new version; the value stays within max_kv_value_bytes. " +
			"Needs protocol level 5.",
		Request: KVAppendRequest{}, Response: KVAppendResponse{},
		Query: []Param{attachParam},
		Write: true, Redirects: true, Job: true, Errors: codes(requestErrors, CodeLimit),
	},
	{
		Method: http.MethodPost, Path: PathKVCompareValue,
		Summary: "Store a value under a key if the key holds the expected value, or does not exist and the expected value is empty: " +
			"the compare_set of torch's c10d stores, by value. The answer carries the key afterwards. Needs protocol level 5.",
		Request: KVCompareValueRequest{}, Response: KVCompareValueResponse{},
		Query: []Param{attachParam},
		Write: true, Redirects: true, Job: true, Errors: codes(requestErrors, CodeLimit),
	},
	{
		Method: http.MethodPost, Path: PathKVMultiGet,
		Summary: "Read several keys of the job's register at one point of the log. A read, not a write: " +
			"the leader answers after a read barrier, so it sees every write acknowledged before it. " +
			"At most max_job_kv_keys keys, holding at most 64 MiB together.",
		Request: KVMultiGetRequest{}, Response: KVMultiGetResponse{},
		Redirects: true, Job: true, Errors: codes(leaderReadErrors, CodeInvalid, CodeTooLarge),
	},
	{
		Method: http.MethodGet, Path: PathKVNumKeys,
		Summary: "Count the keys of the job's register, or those under a prefix. " +
			"The read is linearizable: the leader answers after a read barrier.",
		Response: KVNumKeysResponse{}, Redirects: true, Job: true,
		Query: []Param{
			{Name: KVParamPrefix, Doc: "Count only the keys that start with it; every key when left out.", Type: ""},
		},
		Errors: codes(leaderReadErrors, CodeInvalid),
	},
	{
		Method: http.MethodGet, Path: PathKVWatch,
		Summary: "Long poll for a change of a key of the job's register: answer what the key holds as soon as its version differs " +
			"from after (after 0: as soon as the key exists; a key deleted answers found false), or, once the timeout passes, " +
			"the key as it is with timed_out set. The leader answers, after a read barrier, so the answer is linearizable, " +
			"as a get's; a node that stops leading during the wait redirects the watch to the new leader. " +
			"A torch c10d store's get and wait block on it instead of polling.",
		Response: KVWatchResponse{}, Redirects: true, Job: true,
		Query: []Param{
			{Name: KVParamKey, Doc: "The key: 1 to 256 bytes of printable ASCII without spaces.", Required: true, Type: ""},
			{Name: KVWatchParamAfter, Doc: "The version the caller knows the key at; 0, the default, waits until the key exists.", Type: uint64(0)},
			{Name: KVWatchParamWait, Doc: "How long to wait for a change, a Go duration such as 30s: 0s answers at once; 30s when left out; " +
				"a longer wait than the server's limit (60s unless configured) waits that limit.", Type: ""},
		},
		Errors: codes(leaderReadErrors, CodeInvalid),
	},
	{
		Method: http.MethodGet, Path: PathStatus,
		Summary: "Describe the answering node and summarise the state. Without stale the read is linearizable: " +
			"only the leader answers, after a read barrier.",
		Response: StatusResponse{}, Redirects: true,
		Query: []Param{
			{Name: ParamStale, Doc: "Present, with any value or none, to have any node answer from its local state, which may lag behind the leader's.", Type: false},
		},
		Errors: codes(leaderReadErrors),
	},
	{
		Method: http.MethodGet, Path: PathCluster, Access: AccessOperator,
		Summary: "List the members of the Raft configuration with what each reports about itself, and summarise the state. " +
			"A leader read unless stale is given.",
		Response: ClusterResponse{}, Redirects: true,
		Query: []Param{
			{Name: ParamStale, Doc: "Present, with any value or none, to have any node answer from its local state.", Type: false},
		},
		Errors: codes(leaderReadErrors),
	},
	{
		Method: http.MethodPost, Path: PathClusterAddMember, Access: AccessOperator,
		Summary: "Add a member, or refresh its addresses when it is one already. A new incarnation of a node " +
			"(one that lost its data directory) is added as a non-voter and promoted to voter once it has caught up; " +
			"it asks again until then.",
		Request: AddMemberRequest{}, Response: OKResponse{},
		Redirects: true, Errors: codes(writeErrors),
	},
	{
		Method: http.MethodPost, Path: PathClusterRemoveMember, Access: AccessOperator,
		Summary: "Remove a member from the cluster, by its server id or its node name. A leader asked to remove itself hands leadership over first.",
		Request: RemoveMemberRequest{}, Response: OKResponse{},
		Redirects: true, Errors: codes(writeErrors, CodeNotFound),
	},
	{
		Method: http.MethodPost, Path: PathClusterTransfer, Access: AccessOperator,
		Summary: "Move leadership to the server named, or to the most up-to-date follower when no id is given (the body may be empty).",
		Request: TransferRequest{}, Response: OKResponse{},
		Redirects: true, Errors: codes(writeErrors, CodeNotFound),
	},
	{
		Method: http.MethodGet, Path: PathDebugState, Access: AccessOperator,
		Summary:  "The answering node's applied index and a hash of its state; replicas at the same index must report the same hash.",
		Response: DebugStateResponse{}, Errors: []string{CodeUnavailable},
	},
	{
		Method: http.MethodGet, Path: PathJobs, Access: AccessOperator,
		Summary: "List every job, sorted by name, with the limits in effect and the state's size estimate. " +
			"A leader read unless stale is given.",
		Response: JobsResponse{}, Redirects: true,
		Query: []Param{
			{Name: ParamStale, Doc: "Present, with any value or none, to have any node answer from its local state.", Type: false},
		},
		Errors: codes(leaderReadErrors),
	},
	{
		Method: http.MethodGet, Path: PathJob, Access: AccessOperator,
		Summary:  "Describe one job. A leader read unless stale is given.",
		Response: Job{}, Redirects: true,
		Query: []Param{
			{Name: ParamStale, Doc: "Present, with any value or none, to have any node answer from its local state.", Type: false},
		},
		Errors: codes(leaderReadErrors, CodeInvalid, CodeUnknownJob),
	},
	{
		Method: http.MethodPost, Path: PathJobCreate, Access: AccessOperator,
		Summary: "Create a job, empty. A job is also created by its first dataset, join or save-model request; " +
			"creating a job that exists is answered with ignored set.",
		Request: JobRequest{}, Response: JobResponse{},
		Write: true, Redirects: true, Errors: codes(requestErrors, CodeLimit),
	},
	{
		Method: http.MethodPost, Path: PathJobDelete, Access: AccessOperator,
		Summary: "Delete a job and everything it holds: dataset, tasks, leases, allgather groups and register " +
			"(their watches answer closed). A job of the same name created later starts from nothing.",
		Request: JobRequest{}, Response: JobResponse{},
		Write: true, Redirects: true, Errors: codes(requestErrors, CodeUnknownJob),
	},
	{
		Method: http.MethodGet, Path: PathLimits, Access: AccessOperator,
		Summary: "The cluster's limits in effect, the same on every replica. They are part of the replicated state: " +
			"a new cluster's first leader sets them from its serve flags (--max-jobs, ...), and " + PathLimitsSet + " changes them. " +
			"A leader read unless stale is given.",
		Response: Limits{}, Redirects: true,
		Query: []Param{
			{Name: ParamStale, Doc: "Present, with any value or none, to have any node answer from its local state.", Type: false},
		},
		Errors: codes(leaderReadErrors),
	},
	{
		Method: http.MethodPost, Path: PathLimitsSet, Access: AccessOperator,
		Summary: "Change the cluster's limits: only the fields given change, 0 meaning the default. A value out of range is refused " +
			"and nothing changes. Lowering a limit below what exists removes nothing; it refuses growth from then on. " +
			"The answer is the limits in effect. A cluster not yet upgraded to protocol level 2, where each new leader still sets " +
			"the limits from its own flags, answers unavailable.",
		Request: LimitsRequest{}, Response: Limits{},
		Write: true, Redirects: true, Errors: codes(writeErrors),
	},
	{
		Method: http.MethodPost, Path: PathSessions, Operation: "openSession",
		Summary: "Open a session for the calling process. The tasks it leases under the session, the save-model lease it is granted " +
			"under it and the register keys it attaches to it are released in the one log entry that ends the session: when it is closed " +
			"(" + http.MethodDelete + " " + PathSession + "), or when the leader has had no keep-alive (" + PathSessionKeepAlive + ") " +
			"and no request under it for its TTL. A TTL of 0 takes the server's default (serve --session-ttl, 5s unless configured); " +
			"a TTL is 1s to 1h. The writes made under the session carry its id in the " + HeaderSession + " header. " +
			"Needs protocol level 6: a cluster below it answers unavailable; a server whose backend keeps no sessions answers not_found, " +
			"as a server of an earlier release does.",
		Request: OpenSessionRequest{}, Response: OpenSessionResponse{},
		Write: true, Redirects: true, NoSession: true, Errors: codes(requestErrors, CodeLimit, CodeNotFound),
	},
	{
		Method: http.MethodGet, Path: PathSessions, Operation: "listSessions", Access: AccessOperator,
		Summary: "List the open sessions in id order: each one's TTL, how long it lives without another keep-alive by the leader's clock, " +
			"its age, the tasks it holds and how many register keys are attached to it. The leader answers, after a read barrier. " +
			"Needs protocol level 6: a cluster below it answers unavailable.",
		Response: SessionsResponse{}, Redirects: true, Errors: codes(leaderReadErrors, CodeNotFound),
	},
	{
		Method: http.MethodPost, Path: PathSessionKeepAlive,
		Summary: "Keep a session alive for its TTL from now, reporting how far its holder has read each task it holds; " +
			"the answer is the TTL granted. Send one every third of the TTL. The leader answers from memory and replicates nothing; " +
			"a follower redirects. A session that has ended is answered session_expired: what it held was released, and the writes " +
			"made under it are refused from then on; open a new one. The leader hands a held task back once its records have not grown " +
			"for the job's task timeout. At most 4096 progress entries. " +
			"Needs protocol level 6: a cluster below it answers unavailable.",
		Request: KeepAliveRequest{}, Response: KeepAliveResponse{},
		Redirects: true, Errors: codes(leaderReadErrors, CodeInvalid, CodeTooLarge, CodeSessionExpired, CodeForeignClient, CodeNotFound),
	},
	{
		Method: http.MethodDelete, Path: PathSession, Operation: "closeSession",
		Summary: "Close a session: the tasks it holds go back to todo without counting a failure, the keys attached to it are deleted " +
			"and a save-model lease granted under it is released, in one entry; closed is false for a session that had ended already. " +
			"A token closes its own sessions only (foreign_client), an operator's any. A retry of a close made under the session it " +
			"closes may be answered session_expired: the session has ended either way. " +
			"Needs protocol level 6: a cluster below it answers unavailable.",
		Response: CloseSessionResponse{}, Write: true, Redirects: true, Errors: codes(requestErrors),
	},
	{
		Method: http.MethodGet, Path: PathBackup, Access: AccessOperator,
		Summary: "Take an online, consistent backup: the leader's whole state after a read barrier, with its index and hash. " +
			"With Accept: " + ContentTypeStream + " the state is streamed as it is encoded, whatever its size, " +
			"its index in a header and its SHA-256 and length in trailers; any other Accept gets the JSON answer of earlier releases, " +
			"the whole state in base64 in one body. raftmaster restore makes a new cluster's first node from it.",
		Response: BackupResponse{}, Redirects: true, Errors: codes(leaderReadErrors),
		Stream: &Stream{
			ContentType: ContentTypeStream,
			Doc:         "The state machine's snapshot encoding, the Snapshot of BackupResponse as raw bytes.",
			Headers: []Param{
				{Name: HeaderBackupIndex, Doc: "The last log entry the backup includes.", Required: true, Type: uint64(0)},
				{Name: HeaderBackupVersion, Doc: "The build of the node that took it.", Required: true, Type: ""},
			},
			Trailers: []Param{
				{Name: TrailerBackupSha256, Doc: "The SHA-256 of the body, in hex: the state hash that /v1/debug/state reports for this state.", Required: true, Type: ""},
				{Name: TrailerBackupSize, Doc: "The body's length in bytes.", Required: true, Type: int64(0)},
			},
		},
	},
	{
		Method: http.MethodGet, Path: PathHealthz, Access: AccessPublic,
		Summary:  "Liveness: the process serves HTTP.",
		Response: OKResponse{},
	},
	{
		Method: http.MethodGet, Path: PathReadyz, Access: AccessPublic,
		Summary:  "Readiness: the node knows a leader and has caught up.",
		Response: OKResponse{}, Errors: []string{CodeUnavailable},
	},
}

// JobScoped reports whether path is the Path of a job-scoped endpoint
// (Endpoint.Job), served for any job under JobPath.
func JobScoped(path string) bool { return jobScoped[path] }

// jobScoped is the set of Paths of the job-scoped endpoints: JobScoped is
// on every client call's path.
var jobScoped = func() map[string]bool {
	m := map[string]bool{}
	for _, ep := range Endpoints {
		if ep.Job {
			m[ep.Path] = true
		}
	}
	return m
}()
