package integration

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/proccluster"
	"github.com/raftmaster/raftmaster/rpc"
)

// TestSecondDatasetNamesTheFirstsPatterns: on real processes, a trainer
// whose SetDataset names other patterns than the job's dataset was set
// with is answered ignored with the current patterns, and its client
// warns naming both; `dataset set` says which patterns the job reads, and
// `job inspect` shows them, in text and JSON, on every node and after the
// leader that recorded them is gone.
func TestSecondDatasetNamesTheFirstsPatterns(t *testing.T) {
	needsProcesses(t)
	if testing.Short() {
		t.Skip("starts a cluster of processes")
	}
	c := proccluster.Start(t, proccluster.Options{})
	waitProtocol4(c)
	quick := writeDataset(t, t.TempDir(), 100, 50, 10)
	demo := writeDataset(t, t.TempDir(), 30, 10, 10)

	var logs syncBuffer
	logger := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})
	first := newClient(t, client.WithAddrs(c.APIAddrs()...), client.WithJob("train"))
	resp, err := first.SetDatasetWithParams([]string{quick}, client.DatasetParams{})
	if err != nil || resp.Ignored || !slices.Equal(resp.CurrentPatterns, []string{quick}) {
		t.Fatalf("the first dataset: %+v, %v", resp, err)
	}
	second := newClient(t, client.WithAddrs(c.APIAddrs()...), client.WithJob("train"), client.WithLogger(logger))
	resp, err = second.SetDatasetWithParams([]string{demo}, client.DatasetParams{})
	if err != nil || !resp.Ignored || !slices.Equal(resp.CurrentPatterns, []string{quick}) {
		t.Fatalf("a dataset of other patterns: %+v, %v; want ignored with %q", resp, err, quick)
	}
	if out := logs.String(); !strings.Contains(out, "[WARN]") || !strings.Contains(out, demo) || !strings.Contains(out, quick) {
		t.Fatalf("the client logged no warning naming %q and %q:\n%s", demo, quick, out)
	}

	addr := follower(c).APIAddr
	out, err := cli(t, c, "dataset", "set", demo, "--addr", addr, "--job", "train")
	if err != nil || !strings.HasPrefix(out, "ignored: ") || !strings.Contains(out, "the job reads the files of: "+quick) {
		t.Fatalf("dataset set of other patterns: %v\n%s", err, out)
	}
	inspect := func(addr string) {
		t.Helper()
		out, err := cli(t, c, "job", "inspect", "train", "--addr", addr)
		if err != nil || !strings.Contains(out, "patterns:   "+quick+"\n") || !strings.Contains(out, "dataset:    2 files") {
			t.Fatalf("job inspect: %v\n%s", err, out)
		}
		out, err = cli(t, c, "job", "inspect", "train", "--addr", addr, "--json")
		var j rpc.Job
		if err == nil {
			err = json.Unmarshal([]byte(out), &j)
		}
		if err != nil || !slices.Equal(j.Patterns, []string{quick}) || j.Files != 2 || j.Chunks == 0 || j.Tasks == 0 {
			t.Fatalf("job inspect --json: %v\n%s", err, out)
		}
	}
	inspect(addr)

	// The patterns are the replicated state's: the next leader knows them.
	leader := c.Leader()
	c.Kill(leader)
	inspect(c.Others(leader)[0].APIAddr)
	before := len(logs.String())
	resp, err = second.SetDatasetWithParams([]string{demo}, client.DatasetParams{})
	if logged := logs.String()[before:]; err != nil || !resp.Ignored || !slices.Equal(resp.CurrentPatterns, []string{quick}) || !strings.Contains(logged, quick) {
		t.Fatalf("after a fail-over: %+v, %v; logged:\n%s", resp, err, logged)
	}
}

// waitProtocol4 waits until every node has applied protocol level 4, from
// which datasets record their patterns.
func waitProtocol4(c *proccluster.Cluster) {
	c.WaitFor("the cluster at protocol level 4", time.Minute, func() bool {
		for _, p := range c.Procs {
			if st, err := proccluster.Status(context.Background(), p.APIAddr); err != nil || st.ClusterProtocol < fsm.Protocol4 {
				return false
			}
		}
		return true
	})
}

// TestExampleTrainerTakesAJob: examples/trainer run with other patterns
// on a job whose dataset is set reads that dataset, and says so; with
// -job it reads its own dataset in a job of its own.
func TestExampleTrainerTakesAJob(t *testing.T) {
	needsProcesses(t)
	if testing.Short() {
		t.Skip("starts a cluster of processes")
	}
	c := proccluster.Start(t, proccluster.Options{Args: []string{"--chunks-per-task", "1"}})
	waitProtocol4(c)
	quick := writeDataset(t, t.TempDir(), 90, 30, 60)
	if err := newClient(t, client.WithAddrs(c.APIAddrs()...)).SetDataset([]string{quick}); err != nil {
		t.Fatal(err)
	}
	root, err := proccluster.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "trainer")
	build := exec.Command("go", "build", "-o", bin, "./examples/trainer")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/trainer: %v\n%s", err, out)
	}
	demo := writeDataset(t, t.TempDir(), 30, 10, 60)
	run := func(args ...string) string {
		t.Helper()
		args = append([]string{"-addrs", strings.Join(c.APIAddrs(), ","), "-dataset", demo, "-trainers", "3", "-passes", "2"}, args...)
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("examples/trainer %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	out := run()
	if !strings.Contains(out, "read 180 records in 2 passes") || !strings.Contains(out, "other patterns") || !strings.Contains(out, quick) {
		t.Fatalf("examples/trainer on the default job, whose dataset is another: no word of it, or not its 90 records a pass:\n%s", out)
	}
	out = run("-job", "demo")
	if !strings.Contains(out, "read 60 records in 2 passes") || strings.Contains(out, "other patterns") {
		t.Fatalf("examples/trainer -job demo did not read its 30 records a pass:\n%s", out)
	}
	j, err := newClient(t, client.WithAddrs(c.APIAddrs()...)).Job("demo")
	if err != nil || !slices.Equal(j.Patterns, []string{demo}) {
		t.Fatalf("job demo: %+v, %v", j, err)
	}
}
