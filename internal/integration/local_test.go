package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/internal/proccluster"
)

// freeRun returns the first of n consecutive 127.0.0.1 ports that are all
// free, for the consecutive ports of raftmaster local.
func freeRun(t *testing.T, n int, skip map[int]bool) int {
	t.Helper()
	for range 200 {
		a := proccluster.FreePort(t)
		_, p, _ := net.SplitHostPort(a)
		base, _ := strconv.Atoi(p)
		if base+n > 65535 {
			continue
		}
		ok := true
		for i := range n {
			if skip[base+i] {
				ok = false
				break
			}
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+i))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			for i := range n {
				skip[base+i] = true
			}
			return base
		}
	}
	t.Fatalf("no %d consecutive free ports", n)
	return 0
}

// servePid returns the pid of the serve process of node id with its data
// under dir, or 0.
func servePid(dir, id string) int {
	ents, _ := os.ReadDir("/proc")
	want := filepath.Join(dir, id)
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "--data-dir" && args[i+1] == want && len(args) > 1 && args[1] == "serve" {
				return pid
			}
		}
	}
	return 0
}

// TestLocalClusterSurvivesADeadNode runs raftmaster local, kills its
// leader with SIGKILL, and checks that local keeps running with the
// survivors serving writes, that it says which node died, how, and the
// command that restarts it, and that this command, run by hand, brings
// the node back into the cluster.
func TestLocalClusterSurvivesADeadNode(t *testing.T) {
	needsProcesses(t)
	bin := proccluster.Binary(t)
	dir := t.TempDir()
	taken := map[int]bool{}
	raftPort, httpPort := freeRun(t, 3, taken), freeRun(t, 3, taken)
	var stdout, stderr syncBuffer
	local := exec.Command(bin, "local", "--nodes", "3", "--data-dir", dir,
		"--raft-port", strconv.Itoa(raftPort), "--http-port", strconv.Itoa(httpPort))
	local.Stdout, local.Stderr = &stdout, &stderr
	if err := local.Start(); err != nil {
		t.Fatal(err)
	}
	localDone := make(chan struct{}) // closed when local exits, with localErr set
	var localErr error
	go func() {
		localErr = local.Wait()
		close(localDone)
	}()
	t.Cleanup(func() {
		_ = local.Process.Signal(syscall.SIGTERM)
		select {
		case <-localDone:
		case <-time.After(time.Minute):
			_ = local.Process.Kill()
			<-localDone
		}
		if t.Failed() {
			t.Logf("raftmaster local's output:\n%s\n%s", stdout.String(), stderr.String())
		}
	})
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		end := time.Now().Add(2 * time.Minute)
		for !cond() {
			select {
			case <-localDone:
				t.Fatalf("raftmaster local exited (%v) while waiting for %s", localErr, what)
			default:
			}
			if time.Now().After(end) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitFor("the local cluster to be ready", func() bool { return strings.Contains(stdout.String(), "local cluster ready") })

	var addrs []string
	for i := range 3 {
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", httpPort+i))
	}
	cl := newClient(t, client.WithAddrs(addrs...))
	ctx := context.Background()
	first, err := cl.KVCompareAndSet(ctx, "k", 0, []byte("before"))
	if err != nil || !first.Swapped {
		t.Fatalf("first write: %+v, %v", first, err)
	}
	st, err := cl.Status()
	if err != nil {
		t.Fatal(err)
	}
	victim, _, _ := strings.Cut(st.Leader.ID, "~") // the node's name, without its Raft id's suffix
	pid := servePid(dir, victim)
	if pid == 0 {
		t.Fatalf("no serve process of %s under %s", victim, dir)
	}
	t.Logf("killing the leader, %s (pid %d)", victim, pid)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	const hintLead = "restart it by hand"
	waitFor("the restart hint", func() bool { return strings.Contains(stderr.String(), hintLead) })
	out := stderr.String()
	if want := "node " + victim + " exited (signal: killed)"; !strings.Contains(out, want) {
		t.Fatalf("no %q in local's output:\n%s", want, out)
	}
	// The survivors serve a write.
	if res, err := cl.KVCompareAndSet(ctx, "k", first.Version, []byte("after")); err != nil || !res.Swapped {
		t.Fatalf("write through the survivors: %+v, %v", res, err)
	}
	select {
	case <-localDone:
		t.Fatalf("raftmaster local exited (%v) after one node died", localErr)
	default:
	}

	// Run the printed command: the node rejoins.
	lines := strings.Split(out[strings.Index(out, hintLead):], "\n")
	restart := strings.TrimSpace(lines[1])
	t.Logf("restarting with: %s", restart)
	node := exec.Command("sh", "-c", "exec "+restart)
	node.Dir = t.TempDir() // the command works from any directory
	logf, err := os.Create(filepath.Join(dir, victim+".restarted.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	node.Stdout, node.Stderr = logf, logf
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = node.Process.Signal(syscall.SIGTERM)
		_ = node.Wait()
	})
	waitFor("the restarted node to catch up", func() bool {
		_, ok := proccluster.SameState(ctx, addrs)
		return ok
	})
	stale, err := proccluster.Status(ctx, fmt.Sprintf("127.0.0.1:%d", httpPort+int(victim[1]-'1')))
	if err != nil || stale.Leader.ID == "" {
		t.Fatalf("the restarted node's status: %+v, %v; want it to know the leader", stale, err)
	}
}
