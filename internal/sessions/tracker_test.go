package sessions

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/rpc"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// t0 is the FSM time the tests start at.
const t0 = int64(1_700_000_000) * int64(time.Second)

// cluster is one replica's state with a leader's fake term clock: the
// tracker's proposals apply to the state at once, stamped with the clock,
// and are counted.
type cluster struct {
	t *testing.T
	f *fsm.FSM

	mu        sync.Mutex
	index     uint64
	proposals []fsm.Command

	now       atomic.Int64
	verifyErr atomic.Pointer[error]
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	c := &cluster{t: t, f: fsm.New()}
	c.now.Store(t0)
	c.apply(&fsm.SetProtocol{Level: fsm.Protocol6})
	return c
}

// apply stamps cmd with the clock and applies it; it fails the test unless
// the state machine accepted it.
func (c *cluster) apply(cmd fsm.Command) *fsm.Result {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	cmd.Hdr().Now = c.now.Load()
	c.index++
	r := c.f.ApplyEntry(c.index, fsm.Encode(cmd))
	if err := r.Err(); err != nil {
		c.t.Fatalf("%v: %v", cmd.Type(), err)
	}
	return r
}

func (c *cluster) propose(_ context.Context, cmd fsm.Command) (*fsm.Result, error) {
	c.mu.Lock()
	c.proposals = append(c.proposals, cmd)
	c.mu.Unlock()
	return c.apply(cmd), nil
}

// proposed returns the commands the tracker proposed, of type typ.
func (c *cluster) proposed(typ fsm.CmdType) []fsm.Command {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []fsm.Command
	for _, cmd := range c.proposals {
		if cmd.Type() == typ {
			out = append(out, cmd)
		}
	}
	return out
}

func (c *cluster) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.proposals)
}

func (c *cluster) verifyLeader(context.Context) error {
	if err := c.verifyErr.Load(); err != nil {
		return *err
	}
	return nil
}

// takeOver applies a new leader's grace and returns its tracker.
func (c *cluster) takeOver() *Tracker {
	c.t.Helper()
	c.apply(&fsm.LeaderGrace{Grace: time.Second})
	return New(Config{
		FSM: c.f, Now: c.now.Load, Propose: c.propose, VerifyLeader: c.verifyLeader,
		Logger: hclog.New(&hclog.LoggerOptions{Name: "sessions", Level: hclog.Debug, Output: testWriter{c.t}}),
	})
}

// open opens a session of ttl and returns its id.
func (c *cluster) open(ttl time.Duration) uint64 {
	c.t.Helper()
	r := c.apply(&fsm.OpenSession{Header: fsm.Header{Request: fsm.RequestID{Client: uuid.New(), Seq: 1}}, TTL: ttl})
	return r.Session
}

func (c *cluster) isOpen(id uint64) bool {
	_, _, open := c.f.SessionOpen(id)
	return open
}

// run moves the clock by d in steps of half a second, a step of the
// tracker after each: no stall.
func (c *cluster) run(tr *Tracker, d time.Duration) {
	for d > 0 {
		s := min(d, 500*time.Millisecond)
		c.now.Add(int64(s))
		tr.step(context.Background())
		d -= s
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

func TestSessionExpiresAfterItsTTLWithoutKeepAlive(t *testing.T) {
	c := newCluster(t)
	tr := c.takeOver()
	id := c.open(2 * time.Second)
	c.run(tr, 1500*time.Millisecond)
	if !c.isOpen(id) {
		t.Fatal("the session ended before its TTL")
	}
	if d, ok := tr.Remaining(id); !ok || d <= 0 || d > 2*time.Second {
		t.Fatalf("Remaining = %v, %v; want within the TTL", d, ok)
	}
	c.run(tr, time.Second)
	if c.isOpen(id) {
		t.Fatal("the session outlived its TTL without a keep-alive")
	}
	if n := len(c.proposed(fsm.TypeExpireSessions)); n != 1 {
		t.Fatalf("%d ExpireSessions entries, want 1", n)
	}
	if _, err := tr.KeepAlive(id, [16]byte{}, nil); !errors.Is(err, fsm.ErrSessionExpired) {
		t.Fatalf("KeepAlive of an expired session: %v, want ErrSessionExpired", err)
	}
	if _, ok := tr.Remaining(id); ok {
		t.Fatal("Remaining of an expired session reported it open")
	}
}

// In the steady state, sessions that keep alive cost no log entry.
func TestKeepAlivesWriteNothing(t *testing.T) {
	c := newCluster(t)
	tr := c.takeOver()
	a, b := c.open(2*time.Second), c.open(3*time.Second)
	before := c.count()
	for range 40 {
		c.run(tr, 500*time.Millisecond)
		if d, err := tr.KeepAlive(a, [16]byte{}, nil); err != nil || d != 2*time.Second {
			t.Fatalf("KeepAlive = %v, %v; want the TTL", d, err)
		}
		tr.Touch(b)
	}
	if !c.isOpen(a) || !c.isOpen(b) {
		t.Fatal("a session kept alive ended")
	}
	if n := c.count() - before; n != 0 {
		t.Fatalf("%d proposals while the sessions kept alive, want none: %v", n, c.proposals[before:])
	}
	if d, ok := tr.Remaining(a); !ok || d != 2*time.Second {
		t.Fatalf("Remaining = %v, %v; want the TTL", d, ok)
	}
}

// A request applied under a session is a sign of life, even when no keep-
// alive or touch reaches the tracker.
func TestRequestsUnderASessionKeepItAlive(t *testing.T) {
	c := newCluster(t)
	tr := c.takeOver()
	id := c.open(2 * time.Second)
	client := uuid.New()
	for i := range 20 {
		c.run(tr, 500*time.Millisecond)
		c.apply(&fsm.KVAdd{Header: fsm.Header{Request: fsm.RequestID{Client: client, Seq: uint64(i + 1)}, Session: id}, Key: "n", Delta: 1})
	}
	if !c.isOpen(id) {
		t.Fatal("a session making requests ended")
	}
	c.run(tr, 2500*time.Millisecond)
	if c.isOpen(id) {
		t.Fatal("the session outlived its TTL after its last request")
	}
}

func TestKeepAliveChecksTheOwner(t *testing.T) {
	c := newCluster(t)
	tr := c.takeOver()
	owner := [16]byte{1}
	id := c.apply(&fsm.OpenSession{Header: fsm.Header{Request: fsm.RequestID{Client: uuid.New(), Seq: 1, Owner: owner}}, TTL: time.Minute}).Session
	if _, err := tr.KeepAlive(id, [16]byte{2}, nil); !errors.Is(err, fsm.ErrForeignClient) {
		t.Fatalf("KeepAlive by another owner: %v, want ErrForeignClient", err)
	}
	for _, o := range [][16]byte{owner, {}} {
		if _, err := tr.KeepAlive(id, o, nil); err != nil {
			t.Fatalf("KeepAlive by %x: %v", o, err)
		}
	}
	if _, err := tr.KeepAlive(id+1, owner, nil); !errors.Is(err, fsm.ErrSessionExpired) {
		t.Fatalf("KeepAlive of a session never opened: %v, want ErrSessionExpired", err)
	}
}

// Leader churn without a sign of life: the first new leader gives the
// session a fresh TTL, the second does not, whatever the terms' lengths.
func TestChurnGivesNoSecondGraceWithoutASignOfLife(t *testing.T) {
	c := newCluster(t)
	first := c.takeOver()
	dead := c.open(4 * time.Second)
	alive := c.open(4 * time.Second)
	c.run(first, time.Second)
	for term := 2; c.isOpen(dead); term++ {
		if term > 3 {
			t.Fatalf("the session outlived %d take-overs without a sign of life", term-2)
		}
		// Each term ends before the TTL would have run out.
		tr := c.takeOver()
		if _, err := tr.KeepAlive(alive, [16]byte{}, nil); err != nil {
			t.Fatalf("term %d: KeepAlive: %v", term, err)
		}
		c.run(tr, time.Second)
	}
	if !c.isOpen(alive) {
		t.Fatal("a session that kept alive in every term ended")
	}
}

// A session kept alive after a take-over is checkpointed once in the
// term, however many keep-alives it sends, and the checkpoints of sessions
// kept alive together share an entry.
func TestCheckpointOncePerTerm(t *testing.T) {
	c := newCluster(t)
	c.takeOver()
	a, b := c.open(5*time.Second), c.open(5*time.Second)
	c.now.Add(int64(time.Second))
	tr := c.takeOver()
	grace, _ := c.f.SessionGraces()
	for range 10 {
		for _, id := range []uint64{a, b} {
			if _, err := tr.KeepAlive(id, [16]byte{}, nil); err != nil {
				t.Fatal(err)
			}
		}
		c.run(tr, 500*time.Millisecond)
	}
	cps := c.proposed(fsm.TypeCheckpointSessions)
	if len(cps) != 1 || !slices.Equal(cps[0].(*fsm.CheckpointSessions).IDs, []uint64{a, b}) {
		t.Fatalf("checkpoints %v, want one naming %d and %d", cps, a, b)
	}
	for _, id := range []uint64{a, b} {
		if info, _ := c.f.Session(id); info.Seen < grace {
			t.Fatalf("session %d seen at %d, before the term's grace %d", id, info.Seen, grace)
		}
	}
	if n := c.count(); n != 1 {
		t.Fatalf("%d proposals, want only the checkpoint", n)
	}
	// The next leader gives them a fresh TTL.
	next := c.takeOver()
	c.run(next, 4*time.Second)
	if !c.isOpen(a) || !c.isOpen(b) {
		t.Fatal("a checkpointed session ended before its TTL under the next leader")
	}
}

// A stall of the leader moves the deadlines later by the stall: the
// keep-alives that waited meanwhile are not taken as missed.
func TestStallMovesDeadlines(t *testing.T) {
	c := newCluster(t)
	tr := c.takeOver()
	id := c.open(2 * time.Second)
	c.run(tr, time.Second)
	before, _ := tr.Remaining(id)
	c.now.Add(int64(10 * time.Second)) // the process was paused
	tr.step(context.Background())
	if !c.isOpen(id) {
		t.Fatal("a stall of the leader ended a session")
	}
	if d, _ := tr.Remaining(id); d != before-TickInterval {
		t.Fatalf("after the stall %v remain, want %v (all but one tick)", d, before-TickInterval)
	}
	c.run(tr, 2*time.Second)
	if c.isOpen(id) {
		t.Fatal("the session outlived its TTL after the stall")
	}
}

// Without a confirmed leadership, nothing ends.
func TestUnconfirmedLeaderEndsNothing(t *testing.T) {
	c := newCluster(t)
	c.apply(&fsm.SetDataset{
		Header: fsm.Header{Request: fsm.RequestID{Client: uuid.New(), Seq: 1}},
		Params: fsm.DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Second, FailureMax: 3},
		Chunks: []fsm.Chunk{{Path: "/d", Records: 1}},
	})
	tr := c.takeOver()
	id := c.open(5 * time.Second)
	held := c.apply(&fsm.GetTask{Header: fsm.Header{Request: fsm.RequestID{Client: uuid.New(), Seq: 1}, Session: id}}).Task.Meta
	err := errors.New("leadership lost")
	c.verifyErr.Store(&err)
	c.run(tr, 10*time.Second)
	if !c.isOpen(id) || c.f.Stats("").Held != 1 {
		t.Fatal("a leader that could not confirm its leadership ended a session or revoked a task")
	}
	if n := c.count(); n != 0 {
		t.Fatalf("%d proposals without a confirmed leadership", n)
	}
	c.verifyErr.Store(nil)
	c.run(tr, 500*time.Millisecond)
	if c.isOpen(id) {
		t.Fatal("the session outlived its TTL once leadership was confirmed")
	}
	if ts, _ := c.f.Task("", held.ID); ts.Queue != "todo" || ts.Failures != 1 {
		t.Fatalf("the held task is %+v, want back to todo with a failure", ts)
	}
}

// A held task whose records do not grow for the job's task timeout is
// revoked; one whose records grow is not. A new leader restarts the
// timers.
func TestProgressRevokesStalledTasks(t *testing.T) {
	c := newCluster(t)
	const timeout = 3 * time.Second
	c.apply(&fsm.SetDataset{
		Header: fsm.Header{Request: fsm.RequestID{Client: uuid.New(), Seq: 1}},
		Params: fsm.DatasetParams{ChunksPerTask: 1, TaskTimeout: timeout, FailureMax: 3},
		Chunks: []fsm.Chunk{{Path: "/d", Records: 100}, {Path: "/d", Offset: 1, Records: 100}},
	})
	tr := c.takeOver()
	id := c.open(2 * time.Second) // shorter than the task timeout
	client := uuid.New()
	get := func(seq uint64) fsm.TaskMeta {
		return c.apply(&fsm.GetTask{Header: fsm.Header{Request: fsm.RequestID{Client: client, Seq: seq}, Session: id}}).Task.Meta
	}
	reading, stalled := get(1), get(2)
	records := int64(0)
	keepAlive := func(tr *Tracker) {
		t.Helper()
		records++
		_, err := tr.KeepAlive(id, [16]byte{}, []rpc.SessionProgress{
			{Job: "", Task: reading.ID, Epoch: reading.Epoch, Records: records},
			{Job: fsm.DefaultJob, Task: stalled.ID, Epoch: stalled.Epoch, Records: 7},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Two seconds under this leader, then a new one: its timers start over.
	for range 4 {
		keepAlive(tr)
		c.run(tr, 500*time.Millisecond)
	}
	tr = c.takeOver()
	for range 5 {
		keepAlive(tr)
		c.run(tr, 500*time.Millisecond)
	}
	if c.f.Stats("").Held != 2 || len(c.proposed(fsm.TypeTaskFailed)) != 0 {
		t.Fatalf("a task was revoked before the task timeout under the new leader: %+v", c.f.Stats(""))
	}
	for range 4 {
		keepAlive(tr)
		c.run(tr, 500*time.Millisecond)
	}
	if ts, _ := c.f.Task("", stalled.ID); ts.Queue != "todo" || ts.Failures != 1 {
		t.Fatalf("the stalled task is %+v, want revoked: todo with a failure", ts)
	}
	if ts, _ := c.f.Task("", reading.ID); ts.Queue != "held" {
		t.Fatalf("the task being read is %+v, want still held", ts)
	}
	if n := len(c.proposed(fsm.TypeTaskFailed)); n != 1 || !c.isOpen(id) {
		t.Fatalf("%d TaskFailed entries, session open %v; want 1, open", n, c.isOpen(id))
	}
	// A task leased since the last sync is tracked from its first report.
	again := get(3)
	for range 10 {
		c.run(tr, 500*time.Millisecond)
		records++
		if _, err := tr.KeepAlive(id, [16]byte{}, []rpc.SessionProgress{
			{Task: reading.ID, Epoch: reading.Epoch, Records: records},
			{Task: again.ID, Epoch: again.Epoch, Records: records},
		}); err != nil {
			t.Fatal(err)
		}
	}
	if st := c.f.Stats(""); st.Held != 2 {
		t.Fatalf("stats %+v, want both tasks that progress held", st)
	}
}

// A job's task timeout shorter than the session's TTL does not revoke a
// task whose reader reports progress in every keep-alive, a third of the
// TTL apart: the progress timeout is the TTL then.
func TestProgressTimeoutIsAtLeastTheTTL(t *testing.T) {
	c := newCluster(t)
	c.apply(&fsm.SetDataset{
		Header: fsm.Header{Request: fsm.RequestID{Client: uuid.New(), Seq: 1}},
		Params: fsm.DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Second, FailureMax: 3},
		Chunks: []fsm.Chunk{{Path: "/d", Records: 100}},
	})
	tr := c.takeOver()
	id := c.open(3 * time.Second)
	m := c.apply(&fsm.GetTask{Header: fsm.Header{Request: fsm.RequestID{Client: uuid.New(), Seq: 1}, Session: id}}).Task.Meta
	keepAlive := func(records int64) {
		t.Helper()
		if _, err := tr.KeepAlive(id, [16]byte{}, []rpc.SessionProgress{{Task: m.ID, Epoch: m.Epoch, Records: records}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 6 {
		keepAlive(int64(i + 1))
		c.run(tr, time.Second)
	}
	if n := len(c.proposed(fsm.TypeTaskFailed)); n != 0 {
		t.Fatalf("a task read at every keep-alive was revoked (%d TaskFailed)", n)
	}
	// No progress for the TTL: revoked.
	for range 4 {
		keepAlive(6)
		c.run(tr, time.Second)
	}
	if ts, _ := c.f.Task("", m.ID); ts.Queue != "todo" || ts.Failures != 1 {
		t.Fatalf("the stalled task is %+v, want revoked once its progress stopped for the TTL", ts)
	}
}

// Run ends a session that stops keeping alive, on the term clock, and
// after Run the tracker answers ErrStopped.
func TestRunExpiresAndStops(t *testing.T) {
	c := newCluster(t)
	start := time.Now()
	tr := c.takeOver()
	// The term clock runs at the real pace from here.
	tr.cfg.Now = func() int64 { return t0 + int64(time.Since(start)) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tr.Run(ctx)
	}()
	c.now.Store(tr.cfg.Now())
	id := c.open(time.Second)
	if _, err := tr.KeepAlive(id, [16]byte{}, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for c.isOpen(id) {
		if time.Now().After(deadline) {
			t.Fatal("the session did not end in 30s")
		}
		time.Sleep(10 * time.Millisecond)
		c.now.Store(tr.cfg.Now())
	}
	cancel()
	<-done
	// The state no longer tells this tracker whether a session is open.
	other := c.open(time.Minute)
	for _, id := range []uint64{id, other} {
		if _, err := tr.KeepAlive(id, [16]byte{}, nil); !errors.Is(err, ErrStopped) {
			t.Fatalf("KeepAlive of session %d after Run: %v, want ErrStopped", id, err)
		}
	}
	if _, ok := tr.Remaining(other); ok {
		t.Fatal("Remaining after Run reported a session")
	}
}
