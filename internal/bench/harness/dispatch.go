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
	fail := func(t time.Time, err error) error {
		if failed != nil {
			failed(t)
		}
		return err
	}
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
