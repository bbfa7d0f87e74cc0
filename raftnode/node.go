package raftnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/leader"
	"github.com/raftmaster/raftmaster/internal/sessions"
	"go.etcd.io/bbolt"
)

// Errors of Apply and the read and membership calls.
var (
	// ErrNotLeader means this node is not the leader and the request was
	// not applied; send it to the leader.
	ErrNotLeader = errors.New("raftnode: not the leader")
	// ErrUnknownOutcome means the entry may or may not have been committed
	// (leadership was lost after it was enqueued); retry with the same
	// request id.
	ErrUnknownOutcome = errors.New("raftnode: outcome unknown")
	// ErrNotReady means this node is the leader but has not finished taking
	// over (barrier and grace); retry shortly.
	ErrNotReady = errors.New("raftnode: leader not ready")
	// ErrUnknownMember means the id names no member: no server of the
	// Raft configuration.
	ErrUnknownMember = errors.New("raftnode: no such member")
)

// Node is one replica.
type Node struct {
	cfg Config
	// id is the node's Raft server id: its name and incarnation
	// (identity.go), or its name alone for a data directory of an earlier
	// release.
	id     string
	log    hclog.Logger
	fsm    *fsm.FSM
	raft   *raft.Raft
	trans  raft.Transport
	store  *raftboltdb.BoltStore
	notify chan bool
	// rp is raft once it runs, for the transport's goroutines, which may
	// run before New returns.
	rp atomic.Pointer[raft.Raft]
	// membersToAsk holds the API addresses of members of a cluster that a
	// node with an empty data directory found through its --peers
	// (peers.go): where it asks to become a member.
	membersToAsk atomic.Pointer[[]string]
	// savedLevel is the protocol level stored in the data directory: the
	// highest the state machine had reached (transportLevel).
	savedLevel atomic.Uint64

	// logBytes counts the bytes of the applied log, for boundLog.
	logBytes *logBytes
	// leaderChanges counts the changes of leader this node has seen
	// (leaderChanged).
	leaderChanges atomic.Uint64

	leaderReady atomic.Bool
	// sessions is the session tracker of the term this node leads, set
	// from its take-over to its end.
	sessions atomic.Pointer[sessions.Tracker]
	// clock stamps proposals while this node leads (see leader.Clock).
	clock leader.TermClock
	// halted is closed once the FSM met an entry it cannot apply and Raft
	// was stopped.
	halted    chan struct{}
	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// LogCacheEntries is how many of the latest log entries a node keeps in
// memory for replication, within Config.LogCacheBytes: a few batches of
// appends, so that a follower that keeps up is sent entries without
// reading the log store.
const LogCacheEntries = 1024

// New opens the stores in cfg.DataDir, starts Raft and, with a peer list
// and no existing state, bootstraps the cluster.
func New(cfg Config) (*Node, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("raftnode: data dir: %w", err)
	}
	n := &Node{cfg: cfg, log: cfg.Logger, fsm: fsm.New(), notify: make(chan bool, 16), stop: make(chan struct{}), halted: make(chan struct{})}
	var err error
	n.store, err = openLogStore(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("raftnode: open log store (is another raftmaster using %s?): %w", cfg.DataDir, err)
	}
	lastIndex, err := n.store.LastIndex()
	if err != nil {
		n.store.Close()
		return nil, fmt.Errorf("raftnode: read the log: %w", err)
	}
	ident, made, err := loadIdentity(n.store, cfg.ID, lastIndex > 0)
	if err != nil {
		n.store.Close()
		return nil, err
	}
	n.id = ident.ServerID
	if lvl, err := n.store.GetUint64(levelKey); err == nil {
		n.savedLevel.Store(lvl)
	}
	switch {
	case made && n.id == cfg.ID:
		n.log.Info("this data directory was made by an earlier release: the node keeps its name as its server id", "name", cfg.ID)
	case made:
		n.log.Info("this data directory is a new incarnation of the node", "name", cfg.ID, "server_id", n.id)
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, 2, n.log.Named("snapshot"))
	if err != nil {
		n.store.Close()
		return nil, fmt.Errorf("raftnode: snapshot store: %w", err)
	}
	if cfg.Transport != nil {
		n.trans = cfg.Transport
		n.cfg.RaftAdvertise = string(cfg.Transport.LocalAddr())
	} else if err := n.openTCPTransport(); err != nil {
		n.store.Close()
		return nil, err
	}
	n.trans = newVoteGate(n.trans, n.isVoter, n.log.Named("transport"))

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(n.id)
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	// boundLog decides when to snapshot, by entries and bytes: Raft's
	// own count threshold never fires.
	rc.SnapshotThreshold = math.MaxUint64
	rc.TrailingLogs = cfg.TrailingLogs
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.NotifyCh = n.notify
	rc.Logger = n.log.Named("raft")

	hasState, err := raft.HasExistingState(n.store, n.store, snaps)
	if err != nil {
		n.closeStores()
		return nil, fmt.Errorf("raftnode: read state: %w", err)
	}
	// The leader sends followers the entries it has just written; the
	// cache serves them from memory instead of a read and decode from
	// the log store for every append.
	logs := newByteLogCache(n.store, LogCacheEntries, cfg.LogCacheBytes)
	n.logBytes = newLogBytes(int(min(cfg.TrailingLogs, 1<<16)), cfg.SnapshotBytes)
	n.raft, err = raft.NewRaft(rc, raftFSM{f: n.fsm, bytes: n.logBytes, rec: cfg.Recorder}, logs, stableStore(n.store), snaps, n.trans)
	if err != nil {
		n.closeStores()
		return nil, fmt.Errorf("raftnode: start raft: %w", err)
	}
	n.raft.RegisterObserver(raft.NewObserver(nil, false, n.leaderChanged))
	n.rp.Store(n.raft)
	n.wg.Add(4)
	go n.boundLog()
	go n.watchLeadership()
	go n.watchHalt()
	go n.saveLevel()
	if !hasState && len(cfg.Peers) > 0 {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			n.foundFromPeers(cfg.Peers)
		}()
	}
	return n, nil
}

// transportLevel is the protocol level the Raft transport goes by: the
// state machine's, or the highest it had reached before the node last
// stopped, when the log is not replayed that far yet. A restarted node
// therefore keeps naming the server it dials, and refusing connections
// that name none, from the moment it starts.
func (n *Node) transportLevel() uint64 { return max(n.fsm.Protocol(), n.savedLevel.Load()) }

// saveLevel stores the state machine's protocol level in the data
// directory whenever it rises.
func (n *Node) saveLevel() {
	defer n.wg.Done()
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		if lvl := n.fsm.Protocol(); lvl > n.savedLevel.Load() {
			if err := n.store.SetUint64(levelKey, lvl); err != nil {
				n.log.Warn("storing the protocol level", "error", err)
				continue
			}
			n.savedLevel.Store(lvl)
		}
	}
}

// isVoter reports whether the latest configuration lists this node's
// server id as a voter: only then may it vote or take leadership over.
func (n *Node) isVoter() bool {
	r := n.rp.Load()
	return r != nil && hasVote(r.GetConfiguration().Configuration(), n.id)
}

// watchHalt stops Raft when the FSM halts on a log entry from a newer
// version: skipping the entry would make this replica diverge, and going
// on without applying would serve stale state.
func (n *Node) watchHalt() {
	defer n.wg.Done()
	select {
	case <-n.stop:
		return
	case <-n.fsm.Halted():
	}
	n.log.Error("stopping: the Raft log holds an entry this version cannot apply; "+
		"upgrade this node (in a rolling upgrade, upgrade every follower before the leader)", "error", n.fsm.HaltErr())
	if err := n.raft.Shutdown().Error(); err != nil {
		n.log.Warn("raft shutdown", "error", err)
	}
	close(n.halted)
}

// Halted returns a channel that is closed when this node stopped because
// its log holds an entry this version cannot apply; HaltErr says which.
// The process should exit with an error.
func (n *Node) Halted() <-chan struct{} { return n.halted }

// HaltErr returns why the node halted, or nil.
func (n *Node) HaltErr() error { return n.fsm.HaltErr() }

// Bootstrap sets the initial configuration to peers, whose ids are server
// ids, when the node has no state. Every node of a new cluster bootstraps
// the same list; a node that already has state ignores it.
func (n *Node) Bootstrap(peers []Peer) error {
	var servers []raft.Server
	for _, p := range peers {
		servers = append(servers, raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr), Suffrage: raft.Voter})
	}
	err := n.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error()
	if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("raftnode: bootstrap: %w", err)
	}
	if err == nil {
		n.log.Info("bootstrapped cluster", "peers", len(servers))
	}
	return nil
}

func (n *Node) closeStores() {
	if c, ok := n.trans.(io.Closer); ok {
		c.Close()
	}
	n.store.Close()
}

// FSM returns the local replica of the state machine.
func (n *Node) FSM() *fsm.FSM { return n.fsm }

// ID returns the node's Raft server id: its name and incarnation.
func (n *Node) ID() string { return n.id }

// Name returns the node's name, the same in every incarnation.
func (n *Node) Name() string { return n.cfg.ID }

// RaftAddr returns the advertised Raft address.
func (n *Node) RaftAddr() string { return n.cfg.RaftAdvertise }

// APIAddr returns the HTTP API address this node registers.
func (n *Node) APIAddr() string { return n.cfg.APIAddr }

// Raft exposes the underlying raft.Raft for diagnostics and tests.
func (n *Node) Raft() *raft.Raft { return n.raft }

// IsLeader reports whether this node is the leader.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// leaderChanged counts a change to a known leader. It is the filter of an
// observer without a channel, which Raft calls in its own goroutine for
// every observation and which lets none through: counting here loses no
// change, where a channel would drop those it has no room for.
func (n *Node) leaderChanged(o *raft.Observation) bool {
	if l, ok := o.Data.(raft.LeaderObservation); ok && l.LeaderID != "" {
		n.leaderChanges.Add(1)
	}
	return false
}

// LeaderChanges returns how many times this node has seen a new leader
// since it started: elected, or learnt of after a time without one.
func (n *Node) LeaderChanges() uint64 { return n.leaderChanges.Load() }

// LeaderReady reports whether this node is the leader and has finished
// taking over.
func (n *Node) LeaderReady() bool { return n.IsLeader() && n.leaderReady.Load() }

// Leader returns the current leader's id and its registry entry; ok is
// false when no leader is known. APIAddr may be empty if the leader has
// not registered yet.
func (n *Node) Leader() (fsm.Registration, bool) {
	addr, id := n.raft.LeaderWithID()
	if id == "" {
		return fsm.Registration{}, false
	}
	entry, found := n.fsm.Registration(string(id))
	if !found {
		entry = fsm.Registration{ID: string(id), RaftAddr: string(addr)}
	}
	return entry, true
}

// now is the time stamped into proposals: the leader clock of this term,
// or the FSM's time before the term's clock has started.
func (n *Node) now() int64 { return n.clock.Now(n.fsm.Clock()) }

// Apply stamps the leader's time into c, proposes it and returns the FSM's
// result once it has been applied here.
func (n *Node) Apply(ctx context.Context, c fsm.Command) (*fsm.Result, error) {
	if !n.IsLeader() {
		return nil, ErrNotLeader
	}
	if !n.leaderReady.Load() {
		return nil, ErrNotReady
	}
	if err := n.fsm.Allows(c); err != nil {
		return nil, err
	}
	return n.propose(ctx, c)
}

// propose applies c without the readiness check; the leader loop uses it
// while taking over.
func (n *Node) propose(ctx context.Context, c fsm.Command) (*fsm.Result, error) {
	p, err := n.enqueue(ctx, c)
	if err != nil {
		return nil, err
	}
	return n.await(p)
}

// proposal is a command handed to raft, whose outcome await waits for.
type proposal struct {
	f     raft.ApplyFuture
	start time.Time
}

// enqueue stamps c and hands it to raft without waiting for its outcome.
// Commands enqueued one after the other by one goroutine are logged, and
// applied, in that order.
func (n *Node) enqueue(ctx context.Context, c fsm.Command) (proposal, error) {
	if err := ctx.Err(); err != nil {
		return proposal{}, err
	}
	c.Hdr().Now = n.now()
	timeout := n.cfg.ApplyTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	start := time.Now()
	return proposal{f: n.raft.Apply(fsm.Encode(c), timeout), start: start}, nil
}

// await waits for the outcome of an enqueued command.
func (n *Node) await(p proposal) (*fsm.Result, error) {
	f := p.f
	if err := f.Error(); err != nil {
		return nil, mapRaftError(err)
	}
	if n.cfg.Recorder != nil {
		n.cfg.Recorder.Committed(time.Since(p.start))
	}
	r, ok := f.Response().(*fsm.Result)
	if !ok {
		return nil, fmt.Errorf("raftnode: unexpected FSM response %T", f.Response())
	}
	return r, nil
}

// mapRaftError turns raft's errors into ErrNotLeader (nothing was
// enqueued) or ErrUnknownOutcome (it may have been committed).
func mapRaftError(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("%w (%v)", ErrNotLeader, err)
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrRaftShutdown),
		errors.Is(err, raft.ErrAbortedByRestore), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return fmt.Errorf("%w (%v)", ErrUnknownOutcome, err)
	}
	return err
}

// ReadBarrier returns nil when a read of the local FSM is linearizable:
// this node is the leader, has applied everything committed by earlier
// terms (its take-over barrier), and a quorum still confirms it. Writes of
// this term reach the FSM before their callers are answered, so no
// completed write can be missing from the local state.
func (n *Node) ReadBarrier(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !n.IsLeader() {
		return ErrNotLeader
	}
	if !n.leaderReady.Load() {
		return ErrNotReady
	}
	if err := n.raft.VerifyLeader().Error(); err != nil {
		return mapRaftError(err)
	}
	return nil
}

// Ready reports whether the node can serve: a leader is known, the leader
// has finished taking over, and a follower has applied what it knows to be
// committed (give or take the entries in flight).
func (n *Node) Ready() bool {
	if _, ok := n.Leader(); !ok {
		return false
	}
	if n.IsLeader() {
		return n.leaderReady.Load()
	}
	return n.raft.AppliedIndex()+64 >= n.raft.CommitIndex() &&
		time.Since(n.raft.LastContact()) < 3*n.cfg.ElectionTimeout
}

// Shutdown hands leadership to another voter when this node leads, then
// stops Raft and closes the stores. It is safe to call more than once.
func (n *Node) Shutdown(ctx context.Context) error {
	var err error
	n.closeOnce.Do(func() {
		if n.IsLeader() && n.otherVoters() > 0 {
			n.log.Info("transferring leadership before shutdown")
			done := make(chan error, 1)
			go func() { done <- n.raft.LeadershipTransfer().Error() }()
			select {
			case e := <-done:
				if e != nil {
					n.log.Warn("leadership transfer failed", "error", e)
				}
			case <-ctx.Done():
				n.log.Warn("leadership transfer timed out")
			}
		}
		close(n.stop)
		err = n.raft.Shutdown().Error()
		n.wg.Wait()
		n.closeStores()
	})
	return err
}

func (n *Node) otherVoters() int {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return 0
	}
	c := 0
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter && string(s.ID) != n.id {
			c++
		}
	}
	return c
}

// logStoreFile is the log and stable store's file in a data directory.
const logStoreFile = "raft.db"

// openLogStore opens the log and stable store of dataDir. bolt locks the
// file: a second process (or a running node's data dir) fails after 2 s.
func openLogStore(dataDir string) (*raftboltdb.BoltStore, error) {
	return raftboltdb.New(raftboltdb.Options{
		Path:        filepath.Join(dataDir, logStoreFile),
		BoltOptions: LogStoreOptions(),
	})
}

// LogStoreOptions are the bolt options of a node's log store. The
// freelist is not written (NoFreelistSync: one page write less a commit;
// it is rebuilt when the file opens), and is a map of free spans rather
// than bolt's default sorted array: once a compaction frees the pages of
// a large dataset's entries, the array is merged in full at the start of
// each commit, on the leader's one goroutine that stores the log.
func LogStoreOptions() *bbolt.Options {
	return &bbolt.Options{Timeout: 2 * time.Second, NoFreelistSync: true, FreelistType: bbolt.FreelistMapType}
}
