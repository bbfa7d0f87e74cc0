package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/raft"
	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/internal/backup"
	"github.com/raftmaster/raftmaster/internal/proccluster"
	"github.com/raftmaster/raftmaster/rpc"
)

// TestBackupUnderLoadRestores takes a backup with `raftmaster backup` while
// trainers read, and restores it with `raftmaster restore` into the data
// directory of a new node: the snapshot it writes has the backup's state
// hash, and the node, started alone, serves that state (the same dataset,
// pass and task counts) and leads. A truncated or corrupt backup, and a
// directory that holds Raft state, are refused with nothing written.
func TestBackupUnderLoadRestores(t *testing.T) {
	needsProcesses(t)
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
	rc := restoredSnapshot(t, dir)
	restored, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	// The restored state is the backup's, in the next era.
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	bf, err := backup.Open(f, fi.Size())
	var snapshot bytes.Buffer
	if err == nil {
		err = bf.CopyState(&snapshot)
	}
	f.Close()
	if err != nil || bf.Header.StateHash != hash {
		t.Fatalf("reading the backup: %v (printed %s)", err, hash)
	}
	var nextEra bytes.Buffer
	if err := fsm.NextEra(&nextEra, &snapshot); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(restored, nextEra.Bytes()) {
		t.Fatalf("the restored state (%d bytes) is not the backup's in the next era (%d bytes)", len(restored), nextEra.Len())
	}
	want := fsm.New()
	if err := want.Restore(io.NopCloser(bytes.NewReader(restored))); err != nil {
		t.Fatal(err)
	}
	if want.Era() != 1 {
		t.Fatalf("the restored state is in era %d, want 1", want.Era())
	}

	node := exec.Command(c.Bin, "serve", "--node-id", "r1", "--data-dir", dir, "--raft-addr", raftAddr, "--http-addr", apiAddr, "--insecure")
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

// serveRestored starts a node on the data directory dir that restore
// wrote, alone, and returns its API address once it leads.
func serveRestored(t *testing.T, c *proccluster.Cluster, id, dir, raftAddr string) string {
	t.Helper()
	apiAddr := proccluster.FreePort(t)
	node := exec.Command(c.Bin, "serve", "--node-id", id, "--data-dir", dir, "--raft-addr", raftAddr, "--http-addr", apiAddr, "--insecure")
	node.Stderr = io.Discard
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Process.Kill(); _ = node.Wait() })
	cl := newClient(t, client.WithAddrs(apiAddr))
	c.WaitFor("the restored node to lead", time.Minute, func() bool {
		st, err := cl.Status()
		return err == nil && st.Leader.ID == id
	})
	return apiAddr
}

// jobNumbers returns the number of every job, read from a backup of the
// cluster at addrs: numbers are not on the wire, only in the state.
func jobNumbers(t *testing.T, addrs ...string) map[string]uint64 {
	t.Helper()
	var b bytes.Buffer
	if _, err := newClient(t, client.WithAddrs(addrs...)).BackupTo(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	f := fsm.New()
	if err := f.Restore(io.NopCloser(&b)); err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, j := range f.Jobs() {
		out[j.Name] = j.Number
	}
	return out
}

// memberGeneration returns the generation of member's join to group of the
// default job, as the cluster at addrs lists it.
func memberGeneration(t *testing.T, cl *client.Client, group string, member uuid.UUID) uint64 {
	t.Helper()
	m, err := cl.Members()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range m.Groups {
		for _, mb := range g.Members {
			if g.ID == group && mb.ID == member {
				return mb.Generation
			}
		}
	}
	t.Fatalf("member %s is not in group %s: %+v", member, group, m.Groups)
	return 0
}

// watchOnce asks the node at addr once for the outcome of member's join
// gen to group, and returns the answer's status or error code.
func watchOnce(t *testing.T, addr, group string, member uuid.UUID, gen uint64) string {
	t.Helper()
	q := url.Values{rpc.WatchParamGroup: {group}, rpc.WatchParamMember: {member.String()},
		rpc.WatchParamGeneration: {strconv.FormatUint(gen, 10)}, rpc.WatchParamWait: {"0s"}}
	resp, err := http.Get("http://" + addr + rpc.PathAllgatherWatch + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Status string `json:"status"`
		Code   string `json:"code"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out.Status + out.Code
}

// TestRestoreHandsOutNoOldToken: after a backup, the old cluster goes on:
// compare-and-sets (register versions), task leases (epochs), an
// allgather join (a generation) and a new job (a job number). The backup
// is restored into a new cluster, which does the same. It hands out none
// of the old cluster's tokens, and refuses each when an old client
// presents it: a compare-and-set naming the old cluster's version does
// not swap, task reports under the old leases are stale, and a watch of
// the old join's generation is refused, even after the same member joins
// here.
func TestRestoreHandsOutNoOldToken(t *testing.T) {
	needsProcesses(t)
	c := proccluster.Start(t, proccluster.Options{Args: []string{"--chunks-per-task", "1"}})
	c.WaitReady()
	ctx := context.Background()
	old := newClient(t, client.WithAddrs(c.APIAddrs()...))
	if _, err := old.SetDatasetWithParams([]string{writeDataset(t, t.TempDir(), 40, 10, 60)}, client.DatasetParams{TaskTimeout: time.Hour}); err != nil {
		t.Fatal(err)
	}
	v0, err := old.KVCompareAndSet(ctx, "rdzv/state", 0, []byte("before the backup"))
	if err != nil || !v0.Swapped {
		t.Fatalf("first write: %+v %v", v0, err)
	}
	held, err := old.GetTask(0) // a lease held across the backup
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "backup.bin")
	if out, err := cli(t, c, "backup", "--addr", c.APIAddrs()[0], "--out", file); err != nil {
		t.Fatalf("backup: %v\n%s", err, out)
	}

	// The old cluster after the backup.
	write := func(cl *client.Client, n int, from uint64) []uint64 {
		t.Helper()
		var versions []uint64
		for i := range n {
			r, err := cl.KVCompareAndSet(ctx, "rdzv/state", from, fmt.Appendf(nil, "write %d", i))
			if err != nil || !r.Swapped {
				t.Fatalf("write %d from version %d: %+v %v", i, from, r, err)
			}
			from = r.Version
			versions = append(versions, from)
		}
		return versions
	}
	lease := func(cl *client.Client, n int) []client.TaskMeta {
		t.Helper()
		var metas []client.TaskMeta
		for range n {
			task, err := cl.GetTask(0)
			if err != nil {
				t.Fatal(err)
			}
			metas = append(metas, task.Meta)
		}
		return metas
	}
	member := uuid.New()
	oldVersions := write(old, 3, v0.Version)
	oldLeases := lease(old, 2)
	if _, err := old.Join("rdzv", member, 2, "old", nil, nil); err != nil {
		t.Fatal(err)
	}
	oldGen := memberGeneration(t, old, "rdzv", member)
	if _, err := old.CreateJob("after-backup"); err != nil {
		t.Fatal(err)
	}
	oldJob := jobNumbers(t, c.APIAddrs()...)["after-backup"]

	// The restored cluster does the same.
	dir, raftAddr := filepath.Join(t.TempDir(), "r1"), proccluster.FreePort(t)
	if out, err := cli(t, c, "restore", "--in", file, "--data-dir", dir, "--node-id", "r1", "--raft-addr", raftAddr); err != nil {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	apiAddr := serveRestored(t, c, "r1", dir, raftAddr)
	restored := newClient(t, client.WithAddrs(apiAddr))
	newVersions := write(restored, 3, v0.Version)
	newLeases := lease(restored, 2)
	if _, err := restored.Join("rdzv", member, 2, "new", nil, nil); err != nil {
		t.Fatal(err)
	}
	w, err := restored.Join("rdzv", uuid.New(), 2, "other", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res := receiveWithin(t, "the restored group", w); res.Err != nil {
		t.Fatal(res.Err)
	}
	newGen := memberGeneration(t, restored, "rdzv", member)
	if _, err := restored.CreateJob("after-restore"); err != nil {
		t.Fatal(err)
	}
	newJob := jobNumbers(t, apiAddr)["after-restore"]
	t.Logf("old cluster after the backup: versions %v, leases %v, generation %d, job %d", oldVersions, oldLeases, oldGen, oldJob)
	t.Logf("restored cluster: versions %v, leases %v, generation %d, job %d", newVersions, newLeases, newGen, newJob)

	// No token twice.
	for _, v := range newVersions {
		if slices.Contains(oldVersions, v) {
			t.Errorf("register version %d handed out by both clusters", v)
		}
	}
	for _, m := range newLeases {
		if slices.Contains(oldLeases, m) {
			t.Errorf("task lease %+v handed out by both clusters", m)
		}
	}
	if newGen == oldGen {
		t.Errorf("generation %d handed out by both clusters", newGen)
	}
	if newJob == oldJob {
		t.Errorf("job number %d handed out by both clusters", newJob)
	}

	// Old tokens are refused.
	last := oldVersions[len(oldVersions)-1]
	r, err := restored.KVCompareAndSet(ctx, "rdzv/state", last, []byte("an old holder's write"))
	if err != nil || r.Swapped {
		t.Errorf("a compare-and-set naming the old cluster's version %d: %+v %v; want not swapped", last, r, err)
	}
	for _, m := range append(oldLeases, held.Meta) {
		if err := restored.RenewLease(m); !errors.Is(err, client.ErrStaleEpoch) {
			t.Errorf("renewing the old lease %+v: %v, want ErrStaleEpoch", m, err)
		}
		if err := restored.TaskFinished(m); !errors.Is(err, client.ErrStaleEpoch) {
			t.Errorf("finishing the old lease %+v: %v, want ErrStaleEpoch", m, err)
		}
	}
	if got := watchOnce(t, apiAddr, "rdzv", member, oldGen); got != rpc.CodeClosed && got != rpc.CodeReconnected {
		t.Errorf("a watch of the old cluster's generation %d answers %q, want closed or reconnected", oldGen, got)
	}
	// The restored cluster's own tokens work.
	for _, m := range newLeases {
		if err := restored.TaskFinished(m); err != nil {
			t.Errorf("finishing the restored cluster's lease %+v: %v", m, err)
		}
	}
}

// restoredSnapshot opens the one Raft snapshot that restore wrote in dir.
func restoredSnapshot(t *testing.T, dir string) io.ReadCloser {
	t.Helper()
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
	return rc
}
