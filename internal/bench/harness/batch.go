package harness

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/raftmaster/raftmaster/client"
)

// BatchReader is one trainer of a Dispatch that prefetches: each write
// (GetTasks) finishes the batch it holds and leases the next batch of
// Size tasks in one log entry. Its zero value holds nothing and leases
// one task at a time; it is not safe for concurrent use.
type BatchReader struct {
	// Size is how many tasks a write leases, 1 to client.MaxTasksPerGet.
	Size int
	held []client.TaskMeta
}

// StepBatch makes one write for r with cl on the current pass: GetTasks
// of r.Size tasks, carrying the batch r holds. It calls finished once for
// each task of that batch whose finish counted, with the write's times,
// and failed, when not nil, with the time a write failed after the
// client's retries. At a pass's end it moves everyone on to the next pass
// as Pair does. Finishes the cluster did not answer for are reported
// again with TaskFinished, which does no harm if they had counted.
func (d *Dispatch) StepBatch(ctx context.Context, r *BatchReader, cl *client.Client, finished func(t0, t1 time.Time), failed func(time.Time)) error {
	fail := failer(failed)
	if err := ctx.Err(); err != nil {
		return err
	}
	p := d.pass.Load()
	if d.Passes > 0 && p >= int64(d.Passes) && len(r.held) == 0 {
		return ErrPassesDone
	}
	t0 := time.Now()
	tasks, outcomes, err := cl.GetTasks(ctx, int(p), max(r.Size, 1), r.held)
	t1 := time.Now()
	for i, o := range outcomes {
		switch {
		case o.Answered && o.Err != nil:
			return fail(t1, fmt.Errorf("GetTasks(%d) finishing %d: %w", p, r.held[i].ID, o.Err))
		case !o.Answered:
			if ferr := cl.TaskFinished(r.held[i]); ferr != nil {
				return fail(time.Now(), fmt.Errorf("GetTasks(%d): %v; TaskFinished(%d): %w", p, err, r.held[i].ID, ferr))
			}
		}
		finished(t0, t1)
	}
	r.held = r.held[:0]
	switch {
	case err == nil:
		for _, t := range tasks {
			r.held = append(r.held, t.Meta)
		}
	case errors.Is(err, client.ErrNoMoreAvailable), errors.Is(err, client.ErrPassBefore):
		d.pass.CompareAndSwap(p, p+1)
	case errors.Is(err, client.ErrPassAfter):
		if !pause(ctx, time.Millisecond) {
			return ctx.Err()
		}
	default:
		return fail(time.Now(), fmt.Errorf("GetTasks(%d): %w", p, err))
	}
	return nil
}

// ReleaseBatch reports the tasks r holds finished with TaskFinished, so
// that their pass can end without them.
func (d *Dispatch) ReleaseBatch(r *BatchReader, cl *client.Client) error {
	for len(r.held) > 0 {
		if err := cl.TaskFinished(r.held[0]); err != nil {
			return fmt.Errorf("TaskFinished(%d): %w", r.held[0].ID, err)
		}
		r.held = r.held[1:]
	}
	return nil
}
