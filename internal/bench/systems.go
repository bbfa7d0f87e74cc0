package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/internal/procs"
	"github.com/raftmaster/raftmaster/rpc"
)

// Backends of raftmaster serve.
const (
	backendRaft = "raft"
	backendEtcd = "etcd"
)

// cluster is a set of raftmaster serve processes of one backend.
type cluster struct {
	backend string
	bin     string
	procs   []*procs.Proc
	hc      *http.Client
}

// startRaftCluster starts a bootstrapped Raft cluster of nodes serve
// processes with raftmaster's default settings, data and logs under dir,
// and waits until every node is ready.
func startRaftCluster(ctx context.Context, bin, dir string, nodes int) (*cluster, error) {
	raftAddrs, apis := make([]string, nodes), make([]string, nodes)
	for i := range nodes {
		var err error
		if raftAddrs[i], err = procs.FreeAddr(); err != nil {
			return nil, err
		}
		if apis[i], err = procs.FreeAddr(); err != nil {
			return nil, err
		}
	}
	keyArgs, err := procs.ClusterKeyArgs(dir)
	if err != nil {
		return nil, err
	}
	c := &cluster{backend: backendRaft, bin: bin, procs: procs.RaftProcs(dir, raftAddrs, apis, keyArgs...), hc: &http.Client{}}
	return c, c.start(ctx)
}

// startEtcdBackend starts nodes masters of the etcd backend on the etcd at
// endpoints, under prefix, with raftmaster's defaults (a 10 s session TTL
// unless ttl says otherwise), and waits until every one is ready: the
// active master, and standbys that know it.
func startEtcdBackend(ctx context.Context, bin, dir string, endpoints []string, prefix string, nodes int, ttl time.Duration) (*cluster, error) {
	c := &cluster{backend: backendEtcd, bin: bin, hc: &http.Client{}}
	for i := range nodes {
		api, err := procs.FreeAddr()
		if err != nil {
			return nil, err
		}
		p := &procs.Proc{ID: fmt.Sprintf("m%d", i+1), APIAddr: api}
		p.LogPath = filepath.Join(dir, p.ID+".log")
		p.Args = []string{"serve", "--backend", "etcd", "--node-id", p.ID, "--http-addr", api,
			"--etcd-endpoints", strings.Join(endpoints, ","), "--etcd-prefix", prefix}
		if ttl > 0 {
			p.Args = append(p.Args, "--etcd-ttl", ttl.String())
		}
		c.procs = append(c.procs, p)
	}
	return c, c.start(ctx)
}

func (c *cluster) start(ctx context.Context) error {
	for _, p := range c.procs {
		if err := p.Launch(c.bin); err != nil {
			c.stop()
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := procs.WaitReady(ctx, c.apis(), nil); err != nil {
		c.stop()
		return fmt.Errorf("%s cluster: %w\n%s", c.backend, err, procs.LogTail(c.procs, 15))
	}
	return nil
}

// stop sends SIGTERM to every node, and SIGKILL to those still running 10
// s later.
func (c *cluster) stop() { procs.StopAll(c.procs, 10*time.Second) }

func (c *cluster) apis() []string {
	out := make([]string, len(c.procs))
	for i, p := range c.procs {
		out[i] = p.APIAddr
	}
	return out
}

// newClient is a trainer's client of the cluster: every node's address,
// and a minute of retries.
func (c *cluster) newClient() (*client.Client, error) {
	return client.NewClient(client.WithAddrs(c.apis()...), client.WithRetry(time.Minute))
}

// status asks one node for its stale status, within timeout.
func (c *cluster) status(ctx context.Context, addr string, timeout time.Duration) (rpc.StatusResponse, error) {
	var st rpc.StatusResponse
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := getJSON(ctx, c.hc, "http://"+addr+rpc.PathStatus+"?"+rpc.ParamStale, &st)
	return st, err
}

// leader waits until a running node reports that it leads and is ready.
func (c *cluster) leader(ctx context.Context) (*procs.Proc, rpc.StatusResponse, error) {
	for {
		for _, p := range c.procs {
			if !p.Running() {
				continue
			}
			if st, err := c.status(ctx, p.APIAddr, time.Second); err == nil && st.State == "Leader" && st.Ready {
				return p, st, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, rpc.StatusResponse{}, fmt.Errorf("no ready leader: %w", context.Cause(ctx))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// kill sends SIGKILL to p and waits until it is reaped; it returns when
// the signal was sent and when the process was gone.
func (c *cluster) kill(p *procs.Proc) (sent, reaped time.Time, err error) {
	sent = time.Now()
	if err := p.Signal(syscall.SIGKILL); err != nil {
		return sent, sent, err
	}
	if !p.Wait(30 * time.Second) {
		return sent, time.Now(), fmt.Errorf("%s did not die", p.ID)
	}
	return sent, time.Now(), nil
}

// restart starts a stopped node again on its data.
func (c *cluster) restart(p *procs.Proc) error { return p.Launch(c.bin) }

// waitWhole waits until every node runs and is ready, one of them leads,
// and every node has applied what the leader had committed when the wait
// began, or the leader's commit index at the latest check.
func (c *cluster) waitWhole(ctx context.Context) error {
	var last string
	for {
		ok, why := c.whole(ctx)
		if ok {
			return nil
		}
		last = why
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster not whole again (%s): %w", last, context.Cause(ctx))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *cluster) whole(ctx context.Context) (bool, string) {
	sts := make([]rpc.StatusResponse, len(c.procs))
	leaders := 0
	var commit uint64
	for i, p := range c.procs {
		if !p.Running() {
			return false, p.ID + " not running"
		}
		st, err := c.status(ctx, p.APIAddr, time.Second)
		if err != nil {
			return false, p.ID + ": " + err.Error()
		}
		if !st.Ready {
			return false, p.ID + " not ready"
		}
		if st.State == "Leader" {
			leaders++
			commit = st.CommitIndex
		}
		sts[i] = st
	}
	if leaders != 1 {
		return false, fmt.Sprintf("%d leaders", leaders)
	}
	if c.backend == backendRaft {
		for i, st := range sts {
			// The trainers keep writing: allow what a few round trips add.
			if st.AppliedIndex+256 < commit {
				return false, fmt.Sprintf("%s applied %d of %d", c.procs[i].ID, st.AppliedIndex, commit)
			}
		}
	}
	return true, ""
}

// setDataset sets the dataset of path with one chunk per task and the
// given lease, and returns how long it took.
func (c *cluster) setDataset(path string, lease time.Duration, budget time.Duration) (time.Duration, error) {
	cl, err := client.NewClient(client.WithAddrs(c.apis()...), client.WithRetry(budget))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	start := time.Now()
	resp, err := cl.SetDatasetWithParams([]string{path}, client.DatasetParams{ChunksPerTask: 1, TaskTimeout: lease})
	if err != nil {
		return time.Since(start), err
	}
	if resp.Ignored {
		return time.Since(start), errors.New("a dataset was already set")
	}
	return time.Since(start), nil
}

// logTail is the end of every node's log, for error reports.
func (c *cluster) logTail() string { return procs.LogTail(c.procs, 15) }

// getJSON GETs url and decodes a 200 answer into v.
func getJSON(ctx context.Context, hc *http.Client, url string, v any) error {
	body, err := getBody(ctx, hc, url)
	if err != nil {
		return err
	}
	return json.Unmarshal(body, v)
}

// maxBody bounds the answers the benchmark reads.
const maxBody = 64 << 20

// getBody GETs url and returns the body of a 200 answer.
func getBody(ctx context.Context, hc *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	// Read into a buffer of the announced size: a large answer (an
	// allgather result) is then read without growing and copying.
	var buf bytes.Buffer
	if n := resp.ContentLength; n > 0 && n <= maxBody {
		buf.Grow(int(n) + bytes.MinRead)
	}
	if _, err := buf.ReadFrom(io.LimitReader(resp.Body, maxBody)); err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(buf.Bytes()))
	}
	return buf.Bytes(), nil
}

// raftmasterBinary finds the raftmaster binary to run: path when given;
// else the raftmaster next to this executable (bin/raftmaster beside
// bin/raftmaster-bench) or bin/raftmaster under the working directory;
// else it builds ./cmd/raftmaster of the module around the working
// directory into dir.
func raftmasterBinary(path, dir string, progress func(string, ...any)) (string, error) {
	if path != "" {
		if _, err := os.Stat(path); err != nil {
			return "", fmt.Errorf("--raftmaster: %w", err)
		}
		return filepath.Abs(path)
	}
	var candidates []string
	if exe, err := os.Executable(); err == nil {
		candidates = append(candidates, filepath.Join(filepath.Dir(exe), "raftmaster"))
	}
	candidates = append(candidates, filepath.Join("bin", "raftmaster"))
	for _, c := range candidates {
		if st, err := os.Stat(c); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return filepath.Abs(c)
		}
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	mod := strings.TrimSpace(string(out))
	if err != nil || mod == "" || mod == os.DevNull {
		return "", errors.New("no raftmaster binary found (bin/raftmaster) and not inside the module to build one: give --raftmaster")
	}
	bin := filepath.Join(dir, "raftmaster")
	progress("building raftmaster into %s", bin)
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/raftmaster")
	cmd.Dir = filepath.Dir(mod)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/raftmaster: %v\n%s", err, out)
	}
	return bin, nil
}

// binaryVersion is what `bin --version` prints.
func binaryVersion(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
