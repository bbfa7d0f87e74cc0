package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/raftmaster/raftmaster/recordio"
	"github.com/raftmaster/raftmaster/rpc"
)

const (
	// abandonTimeout bounds the TaskFailed report of a task whose pass was
	// replaced by a new StartGetRecords.
	abandonTimeout = 5 * time.Second
	// renewFloor bounds how often a lease is renewed, however short it is.
	renewFloor = 100 * time.Millisecond
	// renewFallback is the renewal period when the server did not say how
	// long the lease lasts: a third of the default task timeout.
	renewFallback = 20 * time.Second
	// rideWaitMax bounds how long the finish of a task whose records are
	// all consumed waits for the reader's next GetTask to carry it
	// (GetTaskAfter) before it is reported on its own (rideWait).
	rideWaitMax = 5 * time.Second
	// rideImminent bounds the reader's wait, before it asks for a task,
	// for the finish of the task whose last record NextRecord has just
	// taken, which comes at once.
	rideImminent = 250 * time.Millisecond
	// rideRetry is how long the reader reports its tasks finished on
	// their own after a cluster below protocol level 9 refused a GetTask
	// that carried a finish, before it tries again.
	rideRetry = time.Minute
)

// record is one item of a record channel: a record, or an error for
// NextRecord.
type record struct {
	data []byte
	err  error
	task *taskRun // the task of a record; nil for an error
	off  int64    // the record's offset in its task, from the task's first
}

// passRun is one StartGetRecords: the reader goroutine and the channel it
// fills.
type passRun struct {
	pass     int
	caller   context.Context // StartGetRecordsContext's
	ch       chan record
	cancel   func()
	replaced chan struct{} // closed when a later StartGetRecords takes over
	done     chan struct{} // closed when the reader, reports included, is over
	shown    *shownErrors  // shared by every pass of the client

	// tasks counts the tasks of the pass that wait for the training loop
	// to consume their records, or are being reported.
	tasks sync.WaitGroup
	// mu guards inflight and reported.
	mu       sync.Mutex
	inflight int // tasks delivered or being reported
	reported int // tasks reported
	// settled receives a token when a task of the pass is settled, for a
	// reader waiting for its own tasks before it asks again.
	settled chan struct{}

	// rides are the finishes of tasks all consumed that wait for the
	// reader's next GetTask to carry them (guarded by mu); rideReady
	// receives a token when one is queued. over is closed, and readerOver
	// set, once the reader asks for no more tasks: a finish then goes on
	// its own.
	rides      []*finishRide
	rideReady  chan struct{}
	over       chan struct{}
	readerOver bool
}

// finishRide is the finish of a task whose records are all consumed,
// offered to the reader's next GetTask (GetTaskAfter), so that one write
// finishes it and leases the next task.
type finishRide struct {
	meta TaskMeta
	// endLease ends the task's renewals; the reader calls it before it
	// sends the finish.
	endLease func()
	claimed  bool // taken by the reader (guarded by the pass's mu)
	// decided is closed once the reader has sent the finish; outcome is
	// then how it went, nil when the answer did not say (the call failed,
	// or the cluster is below protocol level 9), and the task is reported
	// on its own.
	decided chan struct{}
	outcome *rpc.FinishOutcome
	// released is closed once the task is released (awaitTask), for the
	// reader to count it among the pass's reports.
	released chan struct{}
}

// shownErrors remembers the corrupt tasks whose error NextRecord has
// returned, so that the same task dispatched again to this client in the
// same pass is failed without a second error.
type shownErrors struct {
	mu sync.Mutex
	m  map[[2]int]bool // {task id, pass}
}

// first records task id of pass and reports whether it is new. Entries of
// earlier passes are dropped: a task of pass p means those passes are over.
func (s *shownErrors) first(id, pass int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[[2]int]bool)
	}
	for k := range s.m {
		if k[1] < pass {
			delete(s.m, k)
		}
	}
	k := [2]int{id, pass}
	if s.m[k] {
		return false
	}
	s.m[k] = true
	return true
}

// current returns the pass NextRecord reads from. Before the first
// StartGetRecords it is a placeholder whose channel nothing is sent on.
// c.passMu must be held.
func (c *Client) current() *passRun {
	if c.pass == nil {
		done := make(chan struct{})
		close(done)
		c.pass = &passRun{caller: context.Background(), ch: c.ch, cancel: func() {}, replaced: make(chan struct{}), done: done, shown: &shownErrors{}}
	}
	return c.pass
}

// StartGetRecords starts reading the records of pass passID in the
// background; NextRecord returns them. It stops the reader of an earlier
// call and discards the records that reader had buffered; a task of that
// reader whose records NextRecord had not all returned is reported failed,
// so that it is dispatched again, and one whose records it had is
// reported finished. It does not wait for the earlier reader, which may be reporting to
// a cluster that does not answer: the new reader starts asking for tasks
// once the earlier one's reports are over, and Close waits for both.
//
// The reader leases one task at a time and renews its lease in the
// background until it reports the task. It reads and verifies all of a
// task's chunks before it delivers any record, and goes on with the next
// task once the last record is in the channel; it reports the task
// finished once NextRecord has returned all its records (they are
// consumed: see Progress), with the GetTask that leases its next task
// when it asks within a few seconds (GetTaskAfter), else on its own, and
// hands back the tasks whose records were not all consumed when the pass
// is replaced or stopped. A task
// dispatched with Skip (after RestoreCursor) delivers only its records
// from Skip on. A chunk that cannot be read
// fails the task: none of its records are delivered, and NextRecord returns
// a *ChunkError instead (see the package documentation). The reader waits
// while the pass has not started, there is no dataset yet, or the cluster
// cannot be reached, and it ends the pass with ErrPassBefore,
// ErrNoMoreAvailable, ErrAllTaskFailed, ErrUnknownJob once the job it read
// was deleted (see GetTask), or an error the cluster would answer again,
// such as ErrInvalid, which NextRecord returns.
func (c *Client) StartGetRecords(passID int) {
	c.StartGetRecordsContext(context.Background(), passID)
}

// StartGetRecordsContext is StartGetRecords whose reader runs as long as
// ctx lasts. Once ctx is done the reader stops and hands back the tasks
// not all consumed, as when a new StartGetRecords replaces it, and
// NextRecord returns ctx's error (errors.Is matches context.Canceled or
// context.DeadlineExceeded), instead of the pass's records still
// buffered, until the next StartGetRecords.
func (c *Client) StartGetRecordsContext(ctx context.Context, passID int) {
	c.passMu.Lock()
	defer c.passMu.Unlock()
	prev := c.current()
	prev.cancel()
	rctx, cancel := c.callContext(ctx)
	p := &passRun{
		pass:      passID,
		caller:    ctx,
		ch:        make(chan record, c.bufSize),
		cancel:    cancel,
		replaced:  make(chan struct{}),
		done:      make(chan struct{}),
		shown:     prev.shown,
		settled:   make(chan struct{}, 1),
		rideReady: make(chan struct{}, 1),
		over:      make(chan struct{}),
	}
	if !c.spawn(func() {
		defer close(p.done)
		defer cancel()
		// Let the earlier reader hand its task back first, so that this
		// pass can have it.
		select {
		case <-prev.done:
		case <-rctx.Done():
			p.endReader()
			return
		}
		c.getRecords(rctx, p, passID)
		p.endReader()
		// The tasks delivered are reported once the training loop has
		// consumed them, or when the pass is over for this reader.
		p.tasks.Wait()
	}) {
		cancel()
		close(p.done) // closed client: NextRecord returns ErrClientClosed
	}
	c.pass = p
	close(prev.replaced)
}

// NextRecord returns the next record of the pass started by
// StartGetRecords. It returns a *ChunkError for a task whose data could not
// be read, and then goes on with the next records. At the end of the pass
// it returns ErrPassBefore, ErrNoMoreAvailable or ErrAllTaskFailed (match
// them with errors.Is), ErrUnknownJob when the job it read was deleted,
// ErrNoContact when the client never reached any of its addresses, or
// an error the cluster answered that asking again would not change, such
// as ErrInvalid; after that it blocks until the next
// StartGetRecords, whose records a NextRecord already waiting returns. It
// returns ErrClientClosed once the client is closed, and the error of
// StartGetRecordsContext's context once that is done. The record is the
// caller's, and counts as consumed once returned: a task is reported
// finished once all its records are, and Progress and CommitCursor count
// them. When the session that held a task ends before all its records
// were returned (its keep-alives did not reach the cluster for its TTL),
// the rest of them are not returned, since the task went back to the
// queue, and NextRecord returns ErrSessionExpired once for it: the records
// of it already returned may be trained again by another trainer, so a
// program that trains each record once restarts from its last checkpoint
// (see CommitCursor).
func (c *Client) NextRecord() ([]byte, error) {
	return c.NextRecordContext(context.Background())
}

// NextRecordContext is NextRecord that waits no longer than ctx lasts:
// once ctx is done it returns ctx's error (errors.Is matches
// context.Canceled or context.DeadlineExceeded), and the pass goes on for
// the next call. A record it has taken from the reader when ctx ends is
// returned all the same.
func (c *Client) NextRecordContext(ctx context.Context) ([]byte, error) {
	for {
		c.passMu.Lock()
		p := c.current()
		c.passMu.Unlock()
		if err := c.passOver(ctx, p); err != nil {
			return nil, err
		}
		if err := c.lost.get(true); err != nil {
			return nil, err
		}
		select {
		case r := <-p.ch:
			select {
			case <-p.replaced:
				continue // buffered by a pass that was replaced meanwhile
			default:
			}
			if err := c.passOver(context.Background(), p); err != nil {
				return nil, err
			}
			if r.task != nil && !r.task.consume(c) {
				continue // its task was reported meanwhile, or lost with its session
			}
			return r.data, r.err
		case <-p.replaced:
		case <-p.caller.Done():
		case <-ctx.Done():
		case <-c.ctx.Done():
		}
	}
}

// passOver returns the error of NextRecordContext when its wait is over
// before a record: the client is closed, the pass's context is done, or
// the call's; nil otherwise.
func (c *Client) passOver(ctx context.Context, p *passRun) error {
	switch {
	case c.ctx.Err() != nil:
		return ErrClientClosed
	case p.caller.Err() != nil:
		return fmt.Errorf("raftmaster client: the reader of pass %d stopped: %w", p.pass, ctxCause(p.caller))
	case ctx.Err() != nil:
		return fmt.Errorf("raftmaster client: waiting for a record: %w", ctxCause(ctx))
	}
	return nil
}

// getRecords is the reader of one pass.
func (c *Client) getRecords(ctx context.Context, p *passRun, passID int) {
	log := c.logger.With("pass", passID)
	wait := c.passWaitMin
	var last *taskRun // the task whose records the reader delivered last
	for {
		ride := c.nextRide(ctx, p, last)
		seen := p.reports()
		var (
			t   Task
			err error
		)
		if ride != nil {
			// The finish of a task all consumed rides this GetTask.
			ride.endLease()
			var finish *rpc.FinishOutcome
			t, finish, err = c.getTask(ctx, passID, &ride.meta)
			switch {
			case errors.Is(err, ErrUpgradePending):
				c.ridesOffUntil.Store(time.Now().Add(c.rideRetry).UnixNano())
				log.Info("the cluster is below protocol level 9: tasks are reported finished on their own for a while",
					"retry_in", c.rideRetry, "error", err)
				ride.decide(nil)
				continue
			case errors.Is(err, ErrSessionExpired) && ctx.Err() == nil:
				// The session ended before the finish could count (or
				// as it did): the task went back to the queue with it,
				// and its finish is not sent under the next session, as
				// TaskFinished's is not. Ask again, under a new one.
				ride.decide(&rpc.FinishOutcome{Code: rpc.CodeSessionExpired})
				continue
			}
			ride.decide(finish)
			if finish != nil {
				// The answer reflects the finish: the task counts among
				// the reports it saw.
				<-ride.released
				select {
				case <-p.settled:
				default:
				}
				seen++
			}
		} else {
			t, _, err = c.getTask(ctx, passID, nil)
		}
		switch {
		case err == nil:
			wait = c.passWaitMin
		case ctx.Err() != nil:
			return
		case errors.Is(err, ErrNoMoreAvailable) && p.holding(seen):
			// What is left of the pass may be this reader's own tasks,
			// whose records the training loop has yet to consume: ask
			// again once one of them is reported, or its finish waits
			// for this reader to carry it.
			log.Debug("waiting for the tasks held to be consumed", "reason", err)
			if p.reports() == seen && !p.rideQueued() {
				select {
				case <-p.settled:
				case <-p.rideReady:
				case <-ctx.Done():
					return
				}
			}
			continue
		case errors.Is(err, ErrPassBefore), errors.Is(err, ErrNoMoreAvailable), errors.Is(err, ErrAllTaskFailed):
			log.Debug("pass ends", "reason", err)
			c.push(ctx, p, record{err: err})
			return
		case errors.Is(err, ErrStaleEpoch):
			// A retried GetTask whose lease ended meanwhile: the task is
			// back in the queue, and a new request may lease it.
			log.Debug("lease of a retried GetTask ended; asking again", "error", err)
			continue
		case errors.Is(err, ErrUnknownJob):
			// The job this client read was deleted: no dataset will
			// come, however long it waits.
			log.Warn("the job was deleted; the pass ends", "error", err)
			c.push(ctx, p, record{err: err})
			return
		case errors.Is(err, ErrNoContact):
			// No address was ever reached: wrong addresses, or a cluster
			// that is not running. Waiting would not tell the trainer.
			log.Error("cannot reach the cluster", "error", err)
			c.push(ctx, p, record{err: err})
			return
		case errors.Is(err, ErrPassAfter), errors.Is(err, ErrNoDataset), transient(err):
			// ErrPassAfter: others are finishing the previous pass, and a
			// task of it that comes back is handed to us. ErrNoDataset:
			// nobody has set it yet. Otherwise the cluster was unreachable
			// or leaderless for the whole retry budget. Like the original,
			// wait and ask again.
			if errors.Is(err, ErrPassAfter) || errors.Is(err, ErrNoDataset) {
				log.Debug("waiting for the pass", "reason", err)
			} else {
				log.Warn("cannot get a task", "error", err)
			}
			// The finish of a task of this reader's may be what the
			// pass waits for: it is carried at once.
			if !p.pause(ctx, wait/2+rand.N(wait/2+1), errors.Is(err, ErrPassAfter)) {
				return
			}
			wait = min(2*wait, c.passWaitMax)
			continue
		default:
			// The cluster would answer the same again: tell the trainer.
			log.Error("cannot get a task", "error", err)
			c.push(ctx, p, record{err: err})
			return
		}
		last = c.runTask(ctx, p, t, log.With("task", t.Meta.ID, "epoch", t.Meta.Epoch, "task_pass", t.Pass))
	}
}

// nextRide returns the finish the reader's next GetTask carries: the first
// one queued, or, when the training loop has just taken the last record of
// last (the task the reader delivered last; nothing is left in the
// channel), last's, which comes at once; nil for none, or while the
// cluster refuses them (ridesOffUntil).
func (c *Client) nextRide(ctx context.Context, p *passRun, last *taskRun) *finishRide {
	if time.Now().UnixNano() < c.ridesOffUntil.Load() {
		return nil
	}
	imminent := last != nil && len(p.ch) == 0 && !last.isHanded()
	if r := p.claimRide(); r != nil || !imminent {
		return r
	}
	t := time.NewTimer(rideImminent)
	defer t.Stop()
	for {
		select {
		case <-p.rideReady:
			if r := p.claimRide(); r != nil {
				return r
			}
		case <-t.C:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

// pause waits d, or until ctx is done (then it reports false), or, when
// wake is set, until a finish is queued for the reader to carry.
func (p *passRun) pause(ctx context.Context, d time.Duration, wake bool) bool {
	var ready chan struct{}
	if wake {
		ready = p.rideReady
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ready:
	case <-ctx.Done():
		return false
	}
	return true
}

// offerRide queues the finish of meta for the reader's next GetTask, and
// returns it; nil once the reader asks for no more tasks.
func (p *passRun) offerRide(meta TaskMeta, endLease func()) *finishRide {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.over == nil || p.readerOver {
		return nil
	}
	r := &finishRide{meta: meta, endLease: endLease, decided: make(chan struct{}), released: make(chan struct{})}
	p.rides = append(p.rides, r)
	select {
	case p.rideReady <- struct{}{}:
	default:
	}
	return r
}

// claimRide takes the first finish queued, for the reader to send; nil
// for none.
func (p *passRun) claimRide() *finishRide {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.rides) == 0 {
		return nil
	}
	r := p.rides[0]
	p.rides = p.rides[1:]
	r.claimed = true
	return r
}

// rideQueued reports whether a finish waits for the reader.
func (p *passRun) rideQueued() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.rides) > 0
}

// withdraw takes r back from the queue, unless the reader claimed it
// first, and reports whether it did.
func (p *passRun) withdraw(r *finishRide) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r.claimed {
		return false
	}
	for i, q := range p.rides {
		if q == r {
			p.rides = append(p.rides[:i], p.rides[i+1:]...)
			break
		}
	}
	return true
}

// endReader records that the reader asks for no more tasks: the finishes
// queued go on their own.
func (p *passRun) endReader() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.readerOver {
		p.readerOver = true
		close(p.over)
	}
}

// decide records how the finish r carried went (nil: the answer did not
// say), for awaitTask.
func (r *finishRide) decide(outcome *rpc.FinishOutcome) {
	r.outcome = outcome
	close(r.decided)
}

// awaitRide waits for the reader to carry r, for wait at most, and
// returns how the finish went; nil when the reader did not carry it, or
// the answer did not say: the task is then reported on its own.
func (p *passRun) awaitRide(r *finishRide, wait time.Duration) *rpc.FinishOutcome {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-r.decided:
		return r.outcome
	case <-t.C:
	case <-p.over:
	}
	if p.withdraw(r) {
		return nil
	}
	<-r.decided // claimed meanwhile: the reader is sending it
	return r.outcome
}

// rideWait is how long the finish of t waits for the reader's next
// GetTask: rideWaitMax, and well within its lease, or the TTL of the
// session that holds it (a held task whose progress stalls for the job's
// task timeout, at least the TTL, is revoked).
func (c *Client) rideWait(t Task) time.Duration {
	d := rideWaitMax
	if t.Lease > 0 {
		d = min(d, t.Lease/3)
	}
	if t.Session != 0 {
		d = min(d, c.sessionTTL()/3)
	}
	return d
}

// finishCarried handles how the finish of meta that a GetTask carried
// went, as taskReport and awaitTask handle the answer to TaskFinished.
func (c *Client) finishCarried(o *rpc.FinishOutcome, meta TaskMeta, log hclog.Logger) {
	out := finishOutcome(o)
	switch {
	case out.Err != nil:
		err := out.Err
		if c.read.reported(err) {
			err = c.jobGone()
		}
		log.Warn("cannot report a finished task", "error", err)
	case out.Ignored:
		c.logger.Debug("task report ignored", "path", rpc.PathTaskGet, "task", meta.ID, "epoch", meta.Epoch)
	}
}

// transient reports whether err is a failure to reach the cluster or to
// find its leader, which may heal, rather than an answer.
func transient(err error) bool {
	var e *rpc.Error
	if errors.As(err, &e) {
		return rpc.Retryable(e)
	}
	return true // connection errors and cut or garbled answers
}

// runTask delivers the records of t, renewing its lease meanwhile, and
// leaves it to awaitTask, which reports it once they are consumed, and
// returns it. A task that cannot be read is reported failed at once, and
// runTask returns nil.
func (c *Client) runTask(ctx context.Context, p *passRun, t Task, log hclog.Logger) *taskRun {
	tr := c.holdTask(t)
	p.hold()
	lctx, cancel := context.WithCancel(ctx)
	renewing := make(chan struct{})
	if t.Session != 0 {
		// Its session holds it: the keep-alives report how far it is
		// consumed, and no renewal is needed.
		close(renewing)
		c.trackTask(c.job, t.Meta, tr.consumed)
	} else {
		go func() {
			defer close(renewing)
			c.keepLease(lctx, t, log)
		}()
	}
	endLease := sync.OnceFunc(func() {
		// Renewals end before the report, which they would race with.
		cancel()
		<-renewing
		if t.Session != 0 {
			c.untrackTask(c.job, t.Meta)
		}
	})
	recs, first, err := c.readTask(ctx, t)
	if err != nil && ctx.Err() == nil {
		tr.settle()
		endLease()
		log.Error("cannot read the task", "error", err)
		if err := c.taskReport(c.ctx, rpc.PathTaskFailed, t.Meta); err != nil {
			log.Warn("cannot report a failed task", "error", err)
		}
		c.releaseTask(tr)
		p.release()
		// Corrupt data stays corrupt: say it once per task and pass. An
		// I/O error may be new each time.
		if !errors.Is(err, recordio.ErrCorrupt) || p.shown.first(t.Meta.ID, t.Pass) {
			c.push(ctx, p, record{err: err})
		}
		return nil
	}
	for i, r := range recs {
		if !c.push(ctx, p, record{data: r, task: tr, off: first + int64(i)}) {
			break
		}
	}
	// The reader goes on with the next task while the training loop
	// consumes the records of this one.
	go c.awaitTask(ctx, p, t, tr, endLease, log)
	return tr
}

// awaitTask reports t once the training loop has consumed all its records
// (NextRecord returned them): finished, by the reader's next GetTask when
// it asks within rideWait (GetTaskAfter: one write finishes t and leases
// the next task), else on its own. When the pass is over for the
// reader first (replaced, its context done, the client closed), t is
// finished if it was consumed all the same, and otherwise handed back
// (failed) so that it is dispatched again, or, when the client is closing
// and its session holds t, left to the session's close, which releases
// it without counting a failure. endLease ends t's renewals, which go on
// while the finish waits for the reader.
func (c *Client) awaitTask(ctx context.Context, p *passRun, t Task, tr *taskRun, endLease func(), log hclog.Logger) {
	var ride *finishRide
	defer func() {
		if ride != nil {
			close(ride.released) // after the release below
		}
	}()
	defer p.release()
	defer c.releaseTask(tr)
	select {
	case <-tr.all:
	case <-tr.gone:
	case <-ctx.Done():
	}
	full := tr.settle()
	var carried *rpc.FinishOutcome
	if full && ctx.Err() == nil && time.Now().UnixNano() >= c.ridesOffUntil.Load() {
		ride = p.offerRide(t.Meta, endLease)
	}
	tr.hand()
	if ride != nil {
		carried = p.awaitRide(ride, c.rideWait(t))
	}
	endLease()
	switch {
	case carried != nil:
		c.finishCarried(carried, t.Meta, log)
	case full:
		// The report must not be cut short by a new pass, or the task
		// would be dispatched again.
		if err := c.taskReport(c.ctx, rpc.PathTaskFinished, t.Meta); err != nil {
			log.Warn("cannot report a finished task", "error", err)
		}
	case c.ctx.Err() != nil:
		// Closed: the session's close released the task, or its lease
		// runs out.
	case c.closing.Load() && t.Session != 0:
		// Close closes the session next, which releases the task.
	default:
		// Hand the task back now rather than at the end of its lease.
		actx, cancel := context.WithTimeout(c.ctx, abandonTimeout)
		if err := c.taskReport(actx, rpc.PathTaskFailed, t.Meta); err != nil {
			log.Debug("cannot hand back a task not consumed", "error", err)
		}
		cancel()
	}
}

// keepLease renews t's lease every third of its length until ctx is done
// or the lease is lost. A renewal's answer gives how long the renewed
// lease lasts from the answer, which may be shorter than the first (a new
// leader's grace makes the first one longer, and a renewal retried after
// the cluster applied it gets what remains of its lease at the retry).
func (c *Client) keepLease(ctx context.Context, t Task, log hclog.Logger) {
	every := renewFallback
	if t.Lease > 0 {
		every = max(t.Lease/3, renewFloor)
	}
	for sleep(ctx, every) {
		lease, err := c.taskReportLease(ctx, rpc.PathTaskRenew, t.Meta)
		switch {
		case err == nil:
			if lease > 0 {
				every = max(lease/3, renewFloor)
			}
		case ctx.Err() != nil:
			return
		case errors.Is(err, ErrStaleEpoch):
			// The task may go to another trainer; its records are still
			// delivered here, and a late finish is accepted.
			log.Warn("lease lost", "error", err)
			return
		case errors.Is(err, ErrUnknownJob):
			log.Warn("lease lost with its job", "error", err)
			return
		case transient(err):
			log.Warn("cannot renew the lease", "error", err)
		default:
			log.Warn("cannot renew the lease; giving up", "error", err)
			return
		}
	}
}

// readTask reads and verifies the chunks of t that hold records from
// t.Skip on and returns those records, with the offset in t of the first.
// Chunks wholly before t.Skip are not read. It returns a *ChunkError for
// the first chunk that cannot be read, or ctx's error when the pass was
// stopped.
func (c *Client) readTask(ctx context.Context, t Task) ([][]byte, int64, error) {
	var (
		f     io.ReadSeekCloser
		path  string
		recs  [][]byte
		first int64 // offset in t of recs[0]
	)
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	for i, ch := range t.Chunks {
		if first+int64(ch.Records) <= t.Skip && len(recs) == 0 {
			first += int64(ch.Records) // trained already
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		chunkErr := func(err error) error {
			ce := &ChunkError{Path: ch.Path, Chunk: i, Offset: ch.Offset, Task: t.Meta, Err: err}
			var re *recordio.ChunkError
			if errors.As(err, &re) {
				// Its message would repeat the file and offset.
				ce.Offset, ce.Err = re.Offset, re.Err
			}
			return ce
		}
		if f == nil || ch.Path != path {
			if f != nil {
				f.Close()
				f = nil
			}
			var err error
			if f, err = c.openChunkFile(ctx, ch.Path); err != nil {
				return nil, 0, chunkErr(err)
			}
			path = ch.Path
		}
		s := recordio.NewRangeScanner(f, recordio.NewChunkIndex(ch.Offset, int(ch.Records)), 0, -1)
		for s.Scan() {
			// Each chunk has a buffer of its own: cap the record so that
			// an append cannot reach the next one.
			r := s.Record()
			recs = append(recs, r[:len(r):len(r)])
		}
		if err := s.Err(); err != nil {
			return nil, 0, chunkErr(err)
		}
	}
	if drop := t.Skip - first; drop > 0 {
		drop = min(drop, int64(len(recs)))
		recs, first = recs[drop:], first+drop
	}
	return recs, first, nil
}

// push puts r into p's channel, unless ctx is done first.
func (c *Client) push(ctx context.Context, p *passRun, r record) bool {
	select {
	case p.ch <- r:
		return true
	case <-ctx.Done():
		return false
	}
}

// taskRun is a task the reader holds, from its lease to its report: how
// many of its records the training loop has consumed.
type taskRun struct {
	job     string
	meta    TaskMeta
	session bool  // held by the session, whose keep-alives report progress
	n       int64 // the task's records

	mu sync.Mutex
	// consumed counts the records of the task, from its first, handed to
	// the training loop, those a restored cursor skipped included.
	consumed int64
	// settled is set once the task's report is decided: no more of its
	// records are delivered.
	settled bool
	all     chan struct{} // closed once every record is consumed
	// sid is the session that holds the task, 0 for a lease. lost is set,
	// and gone closed, when that session ended first: the task went back
	// to the queue.
	sid  uint64
	lost bool
	gone chan struct{}
	// handed is set once awaitTask has offered the task's finish to the
	// reader, or decided not to.
	handed bool
}

// hand records that awaitTask has offered the task's finish to the
// reader, or decided not to.
func (t *taskRun) hand() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.handed = true
}

// isHanded reports whether hand was called.
func (t *taskRun) isHanded() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.handed
}

// lose settles the task, whose session ended before its records were all
// consumed.
func (t *taskRun) lose() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.settled || t.consumed >= t.n {
		return
	}
	t.settled, t.lost = true, true
	close(t.gone)
}

// loseTasks settles the tasks held under session id, which ended: the
// ones not all consumed deliver no more records. If it held any task not
// yet reported finished, consumed or not, the records the training loop
// had of them may go to other trainers: the loss is kept (sessionLoss).
func (c *Client) loseTasks(id uint64) {
	c.held.mu.Lock()
	defer c.held.mu.Unlock()
	held := 0
	for tr := range c.held.m {
		if tr.sid == id {
			tr.lose()
			held++
		}
	}
	if held > 0 && !c.closing.Load() {
		c.lost.set(fmt.Errorf("raftmaster client: session %d ended while the reader held %d tasks not yet reported finished "+
			"(its keep-alives did not reach the cluster for its TTL): they went back to the queue, and the records of them "+
			"already returned may be trained again by other trainers; to train each record once, restart from the last "+
			"checkpoint and its cursor (RestoreCursor): %w", id, held, ErrSessionExpired))
	}
}

// sessionLoss is the loss of a session that held tasks of the reader:
// NextRecord returns it once, and ReportProgress and CommitCursor until
// RestoreCursor clears it, so that no cursor counts records that other
// trainers may train again.
type sessionLoss struct {
	mu   sync.Mutex
	err  error
	told bool
}

func (l *sessionLoss) set(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.err, l.told = err, false
	}
}

// get returns the loss, if any; once is set for NextRecord, which
// returns it only once.
func (l *sessionLoss) get(once bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil || once && l.told {
		return nil
	}
	if once {
		l.told = true
	}
	return l.err
}

func (l *sessionLoss) clear() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.err, l.told = nil, false
}

// consume counts the record NextRecord is about to return, unless the
// task was settled meanwhile: then it reports false, and the record is
// not the training loop's. Records are counted rather than their offsets
// taken, so that calls of NextRecord from several goroutines count each.
func (t *taskRun) consume(c *Client) bool {
	t.mu.Lock()
	if t.settled {
		t.mu.Unlock()
		return false
	}
	t.consumed++
	n := t.consumed
	if n == t.n {
		close(t.all)
	}
	t.mu.Unlock()
	if t.session {
		c.sessionConsumed(t.job, t.meta, n)
	}
	return true
}

// settle stops the delivery of the task's records and reports whether
// they were all consumed.
func (t *taskRun) settle() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.settled = true
	return t.consumed >= t.n
}

// progress is the task's consumed offset, and whether Progress shows it:
// some records consumed, and not handed back.
func (t *taskRun) progress() (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.consumed, t.consumed > 0 && (!t.settled || t.consumed >= t.n)
}

// heldTasks are the tasks the Client's reader holds, of every pass.
type heldTasks struct {
	mu sync.Mutex
	m  map[*taskRun]struct{}
	// idle is closed when the last task held is reported; nil while none
	// was held.
	idle chan struct{}
}

// holdTask starts counting the consumption of t's records.
func (c *Client) holdTask(t Task) *taskRun {
	tr := &taskRun{job: c.job, meta: t.Meta, session: t.Session != 0, sid: t.Session, all: make(chan struct{}), gone: make(chan struct{})}
	for _, ch := range t.Chunks {
		tr.n += int64(ch.Records)
	}
	tr.consumed = min(max(t.Skip, 0), tr.n)
	if tr.consumed == tr.n {
		close(tr.all)
	}
	h := &c.held
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.m) == 0 {
		h.m = make(map[*taskRun]struct{})
		h.idle = make(chan struct{})
	}
	h.m[tr] = struct{}{}
	return tr
}

// releaseTask forgets tr, which was reported.
func (c *Client) releaseTask(tr *taskRun) {
	h := &c.held
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.m[tr]; !ok {
		return
	}
	delete(h.m, tr)
	if len(h.m) == 0 {
		close(h.idle)
	}
}

// waitHeld waits until deadline for every task held to be reported.
func (c *Client) waitHeld(deadline *time.Timer) {
	c.held.mu.Lock()
	idle := c.held.idle
	if len(c.held.m) == 0 {
		idle = nil
	}
	c.held.mu.Unlock()
	if idle == nil {
		return
	}
	select {
	case <-idle:
	case <-deadline.C:
	}
}

// stopReader stops the reader of the current pass and waits, for
// abandonTimeout at most, for it and the tasks held to be reported: those
// the training loop consumed finished, before Close closes the session,
// which would send them back to the queue.
func (c *Client) stopReader() {
	c.closing.Store(true)
	c.passMu.Lock()
	p := c.current()
	c.passMu.Unlock()
	p.cancel()
	deadline := time.NewTimer(abandonTimeout)
	defer deadline.Stop()
	select {
	case <-p.done:
		c.waitHeld(deadline)
	case <-deadline.C:
	}
}

// hold counts a task of the pass being delivered or reported.
func (p *passRun) hold() {
	p.tasks.Add(1)
	p.mu.Lock()
	p.inflight++
	p.mu.Unlock()
}

// release counts a task of the pass reported, and wakes a reader waiting
// for one.
func (p *passRun) release() {
	p.mu.Lock()
	p.inflight--
	p.reported++
	p.mu.Unlock()
	select {
	case p.settled <- struct{}{}:
	default:
	}
	p.tasks.Done()
}

// reports is the number of tasks of the pass reported so far.
func (p *passRun) reports() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reported
}

// holding reports whether tasks of the pass are delivered or reported
// now, or were reported since reports() was seen: the answer of a GetTask
// sent then may not reflect them.
func (p *passRun) holding(seen int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inflight > 0 || p.reported != seen
}
