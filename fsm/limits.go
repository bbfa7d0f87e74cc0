package fsm

import (
	"math"
	"time"
)

// Limits that every replica enforces in Apply. The wire API enforces tighter
// ones first; these make sure that no command, whatever its origin, can grow
// the state without bound.
const (
	// MaxChunks bounds the chunks of one dataset.
	MaxChunks = 1 << 26
	// MaxPathLen bounds a chunk's file path.
	MaxPathLen = 4096
	// MaxTaskTimeout bounds a dataset's task lease.
	MaxTaskTimeout = 7 * 24 * time.Hour
	// MaxFailureMax bounds a dataset's failureMax.
	MaxFailureMax = 1 << 20
	// MaxUploads bounds the dataset uploads staged at once.
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
	// MaxGroups bounds the allgather groups that exist at once.
	MaxGroups = 1 << 14
	// MaxGroupTimeout bounds an allgather group's timeout.
	MaxGroupTimeout = 7 * 24 * time.Hour
	// DefaultTimeout is the allgather timeout when a join gives none.
	DefaultTimeout = 10 * time.Minute
	// AbandonedGroupTimeout forgets an overdue open group that got no join
	// for this long, so that groups whose trainers are gone do not pile
	// up; their remaining watches see ErrClosed.
	AbandonedGroupTimeout = 24 * time.Hour

	// MaxNodes bounds the node registry.
	MaxNodes = 64
	// MaxGrace bounds LeaderGrace.
	MaxGrace = time.Hour

	// DedupPerClient is how many recent requests are remembered per client.
	DedupPerClient = 16
	// DedupMaxClients bounds the clients remembered at once; the least
	// recently seen is forgotten first.
	DedupMaxClients = 1 << 14
	// DedupWindow forgets a client not seen for this long in FSM time.
	DedupWindow = 30 * time.Minute
)

// maxNow bounds Header.Now (it falls in the year 2116), so that the clock
// plus any duration the limits allow cannot overflow int64.
const maxNow = math.MaxInt64 / 2
