// Package etcdmaster runs one master of the etcd-backed parity mode, the
// design of the original PaddlePaddle master: one active master at a time,
// elected with the etcd lock, which saves the whole FSM snapshot to etcd
// after every change. Standby masters wait on the lock and redirect clients
// to the active one. It runs the same FSM as the Raft backend and serves the
// same HTTP API, so trainers cannot tell the two apart.
//
// The master keeps two copies of the FSM. A command is applied to the
// working copy, whose state is then saved in a transaction that succeeds
// only while this master holds the lock; only then is the command applied
// to the published copy, which reads, watches and the lease ticker see,
// and answered. Nothing that etcd does not hold is ever visible, as with
// Raft, where an entry is applied only once it is committed. If a save
// fails, the working copy is reset from the published one. A state that is
// too large to save is refused with too_large and nothing changes; any
// other failure makes the master step down: it gives up the lock and,
// once it holds it again, reloads the state from etcd, which is the only
// truth. A command whose save failed that way is reported with an unknown
// outcome; the client retries it with the same request id, and the FSM's
// deduplication, which is part of the saved state, keeps the retry from
// applying twice.
package etcdmaster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/klauspost/compress/gzip"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/internal/leader"
	"github.com/raftmaster/raftmaster/internal/sessions"
	"github.com/raftmaster/raftmaster/internal/version"
	"github.com/raftmaster/raftmaster/rpc"
	"github.com/raftmaster/raftmaster/store"
	"github.com/raftmaster/raftmaster/store/etcdkeys"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefaultMembersPath is the etcd prefix under which every master, active
// or standby, lists itself for `cluster inspect`.
const DefaultMembersPath = etcdkeys.DefaultMembers

// Config configures a master.
type Config struct {
	// ID names this master.
	ID string
	// APIAddr is the address clients are sent to; it is published at the
	// store's AddrPath while this master is active.
	APIAddr string
	// Store configures etcd; Store.Addr is set to APIAddr.
	Store store.EtcdConfig
	// MembersPath is the prefix where masters list themselves.
	MembersPath string
	// Limits, when set, are the master's limit flags, a new state's
	// initial limits (leader.TakeOver).
	Limits *fsm.Limits
	// FailoverGrace is the time a new active master gives every lease.
	FailoverGrace time.Duration
	// Clock stamps commands; time.Now by default.
	Clock func() time.Time
	// Logger receives the master's logs.
	Logger hclog.Logger
	// SessionObserver, when set, counts what the active master's session
	// tracker does, for metrics.
	SessionObserver sessions.Observer
}

// Master is one master process of the etcd backend. It implements
// httpapi.Backend.
type Master struct {
	cfg  Config
	log  hclog.Logger
	st   *store.EtcdStore
	fsm  *fsm.FSM // published: holds only what etcd holds
	work *fsm.FSM // where commands are applied before their state is saved

	mu     sync.Mutex // serialises applies and saves
	idx    atomic.Uint64
	clock  leader.TermClock // stamps commands while active
	active atomic.Bool
	master atomic.Pointer[rpc.NodeRef] // the active master, from etcd
	// sessions is the session tracker while this master serves.
	sessions atomic.Pointer[sessions.Tracker]

	stepDown chan struct{}
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

var (
	_ httpapi.Backend        = (*Master)(nil)
	_ httpapi.SessionBackend = (*Master)(nil)
)

// Start connects to etcd, lists this master and starts campaigning for the
// lock in the background.
func Start(cfg Config) (*Master, error) {
	if cfg.ID == "" || cfg.APIAddr == "" {
		return nil, errors.New("etcdmaster: a master needs an id and an API address")
	}
	if cfg.MembersPath == "" {
		cfg.MembersPath = DefaultMembersPath
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.FailoverGrace < 0 || cfg.FailoverGrace > fsm.MaxGrace {
		return nil, fmt.Errorf("etcdmaster: fail-over grace %v out of range [0, %v]", cfg.FailoverGrace, fsm.MaxGrace)
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	cfg.Store.Addr = cfg.APIAddr
	st, err := store.NewEtcdStore(cfg.Store)
	if err != nil {
		return nil, err
	}
	cfg.Store = st.Config()
	m := &Master{cfg: cfg, log: cfg.Logger, st: st, fsm: fsm.New(), work: fsm.New(), stepDown: make(chan struct{}, 1)}
	m.master.Store(&rpc.NodeRef{})
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Store.RequestTimeout)
	defer cancel()
	if _, err := st.Client().Put(ctx, m.memberKey(cfg.ID), cfg.APIAddr, clientv3.WithLease(st.Lease())); err != nil {
		st.Shutdown()
		return nil, fmt.Errorf("etcdmaster: list this master: %w", err)
	}
	runCtx, runCancel := context.WithCancel(context.Background())
	m.cancel = runCancel
	m.wg.Add(2)
	go func() {
		defer m.wg.Done()
		store.WatchMasterAddr(runCtx, st.Client(), cfg.Store.AddrPath, func(addr string) {
			ref := rpc.NodeRef{ID: m.memberID(runCtx, addr), APIAddr: addr}
			m.master.Store(&ref)
		})
	}()
	go func() {
		defer m.wg.Done()
		m.run(runCtx)
	}()
	return m, nil
}

// Lost is closed when this master's etcd session has ended, for example
// after etcd was unreachable for longer than the TTL. The master then
// serves nothing; the process should exit and be restarted.
func (m *Master) Lost() <-chan struct{} { return m.st.Done() }

// Active reports whether this master holds the lock and serves.
func (m *Master) Active() bool { return m.active.Load() }

// Shutdown stops serving, gives the lock up so that a standby takes over at
// once, and closes the etcd session.
func (m *Master) Shutdown(context.Context) error {
	m.cancel()
	m.wg.Wait()
	return m.st.Shutdown()
}

// run campaigns for the lock, serves while it holds it, and campaigns again
// after stepping down, until ctx ends or the session is lost.
func (m *Master) run(ctx context.Context) {
	for ctx.Err() == nil {
		m.log.Info("waiting for the master lock", "lock", m.cfg.Store.LockPath)
		if err := m.st.Lock(ctx); err != nil {
			if ctx.Err() != nil || m.sessionLost() {
				m.log.Error("stopped campaigning", "error", err)
				return
			}
			m.log.Warn("campaign failed", "error", err)
			if !leader.Sleep(ctx, time.Second) {
				return
			}
			continue
		}
		if err := m.takeOver(ctx); err != nil {
			m.log.Error("take-over failed; giving the lock up", "error", err)
			m.release()
			if !leader.Sleep(ctx, time.Second) {
				return
			}
			continue
		}
		m.log.Info("active master", "api", m.cfg.APIAddr, "clock", m.fsm.Clock())
		m.serve(ctx)
		m.release()
		if m.sessionLost() {
			m.log.Error("etcd session lost; this master stops serving")
			return
		}
	}
}

func (m *Master) sessionLost() bool {
	select {
	case <-m.st.Done():
		return true
	default:
		return false
	}
}

// takeOver loads the saved state, registers this master in the node
// registry and gives every lease the fail-over grace, then starts serving.
func (m *Master) takeOver(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	blob, err := m.st.Load()
	if err != nil {
		return err
	}
	state, err := decodeState(blob)
	if err != nil {
		return fmt.Errorf("etcdmaster: state at %s: %w", m.cfg.Store.StatePath, err)
	}
	for _, f := range []*fsm.FSM{m.work, m.fsm} {
		if err := f.Restore(io.NopCloser(bytes.NewReader(state))); err != nil {
			return fmt.Errorf("etcdmaster: state at %s: %w", m.cfg.Store.StatePath, err)
		}
	}
	err = leader.TakeOver{
		FSM: m.fsm, Clock: &m.clock, Wall: m.cfg.Clock,
		Self: m.registration(), Grace: m.cfg.FailoverGrace,
		Limits: m.cfg.Limits, Logger: m.log, Propose: m.applyLocked,
	}.Run(ctx)
	if err != nil {
		return err
	}
	// One master applies and saves the state; a standby restores it from
	// etcd when it takes over. So the level rises with the first master of
	// a release, and a standby of an older release fails to read the state
	// rather than apply it with the wrong semantics.
	if m.fsm.Protocol() < fsm.Protocol {
		if _, err := m.applyLocked(ctx, &fsm.SetProtocol{Level: fsm.Protocol}); err != nil {
			return err
		}
		// The registry records the master's release from then on.
		if err := leader.Register(ctx, m.fsm, m.registration(), m.applyLocked); err != nil {
			return err
		}
	}
	// The term's session keep-alives, which serve runs. The state in etcd
	// is this master's own while it holds the lock, and every save checks
	// that it does: confirming leadership is asking etcd (ReadBarrier).
	m.sessions.Store(sessions.New(sessions.Config{
		FSM: m.fsm, Now: m.now, Propose: m.Apply, VerifyLeader: m.ReadBarrier,
		Logger: m.log.Named("sessions"), Observer: m.cfg.SessionObserver,
	}))
	m.drainStepDown()
	m.active.Store(true)
	return nil
}

// now is the active master's clock.
func (m *Master) now() int64 { return m.clock.Now(m.fsm.Clock()) }

// release stops serving and gives the lock up, unless the session is gone
// and with it the lock.
func (m *Master) release() {
	m.mu.Lock()
	m.active.Store(false)
	m.sessions.Store(nil)
	m.clock.Stop()
	m.mu.Unlock()
	if m.sessionLost() {
		return
	}
	if err := m.st.Unlock(context.Background()); err != nil {
		m.log.Warn("giving the lock up failed; it expires with the session", "error", err)
	}
}

func (m *Master) drainStepDown() {
	select {
	case <-m.stepDown:
	default:
	}
}

func (m *Master) requestStepDown() {
	m.active.Store(false)
	select {
	case m.stepDown <- struct{}{}:
	default:
	}
}

// clockSync bounds how far FSM time may lag the active master's clock
// while something waits on a deadline. Each tick rewrites the whole state
// in etcd, so it is coarser than the Raft backend's.
const clockSync = 5 * time.Second

// serve proposes ticks when the FSM's earliest deadline passes and runs
// the session tracker, until ctx ends, the session is lost or the master
// steps down.
func (m *Master) serve(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	if tracker := m.sessions.Load(); tracker != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tracker.Run(ctx)
		}()
	}
	go func() {
		select {
		case <-ctx.Done():
		case <-m.st.Done():
		case <-m.stepDown:
			m.log.Info("stepping down")
		}
		cancel()
	}()
	leader.Ticker{
		FSM:     m.fsm,
		Now:     m.now,
		Propose: m.Apply,
		Logger:  m.log,
		Sync:    clockSync,
	}.Run(ctx)
}

// Apply implements httpapi.Backend: it applies c and saves the state before it
// answers.
func (m *Master) Apply(ctx context.Context, c fsm.Command) (*fsm.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err // given up on while it waited for earlier saves
	}
	if !m.active.Load() {
		return nil, m.notActive()
	}
	return m.applyLocked(ctx, c)
}

// registration is the master's registry entry, with its release.
func (m *Master) registration() fsm.Registration {
	return fsm.Registration{ID: m.cfg.ID, APIAddr: m.cfg.APIAddr, Version: version.String(), Protocol: fsm.Protocol}
}

// applyLocked stamps c, applies it to the working copy, saves that, and
// publishes c once etcd has it; m.mu is held.
func (m *Master) applyLocked(_ context.Context, c fsm.Command) (*fsm.Result, error) {
	c.Hdr().Now = m.clock.Now(m.work.Clock())
	idx := m.idx.Load() + 1
	entry := fsm.Encode(c)
	r := m.work.ApplyEntry(idx, entry)
	blob, err := encodeState(m.work)
	if err == nil && !internalCommand(c) && len(blob) > m.cfg.Store.MaxStateBytes-StateHeadroom {
		err = fmt.Errorf("%w: %d bytes, over the %d that client commands may fill", store.ErrTooLarge, len(blob), m.cfg.Store.MaxStateBytes-StateHeadroom)
	}
	if err == nil {
		err = m.st.Save(blob)
	}
	if err != nil {
		m.resetWork()
		switch {
		case errors.Is(err, store.ErrTooLarge):
			return nil, rpc.Errorf(rpc.CodeTooLarge, "the master's state would outgrow what etcd stores; nothing changed: %v", err)
		case errors.Is(err, store.ErrNotOwner):
			m.requestStepDown()
			return nil, fmt.Errorf("%w: %v", httpapi.ErrNotLeader, err)
		}
		m.requestStepDown()
		return nil, fmt.Errorf("%w: %v", httpapi.ErrUnknownOutcome, err)
	}
	m.fsm.ApplyEntry(idx, entry) // the same entry: the same result
	m.idx.Store(idx)
	return r, nil
}

// StateHeadroom is the part of the state limit that only the master's own
// commands (lease expiries, the fail-over grace, its registry entry) may
// fill, so that a state that clients have filled up can still be served
// and handed over.
const StateHeadroom = 64 << 10

// internalCommand reports whether c is one of the master's own commands.
func internalCommand(c fsm.Command) bool {
	switch c.(type) {
	case *fsm.Tick, *fsm.LeaderGrace, *fsm.RegisterNode, *fsm.SetProtocol,
		*fsm.ExpireSessions, *fsm.CheckpointSessions:
		return true
	}
	return false
}

// resetWork makes the working copy the published state again, after a
// failed save.
func (m *Master) resetWork() {
	if err := m.work.Restore(io.NopCloser(bytes.NewReader(m.fsm.SnapshotBytes()))); err != nil {
		// The published state was written by the same code; this cannot
		// happen, and serving on would risk divergence.
		panic(fmt.Sprintf("etcdmaster: reset the working state: %v", err))
	}
}

func (m *Master) notActive() error {
	if addr := m.master.Load().APIAddr; addr != "" && addr != m.cfg.APIAddr {
		return httpapi.ErrNotLeader
	}
	return httpapi.ErrNoLeader
}

// NodeID implements httpapi.Backend.
func (m *Master) NodeID() string { return m.cfg.ID }

// FSM implements httpapi.Backend.
func (m *Master) FSM() *fsm.FSM { return m.fsm }

// SetDataset implements httpapi.Backend with fsm.DatasetCommands without
// an entry limit, which is a single SetDataset command: the whole state is
// one etcd value anyway.
func (m *Master) SetDataset(ctx context.Context, job string, req fsm.RequestID, params fsm.DatasetParams, patterns []string, chunks []fsm.Chunk) (*fsm.Result, error) {
	return m.Apply(ctx, fsm.DatasetCommands(job, req, params, patterns, chunks, "", 0)[0])
}

// ReadBarrier implements httpapi.Backend: this master is active and etcd
// confirms that it holds the lock. Applies are answered only after their
// save, so every acknowledged write is in the FSM.
func (m *Master) ReadBarrier(ctx context.Context) error {
	if !m.active.Load() {
		return m.notActive()
	}
	gen := m.st.LockGeneration()
	owner, err := m.st.IsOwner(ctx)
	if err != nil {
		return fmt.Errorf("%w: %v", httpapi.ErrNoLeader, err)
	}
	if !owner && gen == m.st.LockGeneration() {
		m.requestStepDown() // not a check that raced with a new term
	}
	if !owner || !m.active.Load() {
		return m.notActive()
	}
	return nil
}

// Leader implements httpapi.Backend: this master when active, else the address
// the active one published.
func (m *Master) Leader() (rpc.NodeRef, bool) {
	if m.active.Load() {
		return rpc.NodeRef{ID: m.cfg.ID, APIAddr: m.cfg.APIAddr}, true
	}
	ref := *m.master.Load()
	if ref.APIAddr == "" || ref.APIAddr == m.cfg.APIAddr {
		return rpc.NodeRef{}, false
	}
	return ref, true
}

// memberID finds the id of the master listed with API address addr; it
// falls back to the address itself.
func (m *Master) memberID(ctx context.Context, addr string) string {
	if addr == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Store.RequestTimeout)
	defer cancel()
	if members, err := m.listMembers(ctx); err == nil {
		for _, mem := range members {
			if mem.APIAddr == addr {
				return mem.ID
			}
		}
	}
	return addr
}

// Status implements httpapi.Backend.
func (m *Master) Status() rpc.StatusResponse {
	state := "Standby"
	if m.active.Load() {
		state = "Leader"
	}
	leader, _ := m.Leader()
	idx := m.idx.Load()
	return rpc.StatusResponse{
		NodeID: m.cfg.ID, APIAddr: m.cfg.APIAddr, State: state, Leader: leader,
		LastIndex: idx, CommitIndex: idx, AppliedIndex: m.fsm.AppliedIndex(),
		LastContact: "0s", Ready: m.Ready(),
	}
}

// Members implements httpapi.Backend: every master listed in etcd, active or
// standby, sorted by id.
func (m *Master) Members(ctx context.Context) ([]rpc.Member, error) {
	out, err := m.listMembers(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: list masters: %v", httpapi.ErrNoLeader, err)
	}
	active := m.master.Load().APIAddr
	if m.active.Load() {
		active = m.cfg.APIAddr
	}
	for i := range out {
		out[i].Leader = out[i].APIAddr == active
	}
	return out, nil
}

func (m *Master) listMembers(ctx context.Context) ([]rpc.Member, error) {
	resp, err := m.st.Client().Get(ctx, m.cfg.MembersPath, clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	out := make([]rpc.Member, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		addr := string(kv.Value)
		out = append(out, rpc.Member{
			ID: path.Base(strings.TrimPrefix(string(kv.Key), m.cfg.MembersPath)), APIAddr: addr,
			Suffrage: "Master",
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (m *Master) memberKey(id string) string { return m.cfg.MembersPath + id }

// AddMember implements httpapi.Backend; a master of the etcd backend is a
// member once it has started.
func (m *Master) AddMember(context.Context, rpc.AddMemberRequest) error {
	return fmt.Errorf("%w: the etcd backend has no membership changes: start another master with the same --etcd-endpoints", fsm.ErrInvalid)
}

// RemoveMember implements httpapi.Backend; masters of the etcd backend leave by
// stopping, so it only tells an unknown id (not_found) from a listed one.
func (m *Master) RemoveMember(ctx context.Context, id string) error {
	members, err := m.listMembers(ctx)
	if err != nil {
		return fmt.Errorf("%w: list masters: %v", httpapi.ErrNoLeader, err)
	}
	if !slices.ContainsFunc(members, func(mb rpc.Member) bool { return mb.ID == id }) {
		return rpc.Errorf(rpc.CodeNotFound, "no master %q is listed in etcd", id)
	}
	return fmt.Errorf("%w: the etcd backend has no membership changes: stop the master process instead", fsm.ErrInvalid)
}

// Transfer implements httpapi.Backend: the active master gives the lock up and
// the standby that has waited longest takes it. The etcd lock cannot pick
// a particular master, so id must be empty.
func (m *Master) Transfer(_ context.Context, id string) error {
	if id != "" {
		return fmt.Errorf("%w: the etcd backend hands over to the standby that waited longest; give no id", fsm.ErrInvalid)
	}
	if !m.active.Load() {
		return m.notActive()
	}
	m.requestStepDown()
	return nil
}

// Sessions implements httpapi.SessionBackend: the session keep-alive table
// while this master serves.
func (m *Master) Sessions() (httpapi.SessionKeeper, bool) {
	t := m.sessions.Load()
	if t == nil || !m.active.Load() {
		return nil, false
	}
	return t, true
}

// ServesFollowerReads reports false: a standby holds no up-to-date copy of
// the state, so watches go to the active master.
func (m *Master) ServesFollowerReads() bool { return false }

// Ready implements httpapi.Backend: this master serves, or knows who does.
func (m *Master) Ready() bool {
	if m.active.Load() {
		return true
	}
	addr := m.master.Load().APIAddr
	return addr != "" && addr != m.cfg.APIAddr
}

// encodeState is the value saved in etcd: the FSM snapshot, gzipped.
func encodeState(f *fsm.FSM) ([]byte, error) {
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestSpeed) // a valid level never fails
	if err := f.WriteSnapshot(zw); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// decodeState reverses encodeState; no saved state is an empty FSM.
func decodeState(blob []byte) ([]byte, error) {
	if blob == nil {
		return fsm.New().SnapshotBytes(), nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(blob))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(io.LimitReader(zr, maxState))
}

// maxState bounds the decompressed state, against a corrupt value.
const maxState = 4 << 30
