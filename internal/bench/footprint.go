package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/bench/harness"
	"github.com/raftmaster/raftmaster/internal/bench/measure"
	"github.com/raftmaster/raftmaster/internal/bench/rawraft"
	"github.com/raftmaster/raftmaster/internal/procs"
	"github.com/raftmaster/raftmaster/raftnode"
)

// FootprintResults is the cost of a large dataset on the Raft backend.
type FootprintResults struct {
	Tasks int `json:"tasks"`
	// MemoryLimit is the nodes' --memory-limit, "" for serve's default.
	MemoryLimit string `json:"memory_limit,omitempty"`
	// Leased is how many tasks were leased when the sizes were taken:
	// half of the pass, up to LeaseBatch a write, each write finishing
	// the tasks of the trainer's write before; Finished is how many of
	// them were. (A run before batches leased one a write, finished none
	// and left both zero.)
	Leased            int             `json:"leased"`
	LeaseBatch        int             `json:"lease_batch,omitempty"`
	Finished          int             `json:"finished,omitempty"`
	SetDatasetSeconds float64         `json:"set_dataset_seconds"`
	LeaseSeconds      float64         `json:"lease_seconds"`
	Nodes             []NodeFootprint `json:"nodes"`
	// CatchUp is a killed follower's restart → its applied index reaches
	// the leader's.
	CatchUp     measure.Summary `json:"catch_up_ms"`
	CatchUpRuns []CatchUp       `json:"catch_up_runs,omitempty"`
	Error       string          `json:"error,omitempty"`
}

// NodeFootprint is one serve process.
type NodeFootprint struct {
	ID   string `json:"id"`
	Role string `json:"role"`
	// RSS before any dataset, with the dataset set, and with half of it
	// leased; PeakRSS is the process's high-water mark (VmHWM).
	IdleRSSMB    float64 `json:"idle_rss_mb"`
	DatasetRSSMB float64 `json:"dataset_rss_mb"`
	LeasedRSSMB  float64 `json:"leased_rss_mb"`
	PeakRSSMB    float64 `json:"peak_rss_mb"`
	// SnapshotBytes is the newest snapshot on disk, taken at
	// SnapshotIndex; AppliedIndex is the node's when the sizes were taken.
	SnapshotBytes int64  `json:"snapshot_bytes"`
	SnapshotIndex uint64 `json:"snapshot_index"`
	AppliedIndex  uint64 `json:"applied_index"`
	RaftDBBytes   int64  `json:"raft_db_bytes"`
}

// CatchUp is one restart of a killed follower.
type CatchUp struct {
	Node string  `json:"node"`
	Ms   float64 `json:"ms"`
	// Index is the leader's applied index the follower had to reach.
	Index uint64 `json:"index"`
}

// FootprintSpec is one dataset of the footprint part: its size, and the
// nodes' --memory-limit ("" for serve's default).
type FootprintSpec struct {
	Tasks       int    `json:"tasks"`
	MemoryLimit string `json:"memory_limit,omitempty"`
}

// String is the spec as --footprint-tasks takes it: tasks[@limit].
func (f FootprintSpec) String() string {
	if f.MemoryLimit == "" {
		return strconv.Itoa(f.Tasks)
	}
	return fmt.Sprintf("%d@%s", f.Tasks, f.MemoryLimit)
}

// footprintSizes lists the specs' sizes.
func footprintSizes(specs []FootprintSpec) []int {
	out := make([]int, len(specs))
	for i, f := range specs {
		out[i] = f.Tasks
	}
	return out
}

func (s *suite) footprint(ctx context.Context, res *Results) error {
	for _, spec := range s.cfg.Footprints {
		if err := s.footprintOf(ctx, res, spec); err != nil {
			return fmt.Errorf("%s tasks: %w", spec, err)
		}
	}
	return nil
}

func (s *suite) footprintOf(ctx context.Context, res *Results, spec FootprintSpec) error {
	cfg := s.cfg
	n := spec.Tasks
	out := &FootprintResults{Tasks: n, MemoryLimit: spec.MemoryLimit, Leased: n / 2, LeaseBatch: client.MaxTasksPerGet}
	res.Footprints = append(res.Footprints, out)
	path, err := s.dataset(n)
	if err != nil {
		return err
	}
	var args []string
	if spec.MemoryLimit != "" {
		args = []string{"--memory-limit", spec.MemoryLimit}
	}
	c, err := harness.StartRaft(ctx, s.bin, s.dir("footprint", strconv.Itoa(n)), 3, args...)
	if err != nil {
		return err
	}
	defer c.Stop()
	// The trainers lease in batches, which need the newest level.
	if err := waitProtocol(ctx, c, fsm.Protocol, "batches"); err != nil {
		return err
	}
	out.Nodes = make([]NodeFootprint, len(c.Procs))
	rss := func(set func(*NodeFootprint, float64)) {
		for i, p := range c.Procs {
			out.Nodes[i].ID = p.ID
			if st, err := procStatus(p); err == nil {
				set(&out.Nodes[i], st["VmRSS"])
				out.Nodes[i].PeakRSSMB = st["VmHWM"]
			}
		}
	}
	rss(func(nf *NodeFootprint, v float64) { nf.IdleRSSMB = v })

	d, err := c.SetDataset(path, 24*time.Hour, 30*time.Minute)
	out.SetDatasetSeconds = d.Seconds()
	if err != nil {
		return fmt.Errorf("set dataset of %d tasks: %w", n, err)
	}
	s.logf("footprint %d: set the dataset in %s", n, d.Round(time.Millisecond))
	time.Sleep(time.Second)
	rss(func(nf *NodeFootprint, v float64) { nf.DatasetRSSMB = v })

	start := time.Now()
	if out.Finished, err = s.leaseHalf(ctx, c, out.Leased); err != nil {
		return fmt.Errorf("leasing: %w", err)
	}
	out.LeaseSeconds = time.Since(start).Seconds()
	s.logf("footprint: leased %d tasks and finished %d in %s (%.0f/s)", out.Leased, out.Finished, time.Since(start).Round(time.Second), float64(out.Leased)/out.LeaseSeconds)
	time.Sleep(2 * time.Second)
	rss(func(nf *NodeFootprint, v float64) { nf.LeasedRSSMB = v })
	s.waitSnapshots(ctx, c)
	rss(func(*NodeFootprint, float64) {}) // the peaks, after the snapshots
	for i, p := range c.Procs {
		nf := &out.Nodes[i]
		if st, err := c.Status(ctx, p.APIAddr, 5*time.Second); err == nil {
			nf.Role = strings.ToLower(st.State)
			nf.AppliedIndex = st.AppliedIndex
		}
		nf.SnapshotBytes, nf.SnapshotIndex = newestSnapshot(p.DataDir)
		if fi, err := os.Stat(filepath.Join(p.DataDir, "raft.db")); err == nil {
			nf.RaftDBBytes = fi.Size()
		}
		snap := fmt.Sprintf("snapshot %.1f MB at index %d of %d", float64(nf.SnapshotBytes)/1e6, nf.SnapshotIndex, nf.AppliedIndex)
		if nf.SnapshotIndex == 0 {
			snap = fmt.Sprintf("no snapshot yet at index %d", nf.AppliedIndex)
		}
		s.logf("footprint: %s (%s) RSS %.0f MB idle, %.0f MB with the dataset, %.0f MB half leased (peak %.0f MB); %s; raft.db %.1f MB",
			nf.ID, nf.Role, nf.IdleRSSMB, nf.DatasetRSSMB, nf.LeasedRSSMB, nf.PeakRSSMB, snap, float64(nf.RaftDBBytes)/1e6)
	}

	var ms []float64
	for run := range cfg.Runs {
		if err := ctx.Err(); err != nil {
			return err
		}
		cu, err := s.catchUp(ctx, c, run)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			out.Error = firstLine(err.Error())
			s.logf("footprint: catch-up: %v\n%s", err, c.LogTail())
			break
		}
		out.CatchUpRuns = append(out.CatchUpRuns, cu)
		ms = append(ms, cu.Ms)
		s.logf("footprint: follower %s restarted and reached index %d in %.0f ms (run %d/%d)", cu.Node, cu.Index, cu.Ms, run+1, cfg.Runs)
	}
	out.CatchUp = measure.Of(ms)
	return nil
}

// waitSnapshots waits until every node has written a snapshot: a node
// takes its first once the log holds 8,192 entries (checking every 30 to
// 60 s) or 64 MiB, and a later one only once the log since the last holds
// as many bytes as that snapshot, so the newest snapshot of a large
// state may be the one taken while its dataset was set. A log that holds
// neither (a small dataset) calls for no snapshot, and is not waited on.
func (s *suite) waitSnapshots(ctx context.Context, c *harness.Cluster) {
	missing := func() int {
		n := 0
		for _, p := range c.Procs {
			if _, idx := newestSnapshot(p.DataDir); idx == 0 {
				n++
			}
		}
		return n
	}
	if missing() == 0 {
		return
	}
	if _, st, err := c.Leader(ctx); err == nil && st.AppliedIndex < rawraft.SnapshotThreshold && !logOver(c, raftnode.DefaultSnapshotBytes) {
		s.logf("footprint: no snapshot is due: the log holds %d entries, fewer than %d, and less than %d MiB", st.AppliedIndex, rawraft.SnapshotThreshold, raftnode.DefaultSnapshotBytes>>20)
		return
	}
	s.logf("footprint: waiting for every node's first snapshot (raft checks every 30 to 60 s)")
	deadline := time.Now().Add(2*rawraft.SnapshotInterval + 15*time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil && missing() > 0 {
		time.Sleep(500 * time.Millisecond)
	}
}

// logOver reports whether a node's log store file has grown past n bytes.
func logOver(c *harness.Cluster, n int64) bool {
	for _, p := range c.Procs {
		if fi, err := os.Stat(filepath.Join(p.DataDir, "raft.db")); err == nil && fi.Size() > n {
			return true
		}
	}
	return false
}

// leaseHalf leases target tasks of pass 0 with 64 trainers under their
// sessions, each write (GetTasks) leasing up to client.MaxTasksPerGet of
// them and finishing the trainer's tasks of its write before, as a
// prefetching reader does; so the pass ends half-way, with target tasks
// leased and all but the last write's of each trainer finished. It
// returns how many were finished, and prints the progress every 5 s.
func (s *suite) leaseHalf(ctx context.Context, c *harness.Cluster, target int) (int, error) {
	var leased, finished, issued atomic.Int64
	const trainers = 64
	errs := make([]error, trainers)
	var wg sync.WaitGroup
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				s.logf("footprint: %d/%d tasks leased, %d finished", leased.Load(), target, finished.Load())
			}
		}
	}()
	defer close(done)
	for i := range trainers {
		cl, err := c.NewClient()
		if err != nil {
			return 0, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			var held []client.TaskMeta
			for ctx.Err() == nil {
				const batch = client.MaxTasksPerGet
				first := issued.Add(batch) - batch // this write's share: target's tasks first to first+batch
				n := min(batch, int64(target)-first)
				if n <= 0 {
					return
				}
				tasks, outcomes, err := cl.GetTasks(ctx, 0, int(n), held)
				for k, o := range outcomes {
					if !o.Answered || o.Ignored || o.Err != nil {
						errs[i] = fmt.Errorf("finishing task %d: answered %v, ignored %v: %v", held[k].ID, o.Answered, o.Ignored, o.Err)
						return
					}
					finished.Add(1)
				}
				leased.Add(int64(len(tasks)))
				held = held[:0]
				for _, t := range tasks {
					held = append(held, t.Meta)
				}
				if err != nil {
					if !errors.Is(err, client.ErrNoMoreAvailable) {
						errs[i] = err
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	for _, err := range errs {
		if err != nil {
			return int(finished.Load()), err // the trainers fail alike: one says it
		}
	}
	return int(finished.Load()), nil
}

// catchUp kills a follower, restarts it on its data and times its restart
// until its applied index reaches the leader's.
func (s *suite) catchUp(ctx context.Context, c *harness.Cluster, run int) (CatchUp, error) {
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := c.WaitWhole(wctx); err != nil {
		return CatchUp{}, err
	}
	leader, _, err := c.Leader(wctx)
	if err != nil {
		return CatchUp{}, err
	}
	var followers []*procs.Proc
	for _, p := range c.Procs {
		if p != leader {
			followers = append(followers, p)
		}
	}
	f := followers[run%len(followers)]
	if _, _, err := c.Kill(f); err != nil {
		return CatchUp{}, err
	}
	st, err := c.Status(wctx, leader.APIAddr, 5*time.Second)
	if err != nil {
		return CatchUp{}, err
	}
	start := time.Now()
	if err := c.Restart(f); err != nil {
		return CatchUp{}, err
	}
	for {
		fs, err := c.Status(wctx, f.APIAddr, time.Second)
		if err == nil && fs.AppliedIndex >= st.AppliedIndex {
			return CatchUp{Node: f.ID, Ms: measure.Millis(time.Since(start)), Index: st.AppliedIndex}, nil
		}
		select {
		case <-wctx.Done():
			return CatchUp{}, fmt.Errorf("%s did not catch up: %w", f.ID, context.Cause(wctx))
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// procStatus reads the memory fields of the serve process of p from
// /proc/PID/status, in megabytes.
func procStatus(p *procs.Proc) (map[string]float64, error) {
	pid, err := findPID(p)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || !strings.HasPrefix(k, "Vm") {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) == 2 && fields[1] == "kB" {
			if kb, err := strconv.ParseFloat(fields[0], 64); err == nil {
				out[k] = kb / 1024
			}
		}
	}
	return out, sc.Err()
}

// findPID finds the child of this process whose command line is p's:
// procs.Proc does not expose its pid, but its data dir (or API address) is
// unique to it.
func findPID(p *procs.Proc) (int, error) {
	key := p.DataDir
	if key == "" {
		key = p.APIAddr
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	me := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !containsArg(cmdline, key) {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// The fields after the command name, which is in parentheses.
		rest := stat[bytes.LastIndexByte(stat, ')')+1:]
		fields := strings.Fields(string(rest))
		if len(fields) > 1 && fields[1] == strconv.Itoa(me) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no process of %s found", p.ID)
}

func containsArg(cmdline []byte, arg string) bool {
	for _, a := range bytes.Split(cmdline, []byte{0}) {
		if string(a) == arg {
			return true
		}
	}
	return false
}

// newestSnapshot returns the size and index of the newest snapshot in a
// node's data dir (raft's file snapshot store: snapshots/ID/meta.json).
func newestSnapshot(dataDir string) (int64, uint64) {
	dirs, _ := filepath.Glob(filepath.Join(dataDir, "snapshots", "*", "meta.json"))
	var size int64
	var index uint64
	for _, m := range dirs {
		if strings.HasSuffix(filepath.Dir(m), ".tmp") {
			continue // a snapshot being written
		}
		b, err := os.ReadFile(m)
		if err != nil {
			continue
		}
		var meta struct {
			Index uint64
			Size  int64
		}
		if json.Unmarshal(b, &meta) == nil && meta.Index >= index {
			index, size = meta.Index, meta.Size
		}
	}
	return size, index
}
