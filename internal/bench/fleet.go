package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/internal/bench/harness"
	"github.com/raftmaster/raftmaster/internal/bench/measure"
	"github.com/raftmaster/raftmaster/rpc"
)

// FleetResults is what a fleet of simulated trainers costs a 3-node
// cluster: one FleetRun per fleet size, each extrapolated to
// Extrapolate trainers on the model of FleetHardware.
type FleetResults struct {
	// CadenceMillis is the mean time between two tasks of a trainer;
	// each trainer's own period is drawn within ±CadenceSpread of it.
	CadenceMillis float64 `json:"cadence_ms"`
	CadenceSpread float64 `json:"cadence_spread"`
	// SessionTTLMillis is the TTL the trainers' sessions asked for (the
	// client's default when zero was configured).
	SessionTTLMillis float64 `json:"session_ttl_ms"`
	// Connections bounds the HTTP connections to each node that the
	// trainers share.
	Connections   int           `json:"connections"`
	WindowSeconds float64       `json:"window_seconds"`
	Extrapolate   int           `json:"extrapolate"`
	Hardware      FleetHardware `json:"hardware"`
	Runs          []FleetRun    `json:"runs"`
	Error         string        `json:"error,omitempty"`
}

// FleetHardware is the model of the machine the extrapolation assumes:
// this machine's cores, each as fast as one of this machine's.
type FleetHardware struct {
	CPUModel string `json:"cpu_model"`
	Cores    int    `json:"cores"`
}

// FleetRun is one fleet size's measurement.
type FleetRun struct {
	Trainers int `json:"trainers"`
	// Tasks is the dataset: enough one-chunk tasks that one pass lasts
	// the whole run.
	Tasks int `json:"tasks"`
	// RampSeconds is the start → every trainer has made its first call,
	// which opens its session and leases its first task; each trainer
	// starts at a random moment of the first RampMillis.
	// When not every trainer had by a minute past the ramp, the window
	// starts then anyway, and Ramped counts those that had.
	RampMillis  float64 `json:"ramp_ms"`
	RampSeconds float64 `json:"ramp_seconds"`
	Ramped      int     `json:"ramped"`
	// First is the latency of those first calls (session open + GetTask,
	// two writes), in ms.
	First measure.Distribution `json:"first_ms"`
	// Calls is the latency of the trainers' calls whose answer came in
	// the window (GetTaskAfter: the finish of the task held and the lease
	// of the next, one write; a GetTask after an error), in ms.
	// Keep-alives run in the clients' background and are not in it.
	Calls         measure.Distribution `json:"calls_ms"`
	WindowSeconds float64              `json:"window_seconds"`
	CallsPerSec   float64              `json:"calls_per_sec"`
	// Late counts the window's calls that started more than a period
	// behind their trainer's schedule; Errors the calls that failed
	// after the client's retries; PassEnds the answers that ended the
	// pass (the trainer asked again on the next).
	Late     int `json:"late,omitempty"`
	Errors   int `json:"errors,omitempty"`
	PassEnds int `json:"pass_ends,omitempty"`
	// ErrorKinds counts the failed calls of the whole run (ramp
	// included) by their error's text, the most frequent few.
	ErrorKinds map[string]int `json:"error_kinds,omitempty"`
	// IndexBefore and IndexAfter are the leader's applied index at the
	// window's start and end; WritesPerSec their difference over the
	// window and WritesPerCall that difference over Calls.N.
	IndexBefore   uint64  `json:"index_before"`
	IndexAfter    uint64  `json:"index_after"`
	WritesPerSec  float64 `json:"writes_per_sec"`
	WritesPerCall float64 `json:"writes_per_call"`
	// KeepAlivesPerSec is the keep-alives the nodes (the leader, or the
	// leaders if it changed) answered 200 in the window, a second.
	KeepAlivesPerSec float64 `json:"keep_alives_per_sec"`
	// LeaderCores is the leader's CPU time (user + system, /proc/PID/stat)
	// over the window's wall time; LeaderCoresPer1000 the same per 1,000
	// trainers. FollowerCores is the busier follower's; BenchCores is
	// this process's, the trainers' clients.
	LeaderCores        float64 `json:"leader_cores"`
	LeaderCoresPer1000 float64 `json:"leader_cores_per_1000"`
	FollowerCores      float64 `json:"follower_cores"`
	BenchCores         float64 `json:"bench_cores"`
	// Load is the load average at the window's end.
	Load string `json:"load_average,omitempty"`
	// LeaderChanged says the leader or its term changed in the window.
	LeaderChanged bool `json:"leader_changed,omitempty"`
	// Model is this run extrapolated to FleetResults.Extrapolate trainers.
	Model FleetModel `json:"model"`
	Error string     `json:"error,omitempty"`
}

// FleetModel is a fleet run extrapolated linearly to more trainers of the
// same cadence and session TTL, on FleetHardware. It is a model, not a
// measurement: see docs/bench/fleet.md for its assumptions.
type FleetModel struct {
	Trainers int `json:"trainers"`
	// TasksPerSec is Trainers over the cadence; WritesPerSec that times
	// the measured writes per call.
	TasksPerSec  float64 `json:"tasks_per_sec"`
	WritesPerSec float64 `json:"writes_per_sec"`
	// KeepAlivesPerSec is the measured keep-alives a trainer a second,
	// times Trainers.
	KeepAlivesPerSec float64 `json:"keep_alives_per_sec"`
	// LeaderCPUMsPerWrite is the measured leader CPU over the measured
	// writes (its keep-alives included), and LeaderCores that times
	// WritesPerSec.
	LeaderCPUMsPerWrite float64 `json:"leader_cpu_ms_per_write"`
	LeaderCores         float64 `json:"leader_cores"`
	// Cores is the modelled machine's; Fits says LeaderCores is below
	// it.
	Cores int  `json:"cores"`
	Fits  bool `json:"fits"`
}

// ExtrapolateFleet models run at trainers trainers of the same cadence on
// a machine of cores cores as fast as the measured one: the tasks a
// second grow with the trainers (trainers / cadence), each costs the
// writes a call cost in run, the keep-alives grow with the trainers, and
// the leader's CPU grows with the writes at run's CPU per write (which
// includes the keep-alives, in their measured proportion to writes). A
// run in which not every trainer started, or without writes or calls,
// was no steady fleet and models nothing.
func ExtrapolateFleet(run FleetRun, cadence time.Duration, trainers, cores int) FleetModel {
	m := FleetModel{Trainers: trainers, Cores: cores}
	if run.Trainers <= 0 || run.Ramped < run.Trainers || run.Calls.N == 0 || run.WritesPerSec <= 0 || cadence <= 0 {
		return m
	}
	m.TasksPerSec = float64(trainers) / cadence.Seconds()
	m.WritesPerSec = m.TasksPerSec * run.WritesPerCall
	m.KeepAlivesPerSec = run.KeepAlivesPerSec / float64(run.Trainers) * float64(trainers)
	m.LeaderCPUMsPerWrite = run.LeaderCores * 1000 / run.WritesPerSec
	m.LeaderCores = m.LeaderCPUMsPerWrite / 1000 * m.WritesPerSec
	m.Fits = m.LeaderCores < float64(cores)
	return m
}

// fleetCall is one trainer call: when it was due, started and answered.
type fleetCall struct {
	due, t0, t1 time.Time
	err         string // the error's first line, "" for none
	passEnd     bool
}

// fleetTrainer is one simulated trainer: its own client (identity and
// session) over the shared transport, its period and its calls.
type fleetTrainer struct {
	cl     *client.Client
	reader harness.Reader
	period time.Duration
	phase  time.Duration
	calls  []fleetCall
}

// fleetTasks is the dataset a fleet of n trainers needs so that one pass
// outlasts the run: every trainer's calls over the ramp, a longest period,
// the window and a longest period after, at its shortest period, plus
// one.
func fleetTasks(n int, cadence, ramp time.Duration, spread float64, window time.Duration) int {
	lo, hi := cadence.Seconds()*(1-spread), cadence.Seconds()*(1+spread)
	per := int(math.Ceil((ramp.Seconds()+2*hi+window.Seconds())/lo)) + 1
	return n * per
}

// fleetSpread is how far a trainer's period may be from the cadence.
const fleetSpread = 0.1

func (s *suite) fleet(ctx context.Context, res *Results) error {
	cfg := s.cfg
	out := &FleetResults{CadenceMillis: measure.Millis(cfg.FleetCadence), CadenceSpread: fleetSpread,
		SessionTTLMillis: measure.Millis(cfg.FleetSessionTTL), Connections: cfg.FleetConnections,
		WindowSeconds: cfg.FleetDuration.Seconds(), Extrapolate: cfg.FleetExtrapolate,
		Hardware: FleetHardware{CPUModel: cpuModel(), Cores: res.Host.CPUs}}
	res.Fleet = out
	if out.SessionTTLMillis == 0 {
		out.SessionTTLMillis = measure.Millis(rpc.DefaultSessionTTL)
	}
	if lim, err := raiseFileLimit(); err != nil {
		s.logf("fleet: cannot raise the open-file limit: %v", err)
	} else {
		s.logf("fleet: open-file limit %d", lim)
	}
	var errs []error
	for _, n := range cfg.FleetTrainers {
		if err := ctx.Err(); err != nil {
			return err
		}
		run := s.fleetRun(ctx, n)
		run.Model = ExtrapolateFleet(run, cfg.FleetCadence, cfg.FleetExtrapolate, out.Hardware.Cores)
		out.Runs = append(out.Runs, run)
		if run.Error != "" {
			errs = append(errs, fmt.Errorf("%d trainers: %s", n, run.Error))
			continue
		}
		m := run.Model
		if m.WritesPerSec == 0 {
			s.logf("fleet %d trainers: not a steady fleet (%d of them started), not extrapolated", n, run.Ramped)
			continue
		}
		s.logf("fleet %d trainers: extrapolated to %d: %.0f writes/s, %.0f keep-alives/s, leader %.2f cores (%.3f ms CPU a write) of %d",
			n, m.Trainers, m.WritesPerSec, m.KeepAlivesPerSec, m.LeaderCores, m.LeaderCPUMsPerWrite, m.Cores)
	}
	if err := errors.Join(errs...); err != nil {
		out.Error = firstLine(err.Error())
		return err
	}
	return ctx.Err()
}

// fleetRun starts a 3-node cluster, runs n trainers on it and measures the
// window.
func (s *suite) fleetRun(ctx context.Context, n int) (run FleetRun) {
	cfg := s.cfg
	ramp := cfg.fleetRamp(n)
	run = FleetRun{Trainers: n, Tasks: fleetTasks(n, cfg.FleetCadence, ramp, fleetSpread, cfg.FleetDuration), RampMillis: measure.Millis(ramp)}
	var c *harness.Cluster
	fail := func(err error) FleetRun {
		run.Error = firstLine(err.Error())
		if c != nil {
			s.logf("fleet %d: %v\n%s", n, err, c.LogTail())
		} else {
			s.logf("fleet %d: %v", n, err)
		}
		return run
	}
	s.logf("fleet: %d trainers, a task every %s (±%.0f%%) each, starting over %s, over %d connections a node, %s window; %d tasks",
		n, cfg.FleetCadence, fleetSpread*100, ramp, cfg.FleetConnections, cfg.FleetDuration, run.Tasks)
	path, err := s.dataset(run.Tasks)
	if err != nil {
		return fail(err)
	}
	c, err = harness.StartRaft(ctx, s.bin, s.dir("fleet", strconv.Itoa(n)), 3)
	if err != nil {
		return fail(err)
	}
	defer c.Stop()
	if err := waitSessionLevel(ctx, c); err != nil {
		return fail(err)
	}
	if _, err := c.SetDataset(path, time.Minute, 5*time.Minute); err != nil {
		return fail(fmt.Errorf("set dataset: %w", err))
	}

	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxConnsPerHost = cfg.FleetConnections
	t.MaxIdleConnsPerHost = cfg.FleetConnections
	t.MaxIdleConns = 3 * cfg.FleetConnections
	defer t.CloseIdleConnections()
	counts := &requestCounter{}
	hc := &http.Client{Transport: counts.wrap(t)}
	// A new client's first call may wait for a connection of the shared
	// pool longer than the client's first-contact timeout: let it wait
	// its retry budget, as a call to a cluster it has reached does.
	opts := []client.Option{client.WithAddrs(c.APIs()...), client.WithRetry(time.Minute), client.WithHTTPClient(hc),
		client.WithFirstContactTimeout(0)}
	if cfg.FleetSessionTTL > 0 {
		opts = append(opts, client.WithSessionTTL(cfg.FleetSessionTTL))
	}
	rng := rand.New(rand.NewPCG(uint64(n), 1))
	trainers := make([]*fleetTrainer, n)
	defer closeFleet(trainers)
	for i := range trainers {
		cl, err := client.NewClient(opts...)
		if err != nil {
			return fail(err)
		}
		period := time.Duration(float64(cfg.FleetCadence) * (1 - fleetSpread + 2*fleetSpread*rng.Float64()))
		trainers[i] = &fleetTrainer{cl: cl, period: period, phase: time.Duration(rng.Int64N(int64(ramp)))}
	}

	var d harness.Dispatch
	tctx, stop := context.WithCancel(ctx)
	defer stop()
	var started sync.WaitGroup // every trainer's first call answered
	started.Add(n)
	var ramped atomic.Int64
	var wg sync.WaitGroup
	begin := time.Now()
	for _, tr := range trainers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr.loop(tctx, &d, begin, func(ok bool) {
				if ok {
					ramped.Add(1)
				}
				started.Done()
			})
		}()
	}
	allStarted := make(chan struct{})
	go func() { started.Wait(); close(allStarted) }()
	rampLimit := time.NewTimer(ramp + time.Minute)
	defer rampLimit.Stop()
	select {
	case <-allStarted:
		run.RampSeconds = time.Since(begin).Seconds()
		run.Ramped = int(ramped.Load())
		s.logf("fleet %d: %d trainers have their session and a task after %.1f s; measuring %s", n, run.Ramped, run.RampSeconds, cfg.FleetDuration)
	case <-rampLimit.C:
		run.RampSeconds = time.Since(begin).Seconds()
		run.Ramped = int(ramped.Load())
		s.logf("fleet %d: only %d trainers have their session and a task after %.1f s; measuring %s anyway", n, run.Ramped, run.RampSeconds, cfg.FleetDuration)
	case <-ctx.Done():
		stop()
		wg.Wait()
		return fail(ctx.Err())
	}

	leader, st0, err := c.Leader(ctx)
	if err != nil {
		stop()
		wg.Wait()
		return fail(err)
	}
	ka0 := clusterKeepAlives(ctx, c)
	cpu0, self0, w0 := nodeCPU(c.Procs), selfCPU(), time.Now()
	slept := sleepCtx(ctx, cfg.FleetDuration)
	cpu1, self1, w1 := nodeCPU(c.Procs), selfCPU(), time.Now()
	leader2, st1, lerr := c.Leader(ctx)
	ka1 := clusterKeepAlives(ctx, c)
	stop()
	wg.Wait()
	if !slept {
		return fail(ctx.Err())
	}
	if lerr != nil {
		return fail(lerr)
	}
	wall := w1.Sub(w0).Seconds()
	run.WindowSeconds = wall
	run.Load = loadAverage()
	run.IndexBefore, run.IndexAfter = st0.AppliedIndex, st1.AppliedIndex
	run.LeaderChanged = leader2 != leader || st1.Term != st0.Term
	run.KeepAlivesPerSec = float64(ka1-ka0) / wall
	run.BenchCores = float64(self1-self0) / 1000 / wall
	for k, p := range c.Procs {
		cores := float64(cpu1[k]-cpu0[k]) / 1000 / wall
		if p == leader {
			run.LeaderCores = cores
		} else {
			run.FollowerCores = max(run.FollowerCores, cores)
		}
	}
	run.LeaderCoresPer1000 = run.LeaderCores * 1000 / float64(n)

	var first, calls []float64
	kinds := map[string]int{}
	for _, tr := range trainers {
		for k, call := range tr.calls {
			ms := measure.Millis(call.t1.Sub(call.t0))
			if call.err != "" {
				kinds[call.err]++
			}
			if k == 0 && call.err == "" {
				first = append(first, ms)
				continue
			}
			if call.t1.Before(w0) || !call.t1.Before(w1) {
				continue
			}
			switch {
			case call.err != "":
				run.Errors++
				continue
			case call.passEnd:
				run.PassEnds++
			}
			if call.t0.Sub(call.due) > tr.period {
				run.Late++
			}
			calls = append(calls, ms)
		}
	}
	run.ErrorKinds = topKinds(kinds, 3)
	run.First = measure.Distribute(first)
	run.Calls = measure.Distribute(calls)
	run.CallsPerSec = float64(len(calls)) / wall
	writes := float64(run.IndexAfter) - float64(run.IndexBefore)
	run.WritesPerSec = writes / wall
	if len(calls) > 0 {
		run.WritesPerCall = writes / float64(len(calls))
	}
	s.logf("fleet %d: %d calls (%.0f/s), p50 %.1f ms, p99 %.1f ms, max %.1f ms; %d late, %d errors; %.0f writes/s (%.2f a call); %.0f keep-alives/s; "+
		"leader %.2f cores (%.3f per 1,000 trainers), follower %.2f, bench %.2f; load %s",
		n, run.Calls.N, run.CallsPerSec, run.Calls.P50, run.Calls.P99, run.Calls.Max, run.Late, run.Errors, run.WritesPerSec, run.WritesPerCall,
		run.KeepAlivesPerSec, run.LeaderCores, run.LeaderCoresPer1000, run.FollowerCores, run.BenchCores, run.Load)
	if run.LeaderChanged {
		s.logf("fleet %d: the leader changed during the window", n)
	}
	if len(run.ErrorKinds) > 0 {
		s.logf("fleet %d: failed calls (ramp included): %v", n, run.ErrorKinds)
	}
	return run
}

// loop runs the trainer until ctx is done: its first call at its phase,
// then one a period, each due a period after the last was due (a call
// that overruns is followed at once). A call that ends the pass is
// followed at once by one on the next. started is called once, with true
// when the first call is answered, with false when it failed or the
// trainer stops before.
func (tr *fleetTrainer) loop(ctx context.Context, d *harness.Dispatch, begin time.Time, started func(ok bool)) {
	var once sync.Once
	defer once.Do(func() { started(false) })
	due := begin.Add(tr.phase)
	for ctx.Err() == nil {
		if !sleepCtx(ctx, time.Until(due)) {
			return
		}
		for again := 0; again < 3; again++ {
			call := fleetCall{due: due, t0: time.Now()}
			err := d.Step(ctx, &tr.reader, tr.cl, func(time.Time, time.Time) {}, nil)
			call.t1 = time.Now()
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				// Drop the task held: its session hands it back.
				call.err, tr.reader = errorKind(err), harness.Reader{}
			}
			call.passEnd = err == nil && !tr.reader.Holding()
			tr.calls = append(tr.calls, call)
			if len(tr.calls) == 1 {
				once.Do(func() { started(call.err == "") })
			}
			if !call.passEnd {
				break
			}
		}
		due = due.Add(tr.period)
	}
}

// closeFleet closes every trainer's client (and its session), 64 at a
// time.
func closeFleet(trainers []*fleetTrainer) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < len(trainers); i = int(next.Add(1) - 1) {
				if tr := trainers[i]; tr != nil && tr.cl != nil {
					tr.cl.Close()
				}
			}
		}()
	}
	wg.Wait()
}

// selfCPU is this process's CPU time, user and system, in milliseconds.
func selfCPU() int64 {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return (utime + stime) * 10 // USER_HZ is 100 on Linux
}

// cpuModel is the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// raiseFileLimit raises this process's soft limit of open files to its
// hard limit and returns the new soft limit.
func raiseFileLimit() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return 0, err
		}
	}
	return lim.Cur, nil
}

// errorKind is err's first line without the numbers in it (task ids,
// passes, addresses), so that errors of one kind count together.
func errorKind(err error) string {
	line := firstLine(err.Error())
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return 'N'
		}
		return r
	}, line)
}

// topKinds keeps the k most frequent kinds of counts (ties by text).
func topKinds(counts map[string]int, k int) map[string]int {
	keys := make([]string, 0, len(counts))
	for key := range counts {
		keys = append(keys, key)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if c := cmp.Compare(counts[b], counts[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	if len(keys) == 0 {
		return nil
	}
	out := map[string]int{}
	for _, key := range keys[:min(k, len(keys))] {
		out[key] = counts[key]
	}
	return out
}

// clusterKeepAlives is the keep-alives every running node has answered
// 200: only a leader answers them, so the sum counts those of every
// leader the window had. A node that cannot be read counts none.
func clusterKeepAlives(ctx context.Context, c *harness.Cluster) int64 {
	var n float64
	for _, p := range c.Procs {
		if m, err := leaderMetrics(ctx, p.APIAddr); err == nil {
			n += m.keepAlives()
		}
	}
	return int64(n)
}
