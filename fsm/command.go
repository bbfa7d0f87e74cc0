package fsm

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// CmdType is the type byte of an encoded command. Types are only ever added
// at the end. A type with the IgnorableFlag bit set may be skipped by a
// replica that does not know it.
type CmdType uint8

// IgnorableFlag marks a command type that older replicas may skip.
const IgnorableFlag CmdType = 0x80

// Command types, in log order: the numbers are written in logs on disk, so
// a type is never renumbered or reused, and new ones go at the end.
const (
	TypeSetDataset CmdType = iota + 1
	TypeDatasetPart
	TypeDatasetCommit
	TypeGetTask
	TypeTaskFinished
	TypeTaskFailed
	TypeRenewLease
	TypeTick
	TypeRequestSaveModel
	TypeJoin
	TypeLeave
	TypeRegisterNode
	TypeRemoveNode
	TypeLeaderGrace
	TypeCreateJob
	TypeDeleteJob
	TypeSetLimits
	TypeKVCompareAndSet
	TypeSetProtocol
	TypeKVDelete
	TypeKVDeletePrefix
	TypeKVAdd
	TypeKVMultiSet
	TypeKVAppend
	TypeKVCompareValue
	TypeOpenSession
	TypeCloseSession
	TypeExpireSessions
	TypeCheckpointSessions
	TypeReportProgress
	TypeCommitCursor
	TypeRestoreCursor
	TypeDeleteCursor
	TypeSetWeights
	numTypes
)

// commands registers every command type: its name, how to decode it, its
// limits, its effect and, for a command addressed to a job, whether it
// creates the job. Decode, validate and apply look a type up here
// and nowhere else, so a type cannot be decodable yet unhandled.
//
// To add a command:
//
//  1. add its type at the end of the list above;
//  2. declare its struct, embedding Header, with Type, encode and decode
//     (below), and its limits as a validate method (validate.go);
//  3. add its row here;
//  4. write its apply function, a method of *state (register) for a
//     cluster-wide command, or of *job (registerJob) for a command
//     addressed to the job its header names, next to the state it
//     changes.
//
// A type added after Protocol1 takes the level that added it, with
// .from(ProtocolN) on its row: leaders propose it only once the cluster is
// at that level.
//
// If its answer grants something for a time, also say in
// dedupEntry.result how a retry is answered once the grant has run out.
// TestCommandTable checks that every type has a complete row.
//
// The validator is part of the row, not of the Command interface, so that
// a row holds everything that decides whether and how a type is applied;
// it is a method of the command only so that validate.go keeps every limit
// in one file.
var commands = [numTypes]cmdSpec{
	TypeSetDataset:         registerJob("SetDataset", (*SetDataset).validate, (*job).setDataset, creates),
	TypeDatasetPart:        registerJob("DatasetPart", (*DatasetPart).validate, (*job).datasetPart, creates),
	TypeDatasetCommit:      registerJob("DatasetCommit", (*DatasetCommit).validate, (*job).datasetCommit, !creates),
	TypeGetTask:            registerJob("GetTask", (*GetTask).validate, (*job).getTask, !creates),
	TypeTaskFinished:       registerJob("TaskFinished", (*TaskFinished).validate, (*job).taskFinished, !creates),
	TypeTaskFailed:         registerJob("TaskFailed", (*TaskFailed).validate, (*job).taskFailed, !creates),
	TypeRenewLease:         registerJob("RenewLease", (*RenewLease).validate, (*job).renewLease, !creates),
	TypeTick:               register("Tick", (*Tick).validate, (*state).tick),
	TypeRequestSaveModel:   registerJob("RequestSaveModel", (*RequestSaveModel).validate, (*job).requestSaveModel, creates),
	TypeJoin:               registerJob("Join", (*Join).validate, (*job).join, creates),
	TypeLeave:              registerJob("Leave", (*Leave).validate, (*job).leave, !creates),
	TypeRegisterNode:       register("RegisterNode", (*RegisterNode).validate, (*state).registerNode),
	TypeRemoveNode:         register("RemoveNode", (*RemoveNode).validate, (*state).removeNode),
	TypeLeaderGrace:        register("LeaderGrace", (*LeaderGrace).validate, (*state).leaderGrace),
	TypeCreateJob:          registerJob("CreateJob", (*CreateJob).validate, (*job).createJob, creates),
	TypeDeleteJob:          registerJob("DeleteJob", (*DeleteJob).validate, (*job).deleteJob, !creates),
	TypeSetLimits:          register("SetLimits", (*SetLimits).validate, (*state).setLimits),
	TypeKVCompareAndSet:    registerJob("KVCompareAndSet", (*KVCompareAndSet).validate, (*job).kvCompareAndSet, creates),
	TypeSetProtocol:        register("SetProtocol", (*SetProtocol).validate, (*state).setProtocol),
	TypeKVDelete:           registerJob("KVDelete", (*KVDelete).validate, (*job).kvDelete, !creates).from(Protocol5),
	TypeKVDeletePrefix:     registerJob("KVDeletePrefix", (*KVDeletePrefix).validate, (*job).kvDeletePrefix, !creates).from(Protocol5),
	TypeKVAdd:              registerJob("KVAdd", (*KVAdd).validate, (*job).kvAdd, creates).from(Protocol5),
	TypeKVMultiSet:         registerJob("KVMultiSet", (*KVMultiSet).validate, (*job).kvMultiSet, creates).from(Protocol5),
	TypeKVAppend:           registerJob("KVAppend", (*KVAppend).validate, (*job).kvAppend, creates).from(Protocol5),
	TypeKVCompareValue:     registerJob("KVCompareValue", (*KVCompareValue).validate, (*job).kvCompareValue, creates).from(Protocol5),
	TypeOpenSession:        register("OpenSession", (*OpenSession).validate, (*state).openSession).from(Protocol6),
	TypeCloseSession:       register("CloseSession", (*CloseSession).validate, (*state).closeSession).from(Protocol6),
	TypeExpireSessions:     register("ExpireSessions", (*ExpireSessions).validate, (*state).expireSessions).from(Protocol6),
	TypeCheckpointSessions: register("CheckpointSessions", (*CheckpointSessions).validate, (*state).checkpointSessions).from(Protocol6),
	TypeReportProgress:     registerJob("ReportProgress", (*ReportProgress).validate, (*job).reportProgress, !creates).from(Protocol7),
	TypeCommitCursor:       registerJob("CommitCursor", (*CommitCursor).validate, (*job).commitCursor, !creates).from(Protocol7),
	TypeRestoreCursor:      registerJob("RestoreCursor", (*RestoreCursor).validate, (*job).restoreCursor, !creates).from(Protocol7),
	TypeDeleteCursor:       registerJob("DeleteCursor", (*DeleteCursor).validate, (*job).deleteCursor, !creates).from(Protocol7),
	TypeSetWeights:         registerJob("SetWeights", (*SetWeights).validate, (*job).setWeights, !creates).from(Protocol9),
}

// creates marks, in registerJob, a command that creates the job it
// addresses when the job does not exist, unless it is answered Ignored
// (a KVCompareAndSet or KVCompareValue that does not swap).
const creates = true

// cmdSpec is one row of commands. Its functions take the Command
// interface; register and registerJob build them from functions of the
// concrete type.
type cmdSpec struct {
	name string
	// new returns an empty command for Decode to fill.
	new func() Command
	// validate checks the command against the limits, whatever the state.
	validate func(Command) error
	// apply changes the state; it runs after validate and the clock
	// update. It is nil for a command addressed to a job.
	apply func(*state, Command) *Result
	// applyJob changes the job the command addresses; it is nil for a
	// cluster-wide command.
	applyJob func(*job, Command) *Result
	// creates makes a job that does not exist when the command is
	// neither rejected nor ignored; otherwise the command answers as an
	// empty job would.
	creates bool
	// jobScoped is set for the rows of registerJob.
	jobScoped bool
	// since is the protocol level from which a leader may propose the
	// type (protocol.go); Protocol1 for the types older releases know.
	since uint64
}

// from returns the row with the protocol level from which the type may be
// proposed: a type added after Protocol1 takes the level that added it.
func (spec cmdSpec) from(level uint64) cmdSpec {
	spec.since = level
	return spec
}

// register builds the row of cluster-wide command type *C. A nil validate
// or apply leaves the row's function nil, for TestCommandTable to find.
func register[C any, P interface {
	*C
	Command
}](name string, validate func(P) error, apply func(*state, P) *Result) cmdSpec {
	spec := cmdSpec{name: name, new: func() Command { return P(new(C)) }, since: Protocol1}
	if validate != nil {
		// The assertions cannot fail: the row is found by c.Type(), and
		// TestCommandTable checks that every row's commands report its type.
		spec.validate = func(c Command) error { return validate(c.(P)) }
	}
	if apply != nil {
		spec.apply = func(s *state, c Command) *Result { return apply(s, c.(P)) }
	}
	return spec
}

// registerJob builds the row of command type *C, which is addressed to the
// job its header names.
func registerJob[C any, P interface {
	*C
	Command
}](name string, validate func(P) error, apply func(*job, P) *Result, creates bool) cmdSpec {
	spec := register[C, P](name, validate, nil)
	spec.jobScoped, spec.creates = true, creates
	if apply != nil {
		spec.applyJob = func(j *job, c Command) *Result { return apply(j, c.(P)) }
	}
	return spec
}

// lookup returns the row of type t, or nil when this replica does not know t.
func lookup(t CmdType) *cmdSpec {
	if t >= numTypes || commands[t].new == nil {
		return nil
	}
	return &commands[t]
}

// String returns the command type's name.
func (t CmdType) String() string {
	if spec := lookup(t); spec != nil {
		return spec.name
	}
	return fmt.Sprintf("CmdType(%d)", uint8(t))
}

// commandVersion is the first byte of every encoded command. Version 2
// added Header.Job after the request id; version 1 entries, written before
// jobs existed, still decode, addressed to DefaultJob. Version 3, from
// Protocol3 on, adds the request id's Owner after the job; it is written
// only for a command that carries one, so every other command keeps its
// version 2 bytes. Version 4, from Protocol6 on, adds Header.Session and
// Header.Attach after the owner (which may then be zero); it is written
// only for a command under a session.
const commandVersion = 4

// RequestID identifies a client request for de-duplication: a client id and
// a sequence number the client never reuses for a different request. The
// zero RequestID disables de-duplication.
type RequestID struct {
	Client uuid.UUID
	Seq    uint64
	// Owner, from Protocol3 on, identifies the token the request came
	// with (a hash of it, never the token): the client id is bound to the
	// owner of its first request, and a request of another owner under
	// it is refused (ErrForeignClient). Zero on a cluster without tokens.
	Owner [16]byte
}

// IsZero reports whether r is the zero RequestID.
func (r RequestID) IsZero() bool { return r.Client == uuid.Nil && r.Seq == 0 }

// owned reports whether r carries an owner.
func (r RequestID) owned() bool { return r.Owner != [16]byte{} }

// Header is carried by every command: the proposer's clock, the request
// id of the client call that caused it and the job it addresses.
type Header struct {
	// Now is the proposing leader's time in unix nanoseconds.
	Now int64
	// Request de-duplicates client retries.
	Request RequestID
	// Job names the job a job's command addresses; "" means DefaultJob.
	// It must be empty on a cluster-wide command (Tick, RegisterNode,
	// RemoveNode, LeaderGrace, SetLimits).
	Job string
	// Session, from Protocol6 on, names the session the request was made
	// under (session.go), 0 for none: the request is refused with
	// ErrSessionExpired when the session has ended, and what it leases
	// (a task, the save-model lease) is the session's until it ends.
	Session uint64
	// Attach attaches the keys a register write stores to Session, so
	// that they are deleted when it ends. It needs a Session.
	Attach bool
}

// Hdr returns the header, so callers can stamp Now and the request id.
func (h *Header) Hdr() *Header { return h }

// Command is one state change. Encode turns it into a log entry.
type Command interface {
	Type() CmdType
	// Hdr returns the command's header.
	Hdr() *Header
	encode(e *encoder)
	decode(d *decoder)
}

// Chunk is one RecordIO chunk of a dataset: the file, the byte offset of the
// chunk header and the number of records in it.
type Chunk struct {
	Path    string
	Offset  int64
	Records uint32
}

// DatasetParams are the task-queue settings of a dataset.
type DatasetParams struct {
	// ChunksPerTask is how many consecutive chunks form one task (>= 1).
	ChunksPerTask int
	// TaskTimeout is the lease of a dispatched task.
	TaskTimeout time.Duration
	// FailureMax is how many failures or timeouts a task survives; one more
	// moves it to the failed queue for the rest of the pass.
	FailureMax int
	// Strict refuses a TaskFinished whose epoch is not the current lease.
	Strict bool
	// Shuffle dispatches each pass's tasks in the permutation of Seed and
	// the pass (shuffle.go); without it a pass is in id order. Seed also
	// seeds what trainers shuffle within a task. Both need Protocol8:
	// they are written at the end of SetDataset and DatasetCommit (not
	// with the other settings), only when one is set, so that a dataset
	// in id order with no seed reads the same everywhere.
	Shuffle bool
	Seed    uint64
	// Sources make the dataset a mixture (mixture.go): each names the
	// next run of the chunk list and gives it a weight. They need
	// Protocol9, and are written after the order.
	Sources []Source
}

// hasOrder reports whether p carries the fields of Protocol8.
func (p DatasetParams) hasOrder() bool { return p.Shuffle || p.Seed != 0 }

// TaskMeta identifies one dispatch of a task: its id and the epoch of the
// lease. Each dispatch increments the epoch.
type TaskMeta struct {
	ID    int `json:"id"`
	Epoch int `json:"epoch"`
}

// Registration is a registry entry of a member of the cluster: where its
// Raft and HTTP API listen and, from Protocol2 on, which release it runs.
type Registration struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	APIAddr  string `json:"api_addr"`
	// Version is the node's release (internal/version) and Protocol the
	// highest protocol level its build applies. A cluster below Protocol2
	// records neither: its replicas of earlier releases refuse a
	// RegisterNode that carries them (AtLevel leaves them out).
	Version  string `json:"version,omitempty"`
	Protocol uint64 `json:"protocol,omitempty"`
}

// hasRelease reports whether r carries the fields of Protocol2.
func (r Registration) hasRelease() bool { return r.Version != "" || r.Protocol != 0 }

// AtLevel returns r as a cluster at protocol level records it: without
// its release below Protocol2. A proposer registers AtLevel of the level
// its state is at, which the entry finds or exceeds when it is applied.
func (r Registration) AtLevel(level uint64) Registration {
	if level < Protocol2 {
		r.Version, r.Protocol = "", 0
	}
	return r
}

// SetDataset sets the dataset in one entry. Only the first dataset is
// honoured; later ones are accepted and change nothing.
type SetDataset struct {
	Header
	Params DatasetParams
	Chunks []Chunk
	// Patterns are the file patterns the chunks were indexed from, as the
	// caller gave them, kept with the dataset for display and for the
	// answer to a later SetDataset; none for a chunk list given as such.
	// They need Protocol4: they are encoded only when set, at the end, so
	// that older replicas read every SetDataset without them, and a
	// leader sends them only from that level.
	Patterns []string
}

// DatasetPart appends chunks to the staged upload UploadID. Part numbers
// start at 0 and must arrive in order.
type DatasetPart struct {
	Header
	UploadID string
	Part     uint32
	Chunks   []Chunk
}

// DatasetCommit turns the staged upload into the dataset, after checking
// that it holds exactly Parts parts and NumChunks chunks.
type DatasetCommit struct {
	Header
	UploadID  string
	Parts     uint32
	NumChunks uint32
	Params    DatasetParams
	// Patterns are SetDataset.Patterns of a dataset proposed in parts,
	// under the same rules.
	Patterns []string
}

// GetTask leases the next task of pass Pass.
type GetTask struct {
	Header
	Pass int
	// JobNumber, when not 0, is the number of the job the caller reads
	// (Task.JobNumber of an earlier answer): when the job named is not
	// that one, because it was deleted since and maybe created again, the
	// answer is ErrUnknownJob and nothing is leased. It needs Protocol2:
	// it is encoded only when set, so that older replicas read every
	// GetTask without it, and a leader sends it only from that level.
	JobNumber uint64
	// Finished, when its ID is not 0, is a task the caller finished
	// (Protocol9): the entry finishes it, exactly as a TaskFinished of it
	// would, before it leases the next task, so that a trainer reading
	// task after task costs one entry per task. Result.Finish says how
	// the finish went; whatever it says, the lease is answered as a
	// GetTask without it would be. It is written after JobNumber (0 when
	// unset), only when set.
	Finished TaskMeta
	// Count is how many tasks to lease (Protocol10): up to Count, in the
	// order a GetTask each would lease them, stopping early when no more
	// is available. 0 and 1 lease one. The first is Result.Task, the
	// rest Result.More; a GetTask that leases none is answered as one of
	// Count 1 is.
	Count int
	// MoreFinished are further tasks the caller finished (Protocol10),
	// with Finished set: each is finished after Finished, in order, as
	// a TaskFinished of it would be, and its outcome is in
	// Result.MoreFinish. A reader that leased a batch reports the batch
	// with its next GetTask.
	MoreFinished []TaskMeta
}

// TaskFinished reports a task done.
type TaskFinished struct {
	Header
	Meta TaskMeta
}

// TaskFailed reports a task failed; it is re-dispatched or set aside.
type TaskFailed struct {
	Header
	Meta TaskMeta
}

// RenewLease extends the lease of a pending task by its dataset's timeout.
type RenewLease struct {
	Header
	Meta TaskMeta
	// More are further leases to renew in the same entry (Protocol10),
	// for a caller that holds a batch without a session: with More the
	// answer is CodeOK and Result.Renewed says how each renewal went,
	// Meta's first, as a RenewLease of it alone would have.
	More []TaskMeta
}

// Tick advances the FSM clock and expires what is due.
type Tick struct {
	Header
}

// RequestSaveModel asks for the save-model lease for BlockDur.
type RequestSaveModel struct {
	Header
	TrainerID string
	BlockDur  time.Duration
}

// Join adds a member with data to an allgather group.
type Join struct {
	Header
	Group    string
	Member   uuid.UUID
	NumPeers int
	Data     []byte
	// Timeout is how long the group may wait to fill up before its members
	// are told (ErrAllGatherTimeoutExceeded); zero means DefaultTimeout.
	// Only the join that creates the group sets it.
	Timeout time.Duration
	// FailOnTimeout makes Timeout a hard deadline: the group fails for
	// every member when it passes. Without it the group is only marked
	// overdue and stays open, as in the original. Only the creating join sets
	// it.
	FailOnTimeout bool
}

// Leave removes a member from an allgather group.
type Leave struct {
	Header
	Group  string
	Member uuid.UUID
}

// RegisterNode registers a member: it adds or updates the member's entry
// in the node registry. It keeps the name of its entry type
// (TypeRegisterNode, "RegisterNode"), which the logs and the metrics'
// command label show.
type RegisterNode struct {
	Header
	Node Registration
}

// RemoveNode deletes a member's entry from the node registry, once the
// member has left the Raft configuration. It keeps the name of its entry
// type (TypeRemoveNode, "RemoveNode").
type RemoveNode struct {
	Header
	ID string
}

// LeaderGrace is proposed by a new leader: every deadline that falls before
// Now+Grace moves to Now+Grace, so leases do not expire because the cluster
// had no leader for a while.
type LeaderGrace struct {
	Header
	Grace time.Duration
}

// CreateJob creates the job its header names, empty. Creating a job that
// exists is ignored.
type CreateJob struct {
	Header
}

// DeleteJob deletes the job its header names, which must be named
// explicitly (not ""), with everything it holds: its dataset, tasks,
// uploads, save-model lease, register and allgather groups, whose watches
// then answer ErrClosed. An unknown job is answered ErrUnknownJob. A job
// created again under the name starts from nothing; DefaultJob may be
// deleted too.
type DeleteJob struct {
	Header
}

// SetLimits replaces the cluster-wide limits record.
type SetLimits struct {
	Header
	Limits Limits
}

// KVCompareAndSet stores Value under Key in the register of the job its
// header names when the key's version is Version, 0 meaning that the key
// must not exist; the value then gets a new version, one that no key of
// any job has had or will have. Otherwise it changes nothing and answers
// the key's current value and version. It creates its job when it stores.
type KVCompareAndSet struct {
	Header
	Key     string
	Version uint64
	Value   []byte
}

// KVDelete deletes Key from the register of the job its header names
// when the key exists and, unless Version is 0, is at Version. Otherwise it
// changes nothing. Either way it answers the key's version when it ran
// (0 for a key that does not exist). It never creates its job.
type KVDelete struct {
	Header
	Key string
	// Version, when not 0, makes the delete conditional: only the value
	// of that version is deleted.
	Version uint64
}

// KVDeletePrefix deletes every key of the job's register that starts with
// Prefix, and answers how many it deleted. A register holds at most
// MaxJobKVKeysCeiling keys, which bounds its work. It never creates its
// job.
type KVDeletePrefix struct {
	Header
	Prefix string
}

// KVAdd adds Delta to the integer that Key holds, as decimal ASCII, and
// stores the sum in its place under a new version; a key that does not
// exist counts as 0. It answers the sum. A value that is not a decimal
// integer, or a sum past 64 bits, is refused.
type KVAdd struct {
	Header
	Key   string
	Delta int64
}

// KVPair is one key of a KVMultiSet and the value to store under it.
type KVPair struct {
	Key   string
	Value []byte
}

// KVMultiSet stores each value under its key, all of them in one entry,
// each under a new version in the order given. The keys are distinct.
type KVMultiSet struct {
	Header
	Pairs []KVPair
}

// KVAppend appends Value to the value of Key, creating the key with Value
// when it does not exist, under a new version. It answers the value's new
// length.
type KVAppend struct {
	Header
	Key   string
	Value []byte
}

// KVCompareValue is the compare-and-set of torch's c10d stores, by value:
// it stores Desired under Key when the key holds Expected, or when the key
// does not exist and Expected is empty; the value then gets a new version.
// Otherwise it changes nothing. Either way it answers the key afterwards.
type KVCompareValue struct {
	Header
	Key      string
	Expected []byte
	Desired  []byte
}

// Type implementations.
func (*SetDataset) Type() CmdType       { return TypeSetDataset }
func (*DatasetPart) Type() CmdType      { return TypeDatasetPart }
func (*DatasetCommit) Type() CmdType    { return TypeDatasetCommit }
func (*GetTask) Type() CmdType          { return TypeGetTask }
func (*TaskFinished) Type() CmdType     { return TypeTaskFinished }
func (*TaskFailed) Type() CmdType       { return TypeTaskFailed }
func (*RenewLease) Type() CmdType       { return TypeRenewLease }
func (*Tick) Type() CmdType             { return TypeTick }
func (*RequestSaveModel) Type() CmdType { return TypeRequestSaveModel }
func (*Join) Type() CmdType             { return TypeJoin }
func (*Leave) Type() CmdType            { return TypeLeave }
func (*RegisterNode) Type() CmdType     { return TypeRegisterNode }
func (*RemoveNode) Type() CmdType       { return TypeRemoveNode }
func (*LeaderGrace) Type() CmdType      { return TypeLeaderGrace }
func (*CreateJob) Type() CmdType        { return TypeCreateJob }
func (*DeleteJob) Type() CmdType        { return TypeDeleteJob }
func (*SetLimits) Type() CmdType        { return TypeSetLimits }
func (*KVCompareAndSet) Type() CmdType  { return TypeKVCompareAndSet }
func (*KVDelete) Type() CmdType         { return TypeKVDelete }
func (*KVDeletePrefix) Type() CmdType   { return TypeKVDeletePrefix }
func (*KVAdd) Type() CmdType            { return TypeKVAdd }
func (*KVMultiSet) Type() CmdType       { return TypeKVMultiSet }
func (*KVAppend) Type() CmdType         { return TypeKVAppend }
func (*KVCompareValue) Type() CmdType   { return TypeKVCompareValue }

// Encode returns the log-entry form of c: a version byte, the type byte, the
// header (Now, the request id, the job) and the payload.
func Encode(c Command) []byte {
	e := &encoder{buf: make([]byte, 0, 64)}
	h := c.Hdr()
	version := byte(2)
	switch {
	case h.Session != 0 || h.Attach:
		version = 4
	case h.Request.owned():
		version = 3
	}
	e.byte(version)
	e.byte(byte(c.Type()))
	e.varint(h.Now)
	e.uuid(h.Request.Client)
	e.uvarint(h.Request.Seq)
	e.string(h.Job)
	if version >= 3 {
		e.uuid(h.Request.Owner)
	}
	if version >= 4 {
		e.uvarint(h.Session)
		e.bool(h.Attach)
	}
	c.encode(e)
	return e.buf
}

// errUnknownType is returned by Decode for an ignorable unknown type.
var errUnknownType = fmt.Errorf("%w: unknown ignorable command type", ErrInvalid)

// ErrUnsupported means a log entry was written by a newer version: its
// command version or its (non-ignorable) type is unknown here. A replica
// must not skip such an entry, or it would diverge from the replicas that
// apply it; the FSM halts instead (see FSM.Halted).
var ErrUnsupported = errors.New("log entry from a newer version")

// Decode parses a log entry written by Encode, or by a version 1 encoder
// (no job: DefaultJob's).
func Decode(b []byte) (Command, error) {
	d := &decoder{buf: b}
	v := d.byte()
	if d.err == nil && (v < 1 || v > commandVersion) {
		return nil, fmt.Errorf("%w: command version %d, this replica knows 1 to %d", ErrUnsupported, v, commandVersion)
	}
	t := CmdType(d.byte())
	if d.err != nil {
		return nil, invalidf("command: %v", d.err)
	}
	spec := lookup(t)
	if spec == nil {
		if t&IgnorableFlag != 0 {
			return nil, errUnknownType
		}
		return nil, fmt.Errorf("%w: command type %d is unknown here", ErrUnsupported, uint8(t))
	}
	c := spec.new()
	h := c.Hdr()
	h.Now = d.varint()
	h.Request.Client = d.uuid()
	h.Request.Seq = d.uvarint()
	if v >= 2 {
		h.Job = d.string()
	}
	if v >= 3 {
		h.Request.Owner = d.uuid()
		if d.err == nil && v == 3 && !h.Request.owned() {
			d.fail(errors.New("a version 3 command without an owner"))
		}
	}
	if v >= 4 {
		h.Session = d.uvarint()
		h.Attach = d.bool()
		if d.err == nil && h.Session == 0 {
			d.fail(errors.New("a version 4 command without a session"))
		}
	}
	c.decode(d)
	if err := d.done(); err != nil {
		return nil, invalidf("%v: %v", t, err)
	}
	if err := unsupportedLevel(c); err != nil {
		return nil, err
	}
	return c, nil
}

func (p *DatasetParams) encode(e *encoder) {
	e.int(p.ChunksPerTask)
	e.varint(int64(p.TaskTimeout))
	e.int(p.FailureMax)
	e.bool(p.Strict)
}

func (p *DatasetParams) decode(d *decoder) {
	p.ChunksPerTask = d.int()
	p.TaskTimeout = time.Duration(d.varint())
	p.FailureMax = d.int()
	p.Strict = d.bool()
}

// encodeChunks writes chunks with their paths interned: a path table in
// order of first use, then the count and a (path index, offset, records)
// triple per chunk. SplitChunks sizes entries with the same pieces.
func encodeChunks(e *encoder, chunks []Chunk) {
	idx := make(map[string]uint32)
	var paths []string
	// The chunks of a file usually come together: a path is looked up
	// once a run of them.
	index := make([]uint32, len(chunks))
	for i, c := range chunks {
		if i > 0 && c.Path == chunks[i-1].Path {
			index[i] = index[i-1]
			continue
		}
		p, ok := idx[c.Path]
		if !ok {
			p = uint32(len(paths))
			idx[c.Path] = p
			paths = append(paths, c.Path)
		}
		index[i] = p
	}
	e.strings(paths)
	e.uvarint(uint64(len(chunks)))
	for i, c := range chunks {
		encodeChunk(e, index[i], c)
	}
}

// encodeChunk writes one chunk's triple, its path as an index into the
// entry's path table.
func encodeChunk(e *encoder, path uint32, c Chunk) {
	e.uint32(path)
	e.varint(c.Offset)
	e.uint32(c.Records)
}

func decodeChunks(d *decoder) []Chunk {
	paths := d.strings()
	n := d.length(3)
	if d.err != nil || n == 0 {
		return nil
	}
	chunks := make([]Chunk, n)
	for i := range chunks {
		p := d.uint32()
		if d.err == nil && int(p) >= len(paths) {
			d.fail(fmt.Errorf("chunk %d: path index %d out of range", i, p))
		}
		if d.err != nil {
			return nil
		}
		chunks[i] = Chunk{Path: paths[p], Offset: d.varint(), Records: d.uint32()}
	}
	return chunks
}

func (c *SetDataset) encode(e *encoder) {
	c.Params.encode(e)
	encodeChunks(e, c.Chunks)
	encodeTrailer(e, c.Patterns, c.Params)
}

func (c *SetDataset) decode(d *decoder) {
	c.Params.decode(d)
	c.Chunks = decodeChunks(d)
	c.Patterns = decodeTrailer(d, &c.Params)
}

// level is the protocol level the command's fields need: patterns need
// Protocol4, a seed or shuffle Protocol8.
func (c *SetDataset) level() uint64 { return trailerLevel(c.Patterns, c.Params) }

// encodeTrailer writes the optional fields at the end of SetDataset and
// DatasetCommit: the patterns (Protocol4), then the order (Protocol8:
// Shuffle and Seed). Each is written only when set, except that a
// command with an order and no patterns writes an empty list of
// patterns before it, so that every command has one encoding.
func encodeTrailer(e *encoder, patterns []string, p DatasetParams) {
	if !p.hasOrder() && len(p.Sources) == 0 {
		encodePatterns(e, patterns)
		return
	}
	e.strings(patterns)
	e.bool(p.Shuffle)
	e.uvarint(p.Seed)
	if len(p.Sources) > 0 {
		encodeSources(e, p.Sources)
	}
}

// decodeTrailer reads what encodeTrailer wrote into p's order, and
// returns the patterns.
func decodeTrailer(d *decoder, p *DatasetParams) []string {
	if d.empty() {
		return nil
	}
	patterns := d.strings()
	if d.err != nil {
		return nil
	}
	if d.empty() {
		if len(patterns) == 0 {
			d.fail(errors.New("an empty list of patterns"))
		}
		return patterns
	}
	p.Shuffle = d.bool()
	p.Seed = d.uvarint()
	if !d.empty() {
		p.Sources = decodeSources(d)
		if d.err == nil && len(p.Sources) == 0 {
			d.fail(errors.New("an empty list of sources"))
		}
	}
	if d.err == nil && !p.hasOrder() && len(p.Sources) == 0 {
		d.fail(errors.New("an order of no seed in id order"))
	}
	if len(patterns) == 0 {
		patterns = nil
	}
	return patterns
}

// trailerLevel is the protocol level of a command with these patterns
// and settings.
func trailerLevel(patterns []string, p DatasetParams) uint64 {
	if len(p.Sources) > 0 {
		return Protocol9
	}
	if p.hasOrder() {
		return Protocol8
	}
	return patternsLevel(patterns)
}

// encodePatterns writes a dataset's patterns, a field added at Protocol4
// at the end of its command, only when there are some, so that a command
// without them reads the same everywhere.
func encodePatterns(e *encoder, patterns []string) {
	if len(patterns) > 0 {
		e.strings(patterns)
	}
}

// patternsLevel is the protocol level a command carrying patterns needs.
func patternsLevel(patterns []string) uint64 {
	if len(patterns) > 0 {
		return Protocol4
	}
	return Protocol1
}

func (c *DatasetPart) encode(e *encoder) {
	e.string(c.UploadID)
	e.uint32(c.Part)
	encodeChunks(e, c.Chunks)
}

func (c *DatasetPart) decode(d *decoder) {
	c.UploadID = d.string()
	c.Part = d.uint32()
	c.Chunks = decodeChunks(d)
}

func (c *DatasetCommit) encode(e *encoder) {
	e.string(c.UploadID)
	e.uint32(c.Parts)
	e.uint32(c.NumChunks)
	c.Params.encode(e)
	encodeTrailer(e, c.Patterns, c.Params)
}

func (c *DatasetCommit) decode(d *decoder) {
	c.UploadID = d.string()
	c.Parts = d.uint32()
	c.NumChunks = d.uint32()
	c.Params.decode(d)
	c.Patterns = decodeTrailer(d, &c.Params)
}

// level is the protocol level the command's fields need: patterns need
// Protocol4, a seed or shuffle Protocol8.
func (c *DatasetCommit) level() uint64 { return trailerLevel(c.Patterns, c.Params) }

func (c *GetTask) encode(e *encoder) {
	batch := c.batched()
	e.int(c.Pass)
	if c.JobNumber != 0 || c.Finished.ID != 0 || batch {
		e.uvarint(c.JobNumber)
	}
	if c.Finished.ID != 0 || batch {
		encodeMeta(e, c.Finished)
	}
	if batch {
		e.int(c.Count)
		e.uvarint(uint64(len(c.MoreFinished)))
		for _, m := range c.MoreFinished {
			encodeMeta(e, m)
		}
	}
}

// batched reports whether the GetTask has fields of Protocol10: a Count
// above 1 or more finishes.
func (c *GetTask) batched() bool { return c.Count > 1 || len(c.MoreFinished) > 0 }

// level is the protocol level the command's fields need: a finished
// task needs Protocol9, a batch Protocol10.
func (c *GetTask) level() uint64 {
	switch {
	case c.batched():
		return Protocol10
	case c.Finished.ID != 0:
		return Protocol9
	}
	return Protocol1
}

// decode reads a GetTask; one written without the job's number, as every
// one before Protocol2, reads the whole job as before. A finished task of
// id 0 is written only before a batch's fields.
func (c *GetTask) decode(d *decoder) {
	c.Pass = d.int()
	if !d.empty() {
		c.JobNumber = d.uvarint()
	}
	if d.empty() {
		return
	}
	c.Finished = decodeMeta(d)
	if d.empty() {
		if d.err == nil && c.Finished.ID == 0 {
			d.fail(errors.New("a finished task of id 0"))
		}
		return
	}
	c.Count = d.int()
	for range d.length(2) {
		c.MoreFinished = append(c.MoreFinished, decodeMeta(d))
	}
	if d.err == nil && !c.batched() {
		d.fail(errors.New("a GetTask batch of one task and no finishes"))
	}
}

func encodeMeta(e *encoder, m TaskMeta)   { e.int(m.ID); e.int(m.Epoch) }
func decodeMeta(d *decoder) TaskMeta      { return TaskMeta{ID: d.int(), Epoch: d.epoch()} }
func (c *TaskFinished) encode(e *encoder) { encodeMeta(e, c.Meta) }
func (c *TaskFinished) decode(d *decoder) { c.Meta = decodeMeta(d) }
func (c *TaskFailed) encode(e *encoder)   { encodeMeta(e, c.Meta) }
func (c *TaskFailed) decode(d *decoder)   { c.Meta = decodeMeta(d) }
func (c *RenewLease) encode(e *encoder) {
	encodeMeta(e, c.Meta)
	if len(c.More) > 0 {
		e.uvarint(uint64(len(c.More)))
		for _, m := range c.More {
			encodeMeta(e, m)
		}
	}
}

// decode reads a RenewLease; More, of Protocol10, is written only when
// set, and then holds at least one lease.
func (c *RenewLease) decode(d *decoder) {
	c.Meta = decodeMeta(d)
	if d.empty() {
		return
	}
	for range d.length(2) {
		c.More = append(c.More, decodeMeta(d))
	}
	if d.err == nil && len(c.More) == 0 {
		d.fail(errors.New("a RenewLease of no more leases"))
	}
}

// level is the protocol level the command's fields need: more leases
// need Protocol10.
func (c *RenewLease) level() uint64 {
	if len(c.More) > 0 {
		return Protocol10
	}
	return Protocol1
}

func (c *Tick) encode(*encoder) {}
func (c *Tick) decode(*decoder) {}

func (c *RequestSaveModel) encode(e *encoder) {
	e.string(c.TrainerID)
	e.varint(int64(c.BlockDur))
}

func (c *RequestSaveModel) decode(d *decoder) {
	c.TrainerID = d.string()
	c.BlockDur = time.Duration(d.varint())
}

func (c *Join) encode(e *encoder) {
	e.string(c.Group)
	e.uuid(c.Member)
	e.int(c.NumPeers)
	e.bytes(c.Data)
	e.varint(int64(c.Timeout))
	e.bool(!c.FailOnTimeout)
}

// decode reads a Join. The trailing byte says whether the group stays open
// past its timeout; a join written before it existed has none, and its
// group fails on timeout, as groups then did.
func (c *Join) decode(d *decoder) {
	c.Group = d.string()
	c.Member = d.uuid()
	c.NumPeers = d.int()
	c.Data = d.bytes()
	c.Timeout = time.Duration(d.varint())
	c.FailOnTimeout = d.empty() || !d.bool()
}

func (c *Leave) encode(e *encoder) { e.string(c.Group); e.uuid(c.Member) }
func (c *Leave) decode(d *decoder) { c.Group = d.string(); c.Member = d.uuid() }

// encode writes the registration; its release, added at Protocol2, is
// written only when set, as optional trailing fields that replicas of
// earlier releases refuse (they answer trailing bytes invalid), so that a
// registration without it reads the same everywhere.
func (c *RegisterNode) encode(e *encoder) {
	e.string(c.Node.ID)
	e.string(c.Node.RaftAddr)
	e.string(c.Node.APIAddr)
	if c.Node.hasRelease() {
		e.string(c.Node.Version)
		e.uvarint(c.Node.Protocol)
	}
}

func (c *RegisterNode) decode(d *decoder) {
	c.Node = Registration{ID: d.string(), RaftAddr: d.string(), APIAddr: d.string()}
	if !d.empty() {
		c.Node.Version = d.string()
		c.Node.Protocol = d.uvarint()
	}
}

// level is the protocol level the command's fields need: a registration
// with a release needs Protocol2.
func (c *RegisterNode) level() uint64 {
	if c.Node.hasRelease() {
		return Protocol2
	}
	return Protocol1
}

func (c *RemoveNode) encode(e *encoder)  { e.string(c.ID) }
func (c *RemoveNode) decode(d *decoder)  { c.ID = d.string() }
func (c *LeaderGrace) encode(e *encoder) { e.varint(int64(c.Grace)) }
func (c *LeaderGrace) decode(d *decoder) { c.Grace = time.Duration(d.varint()) }
func (c *CreateJob) encode(*encoder)     {}
func (c *CreateJob) decode(*decoder)     {}
func (c *DeleteJob) encode(*encoder)     {}
func (c *DeleteJob) decode(*decoder)     {}

// encode writes the limits. MaxJobKVKeys and MaxKVValueBytes, added later,
// are written only when one is set, so that replicas that predate them
// read the entry a leader with the default register limits proposes.
func (c *SetLimits) encode(e *encoder) {
	c.Limits.encode(e)
	if c.Limits.MaxJobKVKeys != 0 || c.Limits.MaxKVValueBytes != 0 {
		c.Limits.encodeKV(e)
	}
}

// decode reads a SetLimits; one without the register limits leaves them
// at their defaults.
func (c *SetLimits) decode(d *decoder) {
	c.Limits.decode(d)
	if !d.empty() {
		c.Limits.decodeKV(d)
	}
}

// encode writes the limits that existed before the register's, as the
// snapshots of every version since 3 hold them.
func (l *Limits) encode(e *encoder) {
	e.int(l.MaxJobs)
	e.int(l.MaxJobTasks)
	e.int(l.MaxJobChunks)
	e.int(l.MaxJobGroups)
	e.varint(l.MaxJobGroupBytes)
	e.varint(l.MaxStateBytes)
	e.varint(int64(l.JobTTL))
}

func (l *Limits) decode(d *decoder) {
	l.MaxJobs = d.int()
	l.MaxJobTasks = d.int()
	l.MaxJobChunks = d.int()
	l.MaxJobGroups = d.int()
	l.MaxJobGroupBytes = d.varint()
	l.MaxStateBytes = d.varint()
	l.JobTTL = time.Duration(d.varint())
}

// encodeKV writes the register's limits.
func (l *Limits) encodeKV(e *encoder) {
	e.int(l.MaxJobKVKeys)
	e.varint(l.MaxKVValueBytes)
}

func (l *Limits) decodeKV(d *decoder) {
	l.MaxJobKVKeys = d.int()
	l.MaxKVValueBytes = d.varint()
}

func (c *KVCompareAndSet) encode(e *encoder) {
	e.string(c.Key)
	e.uvarint(c.Version)
	e.bytes(c.Value)
}

func (c *KVCompareAndSet) decode(d *decoder) {
	c.Key = d.string()
	c.Version = d.uvarint()
	c.Value = d.bytes()
}

func (c *KVDelete) encode(e *encoder) { e.string(c.Key); e.uvarint(c.Version) }
func (c *KVDelete) decode(d *decoder) { c.Key = d.string(); c.Version = d.uvarint() }

func (c *KVDeletePrefix) encode(e *encoder) { e.string(c.Prefix) }
func (c *KVDeletePrefix) decode(d *decoder) { c.Prefix = d.string() }

func (c *KVAdd) encode(e *encoder) { e.string(c.Key); e.varint(c.Delta) }
func (c *KVAdd) decode(d *decoder) { c.Key = d.string(); c.Delta = d.varint() }

func (c *KVMultiSet) encode(e *encoder) {
	e.uvarint(uint64(len(c.Pairs)))
	for _, p := range c.Pairs {
		e.string(p.Key)
		e.bytes(p.Value)
	}
}

func (c *KVMultiSet) decode(d *decoder) {
	n := d.length(2) // a key's length and a value's, at least
	if d.err != nil || n == 0 {
		return
	}
	c.Pairs = make([]KVPair, n)
	for i := range c.Pairs {
		c.Pairs[i] = KVPair{Key: d.string(), Value: d.bytes()}
	}
}

func (c *KVAppend) encode(e *encoder) { e.string(c.Key); e.bytes(c.Value) }
func (c *KVAppend) decode(d *decoder) { c.Key = d.string(); c.Value = d.bytes() }

func (c *KVCompareValue) encode(e *encoder) {
	e.string(c.Key)
	e.bytes(c.Expected)
	e.bytes(c.Desired)
}

func (c *KVCompareValue) decode(d *decoder) {
	c.Key = d.string()
	c.Expected = d.bytes()
	c.Desired = d.bytes()
}
