// Package bench is raftmaster-bench: a suite that measures raftmaster beside
// the alternatives in one run, on 127.0.0.1, starting every system itself
// in a temporary directory with fsync on:
//
//   - a 3-node raftmaster cluster (raftmaster serve processes, Raft backend);
//   - a 3-member etcd cluster (etcd's embedded server, one child process of
//     the bench binary per member; package etcdmember);
//   - raw hashicorp/raft Apply with a no-op FSM on raftmaster's stores,
//     transport and timeouts, 3 child processes with the load applied in the
//     leader's process (package rawraft);
//   - the etcd backend of raftmaster (raftmaster serve --backend etcd, three
//     masters) against that etcd cluster.
//
// It measures task dispatch against etcd Put and raw Raft Apply at several
// concurrencies, dispatch throughput as the dataset grows, fail-over after
// SIGKILL of the leader, allgather completion, the footprint of a large
// dataset, and what sessions do: how soon the task of a trainer killed
// while holding it goes to another trainer, with and without a session and
// with the leader killed too, and the log entries and keep-alives of
// trainers that only hold their tasks; and what a cursor (the data position
// saved with a model) costs on a job of a million tasks: the latency of its
// commit and restore, and what it adds to the state. It writes a Markdown
// table, a JSON file and charts. Every
// figure is a median of several runs with its minimum and maximum, or a
// distribution of events; nothing is asserted.
//
// The raftmaster clusters, the datasets and the trainers are package
// harness's, which raftmaster bench runs too; what embeds etcd or runs raw
// Raft stays here, out of the raftmaster binary.
package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/internal/bench/harness"
	"github.com/raftmaster/raftmaster/rpc"
)

// Parts of the suite, in the order they run.
const (
	PartDispatch  = "dispatch"
	PartGrowth    = "growth"
	PartFailover  = "failover"
	PartAllgather = "allgather"
	PartFootprint = "footprint"
	PartSessions  = "sessions"
	PartCursors   = "cursors"
	PartFleet     = "fleet"
)

// AllParts lists every part in the order they run.
var AllParts = []string{PartDispatch, PartGrowth, PartFailover, PartAllgather, PartFootprint, PartSessions, PartCursors, PartFleet}

// etcdPrefix is where the etcd backend's masters of the suite keep their
// keys (serve --etcd-prefix).
const etcdPrefix = "/bench"

// Config sizes a run. Defaults and Short give the two presets.
type Config struct {
	// Out is the directory for results.md, results.json and the charts.
	Out string `json:"-"`
	// Raftmaster is the raftmaster binary; empty finds or builds one.
	Raftmaster string `json:"-"`
	// Parts are the parts to run (AllParts by default).
	Parts []string `json:"parts"`
	// Runs is how many times each throughput or completion figure is
	// measured; the report gives the median, minimum and maximum.
	Runs int `json:"runs"`
	// Warmup precedes every throughput window and is not measured.
	Warmup time.Duration `json:"warmup"`
	// Window is the length of one throughput measurement.
	Window time.Duration `json:"window"`
	// Concurrency lists the numbers of concurrent clients of the dispatch
	// comparison.
	Concurrency []int `json:"concurrency"`
	// DispatchTasks is the dataset size of the dispatch comparison and of
	// the fail-over load.
	DispatchTasks int `json:"dispatch_tasks"`
	// DispatchBatch is how many tasks each write of the dispatch
	// comparison's prefetching trainers leases (GetTasks).
	DispatchBatch int `json:"dispatch_batch"`
	// Sizes are the dataset sizes (tasks) of the cost-growth part.
	Sizes []int `json:"sizes"`
	// GrowthConcurrency is the number of trainers of the cost-growth part.
	GrowthConcurrency int `json:"growth_concurrency"`
	// Kills is the number of leader SIGKILLs per backend.
	Kills int `json:"kills"`
	// Trainers is the number of trainers dispatching during the kills.
	Trainers int `json:"trainers"`
	// EtcdTTL is the etcd backend's session TTL (--etcd-ttl); zero keeps
	// raftmaster's default (10 s).
	EtcdTTL time.Duration `json:"etcd_ttl"`
	// Peers lists the allgather group sizes.
	Peers []int `json:"peers"`
	// Footprints are the datasets of the footprint part, each measured
	// on a cluster of its own.
	Footprints []FootprintSpec `json:"footprints"`
	// EtcdCompaction is the etcd members' periodic auto-compaction
	// retention (0 disables it).
	EtcdCompaction time.Duration `json:"etcd_compaction"`
	// SessionKills is the number of SIGKILLs of a trainer holding a task
	// under its session, in each of the two session runs (the trainer
	// alone; the trainer, then the leader).
	SessionKills int `json:"session_kills"`
	// BaselineKills is the number of SIGKILLs of a trainer holding a task
	// without a session (0: none), on a job whose task timeout is
	// BaselineTaskTimeout.
	BaselineKills       int           `json:"baseline_kills"`
	BaselineTaskTimeout time.Duration `json:"baseline_task_timeout"`
	// IdleTrainers trainers hold a task each under their session for
	// IdleHold, writing nothing.
	IdleTrainers int           `json:"idle_trainers"`
	IdleHold     time.Duration `json:"idle_hold"`
	// CursorTasks is the number of one-chunk tasks of the cursors part's
	// job, half of them finished; CursorInFlight more are leased and
	// partly consumed, and CursorCommits cursors are committed in each of
	// its two series.
	CursorTasks    int `json:"cursor_tasks"`
	CursorInFlight int `json:"cursor_in_flight"`
	CursorCommits  int `json:"cursor_commits"`
	// FleetTrainers lists the sizes of the fleets of simulated trainers,
	// each taking a task every FleetCadence (within ±10%) under its own
	// client and session, over FleetConnections HTTP connections a node
	// that they share, measured for FleetDuration once every trainer has
	// its first task. FleetSessionTTL is their sessions' TTL (0: the
	// client's default) and FleetExtrapolate the fleet size the figures
	// are extrapolated to.
	FleetTrainers    []int         `json:"fleet_trainers"`
	FleetCadence     time.Duration `json:"fleet_cadence"`
	FleetDuration    time.Duration `json:"fleet_duration"`
	FleetConnections int           `json:"fleet_connections"`
	FleetSessionTTL  time.Duration `json:"fleet_session_ttl,omitempty"`
	// FleetRamp is the time over which the trainers make their first
	// calls, each at a random moment of it (0: one cadence, or longer
	// for a fleet larger than 250 trainers a second of it).
	FleetRamp        time.Duration `json:"fleet_ramp,omitempty"`
	FleetExtrapolate int           `json:"fleet_extrapolate"`
	// Keep keeps the temporary directory with every log and data dir.
	Keep bool `json:"-"`
	// Short records that the short preset was chosen.
	Short bool `json:"short"`
}

// Defaults is the full run that produces the figures of
// docs/performance.md (about 45 minutes on a 2-core machine).
func Defaults() Config {
	return Config{
		Out:                 "bench-out",
		Parts:               slices.Clone(AllParts),
		Runs:                3,
		Warmup:              time.Second,
		Window:              10 * time.Second,
		Concurrency:         []int{1, 8, 64},
		DispatchTasks:       10_000,
		DispatchBatch:       8,
		Sizes:               []int{1_000, 10_000, 100_000, 1_000_000, 10_000_000},
		GrowthConcurrency:   8,
		Kills:               20,
		Trainers:            4,
		Peers:               []int{64, 1024, 4096},
		Footprints:          []FootprintSpec{{Tasks: 1_000_000}, {Tasks: 10_000_000, MemoryLimit: "460MiB"}},
		EtcdTTL:             10 * time.Second,
		EtcdCompaction:      30 * time.Second,
		SessionKills:        20,
		BaselineKills:       5,
		BaselineTaskTimeout: 10 * time.Second,
		IdleTrainers:        100,
		IdleHold:            time.Minute,
		CursorTasks:         1_000_000,
		CursorInFlight:      64,
		CursorCommits:       200,
		FleetTrainers:       []int{1_000, 3_000, 10_000},
		FleetCadence:        10 * time.Second,
		FleetDuration:       time.Minute,
		FleetConnections:    100,
		FleetExtrapolate:    100_000,
	}
}

// Short is a run of a few minutes that still prints every figure and ratio.
func Short() Config {
	c := Defaults()
	c.Short = true
	c.Warmup = 500 * time.Millisecond
	c.Window = 2 * time.Second
	c.Sizes = []int{1_000, 10_000, 100_000}
	c.Kills = 5
	c.Peers = []int{64, 1024}
	c.Footprints = []FootprintSpec{{Tasks: 100_000}}
	c.SessionKills = 3
	c.BaselineKills = 2
	c.IdleTrainers = 20
	c.IdleHold = 15 * time.Second
	c.CursorTasks = 100_000
	c.FleetTrainers = []int{1_000}
	c.FleetDuration = 20 * time.Second
	return c
}

// Check reports a configuration that cannot run.
func (c Config) Check() error {
	for _, p := range c.Parts {
		if !slices.Contains(AllParts, p) {
			return fmt.Errorf("unknown part %q (want %s)", p, strings.Join(AllParts, ", "))
		}
	}
	positive := func(name string, vs ...int) error {
		for _, v := range vs {
			if v < 1 {
				return fmt.Errorf("%s must be at least 1", name)
			}
		}
		return nil
	}
	return errors.Join(
		positive("runs", c.Runs), positive("concurrency", c.Concurrency...), positive("dispatch tasks", c.DispatchTasks), positive("dispatch batch", c.DispatchBatch),
		positive("sizes", c.Sizes...), positive("growth concurrency", c.GrowthConcurrency), positive("kills", c.Kills),
		positive("trainers", c.Trainers), positive("peers", c.Peers...), positive("footprint tasks", footprintSizes(c.Footprints)...),
		positive("session kills", c.SessionKills), positive("idle trainers", c.IdleTrainers),
		positive("cursor tasks", c.CursorTasks), positive("cursor commits", c.CursorCommits),
		positive("fleet trainers", c.FleetTrainers...), positive("fleet connections", c.FleetConnections),
		positive("fleet extrapolation", c.FleetExtrapolate),
		func() error {
			if c.FleetCadence < 100*time.Millisecond || c.FleetDuration < time.Second {
				return errors.New("the fleet's cadence must be at least 100ms and its duration at least 1s")
			}
			if c.FleetSessionTTL != 0 && c.FleetSessionTTL < time.Second {
				return errors.New("the fleet's session TTL must be 0 (the client's default) or at least 1s")
			}
			if c.FleetRamp < 0 {
				return errors.New("the fleet's ramp must not be negative")
			}
			return nil
		}(),
		func() error {
			if c.CursorInFlight < 0 || c.CursorInFlight > min(rpc.MaxProgress, c.CursorTasks/2) {
				return fmt.Errorf("cursor in-flight tasks must be between 0 and %d, and at most half the cursor tasks", rpc.MaxProgress)
			}
			return nil
		}(),
		func() error {
			if c.BaselineKills < 0 {
				return errors.New("baseline kills must not be negative")
			}
			if c.BaselineTaskTimeout < time.Second || c.IdleHold <= 0 {
				return errors.New("the baseline's task timeout must be at least 1s and the idle hold positive")
			}
			return nil
		}(),
		func() error {
			if c.DispatchBatch > client.MaxTasksPerGet {
				return fmt.Errorf("the dispatch batch must be at most %d tasks (GetTasks' limit)", client.MaxTasksPerGet)
			}
			return nil
		}(),
		func() error {
			if c.Window <= 0 || c.Warmup < 0 {
				return errors.New("the window must be positive and the warm-up not negative")
			}
			for _, p := range c.Peers {
				if p > 4096 {
					return errors.New("allgather groups have at most 4096 peers (the API's limit)")
				}
			}
			return nil
		}())
}

// fleetStartRate is how many trainers a second a fleet starts at most
// when FleetRamp is zero.
const fleetStartRate = 250

// fleetRamp is FleetRamp, or, when it is zero, one cadence or the time
// to start n trainers at fleetStartRate a second, whichever is longer.
func (c Config) fleetRamp(n int) time.Duration {
	if c.FleetRamp > 0 {
		return c.FleetRamp
	}
	return max(c.FleetCadence, time.Duration(n)*time.Second/fleetStartRate)
}

func (c Config) has(part string) bool { return slices.Contains(c.Parts, part) }

// Results is everything a run measured; it is written as results.json.
type Results struct {
	Started time.Time `json:"started"`
	Seconds float64   `json:"seconds"`
	Host    Host      `json:"host"`
	Config  Config    `json:"config"`
	// Systems says what each measured system is and includes.
	Systems   []System          `json:"systems"`
	Dispatch  *DispatchResults  `json:"dispatch,omitempty"`
	Growth    *GrowthResults    `json:"growth,omitempty"`
	Failover  *FailoverResults  `json:"failover,omitempty"`
	Allgather *AllgatherResults `json:"allgather,omitempty"`
	// Footprints has one result for each of Config.Footprints; Footprint
	// is the single one of a run before there were several.
	Footprints []*FootprintResults `json:"footprints,omitempty"`
	Footprint  *FootprintResults   `json:"footprint,omitempty"`
	Sessions   *SessionsResults    `json:"sessions,omitempty"`
	Cursors    *CursorsResults     `json:"cursors,omitempty"`
	Fleet      *FleetResults       `json:"fleet,omitempty"`
	Errors     map[string]string   `json:"errors,omitempty"`
	Charts     []string            `json:"charts,omitempty"`
}

// Host describes the machine.
type Host struct {
	CPUs       int    `json:"cpus"`
	GoVersion  string `json:"go_version"`
	OS         string `json:"os"`
	Raftmaster string `json:"raftmaster"`
	// Load and LoadEnd are the 1, 5 and 15-minute load averages at the
	// start and the end of the run: the machine's other work shows in the
	// figures.
	Load    string `json:"load_average,omitempty"`
	LoadEnd string `json:"load_average_end,omitempty"`
}

// System is one measured system and what its figures include.
type System struct {
	Name     string `json:"name"`
	Setup    string `json:"setup"`
	Includes string `json:"includes"`
}

// suite is one run in progress.
type suite struct {
	cfg      Config
	exe      string // this binary, for the child modes
	bin      string // raftmaster
	tmp      string
	stderr   io.Writer
	start    time.Time
	datasets map[int]string
}

// Run runs the configured parts, then writes results.md, results.json and
// the charts to cfg.Out and the Markdown report to stdout. Progress goes to
// stderr. A part that fails is reported in Results.Errors and the others
// still run; the error returned is for what stops the whole run.
func Run(ctx context.Context, cfg Config, stdout, stderr io.Writer) (*Results, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "raftmaster-bench-")
	if err != nil {
		return nil, err
	}
	s := &suite{cfg: cfg, exe: exe, tmp: tmp, stderr: stderr, start: time.Now(), datasets: map[int]string{}}
	if cfg.Keep {
		s.logf("keeping the working directory %s", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	if s.bin, err = raftmasterBinary(cfg.Raftmaster, tmp, s.logf); err != nil {
		return nil, err
	}
	res := &Results{Started: s.start, Config: cfg, Errors: map[string]string{}}
	res.Host = Host{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH,
		Raftmaster: binaryVersion(s.bin), Load: loadAverage()}
	res.Systems = systems(cfg)
	s.logf("raftmaster binary %s (%s); %d CPUs, load average %s", s.bin, res.Host.Raftmaster, res.Host.CPUs, res.Host.Load)

	parts := []struct {
		name string
		run  func(context.Context, *Results) error
	}{
		{PartDispatch, s.dispatch},
		{PartGrowth, s.growth},
		{PartFailover, s.failover},
		{PartAllgather, s.allgather},
		{PartFootprint, s.footprint},
		{PartSessions, s.sessions},
		{PartCursors, s.cursors},
		{PartFleet, s.fleet},
	}
	for _, p := range parts {
		if !cfg.has(p.name) || ctx.Err() != nil {
			continue
		}
		s.logf("== %s", p.name)
		if err := p.run(ctx, res); err != nil {
			if ctx.Err() != nil {
				s.logf("interrupted during %s; writing what was measured", p.name)
				res.Errors[p.name] = "interrupted"
				continue
			}
			s.logf("%s failed: %v", p.name, err)
			res.Errors[p.name] = err.Error()
		}
	}
	res.Seconds = time.Since(s.start).Seconds()
	res.Host.LoadEnd = loadAverage()
	charts, err := drawCharts(cfg.Out, res)
	if err != nil {
		s.logf("charts: %v", err)
		res.Errors["charts"] = err.Error()
	}
	res.Charts = charts
	md := Markdown(res)
	if err := os.WriteFile(filepath.Join(cfg.Out, "results.md"), []byte(md), 0o644); err != nil {
		return res, err
	}
	js, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return res, err
	}
	if err := os.WriteFile(filepath.Join(cfg.Out, "results.json"), append(js, '\n'), 0o644); err != nil {
		return res, err
	}
	fmt.Fprint(stdout, md)
	s.logf("done in %s; wrote %s", time.Since(s.start).Round(time.Second), cfg.Out)
	return res, ctx.Err()
}

// logf prints a progress line with the time since the start.
func (s *suite) logf(format string, args ...any) {
	fmt.Fprintf(s.stderr, "[%6.1fs] %s\n", time.Since(s.start).Seconds(), fmt.Sprintf(format, args...))
}

// dir returns a fresh directory under the working directory.
func (s *suite) dir(parts ...string) string {
	d := filepath.Join(append([]string{s.tmp}, parts...)...)
	_ = os.MkdirAll(d, 0o755)
	return d
}

// dataset returns the RecordIO file of n one-record chunks (one task per
// chunk), writing it on first use; every cluster and backend of the run
// reads the same files.
func (s *suite) dataset(n int) (string, error) {
	if p, ok := s.datasets[n]; ok {
		return p, nil
	}
	path := filepath.Join(s.dir("data"), fmt.Sprintf("tasks-%d.recordio", n))
	start := time.Now()
	if err := harness.WriteDataset(path, n); err != nil {
		return "", err
	}
	s.logf("wrote a dataset of %d one-record chunks in %s", n, time.Since(start).Round(time.Millisecond))
	s.datasets[n] = path
	return path, nil
}

// loadAverage is the first three fields of /proc/loadavg.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// Replot reads dir/results.json and writes its charts and results.md again,
// without measuring anything; it returns the Markdown.
func Replot(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		return "", err
	}
	var res Results
	if err := json.Unmarshal(b, &res); err != nil {
		return "", fmt.Errorf("%s: %w", filepath.Join(dir, "results.json"), err)
	}
	charts, err := drawCharts(dir, &res)
	if err != nil {
		return "", err
	}
	res.Charts = charts
	md := Markdown(&res)
	return md, os.WriteFile(filepath.Join(dir, "results.md"), []byte(md), 0o644)
}
