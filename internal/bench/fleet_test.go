package bench

import (
	"errors"
	"maps"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/internal/bench/measure"
)

// TestExtrapolateFleet checks the linear model on a run whose figures
// make every term known: 1,000 trainers at a task every 10 s, 1.1 writes
// a call, 100 writes/s, 600 keep-alives/s and the leader at 0.2 cores.
func TestExtrapolateFleet(t *testing.T) {
	run := FleetRun{Trainers: 1_000, Ramped: 1_000, Calls: measure.Distribution{N: 5_000}, WritesPerSec: 100, WritesPerCall: 1.1,
		KeepAlivesPerSec: 600, LeaderCores: 0.2}
	m := ExtrapolateFleet(run, 10*time.Second, 100_000, 2)
	near := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	near("tasks/s", m.TasksPerSec, 10_000)
	near("writes/s", m.WritesPerSec, 11_000)
	near("keep-alives/s", m.KeepAlivesPerSec, 60_000)
	near("leader CPU ms a write", m.LeaderCPUMsPerWrite, 2) // 0.2 cores over 100 writes/s
	near("leader cores", m.LeaderCores, 22)
	if m.Trainers != 100_000 || m.Cores != 2 || m.Fits {
		t.Errorf("model %+v: want 100,000 trainers on 2 cores, not fitting", m)
	}
	if m := ExtrapolateFleet(run, 10*time.Second, 1_000, 64); !m.Fits || math.Abs(m.LeaderCores-0.22) > 1e-9 {
		t.Errorf("the run's own size on 64 cores: %+v, want 0.22 cores, fitting", m)
	}
	// A run that measured nothing models nothing.
	notAllStarted := run
	notAllStarted.Ramped = 999
	for _, bad := range []FleetRun{{Trainers: 1_000, Ramped: 1_000}, {Trainers: 1_000, Ramped: 1_000, Calls: measure.Distribution{N: 1}},
		{Calls: measure.Distribution{N: 1}, WritesPerSec: 1}, notAllStarted} {
		if m := ExtrapolateFleet(bad, 10*time.Second, 100_000, 2); m.WritesPerSec != 0 || m.LeaderCores != 0 || m.Fits {
			t.Errorf("ExtrapolateFleet(%+v) = %+v, want nothing modelled", bad, m)
		}
	}
}

// TestFleetTasks checks that the dataset outlasts the run: every trainer
// at its shortest period over the ramp, the window and a longest period.
func TestFleetTasks(t *testing.T) {
	// Periods 9–11 s: (10 + 22 + 60) / 9 → 11 calls, and one more.
	if got := fleetTasks(1_000, 10*time.Second, 10*time.Second, 0.1, time.Minute); got != 12_000 {
		t.Errorf("fleetTasks(1000, 10s, ramp 10s, 10%%, 1m) = %d, want 12000", got)
	}
	if got := fleetTasks(10, time.Second, 30*time.Second, 0, 10*time.Second); got != 430 {
		t.Errorf("fleetTasks(10, 1s, ramp 30s, 0, 10s) = %d, want 430", got)
	}
}

// TestFleetReport checks that the fleet's rows, the target's verdict and
// the model print.
func TestFleetReport(t *testing.T) {
	run := FleetRun{Trainers: 10_000, Ramped: 10_000, Calls: measure.Distribution{N: 60_000, P50: 12.5, P99: 140.25, Max: 300},
		CallsPerSec: 1_000, WritesPerSec: 1_000, WritesPerCall: 1, KeepAlivesPerSec: 6_000, LeaderCores: 0.8, LeaderCoresPer1000: 0.08, Late: 7}
	run.Model = ExtrapolateFleet(run, 10*time.Second, 100_000, 2)
	r := &Results{Config: Config{Parts: []string{PartFleet}}, Fleet: &FleetResults{CadenceMillis: 10_000, CadenceSpread: 0.1, SessionTTLMillis: 5_000,
		Connections: 100, WindowSeconds: 60, Extrapolate: 100_000, Hardware: FleetHardware{CPUModel: "a CPU", Cores: 2},
		Runs: []FleetRun{run, {Trainers: 1_000, Error: "cluster did not start"}}}}
	md := Markdown(r)
	for _, want := range []string{
		"## 8. A fleet of trainers",
		"| 10,000 | 1000 | 12.5 | **140.2** | 300.0 |",
		"**0.80** | 0.080 |",
		"| 1,000 | failed: cluster did not start |",
		"10,000 trainers: 7 calls started more than a period late.",
		"p99 call latency ≤ 100 ms: not met (140.2 ms); the leader below one core: met (0.80 cores)",
		"### Extrapolated to 100,000 trainers",
		"| 10,000 | 100,000 | 10000 | 10000 | 60000 | 0.800 | **8.00** | no |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "etcd Put") {
		t.Error("a fleet-only report describes systems it did not run")
	}
	// A fleet that did not keep its cadence says nothing of the leader.
	slow := run
	slow.Ramped, slow.CallsPerSec, slow.LeaderCores = 9_662, 98, 0.22
	r.Fleet.Runs = []FleetRun{slow}
	want := "the leader below one core: not measured: the fleet did not keep its cadence (98 calls/s of 1000)"
	if md := Markdown(r); !strings.Contains(md, want) {
		t.Errorf("the report of a fleet behind its cadence lacks %q:\n%s", want, md)
	}
}

// TestFleetErrorKinds checks that errors differing only in their digits
// count as one kind, on their first line, and that the most frequent
// kinds are kept.
func TestFleetErrorKinds(t *testing.T) {
	counts := map[string]int{}
	for _, e := range []string{"GetTaskAfter(0): task 12 expired\nmore", "GetTaskAfter(1): task 34 expired", "GetTaskAfter(2): task 56 expired",
		"dial 127.0.0.1:80: refused", "dial 127.0.0.2:81: refused", "rare"} {
		counts[errorKind(errors.New(e))]++
	}
	got := topKinds(counts, 2)
	want := map[string]int{"GetTaskAfter(N): task NN expired": 3, "dial NNN.N.N.N:NN: refused": 2}
	if !maps.Equal(got, want) {
		t.Errorf("topKinds = %v, want %v", got, want)
	}
	if got := topKinds(map[string]int{}, 3); got != nil {
		t.Errorf("topKinds of none = %v, want nil", got)
	}
}
