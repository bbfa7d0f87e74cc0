package client

import (
	"cmp"
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/raftmaster/raftmaster/rpc"
)

// Cursors: the data position saved with the model. A cursor is a point in
// the dispatch of the client's job (WithJob): the pass, the tasks finished
// in it, and how many records of each task in flight the training loop
// had consumed. Committed with a model checkpoint and restored with it,
// it makes the records trained after the restore exactly those the
// checkpoint had not trained, whatever the number of trainers before and
// after, across full restarts of the trainers and of the cluster.
//
// A record counts as consumed once NextRecord has returned it: a
// checkpoint must hold every record NextRecord returned before its cursor
// was committed, and none after. A task is reported finished once all its
// records are consumed, and the tasks a reader hands back (StartGetRecords
// again, its context done, Close) are those not all consumed.
//
// One trainer: stop calling NextRecord, CommitCursor(ctx, step), save the
// model with {job, cursor id} atomically, go on. Several trainers, at a
// checkpoint:
//
//  1. every trainer stops calling NextRecord and calls ReportProgress;
//  2. barrier (an allgather Join, or the framework's own), so that every
//     report is applied before the commit;
//  3. one trainer calls CommitCursor and shares the cursor's id with the
//     others (the Join's data, a broadcast);
//  4. the model is saved with {job, cursor id}, atomically, and every
//     trainer goes on.
//
// To resume, from a fresh set of trainers at any number: one of them calls
// RestoreCursor(ctx, id) with the id saved with the model, then barrier,
// then every trainer calls StartGetRecords(restored.Cursor.Pass), and
// later passes as usual. RestoreCursor must come before StartGetRecords:
// a reader running when the cursor is restored holds leases that the
// restore revoked, and records of them that the cursor does not count.
//
// The calls need a cluster at protocol level 7 (rpc.CursorProtocol).
// Below it the leader answers unavailable, which the client retries until
// its context or retry budget ends (ErrUnavailable), or invalid.
// ReportProgress and CommitCursor report on the tasks the Client's session
// holds, so they go under the session, like the task reports: refused
// with ErrSessionExpired, nothing applied, once it ended, as its tasks
// went back to the queue then. And once a session that held tasks of the
// reader not yet reported finished has ended, whether the Client saw it in
// a keep-alive's answer or in a report's, NextRecord returns
// ErrSessionExpired once, and ReportProgress and CommitCursor return it
// until the Client restores a cursor: records the training loop had of
// those tasks may be trained again by other trainers, so no cursor may
// count them; the program restarts from its last checkpoint.
// RestoreCursor, DeleteCursor and the reads go without the session.

// TaskProgress is how far the training loop has consumed a task the
// reader holds: Consumed is the number of the task's records, from its
// first, that NextRecord returned, counting the ones a restored cursor
// skipped (Task.Skip).
type TaskProgress = rpc.TaskProgress

// CursorInfo describes a cursor.
type CursorInfo = rpc.CursorInfo

// RestoredCursor is what RestoreCursor did: the cursor, the job's restore
// generation now, and how many leases it revoked.
type RestoredCursor = rpc.RestoreCursorResponse

// Progress returns how far the training loop has consumed the tasks the
// Client's reader holds (StartGetRecords): one entry for each task some
// of whose records NextRecord returned and that is not yet reported
// finished (or whose finish report is under way), in task id order.
// Tasks handed back are not in it. Call it with NextRecord stopped; it is
// what ReportProgress and CommitCursor send.
func (c *Client) Progress() []TaskProgress {
	c.held.mu.Lock()
	out := make([]TaskProgress, 0, len(c.held.m))
	for tr := range c.held.m {
		if n, ok := tr.progress(); ok {
			out = append(out, TaskProgress{Meta: tr.meta, Consumed: n})
		}
	}
	c.held.mu.Unlock()
	slices.SortFunc(out, func(a, b TaskProgress) int {
		return cmp.Or(cmp.Compare(a.Meta.ID, b.Meta.ID), cmp.Compare(a.Meta.Epoch, b.Meta.Epoch))
	})
	return out
}

// ReportProgress records the Client's Progress in the job for its next
// cursor, and returns how many of its entries named a lease still current
// and were recorded: a task whose lease was lost or revoked is not. With
// several trainers, each one calls it at a checkpoint, after it stopped
// calling NextRecord and before the barrier after which one of them calls
// CommitCursor. It is one write, applied at most once, or none when the
// reader holds no task with records consumed.
func (c *Client) ReportProgress(ctx context.Context) (int, error) {
	if err := c.lost.get(false); err != nil {
		return 0, err
	}
	progress := c.Progress()
	if len(progress) == 0 {
		// Nothing in flight: nothing to report, and no write.
		return 0, nil
	}
	var resp rpc.ReportProgressResponse
	err := c.do(ctx, &call{method: http.MethodPost, path: rpc.PathTaskProgress, underSession: true,
		body: rpc.ReportProgressRequest{Progress: progress}, write: true, out: &resp})
	return resp.Recorded, err
}

// CursorOption sets a fence of CommitCursor.
type CursorOption func(*rpc.CommitCursorRequest)

// WithCursorTrainer fences the commit with the save-model lease
// (RequestSaveModel): it is refused with ErrCursorFenced while a trainer
// other than trainerID holds the lease, so that only the trainer that
// saves the model commits its cursor.
func WithCursorTrainer(trainerID string) CursorOption {
	return func(r *rpc.CommitCursorRequest) { r.TrainerID = trainerID }
}

// WithCursorGeneration fences the commit with restores: it is refused
// with ErrCursorFenced once the job's dispatch was restored after
// generation, the one the caller read (RestoreCursor's answer, Cursors),
// so that a trainer of a run that another one restored over commits no
// cursor of it. Zero sets no fence.
func WithCursorGeneration(generation uint64) CursorOption {
	return func(r *rpc.CommitCursorRequest) { r.Generation = generation }
}

// CommitCursor commits a cursor of the job's dispatch as it is now, step
// being the caller's label of the checkpoint (the training step), and
// returns it: save its ID with the model. It carries the Client's
// Progress, recorded first as ReportProgress would, in the same write;
// with several trainers the others report theirs before it (see the
// protocol above). Call it with NextRecord stopped, after the model holds
// every record NextRecord returned. It is one write, applied at most
// once; a retry answers the cursor its first attempt committed. A job
// keeps its 16 newest cursors, dropping the oldest. It fails with ErrCursorFenced when a fence of opts refuses it,
// nothing changed, and ErrNoDataset when the job has no dataset.
func (c *Client) CommitCursor(ctx context.Context, step int64, opts ...CursorOption) (CursorInfo, error) {
	if err := c.lost.get(false); err != nil {
		return CursorInfo{}, err
	}
	req := rpc.CommitCursorRequest{Step: step, Progress: c.Progress()}
	for _, o := range opts {
		o(&req)
	}
	var resp rpc.CommitCursorResponse
	err := c.do(ctx, &call{method: http.MethodPost, path: rpc.PathCursors, underSession: true, body: req, write: true, out: &resp})
	return resp.Cursor, err
}

// RestoreCursor puts the job's dispatch back to cursor id, in one write
// applied at most once: the job is at the cursor's pass, the tasks it
// counts finished are finished, each task it counts partly consumed is
// dispatched again from its first record not consumed (Task.Skip), every
// other task of the pass is to do, every lease is revoked (the holders'
// reports change nothing any more) and the job's restore generation
// grows. Call it before StartGetRecords(restored.Cursor.Pass), and before
// any other trainer of the job reads: records a reader had buffered are
// not the cursor's. It fails with ErrUnknownCursor when the job has no
// such cursor, nothing changed.
func (c *Client) RestoreCursor(ctx context.Context, id uint64) (RestoredCursor, error) {
	var resp rpc.RestoreCursorResponse
	err := c.do(ctx, &call{method: http.MethodPost, path: c.cursorPath(rpc.PathCursorRestore, id),
		body: rpc.RestoreCursorRequest{}, write: true, out: &resp})
	if err == nil {
		// The records of lost sessions are the restored cursor's concern
		// no more.
		c.lost.clear()
	}
	return resp, err
}

// Cursors lists the job's cursors, oldest first, and its restore
// generation, read at the leader.
func (c *Client) Cursors(ctx context.Context) (rpc.ListCursorsResponse, error) {
	var resp rpc.ListCursorsResponse
	err := c.do(ctx, &call{method: http.MethodGet, path: rpc.PathCursors, out: &resp})
	return resp, err
}

// Cursor returns cursor id of the job with its partly consumed tasks,
// read at the leader. It fails with ErrUnknownCursor when the job has no
// such cursor.
func (c *Client) Cursor(ctx context.Context, id uint64) (rpc.CursorResponse, error) {
	var resp rpc.CursorResponse
	err := c.do(ctx, &call{method: http.MethodGet, path: c.cursorPath(rpc.PathCursor, id), out: &resp})
	return resp, err
}

// DeleteCursor deletes cursor id of the job, and reports false when it
// did not exist, which changes nothing.
func (c *Client) DeleteCursor(ctx context.Context, id uint64) (bool, error) {
	var resp rpc.DeleteCursorResponse
	err := c.do(ctx, &call{method: http.MethodDelete, path: c.cursorPath(rpc.PathCursor, id), write: true, out: &resp})
	return err == nil && resp.Deleted, err
}

// cursorPath is path, one of the cursor paths, with id in it, under the
// client's job.
func (c *Client) cursorPath(path string, id uint64) string {
	path = strings.Replace(path, "{"+rpc.CursorParam+"}", strconv.FormatUint(id, 10), 1)
	if c.job == "" {
		return path
	}
	return rpc.JobPath(url.PathEscape(c.job), path)
}
