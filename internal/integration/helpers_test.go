package integration

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/internal/proccluster"
	"github.com/raftmaster/raftmaster/recordio"
	"os"
)

// writeDataset writes records "0".."n-1" into files of perFile records,
// with a small chunk size so each file has several chunks.
func writeDataset(t *testing.T, dir string, n, perFile, maxChunk int) string {
	t.Helper()
	for f := 0; f*perFile < n; f++ {
		path := filepath.Join(dir, fmt.Sprintf("train-%03d.recordio", f))
		file, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		w := recordio.NewWriter(file, maxChunk, recordio.NoCompression)
		for i := f * perFile; i < min((f+1)*perFile, n); i++ {
			if _, err := w.Write([]byte(strconv.Itoa(i))); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := file.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "train-*.recordio")
}

func newClient(t *testing.T, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.NewClient(append([]client.Option{client.WithRetry(2 * time.Minute)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// cli runs the raftmaster binary and returns its stdout.
func cli(t *testing.T, c *proccluster.Cluster, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(c.Bin, args...)
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), fmt.Errorf("%v: %s", err, ee.Stderr)
	}
	return string(out), err
}

// follower returns a running node that is not the leader.
func follower(c *proccluster.Cluster) *proccluster.Proc {
	leader := c.Leader()
	return c.Others(leader)[0]
}

func readFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}

// stateHash is the hash of p's state, which a refused request must leave
// as it was.
func stateHash(t *testing.T, p *proccluster.Proc) string {
	t.Helper()
	st, err := proccluster.DebugState(context.Background(), p.APIAddr)
	if err != nil {
		t.Fatal(err)
	}
	return st.Hash
}

// needsProcesses skips t under -short: t starts real processes (raftmaster
// serve, its CLI, the previous release, Python, Docker), which the unit
// tier, make test-short, leaves out.
func needsProcesses(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts real processes")
	}
}

// waitProtocol waits until every running node of c reports the cluster at
// protocol level or later: a new cluster raises its level once every node
// has registered its release.
func waitProtocol(t *testing.T, c *proccluster.Cluster, level uint64) {
	t.Helper()
	c.WaitFor(fmt.Sprintf("every node at protocol level %d", level), 2*time.Minute, func() bool {
		for _, p := range c.Procs {
			if st, err := proccluster.Status(context.Background(), p.APIAddr); p.Running() && (err != nil || st.ClusterProtocol < level) {
				return false
			}
		}
		return true
	})
}
