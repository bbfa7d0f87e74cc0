package chaos

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return d
}

func report(t *testing.T, rep Report) {
	t.Helper()
	t.Logf("seed %d: %d ops, %d faults, pass %d, checked in %v, history %s",
		rep.Seed, rep.Ops, len(rep.Faults), rep.Passes, rep.Checked.Round(time.Millisecond), rep.HistoryPath)
	for _, j := range rep.Jobs {
		r := j.Register
		t.Logf("  job %-8s %d ops, pass %d; register: %d reads, %d compare-and-sets (%d swapped, %d unknown), %d other writes (%d unknown)",
			j.Name, j.Ops, j.Passes, r.Reads, r.CASes, r.Swapped, r.Unknown, r.Writes, r.WritesUnknown)
		s := j.Sessions
		t.Logf("  job %-8s sessions: %d opened, %d ended; %d keep-alives (%d expired), %d writes refused; %d stalls; task ops %d under sessions, %d without",
			j.Name, s.Opened, s.Ended, s.KeepAlives, s.KeepAlivesExpired, s.Refused, s.Stalls, s.TaskOps, s.LeaseOps)
	}
	r := rep.Resume
	t.Logf("  resume: %d schedules (%d cut short by the run's end), %d full restarts (%d between a commit and its save), %d checkpoints: %d duplicates, %d losses",
		r.Schedules, r.Unfinished, r.Restarts, r.Torn, r.Checkpoints, r.Duplicates, r.Losses)
	if n := len(rep.Leaders); n > 0 {
		lo, hi := rep.Leaders[0].Term, rep.Leaders[0].Term
		for _, c := range rep.Leaders {
			lo, hi = min(lo, c.Term), max(hi, c.Term)
		}
		t.Logf("  %d elections won, terms %d to %d", n, lo, hi)
	}
	for _, k := range append(slices.Clone(AllFaults), extraFaults...) {
		if d, ok := rep.Unavailable[k]; ok {
			t.Logf("  longest unavailability after %-18s %v", k+":", d.Round(time.Millisecond))
		}
	}
}

// TestChaosShort is the fixed-seed run of "make test": every fault kind
// once against a 3-node cluster, then every check.
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("fault injection runs real clusters")
	}
	if os.Getenv("CHAOS_TIME") != "" || os.Getenv("CHAOS_EXPECT_VIOLATION") != "" {
		t.Skip("a long or expect-violation run was asked for")
	}
	rep := Run(t, Config{Seed: 1, CoverAll: true})
	report(t, rep)
	for _, v := range rep.Violations {
		t.Errorf("violation: %s", v)
	}
	if t.Failed() {
		t.Logf("replay with: make chaos SEED=%d (history in %s)", rep.Seed, rep.HistoryPath)
	}
}

// TestChaos runs randomized schedules until CHAOS_TIME has passed (or the
// one seed in SEED), each for CHAOS_RUN. "make chaos" sets them.
func TestChaos(t *testing.T) {
	total := envDuration(t, "CHAOS_TIME", 0)
	if total == 0 {
		t.Skip("set CHAOS_TIME (make chaos) to run randomized schedules")
	}
	run := envDuration(t, "CHAOS_RUN", time.Minute)
	nodes, _ := strconv.Atoi(os.Getenv("CHAOS_NODES"))
	// CHAOS_FINISH_AND_GET is the share of trainers that read with
	// FinishAndGet (Config.FinishAndGet); 0 means none, unset the default.
	var combined float64
	if s := os.Getenv("CHAOS_FINISH_AND_GET"); s != "" {
		var err error
		if combined, err = strconv.ParseFloat(s, 64); err != nil || combined < 0 || combined > 1 {
			t.Fatalf("CHAOS_FINISH_AND_GET=%q: want a share from 0 to 1", s)
		}
		if combined == 0 {
			combined = -1
		}
	}
	out := os.Getenv("CHAOS_OUT")
	// CHAOS_FAULTS narrows the kinds drawn; empty means AllFaults.
	var faults []FaultKind
	if s := os.Getenv("CHAOS_FAULTS"); s != "" {
		var err error
		if faults, err = ParseFaults(s); err != nil {
			t.Fatalf("CHAOS_FAULTS: %v", err)
		}
	}
	var seeds []uint64
	if s := os.Getenv("SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SEED=%q: %v", s, err)
		}
		seeds = []uint64{seed}
	}
	start := time.Now()
	base := uint64(time.Now().UnixNano())
	runs := 0
	var sum Summary
	for i := 0; ; i++ {
		seed := base + uint64(i)
		if len(seeds) > 0 {
			if i == len(seeds) {
				break
			}
			seed = seeds[i]
		} else if time.Since(start) >= total {
			break
		}
		runs++
		ok := t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			rep := Run(t, Config{Seed: seed, Duration: run, Nodes: nodes, Faults: faults, OutDir: out, FinishAndGet: combined})
			report(t, rep)
			sum.Add(rep)
			for _, v := range rep.Violations {
				t.Errorf("violation: %s", v)
			}
			if t.Failed() {
				t.Logf("replay with: make chaos SEED=%d", seed)
			}
		})
		if !ok {
			break
		}
	}
	t.Logf("%d seeds in %v", runs, time.Since(start).Round(time.Second))
	var b strings.Builder
	sum.Write(&b)
	t.Logf("summary:\n%s", b.String())
}

// TestChaosExpectViolation runs against a deliberately broken build (see
// "make chaos-variants") and passes only if the checks catch it.
func TestChaosExpectViolation(t *testing.T) {
	if os.Getenv("CHAOS_EXPECT_VIOLATION") == "" {
		t.Skip("only for make chaos-variants")
	}
	// Faults that take the leader away while requests are in flight, and
	// restarts that restore from snapshots, are what the variants get wrong.
	// CHAOS_FAULTS names others for a variant that needs them, and
	// CHAOS_ONCE kinds to inject once per run (Config.Once).
	faults := []FaultKind{KillLeader, PauseLeader, KillFollower, RollingRestart}
	var once []FaultKind
	for name, dst := range map[string]*[]FaultKind{"CHAOS_FAULTS": &faults, "CHAOS_ONCE": &once} {
		if s := os.Getenv(name); s != "" {
			var err error
			if *dst, err = ParseFaults(s); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
	}
	// "1" takes any violation; other text must be in one, so that a variant
	// counts as caught only by the check that is meant to catch it.
	want := os.Getenv("CHAOS_EXPECT_VIOLATION")
	for seed := uint64(1); seed <= 5; seed++ {
		rep := Run(t, Config{Seed: seed, Duration: 45 * time.Second, Faults: faults, Once: once, OutDir: os.Getenv("CHAOS_OUT")})
		report(t, rep)
		for _, v := range rep.Violations {
			t.Logf("run %d: violation: %s", seed, firstLines(v, 5))
		}
		for _, v := range rep.Violations {
			if want == "1" || strings.Contains(v, want) {
				t.Logf("caught after %d run(s): %s", seed, firstLines(v, 5))
				return
			}
		}
	}
	t.Fatal("the broken variant was not caught in 5 runs")
}

// firstLines shortens a violation to its first n lines for the log.
func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines[n] = "..."
	}
	return strings.Join(lines, "\n")
}

func TestSummary(t *testing.T) {
	var s Summary
	s.Add(Report{Ops: 10, Jobs: []JobReport{{Name: "default", Ops: 6, Sessions: SessionReport{Opened: 3, Ended: 1, Stalls: 1}},
		{Name: "job-b", Ops: 4, Sessions: SessionReport{Opened: 2, Ended: 1}}}, Faults: []FaultRecord{{Kind: KillLeader}, {Kind: KillLeader}},
		Unavailable: map[FaultKind]time.Duration{KillLeader: time.Second}})
	s.Add(Report{Ops: 5, Jobs: []JobReport{{Name: "default", Ops: 2}, {Name: "job-b", Ops: 3}}, Violations: []string{"x"}, Faults: []FaultRecord{{Kind: KillLeader}},
		Unavailable: map[FaultKind]time.Duration{KillLeader: 3 * time.Second}})
	s.Add(Report{Ops: 1, Faults: []FaultRecord{{Kind: KillLeader}},
		Unavailable: map[FaultKind]time.Duration{KillLeader: 2 * time.Second}})
	var b strings.Builder
	if err := s.Write(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"3 runs, 4 faults, 16 operations, 1 violations", "operations per job: default 8, job-b 7",
		"sessions: 5 opened, 2 ended, 1 stalls", "kill-leader", "  4  ", "2s", "3s"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}

// TestFinishAndGetTrainers: the share of trainers that read with
// FinishAndGet is spread over them from the first, so that by default a
// job's three trainers have one that does under a session and one without.
func TestFinishAndGetTrainers(t *testing.T) {
	for _, tc := range []struct {
		share float64
		want  []bool
	}{
		{DefaultFinishAndGet, []bool{true, false, true}},
		{-1, []bool{false, false, false}},
		{1, []bool{true, true, true}},
		{0.3, []bool{true, false, false}},
		{0.6, []bool{true, true, false}},
	} {
		var got []bool
		for i := range 3 {
			got = append(got, finishAndGetTrainer(i, tc.share))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("share %v: %v, want %v", tc.share, got, tc.want)
		}
	}
}

func TestParseFaults(t *testing.T) {
	got, err := ParseFaults("pause-leader, crash-all,pause-leader")
	if err != nil {
		t.Fatal(err)
	}
	if want := []FaultKind{PauseLeader, CrashAll, PauseLeader}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if _, err := ParseFaults("kill-leader,crash-some"); err == nil {
		t.Error("an unknown kind was accepted")
	}
}
