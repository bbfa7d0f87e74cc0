package rawraft

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/raftmaster/raftmaster/internal/bench/measure"
	"github.com/raftmaster/raftmaster/internal/procs"
)

// Cluster is a running raw Raft cluster of child processes.
type Cluster struct {
	Procs []*procs.Proc
	// Control are the nodes' control HTTP addresses, in the order of Procs.
	Control []string
	hc      *http.Client
}

// Start launches nodes raw Raft nodes from exe (the bench binary, which
// runs Main when its first argument is Mode) with their data and logs
// under dir, and waits until one of them leads.
func Start(ctx context.Context, exe, dir string, nodes int) (*Cluster, error) {
	raftAddrs := make([]string, nodes)
	c := &Cluster{Control: make([]string, nodes), hc: &http.Client{Timeout: 5 * time.Second}}
	var peers []string
	for i := range nodes {
		var err error
		if raftAddrs[i], err = procs.FreeAddr(); err != nil {
			return nil, err
		}
		if c.Control[i], err = procs.FreeAddr(); err != nil {
			return nil, err
		}
		peers = append(peers, fmt.Sprintf("r%d=%s", i+1, raftAddrs[i]))
	}
	for i := range nodes {
		id := fmt.Sprintf("r%d", i+1)
		p := &procs.Proc{ID: id, RaftAddr: raftAddrs[i], APIAddr: c.Control[i], DataDir: filepath.Join(dir, id),
			LogPath: filepath.Join(dir, id+".log"),
			Args: []string{Mode, "--id", id, "--dir", filepath.Join(dir, id), "--raft-addr", raftAddrs[i],
				"--control-addr", c.Control[i], "--peers", strings.Join(peers, ",")}}
		if err := p.Launch(exe); err != nil {
			c.Stop()
			return nil, err
		}
		c.Procs = append(c.Procs, p)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := c.Leader(ctx); err != nil {
		c.Stop()
		return nil, fmt.Errorf("raw raft: %w\n%s", err, procs.LogTail(c.Procs, 10))
	}
	return c, nil
}

// Leader waits until a node reports that it leads, and returns its control
// address.
func (c *Cluster) Leader(ctx context.Context) (string, error) {
	for {
		for _, a := range c.Control {
			if st, err := c.status(ctx, a); err == nil && st.State == "Leader" {
				return a, nil
			}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("no leader: %w", context.Cause(ctx))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *Cluster) status(ctx context.Context, addr string) (Status, error) {
	var st Status
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/status", nil)
	if err != nil {
		return st, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// Load runs req on the leader and returns its measurement.
func (c *Cluster) Load(ctx context.Context, req LoadRequest) (measure.Run, error) {
	var run measure.Run
	leader, err := c.Leader(ctx)
	if err != nil {
		return run, err
	}
	body, _ := json.Marshal(req)
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+leader+"/load", bytes.NewReader(body))
	if err != nil {
		return run, err
	}
	hc := &http.Client{Timeout: req.Warmup + req.Window + time.Minute}
	resp, err := hc.Do(hreq)
	if err != nil {
		return run, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return run, fmt.Errorf("raw raft load on %s: %s: %s", leader, resp.Status, bytes.TrimSpace(msg))
	}
	return run, json.NewDecoder(resp.Body).Decode(&run)
}

// Stop stops every node (SIGTERM, then SIGKILL after 10 s).
func (c *Cluster) Stop() { procs.StopAll(c.Procs, 10*time.Second) }
