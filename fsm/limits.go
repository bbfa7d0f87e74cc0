package fsm

import (
	"math"
	"time"
)

// Limits that every replica enforces in Apply. The wire API enforces tighter
// ones first; these make sure that no command, whatever its origin, can grow
// the state without bound.
const (
	// MaxChunks bounds the chunks of one dataset, and of one job's
	// staged uploads together; it is the ceiling of Limits.MaxJobChunks and
	// MaxJobTasks.
	MaxChunks = 1 << 26
	// MaxPathLen bounds a chunk's file path, and a dataset's pattern.
	MaxPathLen = 4096
	// MaxPatterns bounds the patterns a dataset records (SetDataset and
	// DatasetCommit), and MaxPatternBytes their length together, so that
	// they fit the entry of a dataset's last command with its chunks.
	MaxPatterns     = 1024
	MaxPatternBytes = 64 << 10
	// MaxTaskTimeout bounds a dataset's task lease.
	MaxTaskTimeout = 7 * 24 * time.Hour
	// MaxFailureMax bounds a dataset's failureMax.
	MaxFailureMax = 1 << 20
	// MaxUploads bounds the dataset uploads a job stages at once.
	MaxUploads = 8
	// UploadIdleTimeout drops a staged upload that got no part for this long.
	UploadIdleTimeout = 10 * time.Minute

	// MaxIDLen bounds group ids, trainer ids, node ids, upload ids and
	// addresses.
	MaxIDLen = 512
	// MaxBlockDur bounds a save-model lease.
	MaxBlockDur = 24 * time.Hour

	// MaxPeers bounds an allgather group's numPeers.
	MaxPeers = 1 << 14
	// MaxMemberData bounds the data of one allgather member.
	MaxMemberData = 1 << 20
	// MaxGroupData bounds the data of all members of a group together.
	MaxGroupData = 64 << 20
	// MaxGroups bounds the allgather groups of a job: the ceiling of
	// Limits.MaxJobGroups.
	MaxGroups = 1 << 14
	// MaxGroupTimeout bounds an allgather group's timeout.
	MaxGroupTimeout = 7 * 24 * time.Hour
	// DefaultTimeout is the allgather timeout when a join gives none.
	DefaultTimeout = 10 * time.Minute
	// AbandonedGroupTimeout forgets an overdue open group that got no join
	// for this long, so that groups whose trainers are gone do not pile
	// up; their remaining watches see ErrClosed.
	AbandonedGroupTimeout = 24 * time.Hour
	// ResultRetention is, from Protocol2, the least time the outcome of
	// a finished allgather round is kept after it became final: a
	// complete group's data, and which generations a round that timed
	// out answers ErrAllGatherTimeoutExceeded. The outcome is kept for
	// the group's timeout or ResultRetention, the longer, so that a
	// member still polling within its client's retry budget (the Go and
	// Python clients retry for their retry budget, two minutes by
	// default, or the group's timeout, the longer) finds it.
	ResultRetention = 5 * time.Minute

	// MaxNodes bounds the node registry.
	MaxNodes = 64
	// MaxGrace bounds LeaderGrace.
	MaxGrace = time.Hour

	// MaxTasksPerGet bounds a GetTask's Count, the tasks it leases, the
	// finishes it carries (Finished and MoreFinished together), and the
	// leases a RenewLease renews (Meta and More together).
	MaxTasksPerGet = 32

	// DedupPerClient is how many recent requests are remembered per client.
	DedupPerClient = 16
	// DedupMaxClients bounds the clients remembered at once at Protocol1,
	// where the least recently seen is forgotten first, however recently.
	DedupMaxClients = 1 << 14
	// DedupMaxActiveClients bounds the clients remembered at once from
	// Protocol2 on, where none is forgotten within DedupWindow: a new
	// client id is refused (ErrTooManyClients) while this many ids used
	// within the window are held. It is sized for 10,000 trainers of about
	// a dozen ids each (a client and its lanes; each DataLoader worker is a
	// client of its own) and a restart of all of them, whose old ids stay
	// for the window: about 240,000 ids.
	DedupMaxActiveClients = 1 << 18
	// DedupWindow forgets a client not seen for this long in FSM time.
	// Clients bound their retries of a write well within it.
	DedupWindow = 30 * time.Minute
)

// Jobs and their replicated limits (Limits, set by SetLimits). A limit of
// 0 in the record means its default here; no limit may be set above its
// ceiling.
const (
	// MaxJobNameLen bounds a job name, a DNS label.
	MaxJobNameLen = 63
	// DefaultJob is the job of a command that names none: every command
	// written before jobs existed, and every client that knows no jobs.
	DefaultJob = "default"

	// DefaultMaxJobs is the default of Limits.MaxJobs.
	DefaultMaxJobs = 1024
	// MaxJobsCeiling is the ceiling of Limits.MaxJobs.
	MaxJobsCeiling = 1 << 16
	// DefaultMaxJobTasks is the default of Limits.MaxJobTasks: the
	// ceiling, so that a cluster without limits set accepts every dataset
	// it accepted before jobs existed. MaxStateBytes bounds the sum.
	DefaultMaxJobTasks = MaxChunks
	// DefaultMaxJobChunks is the default of Limits.MaxJobChunks, the
	// ceiling as well.
	DefaultMaxJobChunks = MaxChunks
	// DefaultMaxJobGroups is the default of Limits.MaxJobGroups, the
	// ceiling as well.
	DefaultMaxJobGroups = MaxGroups
	// DefaultMaxJobGroupBytes is the default of Limits.MaxJobGroupBytes.
	DefaultMaxJobGroupBytes = 256 << 20
	// MaxJobGroupBytesCeiling is the ceiling of Limits.MaxJobGroupBytes: every
	// group of a job full.
	MaxJobGroupBytesCeiling = MaxGroups * MaxGroupData
	// DefaultMaxStateBytes is the default of Limits.MaxStateBytes.
	DefaultMaxStateBytes = 4 << 30
	// MaxStateBytesCeiling is the ceiling of Limits.MaxStateBytes.
	MaxStateBytesCeiling = 1 << 50
	// MaxJobTTL is the ceiling of Limits.JobTTL.
	MaxJobTTL = 365 * 24 * time.Hour

	// MaxKVKeyLen bounds a key of a job's register.
	MaxKVKeyLen = 256
	// DefaultMaxJobKVKeys is the default of Limits.MaxJobKVKeys.
	DefaultMaxJobKVKeys = 1024
	// MaxJobKVKeysCeiling is the ceiling of Limits.MaxJobKVKeys.
	MaxJobKVKeysCeiling = 1 << 16
	// DefaultMaxKVValueBytes is the default of Limits.MaxKVValueBytes.
	DefaultMaxKVValueBytes = 1 << 20
	// MaxKVValueBytesCeiling is the ceiling of Limits.MaxKVValueBytes, and bounds
	// the value of any KVCompareAndSet.
	MaxKVValueBytesCeiling = 16 << 20
)

// The state's size estimate (Limits.MaxStateBytes, JobInfo.Bytes,
// Stats.StateBytes) is computed from content sizes alone, the same on every
// replica: per job estJob plus its name; per task estTask; per chunk
// estChunk; per distinct file path estPath plus its bytes, in the dataset
// and in each upload; per pattern of the dataset estPath plus its bytes;
// per upload estUpload plus its id; the save-model
// holder's id; per allgather group estGroup plus its id, and per member
// estMember plus its data; per round of a group that timed out and is
// kept, estRound plus the group's id and estRoundMember per member; per
// register key estKVKey plus its key and its value. It approximates
// memory, it does not measure it.
const (
	estJob    = 512
	estTask   = 32
	estChunk  = 16
	estPath   = 32
	estUpload = 128
	estGroup  = 256
	estMember = 64
	estKVKey  = 64
	// A round that timed out (allgather.go) keeps no data: estRound plus
	// its group id, and estRoundMember per member.
	estRound       = 64
	estRoundMember = 32
)

// Limits are the replicated, cluster-wide limits on jobs, set by
// SetLimits (a new cluster's first leader proposes its configuration, an
// operator changes it; see internal/leader.TakeOver). A
// zero field means the built-in default (DefaultMaxJobs, ...; JobTTL 0 is
// off). A command that would go past a limit is rejected with
// ErrLimitExceeded (CodeLimit), whose message names the limit, and changes
// nothing. Lowering a limit below what exists removes nothing: it refuses
// growth from then on.
//
// Each limit has one name: its serve and limits set flag
// (--max-kv-value-bytes), its JSON name here and on the wire
// (max_kv_value_bytes), which messages use, and its Go field
// (MaxKVValueBytes). Log entries and snapshots write the fields by
// position (SetLimits.encode), never by name.
type Limits struct {
	// MaxJobs bounds the jobs that exist at once.
	MaxJobs int `json:"max_jobs"`
	// MaxJobTasks bounds the tasks of a job's dataset.
	MaxJobTasks int `json:"max_job_tasks"`
	// MaxJobChunks bounds the chunks of a job's dataset, and the chunks its
	// staged uploads hold together.
	MaxJobChunks int `json:"max_job_chunks"`
	// MaxJobGroups bounds the allgather groups of a job.
	MaxJobGroups int `json:"max_job_groups"`
	// MaxJobGroupBytes bounds the member data of all allgather groups of a
	// job together, in bytes.
	MaxJobGroupBytes int64 `json:"max_job_group_bytes"`
	// MaxStateBytes bounds the estimated size of the whole state (see
	// JobInfo.Bytes), in bytes.
	MaxStateBytes int64 `json:"max_state_bytes"`
	// JobTTL, when positive, deletes a job (Tick) that has no task lease
	// out, no save-model holder and no allgather group, and that no
	// command addressed for JobTTL of FSM time. Reading the register
	// does not count as use; its keys do not keep a job.
	JobTTL time.Duration `json:"job_ttl"`
	// MaxJobKVKeys bounds the keys of a job's register.
	MaxJobKVKeys int `json:"max_job_kv_keys"`
	// MaxKVValueBytes bounds the value of one register key, in bytes.
	MaxKVValueBytes int64 `json:"max_kv_value_bytes"`
}

// Effective returns l with every zero field replaced by its default.
func (l Limits) Effective() Limits {
	def := func(v, d int64) int64 {
		if v == 0 {
			return d
		}
		return v
	}
	return Limits{
		MaxJobs:          int(def(int64(l.MaxJobs), DefaultMaxJobs)),
		MaxJobTasks:      int(def(int64(l.MaxJobTasks), DefaultMaxJobTasks)),
		MaxJobChunks:     int(def(int64(l.MaxJobChunks), DefaultMaxJobChunks)),
		MaxJobGroups:     int(def(int64(l.MaxJobGroups), DefaultMaxJobGroups)),
		MaxJobGroupBytes: def(l.MaxJobGroupBytes, DefaultMaxJobGroupBytes),
		MaxStateBytes:    def(l.MaxStateBytes, DefaultMaxStateBytes),
		JobTTL:           l.JobTTL,
		MaxJobKVKeys:     int(def(int64(l.MaxJobKVKeys), DefaultMaxJobKVKeys)),
		MaxKVValueBytes:  def(l.MaxKVValueBytes, DefaultMaxKVValueBytes),
	}
}

// Check reports a field below zero or above its ceiling: the limits a
// SetLimits command would be refused for.
func (l Limits) Check() error { return l.validate() }

// validate checks every field against zero and its ceiling.
func (l Limits) validate() error {
	for _, f := range []struct {
		name     string
		v, limit int64
	}{
		{"max_jobs", int64(l.MaxJobs), MaxJobsCeiling},
		{"max_job_tasks", int64(l.MaxJobTasks), MaxChunks},
		{"max_job_chunks", int64(l.MaxJobChunks), MaxChunks},
		{"max_job_groups", int64(l.MaxJobGroups), MaxGroups},
		{"max_job_group_bytes", l.MaxJobGroupBytes, MaxJobGroupBytesCeiling},
		{"max_state_bytes", l.MaxStateBytes, MaxStateBytesCeiling},
		{"job_ttl", int64(l.JobTTL), int64(MaxJobTTL)},
		{"max_job_kv_keys", int64(l.MaxJobKVKeys), MaxJobKVKeysCeiling},
		{"max_kv_value_bytes", l.MaxKVValueBytes, MaxKVValueBytesCeiling},
	} {
		if f.v < 0 || f.v > f.limit {
			return invalidf("limit %s %d out of range [0, %d]", f.name, f.v, f.limit)
		}
	}
	return nil
}

// maxNow bounds Header.Now (it falls in the year 2116), so that the clock
// plus any duration the limits allow cannot overflow int64.
const maxNow = math.MaxInt64 / 2
