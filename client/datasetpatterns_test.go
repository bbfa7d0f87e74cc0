package client_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
)

// TestSetDatasetWarnsOfOtherPatterns: a SetDataset whose patterns differ
// from those the job's dataset was set with is answered ignored with the
// current patterns, and the client's logger warns, naming both; the same
// patterns, in any order, are ignored quietly, and so is any request
// while the dataset's patterns are unknown.
func TestSetDatasetWarnsOfOtherPatterns(t *testing.T) {
	ts := startServer(t, apitest.NewLocal(), nil)
	quick, demo := writeRecords(t, 50, 10), writeRecords(t, 30, 10)
	quickGlob := filepath.Join(filepath.Dir(quick), "*.recordio")

	var logs lockedBuffer
	logger := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})
	set := func(job string, indexing bool, globs ...string) (ignored bool, current []string, warned string) {
		t.Helper()
		before := len(logs.String())
		c := newClient(t, client.WithAddrs(ts.URL), client.WithJob(job), client.WithLogger(logger), client.WithClientIndexing(indexing))
		resp, err := c.SetDatasetWithParams(globs, client.DatasetParams{})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Ignored, resp.CurrentPatterns, logs.String()[before:]
	}

	if ignored, current, warned := set("train", false, quickGlob); ignored || !slices.Equal(current, []string{quickGlob}) || warned != "" {
		t.Fatalf("the first dataset: ignored %v, current %q, logged %q", ignored, current, warned)
	}
	if ignored, _, warned := set("train", false, quickGlob, quickGlob); !ignored || warned != "" {
		t.Fatalf("the same patterns again: ignored %v, logged %q", ignored, warned)
	}
	ignored, current, warned := set("train", false, demo)
	if !ignored || !slices.Equal(current, []string{quickGlob}) {
		t.Fatalf("other patterns: ignored %v, current %q", ignored, current)
	}
	for _, want := range []string{"[WARN]", "other patterns", "job=train", fmt.Sprintf("requested=[%q]", demo), fmt.Sprintf("current=[%q]", quickGlob)} {
		if !strings.Contains(warned, want) {
			t.Errorf("no %q in the log:\n%s", want, warned)
		}
	}
	// Indexed here, the request still names its patterns to compare.
	if ignored, _, warned := set("train", true, demo); !ignored || !strings.Contains(warned, "other patterns") {
		t.Errorf("other patterns indexed by the client: ignored %v, logged %q", ignored, warned)
	}

	// A dataset given as chunks records no patterns: nothing to compare.
	if ignored, current, warned := set("given", true, quick); ignored || current != nil || warned != "" {
		t.Fatalf("a dataset given as chunks: ignored %v, current %q, logged %q", ignored, current, warned)
	}
	if ignored, current, warned := set("given", false, demo); !ignored || current != nil || warned != "" {
		t.Fatalf("other patterns for a dataset of unknown patterns: ignored %v, current %q, logged %q", ignored, current, warned)
	}
}

// TestSetDatasetSeedAndShuffle: the seed and the shuffle flag reach the
// dataset, which dispatches each pass in the permutation of the seed; the
// response and Job say which order the dataset has; Shuffle false keeps
// id order.
func TestSetDatasetSeedAndShuffle(t *testing.T) {
	ts := startServer(t, apitest.NewLocal(), nil)
	data := writeRecords(t, 200, 10) // 20 chunks
	seed := uint64(2024)
	c := newClient(t, client.WithAddrs(ts.URL), client.WithJob("shuffled"))
	resp, err := c.SetDatasetWithParams([]string{data}, client.DatasetParams{ChunksPerTask: 1, Seed: &seed})
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Shuffle || resp.Seed != seed {
		t.Fatalf("response %+v, want a shuffle with seed %d", resp, seed)
	}
	job, err := c.Job("shuffled")
	if err != nil {
		t.Fatal(err)
	}
	if job.Params == nil || !job.Params.Shuffle || job.Params.Seed != seed {
		t.Fatalf("job params %+v", job.Params)
	}
	var ids []int
	for range resp.Tasks {
		task, err := c.GetTask(0)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, task.Meta.ID)
	}
	if want := fsm.PassOrder(seed, true, 0, resp.Tasks); !slices.Equal(ids, want) {
		t.Fatalf("dispatched %v, want %v", ids, want)
	}

	ordered := newClient(t, client.WithAddrs(ts.URL), client.WithJob("ordered"))
	resp, err = ordered.SetDatasetWithParams([]string{data}, client.DatasetParams{ChunksPerTask: 5, Shuffle: new(false)})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Shuffle || resp.Seed == 0 {
		t.Fatalf("response %+v, want id order and a drawn seed", resp)
	}
	for want := 1; want <= resp.Tasks; want++ {
		if task, err := ordered.GetTask(0); err != nil || task.Meta.ID != want {
			t.Fatalf("task %+v, %v; want task %d", task.Meta, err, want)
		}
	}
}
