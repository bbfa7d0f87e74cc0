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
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/proccluster"
	"github.com/raftmaster/raftmaster/rpc"
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

var (
	previousImageOnce sync.Once
	previousImageTag  string
	previousImageErr  error
)

// buildPreviousImage builds the previous release's image as its `make
// image` did (its static linux binary for the engine's architecture, the
// host's CA bundle and its deploy/Dockerfile), tagged raftmaster:VERSION,
// and returns the tag. An image of that tag with the release's version
// label is reused, so later runs build nothing.
func buildPreviousImage(t *testing.T) string {
	t.Helper()
	prev := previousSource(t)
	previousImageOnce.Do(func() {
		tag := "raftmaster:" + prev.Version
		label := `{{index .Config.Labels "org.opencontainers.image.version"}}`
		if out, err := exec.Command("docker", "image", "inspect", "--format", label, tag).Output(); err == nil &&
			strings.TrimSpace(string(out)) == prev.Version {
			previousImageTag = tag
			return
		}
		out, err := exec.Command("docker", "version", "--format", "{{.Server.Arch}}").Output()
		if err != nil {
			previousImageErr = fmt.Errorf("docker version: %v", err)
			return
		}
		bin := prev.build(t, "./cmd/raftmaster", "linux", strings.TrimSpace(string(out)))
		dir := filepath.Join(prev.Tree, "bin", "image")
		for _, step := range [][]string{
			{"rm", "-rf", dir}, {"mkdir", "-p", filepath.Join(dir, "state")},
			{"cp", bin, filepath.Join(dir, "raftmaster")}, {"cp", "/etc/ssl/certs/ca-certificates.crt", dir},
			{"docker", "build", "-q", "-f", "deploy/Dockerfile", "--build-arg", "VERSION=" + prev.Version, "-t", tag, "."},
		} {
			cmd := exec.Command(step[0], step[1:]...)
			cmd.Dir = prev.Tree
			if out, err := cmd.CombinedOutput(); err != nil {
				previousImageErr = fmt.Errorf("building the previous release's image: %s: %v\n%s", strings.Join(step, " "), err, out)
				return
			}
		}
		previousImageTag = tag
	})
	if previousImageErr != nil {
		t.Fatal(previousImageErr)
	}
	return previousImageTag
}

// composeCluster is one compose project of composeFile, of its own name,
// so that no test sees another's containers or volumes.
type composeCluster struct {
	t        *testing.T
	root     string
	project  string
	datasets string
	hc       *http.Client
	// image is the image compose runs (RAFTMASTER_IMAGE); empty for the
	// file's default, raftmaster:local.
	image string
	// overrides are compose files applied over composeFile.
	overrides []string
}

// startCompose builds the image, starts services in a fresh project and
// removes the project, volumes included, when the test ends.
func startCompose(t *testing.T, name string, services ...string) *composeCluster {
	t.Helper()
	return startComposeImage(t, name, "", services...)
}

// startComposeImage is startCompose with the nodes on image (empty for
// the file's default).
func startComposeImage(t *testing.T, name, image string, services ...string) *composeCluster {
	t.Helper()
	return startComposeWith(t, name, image, nil, services...)
}

// startComposeWith is startComposeImage with compose files applied over
// composeFile.
func startComposeWith(t *testing.T, name, image string, overrides []string, services ...string) *composeCluster {
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
	c := &composeCluster{t: t, root: root, project: "raftmaster-dockertest-" + name, datasets: t.TempDir(), hc: hc, image: image, overrides: overrides}
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
	files := []string{"-p", c.project, "-f", composeFile}
	for _, o := range c.overrides {
		files = append(files, "-f", o)
	}
	cmd := exec.Command("docker-compose", append(files, args...)...)
	cmd.Dir = c.root
	cmd.Env = append(os.Environ(), "RAFTMASTER_DATASETS="+c.datasets)
	if c.image != "" {
		cmd.Env = append(cmd.Env, "RAFTMASTER_IMAGE="+c.image)
	}
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

// waitMembers waits until the cluster's members are exactly the nodes
// named ids, each once and a voter, and every one of them is ready with
// the same configuration. A member's id is its name and incarnation
// (n2~3fa4c1d0), or its name alone for a data directory of a release
// before incarnations.
func (c *composeCluster) waitMembers(ids ...string) {
	c.t.Helper()
	c.waitMembersWhile(nil, ids...)
}

// waitMembersWhile is waitMembers that also calls check with every
// node's status it reads, to fail the test on what must never be seen.
func (c *composeCluster) waitMembersWhile(check func(id string, st rpc.StatusResponse), ids ...string) {
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
		var got, desc []string
		voters := true
		for _, s := range m.Members {
			got = append(got, memberName(s))
			desc = append(desc, s.ID+"/"+s.Suffrage)
			voters = voters && s.Suffrage == "Voter"
		}
		slices.Sort(got)
		last["members"] = strings.Join(desc, " ")
		if !slices.Equal(got, want) || !voters {
			return false
		}
		ok := true
		for _, id := range ids {
			st, err := proccluster.Status(context.Background(), hostPorts[id])
			last[id] = fmt.Sprintf("%+v %v", st, err)
			if err == nil && check != nil {
				check(id, st)
			}
			ok = ok && err == nil && st.Ready && st.Servers == len(ids)
		}
		return ok
	})
}

// memberName is the node name of a member: its name, or the name its
// server id begins with (a release before names in the answer).
func memberName(m rpc.Member) string {
	if m.Name != "" {
		return m.Name
	}
	name, _, _ := strings.Cut(m.ID, "~")
	return name
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

// total reports how many records were delivered so far, in every pass.
func (l *passLog) total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.counts {
		for _, k := range c {
			n += k
		}
	}
	return n
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
	needsProcesses(t)
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
	// --no-deps: keygen, which n1 waits for, does not run under --no-start.
	c.compose("up", "--no-start", "--no-deps", "n1")
	run(t, root, "docker", "image", "inspect", "raftmaster:local")
}

// TestDockerComposePartition runs the cluster as deploy/ ships it. Trainers
// on the host run passes while the leader's container is cut off the
// network with `docker network disconnect`; a new leader takes over, every
// pass completes with every record exactly once, and after the link is
// restored the three replicas converge.
func TestDockerComposePartition(t *testing.T) {
	needsProcesses(t)
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
	needsProcesses(t)
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
	needsProcesses(t)
	c, log, stop := underLoad(t, "scale")

	c.compose("up", "-d", "n4", "n5")
	c.waitMembers("n1", "n2", "n3", "n4", "n5")
	t.Logf("5 voters; trainers at pass %d", log.lastPass())
	for _, id := range []string{"n4", "n5"} {
		logs := c.logs(id)
		if strings.Contains(logs, logBootstrapping) || !strings.Contains(logs, logBecomingMember) {
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

// wipe kills the containers of the nodes ids, removes them with their
// volumes, and starts them again, empty.
func (c *composeCluster) wipe(ids ...string) {
	c.t.Helper()
	c.compose(append([]string{"kill"}, ids...)...)
	c.compose(append([]string{"rm", "-f"}, ids...)...)
	for _, id := range ids {
		run(c.t, c.root, "docker", "volume", "rm", c.project+"_"+id+"-raft")
	}
	c.compose(append([]string{"up", "-d"}, ids...)...)
}

// serverIDs are the server ids the nodes ids report.
func serverIDs(t *testing.T, ids ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, id := range ids {
		st, err := proccluster.Status(context.Background(), hostPorts[id])
		if err != nil {
			t.Fatal(err)
		}
		out[id] = st.NodeID
	}
	return out
}

// checkNewIncarnations fails the test unless each of the wiped nodes came
// back as a new incarnation of its name, which joined the cluster rather
// than bootstrap one.
func (c *composeCluster) checkNewIncarnations(before map[string]string, wiped ...string) {
	c.t.Helper()
	after := serverIDs(c.t, wiped...)
	for _, id := range wiped {
		if after[id] == before[id] || !strings.HasPrefix(after[id], id+"~") {
			c.t.Errorf("%s came back as server %s, before %s: want a new incarnation of %s", id, after[id], before[id], id)
		}
		logs := c.logs(id)
		if strings.Contains(logs, logBootstrapping) || !strings.Contains(logs, logBecomingMember) {
			c.t.Fatalf("wiped %s did not simply join the cluster; its log:\n%s", id, logs)
		}
	}
}

// TestDockerComposeLostVolume loses the volume of one of three nodes, a
// follower, while trainers read: its container is killed and removed with
// its volume, and started again empty. With no operator action it rejoins
// as a new incarnation of its name (a non-voter until it has caught up),
// its previous incarnation leaving the configuration, no trainer call
// fails, and every pass delivers every record exactly once.
func TestDockerComposeLostVolume(t *testing.T) {
	needsProcesses(t)
	c, log, stop := underLoad(t, "lostone")
	nodes := []string{"n1", "n2", "n3"}
	leader := c.waitLeader("", nodes...)
	lost := slices.DeleteFunc(slices.Clone(nodes), func(id string) bool { return id == leader })[0]
	before := serverIDs(t, nodes...)
	t.Logf("wiping %s (%s); leader %s; trainers at pass %d", lost, before[lost], leader, log.lastPass())
	c.wipe(lost)

	c.waitMembers(nodes...)
	c.checkNewIncarnations(before, lost)
	if logs := c.compose("logs", "--no-color"); !strings.Contains(logs, "removing the previous incarnation of a node that came back empty") {
		t.Errorf("no leader removed %s's previous incarnation; the logs:\n%s", lost, logs)
	}
	passes := stop()
	t.Logf("trainers read %d passes", passes)
	checkPasses(t, log, passes, 300, false)
	c.converged(nodes...)
}

// TestDockerComposeLostTwoVolumes loses the volumes of two of three nodes
// at once, the two followers, while trainers read. The survivor cannot
// know whether the lost volumes acknowledged entries it lacks, so the
// cluster stays unavailable rather than serve a truncated history: no
// leader, the survivor standing for election again and again in vain, the
// empty nodes voting for no one and forming no cluster of their own. Then
// the recovery steps that compose-3's comments give, run as written there,
// make the survivor a cluster of its own; the empty nodes join it as new
// incarnations, the trainers carry on without a failed call, and every
// pass delivers every record exactly once.
func TestDockerComposeLostTwoVolumes(t *testing.T) {
	needsProcesses(t)
	steps := documentedRecovery(t)
	c, log, stop := underLoad(t, "losttwo")
	nodes := []string{"n1", "n2", "n3"}
	survivor := c.waitLeader("", nodes...)
	wiped := slices.DeleteFunc(slices.Clone(nodes), func(id string) bool { return id == survivor })
	ids := serverIDs(t, nodes...)
	st, err := proccluster.Status(context.Background(), hostPorts[survivor])
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("survivor %s at term %d, index %d; wiping %v; trainers at pass %d", survivor, st.Term, st.AppliedIndex, wiped, log.lastPass())
	c.wipe(wiped...)

	waitCond(t, "the wiped nodes to start empty", func() bool {
		for _, id := range wiped {
			st, err := proccluster.Status(context.Background(), hostPorts[id])
			if err != nil || st.NodeID == ids[id] || st.Servers != 0 {
				return false
			}
		}
		return true
	})
	campaigns := strings.Count(c.logs(survivor), logCampaign)
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		for _, id := range nodes {
			st, err := proccluster.Status(context.Background(), hostPorts[id])
			switch {
			case err != nil:
			case st.State == "Leader":
				t.Fatalf("%s leads with two of three volumes lost: %+v", id, st)
			case id != survivor && (st.Servers != 0 || st.Voter):
				t.Fatalf("wiped %s holds a configuration of its own: %+v", id, st)
			}
		}
	}
	if n := strings.Count(c.logs(survivor), logCampaign) - campaigns; n < 3 {
		t.Fatalf("the survivor stood for election %d times in 15 s; want it to keep trying", n)
	}
	passesBefore := log.lastPass()

	for _, step := range steps {
		out := c.compose(survivorStep(step, survivor)...)
		t.Logf("docker-compose %s:\n%s", strings.Join(survivorStep(step, survivor), " "), out)
		if step[0] == "run" && !strings.Contains(out, "recovered") {
			t.Fatalf("recover: %s", out)
		}
	}
	c.waitMembers(nodes...)
	c.checkNewIncarnations(ids, wiped...)
	if after := serverIDs(t, survivor); after[survivor] != ids[survivor] {
		t.Fatalf("the survivor is server %s, was %s", after[survivor], ids[survivor])
	}
	passes := stop()
	t.Logf("trainers read %d passes, %d before the recovery", passes, passesBefore+1)
	checkPasses(t, log, passes, 300, false)
	c.converged(nodes...)
}

// documentedRecovery returns the docker-compose commands that compose-3's
// comments give to recover a survivor named n1 after two volumes were
// lost, each as its arguments after the compose file's.
func documentedRecovery(t *testing.T) [][]string {
	t.Helper()
	root, err := proccluster.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, composeFile))
	if err != nil {
		t.Fatal(err)
	}
	const command = "#   docker-compose -f " + composeFile + " "
	var steps [][]string
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasSuffix(line, "For a survivor n1:"):
			in = true
		case in && strings.HasPrefix(line, command):
			steps = append(steps, strings.Fields(strings.TrimPrefix(line, command)))
		case in:
			in = false
		}
	}
	if len(steps) != 3 || steps[1][0] != "run" {
		t.Fatalf("%s gives the recovery steps %q; want stop, run recover and start", composeFile, steps)
	}
	return steps
}

// survivorStep is a documented recovery step for n1 written for survivor.
func survivorStep(step []string, survivor string) []string {
	out := make([]string, len(step))
	for i, a := range step {
		out[i] = strings.ReplaceAll(a, "n1", survivor)
	}
	return out
}

// TestDockerComposeRollingRestart restarts the three containers one at a
// time, each once the cluster is whole and ready again, while trainers
// read: no trainer call fails, and every pass delivers every record
// exactly once.
func TestDockerComposeRollingRestart(t *testing.T) {
	needsProcesses(t)
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

// insecureOverride is the compose override of a rolling upgrade from a
// release before cluster keys: this release's nodes run Raft
// unauthenticated beside the previous release's, and keygen runs this
// release's image, which has the command.
const insecureOverride = `services:
  keygen:
    image: raftmaster:local
  n1:
    environment: {RAFTMASTER_INSECURE: "true", RAFTMASTER_CLUSTER_KEY_FILE: ""}
  n2:
    environment: {RAFTMASTER_INSECURE: "true", RAFTMASTER_CLUSTER_KEY_FILE: ""}
  n3:
    environment: {RAFTMASTER_INSECURE: "true", RAFTMASTER_CLUSTER_KEY_FILE: ""}
`

// TestDockerComposeRollingUpgrade upgrades compose-3 from the previous
// release's image to this one's, as docs/operations.md says: trainers on
// the host run passes throughout while each container is replaced with
// the new image on its volume (followers first, then the leader), and the
// next only once the cluster is whole again. No trainer call fails, every
// pass delivers every record exactly once, the cluster's protocol level
// stays 1 until the last node runs the new image and then rises to this
// build's, every node's registry entry then holds its release, and the
// replicas converge. The old volumes hold no incarnation: the nodes keep
// their names as server ids.
func TestDockerComposeRollingUpgrade(t *testing.T) {
	needsProcesses(t)
	previous := buildPreviousImage(t)
	prev := previousSource(t)
	// The previous release knows no cluster key and runs Raft
	// unauthenticated: the new image joins it with --insecure, and the
	// nodes switch to the key together once all run it.
	insecure := filepath.Join(t.TempDir(), "insecure.yml")
	if err := os.WriteFile(insecure, []byte(insecureOverride), 0o644); err != nil {
		t.Fatal(err)
	}
	c := startComposeWith(t, "upgrade", previous, []string{insecure}, "n1", "n2", "n3")
	nodes := []string{"n1", "n2", "n3"}
	var upgraded []string
	// No node may report a level above 1 while one runs the previous
	// release; each runs the release it should.
	check := func(id string, st rpc.StatusResponse) {
		if len(upgraded) < len(nodes) && st.ClusterProtocol > fsm.Protocol1 {
			t.Fatalf("%s is at protocol level %d while a node runs the previous release", id, st.ClusterProtocol)
		}
	}
	c.waitMembersWhile(check, nodes...)
	for _, id := range nodes {
		if st, err := proccluster.Status(context.Background(), hostPorts[id]); err != nil || st.Version != prev.Version || st.NodeID != id {
			t.Fatalf("%s: %+v, %v; want the previous release %s, its server id its name", id, st, err, prev.Version)
		}
	}
	c.setDataset(300)
	log := &passLog{}
	stop := c.trainers(3, log)
	waitCond(t, "pass 0 to be under way", func() bool { return log.delivered(0) >= 40 })

	version := buildImage(t, c.root)
	c.image = "raftmaster:local"
	for range nodes {
		leader := c.waitLeader("", nodes...)
		id := ""
		for _, n := range nodes {
			if !slices.Contains(upgraded, n) && (id == "" || id == leader) {
				id = n
			}
		}
		t.Logf("upgrading %s (leader %s); trainers at pass %d", id, leader, log.lastPass())
		c.compose("up", "-d", id)
		upgraded = append(upgraded, id)
		waitCond(t, id+" to run the new image", func() bool {
			st, err := proccluster.Status(context.Background(), hostPorts[id])
			return err == nil && st.Version == version
		})
		c.waitMembersWhile(check, nodes...)
		before := log.total()
		waitCond(t, "trainers to read on", func() bool { return log.total() >= before+20 })
	}
	waitCond(t, "the cluster at this build's protocol level", func() bool {
		for _, id := range nodes {
			st, err := proccluster.Status(context.Background(), hostPorts[id])
			if err != nil || st.ClusterProtocol != fsm.Protocol || st.NodeID != id {
				return false
			}
		}
		return true
	})
	// Every node to the cluster key at once, as the compose file says.
	c.overrides = nil
	t.Logf("switching the nodes to the cluster key; trainers at pass %d", log.lastPass())
	c.compose("up", "-d", "n1", "n2", "n3")
	c.waitMembers(nodes...)
	for _, id := range nodes {
		if logs := c.logs(id); !strings.Contains(logs, "Raft runs over mutual TLS with certificates derived from the cluster key") {
			t.Fatalf("%s does not run Raft with the cluster key after the switch:\n%s", id, logs)
		}
	}
	admin := newClient(t, c.clientOpts(nodes...)...)
	waitCond(t, "every node registered with its release", func() bool {
		for _, id := range nodes {
			reg, ok := registryEntry(t, admin, id)
			if !ok || reg.Version != version || reg.Protocol != fsm.Protocol {
				return false
			}
		}
		return true
	})
	out := c.compose("exec", "-T", "n1", "/raftmaster", "cluster", "inspect")
	if !strings.Contains(out, fmt.Sprintf("%s (level %d)", version, fsm.Protocol)) || !strings.Contains(out, fmt.Sprintf("protocol:  level %d", fsm.Protocol)) {
		t.Fatalf("cluster inspect after the upgrade:\n%s", out)
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
