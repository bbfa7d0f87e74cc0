package integration

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/internal/etcdtest"
	"github.com/raftmaster/raftmaster/internal/proccluster"
)

// TestThreeJobsThroughALeaderKill runs three jobs at once on one 3-node
// cluster of real processes, each with its own dataset and trainers, and
// kills the leader while all three are mid-pass: every pass of every job
// is read exactly once (a task of one job dispatched in another would show
// as a record read twice). Meanwhile a fourth job is created by the CLI,
// read, deleted and re-created with a new dataset, which counts as its
// first. The CLI lists the jobs and cluster inspect shows a line per job.
func TestThreeJobsThroughALeaderKill(t *testing.T) {
	needsProcesses(t)
	c := proccluster.Start(t, proccluster.Options{Args: []string{"--chunks-per-task", "1", "--failover-grace", "2s"}})
	c.WaitReady()
	addrs := strings.Join(c.APIAddrs(), ",")
	at := client.WithAddrs(c.APIAddrs()...)

	type job struct {
		name    string
		records int
		log     passLog
		wait    func()
	}
	const passes = 3
	jobs := []*job{{name: "job-a", records: 200}, {name: "job-b", records: 120}, {name: "job-c", records: 160}}
	for i, j := range jobs {
		glob := writeDataset(t, t.TempDir(), j.records, 40, 60)
		if i == 0 {
			// Through the CLI's --job.
			if out, err := cli(t, c, "dataset", "set", "--addr", addrs, "--job", j.name, glob); err != nil {
				t.Fatalf("dataset set --job %s: %v\n%s", j.name, err, out)
			}
			continue
		}
		if err := newClient(t, at, client.WithJob(j.name)).SetDataset([]string{glob}); err != nil {
			t.Fatal(err)
		}
	}
	for _, j := range jobs {
		j.wait = startTrainers(t, 2, passes, &j.log, at, client.WithJob(j.name), client.WithBuffer(4))
	}
	c.WaitFor("every job's first pass to be under way", time.Minute, func() bool {
		for _, j := range jobs {
			if j.log.delivered(0) < 20 {
				return false
			}
		}
		return true
	})
	leader := c.Leader()
	t.Logf("killing leader %s", leader.ID)
	c.Kill(leader)

	// A fourth job comes and goes while the three run.
	if out, err := cli(t, c, "job", "create", "--addr", addrs, "job-d"); err != nil {
		t.Fatalf("job create: %v\n%s", err, out)
	}
	if err := newClient(t, at, client.WithJob("job-d")).SetDataset([]string{writeDataset(t, t.TempDir(), 60, 30, 60)}); err != nil {
		t.Fatal(err)
	}
	var logD passLog
	startTrainers(t, 2, 1, &logD, at, client.WithJob("job-d"))()
	checkPasses(t, &logD, 1, 60, false)
	first, err := newClient(t, at).Job("job-d")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := cli(t, c, "job", "delete", "--addr", addrs, "job-d"); err != nil {
		t.Fatalf("job delete: %v\n%s", err, out)
	}
	if _, err := newClient(t, at).Job("job-d"); !errors.Is(err, client.ErrUnknownJob) {
		t.Fatalf("inspecting the deleted job: %v", err)
	}
	if err := newClient(t, at, client.WithJob("job-d")).SetDataset([]string{writeDataset(t, t.TempDir(), 300, 100, 20)}); err != nil {
		t.Fatal(err)
	}
	var logD2 passLog
	startTrainers(t, 2, 2, &logD2, at, client.WithJob("job-d"))()
	checkPasses(t, &logD2, 2, 300, false)
	again, err := newClient(t, at).Job("job-d")
	if err != nil {
		t.Fatal(err)
	}
	// Its new dataset counts, not the first one, and its passes started
	// again from 0.
	if again.Tasks == first.Tasks || again.Pass != 2 || first.Pass != 1 {
		t.Fatalf("re-created job d after two passes of its new dataset: %+v (before the delete: %+v)", again, first)
	}

	for _, j := range jobs {
		j.wait()
		checkPasses(t, &j.log, passes, j.records, false)
	}

	out, err := cli(t, c, "job", "list", "--addr", addrs)
	if err != nil {
		t.Fatalf("job list: %v\n%s", err, out)
	}
	out2, err := cli(t, c, "cluster", "inspect", "--addr", addrs)
	if err != nil {
		t.Fatalf("cluster inspect: %v\n%s", err, out2)
	}
	for _, name := range []string{"job-a", "job-b", "job-c", "job-d"} {
		if !strings.Contains(out, name) || !strings.Contains(out2, name) {
			t.Fatalf("job list or cluster inspect lacks %s:\n%s\n%s", name, out, out2)
		}
	}
	// The default job saw none of it.
	st, err := newClient(t, at).Status()
	if err != nil {
		t.Fatal(err)
	}
	if st.FSM.HasDataset || st.FSM.Jobs != 4 {
		t.Fatalf("default job %+v, want no dataset and 4 jobs in all", st.FSM)
	}
	c.Restart(leader)
	c.WaitReady()
	c.Converged(time.Minute)
}

// TestJobsOnTheEtcdBackend: the etcd backend runs the same state machine,
// so a job other than default works there too.
func TestJobsOnTheEtcdBackend(t *testing.T) {
	needsProcesses(t)
	e := etcdtest.Start(t)
	c := proccluster.StartEtcd(t, e.Endpoint, 1, "--chunks-per-task", "1")
	c.WaitReady()
	at := client.WithAddrs(c.APIAddrs()...)
	glob := writeDataset(t, t.TempDir(), 50, 25, 10)
	if err := newClient(t, at, client.WithJob("etcd-job")).SetDataset([]string{glob}); err != nil {
		t.Fatal(err)
	}
	var log passLog
	startTrainers(t, 2, 1, &log, at, client.WithJob("etcd-job"))()
	checkPasses(t, &log, 1, 50, false)
	if _, err := newClient(t, at).GetTask(0); !errors.Is(err, client.ErrNoDataset) {
		t.Fatalf("the default job leased a task of etcd-job: %v", err)
	}
	jobs, err := newClient(t, at).Jobs()
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs.Jobs) != 1 || jobs.Jobs[0].Name != "etcd-job" {
		t.Fatalf("jobs: %+v", jobs.Jobs)
	}
	if err := newClient(t, at).DeleteJob("etcd-job"); err != nil {
		t.Fatal(err)
	}
	if _, err := newClient(t, at, client.WithJob("etcd-job")).GetTask(0); !errors.Is(err, client.ErrNoDataset) {
		t.Fatalf("a deleted job still dispatches: %v", err)
	}
}

// TestExampleTrainerOnTheDefaultJob builds examples/trainer, written
// against the original's client API with no notion of jobs, and runs it on a
// cluster that also serves another job: it reads its passes from the
// default job, and the other job's dataset stays untouched.
func TestExampleTrainerOnTheDefaultJob(t *testing.T) {
	needsProcesses(t)
	c := proccluster.Start(t, proccluster.Options{Args: []string{"--chunks-per-task", "1"}})
	c.WaitReady()
	at := client.WithAddrs(c.APIAddrs()...)
	other := newClient(t, at, client.WithJob("other"))
	if err := other.SetDataset([]string{writeDataset(t, t.TempDir(), 40, 20, 60)}); err != nil {
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
	glob := writeDataset(t, t.TempDir(), 90, 30, 60)
	cmd := exec.Command(bin, "-addrs", strings.Join(c.APIAddrs(), ","), "-dataset", glob, "-trainers", "3", "-passes", "2")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("examples/trainer: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "read 180 records in 2 passes") {
		t.Fatalf("examples/trainer did not read 2 passes of 90 records:\n%s", out)
	}
	st, err := newClient(t, at).Status()
	if err != nil {
		t.Fatal(err)
	}
	if !st.FSM.HasDataset || st.FSM.Pass < 1 {
		t.Fatalf("the default job after the example: %+v", st.FSM)
	}
	job, err := newClient(t, at).Job("other")
	if err != nil {
		t.Fatal(err)
	}
	if job.Pass != 0 || job.Done != 0 || job.Pending != 0 {
		t.Fatalf("the other job changed under the example: %+v", job)
	}
}
