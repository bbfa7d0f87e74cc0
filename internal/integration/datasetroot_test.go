package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/internal/proccluster"
)

// TestDatasetRootOnRealNodes starts a cluster with --dataset-root and
// asks it, as a trainer would, for files outside the root: by an absolute
// path, through "..", and through a symbolic link inside the root. Each is
// refused with an error that names the root and quotes nothing of the
// file, and the state does not change. A relative pattern is taken under
// the root, and its tasks are served.
func TestDatasetRootOnRealNodes(t *testing.T) {
	needsProcesses(t)
	root, outside := t.TempDir(), t.TempDir()
	writeDataset(t, root, 20, 10, 5)
	secret := filepath.Join(outside, "passwd")
	if err := os.WriteFile(secret, []byte("root:x:0:0:root:/root:/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(root, "link.recordio")); err != nil {
		t.Fatal(err)
	}
	c := proccluster.Start(t, proccluster.Options{Args: []string{"--dataset-root", root}})
	c.WaitReady()
	leader := c.Leader()
	hash := func() string { return stateHash(t, leader) }
	cl := newClient(t, client.WithAddrs(c.APIAddrs()...))
	before := hash()
	for _, globs := range [][]string{
		{secret},
		{"/etc/passwd"},
		{"../" + filepath.Base(outside) + "/passwd"},
		{"link.recordio"},
	} {
		err := cl.SetDataset(globs)
		if err == nil || !strings.Contains(err.Error(), "outside the dataset root") || strings.Contains(err.Error(), "root:x") || strings.Contains(err.Error(), "0x") {
			t.Errorf("SetDataset(%q): %v, want a refusal that quotes nothing", globs, err)
		}
	}
	if after := hash(); after != before {
		t.Fatalf("refused datasets changed the state")
	}
	if err := cl.SetDataset([]string{"train-*.recordio"}); err != nil {
		t.Fatalf("a dataset under the root: %v", err)
	}
	task, err := cl.GetTask(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range task.Chunks {
		if !strings.HasPrefix(ch.Path, root+string(filepath.Separator)) {
			t.Fatalf("chunk path %q is not under the root %s", ch.Path, root)
		}
	}
}
