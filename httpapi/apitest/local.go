// Package rpctest provides a single-replica Backend that applies commands
// straight to a local FSM, for tests of the HTTP handlers and the client
// that do not need Raft.
package apitest

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/internal/sessions"
	"github.com/raftmaster/raftmaster/rpc"
)

// Local is an httpapi.Backend over one in-process FSM: it is always the leader.
// Now stamps commands; tests may replace it to control time.
type Local struct {
	ID  string
	API string
	Now func() time.Time
	fsm *fsm.FSM
	mu  sync.Mutex
	idx uint64
}

// NewLocal returns a Local backend with node id "local", its state at
// this build's protocol level, as a new cluster's is once its leader has
// raised it.
func NewLocal() *Local {
	l := &Local{ID: "local", Now: time.Now, fsm: fsm.New()}
	l.idx++
	l.fsm.ApplyEntry(l.idx, fsm.Encode(&fsm.SetProtocol{Level: fsm.Protocol})) // at FSM time 0: tests may set Now
	return l
}

// NodeID implements httpapi.Backend.
func (l *Local) NodeID() string { return l.ID }

// FSM implements httpapi.Backend.
func (l *Local) FSM() *fsm.FSM { return l.fsm }

// Apply implements httpapi.Backend.
func (l *Local) Apply(ctx context.Context, c fsm.Command) (*fsm.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	c.Hdr().Now = l.Now().UnixNano()
	l.idx++
	return l.fsm.ApplyEntry(l.idx, fsm.Encode(c)), nil
}

// SetDataset implements httpapi.Backend: it applies fsm.DatasetCommands
// for entries of MaxEntryBytes, as a Raft leader proposes them.
func (l *Local) SetDataset(ctx context.Context, job string, req fsm.RequestID, params fsm.DatasetParams, patterns []string, chunks []fsm.Chunk) (*fsm.Result, error) {
	cmds := fsm.DatasetCommands(job, req, params, patterns, chunks, uuid.NewString(), MaxEntryBytes)
	for _, c := range cmds[:len(cmds)-1] {
		if r, err := l.Apply(ctx, c); err != nil || r.Code != fsm.CodeOK {
			return r, err
		}
	}
	return l.Apply(ctx, cmds[len(cmds)-1])
}

// MaxEntryBytes is the entry limit of a Local backend's dataset proposals,
// the Raft node's default.
const MaxEntryBytes = 256 << 10

// ReadBarrier implements httpapi.Backend; a single replica is always current.
func (l *Local) ReadBarrier(ctx context.Context) error { return ctx.Err() }

// Leader implements httpapi.Backend.
func (l *Local) Leader() (rpc.NodeRef, bool) { return rpc.NodeRef{ID: l.ID, APIAddr: l.API}, true }

// Status implements httpapi.Backend.
func (l *Local) Status() rpc.StatusResponse {
	st := l.fsm.Stats(fsm.DefaultJob)
	return rpc.StatusResponse{
		NodeID: l.ID, APIAddr: l.API, State: "Leader", Leader: rpc.NodeRef{ID: l.ID, APIAddr: l.API},
		Term: 1, LastIndex: st.AppliedIndex, CommitIndex: st.AppliedIndex, AppliedIndex: st.AppliedIndex,
		Ready: true,
	}
}

// Members implements httpapi.Backend.
func (l *Local) Members(context.Context) ([]rpc.Member, error) {
	return []rpc.Member{{ID: l.ID, APIAddr: l.API, Suffrage: "Voter", Leader: true}}, nil
}

// AddMember implements httpapi.Backend; a Local backend has no peers to add.
func (l *Local) AddMember(context.Context, rpc.AddMemberRequest) error { return httpapi.ErrNotLeader }

// RemoveMember implements httpapi.Backend.
func (l *Local) RemoveMember(context.Context, string) error { return httpapi.ErrNotLeader }

// Transfer implements httpapi.Backend.
func (l *Local) Transfer(context.Context, string) error { return httpapi.ErrNoLeader }

// Ready implements httpapi.Backend.
func (l *Local) Ready() bool { return true }

var _ httpapi.Backend = (*Local)(nil)

// SessionLocal is a Local backend that keeps sessions
// (httpapi.SessionBackend), as a Raft leader does once it has taken over.
type SessionLocal struct {
	*Local
	tracker *sessions.Tracker
}

// Sessions implements httpapi.SessionBackend.
func (l *SessionLocal) Sessions() (httpapi.SessionKeeper, bool) { return l.tracker, true }

// WithSessions returns l as a backend that keeps sessions: it runs the
// leader's keep-alive table until stop is called (stop waits for it to
// end). l itself keeps none: its session endpoints answer not_found, as a
// server's from before sessions.
func (l *Local) WithSessions() (b *SessionLocal, stop func()) {
	t := sessions.New(sessions.Config{
		FSM:          l.fsm,
		Now:          func() int64 { return l.Now().UnixNano() },
		Propose:      l.Apply,
		VerifyLeader: func(ctx context.Context) error { return ctx.Err() },
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t.Run(ctx)
	}()
	return &SessionLocal{Local: l, tracker: t}, func() {
		cancel()
		<-done
	}
}
