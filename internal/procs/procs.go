// Package procs runs real "raftmaster serve" processes: it describes the
// nodes of a local cluster, launches them in their own process group,
// signals and stops them, and waits until they are ready. It is the core
// that `raftmaster local`, `raftmaster bench` and the tests' clusters
// (internal/proccluster) are built on.
package procs

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/raftmaster/raftmaster/internal/certs"
	"github.com/raftmaster/raftmaster/rpc"
)

// Proc is one "raftmaster serve" process.
type Proc struct {
	ID       string
	RaftAddr string // address the node listens on for Raft
	RaftAdv  string // address other nodes dial
	APIAddr  string
	DataDir  string
	// LogPath is where the process's output is appended, unless Output is
	// set.
	LogPath string
	Output  io.Writer
	// Args are its command line after the binary.
	Args []string

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	paused  bool
	exitErr error // what the last process's Wait returned
}

// RaftProcs describes the n nodes n1...nN of a bootstrapped Raft cluster:
// node i listens for Raft on raftAddrs[i] and for the API on apiAddrs[i],
// keeps its data in dir/nI and its log in dir/nI.log, and bootstraps with
// every node as a peer. args are extra serve flags for every node.
func RaftProcs(dir string, raftAddrs, apiAddrs []string, args ...string) []*Proc {
	var peers []string
	for i, a := range raftAddrs {
		peers = append(peers, fmt.Sprintf("n%d=%s", i+1, a))
	}
	return describe(dir, raftAddrs, apiAddrs, append([]string{"--peers", strings.Join(peers, ",")}, args...))
}

// FoundingProcs describes the nodes n1...nN as RaftProcs does, but started
// as a deployment starts them: every node lists every API address in
// --join and bootstraps with --bootstrap-expect expect (the first expect
// nodes found the cluster; the others join it).
func FoundingProcs(dir string, raftAddrs, apiAddrs []string, expect int, args ...string) []*Proc {
	return describe(dir, raftAddrs, apiAddrs,
		append([]string{"--join", strings.Join(apiAddrs, ","), "--bootstrap-expect", fmt.Sprint(expect)}, args...))
}

// describe describes node i as n<i+1> on raftAddrs[i] and apiAddrs[i],
// with its data in dir and the serve flags args after its own.
func describe(dir string, raftAddrs, apiAddrs, args []string) []*Proc {
	procs := make([]*Proc, len(raftAddrs))
	for i := range raftAddrs {
		p := &Proc{ID: fmt.Sprintf("n%d", i+1), RaftAddr: raftAddrs[i], RaftAdv: raftAddrs[i], APIAddr: apiAddrs[i]}
		p.DataDir = filepath.Join(dir, p.ID)
		p.LogPath = filepath.Join(dir, p.ID+".log")
		p.Args = append(ServeArgs(p), args...)
		procs[i] = p
	}
	return procs
}

// ServeArgs are the serve flags of p's identity and addresses.
func ServeArgs(p *Proc) []string {
	return []string{"serve", "--node-id", p.ID, "--data-dir", p.DataDir,
		"--raft-addr", p.RaftAddr, "--raft-advertise", p.RaftAdv, "--http-addr", p.APIAddr}
}

// Launch starts p from bin with its Args followed by extra ones (later
// flags win). The process gets its own process group, so that a Ctrl-C
// meant for the parent does not reach it: the parent stops it in order.
func (p *Proc) Launch(bin string, extra ...string) error {
	out := p.Output
	var logf *os.File
	if out == nil {
		if err := os.MkdirAll(filepath.Dir(p.LogPath), 0o755); err != nil {
			return err
		}
		var err error
		if logf, err = os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
			return err
		}
		out = logf
	}
	cmd := exec.Command(bin, append(slices.Clone(p.Args), extra...)...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		if logf != nil {
			logf.Close()
		}
		return fmt.Errorf("start %s: %w", p.ID, err)
	}
	done := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.done, p.paused, p.exitErr = cmd, done, false, nil
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		if logf != nil {
			logf.Close()
		}
		p.mu.Lock()
		if p.done == done {
			p.exitErr = err
		}
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// ExitStatus describes how the process ended, such as "exit status 1" or
// "signal: killed"; "" while it runs or when it exited with status 0.
func (p *Proc) ExitStatus() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exitErr == nil {
		return ""
	}
	return p.exitErr.Error()
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

// Exited returns a channel closed when the process exits.
func (p *Proc) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return fmt.Errorf("%s is not running", p.ID)
	}
	return p.cmd.Process.Signal(sig)
}

// Wait waits up to timeout for the process to exit and reports whether it
// did.
func (p *Proc) Wait(timeout time.Duration) bool {
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

// Paused reports whether the process was stopped with SIGSTOP.
func (p *Proc) Paused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused
}

// SetPaused records that the process was stopped (SIGSTOP) or resumed.
func (p *Proc) SetPaused(v bool) {
	p.mu.Lock()
	p.paused = v
	p.mu.Unlock()
}

// StopAll sends SIGTERM to every running process (each hands leadership
// over and exits), waits up to timeout, and kills what still runs.
func StopAll(procs []*Proc, timeout time.Duration) {
	for _, p := range procs {
		if p.Running() {
			if p.Paused() {
				_ = p.Signal(syscall.SIGCONT)
			}
			_ = p.Signal(syscall.SIGTERM)
		}
	}
	end := time.Now().Add(timeout)
	for _, p := range procs {
		if !p.Wait(time.Until(end)) {
			_ = p.Signal(syscall.SIGKILL)
			p.Wait(10 * time.Second)
		}
	}
}

// WaitReady waits until every API address answers /readyz, or ctx ends.
// A cluster that serves HTTPS is asked with tlsConf, which trusts its CA;
// nil means plain HTTP.
func WaitReady(ctx context.Context, addrs []string, tlsConf *tls.Config) error {
	hc, scheme := probeClient(tlsConf)
	for _, a := range addrs {
		for {
			resp, err := hc.Get(scheme + "://" + a + rpc.PathReadyz)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s not ready: %w", a, context.Cause(ctx))
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// WaitProtocol waits until the node at addr has applied the highest
// protocol level its release knows, or ctx ends. A new cluster starts at
// level 1, and its leader raises the level once every member has
// registered its release: until then the features of later levels are
// refused or left out.
func WaitProtocol(ctx context.Context, addr string, tlsConf *tls.Config) error {
	hc, scheme := probeClient(tlsConf)
	for {
		var st rpc.StatusResponse
		resp, err := hc.Get(scheme + "://" + addr + rpc.PathStatus + "?" + rpc.ParamStale)
		if err == nil {
			err = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&st)
			resp.Body.Close()
			if err == nil && st.Protocol > 0 && st.ClusterProtocol >= st.Protocol {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: protocol level %d of %d: %w", addr, st.ClusterProtocol, st.Protocol, context.Cause(ctx))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// probeClient is the HTTP client and scheme of the waits above: HTTPS
// trusting tlsConf's CA when it is not nil.
func probeClient(tlsConf *tls.Config) (*http.Client, string) {
	hc := &http.Client{Timeout: time.Second}
	if tlsConf == nil {
		return hc, "http"
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = tlsConf
	hc.Transport = t
	return hc, "https"
}

// LogTail returns the last n lines of each process's log file.
func LogTail(procs []*Proc, n int) string {
	var b strings.Builder
	for _, p := range procs {
		data, err := os.ReadFile(p.LogPath)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		fmt.Fprintf(&b, "---- last log lines of %s ----\n%s\n", p.ID, strings.Join(lines[max(0, len(lines)-n):], "\n"))
	}
	return b.String()
}

// FreeAddr returns a 127.0.0.1 address with a port that was free a moment
// ago, and that it never returned before in this process: the kernel may
// hand a port just closed out again, and two nodes of one cluster given
// the same port would fail to start.
func FreeAddr() (string, error) {
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		addr := l.Addr().String()
		l.Close()
		if _, taken := handedOut.LoadOrStore(addr, true); !taken {
			return addr, nil
		}
	}
	return "", errors.New("no free port that was not handed out already")
}

// handedOut holds every address FreeAddr returned.
var handedOut sync.Map

// ClusterKeyFile is the cluster key's file in the directory of a local
// cluster (ClusterKeyArgs).
const ClusterKeyFile = "cluster.key"

// ClusterKeyArgs makes dir/cluster.key once, a cluster key every node of
// a local cluster shares, and returns the serve flags that give it to a
// node: Raft then runs over mutual TLS between them.
func ClusterKeyArgs(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, ClusterKeyFile)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if err := certs.WriteClusterKey(path, false); err != nil {
			return nil, err
		}
	}
	return []string{"--cluster-key-file", path}, nil
}

// Pid returns the process id of the running process, or 0 when it is not
// running.
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}
