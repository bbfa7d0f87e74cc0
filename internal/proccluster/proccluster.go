// Package proccluster starts clusters of real "raftmaster serve" processes
// on 127.0.0.1 for integration and fault-injection tests: it builds the
// binary, picks free ports, and can kill, pause, resume and restart nodes,
// failing the test when it cannot. The processes themselves are
// internal/procs, which `raftmaster local` and `raftmaster bench` use too.
package proccluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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

	"github.com/raftmaster/raftmaster/internal/certs"
	"github.com/raftmaster/raftmaster/internal/procs"
	"github.com/raftmaster/raftmaster/rpc"
)

// Proc is one serve process.
type Proc = procs.Proc

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
	a, err := procs.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return a
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
	// BootstrapExpect, when above 0, starts the nodes as a deployment
	// does: every node with --join listing every node's API address and
	// --bootstrap-expect BootstrapExpect, instead of --peers.
	BootstrapExpect int
	// Hold describes the nodes without starting them; start each with
	// Cluster.Launch.
	Hold bool
	// Uncredentialed starts the nodes without a cluster key, as a
	// release before cluster keys must be: a node of this release then
	// needs --insecure. By default the nodes share a cluster key of their
	// own (KeyArgs), unless Args give certificates or --insecure.
	Uncredentialed bool
}

// Cluster is a set of serve processes.
type Cluster struct {
	t     testing.TB
	Bin   string
	Dir   string
	Procs []*Proc
	// KeyArgs are the serve flags of the cluster's key, given to every
	// node it starts; empty when the cluster has none.
	KeyArgs []string
}

// Start builds the binary and starts a bootstrapped cluster. Processes are
// killed at the end of the test; their logs are printed if it failed.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Nodes == 0 {
		opts.Nodes = 3
	}
	c := &Cluster{t: t, Bin: Binary(t), Dir: t.TempDir()}
	raftAddrs, apiAddrs := make([]string, opts.Nodes), make([]string, opts.Nodes)
	for i := range opts.Nodes {
		raftAddrs[i], apiAddrs[i] = FreePort(t), FreePort(t)
	}
	if !opts.Uncredentialed && !slices.Contains(opts.Args, "--tls-cert") && !slices.Contains(opts.Args, "--insecure") {
		var err error
		if c.KeyArgs, err = procs.ClusterKeyArgs(c.Dir); err != nil {
			t.Fatal(err)
		}
	}
	args := append(append(slices.Clone(testServeFlags), c.KeyArgs...), opts.Args...)
	if opts.BootstrapExpect > 0 {
		c.Procs = procs.FoundingProcs(c.Dir, raftAddrs, apiAddrs, opts.BootstrapExpect, args...)
	} else {
		c.Procs = procs.RaftProcs(c.Dir, raftAddrs, apiAddrs, args...)
	}
	var extra map[string][]string
	if opts.Prepare != nil {
		extra = opts.Prepare(c.Procs)
	}
	for _, p := range c.Procs {
		p.Args = append(p.Args, extra[p.ID]...)
		if !opts.Hold {
			c.launch(p)
		}
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
		p.Args = append([]string{"serve", "--backend", "etcd", "--etcd-endpoints", endpoint,
			"--node-id", p.ID, "--http-addr", p.APIAddr, "--log-level", "info"}, args...)
		c.Procs = append(c.Procs, p)
		c.launch(p)
	}
	t.Cleanup(c.cleanup)
	return c
}

// testServeFlags are the serve flags of every test node: short Raft
// timeouts, and logs at info level.
var testServeFlags = []string{"--heartbeat-timeout", "500ms", "--election-timeout", "1s", "--leader-lease-timeout", "500ms",
	"--log-level", "info"}

// AddProc starts a new node that asks the members at the API addresses in
// join for membership (serve --join, the name every release reads); with
// none, it waits to be added.
func (c *Cluster) AddProc(id string, join []string, extra ...string) *Proc {
	p := &Proc{ID: id, RaftAddr: FreePort(c.t), APIAddr: FreePort(c.t)}
	p.RaftAdv = p.RaftAddr
	p.DataDir = filepath.Join(c.Dir, p.ID)
	p.LogPath = filepath.Join(c.Dir, p.ID+".log")
	p.Args = append(procs.ServeArgs(p), testServeFlags...)
	p.Args = append(p.Args, c.KeyArgs...)
	if len(join) > 0 {
		p.Args = append(p.Args, "--join", strings.Join(join, ","))
	}
	p.Args = append(p.Args, extra...)
	c.Procs = append(c.Procs, p)
	c.launch(p)
	return p
}

// Launch starts a node described but not started (Options.Hold).
func (c *Cluster) Launch(p *Proc) {
	c.t.Helper()
	if p.Running() {
		c.t.Fatalf("launch %s: already running", p.ID)
	}
	c.launch(p)
}

// launch starts p with its flags followed by extra ones (later flags win).
func (c *Cluster) launch(p *Proc, extra ...string) {
	c.t.Helper()
	if err := p.Launch(c.Bin, extra...); err != nil {
		c.t.Fatal(err)
	}
}

// Kill sends SIGKILL and waits for the process to exit.
func (c *Cluster) Kill(p *Proc) {
	c.t.Helper()
	if p.Paused() {
		_ = p.Signal(syscall.SIGCONT)
	}
	_ = p.Signal(syscall.SIGKILL)
	if !p.Wait(30 * time.Second) {
		c.t.Fatalf("%s did not die", p.ID)
	}
}

// Term sends SIGTERM (graceful: leadership transfer) and waits.
func (c *Cluster) Term(p *Proc) {
	c.t.Helper()
	_ = p.Signal(syscall.SIGTERM)
	if !p.Wait(60 * time.Second) {
		c.t.Fatalf("%s did not stop after SIGTERM", p.ID)
	}
}

// Pause sends SIGSTOP.
func (c *Cluster) Pause(p *Proc) {
	if err := p.Signal(syscall.SIGSTOP); err == nil {
		p.SetPaused(true)
	}
}

// Resume sends SIGCONT.
func (c *Cluster) Resume(p *Proc) {
	if err := p.Signal(syscall.SIGCONT); err == nil {
		p.SetPaused(false)
	}
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
	err := getJSON(ctx, addr, rpc.PathStatus+"?stale=1", &st)
	return st, err
}

// DebugState fetches a node's applied index and state hash.
func DebugState(ctx context.Context, addr string) (rpc.DebugStateResponse, error) {
	var st rpc.DebugStateResponse
	err := getJSON(ctx, addr, rpc.PathDebugState, &st)
	return st, err
}

// getJSON reads path from the node at addr. A cluster that serves HTTPS
// (serve --tls-cert) is asked over HTTPS, trusting the CA the CLI would
// trust: RAFTMASTER_TLS_CA.
func getJSON(ctx context.Context, addr, path string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	hc, scheme, err := apiClient()
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+addr+path, nil)
	if err != nil {
		return err
	}
	// A cluster that requires tokens (serve --auth-tokens) is watched
	// with the token the CLI would use.
	if tok := os.Getenv("RAFTMASTER_TOKEN"); tok != "" {
		req.Header.Set(rpc.HeaderAuthorization, "Bearer "+tok)
	}
	resp, err := hc.Do(req)
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

var (
	tlsMu     sync.Mutex
	tlsCAPath string
	tlsClient *http.Client
)

// apiClient is the HTTP client and scheme of the nodes' API: HTTPS
// trusting RAFTMASTER_TLS_CA when it is set, else plain HTTP.
func apiClient() (*http.Client, string, error) {
	ca := os.Getenv("RAFTMASTER_TLS_CA")
	if ca == "" {
		return http.DefaultClient, "http", nil
	}
	tlsMu.Lock()
	defer tlsMu.Unlock()
	if ca != tlsCAPath || tlsClient == nil {
		conf, err := certs.ClientTLS(ca)
		if err != nil {
			return nil, "", err
		}
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig = conf
		tlsCAPath, tlsClient = ca, &http.Client{Transport: t}
	}
	return tlsClient, "https", nil
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
		if !p.Running() || p.Paused() {
			continue
		}
		st, err := Status(context.Background(), p.APIAddr)
		if err == nil && st.State == "Leader" && st.Ready {
			return p
		}
	}
	return nil
}

// WaitReady waits until every running node is ready, one of them leads,
// the leader's node registry holds every running node, and every node has
// applied the cluster's protocol level of its build, so that no
// registration or level is still to be applied when a test compares
// states.
func (c *Cluster) WaitReady() {
	c.t.Helper()
	c.WaitFor("every node ready and registered", 60*time.Second, func() bool {
		running, leader, etcd := 0, "", false
		for _, p := range c.Procs {
			if !p.Running() || p.Paused() {
				continue
			}
			st, err := Status(context.Background(), p.APIAddr)
			if err != nil || !st.Ready {
				return false
			}
			if st.RaftAddr == "" {
				etcd = true // masters of the etcd backend keep no registry
			}
			if st.RaftAddr != "" && (st.ClusterProtocol < st.Protocol || !st.Registered) {
				// The leader raises the level once every node answers, and
				// registrations then gain each node's release.
				return false
			}
			running++
			if st.State == "Leader" {
				leader = p.APIAddr
			}
		}
		if etcd {
			return true
		}
		if leader == "" {
			return false
		}
		var cl rpc.ClusterResponse
		err := getJSON(context.Background(), leader, rpc.PathCluster+"?"+rpc.ParamStale, &cl)
		return err == nil && cl.FSM.Nodes >= running
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
			if p.Running() && !p.Paused() {
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
			if p.Paused() {
				_ = p.Signal(syscall.SIGCONT)
			}
			_ = p.Signal(syscall.SIGKILL)
			p.Wait(10 * time.Second)
		}
	}
	if c.t.Failed() {
		c.t.Log(procs.LogTail(c.Procs, 150))
	}
}
