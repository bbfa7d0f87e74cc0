package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/fsm"
)

// TestJobInspectShowsTheDataset: job inspect shows which files a job
// serves, with its chunks, tasks and settings; --files lists them and
// --json carries them.
func TestJobInspectShowsTheDataset(t *testing.T) {
	local, addr := localAPI(t)
	var chunks []fsm.Chunk
	for i := range 4 {
		chunks = append(chunks, fsm.Chunk{Path: fmt.Sprintf("/data/demo/part-%05d.recordio", i), Records: 10},
			fsm.Chunk{Path: fmt.Sprintf("/data/demo/part-%05d.recordio", i), Offset: 100, Records: 10})
	}
	chunks = append(chunks, fsm.Chunk{Path: "/extra/one.recordio", Records: 5})
	params := fsm.DatasetParams{ChunksPerTask: 2, TaskTimeout: 90 * time.Second, FailureMax: 3}
	patterns := []string{"/data/demo/part-*.recordio", "/extra/one.recordio"}
	if res, err := local.SetDataset(context.Background(), "train", fsm.RequestID{}, params, patterns, chunks); err != nil || res.Err() != nil {
		t.Fatal(res, err)
	}
	code, out, errOut := runCLI("job", "inspect", "--addr", addr, "train")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"dataset:    5 files, 9 chunks in 5 tasks (2 chunks/task, timeout 1m30s, failure max 3)",
		"patterns:   /data/demo/part-*.recordio\n            /extra/one.recordio\nfiles:",
		"files:      4 in /data/demo/: part-00000.recordio ... part-00003.recordio\n",
		"            /extra/one.recordio\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	code, out, errOut = runCLI("job", "inspect", "--addr", addr, "train", "--files")
	if code != 0 || !strings.Contains(out, "files:      /data/demo/part-00000.recordio\n            /data/demo/part-00001.recordio\n") {
		t.Errorf("--files: exit %d:\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI("job", "inspect", "--addr", addr, "train", "--json")
	var j map[string]any
	if err := json.Unmarshal([]byte(out), &j); code != 0 || err != nil {
		t.Fatalf("--json: exit %d, %v: %s%s", code, err, out, errOut)
	}
	paths, _ := j["paths"].([]any)
	params2, _ := j["params"].(map[string]any)
	gotPatterns, _ := j["patterns"].([]any)
	if j["files"] != 5.0 || j["chunks"] != 9.0 || len(paths) != 5 || paths[4] != "/extra/one.recordio" || params2["task_timeout"] != "1m30s" ||
		len(gotPatterns) != 2 || gotPatterns[0] != patterns[0] {
		t.Errorf("--json: %v", j)
	}
	// A dataset given as chunks was set from no patterns.
	if res, err := local.SetDataset(context.Background(), "given", fsm.RequestID{}, params, nil, chunks); err != nil || res.Err() != nil {
		t.Fatal(res, err)
	}
	if code, out, errOut := runCLI("job", "inspect", "--addr", addr, "given"); code != 0 || !strings.Contains(out, "patterns:   unknown (") {
		t.Errorf("a dataset of no patterns: exit %d:\n%s%s", code, out, errOut)
	}
	// The job list counts the files too.
	if code, out, _ := runCLI("job", "list", "--addr", addr); code != 0 || !strings.Contains(lineWith(out, "train"), "5 files, 5 tasks") {
		t.Errorf("job list:\n%s", out)
	}
}
