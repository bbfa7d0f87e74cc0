package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
	"github.com/raftmaster/raftmaster/rpc"
)

// runCLI runs the command line and returns its exit code, stdout and
// stderr.
func runCLI(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := RunWith(append([]string{"raftmaster"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

// restoredState returns the state of the one Raft snapshot in dir.
func restoredState(t *testing.T, dir string) []byte {
	t.Helper()
	snaps, err := raft.NewFileSnapshotStore(dir, 2, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	metas, err := snaps.List()
	if err != nil || len(metas) != 1 {
		t.Fatalf("snapshots in %s: %v %v", dir, metas, err)
	}
	_, rc, err := snaps.Open(metas[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBackupAndRestore: backup writes the leader's state into a file of
// mode 0600, replacing one that was there and leaving no temporary file,
// and reports its progress on stderr; restore fills a data directory with
// exactly that state, and refuses a corrupt or truncated copy, or a
// directory with Raft state, leaving nothing written.
func TestBackupAndRestore(t *testing.T) {
	local := apitest.NewLocal()
	for i := range 3 {
		res, err := local.Apply(context.Background(), &fsm.KVCompareAndSet{Key: fmt.Sprintf("k%d", i), Value: bytes.Repeat([]byte{'v'}, 300<<10)})
		if err != nil || res.Err() != nil {
			t.Fatal(res, err)
		}
	}
	ts := httptest.NewServer(httpapi.NewHandler(local, httpapi.Config{}, nil))
	t.Cleanup(ts.Close)
	local.API = strings.TrimPrefix(ts.URL, "http://")
	want := local.FSM().SnapshotBytes()

	dir := t.TempDir()
	file := filepath.Join(dir, "backup.bin")
	if err := os.WriteFile(file, []byte("an older file"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI("backup", "--addr", local.API, "--out", file)
	if code != 0 {
		t.Fatalf("backup: exit %d: %s", code, errOut)
	}
	wantOut := fmt.Sprintf("backup of index %d (state %s, %d bytes) written to %s\n", local.FSM().AppliedIndex(), local.FSM().StateHash(), len(want), file)
	if out != wantOut || !strings.HasPrefix(errOut, "received ") || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("backup printed %q and %q; want %q and one progress line", out, errOut, wantOut)
	}
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("the backup file has mode %v, want 0600", fi.Mode().Perm())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the directory holds %d entries, want the backup alone", len(entries))
	}
	whole, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}

	node := filepath.Join(t.TempDir(), "node")
	code, out, errOut = runCLI("restore", "--in", file, "--data-dir", node, "--node-id", "n1", "--raft-addr", "127.0.0.1:1")
	if code != 0 || !strings.HasPrefix(out, fmt.Sprintf("restored index %d (state %s", local.FSM().AppliedIndex(), local.FSM().StateHash())) {
		t.Fatalf("restore: exit %d, %q, %q", code, out, errOut)
	}
	var nextEra bytes.Buffer
	if err := fsm.NextEra(&nextEra, bytes.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(restoredState(t, node), nextEra.Bytes()) {
		t.Fatal("the restored snapshot is not the leader's state in the next era")
	}
	if code, _, _ := runCLI("restore", "--in", file, "--data-dir", node, "--node-id", "n1", "--raft-addr", "127.0.0.1:1"); code == 0 {
		t.Fatal("a restore into a directory with Raft state succeeded")
	}

	altered := bytes.Clone(whole)
	altered[len(altered)/2] ^= 0xff
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.Mkdir(empty, 0o750); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"truncated":      whole[:len(whole)-10],
		"truncated more": whole[:len(whole)/2],
		"corrupt":        altered,
	} {
		bad := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(bad, b, 0o600); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "node")
		code, _, errOut := runCLI("restore", "--in", bad, "--data-dir", dir, "--node-id", "n1", "--raft-addr", "127.0.0.1:1")
		if code == 0 || !strings.Contains(errOut, "not an intact raftmaster backup") {
			t.Fatalf("restore of a %s backup: exit %d, %q", name, code, errOut)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("restore of a %s backup left %s behind", name, dir)
		}
		if code, _, _ := runCLI("restore", "--in", bad, "--data-dir", empty, "--node-id", "n1", "--raft-addr", "127.0.0.1:1"); code == 0 {
			t.Fatalf("restore of a %s backup into an empty directory succeeded", name)
		}
		if snaps, _ := os.ReadDir(filepath.Join(empty, "snapshots")); len(snaps) != 0 {
			t.Fatalf("restore of a %s backup left snapshots %v", name, snaps)
		}
	}
}

// TestRestoreReadsAnEarlierReleasesFile: a backup file of format 1 fills
// a data directory with its state.
func TestRestoreReadsAnEarlierReleasesFile(t *testing.T) {
	node := filepath.Join(t.TempDir(), "node")
	code, out, errOut := runCLI("restore", "--in", "../backup/testdata/v1.backup", "--data-dir", node, "--node-id", "n1", "--raft-addr", "127.0.0.1:1")
	if code != 0 || !strings.Contains(out, "taken by v0.9.0") {
		t.Fatalf("restore: exit %d, %q, %q", code, out, errOut)
	}
	f := fsm.New()
	if err := f.Restore(io.NopCloser(bytes.NewReader(restoredState(t, node)))); err != nil {
		t.Fatal(err)
	}
	if st := f.Stats("job-a"); st.Chunks != 3 {
		t.Fatalf("job-a restored as %+v", st)
	}
}

// TestFailedBackupLeavesNoFile: a backup whose stream is damaged fails
// and leaves neither the file nor a temporary one.
func TestFailedBackupLeavesNoFile(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", rpc.ContentTypeStream)
		w.Header().Set(rpc.HeaderBackupIndex, "5")
		w.Header().Set("Trailer", rpc.TrailerBackupSha256+", "+rpc.TrailerBackupSize)
		w.Write(bytes.Repeat([]byte("x"), 1<<20))
		w.Header().Set(rpc.TrailerBackupSha256, strings.Repeat("0", 64))
		w.Header().Set(rpc.TrailerBackupSize, "1048576")
	}))
	t.Cleanup(ts.Close)
	dir := t.TempDir()
	code, _, errOut := runCLI("backup", "--addr", ts.URL, "--out", filepath.Join(dir, "backup.bin"))
	if code == 0 || !strings.Contains(errOut, "damaged backup stream") {
		t.Fatalf("backup of a damaged stream: exit %d, %q", code, errOut)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a failed backup left %v", entries)
	}
}
