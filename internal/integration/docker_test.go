//go:build docker

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/internal/proccluster"
)

// composeFile is the deployment under test: three founding members, and n4
// and n5 in the "scale" profile.
const composeFile = "deploy/compose-3/docker-compose.yml"

// hostPorts are the host addresses compose-3 publishes each node's API on.
var hostPorts = map[string]string{
	"n1": "127.0.0.1:8001", "n2": "127.0.0.1:8002", "n3": "127.0.0.1:8003",
	"n4": "127.0.0.1:8004", "n5": "127.0.0.1:8005",
}

var (
	imageOnce    sync.Once
	imageVersion string
	imageErr     error
)

// buildImage runs `make image` once per test binary, as a user would, and
// returns the version it tagged.
func buildImage(t *testing.T, root string) string {
	t.Helper()
	imageOnce.Do(func() {
		cmd := exec.Command("make", "image")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			imageErr = fmt.Errorf("make image: %v\n%s", err, out)
			return
		}
		cmd = exec.Command("make", "-s", "version")
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			imageErr = fmt.Errorf("make version: %v", err)
			return
		}
		imageVersion = strings.TrimSpace(string(out))
	})
	if imageErr != nil {
		t.Fatal(imageErr)
	}
	return imageVersion
}

// composeCluster is one compose project of composeFile, of its own name,
// so that no test sees another's containers or volumes.
type composeCluster struct {
	t        *testing.T
	root     string
	project  string
	datasets string
	hc       *http.Client
}

// startCompose builds the image, starts services in a fresh project and
// removes the project, volumes included, when the test ends.
func startCompose(t *testing.T, name string, services ...string) *composeCluster {
	t.Helper()
	root, err := proccluster.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	buildImage(t, root)
	// Redirects name the nodes by service name; the host reaches them
	// through the published ports.
	dialer := &net.Dialer{Timeout: 2 * time.Second}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, _, err := net.SplitHostPort(addr); err == nil && hostPorts[host] != "" {
			addr = hostPorts[host]
		}
		return dialer.DialContext(ctx, network, addr)
	}}}
	c := &composeCluster{t: t, root: root, project: "raftmaster-dockertest-" + name, datasets: t.TempDir(), hc: hc}
	c.compose("down", "-v", "--remove-orphans")
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(c.compose("logs", "--no-color", "--tail", "80"))
		}
		c.compose("down", "-v", "--remove-orphans")
	})
	c.compose(append([]string{"up", "-d"}, services...)...)
	return c
}

// compose runs docker-compose on the project and returns its output.
func (c *composeCluster) compose(args ...string) string {
	c.t.Helper()
	cmd := exec.Command("docker-compose", append([]string{"-p", c.project, "-f", composeFile}, args...)...)
	cmd.Dir = c.root
	cmd.Env = append(os.Environ(), "RAFTMASTER_DATASETS="+c.datasets)
	out, err := cmd.CombinedOutput()
	if err != nil {
		c.t.Fatalf("docker-compose %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// addrs are the host addresses of the nodes ids.
func addrs(ids ...string) []string {
	var out []string
	for _, id := range ids {
		out = append(out, hostPorts[id])
	}
	return out
}

// clientOpts reach the nodes ids from the host.
func (c *composeCluster) clientOpts(ids ...string) []client.Option {
	return []client.Option{client.WithAddrs(addrs(ids...)...), client.WithHTTPClient(c.hc)}
}

// waitLeader waits until one of ids other than not reports itself the
// ready leader, and returns it.
func (c *composeCluster) waitLeader(not string, ids ...string) string {
	c.t.Helper()
	var leader string
	waitCond(c.t, "a leader other than "+not, func() bool {
		for _, id := range ids {
			if id == not {
				continue
			}
			st, err := proccluster.Status(context.Background(), hostPorts[id])
			if err == nil && st.State == "Leader" && st.Ready {
				leader = id
				return true
			}
		}
		return false
	})
	return leader
}

// waitMembers waits until the cluster's members are exactly ids and every
// one of them is ready with the same configuration.
func (c *composeCluster) waitMembers(ids ...string) {
	c.t.Helper()
	cl := newClient(c.t, append(c.clientOpts(ids...), client.WithRetry(5*time.Second))...)
	want := slices.Sorted(slices.Values(ids))
	// On a timeout, what each node said last tells a stuck follower (its
	// indexes) from a missing member.
	last := map[string]string{}
	defer func() {
		if c.t.Failed() {
			for _, id := range slices.Sorted(maps.Keys(last)) {
				c.t.Logf("last seen %s: %s", id, last[id])
			}
		}
	}()
	waitCond(c.t, "members "+strings.Join(want, " "), func() bool {
		m, err := cl.Members()
		if err != nil {
			last["members"] = err.Error()
			return false
		}
		var got []string
		for _, s := range m.Members {
			got = append(got, s.ID)
		}
		slices.Sort(got)
		last["members"] = strings.Join(got, " ")
		if !slices.Equal(got, want) {
			return false
		}
		ok := true
		for _, id := range ids {
			st, err := proccluster.Status(context.Background(), hostPorts[id])
			last[id] = fmt.Sprintf("%+v %v", st, err)
			ok = ok && err == nil && st.Ready && st.Servers == len(ids)
		}
		return ok
	})
}

// converged waits until the nodes ids hold the same state.
func (c *composeCluster) converged(ids ...string) {
	c.t.Helper()
	waitCond(c.t, "the replicas to converge", func() bool {
		_, ok := proccluster.SameState(context.Background(), addrs(ids...))
		return ok
	})
}

// setDataset indexes a dataset of records on the host and sets it.
func (c *composeCluster) setDataset(records int) {
	c.t.Helper()
	glob := writeDataset(c.t, c.t.TempDir(), records, 50, 60)
	setter := newClient(c.t, append(c.clientOpts("n1", "n2", "n3"), client.WithClientIndexing(true))...)
	if _, err := setter.SetDatasetWithParams([]string{glob}, client.DatasetParams{ChunksPerTask: 1}); err != nil {
		c.t.Fatal(err)
	}
}

// underLoad starts the three founding members of compose-3 in project
// name, sets a dataset of 300 records, starts three trainers through
// passes (see trainers) and returns once pass 0 is under way.
func underLoad(t *testing.T, name string) (*composeCluster, *passLog, func() int) {
	t.Helper()
	c := startCompose(t, name, "n1", "n2", "n3")
	c.waitMembers("n1", "n2", "n3")
	c.setDataset(300)
	log := &passLog{}
	stop := c.trainers(3, log)
	waitCond(t, "pass 0 to be under way", func() bool { return log.delivered(0) >= 40 })
	return c, log, stop
}

// trainers runs n trainers of the host's client through passes until
// stop is called (see startTrainersUntil).
func (c *composeCluster) trainers(n int, log *passLog) (stop func() int) {
	c.t.Helper()
	return startTrainersUntil(c.t, n, log, append(c.clientOpts("n1", "n2", "n3"), client.WithBuffer(4), client.WithRetry(3*time.Minute))...)
}

// logs returns the output of service's current container.
func (c *composeCluster) logs(service string) string {
	c.t.Helper()
	return c.compose("logs", "--no-color", service)
}

// TestDockerImage checks the image `make image` builds: `--version` runs
// and names the version, it runs as a non-root uid, is linux for the
// engine's architecture, listens by default on the ports it exposes, ships
// the host's CA certificates, and the compose file's build section makes
// it without pulling anything when it is missing.
func TestDockerImage(t *testing.T) {
	root, err := proccluster.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	version := buildImage(t, root)
	image := "raftmaster:" + version
	if out := run(t, root, "docker", "run", "--rm", image, "--version"); !strings.Contains(out, version) {
		t.Fatalf("%s --version: %q, want the version %s", image, out, version)
	}

	var inspect []struct {
		Os, Architecture string
		Config           struct {
			User         string
			Env          []string
			ExposedPorts map[string]struct{}
		}
	}
	if err := json.Unmarshal([]byte(run(t, root, "docker", "image", "inspect", image)), &inspect); err != nil || len(inspect) != 1 {
		t.Fatalf("docker image inspect: %v", err)
	}
	img := inspect[0]
	arch := strings.TrimSpace(run(t, root, "docker", "version", "--format", "{{.Server.Arch}}"))
	if img.Os != "linux" || img.Architecture != arch {
		t.Errorf("image is %s/%s, want linux/%s", img.Os, img.Architecture, arch)
	}
	if uid, _, _ := strings.Cut(img.Config.User, ":"); uid == "" || uid == "0" || uid == "root" {
		t.Errorf("image runs as %q, want a non-root uid", img.Config.User)
	}
	for _, name := range []string{"RAFTMASTER_HTTP_ADDR", "RAFTMASTER_RAFT_ADDR"} {
		var port string
		for _, e := range img.Config.Env {
			if v, ok := strings.CutPrefix(e, name+"="); ok {
				_, port, _ = net.SplitHostPort(v)
			}
		}
		if _, exposed := img.Config.ExposedPorts[port+"/tcp"]; port == "" || !exposed {
			t.Errorf("%s listens on port %q; the image exposes %v", name, port, img.Config.ExposedPorts)
		}
	}

	ctr := strings.TrimSpace(run(t, root, "docker", "create", image))
	defer run(t, root, "docker", "rm", "-v", ctr)
	dir := t.TempDir()
	run(t, root, "docker", "cp", ctr+":/etc/ssl/certs/ca-certificates.crt", dir)
	got, err := os.ReadFile(filepath.Join(dir, "ca-certificates.crt"))
	if err != nil {
		t.Fatal(err)
	}
	host, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(got, []byte("BEGIN CERTIFICATE")) || !bytes.Equal(got, host) {
		t.Errorf("the image's CA bundle (%d bytes) is not the host's (%d bytes)", len(got), len(host))
	}

	// Without the image, `up` builds it from bin/image/ through the build
	// section; an attempt to pull would fail here, where no registry is.
	run(t, root, "docker", "rmi", "raftmaster:local")
	c := &composeCluster{t: t, root: root, project: "raftmaster-dockertest-build", datasets: t.TempDir()}
	defer c.compose("down", "-v", "--remove-orphans")
	c.compose("up", "--no-start", "n1")
	run(t, root, "docker", "image", "inspect", "raftmaster:local")
}

// TestDockerComposePartition runs the cluster as deploy/ ships it. Trainers
// on the host run passes while the leader's container is cut off the
// network with `docker network disconnect`; a new leader takes over, every
// pass completes with every record exactly once, and after the link is
// restored the three replicas converge.
func TestDockerComposePartition(t *testing.T) {
	c := startCompose(t, "partition", "n1", "n2", "n3")
	nodes := []string{"n1", "n2", "n3"}
	leader := c.waitLeader("", nodes...)
	t.Logf("leader is %s", leader)
	c.setDataset(300)
	const trainers, passes = 3, 3
	var log passLog
	wait := startTrainers(t, trainers, passes, &log, append(c.clientOpts(nodes...), client.WithBuffer(4))...)
	waitCond(t, "pass 0 to be under way", func() bool { return log.delivered(0) >= 40 })

	network := c.project + "_default"
	container := strings.TrimSpace(c.compose("ps", "-q", leader))
	t.Logf("disconnecting %s (%s) from %s", leader, container[:12], network)
	run(t, c.root, "docker", "network", "disconnect", network, container)
	newLeader := c.waitLeader(leader, nodes...)
	t.Logf("new leader is %s", newLeader)
	wait()
	checkPasses(t, &log, passes, 300, false)

	run(t, c.root, "docker", "network", "connect", "--alias", leader, network, container)
	c.converged(nodes...)
}

// TestDockerComposeFoundersStartApart starts n1 alone: the names of n2 and
// n3 do not resolve on the Docker network yet, as a pod's DNS record lags.
// n1 keeps running, retrying, and bootstraps nothing; once n2 and n3 start,
// the three found one cluster.
func TestDockerComposeFoundersStartApart(t *testing.T) {
	c := startCompose(t, "apart", "n1")
	waitCond(t, "n1 to find n2's name unresolved", func() bool {
		logs := c.logs("n1")
		return strings.Contains(logs, logWaiting) && strings.Contains(logs, "no such host")
	})
	st, err := proccluster.Status(context.Background(), hostPorts["n1"])
	if err != nil || st.Servers != 0 {
		t.Fatalf("n1 alone: %+v, %v; want it up with no configuration", st, err)
	}
	ctr := strings.TrimSpace(c.compose("ps", "-q", "n1"))
	if n := strings.TrimSpace(run(t, c.root, "docker", "inspect", "--format", "{{.RestartCount}}", ctr)); n != "0" {
		t.Fatalf("n1 restarted %s times while its peers' names did not resolve", n)
	}
	c.compose("up", "-d", "n2", "n3")
	c.waitMembers("n1", "n2", "n3")
}

// TestDockerComposeScale grows a 3-node cluster to 5 and shrinks it back
// to 3 with docker-compose, as compose-3's comments say, while trainers
// read throughout: n4 and n5 join as voters by themselves, each is removed
// with `raftmaster cluster remove` before its container goes, and every
// pass delivers every record exactly once.
func TestDockerComposeScale(t *testing.T) {
	c, log, stop := underLoad(t, "scale")

	c.compose("up", "-d", "n4", "n5")
	c.waitMembers("n1", "n2", "n3", "n4", "n5")
	t.Logf("5 voters; trainers at pass %d", log.lastPass())
	for _, id := range []string{"n4", "n5"} {
		logs := c.logs(id)
		if strings.Contains(logs, logBootstrapping) || !strings.Contains(logs, logJoining) {
			t.Fatalf("%s, no founding member, did not simply join; its log:\n%s", id, logs)
		}
	}
	for _, id := range []string{"n5", "n4"} {
		if out := c.compose("exec", "-T", "n1", "/raftmaster", "cluster", "remove", id); !strings.Contains(out, "removed "+id) {
			t.Fatalf("cluster remove %s: %s", id, out)
		}
		c.compose("rm", "-sf", id)
	}
	c.waitMembers("n1", "n2", "n3")
	passes := stop()
	t.Logf("trainers read %d passes", passes)
	checkPasses(t, log, passes, 300, false)
	c.converged("n1", "n2", "n3")
}

// TestDockerComposeWipedVolumes loses the volumes of two of three nodes at
// once, the two followers, while trainers read: their containers are
// killed and removed with their volumes, and started again empty. They
// find the survivor's cluster and join it, never bootstrapping one of
// their own; the survivor's log is the cluster's, and every pass delivers
// every record exactly once.
func TestDockerComposeWipedVolumes(t *testing.T) {
	c, log, stop := underLoad(t, "wipe")
	nodes := []string{"n1", "n2", "n3"}

	survivor := c.waitLeader("", nodes...)
	var wiped []string
	for _, id := range nodes {
		if id != survivor {
			wiped = append(wiped, id)
		}
	}
	before, err := proccluster.Status(context.Background(), hostPorts[survivor])
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("survivor %s at term %d, index %d; wiping %v", survivor, before.Term, before.AppliedIndex, wiped)
	c.compose(append([]string{"kill"}, wiped...)...)
	c.compose(append([]string{"rm", "-f"}, wiped...)...)
	for _, id := range wiped {
		run(t, c.root, "docker", "volume", "rm", c.project+"_"+id+"-raft")
	}
	c.compose(append([]string{"up", "-d"}, wiped...)...)

	c.waitMembers(nodes...)
	passes := stop()
	t.Logf("trainers read %d passes", passes)
	checkPasses(t, log, passes, 300, false)
	c.converged(nodes...)
	for _, id := range wiped {
		logs := c.logs(id)
		if strings.Contains(logs, logBootstrapping) || !strings.Contains(logs, logJoining) {
			t.Fatalf("wiped %s did not simply join the survivor's cluster; its log:\n%s", id, logs)
		}
	}
	after, err := proccluster.Status(context.Background(), hostPorts[survivor])
	if err != nil {
		t.Fatal(err)
	}
	if after.Term < before.Term || after.AppliedIndex <= before.AppliedIndex {
		t.Fatalf("survivor went from term %d index %d to term %d index %d", before.Term, before.AppliedIndex, after.Term, after.AppliedIndex)
	}
}

// TestDockerComposeRollingRestart restarts the three containers one at a
// time, each once the cluster is whole and ready again, while trainers
// read: no trainer call fails, and every pass delivers every record
// exactly once.
func TestDockerComposeRollingRestart(t *testing.T) {
	c, log, stop := underLoad(t, "rolling")
	nodes := []string{"n1", "n2", "n3"}

	for _, id := range nodes {
		before, _ := proccluster.Status(context.Background(), hostPorts[id])
		t.Logf("restarting %s (%s); trainers at pass %d", id, before.State, log.lastPass())
		c.compose("restart", id)
		c.waitMembers(nodes...)
	}
	passes := stop()
	t.Logf("trainers read %d passes", passes)
	checkPasses(t, log, passes, 300, false)
	c.converged(nodes...)
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
