package httpapi

import (
	"fmt"
	"net/http"
	"time"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/auth"
	"github.com/raftmaster/raftmaster/internal/quota"
	"github.com/raftmaster/raftmaster/objstore"
	"github.com/raftmaster/raftmaster/recordio"
	"github.com/raftmaster/raftmaster/rpc"
)

// Defaults of Config; a zero field takes its default.
const (
	DefaultMaxBodyBytes        = 1 << 20
	DefaultMaxDatasetBodyBytes = 256 << 20
	DefaultMaxMemberData       = 256 << 10
	DefaultMaxNumPeers         = 4096
	DefaultMaxGlobs            = 64
	DefaultMaxFiles            = 100000
	DefaultMaxChunks           = fsm.MaxChunks
	DefaultMaxWatchWait        = 60 * time.Second
	DefaultWatchWait           = 30 * time.Second
	DefaultMaxDuration         = 24 * time.Hour
	DefaultFanoutTimeout       = 2 * time.Second
	DefaultLeaderWait          = 3 * time.Second
)

// DefaultDatasetParams are 10 chunks a task and 3 failures, as the
// original master's flags, and a 1-minute lease: the client's record
// reader renews the lease of the task it holds, so a slow trainer keeps
// it and a dead trainer's task comes back within a minute (the original's
// 20 minutes stalled the pass that long).
var DefaultDatasetParams = fsm.DatasetParams{ChunksPerTask: 10, TaskTimeout: time.Minute, FailureMax: 3}

// Config configures a Server.
type Config struct {
	// DatasetDefaults fill the zero settings of a SetDatasetRequest (the
	// server's --chunks-per-task, --task-timeout and --failure-max). Zero
	// ChunksPerTask and TaskTimeout take DefaultDatasetParams' values; a
	// zero FailureMax is a real setting, a negative one takes the default.
	DatasetDefaults fsm.DatasetParams
	// Limits bound what one request may ask for.
	Limits Limits
	// HTTPClient asks the other members for their status in GET
	// /v1/cluster; nil means a private client.
	HTTPClient *http.Client
	// FanoutTimeout bounds each member's status request.
	FanoutTimeout time.Duration
	// LeaderWait bounds how long a request that needs the leader waits
	// for one during an election before it is answered no_leader.
	LeaderWait time.Duration
	// Tokens, when set, is the set of bearer tokens the API requires:
	// every endpoint but the public ones answers 401 without a known
	// token and 403 when its role may not use it (rpc.Endpoint.Access),
	// or, on a job's endpoint, when it does not cover the job.
	Tokens Tokens
	// Observer, when set, is told of every request, redirect and command
	// outcome (for metrics).
	Observer Observer
	// DatasetRoot, when set, is the directory the leader indexes datasets
	// under: relative patterns are taken under it, and a file outside it
	// (after cleaning and resolving symbolic links) is refused unread.
	DatasetRoot string
	// ObjectStore reads the datasets of object-store patterns (s3://,
	// gs://); nil refuses them.
	ObjectStore *objstore.Store
	// DatasetBuckets lists the object-store locations, s3://bucket or
	// s3://bucket/prefix (gs:// likewise), that datasets may be read
	// from: an object-store pattern whose literal part is not under one
	// of them is refused unread. Empty refuses every object-store
	// pattern.
	DatasetBuckets []string
	// WriteQuota bounds the writes (the endpoints of rpc.Endpoint.Write)
	// the leader accepts from each token, or from each source address
	// when Tokens is nil: past it a write is answered 429 rate_limited
	// with Retry-After and changes nothing. The zero Rate is no quota;
	// serve sets DefaultWriteQuota when tokens are required.
	WriteQuota quota.Rate
	// ClientQuota bounds, in the same way, the new client identities
	// (request ids of a client id the cluster does not hold) each token
	// or address may start; serve sets DefaultClientQuota when tokens are
	// required.
	ClientQuota quota.Rate
	// Glob bounds the expansion of a dataset's patterns: the wildcard
	// levels of a pattern, the directory entries read and the time taken.
	Glob recordio.GlobLimits
	// SessionTTL is the TTL of a session whose opening names none (serve
	// --session-ttl); zero means rpc.DefaultSessionTTL. It is within
	// fsm.MinSessionTTL and fsm.MaxSessionTTL (Validate).
	SessionTTL time.Duration
}

// The default quotas of a cluster that requires tokens, per token. They
// let 10,000 trainers of one job token, each with a few identities, start
// or restart all at once (a burst) and then write thousands of times a
// second together.
var (
	DefaultWriteQuota  = quota.Rate{PerSecond: 10000, Burst: 100000}
	DefaultClientQuota = quota.Rate{PerSecond: 2048, Burst: 131072}
)

// Limits bound requests; the FSM's own limits (package fsm) still apply
// and are never loosened by larger values here.
type Limits struct {
	// MaxBodyBytes bounds a request body, except SetDataset's.
	MaxBodyBytes int64
	// MaxDatasetBodyBytes bounds a SetDataset body, which may carry a
	// chunk list.
	MaxDatasetBodyBytes int64
	// MaxMemberData bounds an allgather member's data (at most
	// fsm.MaxMemberData).
	MaxMemberData int
	// MaxNumPeers bounds an allgather group's size (at most fsm.MaxPeers).
	MaxNumPeers int
	// MaxGlobs bounds the file patterns of a dataset (at most
	// fsm.MaxPatterns).
	MaxGlobs int
	// MaxFiles bounds the files the patterns may match.
	MaxFiles int
	// MaxChunks bounds a dataset's chunks, indexed or sent by the client
	// (at most fsm.MaxChunks).
	MaxChunks int
	// MaxWatchWait bounds the wait of one allgather watch poll.
	MaxWatchWait time.Duration
	// MaxDuration bounds a save-model block_dur, a task timeout and an
	// allgather timeout, below the FSM's own bounds.
	MaxDuration time.Duration
}

// withDefaults returns c with every zero or out-of-range field set.
func (c Config) withDefaults() Config {
	d := &c.DatasetDefaults
	if d.ChunksPerTask <= 0 {
		d.ChunksPerTask = DefaultDatasetParams.ChunksPerTask
	}
	if d.TaskTimeout <= 0 {
		d.TaskTimeout = DefaultDatasetParams.TaskTimeout
	}
	if d.FailureMax < 0 {
		d.FailureMax = DefaultDatasetParams.FailureMax
	}
	l := &c.Limits
	setDefault(&l.MaxBodyBytes, DefaultMaxBodyBytes, 1<<62)
	setDefault(&l.MaxDatasetBodyBytes, DefaultMaxDatasetBodyBytes, 1<<62)
	setDefault(&l.MaxMemberData, DefaultMaxMemberData, fsm.MaxMemberData)
	setDefault(&l.MaxNumPeers, DefaultMaxNumPeers, fsm.MaxPeers)
	setDefault(&l.MaxGlobs, DefaultMaxGlobs, fsm.MaxPatterns)
	setDefault(&l.MaxFiles, DefaultMaxFiles, 1<<30)
	setDefault(&l.MaxChunks, DefaultMaxChunks, fsm.MaxChunks)
	setDefault(&l.MaxWatchWait, DefaultMaxWatchWait, 1<<62)
	setDefault(&l.MaxDuration, DefaultMaxDuration, 1<<62)
	if c.LeaderWait <= 0 {
		c.LeaderWait = DefaultLeaderWait
	}
	if c.FanoutTimeout <= 0 {
		c.FanoutTimeout = DefaultFanoutTimeout
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{}
	}
	if c.SessionTTL <= 0 {
		c.SessionTTL = rpc.DefaultSessionTTL
	}
	return c
}

// setDefault sets *v to def when it is not positive and caps it at hi.
func setDefault[T int | int64 | time.Duration](v *T, def, hi T) {
	if *v <= 0 {
		*v = def
	}
	*v = min(*v, hi)
}

// Validate reports dataset defaults, or a session TTL, that the FSM would
// refuse, so that a bad flag fails at start-up rather than on the first
// SetDataset or session.
func (c Config) Validate() error {
	d := c.withDefaults()
	p := d.DatasetDefaults
	if p.ChunksPerTask > d.Limits.MaxChunks {
		return fmt.Errorf("chunks per task %d above %d", p.ChunksPerTask, d.Limits.MaxChunks)
	}
	if p.TaskTimeout < time.Millisecond || p.TaskTimeout > min(d.Limits.MaxDuration, fsm.MaxTaskTimeout) {
		return fmt.Errorf("task timeout %v out of range [1ms, %v]", p.TaskTimeout, min(d.Limits.MaxDuration, fsm.MaxTaskTimeout))
	}
	if p.FailureMax > fsm.MaxFailureMax {
		return fmt.Errorf("failure max %d above %d", p.FailureMax, fsm.MaxFailureMax)
	}
	if d.SessionTTL < fsm.MinSessionTTL || d.SessionTTL > fsm.MaxSessionTTL {
		return fmt.Errorf("session TTL %v out of range [%v, %v]", d.SessionTTL, fsm.MinSessionTTL, fsm.MaxSessionTTL)
	}
	return nil
}

// Observer is told what the API does, for metrics. Its methods must be
// cheap and safe for concurrent use.
type Observer interface {
	// Request reports a request: its route pattern ("" when none
	// matched), its status and how long it took.
	Request(route string, status int, d time.Duration)
	// Redirect reports a 307 to the leader.
	Redirect()
	// Applied reports the outcome of a command the API proposed.
	Applied(c fsm.Command, r *fsm.Result)
}

// Tokens maps a bearer token to what it allows: its role ("trainer" or
// "operator") and the jobs it covers.
type Tokens interface {
	Lookup(token string) (auth.Grant, bool)
}
