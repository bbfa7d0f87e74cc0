// Package proccluster starts clusters of real "raftmaster serve" processes
// on 127.0.0.1 for integration and fault-injection tests: it builds the
// binary, picks free ports, and can kill, pause, resume and restart nodes.
package proccluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/rpc"
)

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// Binary builds cmd/raftmaster once per test process and returns its path.
// RAFTMASTER_BIN overrides it with a prebuilt binary.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("RAFTMASTER_BIN"); p != "" {
		return p
	}
	buildOnce.Do(func() {
		root, err := ModuleRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "raftmaster-bin-")
		if err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(dir, "raftmaster")
		args := []string{"build", "-o", buildPath}
		if tags := os.Getenv("RAFTMASTER_BUILD_TAGS"); tags != "" {
			args = append(args, "-tags", tags)
		}
		cmd := exec.Command("go", append(args, "./cmd/raftmaster")...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}

// ModuleRoot returns the directory of the raftmaster module.
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the raftmaster module")
	}
	return filepath.Dir(mod), nil
}

// FreePort returns a 127.0.0.1 address with a port that was free a moment
// ago.
func FreePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Options configure a cluster.
type Options struct {
	// Nodes is the number of replicas (default 3).
	Nodes int
	// Args are extra serve flags for every node.
	Args []string
	// Prepare, when set, runs after every node's addresses are chosen and
	// before any starts; it returns extra serve flags per node (for example
	// the fault-injection proxies each node must dial).
	Prepare func(procs []*Proc) map[string][]string
}

// Proc is one serve process.
type Proc struct {
	ID       string
	RaftAddr string // address the node listens on for Raft
	RaftAdv  string // address other nodes dial
	APIAddr  string
	DataDir  string
	LogPath  string
	args     []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	paused bool
}

// Cluster is a set of serve processes.
type Cluster struct {
	t     testing.TB
	Bin   string
	Dir   string
	Procs []*Proc
	peers string
}

// Start builds the binary and starts a bootstrapped cluster. Processes are
// killed at the end of the test; their logs are printed if it failed.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Nodes == 0 {
		opts.Nodes = 3
	}
	c := &Cluster{t: t, Bin: Binary(t), Dir: t.TempDir()}
	var peers []string
	for i := range opts.Nodes {
		p := &Proc{
			ID:       fmt.Sprintf("n%d", i+1),
			RaftAddr: FreePort(t),
			APIAddr:  FreePort(t),
		}
		p.RaftAdv = p.RaftAddr
		p.DataDir = filepath.Join(c.Dir, p.ID)
		p.LogPath = filepath.Join(c.Dir, p.ID+".log")
		peers = append(peers, p.ID+"="+p.RaftAdv)
		c.Procs = append(c.Procs, p)
	}
	c.peers = strings.Join(peers, ",")
	var extra map[string][]string
	if opts.Prepare != nil {
		extra = opts.Prepare(c.Procs)
	}
	for _, p := range c.Procs {
		p.args = append(c.serveArgs(p), "--peers", c.peers)
		p.args = append(p.args, opts.Args...)
		p.args = append(p.args, extra[p.ID]...)
		c.launch(p)
	}
	t.Cleanup(c.cleanup)
	return c
}

// StartEtcd starts nodes masters of the etcd backend against the etcd at
// endpoint, each with the extra serve flags args. The first to take the
// lock serves; the others stand by.
func StartEtcd(t testing.TB, endpoint string, nodes int, args ...string) *Cluster {
	t.Helper()
	c := &Cluster{t: t, Bin: Binary(t), Dir: t.TempDir()}
	for i := range nodes {
		p := &Proc{ID: fmt.Sprintf("m%d", i+1), APIAddr: FreePort(t)}
		p.LogPath = filepath.Join(c.Dir, p.ID+".log")
		p.args = append([]string{"serve", "--backend", "etcd", "--etcd-endpoints", endpoint,
			"--node-id", p.ID, "--http-addr", p.APIAddr, "--log-level", "info"}, args...)
		c.Procs = append(c.Procs, p)
		c.launch(p)
	}
	t.Cleanup(c.cleanup)
	return c
}

func (c *Cluster) serveArgs(p *Proc) []string {
	return []string{"serve", "--node-id", p.ID, "--data-dir", p.DataDir,
		"--raft-addr", p.RaftAddr, "--raft-advertise", p.RaftAdv, "--http-addr", p.APIAddr,
		"--heartbeat-timeout", "500ms", "--election-timeout", "1s", "--leader-lease-timeout", "500ms",
		"--log-level", "info"}
}

// AddProc starts a new node that joins the cluster through the API
// addresses in join.
func (c *Cluster) AddProc(id string, join []string, extra ...string) *Proc {
	p := &Proc{ID: id, RaftAddr: FreePort(c.t), APIAddr: FreePort(c.t)}
	p.RaftAdv = p.RaftAddr
	p.DataDir = filepath.Join(c.Dir, p.ID)
	p.LogPath = filepath.Join(c.Dir, p.ID+".log")
	p.args = append(c.serveArgs(p), "--join", strings.Join(join, ","))
	p.args = append(p.args, extra...)
	c.Procs = append(c.Procs, p)
	c.launch(p)
	return p
}

// launch starts p with its flags followed by extra ones (later flags win).
func (c *Cluster) launch(p *Proc, extra ...string) {
	c.t.Helper()
	logf, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(c.Bin, append(slices.Clone(p.args), extra...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		c.t.Fatalf("start %s: %v", p.ID, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	p.mu.Lock()
	p.cmd, p.done, p.paused = cmd, done, false
	p.mu.Unlock()
}

// Running reports whether the process is alive.
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (p *Proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return fmt.Errorf("%s is not running", p.ID)
	}
	return p.cmd.Process.Signal(sig)
}

// wait waits for the process to exit.
func (p *Proc) wait(timeout time.Duration) bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return true
	}
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// Kill sends SIGKILL and waits for the process to exit.
func (c *Cluster) Kill(p *Proc) {
	c.t.Helper()
	if p.isPaused() {
		_ = p.signal(syscall.SIGCONT)
	}
	_ = p.signal(syscall.SIGKILL)
	if !p.wait(30 * time.Second) {
		c.t.Fatalf("%s did not die", p.ID)
	}
}

// Term sends SIGTERM (graceful: leadership transfer) and waits.
func (c *Cluster) Term(p *Proc) {
	c.t.Helper()
	_ = p.signal(syscall.SIGTERM)
	if !p.wait(60 * time.Second) {
		c.t.Fatalf("%s did not stop after SIGTERM", p.ID)
	}
}

// Pause sends SIGSTOP.
func (c *Cluster) Pause(p *Proc) {
	if err := p.signal(syscall.SIGSTOP); err == nil {
		p.mu.Lock()
		p.paused = true
		p.mu.Unlock()
	}
}

// Resume sends SIGCONT.
func (c *Cluster) Resume(p *Proc) {
	if err := p.signal(syscall.SIGCONT); err == nil {
		p.mu.Lock()
		p.paused = false
		p.mu.Unlock()
	}
}

// Paused reports whether the process was stopped with Pause.
func (p *Proc) Paused() bool { return p.isPaused() }

func (p *Proc) isPaused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}

// Restart starts a stopped node again on the same data dir; extra flags
// come after the original ones, so they win.
func (c *Cluster) Restart(p *Proc, extra ...string) {
	c.t.Helper()
	if p.Running() {
		c.t.Fatalf("restart %s: still running", p.ID)
	}
	c.launch(p, extra...)
}

// APIAddrs returns every node's API address.
func (c *Cluster) APIAddrs() []string {
	var out []string
	for _, p := range c.Procs {
		out = append(out, p.APIAddr)
	}
	return out
}

// Status fetches a node's stale status.
func Status(ctx context.Context, addr string) (rpc.StatusResponse, error) {
	var st rpc.StatusResponse
	err := getJSON(ctx, "http://"+addr+rpc.PathStatus+"?stale=1", &st)
	return st, err
}

// DebugState fetches a node's applied index and state hash.
func DebugState(ctx context.Context, addr string) (rpc.DebugStateResponse, error) {
	var st rpc.DebugStateResponse
	err := getJSON(ctx, "http://"+addr+rpc.PathDebugState, &st)
	return st, err
}

func getJSON(ctx context.Context, url string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(buf.Bytes()))
	}
	return json.Unmarshal(buf.Bytes(), v)
}

// WaitFor polls cond every 50ms until it holds or timeout passes.
func (c *Cluster) WaitFor(what string, timeout time.Duration, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Leader waits for a ready leader among the running nodes and returns it.
func (c *Cluster) Leader() *Proc {
	c.t.Helper()
	var leader *Proc
	c.WaitFor("a ready leader", 60*time.Second, func() bool {
		leader = c.currentLeader()
		return leader != nil
	})
	return leader
}

func (c *Cluster) currentLeader() *Proc {
	for _, p := range c.Procs {
		if !p.Running() || p.isPaused() {
			continue
		}
		st, err := Status(context.Background(), p.APIAddr)
		if err == nil && st.State == "Leader" && st.Ready {
			return p
		}
	}
	return nil
}

// WaitReady waits until every running node answers /readyz.
func (c *Cluster) WaitReady() {
	c.t.Helper()
	c.WaitFor("every node ready", 60*time.Second, func() bool {
		for _, p := range c.Procs {
			if !p.Running() || p.isPaused() {
				continue
			}
			st, err := Status(context.Background(), p.APIAddr)
			if err != nil || !st.Ready {
				return false
			}
		}
		return true
	})
}

// Converged waits until every running node reports the same applied index
// and state hash, and returns the hash.
func (c *Cluster) Converged(timeout time.Duration) string {
	c.t.Helper()
	var hash string
	c.WaitFor("replicas to converge", timeout, func() bool {
		var addrs []string
		for _, p := range c.Procs {
			if p.Running() && !p.isPaused() {
				addrs = append(addrs, p.APIAddr)
			}
		}
		var ok bool
		hash, ok = SameState(context.Background(), addrs)
		return ok
	})
	return hash
}

// SameState asks every node at addrs for its applied index and state hash;
// it reports whether they all answered with the same ones, and the hash.
func SameState(ctx context.Context, addrs []string) (string, bool) {
	var hash string
	var idx uint64
	for _, a := range addrs {
		st, err := DebugState(ctx, a)
		if err != nil {
			return "", false
		}
		if hash == "" {
			hash, idx = st.Hash, st.AppliedIndex
		} else if st.Hash != hash || st.AppliedIndex != idx {
			return "", false
		}
	}
	return hash, hash != ""
}

// Others returns the running nodes other than p.
func (c *Cluster) Others(p *Proc) []*Proc {
	var out []*Proc
	for _, q := range c.Procs {
		if q != p && q.Running() {
			out = append(out, q)
		}
	}
	return out
}

func (c *Cluster) cleanup() {
	for _, p := range c.Procs {
		if p.Running() {
			if p.isPaused() {
				_ = p.signal(syscall.SIGCONT)
			}
			_ = p.signal(syscall.SIGKILL)
			p.wait(10 * time.Second)
		}
	}
	if c.t.Failed() {
		for _, p := range c.Procs {
			b, err := os.ReadFile(p.LogPath)
			if err != nil {
				continue
			}
			lines := strings.Split(string(b), "\n")
			if len(lines) > 150 {
				lines = lines[len(lines)-150:]
			}
			c.t.Logf("---- last log lines of %s ----\n%s", p.ID, strings.Join(lines, "\n"))
		}
	}
}
