package httpapi_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/rpc"
)

// TestDatasetRoot: with a dataset root, the leader indexes files under it
// only. A file outside, reached by an absolute path, by ".." or through a
// symbolic link, is refused unread: the error names the path and quotes
// none of its content, and nothing changes. Relative patterns are taken
// under the root.
func TestDatasetRoot(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	writeRecordIO(t, root, "train-0.recordio", 10, 5)
	secret := filepath.Join(outside, "passwd")
	if err := os.WriteFile(secret, []byte("root:x:0:0:root:/root:/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(root, "link.recordio")); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.DatasetRoot = root
	e := newEnv(t, cfg, nil, nil)
	before := e.state()
	for _, globs := range [][]string{
		{secret},
		{"../" + filepath.Base(outside) + "/passwd"},
		{filepath.Join(root, "..", filepath.Base(outside), "passwd")},
		{"link.recordio"},
		{"*.recordio"}, // matches the link too
	} {
		r := e.post(rpc.PathDataset, rpc.SetDatasetRequest{Globs: globs}, reqID(uuid.New(), 1)...)
		msg := wantError(t, r, http.StatusBadRequest, rpc.CodeInvalid).Message
		if !strings.Contains(msg, "outside the dataset root") || strings.Contains(msg, "root:x") || strings.Contains(msg, "0x726f6f74") {
			t.Errorf("globs %q: message %q", globs, msg)
		}
	}
	if after := e.state(); after != before {
		t.Fatalf("refused datasets changed the state: %+v -> %+v", before, after)
	}
	var ds rpc.SetDatasetResponse
	e.ok(rpc.PathDataset, rpc.SetDatasetRequest{Globs: []string{"train-*.recordio"}}, &ds, reqID(uuid.New(), 1)...)
	if ds.Ignored || ds.Files != 1 || ds.Chunks == 0 {
		t.Fatalf("the dataset under the root: %+v", ds)
	}
}

// TestDatasetRelativeWithoutRoot: without a dataset root, relative
// patterns are taken under the server's working directory, and the chunks
// name the files as the patterns do, relative to it, so that trainers
// that share the directory read them.
func TestDatasetRelativeWithoutRoot(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeRecordIO(t, filepath.Join(dir, "data"), "train-0.recordio", 10, 5)
	t.Chdir(dir)
	e := newEnv(t, testConfig(), nil, nil)
	var ds rpc.SetDatasetResponse
	e.ok(rpc.PathDataset, rpc.SetDatasetRequest{Globs: []string{"data/train-*.recordio"}}, &ds, reqID(uuid.New(), 1)...)
	if ds.Files != 1 || ds.Chunks == 0 {
		t.Fatalf("relative pattern: %+v", ds)
	}
	var got rpc.GetTaskResponse
	e.ok(rpc.PathTaskGet, rpc.GetTaskRequest{}, &got)
	if len(got.Task.Chunks) == 0 || got.Task.Chunks[0].Path != "data/train-0.recordio" {
		t.Fatalf("chunks %+v, want data/train-0.recordio", got.Task.Chunks)
	}
}
