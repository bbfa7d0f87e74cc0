package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestDatasetSetSeedAndShuffle: dataset set sends --seed and
// --shuffle=false, says which order the dataset has (a later call, the
// order in place), and job inspect shows it; without them the leader
// draws a seed and shuffles.
func TestDatasetSetSeedAndShuffle(t *testing.T) {
	local, addr := localAPI(t)
	dir := t.TempDir()
	writeLines(t, filepath.Join(dir, "a.txt"), 0, 30)
	pattern := filepath.Join(dir, "train-%03d.recordio")
	if code, _, errOut := run(t, "pack", "--out", pattern, "--records-per-file", "10", filepath.Join(dir, "a.txt")); code != 0 {
		t.Fatalf("pack: %s", errOut)
	}
	glob := filepath.Join(dir, "train-*.recordio")

	code, out, errOut := runCLI("dataset", "set", "--addr", addr, "--job", "ordered", "--seed", "77", "--shuffle=false", glob)
	if code != 0 || !strings.Contains(out, "order: id order (seed 77)") {
		t.Fatalf("dataset set: exit %d:\n%s%s", code, out, errOut)
	}
	if d, _ := local.FSM().Dataset("ordered", 0); d.Params.Shuffle || d.Params.Seed != 77 {
		t.Fatalf("params %+v, want id order with seed 77", d.Params)
	}
	code, out, errOut = runCLI("dataset", "set", "--addr", addr, "--job", "ordered", "--seed", "5", glob)
	if code != 0 || !strings.Contains(out, "ignored") || !strings.Contains(out, "its order: id order (seed 77)") {
		t.Fatalf("a second dataset set: exit %d:\n%s%s", code, out, errOut)
	}

	if code, out, errOut := runCLI("dataset", "set", "--addr", addr, "--job", "shuffled", glob); code != 0 || !strings.Contains(out, "order: shuffled each pass, seed ") {
		t.Fatalf("dataset set: exit %d:\n%s%s", code, out, errOut)
	}
	d, _ := local.FSM().Dataset("shuffled", 0)
	if !d.Params.Shuffle || d.Params.Seed == 0 {
		t.Fatalf("params %+v, want a shuffle with a drawn seed", d.Params)
	}
	code, out, errOut = runCLI("job", "inspect", "--addr", addr, "shuffled")
	if want := "order:      shuffled each pass, seed "; code != 0 || !strings.Contains(out, want) {
		t.Fatalf("job inspect: exit %d, no %q in:\n%s%s", code, want, out, errOut)
	}
}
