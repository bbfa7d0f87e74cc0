package bench

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary stand in for raftmaster-bench when the
// suite re-executes itself as an etcd member or a raw Raft node.
func TestMain(m *testing.M) {
	if IsChild(os.Args) {
		os.Exit(RunChild(os.Args, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestSmoke runs the suite's cheapest configuration, dispatch at one
// client for a second against all three systems, and checks that every
// system answered and the report and charts were written. It asserts no
// figure.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nine processes")
	}
	cfg := Defaults()
	cfg.Out = t.TempDir()
	cfg.Raftmaster = os.Getenv("RAFTMASTER_BIN")
	cfg.Parts = []string{PartDispatch}
	cfg.Runs = 1
	cfg.Concurrency = []int{1}
	cfg.DispatchTasks = 100
	cfg.Warmup, cfg.Window = 0, time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var progress strings.Builder
	res, err := Run(ctx, cfg, io.Discard, &progress)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if len(res.Errors) > 0 || res.Dispatch == nil || len(res.Dispatch.Rows) != 1 {
		t.Fatalf("errors %v, dispatch %+v\n%s", res.Errors, res.Dispatch, progress.String())
	}
	row := res.Dispatch.Rows[0]
	for name, s := range map[string]Series{"raftmaster": row.Raftmaster, "etcd": row.EtcdPut, "raw raft": row.RawRaft} {
		if !s.ok() || s.Runs[0].Ops == 0 {
			t.Errorf("%s: no operations measured: %+v\n%s", name, s, progress.String())
		}
	}
	for _, f := range []string{"results.md", "results.json", "dispatch.png"} {
		if _, err := os.Stat(filepath.Join(cfg.Out, f)); err != nil {
			t.Error(err)
		}
	}
	if _, err := Replot(cfg.Out); err != nil {
		t.Errorf("replot: %v", err)
	}
}
