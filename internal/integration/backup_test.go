package integration

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/proccluster"
)

// TestBackupUnderLoadRestores takes a backup with `raftmaster backup` while
// trainers read, and restores it with `raftmaster restore` into the data
// directory of a new node: the snapshot it seeds has the backup's state
// hash, and the node, started alone, serves that state (the same dataset,
// pass and task counts) and leads. A truncated or corrupt backup, and a
// directory that holds Raft state, are refused with nothing written.
func TestBackupUnderLoadRestores(t *testing.T) {
	c := proccluster.Start(t, proccluster.Options{Args: []string{"--chunks-per-task", "1"}})
	c.WaitReady()
	at := client.WithAddrs(c.APIAddrs()...)
	if err := newClient(t, at).SetDataset([]string{writeDataset(t, t.TempDir(), 300, 50, 60)}); err != nil {
		t.Fatal(err)
	}
	var log passLog
	wait := startTrainers(t, 3, 2, &log, at, client.WithBuffer(4))
	c.WaitFor("pass 0 to be under way", time.Minute, func() bool { return log.delivered(0) >= 50 })

	file := filepath.Join(t.TempDir(), "backup.bin")
	out, err := cli(t, c, "backup", "--addr", c.APIAddrs()[1], "--out", file)
	if err != nil {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`backup of index (\d+) \(state ([0-9a-f]{64})`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("backup printed %q", out)
	}
	hash := m[2]
	wait()

	// Corrupt and truncated copies are refused, writing nothing.
	whole, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"truncated": whole[:len(whole)-10],
		"corrupt":   append(append([]byte{}, whole[:len(whole)-5]...), 'x', 'x', 'x', 'x', 'x'),
	} {
		bad := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(bad, b, 0o600); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "node")
		if out, err := cli(t, c, "restore", "--in", bad, "--data-dir", dir, "--node-id", "r1", "--raft-addr", "127.0.0.1:1"); err == nil {
			t.Fatalf("restore of a %s backup succeeded:\n%s", name, out)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("restore of a %s backup left %s behind", name, dir)
		}
	}
	if out, err := cli(t, c, "restore", "--in", file, "--data-dir", c.Procs[0].DataDir, "--node-id", "r1", "--raft-addr", "127.0.0.1:1"); err == nil {
		t.Fatalf("restore into a running node's directory succeeded:\n%s", out)
	}

	dir := filepath.Join(t.TempDir(), "r1")
	raftAddr, apiAddr := proccluster.FreePort(t), proccluster.FreePort(t)
	if out, err := cli(t, c, "restore", "--in", file, "--data-dir", dir, "--node-id", "r1", "--raft-addr", raftAddr); err != nil {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	snaps, err := raft.NewFileSnapshotStore(dir, 2, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	metas, err := snaps.List()
	if err != nil || len(metas) != 1 {
		t.Fatalf("snapshots in the restored directory: %v %v", metas, err)
	}
	_, rc, err := snaps.Open(metas[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	seeded, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(seeded); hex.EncodeToString(sum[:]) != hash {
		t.Fatalf("the restored state hashes to %x, the backup's to %s", sum, hash)
	}
	want := fsm.New()
	if err := want.Restore(io.NopCloser(bytes.NewReader(seeded))); err != nil {
		t.Fatal(err)
	}

	node := exec.Command(c.Bin, "serve", "--node-id", "r1", "--data-dir", dir, "--raft-addr", raftAddr, "--http-addr", apiAddr)
	node.Stderr = io.Discard
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Process.Kill(); _ = node.Wait() })
	st, err := newClient(t, client.WithAddrs(apiAddr)).Status()
	if err != nil {
		t.Fatal(err)
	}
	ws := want.Stats(fsm.DefaultJob)
	if st.Leader.ID != "r1" || !st.FSM.HasDataset || st.FSM.Tasks != ws.Tasks || st.FSM.Pass != ws.Pass ||
		st.FSM.Done != ws.Done || st.FSM.Todo != ws.Todo || st.FSM.Pending != ws.Pending {
		t.Fatalf("the restored node serves %+v (leader %s), the backup holds %+v", st.FSM, st.Leader.ID, ws)
	}
}
