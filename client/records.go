package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/raftmaster/raftmaster/recordio"
	"github.com/raftmaster/raftmaster/rpc"
)

// abandonTimeout bounds the TaskFailed report of a task whose pass was
// replaced by a new StartGetRecords.
const abandonTimeout = 5 * time.Second

// record is one item of the record channel: a record, or the error that
// ends a pass.
type record struct {
	data []byte
	err  error
}

// passRun is the reader goroutine of one pass.
type passRun struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// StartGetRecords starts reading the records of pass passID in the
// background; NextRecord returns them. It stops the reader of an earlier
// pass first and discards the records that reader had buffered; a task that
// reader was in the middle of is reported failed, so that it is dispatched
// again.
//
// The reader leases one task at a time and reads its chunks. When the last
// record of a task is in the channel it reports the task finished; when a
// chunk cannot be read it reports the task failed and goes on. It waits
// while the pass has not started or there is no dataset yet, and ends the
// pass with ErrPassBefore, ErrNoMoreAvailable or ErrAllTaskFailed, which
// NextRecord returns.
func (c *Client) StartGetRecords(passID int) {
	c.passMu.Lock()
	defer c.passMu.Unlock()
	if p := c.pass; p != nil {
		p.cancel()
		<-p.done
		c.pass = nil
	}
	for drained := false; !drained; {
		select {
		case <-c.ch:
		default:
			drained = true
		}
	}
	ctx, cancel := context.WithCancel(c.ctx)
	p := &passRun{cancel: cancel, done: make(chan struct{})}
	if !c.spawn(func() {
		defer close(p.done)
		defer cancel()
		c.getRecords(ctx, passID)
	}) {
		cancel()
		return
	}
	c.pass = p
}

// NextRecord returns the next record of the pass started by
// StartGetRecords. At the end of the pass it returns ErrPassBefore,
// ErrNoMoreAvailable or ErrAllTaskFailed (match them with errors.Is), and
// after that it blocks until the next StartGetRecords. It returns
// ErrClientClosed once the client is closed. The record is the caller's.
func (c *Client) NextRecord() ([]byte, error) {
	select {
	case r := <-c.ch:
		return r.data, r.err
	case <-c.ctx.Done():
		return nil, ErrClientClosed
	}
}

// getRecords is the reader of one pass.
func (c *Client) getRecords(ctx context.Context, passID int) {
	log := c.logger.With("pass", passID)
	wait := c.passWaitMin
	for {
		t, err := c.getTask(ctx, passID)
		switch {
		case err == nil:
			wait = c.passWaitMin
		case ctx.Err() != nil:
			return
		case errors.Is(err, ErrPassBefore), errors.Is(err, ErrNoMoreAvailable), errors.Is(err, ErrAllTaskFailed):
			log.Debug("pass ends", "reason", err)
			c.push(ctx, record{err: err})
			return
		default:
			// ErrPassAfter: others are finishing the previous pass.
			// ErrNoDataset: nobody has set it yet. Anything else: the
			// cluster was unreachable for the whole retry budget.
			// Like the seed, wait and ask again.
			if errors.Is(err, ErrPassAfter) || errors.Is(err, ErrNoDataset) {
				log.Debug("waiting for the pass", "reason", err)
			} else {
				log.Warn("cannot get a task", "error", err)
			}
			if !sleep(ctx, wait/2+rand.N(wait/2+1)) {
				return
			}
			wait = min(2*wait, c.passWaitMax)
			continue
		}
		err = c.readTask(ctx, t)
		switch {
		case ctx.Err() != nil:
			if c.ctx.Err() == nil {
				// Replaced by a new pass: hand the task back now rather
				// than at the end of its lease.
				actx, cancel := context.WithTimeout(c.ctx, abandonTimeout)
				if err := c.taskReport(actx, rpc.PathTaskFailed, t.Meta); err != nil {
					log.Debug("cannot hand back an abandoned task", "task", t.Meta.ID, "error", err)
				}
				cancel()
			}
			return
		case err != nil:
			log.Error("reading task failed", "task", t.Meta.ID, "epoch", t.Meta.Epoch, "error", err)
			if err := c.taskReport(c.ctx, rpc.PathTaskFailed, t.Meta); err != nil {
				log.Warn("cannot report a failed task", "task", t.Meta.ID, "error", err)
			}
		default:
			// Finished once its last record is in the channel, as in the
			// seed: not exactly when it is consumed, but close enough.
			// The report must not be cut short by a new pass, or the task
			// would be dispatched again.
			if err := c.taskReport(c.ctx, rpc.PathTaskFinished, t.Meta); err != nil {
				log.Warn("cannot report a finished task", "task", t.Meta.ID, "error", err)
			}
		}
	}
}

// readTask puts every record of t into the channel. It returns ctx's error
// when the pass was stopped, or the first read error.
func (c *Client) readTask(ctx context.Context, t Task) error {
	var (
		f    *os.File
		path string
	)
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	for _, ch := range t.Chunks {
		if f == nil || ch.Path != path {
			if f != nil {
				f.Close()
				f = nil
			}
			var err error
			if f, err = os.Open(ch.Path); err != nil {
				return err
			}
			path = ch.Path
		}
		s := recordio.NewRangeScanner(f, recordio.NewChunkIndex(ch.Offset, int(ch.Records)), 0, -1)
		for s.Scan() {
			r := s.Record()
			if !c.push(ctx, record{data: append(make([]byte, 0, len(r)), r...)}) {
				return ctx.Err()
			}
		}
		if err := s.Err(); err != nil {
			return fmt.Errorf("%s at offset %d: %w", ch.Path, ch.Offset, err)
		}
	}
	return nil
}

// push puts r into the channel, unless ctx is done first.
func (c *Client) push(ctx context.Context, r record) bool {
	select {
	case c.ch <- r:
		return true
	case <-ctx.Done():
		return false
	}
}
