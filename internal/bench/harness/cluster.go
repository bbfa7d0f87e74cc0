package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
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
	BackendRaft = "raft"
	BackendEtcd = "etcd"
)

// Cluster is a set of raftmaster serve processes of one backend.
type Cluster struct {
	// Backend is BackendRaft or BackendEtcd.
	Backend string
	// Procs are the serve processes, running or not.
	Procs []*procs.Proc

	bin string
	hc  *http.Client
}

// StartRaft starts, from the raftmaster binary bin, a bootstrapped Raft
// cluster of nodes serve processes with raftmaster's default settings but
// for the serve flags of args, data and logs under dir, and waits until
// every node is ready.
func StartRaft(ctx context.Context, bin, dir string, nodes int, args ...string) (*Cluster, error) {
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
	c := &Cluster{Backend: BackendRaft, Procs: procs.RaftProcs(dir, raftAddrs, apis, append(keyArgs, args...)...), bin: bin, hc: &http.Client{}}
	return c, c.start(ctx)
}

// StartEtcdBackend starts, from the raftmaster binary bin, nodes masters of
// the etcd backend on the etcd at endpoints, under prefix, with
// raftmaster's defaults (a 10 s session TTL unless ttl says otherwise),
// logs under dir, and waits until every one is ready: the active master,
// and standbys that know it.
func StartEtcdBackend(ctx context.Context, bin, dir string, endpoints []string, prefix string, nodes int, ttl time.Duration) (*Cluster, error) {
	c := &Cluster{Backend: BackendEtcd, bin: bin, hc: &http.Client{}}
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
		c.Procs = append(c.Procs, p)
	}
	return c, c.start(ctx)
}

// start launches every node and waits up to two minutes until all are
// ready; on failure it stops them.
func (c *Cluster) start(ctx context.Context) error {
	for _, p := range c.Procs {
		if err := p.Launch(c.bin); err != nil {
			c.Stop()
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := procs.WaitReady(ctx, c.APIs(), nil); err != nil {
		c.Stop()
		return fmt.Errorf("%s cluster: %w\n%s", c.Backend, err, c.LogTail())
	}
	return nil
}

// Stop sends SIGTERM to every node, and SIGKILL to those still running 10
// s later.
func (c *Cluster) Stop() { procs.StopAll(c.Procs, 10*time.Second) }

// APIs are the nodes' API addresses.
func (c *Cluster) APIs() []string {
	out := make([]string, len(c.Procs))
	for i, p := range c.Procs {
		out[i] = p.APIAddr
	}
	return out
}

// NewClient is a trainer's client of the cluster: every node's address,
// and a minute of retries.
func (c *Cluster) NewClient() (*client.Client, error) {
	return client.NewClient(client.WithAddrs(c.APIs()...), client.WithRetry(time.Minute))
}

// Status asks one node for its stale status, within timeout.
func (c *Cluster) Status(ctx context.Context, addr string, timeout time.Duration) (rpc.StatusResponse, error) {
	var st rpc.StatusResponse
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := getJSON(ctx, c.hc, "http://"+addr+rpc.PathStatus+"?"+rpc.ParamStale, &st)
	return st, err
}

// Leader waits until a running node reports that it leads and is ready.
func (c *Cluster) Leader(ctx context.Context) (*procs.Proc, rpc.StatusResponse, error) {
	for {
		for _, p := range c.Procs {
			if !p.Running() {
				continue
			}
			if st, err := c.Status(ctx, p.APIAddr, time.Second); err == nil && st.State == "Leader" && st.Ready {
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

// Kill sends SIGKILL to p and waits until it is reaped; it returns when
// the signal was sent and when the process was gone.
func (c *Cluster) Kill(p *procs.Proc) (sent, reaped time.Time, err error) {
	sent = time.Now()
	if err := p.Signal(syscall.SIGKILL); err != nil {
		return sent, sent, err
	}
	if !p.Wait(30 * time.Second) {
		return sent, time.Now(), fmt.Errorf("%s did not die", p.ID)
	}
	return sent, time.Now(), nil
}

// Restart starts a stopped node again on its data.
func (c *Cluster) Restart(p *procs.Proc) error { return p.Launch(c.bin) }

// WaitWhole waits until every node runs and is ready, one of them leads,
// and every node has applied what the leader had committed when the wait
// began, or the leader's commit index at the latest check.
func (c *Cluster) WaitWhole(ctx context.Context) error {
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

func (c *Cluster) whole(ctx context.Context) (bool, string) {
	sts := make([]rpc.StatusResponse, len(c.Procs))
	leaders := 0
	var commit uint64
	for i, p := range c.Procs {
		if !p.Running() {
			return false, p.ID + " not running"
		}
		st, err := c.Status(ctx, p.APIAddr, time.Second)
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
	if c.Backend == BackendRaft {
		for i, st := range sts {
			// The trainers keep writing: allow what a few round trips add.
			if st.AppliedIndex+256 < commit {
				return false, fmt.Sprintf("%s applied %d of %d", c.Procs[i].ID, st.AppliedIndex, commit)
			}
		}
	}
	return true, ""
}

// SetDataset sets the dataset of path with one chunk per task and the
// given lease, with a budget of retries, and returns how long it took.
func (c *Cluster) SetDataset(path string, lease time.Duration, budget time.Duration) (time.Duration, error) {
	cl, err := client.NewClient(client.WithAddrs(c.APIs()...), client.WithRetry(budget))
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

// LogTail is the end of every node's log, for error reports.
func (c *Cluster) LogTail() string { return procs.LogTail(c.Procs, 15) }

// getJSON GETs url and decodes a 200 answer into v.
func getJSON(ctx context.Context, hc *http.Client, url string, v any) error {
	body, err := GetBody(ctx, hc, url)
	if err != nil {
		return err
	}
	return json.Unmarshal(body, v)
}

// maxBody bounds the answers GetBody reads.
const maxBody = 64 << 20

// GetBody GETs url and returns the body of a 200 answer.
func GetBody(ctx context.Context, hc *http.Client, url string) ([]byte, error) {
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
