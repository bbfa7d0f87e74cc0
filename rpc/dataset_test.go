package rpc_test

import (
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/recordio"
	"github.com/raftmaster/raftmaster/rpc"
)

func TestSetDatasetFromGlobs(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	dir := t.TempDir()
	b := writeRecordIO(t, dir, "train-b.recordio", 12, 64)
	a := writeRecordIO(t, dir, "train-a.recordio", 6, 64)
	xa, err := recordio.LoadIndexFile(a)
	if err != nil {
		t.Fatal(err)
	}
	xb, err := recordio.LoadIndexFile(b)
	if err != nil {
		t.Fatal(err)
	}
	nchunks := xa.NumChunks() + xb.NumChunks()

	var out rpc.SetDatasetResponse
	e.ok(rpc.PathDataset, rpc.SetDatasetRequest{Globs: []string{filepath.Join(dir, "train-*"), a}, ChunksPerTask: 3}, &out)
	want := rpc.SetDatasetResponse{Files: 2, Chunks: nchunks, Tasks: (nchunks + 2) / 3}
	if out != want {
		t.Fatalf("response %+v, want %+v", out, want)
	}
	st := e.local.FSM().Stats()
	wantParams := fsm.DatasetParams{ChunksPerTask: 3, TaskTimeout: time.Minute, FailureMax: 2}
	if st.Chunks != nchunks || st.Tasks != want.Tasks || st.Params != wantParams {
		t.Fatalf("stats %+v", st)
	}
	// Chunks are in file order: a's first.
	var got rpc.GetTaskResponse
	e.ok(rpc.PathTaskGet, rpc.GetTaskRequest{}, &got)
	if c := got.Task.Chunks[0]; c.Path != a || c.Offset != 0 || int(c.Records) != xa.ChunkRecords[0] {
		t.Errorf("first chunk %+v", c)
	}

	// A second dataset is ignored without touching the files or the
	// state, but a pattern that matches nothing is still an error.
	before := e.state()
	e.ok(rpc.PathDataset, rpc.SetDatasetRequest{Globs: []string{b}, ChunksPerTask: 1}, &out)
	if !out.Ignored || out.Chunks != nchunks || out.Tasks != want.Tasks {
		t.Errorf("second dataset: %+v", out)
	}
	if after := e.state(); after != before {
		t.Error("an ignored dataset changed the state")
	}
	r := e.post(rpc.PathDataset, rpc.SetDatasetRequest{Globs: []string{filepath.Join(dir, "none-*")}})
	wantError(t, r, http.StatusBadRequest, "invalid")
}

func TestSetDatasetFromChunks(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	chunks := []rpc.Chunk{{Path: "/d/a", Offset: 0, Records: 5}, {Path: "/d/a", Offset: 100, Records: 5}, {Path: "/d/b", Offset: 0, Records: 7}}
	failMax := 0
	var out rpc.SetDatasetResponse
	e.ok(rpc.PathDataset, rpc.SetDatasetRequest{Chunks: chunks, TaskTimeout: rpc.Duration(time.Second), FailureMax: &failMax, Strict: true}, &out)
	if want := (rpc.SetDatasetResponse{Files: 2, Chunks: 3, Tasks: 3}); out != want {
		t.Fatalf("response %+v, want %+v", out, want)
	}
	st := e.local.FSM().Stats()
	if want := (fsm.DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Second, FailureMax: 0, Strict: true}); st.Params != want {
		t.Fatalf("params %+v, want %+v", st.Params, want)
	}
}

// The server's defaults fill what the request leaves out; with a zero
// ServerConfig they are the original master's.
func TestDatasetDefaults(t *testing.T) {
	cfg := testConfig()
	cfg.DatasetDefaults = fsm.DatasetParams{FailureMax: -1}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, cfg, nil, nil)
	e.ok(rpc.PathDataset, rpc.SetDatasetRequest{Chunks: []rpc.Chunk{{Path: "/a", Records: 1}}}, nil)
	if got := e.local.FSM().Stats().Params; got != rpc.DefaultDatasetParams {
		t.Fatalf("params %+v, want %+v", got, rpc.DefaultDatasetParams)
	}
	bad := testConfig()
	bad.DatasetDefaults.TaskTimeout = 1000 * time.Hour
	if bad.Validate() == nil {
		t.Error("Validate accepted a task timeout above MaxDuration")
	}
}
