package raftnode

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/sessions"
)

// Peer is a member of a bootstrap configuration: in Config.Peers, a node
// name and its Raft address; in Node.Bootstrap, a server id.
type Peer struct {
	ID       string
	RaftAddr string
}

// ParsePeers parses "id=host:port,id=host:port".
func ParsePeers(s string) ([]Peer, error) {
	var peers []Peer
	seen := map[string]bool{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		id, addr, ok := strings.Cut(item, "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("peer %q: want id=host:port", item)
		}
		if seen[id] {
			return nil, fmt.Errorf("peer id %q appears twice", id)
		}
		seen[id] = true
		peers = append(peers, Peer{ID: id, RaftAddr: addr})
	}
	return peers, nil
}

// Default Raft timeouts. A follower notices a dead leader after a random
// 1 to 2 heartbeat timeouts and, when a first vote is refused, tries again
// after 1 to 2 election timeouts; a leader that cannot reach a quorum for
// the lease steps down. With 300 ms, a killed leader is replaced in about
// 0.7 s (p50) on a 3-node cluster of a loaded 2-core machine, against
// about 2.2 s with hashicorp/raft's 1 s defaults. hashicorp/raft's
// PreVote keeps a follower that times out spuriously from disrupting a
// healthy leader.
const (
	DefaultHeartbeatTimeout   = 300 * time.Millisecond
	DefaultElectionTimeout    = 300 * time.Millisecond
	DefaultLeaderLeaseTimeout = 300 * time.Millisecond
)

// Config configures a Node. Zero durations and sizes take the defaults.
type Config struct {
	// ID is the node's name, unique in the cluster. Its Raft server id is
	// the name and the incarnation of its data directory (identity.go).
	ID string
	// DataDir holds raft.db and the snapshots.
	DataDir string
	// RaftAddr is the address the Raft transport listens on.
	RaftAddr string
	// RaftAdvertise is the Raft address peers dial; default RaftAddr.
	RaftAdvertise string
	// APIAddr is the HTTP API address registered in the node registry.
	APIAddr string
	// Peers, when set, are the nodes of a static cluster, by name. A node
	// with an empty data directory bootstraps them only when every peer
	// answers with no state of a cluster (peers.go). It must contain ID.
	Peers []Peer

	// HeartbeatTimeout, ElectionTimeout and LeaderLeaseTimeout are Raft's
	// (DefaultHeartbeatTimeout and so on). Shorter ones detect a dead or
	// cut-off leader sooner; too short for the network or the machine's
	// load, and followers start elections a healthy leader did not need.
	// PreVote keeps such a follower from deposing the leader, so the cost
	// is only wasted work.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	// ApplyTimeout bounds how long a proposal may wait to be enqueued.
	ApplyTimeout time.Duration // default 10s
	// Limits, when set, are the node's limit flags, a new cluster's
	// initial limits (leader.TakeOver).
	Limits *fsm.Limits
	// FailoverGrace is the LeaderGrace a new leader proposes.
	FailoverGrace time.Duration // default 5s
	// SnapshotThreshold is the least number of entries between two
	// snapshots (default 8192); a snapshot also waits until the applies
	// since the last one took as long as that snapshot did, so that a
	// large state is not rewritten for every few thousand small entries.
	// TrailingLogs is the most entries a compaction keeps.
	SnapshotThreshold uint64        // default 8192
	TrailingLogs      uint64        // default 10240
	SnapshotInterval  time.Duration // how often to check the threshold, jittered up to twice; default 30s
	// SnapshotBytes takes a snapshot once the entries applied since the
	// last one hold this many bytes, whatever their count, or as many
	// as the last snapshot if that is larger.
	SnapshotBytes int64 // default DefaultSnapshotBytes
	// TrailingLogBytes bounds the bytes of the entries a compaction keeps
	// (at most TrailingLogs of them, at least one).
	TrailingLogBytes int64 // default DefaultTrailingLogBytes
	// LogCacheBytes bounds the bytes of the latest entries kept in memory
	// for replication (at most LogCacheEntries of them).
	LogCacheBytes int64 // default DefaultLogCacheBytes
	// MaxEntryBytes bounds a dataset part entry.
	MaxEntryBytes int // default 256 KiB
	// DialOverride maps node names to the address this node dials instead
	// of the configured one. Fault-injection tests route each link through
	// its own proxy with it.
	DialOverride map[string]string
	// PeerTLS, when set, runs Raft over mutual TLS: every connection,
	// accepted or dialled, needs a node certificate from the cluster's CA.
	PeerTLS PeerTLS
	// Transport, when set, replaces the TCP transport on RaftAddr; its
	// LocalAddr is the advertised Raft address, and RaftAddr, RaftAdvertise
	// and DialOverride are not used. Tests use raft's in-memory transport to
	// cut links without sockets. The node closes it when it implements
	// io.Closer.
	Transport raft.Transport
	// PeerLevel asks another server which protocol level its release
	// applies; a leader raises the cluster's level once every server
	// applies it. Without it the cluster stays at fsm.Protocol1 unless the
	// configuration lists this node alone.
	PeerLevel PeerLevel
	// Clock is the node's time source; tests offset it.
	Clock func() time.Time
	// Recorder, when set, is told how long proposals and applies take,
	// for metrics.
	Recorder Recorder
	// SessionObserver, when set, counts what the leader's session tracker
	// does, for metrics.
	SessionObserver sessions.Observer
	// Logger receives all logs; nil discards them.
	Logger hclog.Logger
}

// Recorder is told how long a node's Raft work takes, for metrics. Its
// methods are called on Raft's hot paths: they must be cheap and safe for
// concurrent use.
type Recorder interface {
	// Committed reports a command this node proposed as leader: the time
	// from the proposal to its result, through the log, a quorum's
	// acknowledgement and the apply.
	Committed(d time.Duration)
	// FSMApplied reports the time the state machine took to apply one
	// committed entry.
	FSMApplied(d time.Duration)
}

func (c *Config) setDefaults() error {
	if err := CheckNodeName(c.ID); err != nil {
		return fmt.Errorf("raftnode: node id: %w", err)
	}
	if c.DataDir == "" {
		return errors.New("raftnode: data dir is empty")
	}
	if c.RaftAddr == "" && c.Transport == nil {
		return errors.New("raftnode: raft address is empty")
	}
	if len(c.Peers) > 0 {
		found := false
		for _, p := range c.Peers {
			found = found || p.ID == c.ID
		}
		if !found {
			return fmt.Errorf("raftnode: peers do not include this node %q", c.ID)
		}
	}
	if c.RaftAdvertise == "" {
		c.RaftAdvertise = c.RaftAddr
	}
	if c.Transport == nil {
		if err := CheckAdvertise(c.RaftAdvertise); err != nil {
			return err
		}
	}
	if c.FailoverGrace < 0 {
		return fmt.Errorf("raftnode: negative fail-over grace %v", c.FailoverGrace)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.HeartbeatTimeout, DefaultHeartbeatTimeout)
	def(&c.ElectionTimeout, DefaultElectionTimeout)
	def(&c.LeaderLeaseTimeout, DefaultLeaderLeaseTimeout)
	def(&c.ApplyTimeout, 10*time.Second)
	def(&c.FailoverGrace, 5*time.Second)
	def(&c.SnapshotInterval, 30*time.Second)
	if c.FailoverGrace > fsm.MaxGrace {
		return fmt.Errorf("raftnode: fail-over grace %v above the state machine's limit of %v", c.FailoverGrace, fsm.MaxGrace)
	}
	if c.LeaderLeaseTimeout > c.HeartbeatTimeout || c.HeartbeatTimeout > c.ElectionTimeout {
		return fmt.Errorf("raftnode: need leader lease (%v) <= heartbeat (%v) <= election timeout (%v)",
			c.LeaderLeaseTimeout, c.HeartbeatTimeout, c.ElectionTimeout)
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = 8192
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = 10240
	}
	if c.SnapshotBytes <= 0 {
		c.SnapshotBytes = DefaultSnapshotBytes
	}
	if c.TrailingLogBytes <= 0 {
		c.TrailingLogBytes = DefaultTrailingLogBytes
	}
	if c.LogCacheBytes <= 0 {
		c.LogCacheBytes = DefaultLogCacheBytes
	}
	if c.MaxEntryBytes <= 0 {
		c.MaxEntryBytes = 256 << 10
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	return nil
}
