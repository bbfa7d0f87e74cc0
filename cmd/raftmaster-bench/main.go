// Command raftmaster-bench measures raftmaster beside the alternatives in
// one run: a 3-node raftmaster cluster, a 3-member etcd cluster (etcd Put),
// raw hashicorp/raft Apply with a no-op FSM on raftmaster's stores and
// transport, and raftmaster's etcd backend. It starts every system itself
// on 127.0.0.1 in a temporary directory and removes it afterwards. It is a
// command of its own because it embeds an etcd server and a raw Raft
// harness, which the raftmaster binary does not need.
//
// Run "raftmaster-bench --help" for the parts and their sizes.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/raftmaster/raftmaster/internal/bench"
	"github.com/urfave/cli/v2"
)

func main() {
	// The bench re-executes itself as etcd members and raw Raft nodes.
	if bench.IsChild(os.Args) {
		os.Exit(bench.RunChild(os.Args, os.Stderr))
	}
	if err := app().Run(os.Args); err != nil {
		code := 1
		var ec cli.ExitCoder
		if errors.As(err, &ec) {
			code = ec.ExitCode()
		}
		fmt.Fprintf(os.Stderr, "raftmaster-bench: %v\n", err)
		os.Exit(code)
	}
}

func app() *cli.App {
	def, short := bench.Defaults(), bench.Short()
	return &cli.App{
		Name:  "raftmaster-bench",
		Usage: "compare raftmaster with etcd, raw hashicorp/raft and its own etcd backend, side by side",
		UsageText: "raftmaster-bench [--short] [--out DIR] [--parts dispatch,growth,...] [flags]\n" +
			"raftmaster-bench --out docs/bench                 # the full run (about 30 minutes on 2 cores)\n" +
			"raftmaster-bench --short                          # every figure and ratio in a few minutes\n" +
			"raftmaster-bench --parts failover --kills 50      # one part, larger\n" +
			"raftmaster-bench --short --parts sessions         # dead and idle trainers with sessions, short\n" +
			"raftmaster-bench --parts cursors                  # cursor commits at 1e6 tasks\n" +
			"raftmaster-bench fleet --trainers 10000           # 10,000 simulated trainers, a task every 10s each",
		Description: "Starts every system it measures itself, on 127.0.0.1, in a temporary directory, with fsync on:\n" +
			"  raftmaster    3 `raftmaster serve` processes (Raft backend, default flags)\n" +
			"  etcd Put      3 etcd members (etcd's embedded server, in child processes of this binary)\n" +
			"  raw Raft      3 hashicorp/raft nodes with a no-op FSM on raftmaster's stores, transport and timeouts\n" +
			"                (child processes; the load runs inside the leader: no HTTP, JSON or client)\n" +
			"  etcd backend  3 `raftmaster serve --backend etcd` masters against a 3-member etcd\n\n" +
			"Parts (--parts):\n" +
			"  dispatch   GetTask+TaskFinished through the Go client at each --concurrency, against etcd Put and\n" +
			"             raw Raft Apply at the same concurrency; ops/s, p50/p99 and the ratios; and GetTaskAfter\n" +
			"             (one write per task) and GetTasks of --dispatch-batch tasks (one write per batch):\n" +
			"             tasks/s against the pair's\n" +
			"  growth     dispatch throughput with datasets of --sizes tasks, Raft and etcd backends\n" +
			"  failover   --kills leader SIGKILLs under --trainers trainers, per backend; kill → next write, in phases\n" +
			"  allgather  groups of --peers members spread over the 3 nodes; last join → last result over HTTP, and\n" +
			"             through the Go client (one per member), decoding every member's data and with raw results\n" +
			"  footprint  RSS, snapshot and raft.db sizes with --footprint-tasks tasks, the pass half-way; follower catch-up\n" +
			"  sessions   --session-kills SIGKILLs of a trainer process holding a task under its session (default flags,\n" +
			"             TTL 5s): kill → the task leased to a waiting trainer; the same with the leader killed 1s later;\n" +
			"             --baseline-kills without a session (task timeout --baseline-task-timeout); exactly-once per pass;\n" +
			"             then --idle-trainers trainers holding a task for --idle-hold: log entries and keep-alives/s\n" +
			"  cursors    a job of --cursor-tasks one-chunk tasks, half finished (built offline with the FSM, written as a\n" +
			"             backup, brought up with `raftmaster restore` and two nodes joining), --cursor-in-flight tasks\n" +
			"             leased and partly consumed; --cursor-commits cursor commits after a progress report and as many\n" +
			"             carrying the progress: p50/p99/max ms, bytes a cursor adds; then restores of the newest cursor\n" +
			"  fleet      for each of --fleet-trainers, that many simulated trainers (own client and session each, a task\n" +
			"             every --fleet-cadence ±10% through GetTaskAfter, over --fleet-connections shared connections a node)\n" +
			"             for --fleet-duration: p50/p99 call latency, Raft writes/s, leader CPU per 1,000 trainers, and\n" +
			"             those figures extrapolated to --fleet-extrapolate trainers (also: raftmaster-bench fleet --help)\n\n" +
			"Progress goes to stderr. The report goes to stdout and, with results.json and PNG charts, to --out.\n" +
			"The raftmaster binary is --raftmaster, else the raftmaster next to this binary, else bin/raftmaster,\n" +
			"else one built from the module around the working directory. Figures are medians of --runs runs\n" +
			"with their min and max; nothing is asserted. The machine's other load shows in them: run it on a\n" +
			"quiet machine, and compare figures of one run rather than across runs.",
		HideHelpCommand: true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Value: def.Out, Usage: "directory for results.md, results.json and the charts"},
			&cli.StringFlag{Name: "raftmaster", Usage: "the raftmaster binary to measure (default: found or built, see above)"},
			&cli.BoolFlag{Name: "short", Usage: fmt.Sprintf("the short preset: %s windows, sizes up to 1e5, %d kills, allgather 64 and 1024, footprint of 1e5 tasks, %d trainer kills per session run, %d idle trainers for %s, cursors at %d tasks",
				short.Window, short.Kills, short.SessionKills, short.IdleTrainers, short.IdleHold, short.CursorTasks)},
			&cli.StringFlag{Name: "parts", Value: strings.Join(def.Parts, ","), Usage: "parts to run, comma separated"},
			&cli.IntFlag{Name: "runs", Value: def.Runs, Usage: "runs of every figure (median, min, max)"},
			&cli.DurationFlag{Name: "window", Value: def.Window, Usage: "length of one throughput measurement"},
			&cli.DurationFlag{Name: "warmup", Value: def.Warmup, Usage: "unmeasured warm-up before each window"},
			&cli.StringFlag{Name: "concurrency", Value: ints(def.Concurrency), Usage: "concurrent clients of the dispatch comparison"},
			&cli.IntFlag{Name: "dispatch-batch", Value: def.DispatchBatch, Usage: "tasks each write of the dispatch part's prefetching trainers leases (1 to 32)"},
			&cli.StringFlag{Name: "dispatch-tasks", Value: fmt.Sprint(def.DispatchTasks), Usage: "dataset size of the dispatch comparison and of the fail-over load"},
			&cli.StringFlag{Name: "sizes", Value: ints(def.Sizes), Usage: "dataset sizes (tasks) of the growth part; 1e6 notation works"},
			&cli.IntFlag{Name: "growth-concurrency", Value: def.GrowthConcurrency, Usage: "trainers of the growth part"},
			&cli.IntFlag{Name: "kills", Value: def.Kills, Usage: "leader SIGKILLs per backend"},
			&cli.IntFlag{Name: "trainers", Value: def.Trainers, Usage: "trainers dispatching during the kills"},
			&cli.DurationFlag{Name: "etcd-ttl", Value: def.EtcdTTL, Usage: "session TTL of the etcd backend's masters (raftmaster's default)"},
			&cli.StringFlag{Name: "peers", Value: ints(def.Peers), Usage: "allgather group sizes (at most 4096)"},
			&cli.StringFlag{Name: "footprint-tasks", Value: footprints(def.Footprints), Usage: "dataset sizes of the footprint part, comma separated, each on a cluster of its own; size@limit runs its nodes with --memory-limit limit"},
			&cli.DurationFlag{Name: "etcd-compaction", Value: def.EtcdCompaction, Usage: "etcd's periodic auto-compaction retention (0: none)"},
			&cli.IntFlag{Name: "session-kills", Value: def.SessionKills, Usage: fmt.Sprintf("SIGKILLs of a trainer holding a task under its session, per run (short: %d)", short.SessionKills)},
			&cli.IntFlag{Name: "baseline-kills", Value: def.BaselineKills, Usage: fmt.Sprintf("SIGKILLs of a trainer holding a task without a session (0: none; short: %d)", short.BaselineKills)},
			&cli.DurationFlag{Name: "baseline-task-timeout", Value: def.BaselineTaskTimeout, Usage: "task timeout of the no-session baseline's job (serve's default is 1m)"},
			&cli.IntFlag{Name: "idle-trainers", Value: def.IdleTrainers, Usage: fmt.Sprintf("trainers holding a task each under their session, writing nothing (short: %d)", short.IdleTrainers)},
			&cli.DurationFlag{Name: "idle-hold", Value: def.IdleHold, Usage: fmt.Sprintf("how long the idle trainers hold their tasks (short: %s)", short.IdleHold)},
			&cli.StringFlag{Name: "cursor-tasks", Value: fmt.Sprint(def.CursorTasks), Usage: fmt.Sprintf("one-chunk tasks of the cursors part's job, half finished (short: %d)", short.CursorTasks)},
			&cli.IntFlag{Name: "cursor-in-flight", Value: def.CursorInFlight, Usage: "tasks of the cursors part leased and reported partly consumed before the commits"},
			&cli.IntFlag{Name: "cursor-commits", Value: def.CursorCommits, Usage: "cursor commits of each of the cursors part's two series"},
			&cli.StringFlag{Name: "fleet-trainers", Value: ints(def.FleetTrainers), Usage: fmt.Sprintf("fleet sizes of the fleet part (short: %s)", ints(short.FleetTrainers))},
			&cli.DurationFlag{Name: "fleet-cadence", Value: def.FleetCadence, Usage: "mean time between two tasks of a fleet trainer"},
			&cli.DurationFlag{Name: "fleet-duration", Value: def.FleetDuration, Usage: fmt.Sprintf("measured window of each fleet, once every trainer has its first task (short: %s)", short.FleetDuration)},
			&cli.IntFlag{Name: "fleet-connections", Value: def.FleetConnections, Usage: "HTTP connections a node that the fleet's trainers share"},
			&cli.DurationFlag{Name: "fleet-session-ttl", Usage: "TTL of the fleet trainers' sessions (default: the client's)"},
			&cli.DurationFlag{Name: "fleet-ramp", Usage: "time over which the fleet's trainers make their first calls (default: one cadence, or N/250 seconds if longer)"},
			&cli.IntFlag{Name: "fleet-extrapolate", Value: def.FleetExtrapolate, Usage: "fleet size the fleet figures are extrapolated to"},
			&cli.StringFlag{Name: "cpuprofile", Usage: "write a CPU profile of this process (the clients and load generators) to `FILE`; serve's --pprof-addr profiles the servers", TakesFile: true},
			&cli.BoolFlag{Name: "keep", Usage: "keep the temporary directory (every log and data dir) and print where it is"},
			&cli.StringFlag{Name: "replot", Usage: "measure nothing: redraw the charts and results.md of DIR/results.json", TakesFile: true},
		},
		Action:   run,
		Commands: []*cli.Command{fleetCommand()},
	}
}

// fleetCommand is "raftmaster-bench fleet": the fleet part alone, sized by
// its own flags.
func fleetCommand() *cli.Command {
	def := bench.Defaults()
	return &cli.Command{
		Name:      "fleet",
		Usage:     "simulate a fleet of trainers against a 3-node cluster: call latency, Raft writes/s, leader CPU, extrapolated",
		UsageText: "raftmaster-bench fleet [--trainers N] [--cadence 10s] [--duration 1m] [--connections 100] [--out DIR]",
		Description: "Starts a 3-node raftmaster cluster on 127.0.0.1 (fsync on, default flags) with a dataset of one-chunk tasks\n" +
			"large enough for one pass to last the run, then N simulated trainers in this process. Each has its own Go\n" +
			"client (its own identity and session, whose keep-alives its client sends in the background) over one HTTP\n" +
			"transport that all share, bounded to --connections connections a node, and its own period, the cadence\n" +
			"±10%: every period it finishes the task it holds and leases the next in one call (GetTaskAfter), starting\n" +
			"at a random moment of --ramp. Once every trainer has its first task (or a minute past the ramp), it\n" +
			"measures --duration: p50/p99 latency of those calls (keep-alives excluded), Raft writes/s (the leader's\n" +
			"applied index), keep-alives/s the leader served, and the CPU of the leader (/proc/PID/stat) in cores and\n" +
			"per 1,000 trainers. It then extrapolates the figures linearly to --extrapolate trainers on a machine of this one's\n" +
			"cores (see docs/bench/fleet.md). The report goes to stdout and, with results.json, to --out.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "trainers", Value: "1000", Usage: "simulated trainers (a comma-separated list runs each size; 1e4 notation works)"},
			&cli.DurationFlag{Name: "cadence", Value: def.FleetCadence, Usage: "mean time between two tasks of a trainer"},
			&cli.DurationFlag{Name: "duration", Value: def.FleetDuration, Usage: "measured window, once every trainer has its first task"},
			&cli.IntFlag{Name: "connections", Value: def.FleetConnections, Usage: "HTTP connections a node that the trainers share"},
			&cli.DurationFlag{Name: "session-ttl", Usage: "TTL of the trainers' sessions (default: the client's, 5s)"},
			&cli.DurationFlag{Name: "ramp", Usage: "time over which the trainers make their first calls, each at a random moment of it (default: one cadence, or N/250 seconds if longer)"},
			&cli.IntFlag{Name: "extrapolate", Value: def.FleetExtrapolate, Usage: "fleet size the figures are extrapolated to"},
			&cli.StringFlag{Name: "out", Value: "bench-out/fleet", Usage: "directory for results.md and results.json"},
			&cli.StringFlag{Name: "raftmaster", Usage: "the raftmaster binary to measure (default: found or built, as the suite's)"},
			&cli.BoolFlag{Name: "keep", Usage: "keep the temporary directory (every log and data dir) and print where it is"},
		},
		Action: runFleet,
	}
}

func runFleet(c *cli.Context) error {
	if c.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (see raftmaster-bench fleet --help)", c.Args().Slice())
	}
	cfg := bench.Defaults()
	cfg.Parts = []string{bench.PartFleet}
	cfg.Out = c.String("out")
	cfg.Raftmaster = c.String("raftmaster")
	var err error
	if cfg.FleetTrainers, err = parseInts(c.String("trainers")); err != nil {
		return fmt.Errorf("--trainers: %w", err)
	}
	cfg.FleetCadence = c.Duration("cadence")
	cfg.FleetDuration = c.Duration("duration")
	cfg.FleetConnections = c.Int("connections")
	cfg.FleetSessionTTL = c.Duration("session-ttl")
	cfg.FleetRamp = c.Duration("ramp")
	cfg.FleetExtrapolate = c.Int("extrapolate")
	cfg.Keep = c.Bool("keep")
	return runSuite(c, cfg, "raftmaster-bench fleet")
}

// runSuite checks cfg and runs it until it is done or interrupted; name
// is the command's, for the message of an interrupted run.
func runSuite(c *cli.Context, cfg bench.Config, name string) error {
	if err := cfg.Check(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	_, err := bench.Run(ctx, cfg, c.App.Writer, c.App.ErrWriter)
	if errors.Is(err, context.Canceled) {
		return cli.Exit(fmt.Sprintf("%s: interrupted; what was measured is in %s", name, cfg.Out), 130)
	}
	return err
}

func run(c *cli.Context) error {
	if c.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (see --help)", c.Args().Slice())
	}
	if dir := c.String("replot"); dir != "" {
		md, err := bench.Replot(dir)
		fmt.Fprint(c.App.Writer, md)
		return err
	}
	if path := c.String("cpuprofile"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	cfg := bench.Defaults()
	if c.Bool("short") {
		cfg = bench.Short()
	}
	// Flags given explicitly override the preset.
	var err error
	str := func(name string, set func(string) error) {
		if err == nil && c.IsSet(name) {
			if e := set(c.String(name)); e != nil {
				err = fmt.Errorf("--%s: %w", name, e)
			}
		}
	}
	list := func(dst *[]int) func(string) error {
		return func(s string) error { v, e := parseInts(s); *dst = v; return e }
	}
	one := func(dst *int) func(string) error {
		return func(s string) error { v, e := parseInt(s); *dst = v; return e }
	}
	if c.IsSet("out") {
		cfg.Out = c.String("out")
	}
	cfg.Raftmaster = c.String("raftmaster")
	str("parts", func(s string) error { cfg.Parts = splitList(s); return nil })
	str("concurrency", list(&cfg.Concurrency))
	str("sizes", list(&cfg.Sizes))
	str("peers", list(&cfg.Peers))
	str("dispatch-tasks", one(&cfg.DispatchTasks))
	str("footprint-tasks", func(s string) error { f, e := parseFootprints(s); cfg.Footprints = f; return e })
	str("cursor-tasks", one(&cfg.CursorTasks))
	str("fleet-trainers", list(&cfg.FleetTrainers))
	if err != nil {
		return err
	}
	for name, dst := range map[string]*int{"runs": &cfg.Runs, "growth-concurrency": &cfg.GrowthConcurrency, "kills": &cfg.Kills, "trainers": &cfg.Trainers,
		"dispatch-batch": &cfg.DispatchBatch, "session-kills": &cfg.SessionKills, "baseline-kills": &cfg.BaselineKills, "idle-trainers": &cfg.IdleTrainers,
		"cursor-in-flight": &cfg.CursorInFlight, "cursor-commits": &cfg.CursorCommits,
		"fleet-connections": &cfg.FleetConnections, "fleet-extrapolate": &cfg.FleetExtrapolate} {
		if c.IsSet(name) {
			*dst = c.Int(name)
		}
	}
	for name, dst := range map[string]*time.Duration{"window": &cfg.Window, "warmup": &cfg.Warmup, "etcd-ttl": &cfg.EtcdTTL, "etcd-compaction": &cfg.EtcdCompaction,
		"baseline-task-timeout": &cfg.BaselineTaskTimeout, "idle-hold": &cfg.IdleHold,
		"fleet-cadence": &cfg.FleetCadence, "fleet-duration": &cfg.FleetDuration, "fleet-session-ttl": &cfg.FleetSessionTTL, "fleet-ramp": &cfg.FleetRamp} {
		if c.IsSet(name) {
			*dst = c.Duration(name)
		}
	}
	cfg.Keep = c.Bool("keep")
	return runSuite(c, cfg, "raftmaster-bench")
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		v, err := parseInt(f)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty list")
	}
	return out, nil
}

// parseFootprints reads the footprint specs of --footprint-tasks:
// size[@memory-limit],...
func parseFootprints(s string) ([]bench.FootprintSpec, error) {
	var out []bench.FootprintSpec
	for _, item := range splitList(s) {
		size, limit, _ := strings.Cut(item, "@")
		n, err := parseInt(size)
		if err != nil {
			return nil, err
		}
		out = append(out, bench.FootprintSpec{Tasks: n, MemoryLimit: strings.TrimSpace(limit)})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty list")
	}
	return out, nil
}

// footprints writes specs as --footprint-tasks takes them.
func footprints(specs []bench.FootprintSpec) string {
	s := make([]string, len(specs))
	for i, f := range specs {
		s[i] = f.String()
	}
	return strings.Join(s, ",")
}

// parseInt reads 1000, 1_000 or 1e3.
func parseInt(s string) (int, error) {
	s = strings.ReplaceAll(strings.TrimSpace(s), "_", "")
	if v, err := strconv.Atoi(s); err == nil {
		return v, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != float64(int(f)) {
		return 0, fmt.Errorf("%q is not a whole number", s)
	}
	return int(f), nil
}

func ints(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}
