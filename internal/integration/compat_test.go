package integration

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/proccluster"
)

// TestPreviousReleaseClients runs the clients of the previous release
// against a cluster of this one that has reached this build's protocol
// level: its CLI (kv cas and get, dataset set, job create and list,
// cluster inspect, backup, whose JSON answer this release still serves),
// a trainer built with its Go client (a rendezvous, then passes with the
// save-model lease), and its Python client (passes, the register, a join,
// the save-model lease). Every call succeeds, every pass delivers every
// record exactly once, and the old backup restores with this release.
func TestPreviousReleaseClients(t *testing.T) {
	needsProcesses(t)
	prev := previousSource(t)
	oldBin := prev.build(t, "./cmd/raftmaster", runtime.GOOS, runtime.GOARCH)
	c := proccluster.Start(t, proccluster.Options{})
	c.WaitReady()
	cl := newClient(t, client.WithAddrs(c.APIAddrs()...))
	c.WaitFor("the cluster at this build's protocol level", time.Minute, func() bool {
		st, err := cl.Status()
		return err == nil && st.ClusterProtocol == fsm.Protocol
	})
	addrs := strings.Join(c.APIAddrs(), ",")
	old := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(oldBin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("the previous release's raftmaster %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if out := old("--version"); !strings.Contains(out, prev.Version) {
		t.Fatalf("the previous release's binary says %q, want %s", out, prev.Version)
	}

	t.Run("cli", func(t *testing.T) {
		old("kv", "cas", "--addr", addrs, "--job", "old-cli", "rdzv", "--version", "0", "--value", "round-1")
		out := old("kv", "get", "--addr", addrs, "--job", "old-cli", "rdzv", "--json")
		if !strings.Contains(out, `"found": true`) {
			t.Fatalf("kv get after kv cas: %s", out)
		}
		old("job", "create", "--addr", addrs, "made-by-old")
		if out := old("job", "list", "--addr", addrs); !strings.Contains(out, "made-by-old") || !strings.Contains(out, "old-cli") {
			t.Fatalf("job list:\n%s", out)
		}
		// The limits renamed since (max_job_group_bytes, max_kv_value_bytes)
		// reach the old client under the names it reads.
		out = old("job", "list", "--addr", addrs, "--json")
		for _, want := range []string{fmt.Sprintf(`"max_job_group_data": %d`, fsm.DefaultMaxJobGroupBytes), fmt.Sprintf(`"max_kv_value": %d`, fsm.DefaultMaxKVValueBytes)} {
			if !strings.Contains(out, want) {
				t.Fatalf("job list --json of the previous release: no %s in\n%s", want, out)
			}
		}
		glob := writeDataset(t, t.TempDir(), 60, 20, 30)
		if out := old("dataset", "set", "--addr", addrs, "--job", "old-cli", "--chunks-per-task", "1", glob); !strings.Contains(out, "tasks") {
			t.Fatalf("dataset set: %s", out)
		}
		if j, err := cl.Job("old-cli"); err != nil || !j.HasDataset {
			t.Fatalf("the job the old CLI set a dataset for: %+v, %v", j, err)
		}
		out = old("cluster", "inspect", "--addr", addrs)
		for _, p := range c.Procs {
			if !strings.Contains(out, p.APIAddr) {
				t.Fatalf("cluster inspect lists no member at %s:\n%s", p.APIAddr, out)
			}
		}

		// The old CLI asks for the JSON answer; this release's restore
		// reads the file it writes.
		file := filepath.Join(t.TempDir(), "old.backup")
		out = old("backup", "--addr", addrs, "--out", file)
		if !regexp.MustCompile(`backup of index \d+`).MatchString(out) {
			t.Fatalf("backup: %s", out)
		}
		dir := filepath.Join(t.TempDir(), "restored")
		if out, err := cli(t, c, "restore", "--in", file, "--data-dir", dir, "--node-id", "r1", "--raft-addr", proccluster.FreePort(t)); err != nil {
			t.Fatalf("restoring the old CLI's backup: %v\n%s", err, out)
		}
	})

	t.Run("go-trainer", func(t *testing.T) {
		const trainers, passes, records = 3, 3, 120
		bin := prev.buildProgram(t, "previoustrainer")
		glob := writeDataset(t, t.TempDir(), records, 40, 30)
		cmd := exec.Command(bin, "-addrs", addrs, "-job", "old-go", "-dataset", glob,
			"-trainers", strconv.Itoa(trainers), "-passes", strconv.Itoa(passes))
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("the previous release's trainer: %v\n%s", err, stderrOf(err))
		}
		counts, lines := recordLines(t, string(out))
		if lines["rendezvous"] != trainers {
			t.Fatalf("rendezvous lines %d, want %d:\n%s", lines["rendezvous"], trainers, out)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if f := strings.Fields(l); len(f) == 3 && f[0] == "rendezvous" && f[2] != strconv.Itoa(trainers) {
				t.Fatalf("a trainer's rendezvous had %s members, want %d", f[2], trainers)
			}
		}
		checkPasses(t, counts, passes, records, false)
	})

	t.Run("python", func(t *testing.T) {
		const passes, records = 2, 80
		glob := writeDataset(t, t.TempDir(), records, 40, 30)
		cmd := exec.Command("/usr/bin/python3", filepath.Join("testdata", "previous_client.py"), addrs, "old-py", glob, strconv.Itoa(passes))
		cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(prev.Tree, "python"), "PYTHONDONTWRITEBYTECODE=1")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("the previous release's Python client: %v\n%s\n%s", err, out, stderrOf(err))
		}
		counts, lines := recordLines(t, string(out))
		if lines["done"] != 1 {
			t.Fatalf("the Python client did not finish:\n%s", out)
		}
		checkPasses(t, counts, passes, records, false)
	})
}

// recordLines reads the "record PASS RECORD" lines of out into a passLog,
// and counts the lines of each first word.
func recordLines(t *testing.T, out string) (*passLog, map[string]int) {
	t.Helper()
	log := &passLog{}
	lines := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		lines[f[0]]++
		if f[0] != "record" {
			continue
		}
		pass, err1 := strconv.Atoi(f[1])
		rec, err2 := strconv.Atoi(f[2])
		if len(f) != 3 || err1 != nil || err2 != nil {
			t.Fatalf("bad line %q", sc.Text())
		}
		log.add(pass, rec)
	}
	return log, lines
}

// stderrOf is what a failed command wrote to its standard error.
func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
