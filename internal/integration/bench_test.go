package integration

import (
	"encoding/json"
	"os/exec"
	"strconv"
	"testing"

	"github.com/raftmaster/raftmaster/internal/etcdtest"
	"github.com/raftmaster/raftmaster/internal/proccluster"
)

type benchRow struct {
	Backend   string  `json:"backend"`
	Ops       int     `json:"ops"`
	OpsPerSec float64 `json:"ops_per_sec"`
	Ratio     float64 `json:"ratio"`
}

// runBench runs `raftmaster bench --json` against a fresh etcd and returns
// its rows.
func runBench(t testing.TB, args ...string) []benchRow {
	t.Helper()
	e := etcdtest.Start(t)
	cmd := exec.Command(proccluster.Binary(t), append([]string{"bench", "--json", "--etcd-endpoints", e.Endpoint}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("raftmaster bench: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	var rows []benchRow
	if err := json.Unmarshal(out, &rows); err != nil {
		t.Fatalf("bench output %q: %v", out, err)
	}
	return rows
}

// TestBenchCommand: `raftmaster bench` runs the same workload on both
// backends and accounts for every operation: two per task per pass.
func TestBenchCommand(t *testing.T) {
	needsProcesses(t)
	const tasks, passes = 60, 2
	rows := runBench(t, "--tasks", strconv.Itoa(tasks), "--passes", strconv.Itoa(passes), "--clients", "3")
	if len(rows) != 2 || rows[0].Backend != "raft" || rows[1].Backend != "etcd" {
		t.Fatalf("rows %+v, want raft then etcd", rows)
	}
	for _, r := range rows {
		if r.Ops != 2*tasks*passes || r.OpsPerSec <= 0 {
			t.Errorf("%s: %d ops at %.0f/s, want %d ops", r.Backend, r.Ops, r.OpsPerSec, 2*tasks*passes)
		}
	}
	if rows[0].Ratio != 1 {
		t.Errorf("the first backend's ratio is %v, want 1", rows[0].Ratio)
	}
}

// BenchmarkBackends reports task-dispatch throughput of a 3-node Raft
// cluster and of the etcd backend on the same workload, in the same run.
func BenchmarkBackends(b *testing.B) {
	for range b.N {
		rows := runBench(b, "--tasks", "2000", "--clients", "8")
		b.ReportMetric(rows[0].OpsPerSec, "raft-ops/s")
		b.ReportMetric(rows[1].OpsPerSec, "etcd-ops/s")
		b.ReportMetric(rows[1].Ratio, "etcd/raft")
	}
}
