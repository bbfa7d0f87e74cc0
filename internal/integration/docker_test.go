//go:build docker

package integration

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/internal/proccluster"
)

// The compose project of the test, and the host ports deploy/ publishes.
const (
	composeProject = "raftmaster-dockertest"
	composeFile    = "deploy/docker-compose.3.yml"
)

var hostPorts = map[string]string{"n1": "127.0.0.1:8001", "n2": "127.0.0.1:8002", "n3": "127.0.0.1:8003"}

// TestDockerComposePartition runs the cluster as deploy/ ships it: the
// image built FROM scratch, three containers from docker-compose.3.yml on
// one Docker network. Trainers on the host run passes while the leader's
// container is cut off the network with `docker network disconnect`; a new
// leader takes over, every pass completes with every record exactly once,
// and after the link is restored the three replicas converge.
//
// Run it with `make docker-test`.
func TestDockerComposePartition(t *testing.T) {
	root, err := proccluster.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	buildImage(t, root)
	compose := func(args ...string) string {
		t.Helper()
		return run(t, root, "docker-compose", append([]string{"-p", composeProject, "-f", composeFile}, args...)...)
	}
	compose("down", "-v", "--remove-orphans")
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(compose("logs", "--no-color", "--tail", "60"))
		}
		compose("down", "-v", "--remove-orphans")
	})
	compose("up", "-d", "n1", "n2", "n3")

	// Redirects name the nodes by service name; the host reaches them
	// through the published ports.
	dialer := &net.Dialer{Timeout: 2 * time.Second}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, _, err := net.SplitHostPort(addr); err == nil && hostPorts[host] != "" {
			addr = hostPorts[host]
		}
		return dialer.DialContext(ctx, network, addr)
	}}}
	addrs := []string{hostPorts["n1"], hostPorts["n2"], hostPorts["n3"]}
	leader := waitLeader(t, "")
	t.Logf("leader is %s", leader)

	glob := writeDataset(t, t.TempDir(), 300, 50, 60)
	opts := []client.Option{client.WithAddrs(addrs...), client.WithHTTPClient(hc)}
	setter := newClient(t, append(opts, client.WithClientIndexing(true))...)
	if _, err := setter.SetDatasetWithParams([]string{glob}, client.DatasetParams{ChunksPerTask: 1}); err != nil {
		t.Fatal(err)
	}
	const trainers, passes = 3, 3
	var log passLog
	wait := startTrainers(t, trainers, passes, &log, append(opts, client.WithBuffer(4))...)
	waitCond(t, "pass 0 to be under way", func() bool { return log.delivered(0) >= 40 })

	network := composeProject + "_default"
	container := strings.TrimSpace(compose("ps", "-q", leader))
	t.Logf("disconnecting %s (%s) from %s", leader, container[:12], network)
	run(t, root, "docker", "network", "disconnect", network, container)
	newLeader := waitLeader(t, leader)
	t.Logf("new leader is %s", newLeader)
	wait()
	checkPasses(t, &log, passes, 300, false)

	run(t, root, "docker", "network", "connect", "--alias", leader, network, container)
	waitCond(t, "the replicas to converge", func() bool {
		_, ok := proccluster.SameState(context.Background(), addrs)
		return ok
	})
}

// buildImage builds the static binary and the image the compose file
// names, from deploy/Dockerfile.
func buildImage(t *testing.T, root string) {
	t.Helper()
	ctxDir := t.TempDir()
	build := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(ctxDir, "bin", "raftmaster"), "./cmd/raftmaster")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("static build: %v\n%s", err, out)
	}
	df, err := os.ReadFile(filepath.Join(root, "deploy", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), df, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, ctxDir, "docker", "build", "-q", "-t", "raftmaster", ".")
}

// waitLeader waits until a node other than not reports itself the ready
// leader through its published port, and returns its id.
func waitLeader(t *testing.T, not string) string {
	t.Helper()
	var leader string
	waitCond(t, "a leader other than "+not, func() bool {
		for id, a := range hostPorts {
			if id == not {
				continue
			}
			st, err := proccluster.Status(context.Background(), a)
			if err == nil && st.State == "Leader" && st.Ready {
				leader = id
				return true
			}
		}
		return false
	})
	return leader
}

func waitCond(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// run runs a command in dir and returns its output; it fails the test on
// error.
func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}
