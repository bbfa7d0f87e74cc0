package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/chaos/check"
	"github.com/raftmaster/raftmaster/internal/chaos/history"
	"github.com/raftmaster/raftmaster/internal/chaos/netfault"
	"github.com/raftmaster/raftmaster/internal/chaos/timeline"
	"github.com/raftmaster/raftmaster/internal/proccluster"
	"github.com/raftmaster/raftmaster/raftnode"
	"github.com/raftmaster/raftmaster/recordio"
	"github.com/raftmaster/raftmaster/rpc"
)

// Config describes one run.
type Config struct {
	// Seed drives the schedule and the workload.
	Seed uint64
	// Duration is how long faults are injected.
	Duration time.Duration
	// Nodes is 3 or 5.
	Nodes int
	// Faults restricts the kinds drawn; empty means AllFaults.
	Faults []FaultKind
	// CoverAll injects every kind once, in a seeded order, before drawing
	// at random.
	CoverAll bool
	// Once lists kinds injected exactly once each, besides those drawn from
	// Faults: as the first fault to start after a seeded moment between a
	// quarter and half of Duration, so that leaders were elected before it
	// and there is time for more after it. A kind that must not come twice
	// goes here: against the chaos_broken_votes build, a second CrashAll
	// finds no node able to start (once terms were reused, Raft's snapshot
	// store, which orders snapshots by term, restores an old one whose log
	// entries were already compacted away), which ends the run before the
	// reused terms show.
	Once []FaultKind
	// OutDir receives the history and the report; empty means a temp dir.
	OutDir string
	// FinishAndGet is the share of each job's trainers that report a
	// finished task on their next GetTask (history.FinishAndGet, protocol
	// level 9) rather than by TaskFinished, spread over the trainers
	// with sessions and the one without (finishAndGetTrainer): 0 means
	// DefaultFinishAndGet, a negative share none, 1 every trainer.
	FinishAndGet float64
}

// DefaultFinishAndGet is the share of trainers that read with
// FinishAndGet when Config.FinishAndGet is 0: two of a job's three, one
// under a session and the one without.
const DefaultFinishAndGet = 0.5

// finishAndGetTrainer reports whether trainer i (from 0) reads with
// FinishAndGet when share of the trainers do: of n trainers, ceil(n*share),
// spread evenly from the first.
func finishAndGetTrainer(i int, share float64) bool {
	if share <= 0 {
		return false
	}
	return math.Ceil(float64(i+1)*share-1e-9) > math.Ceil(float64(i)*share-1e-9)
}

// Timing of the workload's datasets and the cluster.
const (
	numTasks    = 12
	taskTimeout = 2 * time.Second
	grace       = 2 * time.Second
)

// JobB is the second job of a run, beside rpc.DefaultJob.
const JobB = "job-b"

// Jobs are the jobs every run drives at once, each with its own dataset,
// trainers, save-model contenders, allgather gatherers and register
// clients. The default
// job's clients use the plain paths, JobB's the /v1/jobs/job-b/ ones.
var Jobs = []string{rpc.DefaultJob, JobB}

// JobReport is what one job of a run did.
type JobReport struct {
	Name string `json:"name"`
	Ops  int    `json:"ops"`
	// Passes is the pass the job's dataset reached.
	Passes int `json:"passes"`
	// Register counts the job's operations on its compare-and-set register.
	Register RegisterReport `json:"register"`
	// Sessions counts what the job's trainers did with sessions.
	Sessions SessionReport `json:"sessions"`
}

// RegisterReport counts one job's register operations: reads and
// compare-and-sets, the compare-and-sets known to have swapped, and those
// whose outcome is unknown; and the store's other writes (deletes, prefix
// deletes, adds, sets, appends, compare-values), and those of them whose
// outcome is unknown.
type RegisterReport struct {
	Reads         int `json:"reads"`
	CASes         int `json:"cases"`
	Swapped       int `json:"swapped"`
	Unknown       int `json:"unknown"`
	Writes        int `json:"writes"`
	WritesUnknown int `json:"writes_unknown"`
}

// registerReport counts the register operations of ops.
func registerReport(ops []history.Op) RegisterReport {
	var r RegisterReport
	for _, op := range ops {
		switch op.Kind {
		case history.KVDelete, history.KVDeletePrefix, history.KVAdd, history.KVMultiSet, history.KVAppend, history.KVCompareValue:
			r.Writes++
			if op.Unknown() {
				r.WritesUnknown++
			}
			continue
		}
		switch {
		case op.Kind == history.KVGet:
			r.Reads++
		case op.Kind != history.KVCAS:
			continue
		case op.Unknown():
			r.CASes++
			r.Unknown++
		case op.Swapped:
			r.CASes++
			r.Swapped++
		default:
			r.CASes++
		}
	}
	return r
}

// Report is the outcome of a run.
type Report struct {
	Seed        uint64                      `json:"seed"`
	Ops         int                         `json:"ops"`
	Faults      []FaultRecord               `json:"faults"`
	Unavailable map[FaultKind]time.Duration `json:"longest_unavailability"`
	// Passes is the pass the default job reached.
	Passes int `json:"passes"`
	// Jobs is, per job (in the order of Jobs), its operations and pass.
	Jobs        []JobReport   `json:"jobs"`
	Violations  []string      `json:"violations"`
	HistoryPath string        `json:"history"`
	Checked     time.Duration `json:"check_time"`
	// Leaders lists every election won during the run, read from the
	// nodes' logs (see leaderClaims).
	Leaders []check.LeaderClaim `json:"leaders"`
	// Resume is what the resume schedules did (resume.go).
	Resume ResumeReport `json:"resume"`
}

// Run runs one seeded fault-injection run against a fresh cluster and
// checks its history. Violations are returned in the report, not failed on,
// so that callers can also expect them.
func Run(t testing.TB, cfg Config) Report {
	t.Helper()
	if cfg.Nodes == 0 {
		cfg.Nodes = 3
	}
	if len(cfg.Faults) == 0 {
		cfg.Faults = AllFaults
	}
	if cfg.OutDir == "" {
		cfg.OutDir = t.TempDir()
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5eed))
	rep := Report{Seed: cfg.Seed, Unavailable: map[FaultKind]time.Duration{}}

	clockDir := t.TempDir()
	var fnet *netfault.Net
	c := proccluster.Start(t, proccluster.Options{
		Nodes: cfg.Nodes,
		// The shipped Raft timeouts, so that the unavailability measured
		// is what a deployment with default flags sees.
		Args: []string{"--chunks-per-task", "1", "--failover-grace", grace.String(),
			"--snapshot-threshold", "200", "--snapshot-interval", "1s", "--trailing-logs", "100",
			"--heartbeat-timeout", raftnode.DefaultHeartbeatTimeout.String(),
			"--election-timeout", raftnode.DefaultElectionTimeout.String(),
			"--leader-lease-timeout", raftnode.DefaultLeaderLeaseTimeout.String()},
		Prepare: func(procs []*proccluster.Proc) map[string][]string {
			targets := map[string]string{}
			for _, p := range procs {
				targets[p.ID] = p.RaftAddr
			}
			var err error
			if fnet, err = netfault.NewNet(targets); err != nil {
				t.Fatal(err)
			}
			extra := map[string][]string{}
			for _, p := range procs {
				var dial []string
				for id, addr := range fnet.DialMap(p.ID) {
					dial = append(dial, id+"="+addr)
				}
				slices.Sort(dial)
				extra[p.ID] = []string{"--test-raft-dial", strings.Join(dial, ","), "--test-clock-file", clockFile(clockDir, p.ID)}
			}
			return extra
		},
	})
	t.Cleanup(func() { fnet.Close() })
	loss := newAnswerLoss(cfg.Seed)
	volCtx, stopVols := context.WithCancel(context.Background())
	vols := newVolumes(volCtx, c, t.Logf)
	defer vols.wg.Wait()
	defer stopVols()
	inj := &injector{c: c, net: fnet, rng: rng, clock: map[string]string{}, loss: loss, vols: vols, logf: t.Logf, fatalf: t.Fatalf}
	for _, p := range c.Procs {
		inj.clock[p.ID] = clockFile(clockDir, p.ID)
	}
	c.WaitReady()

	// A dataset per job, in files of its own (see writeChunks): numTasks
	// chunks, strict, failures never set a task aside. The job's setup
	// client sets it, which creates JobB.
	setups := map[string]*client.Client{}
	datasets := map[string][]string{}
	fm := fsm.MaxFailureMax
	for _, job := range Jobs {
		glob, files := writeChunks(t, t.TempDir(), job, numTasks)
		datasets[job] = files
		// A bounded retry, so that a cluster broken for good (as the
		// chaos_broken_votes build can leave it) is reported, not waited on.
		setup, err := client.NewClient(client.WithAddrs(c.APIAddrs()...), client.WithJob(job), client.WithRetry(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer setup.Close()
		setups[job] = setup
		if _, err := setup.SetDatasetWithParams([]string{glob}, client.DatasetParams{
			ChunksPerTask: 1, TaskTimeout: taskTimeout, FailureMax: &fm, Strict: true}); err != nil {
			t.Fatal(err)
		}
	}
	setup := setups[rpc.DefaultJob]

	rec := history.NewRecorder()
	w := &workload{addrs: c.APIAddrs(), rec: rec, seed: rng.Uint64(), logf: t.Logf, loss: loss}
	defer w.close()
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	share := cfg.FinishAndGet
	if share == 0 {
		share = DefaultFinishAndGet
	}
	// spawn starts n actors of job running run, the first sessions of
	// them under sessions; combined is the share of them that read with
	// FinishAndGet (trainers only).
	spawn := func(job string, n, sessions int, combined float64, run func(*actor, context.Context)) {
		for i := range n {
			a, err := w.newSessionActor(job, i < sessions)
			if err != nil {
				t.Fatal(err)
			}
			a.finishAndGet = finishAndGetTrainer(i, combined)
			wg.Add(1)
			go func() { defer wg.Done(); run(a, ctx) }()
		}
	}
	// The same workload in every job, at once. Two of the three trainers
	// lease tasks under sessions, the third without; by default the first
	// and the third report their finishes on their next GetTask.
	for _, job := range Jobs {
		spawn(job, 3, 2, share, (*actor).trainer)
		// A fourth trainer, under a session, prefetches: it leases a
		// batch of tasks and reports them with the next (protocol
		// level 10), one log entry per batch.
		spawn(job, 1, 1, 0, func(a *actor, ctx context.Context) { a.batch = 2 + a.rng.IntN(3); a.trainer(ctx) })
		spawn(job, 2, 0, 0, (*actor).saver)
		spawn(job, 3, 0, 0, (*actor).kv)
		wg.Add(1)
		go func() { defer wg.Done(); w.gatherer(ctx, job, 0) }()
	}

	resumes := &resumeRunner{addrs: c.APIAddrs(), dir: t.TempDir(), seed: rng.Uint64(), logf: t.Logf}
	for d := range resumeDrivers {
		wg.Add(1)
		go func() { defer wg.Done(); resumes.run(ctx, d) }()
	}

	// The schedule: a fault, held for a while, healed, a quiet spell.
	deadline := time.Now().Add(cfg.Duration)
	order := slices.Clone(cfg.Faults)
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	// Drawn only when asked for, so that every other seed keeps its
	// schedule.
	type onceFault struct {
		at   time.Time
		kind FaultKind
	}
	var once []onceFault
	for _, k := range cfg.Once {
		at := time.Now().Add(cfg.Duration/4 + time.Duration(rng.Int64N(int64(cfg.Duration/4)+1)))
		once = append(once, onceFault{at, k})
	}
	slices.SortStableFunc(once, func(a, b onceFault) int { return a.at.Compare(b.at) })
	for i := 0; time.Now().Before(deadline) || (cfg.CoverAll && i < len(order)) || len(once) > 0; i++ {
		kind := cfg.Faults[rng.IntN(len(cfg.Faults))]
		if cfg.CoverAll && i < len(order) {
			kind = order[i]
		} else if len(once) > 0 && !time.Now().Before(once[0].at) {
			kind, once = once[0].kind, once[1:]
		}
		hold := time.Duration(500+rng.IntN(2500)) * time.Millisecond
		quiet := time.Duration(500+rng.IntN(1500)) * time.Millisecond
		fr := FaultRecord{Kind: kind, Start: rec.Now()}
		detail, heal, err := inj.inject(kind)
		if err != nil {
			rep.Violations = append(rep.Violations, fmt.Sprintf("%s: %v", kind, err))
			break
		}
		fr.Detail = detail
		t.Logf("fault %d: %s %s for %v", i, kind, detail, hold)
		sleep(context.Background(), hold)
		heal()
		fr.End = rec.Now()
		rep.Faults = append(rep.Faults, fr)
		// Operations must resume with a majority up, in every job.
		if stuck := progressAfter(rec, fr.End, time.Minute, Jobs); len(stuck) > 0 {
			rep.Violations = append(rep.Violations, fmt.Sprintf("no operation of job %s succeeded within a minute after healing %s (%s)",
				strings.Join(stuck, ", "), kind, detail))
			break
		}
		sleep(context.Background(), quiet)
	}
	stop()
	wg.Wait()
	w.wg.Wait()
	rep.Resume = resumes.report
	rep.Violations = append(rep.Violations, resumes.violations...)
	fnet.Heal()
	for _, p := range c.Procs {
		inj.setClock(p.ID, 0)
		if p.Paused() {
			c.Resume(p)
		}
		if !p.Running() {
			c.Restart(p)
		}
	}
	// Not c.WaitReady, which fails the test: a cluster that does not come
	// back is a violation, and the checks below still have something to
	// say (the nodes' logs, in particular, are all on disk).
	if notReady := ready(c, 90*time.Second); notReady != "" {
		rep.Violations = append(rep.Violations, notReady)
	} else if amiss := settled(c, 90*time.Second); amiss != "" {
		// Every wiped node rejoins by itself, and no old incarnation
		// stays in the configuration.
		rep.Violations = append(rep.Violations, amiss)
	}
	hashes := converged(c)
	if hashes != "" {
		rep.Violations = append(rep.Violations, hashes)
	}
	ops := rec.Ops()
	rep.Ops = len(ops)
	byJob := history.ByJob(ops)
	for _, job := range Jobs {
		jr := JobReport{Name: job, Ops: len(byJob[job]), Register: registerReport(byJob[job]), Sessions: sessionReport(byJob[job])}
		if j, err := setup.Job(job); err == nil {
			jr.Passes = j.Pass
		} else {
			t.Logf("job %s: %v", job, err)
		}
		if job == rpc.DefaultJob {
			rep.Passes = jr.Passes
		}
		rep.Jobs = append(rep.Jobs, jr)
	}
	rep.Unavailable = unavailability(ops, rep.Faults)
	start := time.Now()
	// Every checker on each job's history on its own. Grace 0: a lease may
	// outlive its deadline by any leaderless spell plus the fail-over
	// grace, so denials are not bounded in time.
	// A visualization's file is named in the job's violation.
	perJob := func(string) check.Config {
		return check.Config{NumTasks: numTasks, TaskTimeout: taskTimeout, VisualizeDir: cfg.OutDir}
	}
	for _, err := range check.PerJob(ops, perJob) {
		rep.Violations = append(rep.Violations, err.Error())
	}
	// And that the jobs never crossed: tasks of the job's own files,
	// save-model denials explained by the job's own grants, allgather
	// results of the job's own joins.
	if err := check.NoCrossing(ops, datasets); err != nil {
		rep.Violations = append(rep.Violations, err.Error())
	}
	// Election safety. Every node is running again, so each log holds all
	// the elections its node won.
	claims, err := leaderClaims(c, vols)
	rep.Leaders = claims
	rep.Violations = append(rep.Violations, checkLeaders(claims, err)...)
	rep.Checked = time.Since(start)
	rep.HistoryPath = filepath.Join(cfg.OutDir, fmt.Sprintf("history-%d.jsonl", cfg.Seed))
	writeReport(t, rep, ops)
	return rep
}

// ready waits for every node to report ready, and describes the nodes
// that do not if they do not within timeout.
func ready(c *proccluster.Cluster, timeout time.Duration) string {
	deadline := time.Now().Add(timeout)
	for {
		var not []string
		for _, p := range c.Procs {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			st, err := proccluster.Status(ctx, p.APIAddr)
			cancel()
			switch {
			case err != nil:
				not = append(not, fmt.Sprintf("%s: %v", p.ID, err))
			case !st.Ready:
				not = append(not, fmt.Sprintf("%s: %s, not ready", p.ID, st.State))
			}
		}
		if len(not) == 0 {
			return ""
		}
		if !time.Now().Before(deadline) {
			return fmt.Sprintf("not every node was ready %v after the faults were healed: %s", timeout, strings.Join(not, ", "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// converged waits for every replica to report the same applied index and
// state hash, and describes the difference if they do not.
func converged(c *proccluster.Cluster) string {
	deadline := time.Now().Add(90 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		var states []string
		same := true
		var first string
		for _, p := range c.Procs {
			st, err := proccluster.DebugState(context.Background(), p.APIAddr)
			if err != nil {
				same = false
				states = append(states, fmt.Sprintf("%s: %v", p.ID, err))
				continue
			}
			s := strconv.FormatUint(st.AppliedIndex, 10) + "/" + st.Hash
			states = append(states, p.ID+": "+s)
			if first == "" {
				first = s
			} else if s != first {
				same = false
			}
		}
		if same {
			return ""
		}
		last = strings.Join(states, ", ")
		time.Sleep(200 * time.Millisecond)
	}
	return "replicas did not converge: " + last
}

// progressAfter waits until, in each of jobs, some operation that started
// after t succeeded, and returns the jobs in which none did.
func progressAfter(rec *history.Recorder, t int64, timeout time.Duration, jobs []string) []string {
	deadline := time.Now().Add(timeout)
	for {
		var stuck []string
		done := map[string]bool{}
		for _, op := range rec.Ops() {
			if op.Invoke >= t && op.Return != history.Never && op.Code == "" && !op.Kind.Background() {
				done[history.JobOf(op)] = true
			}
		}
		for _, job := range jobs {
			if !done[job] {
				stuck = append(stuck, job)
			}
		}
		if len(stuck) == 0 || !time.Now().Before(deadline) {
			return stuck
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// unavailability is, per fault kind, the longest time in which no write
// got a definite answer (a success or a seed error such as
// no_more_available: either way the cluster decided), from a fault's start
// to the first answer after it was healed. The save-model actors write every
// 50-300ms, so quiet spells of the workload do not count.
func unavailability(ops []history.Op, faults []FaultRecord) map[FaultKind]time.Duration {
	var done []int64
	for _, op := range ops {
		if op.Return != history.Never && op.Kind != history.Watch && op.Kind != history.Join && !op.Kind.Background() {
			done = append(done, op.Return)
		}
	}
	slices.Sort(done)
	out := map[FaultKind]time.Duration{}
	for _, f := range faults {
		prev := f.Start
		for _, d := range done {
			if d <= f.Start {
				continue
			}
			if gap := time.Duration(d - prev); gap > out[f.Kind] {
				out[f.Kind] = gap
			}
			prev = d
			if d > f.End {
				break
			}
		}
	}
	return out
}

// writeChunks writes job's dataset, n RecordIO files of one chunk each,
// named after the job, into dir, and returns their glob and their paths.
func writeChunks(t testing.TB, dir, job string, n int) (string, []string) {
	var files []string
	for i := range n {
		path := filepath.Join(dir, fmt.Sprintf("%s-part-%03d.recordio", job, i))
		files = append(files, path)
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		w := recordio.NewWriter(f, -1, recordio.NoCompression)
		for r := range 4 {
			if _, err := w.Write([]byte(fmt.Sprintf("job %s task %d record %d", job, i, r))); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	return filepath.Join(dir, job+"-part-*.recordio"), files
}

// writeReport stores the history and the report next to each other.
func writeReport(t testing.TB, rep Report, ops []history.Op) {
	if err := os.MkdirAll(filepath.Dir(rep.HistoryPath), 0o755); err != nil {
		t.Logf("report dir: %v", err)
		return
	}
	f, err := os.Create(rep.HistoryPath)
	if err != nil {
		t.Logf("history: %v", err)
		return
	}
	defer f.Close()
	if err := history.Write(f, ops); err != nil {
		t.Logf("history: %v", err)
	}
	base := strings.TrimSuffix(rep.HistoryPath, ".jsonl")
	b, _ := json.MarshalIndent(rep, "", "  ")
	_ = os.WriteFile(base+".report.json", b, 0o644)
	spans := make([]timeline.Span, len(rep.Faults))
	for i, f := range rep.Faults {
		spans[i] = timeline.Span{Label: string(f.Kind) + " " + f.Detail, Start: f.Start, End: f.End}
	}
	title := fmt.Sprintf("seed %d: %d operations (%s), %d faults, %d violations", rep.Seed, rep.Ops, jobOps(rep.Jobs), len(rep.Faults), len(rep.Violations))
	if err := timeline.Save(base+".timeline.png", title, ops, spans); err != nil {
		t.Logf("timeline: %v", err)
	}
}

// jobOps describes the operations of each job: "default 812, job-b 790".
func jobOps(jobs []JobReport) string {
	parts := make([]string, len(jobs))
	for i, j := range jobs {
		parts[i] = fmt.Sprintf("%s %d", j.Name, j.Ops)
	}
	return strings.Join(parts, ", ")
}
