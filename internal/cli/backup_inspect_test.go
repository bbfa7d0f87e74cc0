package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
	"github.com/raftmaster/raftmaster/internal/backup"
)

// TestBackupInspect: backup inspect reads a backup file without a
// cluster, checks it and describes it: format, index, release, size,
// SHA-256, era, protocol level, and every job with its dataset, tasks and
// register keys; a corrupt or truncated file is a clear error.
func TestBackupInspect(t *testing.T) {
	local := apitest.NewLocal()
	ctx := context.Background()
	var chunks []fsm.Chunk
	for i := range 6 {
		chunks = append(chunks, fsm.Chunk{Path: fmt.Sprintf("/data/part-%d.recordio", i/2), Offset: int64(i%2) * 100, Records: 10})
	}
	params := fsm.DatasetParams{ChunksPerTask: 2, TaskTimeout: time.Minute, FailureMax: 3}
	if res, err := local.SetDataset(ctx, "train", fsm.RequestID{}, params, nil, chunks); err != nil || res.Err() != nil {
		t.Fatal(res, err)
	}
	for i := range 2 {
		c := &fsm.KVCompareAndSet{Key: fmt.Sprintf("k%d", i), Value: []byte("v")}
		c.Job = "train"
		if res, err := local.Apply(ctx, c); err != nil || res.Err() != nil {
			t.Fatal(res, err)
		}
	}
	var file bytes.Buffer
	h, err := backup.Write(&file, "v9.8.7", local.FSM().AppliedIndex(), local.FSM().SnapshotBytes())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "backup.bin")
	if err := os.WriteFile(path, file.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := runCLI("backup", "inspect", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"format:     raftmaster-backup v2",
		fmt.Sprintf("taken:      at index %d by v9.8.7", h.Index),
		fmt.Sprintf("SHA-256 %s: checked, intact", h.StateHash),
		"era:        0 (a restore of this file starts era 1)",
		fmt.Sprintf("protocol:   level %d", fsm.Protocol),
		"jobs:       1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if f := strings.Fields(lineWith(out, "  train ")); len(f) < 12 || f[1] != "3" || f[2] != "6" || f[3] != "3" || f[10] != "2" {
		t.Errorf("the job's row (files 3, chunks 6, tasks 3, kv keys 2): %q", f)
	}

	code, out, errOut = runCLI("backup", "inspect", path, "--json")
	var rep backupReport
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
		t.Fatalf("--json: exit %d, %v: %s%s", code, err, out, errOut)
	}
	if rep.Format != 2 || rep.Index != h.Index || rep.StateHash != h.StateHash || !rep.HashChecked || rep.StateSize != h.Size ||
		len(rep.Jobs) != 1 || rep.Jobs[0].Name != "train" || rep.Jobs[0].Chunks != 6 || rep.Jobs[0].Files != 3 || rep.Jobs[0].KVKeys != 2 {
		t.Errorf("--json: %+v", rep)
	}

	// An earlier release's format.
	if code, out, errOut := runCLI("backup", "inspect", "../backup/testdata/v1.backup"); code != 0 ||
		!strings.Contains(out, "format:     raftmaster-backup v1") || !strings.Contains(out, "by v0.9.0") || !strings.Contains(out, "job-a") {
		t.Errorf("a format 1 file: exit %d:\n%s%s", code, out, errOut)
	}

	whole := file.Bytes()
	altered := bytes.Clone(whole)
	altered[len(altered)/2] ^= 0xff
	for name, tc := range map[string]struct {
		b    []byte
		want string
	}{
		"truncated":  {whole[:len(whole)-10], "truncated"},
		"cut":        {whole[:len(whole)/2], "truncated"},
		"corrupt":    {altered, "hash"},
		"not backup": {[]byte("hello\n"), "does not start with"},
	} {
		bad := filepath.Join(dir, name)
		if err := os.WriteFile(bad, tc.b, 0o600); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := runCLI("backup", "inspect", bad)
		if code == 0 || !strings.Contains(errOut, "not an intact raftmaster backup") || !strings.Contains(errOut, tc.want) || out != "" {
			t.Errorf("a %s file: exit %d, %q %q", name, code, out, errOut)
		}
	}
	if code, _, errOut := runCLI("backup", "inspect", filepath.Join(dir, "missing")); code == 0 || !strings.Contains(errOut, "no such file") {
		t.Errorf("a missing file: exit %d, %q", code, errOut)
	}
	// backup itself still wants --out.
	if code, _, errOut := runCLI("backup", "--addr", "127.0.0.1:1"); code == 0 || !strings.Contains(errOut, "--out") {
		t.Errorf("backup without --out: exit %d, %q", code, errOut)
	}
}

// lineWith returns the first line of s that contains sub.
func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}
