package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/backup"
	"github.com/raftmaster/raftmaster/internal/bench/harness"
	"github.com/raftmaster/raftmaster/internal/bench/measure"
	"github.com/raftmaster/raftmaster/internal/procs"
	"github.com/raftmaster/raftmaster/internal/version"
	"github.com/raftmaster/raftmaster/recordio"
	"github.com/raftmaster/raftmaster/rpc"
)

// cursorRecords is the number of records of every chunk, and so of every
// task, of the cursors part's dataset: a task in flight can then be partly
// consumed.
const cursorRecords = 4

// CursorsResults is what a cursor costs on a job of many tasks: the
// latency of a commit and of a restore on the cluster, and what a cursor
// adds to the state.
//
// The job's state, half of its pass finished, is built offline: the
// bench indexes the dataset file, applies SetDataset and one GetTask and
// one TaskFinished per finished task to the FSM in its own process, and
// writes the state as a backup file, which `raftmaster restore` turns
// into the first node of a new cluster; two more nodes join it. Everything
// after that is measured on the cluster through its HTTP API.
type CursorsResults struct {
	Tasks int `json:"tasks"`
	// RecordsPerTask is the records of every task (one chunk each).
	RecordsPerTask int `json:"records_per_task"`
	// Finished tasks of the pass, built offline.
	Finished int `json:"finished"`
	// InFlight tasks were leased on the cluster and reported partly
	// consumed before the commits.
	InFlight int `json:"in_flight"`
	// BuildSeconds is the offline build: writing and indexing the dataset
	// file, applying the commands in process and writing the backup of
	// BackupBytes.
	BuildSeconds float64 `json:"build_seconds"`
	BackupBytes  int64   `json:"backup_bytes"`
	// StartSeconds is restore, the first node's start and the two others'
	// join, until all three applied the state.
	StartSeconds float64 `json:"start_seconds"`
	// Progress are reports of the progress of the tasks in flight
	// (task/progress), as many as the commits of a series: a write of the
	// same path through HTTP and Raft whose apply does not grow with the
	// job, the floor under a commit's latency on this machine now.
	Progress CommitSeries `json:"progress"`
	// Reported are commits after the holders reported their progress (the
	// multi-rank protocol: the commit carries none); WithProgress commits
	// carry the progress of every task in flight (one trainer).
	Reported     CommitSeries `json:"reported"`
	WithProgress CommitSeries `json:"with_progress"`
	// BytesIdle is CursorInfo.Bytes of a cursor committed with no task in
	// flight; Bytes of one with InFlight tasks partly consumed.
	BytesIdle int64 `json:"bytes_idle"`
	Bytes     int64 `json:"bytes"`
	// StateBefore is the size of the state (a backup's) before any
	// cursor, with the tasks in flight; StateAfter with the Kept cursors
	// the job keeps after the commits.
	StateBefore int64 `json:"state_before"`
	StateAfter  int64 `json:"state_after"`
	Kept        int   `json:"kept"`
	// Restore is the latency of restores of the newest cursor; the first
	// revoked RestoreRevoked leases.
	Restore        measure.Distribution `json:"restore_ms"`
	RestoreRevoked int                  `json:"restore_revoked"`
}

// CommitSeries is the latency of one series of writes, one after the
// other, each POSTed to the leader with its own request id.
type CommitSeries struct {
	Latency measure.Distribution `json:"latency_ms"`
	Seconds float64              `json:"seconds"`
	// LeaderCPUMs and FollowerCPUMs are the CPU time (user and system,
	// from /proc/PID/stat) the leader's serve process and the followers'
	// on average spent during the series, per write.
	LeaderCPUMs   float64 `json:"leader_cpu_ms"`
	FollowerCPUMs float64 `json:"follower_cpu_ms"`
}

func (s *suite) cursors(ctx context.Context, res *Results) error {
	cfg := s.cfg
	n := cfg.CursorTasks
	out := &CursorsResults{Tasks: n, RecordsPerTask: cursorRecords, InFlight: cfg.CursorInFlight}
	res.Cursors = out
	dir := s.dir("cursors")
	defer os.RemoveAll(dir)

	start := time.Now()
	file := filepath.Join(dir, "state.backup")
	finished, err := s.cursorState(ctx, dir, file, n)
	if err != nil {
		return fmt.Errorf("building the state offline: %w", err)
	}
	out.Finished = finished
	out.BuildSeconds = time.Since(start).Seconds()
	if fi, err := os.Stat(file); err == nil {
		out.BackupBytes = fi.Size()
	}
	s.logf("cursors: built a state of %d tasks, %d finished, offline in %s (backup %.1f MB)", n, finished,
		time.Since(start).Round(time.Millisecond), float64(out.BackupBytes)/1e6)

	start = time.Now()
	c, err := harness.StartRaftFromBackup(ctx, s.bin, s.dir("cursors", "cluster"), file, 3)
	if err != nil {
		return err
	}
	defer c.Stop()
	for _, a := range c.APIs() {
		if err := procs.WaitProtocol(ctx, a, nil); err != nil {
			return err
		}
	}
	out.StartSeconds = time.Since(start).Seconds()
	s.logf("cursors: restored it into a node and joined two more in %s", time.Since(start).Round(time.Millisecond))

	leader, _, err := c.Leader(ctx)
	if err != nil {
		return err
	}
	cw := &cursorWriter{hc: &http.Client{Timeout: 5 * time.Minute}, addr: leader.APIAddr, client: uuid.New(), job: fsm.DefaultJob}
	cl, err := c.NewClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	stateSize := func() (int64, error) {
		info, err := cl.BackupTo(ctx, io.Discard)
		return info.Size, err
	}

	if out.StateBefore, err = stateSize(); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	idle, err := cw.commit(ctx, 0, nil)
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	out.BytesIdle = idle.Bytes

	// Trainers hold InFlight tasks and report them partly consumed.
	var progress []rpc.TaskProgress
	for range cfg.CursorInFlight {
		t, err := cl.GetTask(0)
		if err != nil {
			return fmt.Errorf("leasing the tasks in flight: %w", err)
		}
		progress = append(progress, rpc.TaskProgress{Meta: t.Meta, Consumed: cursorRecords / 2})
	}
	var rep rpc.ReportProgressResponse
	if err := cw.post(ctx, rpc.JobPath(cw.job, rpc.PathTaskProgress), rpc.ReportProgressRequest{Progress: progress}, &rep); err != nil {
		return fmt.Errorf("reporting progress: %w", err)
	}
	if rep.Recorded != len(progress) {
		return fmt.Errorf("progress of %d tasks recorded, %d reported", rep.Recorded, len(progress))
	}

	timed := func(name string, write func(i int) error) (CommitSeries, error) {
		var ms []float64
		began := time.Now()
		cpu0 := nodeCPU(c.Procs)
		for i := range cfg.CursorCommits {
			if err := ctx.Err(); err != nil {
				return CommitSeries{}, err
			}
			t := time.Now()
			if err := write(i); err != nil {
				return CommitSeries{}, fmt.Errorf("%s %d: %w", name, i+1, err)
			}
			ms = append(ms, measure.Millis(time.Since(t)))
		}
		cs := CommitSeries{Latency: measure.Distribute(ms), Seconds: time.Since(began).Seconds()}
		cpu1 := nodeCPU(c.Procs)
		followers := 0
		for k, p := range c.Procs {
			d := float64(cpu1[k]-cpu0[k]) / float64(len(ms))
			if p == leader {
				cs.LeaderCPUMs = d
			} else {
				cs.FollowerCPUMs += d
				followers++
			}
		}
		cs.FollowerCPUMs /= float64(max(followers, 1))
		s.logf("cursors: %d %s: p50 %.1f ms, p99 %.1f ms, max %.1f ms; CPU a write: leader %.1f ms, a follower %.1f ms",
			len(ms), name, cs.Latency.P50, cs.Latency.P99, cs.Latency.Max, cs.LeaderCPUMs, cs.FollowerCPUMs)
		return cs, nil
	}
	commit := func(ps []rpc.TaskProgress) func(int) error {
		return func(i int) error {
			info, err := cw.commit(ctx, int64(i+1), ps)
			if err != nil {
				return err
			}
			if info.InFlight != cfg.CursorInFlight || info.Finished != finished {
				return fmt.Errorf("cursor %d has %d tasks finished and %d in flight, want %d and %d",
					info.ID, info.Finished, info.InFlight, finished, cfg.CursorInFlight)
			}
			out.Bytes = info.Bytes
			return nil
		}
	}
	if out.Progress, err = timed("progress reports", func(int) error {
		var rep rpc.ReportProgressResponse
		return cw.post(ctx, rpc.JobPath(cw.job, rpc.PathTaskProgress), rpc.ReportProgressRequest{Progress: progress}, &rep)
	}); err != nil {
		return err
	}
	if out.Reported, err = timed("commits after a progress report", commit(nil)); err != nil {
		return err
	}
	if out.WithProgress, err = timed(fmt.Sprintf("commits carrying %d progress entries", len(progress)), commit(progress)); err != nil {
		return err
	}
	s.logf("cursors: a cursor takes %d bytes with no task in flight, %d with %d", out.BytesIdle, out.Bytes, cfg.CursorInFlight)

	var list rpc.ListCursorsResponse
	body, err := harness.GetBody(ctx, cw.hc, "http://"+cw.addr+rpc.JobPath(cw.job, rpc.PathCursors))
	if err == nil {
		err = json.Unmarshal(body, &list)
	}
	if err != nil {
		return fmt.Errorf("listing the cursors: %w", err)
	}
	out.Kept = len(list.Cursors)
	if out.StateAfter, err = stateSize(); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	s.logf("cursors: state %.2f MB before any cursor, %.2f MB with the %d cursors kept (%.0f bytes each)",
		float64(out.StateBefore)/1e6, float64(out.StateAfter)/1e6, out.Kept, float64(out.StateAfter-out.StateBefore)/float64(max(out.Kept, 1)))

	newest := list.Cursors[len(list.Cursors)-1].ID
	var ms []float64
	for run := range cfg.Runs {
		var r rpc.RestoreCursorResponse
		path := rpc.JobPath(cw.job, strings.Replace(rpc.PathCursorRestore, "{"+rpc.CursorParam+"}", fmt.Sprint(newest), 1))
		t := time.Now()
		if err := cw.post(ctx, path, rpc.RestoreCursorRequest{}, &r); err != nil {
			return fmt.Errorf("restore: %w", err)
		}
		ms = append(ms, measure.Millis(time.Since(t)))
		if run == 0 {
			out.RestoreRevoked = r.Revoked
		}
	}
	out.Restore = measure.Distribute(ms)
	s.logf("cursors: %d restores of cursor %d: median %.1f ms, max %.1f ms; the first revoked %d leases",
		len(ms), newest, out.Restore.P50, out.Restore.Max, out.RestoreRevoked)
	return nil
}

// cursorState writes, in dir, a dataset file of n chunks of cursorRecords
// records, and to file the backup of a state in which its job has the
// first half of its pass finished: the state a cluster that was given the
// file (one chunk per task, a lease of an hour) and then n/2 GetTask and
// TaskFinished would have. It returns the number of finished tasks.
func (s *suite) cursorState(ctx context.Context, dir, file string, n int) (int, error) {
	data := filepath.Join(dir, fmt.Sprintf("tasks-%d-x%d.recordio", n, cursorRecords))
	if err := writeCursorDataset(data, n); err != nil {
		return 0, err
	}
	found, _, err := recordio.IndexFiles(ctx, []string{data}, recordio.IndexLimits{MaxChunks: fsm.MaxChunks})
	if err != nil {
		return 0, err
	}
	chunks := make([]fsm.Chunk, len(found))
	for i, c := range found {
		if c.Records != cursorRecords {
			return 0, fmt.Errorf("chunk %d has %d records, want %d", i, c.Records, cursorRecords)
		}
		chunks[i] = fsm.Chunk{Path: c.Path, Offset: c.Offset, Records: c.Records}
	}

	f := fsm.New()
	var index uint64
	now := time.Now().UnixNano()
	apply := func(c fsm.Command) (*fsm.Result, error) {
		index++
		now += int64(time.Microsecond)
		c.Hdr().Now = now
		r := f.ApplyEntry(index, fsm.Encode(c))
		if err := r.Err(); err != nil {
			return r, fmt.Errorf("%v: %w", c.Type(), err)
		}
		return r, nil
	}
	if _, err := apply(&fsm.SetProtocol{Level: fsm.Protocol}); err != nil {
		return 0, err
	}
	params := fsm.DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Hour, FailureMax: 3}
	if _, err := apply(&fsm.SetDataset{Params: params, Chunks: chunks}); err != nil {
		return 0, err
	}
	chunks, found = nil, nil
	finished := 0
	for range n / 2 {
		r, err := apply(&fsm.GetTask{})
		if err != nil {
			return 0, err
		}
		if _, err := apply(&fsm.TaskFinished{Meta: r.Task.Meta}); err != nil {
			return 0, err
		}
		finished++
	}

	sn, err := f.Snapshot()
	if err != nil {
		return 0, err
	}
	out, err := os.Create(file)
	if err != nil {
		return 0, err
	}
	defer out.Close()
	bw, err := backup.NewWriter(out)
	if err != nil {
		return 0, err
	}
	if _, err := sn.WriteTo(bw); err != nil {
		return 0, err
	}
	if _, err := bw.Finish(version.String(), sn.Index()); err != nil {
		return 0, err
	}
	return finished, out.Close()
}

// writeCursorDataset writes n chunks of cursorRecords records each to
// path.
func writeCursorDataset(path string, n int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	const recordLen = 12
	// A chunk closes when the next record would take it past
	// cursorRecords records' bytes.
	w := recordio.NewWriter(f, cursorRecords*recordLen, recordio.NoCompression)
	for i := range n * cursorRecords {
		if _, err := fmt.Fprintf(w, "r-%0*d", recordLen-2, i); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	return f.Close()
}

// nodeCPU returns the CPU time, user and system, that each running serve
// process has used, in milliseconds; 0 for one that cannot be read.
func nodeCPU(ps []*procs.Proc) []int64 {
	out := make([]int64, len(ps))
	for k, p := range ps {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Pid()))
		if err != nil {
			continue
		}
		// The fields after the command name, which is in parentheses:
		// state is the first, utime the 12th and stime the 13th, in
		// clock ticks of 10 ms (USER_HZ is 100 on Linux).
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) < 13 {
			continue
		}
		utime, err1 := strconv.ParseInt(f[11], 10, 64)
		stime, err2 := strconv.ParseInt(f[12], 10, 64)
		if err1 == nil && err2 == nil {
			out[k] = (utime + stime) * 10
		}
	}
	return out
}

// cursorWriter makes the cursor calls of one client over raw HTTP to one
// node, each write with the client's next request id.
type cursorWriter struct {
	hc     *http.Client
	addr   string
	client uuid.UUID
	seq    uint64
	job    string
}

func (w *cursorWriter) post(ctx context.Context, path string, in, out any) error {
	w.seq++
	return postJSON(ctx, w.hc, w.addr, path, fmt.Sprintf("%s/%d", w.client, w.seq), in, out)
}

// commit commits a cursor labelled step, with progress.
func (w *cursorWriter) commit(ctx context.Context, step int64, progress []rpc.TaskProgress) (rpc.CursorInfo, error) {
	var r rpc.CommitCursorResponse
	err := w.post(ctx, rpc.JobPath(w.job, rpc.PathCursors), rpc.CommitCursorRequest{Step: step, Progress: progress}, &r)
	return r.Cursor, err
}
