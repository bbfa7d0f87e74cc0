// Package sessions keeps the leader's table of session keep-alives
// (fsm.OpenSession): which session lives how long, and how far each task
// a session holds has been read. The table lives in the leader's memory
// for one term and is not replicated. A session that misses its
// keep-alives for its TTL is ended with one fsm.ExpireSessions entry; a
// held task whose reader reports no progress for the job's task timeout,
// or the session's TTL when that is longer (progress comes with the
// keep-alives, every third of the TTL), is revoked with fsm.TaskFailed. In the steady state, sessions that keep
// alive, the tracker writes nothing to the log.
//
// A new leader cannot know when the sessions last kept alive, so it gives
// each a fresh TTL, but only once in a row: a session gets one only when
// it showed life (fsm.SessionInfo.Seen) since the leader before took over.
// Each session that keeps alive under a leader is checkpointed once in
// its term (fsm.CheckpointSessions) so that the next leader sees that.
// Leader churn thus keeps a session that died alive for at most its TTL
// and one fail-over.
package sessions

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/rpc"
)

// Intervals of the tracker's loop.
const (
	// TickInterval is how often the tracker looks for sessions and held
	// tasks that are due.
	TickInterval = 100 * time.Millisecond
	// SyncInterval is how often the tracker reads the sessions from the
	// state (a listing of every session and held task, skipped when
	// nothing was applied), and the least time between two checkpoint
	// entries. Where a listing takes longer than SyncInterval/syncShare,
	// the tracker reads every syncShare times its duration instead, and
	// at least every MaxSyncInterval.
	SyncInterval = 250 * time.Millisecond
	// MaxSyncInterval bounds the time between two syncs however long
	// they take: a session opened but never kept alive ends at most
	// this late, and a held task's progress timer starts at most this
	// late.
	MaxSyncInterval = 5 * time.Second
	// syncShare is the inverse of the share of the loop's time that syncs
	// may take (under MaxSyncInterval).
	syncShare = 20
	// MinStall is the least lateness of the loop taken for a stall of
	// the leader (see Tracker).
	MinStall = time.Second

	// unconfirmedLogEvery spaces the log lines of a leadership that
	// cannot be confirmed.
	unconfirmedLogEvery = 10 * time.Second
)

// ErrStopped answers the calls of a tracker whose term has ended: this
// node no longer leads, or leads in a newer term with a new tracker.
var ErrStopped = errors.New("sessions: the leader's term has ended")

// Config configures a Tracker.
type Config struct {
	// FSM is the local replica, which the tracker reads.
	FSM *fsm.FSM
	// Now is the leader's term clock in unix nanoseconds, the time it
	// stamps into its proposals (leader.TermClock).
	Now func() int64
	// Propose proposes a command and returns its result once applied.
	Propose func(ctx context.Context, c fsm.Command) (*fsm.Result, error)
	// VerifyLeader returns nil once this node has confirmed that it still
	// leads (a quorum's round trip, or the etcd lock); the tracker calls
	// it before it ends a session or revokes a task, so that a leader with
	// a stale view, whose clients went to another, ends nothing.
	VerifyLeader func(ctx context.Context) error
	// Logger receives what the tracker ends; nil discards it.
	Logger hclog.Logger
	// Observer, when set, counts what the tracker does.
	Observer Observer
}

// Observer counts what a tracker does, for metrics. Its methods must be
// cheap and safe for concurrent use.
type Observer interface {
	// SessionsExpired counts sessions ended for missing keep-alives.
	SessionsExpired(n int)
	// SessionTasksRevoked counts held tasks revoked for lack of progress.
	SessionTasksRevoked(n int)
	// SessionsCheckpointed counts sessions a checkpoint entry named.
	SessionsCheckpointed(n int)
}

// Tracker is one leader term's table of session keep-alives. It
// implements httpapi.SessionKeeper. Create it with New once the term's
// take-over (fsm.LeaderGrace) is applied, and run Run while the node
// leads; after Run returns, its calls answer ErrStopped.
//
// Deadlines are on the leader's term clock. A loop iteration that starts
// later than it should by more than the stall threshold (MinStall, or half
// the shortest TTL when longer) means the leader itself was stalled (a
// pause of the process or its machine) while keep-alives waited: the
// tracker then moves every deadline, and every progress timer, later by
// the stall before it ends anything.
type Tracker struct {
	cfg Config
	log hclog.Logger
	// grace is the FSM time of this term's LeaderGrace: a session seen at
	// or after it has shown life in this term (it is "confirmed").
	grace int64

	mu      sync.Mutex
	stopped bool
	entries map[uint64]*entry
	// queued are the sessions kept alive in this term but not confirmed
	// yet: the next checkpoint entry names them.
	queued map[uint64]struct{}
	// gen counts the syncs: an entry or task record added while a sync
	// read the state is kept by it although the listing missed it.
	gen uint64
	// minTTL is the shortest TTL of the tracked sessions.
	minTTL time.Duration

	// Owned by the loop (Run, step).
	lastStep, lastSync, lastFlush, lastUnconfirmed int64
	syncedIndex                                    uint64
	// syncEvery is the time between two syncs (SyncInterval).
	syncEvery time.Duration
}

// entry is a session's keep-alive state.
type entry struct {
	ttl      time.Duration
	owner    [16]byte
	deadline int64
	// confirmed: the session showed life in this term, in the state
	// (Seen at or after the term's grace): it needs no checkpoint.
	confirmed bool
	// expiring: an ExpireSessions naming it is in flight.
	expiring bool
	gen      uint64
	tasks    map[taskKey]*progress
	// nextDue is no later than the earliest time one of tasks may be due
	// for revocation, so that due skips the tasks of an entry before it.
	nextDue int64
}

// taskKey names a held task by its lease (wire epoch).
type taskKey struct {
	job       string
	id, epoch int
}

// progress is how far a held task has been read, and since when it has
// not grown.
type progress struct {
	records int64
	since   int64
	// timeout is the job's task timeout, or the session's TTL when that
	// is longer: a reader reports progress only in its keep-alives; 0
	// until the state lists the task as held by the session.
	timeout  time.Duration
	gen      uint64
	revoking bool
}

// New returns the tracker of the term that has just begun, from the
// sessions open in cfg.FSM. A session gets a fresh TTL from now if it
// showed life since the previous leader took over (fsm.SessionGraces);
// any other is due at once, to end as soon as this node has confirmed its
// leadership, unless it keeps alive first. Every held task's progress
// timer starts now.
func New(cfg Config) *Tracker {
	log := cfg.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	latest, previous := cfg.FSM.SessionGraces()
	t := &Tracker{
		cfg: cfg, log: log, grace: latest,
		entries: make(map[uint64]*entry), queued: make(map[uint64]struct{}),
	}
	now := cfg.Now()
	t.syncedIndex = cfg.FSM.AppliedIndex()
	stale := 0
	for _, info := range cfg.FSM.Sessions() {
		e := t.newEntry(info.TTL, info.Owner, now)
		e.confirmed = info.Seen >= t.grace
		if info.Seen < previous {
			e.deadline = now
			stale++
		}
		e.syncTasks(info.Tasks, now, 0)
		t.entries[info.ID] = e
	}
	t.minTTL = t.shortestTTL()
	t.lastStep, t.lastSync = now, now
	if stale > 0 {
		t.log.Info("sessions without a sign of life since the previous leader took over end once this leadership is confirmed",
			"sessions", stale, "open", len(t.entries))
	}
	return t
}

// newEntry returns an entry due a TTL from now.
func (t *Tracker) newEntry(ttl time.Duration, owner [16]byte, now int64) *entry {
	return &entry{ttl: ttl, owner: owner, deadline: now + int64(ttl), gen: t.gen, tasks: make(map[taskKey]*progress)}
}

// Run looks for due sessions and tasks every TickInterval until ctx is
// done; then the tracker stops.
func (t *Tracker) Run(ctx context.Context) {
	defer t.stop()
	timer := time.NewTimer(TickInterval)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		t.step(ctx)
		timer.Reset(TickInterval)
	}
}

func (t *Tracker) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	t.entries, t.queued = nil, nil
}

// KeepAlive restarts session id's TTL and records the progress of the
// tasks it holds; it answers the TTL. A session that has ended (or is
// being ended) answers fsm.ErrSessionExpired, one of another owner (both
// owners set) fsm.ErrForeignClient.
func (t *Tracker) KeepAlive(id uint64, owner [16]byte, progress []rpc.SessionProgress) (time.Duration, error) {
	// Once the term has ended, the local state may miss sessions opened
	// since: it says nothing of the session.
	if t.isStopped() {
		return 0, ErrStopped
	}
	ttl, own, open := t.cfg.FSM.SessionOpen(id)
	if !open {
		return 0, fmt.Errorf("session %d: %w", id, fsm.ErrSessionExpired)
	}
	if owner != ([16]byte{}) && own != ([16]byte{}) && owner != own {
		return 0, fmt.Errorf("session %d: %w", id, fsm.ErrForeignClient)
	}
	// Progress for a task leased since the last sync: read what the
	// session holds now, outside the lock.
	var held []fsm.HeldTask
	if len(progress) > 0 && t.untracked(id, progress) {
		if info, ok := t.cfg.FSM.Session(id); ok {
			held = info.Tasks
		}
	}
	now := t.cfg.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	e, err := t.alive(id, ttl, own, now)
	if err != nil {
		return 0, err
	}
	if held != nil {
		e.addTasks(held, now, t.gen)
	}
	for _, p := range progress {
		job := p.Job
		if job == "" {
			job = fsm.DefaultJob
		}
		if r := e.tasks[taskKey{job, p.Task, p.Epoch}]; r != nil && p.Records > r.records {
			r.records, r.since = p.Records, now
		}
	}
	return ttl, nil
}

func (t *Tracker) isStopped() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stopped
}

// Touch counts a request made under session id as a keep-alive.
func (t *Tracker) Touch(id uint64) {
	ttl, own, open := t.cfg.FSM.SessionOpen(id)
	if !open {
		return
	}
	now := t.cfg.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	_, _ = t.alive(id, ttl, own, now)
}

// alive restarts the TTL of open session id and queues it for a
// checkpoint unless it is confirmed; t.mu is held.
func (t *Tracker) alive(id uint64, ttl time.Duration, owner [16]byte, now int64) (*entry, error) {
	if t.stopped {
		return nil, ErrStopped
	}
	e := t.entry(id, ttl, owner, now)
	if e.expiring {
		return nil, fmt.Errorf("session %d: %w", id, fsm.ErrSessionExpired)
	}
	e.deadline = max(e.deadline, now+int64(ttl))
	if !e.confirmed {
		t.queued[id] = struct{}{}
	}
	return e, nil
}

// entry returns session id's entry, adding it for a session opened since
// the last sync: one opened in this term, so confirmed, due a TTL from
// now. t.mu is held.
func (t *Tracker) entry(id uint64, ttl time.Duration, owner [16]byte, now int64) *entry {
	e := t.entries[id]
	if e == nil {
		e = t.newEntry(ttl, owner, now)
		e.confirmed = true
		t.entries[id] = e
		t.minTTL = min(t.minTTL, ttl)
	}
	return e
}

// untracked reports whether progress names a task that session id's entry
// does not track.
func (t *Tracker) untracked(id uint64, progress []rpc.SessionProgress) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entries[id]
	if e == nil {
		return true
	}
	for _, p := range progress {
		job := p.Job
		if job == "" {
			job = fsm.DefaultJob
		}
		if e.tasks[taskKey{job, p.Task, p.Epoch}] == nil {
			return true
		}
	}
	return false
}

// Remaining is how long session id lives without a keep-alive, by the
// leader's clock; false when it is not open (or the tracker stopped).
func (t *Tracker) Remaining(id uint64) (time.Duration, bool) {
	ttl, own, open := t.cfg.FSM.SessionOpen(id)
	if !open {
		return 0, false
	}
	now := t.cfg.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return 0, false
	}
	e := t.entry(id, ttl, own, now)
	return time.Duration(max(0, e.deadline-now)), true
}

// step is one iteration of the loop: it catches up with a stall, syncs
// with the state, writes the checkpoint due, then, once this node has
// confirmed that it leads, ends the sessions and revokes the tasks that
// are due.
func (t *Tracker) step(ctx context.Context) {
	now := t.cfg.Now()
	t.catchUp(now)
	if now-t.lastSync >= int64(max(t.syncEvery, SyncInterval)) {
		start := t.cfg.Now()
		if t.sync(now) {
			took := time.Duration(t.cfg.Now() - start)
			t.syncEvery = min(max(SyncInterval, syncShare*took), MaxSyncInterval)
		}
	}
	t.checkpoint(ctx, now)
	sessions, tasks := t.due(now)
	sessions = t.unseen(sessions)
	if len(sessions) > 0 || len(tasks) > 0 {
		if err := t.cfg.VerifyLeader(ctx); err != nil {
			if now-t.lastUnconfirmed >= int64(unconfirmedLogEvery) {
				t.lastUnconfirmed = now
				t.log.Warn("not ending sessions or revoking tasks: leadership not confirmed",
					"sessions", len(sessions), "tasks", len(tasks), "error", err)
			}
		} else if t.expire(ctx, sessions) {
			t.revoke(ctx, tasks)
		}
	}
	t.lastStep = t.cfg.Now()
}

// catchUp moves every deadline and progress timer later by the time the
// loop was stalled, when it started later than the stall threshold.
func (t *Tracker) catchUp(now int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	late := time.Duration(now - t.lastStep - int64(TickInterval))
	threshold := max(MinStall, t.minTTL/2)
	if late <= threshold || t.stopped {
		return
	}
	for _, e := range t.entries {
		e.deadline += int64(late)
		for _, r := range e.tasks {
			r.since += int64(late)
		}
	}
	t.log.Warn("the session tracker was stalled: every session's deadline and every held task's progress timer moved later by the stall",
		"stall", late, "threshold", threshold, "sessions", len(t.entries))
}

// sync reads the sessions from the state, unless nothing was applied since
// the last sync: it adds those opened since, drops those that ended, takes
// a sign of life applied in this term as a keep-alive, and updates the
// tasks each holds. It reports whether it listed the state.
func (t *Tracker) sync(now int64) bool {
	t.lastSync = now
	applied := t.cfg.FSM.AppliedIndex()
	if applied == t.syncedIndex {
		return false
	}
	t.mu.Lock()
	t.gen++
	gen := t.gen
	t.mu.Unlock()
	infos := t.cfg.FSM.Sessions()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return true
	}
	t.syncedIndex = applied
	open := make(map[uint64]struct{}, len(infos))
	for _, info := range infos {
		open[info.ID] = struct{}{}
		e := t.entries[info.ID]
		if e == nil {
			e = t.newEntry(info.TTL, info.Owner, now)
			t.entries[info.ID] = e
		}
		if info.Seen >= t.grace {
			e.confirmed = true
			e.deadline = max(e.deadline, info.Seen+int64(info.TTL))
			delete(t.queued, info.ID)
		}
		e.syncTasks(info.Tasks, now, gen)
	}
	for id, e := range t.entries {
		if _, ok := open[id]; !ok && e.gen < gen {
			delete(t.entries, id)
			delete(t.queued, id)
		}
	}
	t.minTTL = t.shortestTTL()
	return true
}

// shortestTTL is the shortest TTL of the entries; t.mu is held.
func (t *Tracker) shortestTTL() time.Duration {
	m := fsm.MaxSessionTTL
	for _, e := range t.entries {
		m = min(m, e.ttl)
	}
	return m
}

// syncTasks makes e track exactly the tasks held, keeping those added
// since the sync of generation gen began.
func (e *entry) syncTasks(held []fsm.HeldTask, now int64, gen uint64) {
	e.addTasks(held, now, gen)
	for k, r := range e.tasks {
		if r.gen < gen {
			delete(e.tasks, k)
		}
	}
}

// addTasks starts tracking the tasks held that e does not track yet, their
// progress timer from now, and marks each as seen in generation gen.
func (e *entry) addTasks(held []fsm.HeldTask, now int64, gen uint64) {
	for _, h := range held {
		k := taskKey{h.Job, h.Meta.ID, h.Meta.Epoch}
		r := e.tasks[k]
		if r == nil {
			r = &progress{since: now}
			e.tasks[k] = r
		}
		r.timeout, r.gen = max(h.Timeout, e.ttl), max(r.gen, gen)
		e.nextDue = min(e.nextDue, r.since+int64(r.timeout))
	}
}

// checkpoint writes one CheckpointSessions entry naming the queued
// sessions, at most fsm.MaxSessionBatch of them, at most once per
// SyncInterval.
func (t *Tracker) checkpoint(ctx context.Context, now int64) {
	if now-t.lastFlush < int64(SyncInterval) {
		return
	}
	t.mu.Lock()
	var ids []uint64
	for id := range t.queued {
		if e := t.entries[id]; e == nil || e.confirmed || e.expiring {
			delete(t.queued, id)
			continue
		}
		ids = append(ids, id)
	}
	t.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	t.lastFlush = now
	slices.Sort(ids)
	ids = ids[:min(len(ids), fsm.MaxSessionBatch)]
	if _, err := t.propose(ctx, &fsm.CheckpointSessions{IDs: ids}); err != nil {
		t.log.Warn("checkpointing sessions failed; retrying", "sessions", len(ids), "error", err)
		return
	}
	t.mu.Lock()
	for _, id := range ids {
		delete(t.queued, id)
		if e := t.entries[id]; e != nil {
			e.confirmed = true
		}
	}
	t.mu.Unlock()
	if t.cfg.Observer != nil {
		t.cfg.Observer.SessionsCheckpointed(len(ids))
	}
	t.log.Debug("checkpointed sessions kept alive in this term", "sessions", len(ids))
}

// propose proposes c; a result the state machine refused is an error.
func (t *Tracker) propose(ctx context.Context, c fsm.Command) (*fsm.Result, error) {
	r, err := t.cfg.Propose(ctx, c)
	if err == nil {
		err = r.Err()
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

// heldRef names a held task of a session.
type heldRef struct {
	session uint64
	task    taskKey
}

// due returns the sessions past their deadline and the held tasks past
// their progress timeout.
func (t *Tracker) due(now int64) (sessions []uint64, tasks []heldRef) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, e := range t.entries {
		if e.expiring {
			continue
		}
		if e.deadline <= now {
			sessions = append(sessions, id)
			continue
		}
		if e.nextDue > now {
			continue
		}
		e.nextDue = math.MaxInt64
		for k, r := range e.tasks {
			if r.timeout <= 0 || r.revoking {
				continue
			}
			if now-r.since >= int64(r.timeout) {
				tasks = append(tasks, heldRef{id, k})
			}
			e.nextDue = min(e.nextDue, r.since+int64(r.timeout))
		}
	}
	slices.Sort(sessions)
	slices.SortFunc(tasks, func(a, b heldRef) int {
		return cmp.Or(cmp.Compare(a.session, b.session), strings.Compare(a.task.job, b.task.job),
			cmp.Compare(a.task.id, b.task.id), cmp.Compare(a.task.epoch, b.task.epoch))
	})
	return sessions, tasks
}

// unseen returns the sessions of due that the state shows no sign of
// life of that the last sync has not read (a request applied under the
// session since); those it saves.
func (t *Tracker) unseen(due []uint64) []uint64 {
	out := due[:0]
	for _, id := range due {
		info, ok := t.cfg.FSM.Session(id)
		if ok && info.Seen >= t.grace && info.Seen+int64(info.TTL) > t.cfg.Now() {
			t.mu.Lock()
			if e := t.entries[id]; e != nil {
				e.confirmed = true
				e.deadline = max(e.deadline, info.Seen+int64(info.TTL))
			}
			t.mu.Unlock()
			continue
		}
		out = append(out, id)
	}
	return out
}

// expire ends the sessions of due still due (not kept alive while
// leadership was confirmed), in ExpireSessions entries of at most
// fsm.MaxSessionBatch. It reports false when a proposal failed.
func (t *Tracker) expire(ctx context.Context, due []uint64) bool {
	now := t.cfg.Now()
	t.mu.Lock()
	ids := due[:0]
	for _, id := range due {
		if e := t.entries[id]; e != nil && !e.expiring && e.deadline <= now {
			e.expiring = true
			ids = append(ids, id)
		}
	}
	t.mu.Unlock()
	for len(ids) > 0 {
		batch := ids[:min(len(ids), fsm.MaxSessionBatch)]
		r, err := t.propose(ctx, &fsm.ExpireSessions{IDs: batch})
		if err != nil {
			t.mu.Lock()
			for _, id := range ids {
				if e := t.entries[id]; e != nil {
					e.expiring = false
				}
			}
			t.mu.Unlock()
			t.log.Warn("ending sessions that missed their keep-alives failed; retrying", "sessions", len(ids), "error", err)
			return false
		}
		t.mu.Lock()
		for _, id := range batch {
			delete(t.entries, id)
			delete(t.queued, id)
		}
		t.mu.Unlock()
		ids = ids[len(batch):]
		if t.cfg.Observer != nil {
			t.cfg.Observer.SessionsExpired(r.Ended)
		}
		t.log.Info("ended sessions that missed their keep-alives for their TTL", "sessions", batch, "ended", r.Ended)
	}
	return true
}

// revoke fails the held tasks of due whose progress is still timed out:
// one TaskFailed entry each.
func (t *Tracker) revoke(ctx context.Context, due []heldRef) {
	for _, ref := range due {
		now := t.cfg.Now()
		t.mu.Lock()
		var r *progress
		if e := t.entries[ref.session]; e != nil && !e.expiring {
			r = e.tasks[ref.task]
		}
		if r == nil || r.revoking || now-r.since < int64(r.timeout) {
			t.mu.Unlock()
			continue // progress reported meanwhile, or no longer held
		}
		r.revoking = true
		records, timeout := r.records, r.timeout
		t.mu.Unlock()
		k := ref.task
		res, err := t.propose(ctx, &fsm.TaskFailed{Header: fsm.Header{Job: k.job}, Meta: fsm.TaskMeta{ID: k.id, Epoch: k.epoch}})
		t.mu.Lock()
		if e := t.entries[ref.session]; e != nil {
			if err == nil {
				delete(e.tasks, k)
			} else if r := e.tasks[k]; r != nil {
				r.revoking = false
				e.nextDue = min(e.nextDue, r.since+int64(r.timeout))
			}
		}
		t.mu.Unlock()
		if err != nil {
			t.log.Warn("revoking a held task without progress failed; retrying", "session", ref.session, "job", k.job, "task", k.id, "error", err)
			return
		}
		if res.Ignored {
			continue // finished or failed meanwhile
		}
		if t.cfg.Observer != nil {
			t.cfg.Observer.SessionTasksRevoked(1)
		}
		t.log.Info("revoked a held task: its reader reported no progress for the job's task timeout",
			"session", ref.session, "job", k.job, "task", k.id, "epoch", k.epoch, "records", records, "task_timeout", timeout)
	}
}
