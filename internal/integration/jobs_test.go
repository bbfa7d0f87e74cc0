package integration

import (
	"errors"
	"strings"
	"testing"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/internal/etcdtest"
	"github.com/raftmaster/raftmaster/internal/proccluster"
)

// TestTwoJobsOneQuorum runs two jobs on one 3-node cluster of real
// processes: each job's trainers read each of its passes exactly once, a
// crossed task would show as a record delivered twice. While job a runs,
// job b is deleted through the CLI and re-created with a new dataset, which
// counts as its first. The CLI lists both jobs and cluster inspect shows a
// line per job.
func TestTwoJobsOneQuorum(t *testing.T) {
	c := proccluster.Start(t, proccluster.Options{Args: []string{"--chunks-per-task", "1"}})
	c.WaitReady()
	addrs := strings.Join(c.APIAddrs(), ",")
	at := client.WithAddrs(c.APIAddrs()...)

	globA := writeDataset(t, t.TempDir(), 200, 40, 20)
	globB := writeDataset(t, t.TempDir(), 60, 30, 20)
	if out, err := cli(t, c, "dataset", "set", "--addr", addrs, "--job", "job-a", globA); err != nil {
		t.Fatalf("dataset set --job job-a: %v\n%s", err, out)
	}
	if err := newClient(t, at, client.WithJob("job-b")).SetDataset([]string{globB}); err != nil {
		t.Fatal(err)
	}

	const passesA = 3
	var logA, logB passLog
	waitA := startTrainers(t, 2, passesA, &logA, at, client.WithJob("job-a"), client.WithBuffer(4))
	waitB := startTrainers(t, 2, 1, &logB, at, client.WithJob("job-b"))
	waitB()
	checkPasses(t, &logB, 1, 60, false)

	out, err := cli(t, c, "job", "list", "--addr", addrs)
	if err != nil || !strings.Contains(out, "job-a") || !strings.Contains(out, "job-b") {
		t.Fatalf("job list: %v\n%s", err, out)
	}

	// Job b goes away while job a's trainers run, and comes back with a
	// new dataset of its own.
	first, err := newClient(t, at).Job("job-b")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := cli(t, c, "job", "delete", "--addr", addrs, "job-b"); err != nil {
		t.Fatalf("job delete: %v\n%s", err, out)
	}
	if _, err := newClient(t, at).Job("job-b"); !errors.Is(err, client.ErrUnknownJob) {
		t.Fatalf("inspecting the deleted job: %v", err)
	}
	globB2 := writeDataset(t, t.TempDir(), 300, 100, 20)
	if err := newClient(t, at, client.WithJob("job-b")).SetDataset([]string{globB2}); err != nil {
		t.Fatal(err)
	}
	var logB2 passLog
	startTrainers(t, 2, 2, &logB2, at, client.WithJob("job-b"))()
	checkPasses(t, &logB2, 2, 300, false)

	waitA()
	checkPasses(t, &logA, passesA, 200, false)

	out, err = cli(t, c, "cluster", "inspect", "--addr", addrs)
	if err != nil {
		t.Fatalf("cluster inspect: %v\n%s", err, out)
	}
	for _, want := range []string{"jobs:", "job-a", "job-b"} {
		if !strings.Contains(out, want) {
			t.Fatalf("cluster inspect lacks %q:\n%s", want, out)
		}
	}
	jb, err := newClient(t, at).Job("job-b")
	if err != nil {
		t.Fatal(err)
	}
	// Its new dataset counts, not the first one, and its passes started
	// again from 0.
	if jb.Tasks == first.Tasks || jb.Pass != 2 || first.Pass != 1 {
		t.Fatalf("re-created job b after two passes of its new dataset: %+v (before the delete: %+v)", jb, first)
	}
	// The default job saw none of it.
	st, err := newClient(t, at).Status()
	if err != nil {
		t.Fatal(err)
	}
	if st.FSM.HasDataset || st.FSM.Jobs != 2 {
		t.Fatalf("default job %+v, want no dataset and 2 jobs in all", st.FSM)
	}
}

// TestJobsOnTheEtcdBackend: the etcd backend runs the same state machine,
// so a job other than default works there too.
func TestJobsOnTheEtcdBackend(t *testing.T) {
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
