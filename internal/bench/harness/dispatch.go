package harness

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/raftmaster/raftmaster/client"
)

// Op names one of the two writes of a Pair.
type Op int

// The writes of a Pair, in their order.
const (
	GetTask Op = iota
	TaskFinished
)

// ErrPassesDone means every pass of a Dispatch with Passes is over.
var ErrPassesDone = errors.New("harness: every pass is over")

// Dispatch is what the trainers of one dataset share: the pass they are
// on. A trainer that finds the pass fully leased moves everyone on to the
// next, and waits there until the others have finished theirs, as the
// original client does.
type Dispatch struct {
	// Passes, when positive, is how many passes to run; Pair answers
	// ErrPassesDone once they are over. Zero runs pass after pass.
	Passes int

	pass atomic.Int64
}

// Pair leases a task of the current pass with cl and reports it finished.
// It calls record with each of the two writes once it is acknowledged,
// and failed, when not nil, with the time a write failed after the
// client's retries.
func (d *Dispatch) Pair(ctx context.Context, cl *client.Client, record func(op Op, t0, t1 time.Time), failed func(time.Time)) error {
	fail := failer(failed)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		p := d.pass.Load()
		if d.Passes > 0 && p >= int64(d.Passes) {
			return ErrPassesDone
		}
		t0 := time.Now()
		task, err := cl.GetTask(int(p))
		t1 := time.Now()
		switch {
		case err == nil:
		case errors.Is(err, client.ErrNoMoreAvailable), errors.Is(err, client.ErrPassBefore):
			d.pass.CompareAndSwap(p, p+1)
			continue
		case errors.Is(err, client.ErrPassAfter):
			if !pause(ctx, time.Millisecond) {
				return ctx.Err()
			}
			continue
		default:
			return fail(t1, fmt.Errorf("GetTask(%d): %w", p, err))
		}
		record(GetTask, t0, t1)
		err = cl.TaskFinished(task.Meta)
		t2 := time.Now()
		if err != nil {
			return fail(t2, fmt.Errorf("TaskFinished(%d): %w", task.Meta.ID, err))
		}
		record(TaskFinished, t1, t2)
		return nil
	}
}

// Reader is one trainer of a Dispatch that reads with one write per task:
// it carries the task it holds into its next GetTaskAfter, which finishes
// that task and leases the next in one log entry. Its zero value holds no
// task; it is not safe for concurrent use.
type Reader struct {
	held    client.TaskMeta
	holding bool
}

// Holding reports whether r holds a leased task that it has not finished.
func (r *Reader) Holding() bool { return r.holding }

// Step makes one write for r with cl on the current pass: GetTask when r
// holds no task, else GetTaskAfter with the task it holds. It calls
// finished once a write that finished r's task is acknowledged (the
// finish counted, whether or not a next task was leased: at the end of a
// pass the finish of its last task counts and the answer is
// ErrPassBefore), and failed, when not nil, with the time a write failed
// after the client's retries. At a pass's end it moves everyone on to the
// next pass as Pair does. A finish the cluster did not answer for (an
// error without an outcome) is reported again with TaskFinished, which
// does no harm if it had counted.
func (d *Dispatch) Step(ctx context.Context, r *Reader, cl *client.Client, finished func(t0, t1 time.Time), failed func(time.Time)) error {
	fail := failer(failed)
	if err := ctx.Err(); err != nil {
		return err
	}
	p := d.pass.Load()
	if d.Passes > 0 && p >= int64(d.Passes) && !r.holding {
		return ErrPassesDone
	}
	var (
		task client.Task
		err  error
	)
	call := "GetTask"
	t0 := time.Now()
	if !r.holding {
		task, err = cl.GetTaskContext(ctx, int(p))
	} else {
		call = "GetTaskAfter"
		var o client.FinishOutcome
		task, o, err = cl.GetTaskAfter(ctx, int(p), r.held)
		t1 := time.Now()
		switch {
		case o.Answered && o.Err != nil:
			return fail(t1, fmt.Errorf("GetTaskAfter(%d) finishing %d: %w", p, r.held.ID, o.Err))
		case o.Answered:
			r.holding = false
			finished(t0, t1)
		default:
			// No answer on the finish: report it on its own.
			if ferr := cl.TaskFinished(r.held); ferr != nil {
				return fail(time.Now(), fmt.Errorf("GetTaskAfter(%d): %v; TaskFinished(%d): %w", p, err, r.held.ID, ferr))
			}
			r.holding = false
			finished(t0, time.Now())
		}
	}
	switch {
	case err == nil:
		r.held, r.holding = task.Meta, true
	case errors.Is(err, client.ErrNoMoreAvailable), errors.Is(err, client.ErrPassBefore):
		d.pass.CompareAndSwap(p, p+1)
	case errors.Is(err, client.ErrPassAfter):
		if !pause(ctx, time.Millisecond) {
			return ctx.Err()
		}
	default:
		return fail(time.Now(), fmt.Errorf("%s(%d): %w", call, p, err))
	}
	return nil
}

// Release reports the task r holds finished with TaskFinished, if it holds
// one, so that its pass can end without it.
func (d *Dispatch) Release(r *Reader, cl *client.Client) error {
	if !r.holding {
		return nil
	}
	if err := cl.TaskFinished(r.held); err != nil {
		return fmt.Errorf("TaskFinished(%d): %w", r.held.ID, err)
	}
	r.holding = false
	return nil
}

// failer returns the function a step calls when it fails at t with err:
// it reports t to failed, when not nil, and returns err.
func failer(failed func(time.Time)) func(time.Time, error) error {
	return func(t time.Time, err error) error {
		if failed != nil {
			failed(t)
		}
		return err
	}
}

// pause waits for d or until ctx is done; it reports whether d passed.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
