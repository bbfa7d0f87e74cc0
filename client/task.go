package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/raftmaster/raftmaster/recordio"
	"github.com/raftmaster/raftmaster/rpc"
)

// TaskMeta identifies one dispatch of a task: its id and the epoch of the
// lease.
type TaskMeta = rpc.TaskMeta

// Chunk is one RecordIO chunk of a task: file, byte offset of the chunk
// header and record count.
type Chunk = rpc.Chunk

// Task is a leased task: read its chunks, then report it finished or
// failed, and renew the lease (RenewLease) well before it runs out.
type Task struct {
	Meta   TaskMeta
	Chunks []Chunk
	// Pass is the pass the task belongs to: the one asked for, or the one
	// before while the cluster finishes it (a task of it came back).
	Pass int
	// Lease is how long the lease lasted when the cluster answered; zero
	// when the server did not say, or when the task is held by a session.
	Lease time.Duration
	// Session is the Client's session that holds the task, 0 for a lease
	// that runs out: a held task needs no renewal, and goes back to the
	// queue as soon as the session ends.
	Session uint64
	// Skip is how many of the task's first records a restored cursor
	// counts as trained (RestoreCursor): the reader delivers only the
	// records after them, and counts them consumed.
	Skip int64
	// Seed is the dataset's seed, for a shuffle of the task's records
	// that every reader of the task does alike (0 when the dataset has
	// none: set before the cluster reached protocol level 8).
	Seed uint64
	// Source is the name of the mixture source the task's records come
	// from (DatasetParams.Sources); empty for a dataset of one source.
	Source string
}

// DatasetParams are the task-queue settings of SetDatasetWithParams. Zero
// fields take the server's defaults.
type DatasetParams struct {
	// ChunksPerTask is how many consecutive chunks form one task.
	ChunksPerTask int
	// TaskTimeout is the lease of a dispatched task.
	TaskTimeout time.Duration
	// FailureMax is how many failures or timeouts a task survives; nil
	// means the server's default.
	FailureMax *int
	// Strict refuses a late TaskFinished from an earlier lease.
	Strict bool
	// Shuffle, when nil or true, has each pass's tasks first dispatched
	// in a permutation of (seed, pass), the same at any number of
	// trainers and through any faults; false keeps id order. A cluster
	// not yet upgraded to protocol level 8 keeps id order when Seed is
	// nil and Shuffle nil or false, and otherwise answers unavailable
	// (rpc.CodeUnavailable), which the client retries until the upgrade
	// or the end of its retry budget.
	Shuffle *bool
	// Seed seeds the permutations; nil lets the leader draw one. The
	// dataset records it: the response and Job say which.
	Seed *uint64
	// Sources, when set, make the dataset a weighted mixture of them
	// (protocol level 9), in place of the globs, which must then be none:
	// each source's patterns are indexed by the leader (not with
	// WithClientIndexing), its tasks hold its records alone (Task.Source
	// names it), and the records handed out follow the weights. See
	// SetWeights and SetWeightSchedule to change them, and Job for each
	// source's progress.
	Sources []Source
}

// SetDataset sets the dataset: the RecordIO files that globPaths match. As
// in the original, only the first dataset of a cluster is honoured, so every
// trainer may call it. The leader expands and indexes the globs, unless the
// client was made WithClientIndexing.
func (c *Client) SetDataset(globPaths []string) error {
	return c.SetDatasetContext(context.Background(), globPaths)
}

// SetDatasetContext is SetDataset bounded by ctx.
func (c *Client) SetDatasetContext(ctx context.Context, globPaths []string) error {
	_, err := c.SetDatasetWithParamsContext(ctx, globPaths, DatasetParams{})
	return err
}

// SetDatasetWithParams is SetDataset with task-queue settings. The response
// says whether the dataset was ignored because one was already set, and
// with which patterns it was set (CurrentPatterns); when they differ from
// globPaths, the client's logger warns, naming both.
func (c *Client) SetDatasetWithParams(globPaths []string, p DatasetParams) (rpc.SetDatasetResponse, error) {
	return c.SetDatasetWithParamsContext(context.Background(), globPaths, p)
}

// SetDatasetWithParamsContext is SetDatasetWithParams bounded by ctx,
// which bounds the indexing of WithClientIndexing too.
//
// With p.Sources, globPaths must be empty: the dataset is the mixture of
// the sources. Sources given with globs, or under WithClientIndexing,
// sources without a name, with a name twice, without a pattern or with a
// weight that is negative or not a number are ErrInvalid, and nothing is
// sent.
func (c *Client) SetDatasetWithParamsContext(ctx context.Context, globPaths []string, p DatasetParams) (rpc.SetDatasetResponse, error) {
	if len(p.Sources) > 0 {
		return c.setMixture(ctx, globPaths, p)
	}
	req := rpc.SetDatasetRequest{
		ChunksPerTask: p.ChunksPerTask,
		TaskTimeout:   rpc.Duration(p.TaskTimeout),
		FailureMax:    p.FailureMax,
		Strict:        p.Strict,
		Shuffle:       p.Shuffle,
		Seed:          p.Seed,
	}
	if c.clientIndexing {
		for _, g := range globPaths {
			if strings.HasPrefix(g, "s3://") || strings.HasPrefix(g, "gs://") {
				return rpc.SetDatasetResponse{}, fmt.Errorf("client: %q: object-store patterns are indexed by the leader (serve --dataset-buckets), not with WithClientIndexing", g)
			}
		}
		chunks, err := c.indexGlobs(ctx, globPaths)
		if err != nil {
			return rpc.SetDatasetResponse{}, err
		}
		req.Chunks = chunks
	} else {
		req.Globs = globPaths
	}
	return c.sendDataset(ctx, req, globPaths)
}

// setMixture sets the dataset of p.Sources.
func (c *Client) setMixture(ctx context.Context, globPaths []string, p DatasetParams) (rpc.SetDatasetResponse, error) {
	if len(globPaths) > 0 {
		return rpc.SetDatasetResponse{}, fmt.Errorf("%w: SetDataset: globs and sources given: the sources' patterns are the dataset's", ErrInvalid)
	}
	if c.clientIndexing {
		return rpc.SetDatasetResponse{}, fmt.Errorf("%w: SetDataset: a mixture's sources are indexed by the leader, not with WithClientIndexing", ErrInvalid)
	}
	if err := checkSources(p.Sources); err != nil {
		return rpc.SetDatasetResponse{}, err
	}
	specs, patterns := sourceSpecs(p.Sources)
	return c.sendDataset(ctx, rpc.SetDatasetRequest{
		ChunksPerTask: p.ChunksPerTask,
		TaskTimeout:   rpc.Duration(p.TaskTimeout),
		FailureMax:    p.FailureMax,
		Strict:        p.Strict,
		Shuffle:       p.Shuffle,
		Seed:          p.Seed,
		Sources:       specs,
	}, patterns)
}

// sendDataset sends req, a dataset of the patterns given, and warns when
// the job reads other patterns.
func (c *Client) sendDataset(ctx context.Context, req rpc.SetDatasetRequest, patterns []string) (rpc.SetDatasetResponse, error) {
	var resp rpc.SetDatasetResponse
	// Indexing a large dataset on the leader takes a while: let an attempt
	// use the whole budget.
	err := c.do(ctx, &call{method: http.MethodPost, path: rpc.PathDataset, body: req, write: true, out: &resp,
		timeout: max(c.retry, defaultAttemptTimeout)})
	if err == nil {
		c.warnOtherPatterns(patterns, resp)
	}
	return resp, err
}

// indexGlobs indexes the files as the leader would, so that the tasks are
// the same either way. ctx and Close end it.
func (c *Client) indexGlobs(ctx context.Context, globs []string) ([]rpc.Chunk, error) {
	ctx, done := c.callContext(ctx)
	defer done()
	chunks, _, err := recordio.IndexGlobs(ctx, globs, recordio.IndexLimits{})
	if err != nil {
		if c.ctx.Err() != nil {
			return nil, ErrClientClosed
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("raftmaster client: indexing the dataset: %w", ctxCause(ctx))
		}
		return nil, fmt.Errorf("raftmaster client: indexing the dataset: %w", err)
	}
	out := make([]rpc.Chunk, len(chunks))
	for i, ch := range chunks {
		out[i] = rpc.Chunk{Path: ch.Path, Offset: ch.Offset, Records: ch.Records}
	}
	return out, nil
}

// GetTask leases the next task of pass passID. It fails with ErrPassBefore
// or ErrPassAfter for another pass, ErrNoMoreAvailable when the rest of the
// pass is leased to others, ErrAllTaskFailed, or ErrNoDataset while the job
// has none yet. Once the client has seen the job with a dataset, it fails
// with ErrUnknownJob when that job has been deleted, even if a job of the
// same name was created since: make a new client to read that one.
func (c *Client) GetTask(passID int) (Task, error) {
	return c.GetTaskContext(context.Background(), passID)
}

// GetTaskContext is GetTask bounded by ctx.
func (c *Client) GetTaskContext(ctx context.Context, passID int) (Task, error) {
	t, _, err := c.getTask(ctx, passID, nil)
	return t, err
}

// FinishOutcome is how the finish that GetTaskAfter carried went.
type FinishOutcome struct {
	// Answered reports whether the cluster said how the finish went. It
	// is false when the call failed without an answer that says
	// (ErrUpgradePending, an unreachable cluster, a job deleted, ...):
	// below protocol level 9 nothing was finished, and otherwise the
	// finish may or may not have counted; report the task with
	// TaskFinished, which does no harm if it had.
	Answered bool
	// Ignored reports a finish that changed nothing and is no error, as
	// TaskFinished's Ignored: a finish of a task finished already, or of
	// an earlier lease of another pass.
	Ignored bool
	// Err is nil when the finish counted (or was ignored), else the error
	// TaskFinished would have returned, which errors.Is matches with
	// ErrStaleEpoch, ErrUnknownTask or ErrNoDataset: the finish changed
	// nothing.
	Err error
}

// GetTaskAfter is GetTaskContext for a caller that has just finished the
// task finished: one write finishes it, exactly as TaskFinished would,
// and leases the next task of pass, so that reading costs one write per
// task rather than two. The FinishOutcome says how the finish went, also
// when the lease part fails (ErrPassBefore, ErrNoMoreAvailable,
// ErrAllTaskFailed, ...): the finish of a pass's last task counts, and the
// answer is ErrPassBefore, since that finish ended the pass. It is
// retried with one request id, redirected and sent under the Client's
// session like GetTask; a retry is answered as the first attempt was,
// the finish's outcome included.
//
// Unlike GetTask, it is not sent again under a new session when the
// Client's session had ended before it: it fails with ErrSessionExpired,
// nothing applied, as TaskFinished would, the task having gone back to
// the queue with the session; ask again with GetTask.
//
// A cluster below protocol level 9 (a rolling upgrade not yet over)
// cannot take the finish with the lease: GetTaskAfter then fails at once,
// without retrying, with an error that errors.Is matches with
// ErrUpgradePending, nothing finished nor leased: report the task with
// TaskFinished and ask with GetTask instead, as the record reader does.
func (c *Client) GetTaskAfter(ctx context.Context, pass int, finished TaskMeta) (Task, FinishOutcome, error) {
	t, o, err := c.getTask(ctx, pass, &finished)
	return t, finishOutcome(o), err
}

// MaxTasksPerGet bounds GetTasks: the tasks it leases, and the finished
// tasks it carries.
const MaxTasksPerGet = 32

// GetTasks is GetTaskAfter for a reader that prefetches: one write
// finishes every task of finished (at most MaxTasksPerGet, in order,
// each as TaskFinished would) and leases up to n tasks of pass (1 to
// MaxTasksPerGet), fewer when fewer are left, in the order GetTask would
// lease them one after another; so n tasks cost one write. The
// FinishOutcomes say how each finish went, in the order of finished,
// also when the lease part fails as GetTaskAfter's may. Tasks leased
// under the Client's session are held by it, as GetTask's are; without a
// session each must be renewed (RenewLease) while it is read.
//
// It needs protocol level 10 for more than one task or one finish, and
// level 9 for one finish: below, it fails at once with an error that
// errors.Is matches with ErrUpgradePending, nothing finished nor leased.
// A retry is answered with the tasks of the first answer still leased to
// it.
func (c *Client) GetTasks(ctx context.Context, pass, n int, finished []TaskMeta) ([]Task, []FinishOutcome, error) {
	if n < 1 || n > MaxTasksPerGet || len(finished) > MaxTasksPerGet {
		return nil, nil, fmt.Errorf("raftmaster client: GetTasks of %d tasks and %d finishes: each must be at most %d, and the tasks at least 1",
			n, len(finished), MaxTasksPerGet)
	}
	tasks, outcomes, err := c.getTasks(ctx, pass, n, finished)
	out := make([]FinishOutcome, len(finished))
	for i := range out {
		if i < len(outcomes) {
			out[i] = finishOutcome(outcomes[i])
		}
	}
	return tasks, out, err
}

// ErrUpgradePending means the cluster is not yet at the protocol level a
// call needs: a rolling upgrade is under way, and a node of an earlier
// release, or the cluster's level, refused what it does not know yet.
// Nothing changed. GetTaskAfter returns it below protocol level 9.
var ErrUpgradePending = errors.New("raftmaster client: the cluster is not upgraded yet")

// finishOutcome is the client's form of how a finish went, as the answer
// said (nil: it did not say).
func finishOutcome(o *rpc.FinishOutcome) FinishOutcome {
	if o == nil {
		return FinishOutcome{}
	}
	out := FinishOutcome{Answered: true, Ignored: o.Ignored}
	if o.Code != "" {
		out.Err = rpc.ErrorFromCode(o.Code, "the finish that GetTask carried changed nothing", rpc.HTTPStatus(o.Code))
	}
	return out
}

// upgradePending reports whether err is a refusal of a GetTask carrying
// a finished task because the cluster does not take it yet: unavailable
// for a level below 9 (fsm.ErrUpgradePending, "the cluster is not
// upgraded yet"), or invalid from a node of a release before the field.
func upgradePending(err error) bool {
	e, ok := errors.AsType[*rpc.Error](err)
	switch {
	case !ok:
		return false
	case e.Code == rpc.CodeUnavailable:
		return strings.Contains(e.Message, "not upgraded")
	case e.Code == rpc.CodeInvalid:
		return strings.Contains(e.Message, `unknown field "finished"`) || strings.Contains(e.Message, `unknown field "count"`) ||
			strings.Contains(e.Message, `unknown field "more_finished"`) || strings.Contains(e.Message, `unknown field "more"`)
	}
	return false
}

// getTask leases the next task of passID, finishing finished first when
// it is not nil; it returns how that finish went, nil when the answer did
// not say.
func (c *Client) getTask(ctx context.Context, passID int, finished *TaskMeta) (Task, *rpc.FinishOutcome, error) {
	var done []TaskMeta
	if finished != nil {
		done = []TaskMeta{*finished}
	}
	tasks, outcomes, err := c.getTasks(ctx, passID, 1, done)
	var finish *rpc.FinishOutcome
	if len(outcomes) > 0 {
		finish = outcomes[0]
	}
	if len(tasks) == 0 {
		return Task{}, finish, err
	}
	return tasks[0], finish, err
}

// getTasks leases up to n tasks of passID, finishing finished first; it
// returns how each finish went, nil where the answer did not say.
func (c *Client) getTasks(ctx context.Context, passID, n int, finished []TaskMeta) ([]Task, []*rpc.FinishOutcome, error) {
	var resp rpc.GetTaskResponse
	in := rpc.GetTaskRequest{Pass: passID, JobNumber: c.read.jobNumber()}
	if n > 1 {
		in.Count = n
	}
	if len(finished) > 0 {
		in.Finished, in.MoreFinished = &finished[0], finished[1:]
	}
	cl := &call{method: http.MethodPost, path: rpc.PathTaskGet, underSession: true, grants: len(finished) == 0,
		body: in, write: true, out: &resp}
	if len(finished) > 0 {
		// Retrying would not raise the cluster's level: the caller
		// reports the task on its own instead. And the finish of a task
		// of a session that ended is not sent again under the next one,
		// as TaskFinished's is not: the task went back to the queue.
		cl.final = upgradePending
	}
	if n > 1 {
		cl.final = upgradePending
	}
	err := c.do(ctx, cl)
	first, more := resp.Finish, resp.MoreFinish
	if e, ok := errors.AsType[*rpc.Error](err); ok {
		first, more = e.Finish, e.MoreFinish
	}
	var outcomes []*rpc.FinishOutcome
	if len(finished) > 0 {
		outcomes = append(outcomes, first)
		for i := range more {
			outcomes = append(outcomes, &more[i])
		}
	}
	if err != nil && upgradePending(err) && (len(finished) > 0 || n > 1) {
		return nil, nil, fmt.Errorf("raftmaster client: GetTask of %d tasks carrying %d finishes: %w: %w", n, len(finished), ErrUpgradePending, err)
	}
	leased := append([]rpc.Task{resp.Task}, resp.More...)
	if gone := c.read.answered(resp.JobNumber, err); gone {
		if err == nil {
			// Tasks of the job created again under the name, from a
			// cluster below protocol level 2, which does not check the
			// number: hand them back at once rather than hold them for
			// their whole lease.
			actx, cancel := context.WithTimeout(c.ctx, abandonTimeout)
			for _, t := range leased {
				if rerr := c.taskReport(actx, rpc.PathTaskFailed, t.Meta); rerr != nil {
					c.logger.Debug("cannot hand back a task of a job created again", "task", t.Meta.ID, "error", rerr)
				}
			}
			cancel()
		}
		return nil, outcomes, c.jobGone()
	}
	if err != nil {
		return nil, outcomes, err
	}
	tasks := make([]Task, len(leased))
	for i, t := range leased {
		tasks[i] = Task{Meta: t.Meta, Chunks: t.Chunks, Pass: t.Pass, Lease: time.Duration(t.Lease), Session: t.Session,
			Skip: t.Skip, Seed: t.Seed, Source: t.Source}
	}
	return tasks, outcomes, nil
}

// readJob is what a client learnt of its job from the answers to GetTask:
// whether the job had a dataset, and its number. GetTask names the number
// once it is known, and the cluster then answers ErrUnknownJob when the
// job is gone. Besides, a job's dataset goes only with the job, and a job
// created again under its name has another number, so ErrNoDataset once
// a dataset was seen, or a task of another number (from a cluster that
// does not check it yet), also means that the job the client read was
// deleted. A client that never saw a dataset waits for one, as for a job
// not created yet.
type readJob struct {
	mu      sync.Mutex
	dataset bool   // an answer showed that the job had a dataset
	number  uint64 // the job's number, 0 until a task said it
	gone    bool   // the job read was deleted
}

// answered records what the answer to GetTask (the job's number and the
// error) says, and reports whether the job the client read is gone; false
// for an error that is no answer of the job's, such as a cluster that
// cannot be reached.
func (r *readJob) answered(number uint64, err error) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case errors.Is(err, ErrUnknownJob):
		r.gone = r.gone || r.number != 0 // the job of the number named is gone
	case err == nil:
		r.dataset = true
		if number != 0 && r.number != 0 && number != r.number {
			r.gone = true
		} else if number != 0 {
			r.number = number
		}
	case errors.Is(err, ErrNoDataset):
		r.gone = r.gone || r.dataset
	case errors.Is(err, ErrPassBefore), errors.Is(err, ErrPassAfter), errors.Is(err, ErrNoMoreAvailable),
		errors.Is(err, ErrAllTaskFailed), errors.Is(err, ErrStaleEpoch):
		// Answers of a job with a dataset (a stale epoch replays a task).
		r.dataset = true
	default:
		return false // no answer of the job's
	}
	return r.gone
}

// jobNumber is the number of the job read, for GetTask to name; 0 while
// it is not known.
func (r *readJob) jobNumber() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.number
}

// reported says whether the answer to a task report, err, shows that the
// job the client read is gone: ErrNoDataset once a dataset was seen.
func (r *readJob) reported(err error) bool {
	if !errors.Is(err, ErrNoDataset) {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gone = r.gone || r.dataset
	return r.gone
}

// jobGone is the error of a call to the job the client read once it is
// gone.
func (c *Client) jobGone() error {
	return fmt.Errorf("raftmaster client: job %q, which this client read, was deleted: %w", cmp.Or(c.job, rpc.DefaultJob), ErrUnknownJob)
}

// TaskFinished reports the task done. A late report from an earlier lease
// is accepted, as in the original, unless the dataset is strict.
func (c *Client) TaskFinished(meta TaskMeta) error {
	return c.TaskFinishedContext(context.Background(), meta)
}

// TaskFinishedContext is TaskFinished bounded by ctx.
func (c *Client) TaskFinishedContext(ctx context.Context, meta TaskMeta) error {
	return c.taskReport(ctx, rpc.PathTaskFinished, meta)
}

// TaskFailed reports the task failed under its lease: it is dispatched
// again, or set aside after failureMax failures. A stale epoch is ignored.
func (c *Client) TaskFailed(meta TaskMeta) error {
	return c.TaskFailedContext(context.Background(), meta)
}

// TaskFailedContext is TaskFailed bounded by ctx.
func (c *Client) TaskFailedContext(ctx context.Context, meta TaskMeta) error {
	return c.taskReport(ctx, rpc.PathTaskFailed, meta)
}

// RenewLease extends the lease of a task still being worked on by the
// dataset's task timeout. It fails with ErrStaleEpoch when the lease is no
// longer this one.
func (c *Client) RenewLease(meta TaskMeta) error {
	return c.RenewLeaseContext(context.Background(), meta)
}

// RenewLeaseContext is RenewLease bounded by ctx.
func (c *Client) RenewLeaseContext(ctx context.Context, meta TaskMeta) error {
	return c.taskReport(ctx, rpc.PathTaskRenew, meta)
}

// RenewOutcome is how one renewal of RenewLeases went: Err is nil when
// the lease was renewed, for Lease from the answer, else what RenewLease
// of it alone would have returned (errors.Is matches ErrStaleEpoch or
// ErrUnknownTask), which changed nothing.
type RenewOutcome struct {
	Lease time.Duration
	Err   error
}

// RenewLeases renews the leases of metas (1 to MaxTasksPerGet, no task
// twice) in one write, as RenewLease of each would, for a caller that
// holds a batch of tasks without a session (tasks held by a session need
// no renewal). It returns one RenewOutcome per lease, in order: a lease
// that could not be renewed does not fail the others. Several leases
// need protocol level 10: below, it fails at once with an error that
// errors.Is matches with ErrUpgradePending, nothing renewed. A retry
// says what remains of each lease still held.
func (c *Client) RenewLeases(ctx context.Context, metas []TaskMeta) ([]RenewOutcome, error) {
	if len(metas) < 1 || len(metas) > MaxTasksPerGet {
		return nil, fmt.Errorf("raftmaster client: RenewLeases of %d leases: 1 to %d", len(metas), MaxTasksPerGet)
	}
	if len(metas) == 1 {
		lease, err := c.taskReportLease(ctx, rpc.PathTaskRenew, metas[0])
		if err != nil && !errors.Is(err, ErrStaleEpoch) && !errors.Is(err, ErrUnknownTask) {
			return nil, err
		}
		return []RenewOutcome{{Lease: lease, Err: err}}, nil
	}
	var resp rpc.TaskResponse
	err := c.do(ctx, &call{method: http.MethodPost, path: rpc.PathTaskRenew, body: rpc.TaskRequest{Meta: metas[0], More: metas[1:]},
		write: true, out: &resp, underSession: true, final: upgradePending})
	switch {
	case c.read.reported(err):
		return nil, c.jobGone()
	case err != nil && upgradePending(err):
		return nil, fmt.Errorf("raftmaster client: RenewLeases of %d leases: %w: %w", len(metas), ErrUpgradePending, err)
	case err != nil:
		return nil, err
	case len(resp.Renewed) != len(metas):
		return nil, fmt.Errorf("raftmaster client: RenewLeases of %d leases answered %d outcomes", len(metas), len(resp.Renewed))
	}
	out := make([]RenewOutcome, len(metas))
	for i, o := range resp.Renewed {
		out[i].Lease = time.Duration(o.Lease)
		if o.Code != "" {
			out[i].Err = rpc.ErrorFromCode(o.Code, "the lease was not renewed", rpc.HTTPStatus(o.Code))
		}
	}
	return out, nil
}

func (c *Client) taskReport(ctx context.Context, path string, meta TaskMeta) error {
	_, err := c.taskReportLease(ctx, path, meta)
	return err
}

// taskReportLease is taskReport that also returns how long a renewed lease
// lasts from the answer, what remains of it when the renewal was retried
// after the cluster had applied it (zero when the cluster did not say).
func (c *Client) taskReportLease(ctx context.Context, path string, meta TaskMeta) (time.Duration, error) {
	var resp rpc.TaskResponse
	err := c.do(ctx, &call{method: http.MethodPost, path: path, body: rpc.TaskRequest{Meta: meta}, write: true, out: &resp, underSession: true})
	if c.read.reported(err) {
		return 0, c.jobGone()
	}
	if err == nil && resp.Ignored {
		c.logger.Debug("task report ignored", "path", path, "task", meta.ID, "epoch", meta.Epoch)
	}
	return time.Duration(resp.Lease), err
}

// RequestSaveModel asks whether trainerID may save the model now. It is
// granted to one trainer at a time, for blockDur; the holder may ask again
// to extend it. RequestSaveModelLease also says how long the grant lasts.
func (c *Client) RequestSaveModel(trainerID string, blockDur time.Duration) (bool, error) {
	return c.RequestSaveModelContext(context.Background(), trainerID, blockDur)
}

// RequestSaveModelContext is RequestSaveModel bounded by ctx.
func (c *Client) RequestSaveModelContext(ctx context.Context, trainerID string, blockDur time.Duration) (bool, error) {
	g, err := c.RequestSaveModelLeaseContext(ctx, trainerID, blockDur)
	return g.Granted, err
}

// SaveModelGrant is the answer to RequestSaveModelLease.
type SaveModelGrant struct {
	// Granted reports whether the caller holds the save-model lease.
	Granted bool
	// Lease is how long the caller holds it from the answer: blockDur,
	// or less when the call was retried after the cluster had applied it
	// (its answer lost), since the lease started then. Zero when not
	// granted, or when the server did not say (a release before it): then
	// count on no more than blockDur from the call.
	Lease time.Duration
}

// RequestSaveModelLease is RequestSaveModel that also says how long the
// lease lasts from the answer: save within it, or ask again to extend it.
func (c *Client) RequestSaveModelLease(trainerID string, blockDur time.Duration) (SaveModelGrant, error) {
	return c.RequestSaveModelLeaseContext(context.Background(), trainerID, blockDur)
}

// RequestSaveModelLeaseContext is RequestSaveModelLease bounded by ctx.
func (c *Client) RequestSaveModelLeaseContext(ctx context.Context, trainerID string, blockDur time.Duration) (SaveModelGrant, error) {
	var resp rpc.SaveModelResponse
	err := c.do(ctx, &call{method: http.MethodPost, path: rpc.PathSaveModel, underSession: true, grants: true,
		body: rpc.SaveModelRequest{TrainerID: trainerID, BlockDur: rpc.Duration(blockDur)}, write: true, out: &resp})
	return SaveModelGrant{Granted: resp.Granted, Lease: time.Duration(resp.Lease)}, err
}
