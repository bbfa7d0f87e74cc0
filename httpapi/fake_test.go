package httpapi_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
	"github.com/raftmaster/raftmaster/rpc"
)

// fakeBackend is a Local backend whose leadership, membership and errors
// the test sets: with err set, every write and leader read fails with it.
type fakeBackend struct {
	*apitest.Local

	mu          sync.Mutex
	err         error
	leader      rpc.NodeRef
	leaderKnown bool
	members     []rpc.Member
	notReady    bool
	commitIndex uint64
	joined      []rpc.AddMemberRequest
	removed     []string
	transferred []string
	// keeper keeps the sessions while the backend leads, unless
	// noKeeper (a leader that has not taken them over yet).
	keeper   *fakeKeeper
	noKeeper bool
}

func newFake(l *apitest.Local) *fakeBackend {
	return &fakeBackend{Local: l, leader: rpc.NodeRef{ID: l.ID}, leaderKnown: true, keeper: newFakeKeeper(l.FSM())}
}

// Sessions implements httpapi.SessionBackend: the keeper, while the
// backend leads.
func (f *fakeBackend) Sessions() (httpapi.SessionKeeper, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.leaderKnown || f.leader.ID != f.Local.ID || f.noKeeper {
		return nil, false
	}
	return f.keeper, true
}

// fakeKeeper is a session keeper whose sessions live while the FSM holds
// them (the test ends them with ExpireSessions); it records what it is
// told.
type fakeKeeper struct {
	f *fsm.FSM

	mu         sync.Mutex
	keepAlives map[uint64]int
	progress   map[uint64][]rpc.SessionProgress
	touched    map[uint64]int
	remaining  map[uint64]time.Duration
}

func newFakeKeeper(f *fsm.FSM) *fakeKeeper {
	return &fakeKeeper{f: f, keepAlives: map[uint64]int{}, progress: map[uint64][]rpc.SessionProgress{},
		touched: map[uint64]int{}, remaining: map[uint64]time.Duration{}}
}

func (k *fakeKeeper) KeepAlive(id uint64, owner [16]byte, progress []rpc.SessionProgress) (time.Duration, error) {
	ttl, own, open := k.f.SessionOpen(id)
	if !open {
		return 0, fmt.Errorf("session %d: %w", id, fsm.ErrSessionExpired)
	}
	if own != owner {
		return 0, fmt.Errorf("session %d: %w", id, fsm.ErrForeignClient)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.keepAlives[id]++
	k.progress[id] = progress
	delete(k.remaining, id)
	return ttl, nil
}

func (k *fakeKeeper) Touch(id uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.touched[id]++
}

// Remaining is what the test set with setRemaining, else the TTL.
func (k *fakeKeeper) Remaining(id uint64) (time.Duration, bool) {
	ttl, _, open := k.f.SessionOpen(id)
	if !open {
		return 0, false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if d, ok := k.remaining[id]; ok {
		return d, true
	}
	return ttl, true
}

func (k *fakeKeeper) setRemaining(id uint64, d time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.remaining[id] = d
}

// seen returns the keep-alives and touches of session id, and the last
// progress it reported.
func (k *fakeKeeper) seen(id uint64) (keepAlives, touches int, progress []rpc.SessionProgress) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.keepAlives[id], k.touched[id], k.progress[id]
}

func (f *fakeBackend) failure() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// follower makes the backend a follower of leader (unknown when !known).
func (f *fakeBackend) follower(err error, leader rpc.NodeRef, known bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err, f.leader, f.leaderKnown = err, leader, known
}

func (f *fakeBackend) Apply(ctx context.Context, c fsm.Command) (*fsm.Result, error) {
	if err := f.failure(); err != nil {
		return nil, err
	}
	return f.Local.Apply(ctx, c)
}

func (f *fakeBackend) SetDataset(ctx context.Context, job string, req fsm.RequestID, p fsm.DatasetParams, patterns []string, chunks []fsm.Chunk) (*fsm.Result, error) {
	if err := f.failure(); err != nil {
		return nil, err
	}
	return f.Local.SetDataset(ctx, job, req, p, patterns, chunks)
}

func (f *fakeBackend) ReadBarrier(ctx context.Context) error {
	if err := f.failure(); err != nil {
		return err
	}
	return f.Local.ReadBarrier(ctx)
}

func (f *fakeBackend) Leader() (rpc.NodeRef, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leader, f.leaderKnown
}

func (f *fakeBackend) Status() rpc.StatusResponse {
	st := f.Local.Status()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.commitIndex > 0 {
		st.State, st.CommitIndex = "Follower", f.commitIndex
	}
	return st
}

func (f *fakeBackend) Members(ctx context.Context) ([]rpc.Member, error) {
	if err := f.failure(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.members == nil {
		return f.Local.Members(ctx)
	}
	return append([]rpc.Member(nil), f.members...), nil
}

func (f *fakeBackend) AddMember(_ context.Context, req rpc.AddMemberRequest) error {
	if err := f.failure(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.joined = append(f.joined, req)
	return nil
}

func (f *fakeBackend) RemoveMember(_ context.Context, id string) error {
	if err := f.failure(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = append(f.removed, id)
	return nil
}

func (f *fakeBackend) Transfer(_ context.Context, id string) error {
	if err := f.failure(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.transferred = append(f.transferred, id)
	return nil
}

func (f *fakeBackend) Ready() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.notReady
}

var (
	_ httpapi.Backend        = (*fakeBackend)(nil)
	_ httpapi.SessionBackend = (*fakeBackend)(nil)
)

// Short names for newEnv's wrap signature.
type (
	localBackend = apitest.Local
	rpcBackend   = httpapi.Backend
)
