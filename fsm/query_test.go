package fsm

import (
	"reflect"
	"testing"
	"time"
)

// TestDatasetQuery: Dataset describes a job's dataset, its paths in the order
// of their first chunk and bounded by maxPaths, and nothing for a job
// without one.
func TestDatasetQuery(t *testing.T) {
	h := newHarness(t)
	if _, ok := h.f.Dataset("", 10); ok {
		t.Fatal("a dataset before one was set")
	}
	p := DatasetParams{ChunksPerTask: 2, TaskTimeout: time.Minute, FailureMax: 3}
	h.setDataset(7, p)
	d, ok := h.f.Dataset("", 10)
	want := DatasetInfo{Params: p, Files: 3, Chunks: 7, Paths: []string{"/data/train-00.recordio", "/data/train-01.recordio", "/data/train-02.recordio"}}
	if !ok || !reflect.DeepEqual(d, want) {
		t.Fatalf("Dataset: %+v %v, want %+v", d, ok, want)
	}
	if d, _ := h.f.Dataset(DefaultJob, 2); len(d.Paths) != 2 || d.Files != 3 {
		t.Errorf("at most 2 paths: %+v", d)
	}
	d.Paths[0] = "changed"
	if d2, _ := h.f.Dataset("", 1); d2.Paths[0] != "/data/train-00.recordio" {
		t.Error("the answer shares the state's paths")
	}
	if _, ok := h.f.Dataset("other", 10); ok {
		t.Error("a dataset for an unknown job")
	}
}
