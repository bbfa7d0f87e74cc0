package integration

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/proccluster"
	"github.com/raftmaster/raftmaster/rpc"
)

var (
	trainerOnce sync.Once
	trainerPath string
	trainerErr  error
)

// trainerBinary builds examples/trainer once per test process.
func trainerBinary(t *testing.T) string {
	t.Helper()
	trainerOnce.Do(func() {
		root, err := proccluster.ModuleRoot()
		if err != nil {
			trainerErr = err
			return
		}
		dir, err := os.MkdirTemp("", "raftmaster-trainer-")
		if err != nil {
			trainerErr = err
			return
		}
		trainerPath = filepath.Join(dir, "trainer")
		cmd := exec.Command("go", "build", "-o", trainerPath, "./examples/trainer")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			trainerErr = fmt.Errorf("go build ./examples/trainer: %v\n%s", err, out)
		}
	})
	if trainerErr != nil {
		t.Fatal(trainerErr)
	}
	return trainerPath
}

// TestDeadTrainersTaskComesBack SIGKILLs a trainer process, the example
// trainer with the client's defaults, while its session holds a task, on
// a cluster whose task timeout is ten minutes: the task comes back when
// the session ends, and another trainer reads it in the same pass, once.
// With the leader SIGKILLed too, inside the session's TTL, the new leader
// ends the session just the same.
func TestDeadTrainersTaskComesBack(t *testing.T) {
	needsProcesses(t)
	for _, killLeader := range []bool{false, true} {
		t.Run(fmt.Sprintf("leader killed %v", killLeader), func(t *testing.T) {
			deadTrainer(t, killLeader)
		})
	}
}

func deadTrainer(t *testing.T, killLeader bool) {
	c := proccluster.Start(t, proccluster.Options{Args: []string{"--task-timeout", "10m"}})
	c.WaitReady()
	waitProtocol(t, c, fsm.Protocol6)
	const records = 600
	glob := writeDataset(t, t.TempDir(), records, 100, 200)
	admin := newClient(t, client.WithAddrs(c.APIAddrs()...), client.WithoutSession())
	failures := 3
	if _, err := admin.SetDatasetWithParams([]string{glob}, client.DatasetParams{ChunksPerTask: 4, TaskTimeout: 10 * time.Minute, FailureMax: &failures}); err != nil {
		t.Fatal(err)
	}

	// The example trainer, slow to train: its reader fills its buffer and
	// holds the next task under its session.
	cmd := exec.Command(trainerBinary(t), "-addrs", strings.Join(c.APIAddrs(), ","), "-dataset", glob,
		"-trainers", "1", "-passes", "1", "-step", "10s")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		if t.Failed() {
			t.Logf("trainer output:\n%s", out.String())
		}
	})
	var held rpc.Session
	c.WaitFor("the trainer's session holding a task", 2*time.Minute, func() bool {
		list, err := admin.Sessions()
		if err != nil || len(list.Sessions) != 1 || len(list.Sessions[0].Tasks) != 1 {
			return false
		}
		held = list.Sessions[0]
		return true
	})
	task := held.Tasks[0].Meta

	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	if killLeader {
		c.Kill(c.Leader())
	}

	// Another trainer reads pass 0 to its end: the dead trainer's task
	// comes back to it well before the ten-minute lease would have ended.
	survivor := newClient(t, client.WithAddrs(c.APIAddrs()...))
	counts := map[int]int{}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		survivor.StartGetRecords(0)
		passOver := false
		for {
			r, err := survivor.NextRecord()
			if errors.Is(err, client.ErrPassBefore) {
				passOver = true
				break
			}
			if err != nil {
				break
			}
			rec, err := strconv.Atoi(string(r))
			if err != nil {
				t.Fatalf("bad record %q", r)
			}
			counts[rec]++
		}
		if passOver {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pass 0 did not end within 3 minutes: the dead trainer's task %d did not come back", task.ID)
		}
		time.Sleep(200 * time.Millisecond) // the poll of a trainer between passes
	}
	for rec, n := range counts {
		if n != 1 {
			t.Errorf("record %d read %d times in pass 0", rec, n)
		}
	}
	job, err := admin.Job(rpc.DefaultJob)
	if err != nil {
		t.Fatal(err)
	}
	if job.Pass != 1 {
		t.Fatalf("job %+v: want pass 0 over", job)
	}
	t.Logf("task %d (epoch %d) of the dead trainer's session %d came back; the survivor read %d of %d records",
		task.ID, task.Epoch, held.Session, len(counts), records)
}
