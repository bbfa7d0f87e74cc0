package harness

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/raftmaster/raftmaster/internal/procs"
)

// StartRaftFromBackup starts a Raft cluster of nodes serve processes, with
// data and logs under dir, whose state is the backup file at backupPath, as
// an operator brings one back: `raftmaster restore` makes the first node's
// data directory from the file, that node starts alone and elects itself,
// and the others join it with serve --members, receiving the state as a
// Raft snapshot. It returns once every node is ready and has applied what
// the leader had. The nodes share a cluster key, as StartRaft's do.
func StartRaftFromBackup(ctx context.Context, bin, dir, backupPath string, nodes int) (*Cluster, error) {
	keyArgs, err := procs.ClusterKeyArgs(dir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Backend: BackendRaft, bin: bin, hc: &http.Client{}}
	for i := range nodes {
		raftAddr, err := procs.FreeAddr()
		if err != nil {
			return nil, err
		}
		api, err := procs.FreeAddr()
		if err != nil {
			return nil, err
		}
		p := &procs.Proc{ID: fmt.Sprintf("n%d", i+1), RaftAddr: raftAddr, RaftAdv: raftAddr, APIAddr: api}
		p.DataDir = filepath.Join(dir, p.ID)
		p.LogPath = filepath.Join(dir, p.ID+".log")
		p.Args = append(procs.ServeArgs(p), keyArgs...)
		c.Procs = append(c.Procs, p)
	}
	first := c.Procs[0]
	out, err := exec.CommandContext(ctx, bin, "restore", "--in", backupPath, "--data-dir", first.DataDir,
		"--node-id", first.ID, "--raft-addr", first.RaftAdv).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("raftmaster restore: %w\n%s", err, out)
	}
	for _, p := range c.Procs[1:] {
		p.Args = append(p.Args, "--members", first.APIAddr)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := first.Launch(bin); err != nil {
		return nil, err
	}
	if _, _, err := c.Leader(wctx); err != nil {
		c.Stop()
		return nil, fmt.Errorf("the restored node: %w\n%s", err, c.LogTail())
	}
	for _, p := range c.Procs[1:] {
		if err := p.Launch(bin); err != nil {
			c.Stop()
			return nil, err
		}
	}
	if err := procs.WaitReady(wctx, c.APIs(), nil); err != nil {
		c.Stop()
		return nil, fmt.Errorf("joining the restored node: %w\n%s", err, c.LogTail())
	}
	if err := c.WaitWhole(wctx); err != nil {
		c.Stop()
		return nil, fmt.Errorf("joining the restored node: %w\n%s", err, c.LogTail())
	}
	return c, nil
}
