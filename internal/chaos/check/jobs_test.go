package check

import (
	"strings"
	"testing"

	"github.com/raftmaster/raftmaster/internal/chaos/history"
)

// inJob puts op in job.
func inJob(job string, op history.Op) history.Op {
	op.Job = job
	return op
}

// withFiles gives a GetTask the files of its chunks.
func withFiles(op history.Op, files ...string) history.Op {
	op.Chunks = files
	return op
}

var testDatasets = map[string][]string{
	"default": {"/d/default-part-000", "/d/default-part-001"},
	"job-b":   {"/b/job-b-part-000", "/b/job-b-part-001"},
}

func TestNoCrossing(t *testing.T) {
	runErrCases(t, func(o []history.Op) error { return NoCrossing(o, testDatasets) }, []errCase{
		{name: "clean", ops: ops(
			withFiles(get(0, 0, 1, 0, 1, 1, 0), "/d/default-part-000"),
			inJob("job-b", withFiles(get(1, 0, 1, 0, 1, 1, 0), "/b/job-b-part-001")),
			withFiles(get(0, 2, 3, 0, 1, 2, 2), "/d/default-part-000"),
			// A holder in each job at once.
			save(2, 0, 1, "a", 100, true, 0),
			inJob("job-b", save(3, 0, 1, "b", 100, true, 0)),
			inJob("job-b", save(4, 2, 3, "c", 100, false, 2)),
			save(5, 2, 3, "d", 100, false, 2),
			// Denied after an unknown grant in the same job.
			inJob("job-b", saveUnknown(3, 4, "e", 100)),
			inJob("job-b", save(4, 5, 6, "f", 100, false, 5)),
			// The same group id in both jobs.
			join(6, 0, 1, "g", 1, 2, "default/g/6"),
			join(7, 0, 1, "g", 2, 2, "default/g/7"),
			inJob("job-b", join(8, 0, 1, "g", 3, 2, "job-b/g/8")),
			inJob("job-b", join(9, 0, 1, "g", 4, 2, "job-b/g/9")),
			watch(6, 2, 3, "g", 1, 0, "default/g/6", "default/g/7"),
			inJob("job-b", watch(8, 2, 3, "g", 3, 1, "job-b/g/9", "job-b/g/8")),
		)},
		{name: "a task without files", ops: ops(
			inJob("job-b", get(1, 0, 1, 0, 1, 1, 0)),
		), want: []string{"the leased task names no chunk files"}},
	})
	// A history recorded before jobs: no job, no files.
	runErrCases(t, func(o []history.Op) error { return NoCrossing(o, nil) }, []errCase{
		{name: "a history without jobs", ops: ops(
			get(0, 0, 1, 0, 1, 1, 0),
			save(2, 0, 1, "a", 100, true, 0),
			save(5, 2, 3, "d", 100, false, 2),
		)},
	})
	runErrCases(t, func(o []history.Op) error { return NoCrossing(o, testDatasets) }, []errCase{
		{name: "task of the other job's dataset", ops: ops(
			inJob("job-b", withFiles(get(1, 0, 1, 0, 1, 1, 0), "/d/default-part-001")),
		), want: []string{`job "job-b", get_task`, `leased a task of job "default"'s dataset (chunk file /d/default-part-001)`}},
		{name: "task of no dataset", ops: ops(
			withFiles(get(1, 0, 1, 0, 1, 1, 0), "/x/part-000"),
		), want: []string{"chunk file /x/part-000 is in no job's dataset"}},
		{name: "a task id names other files", ops: ops(
			withFiles(get(0, 0, 1, 0, 1, 1, 0), "/d/default-part-000"),
			withFiles(get(0, 2, 3, 0, 1, 2, 2), "/d/default-part-001"),
		), want: []string{`task 1 of job "default" names different files`}},
		{name: "denied by the other job's grant", ops: ops(
			save(2, 0, 1, "a", 100, true, 0),
			inJob("job-b", save(4, 2, 3, "c", 100, false, 2)),
		), want: []string{`denied, but no other trainer of job "job-b"`, `job "default"'s op 0`}},
		{name: "denied by an own grant applied later", ops: ops(
			inJob("job-b", save(4, 0, 3, "c", 100, false, 1)),
			inJob("job-b", save(3, 0, 3, "b", 100, true, 2)),
		), want: []string{`denied, but no other trainer of job "job-b"`}},
		{name: "result holds the other job's member", ops: ops(
			join(6, 0, 1, "g", 1, 2, "default/g/6"),
			inJob("job-b", join(8, 0, 1, "g", 3, 2, "job-b/g/8")),
			watch(6, 2, 3, "g", 1, 0, "default/g/6", "job-b/g/8"),
		), want: []string{`entry 1, "job-b/g/8", is the data of a join in job "job-b"`}},
		{name: "watch of a member of the other job", ops: ops(
			join(6, 0, 1, "g", 1, 1, "default/g/6"),
			inJob("job-b", watch(6, 2, 3, "g", 1, 0, "default/g/6")),
		), want: []string{`the member never joined group "g" in job "job-b"`, `is the data of a join in job "default"`}},
	})
}

func TestNoCrossingDatasetsOverlap(t *testing.T) {
	err := NoCrossing(nil, map[string][]string{"a": {"/f"}, "b": {"/f"}})
	if err == nil || !strings.Contains(err.Error(), "is in the datasets of jobs") {
		t.Fatalf("overlapping datasets: %v", err)
	}
}

// TestPerJob: each job's history is checked on its own, so a history that
// is clean per job passes, and one job's lease does not excuse the other's.
func TestPerJob(t *testing.T) {
	cfg := func(string) Config { return testCfg }
	clean := ops(
		save(0, 0, 1, "a", 100, true, 0),
		inJob("job-b", save(1, 0, 1, "b", 100, true, 0)),
		inJob("job-b", save(2, 2, 3, "c", 100, false, 2)),
	)
	if errs := PerJob(clean, cfg); len(errs) != 0 {
		t.Fatalf("clean history: %v", errs)
	}
	if got := Jobs(clean); len(got) != 2 || got[0] != "default" || got[1] != "job-b" {
		t.Fatalf("jobs: %v", got)
	}
	// Both grants at once would break a single lease, not one per job;
	// a denial in job-b with only default's holder breaks job-b's.
	crossed := ops(
		save(0, 0, 1, "a", 100, true, 0),
		inJob("job-b", save(2, 2, 3, "c", 100, false, 2)),
	)
	errs := PerJob(crossed, cfg)
	if len(errs) == 0 {
		t.Fatal("a denial explained only by the other job passed")
	}
	for _, err := range errs {
		if !strings.HasPrefix(err.Error(), `job "job-b": `) {
			t.Errorf("violation not of job-b: %v", err)
		}
	}
	// The same history as one job has a violation of the single lease.
	one := ops(
		save(0, 0, 1, "a", 100, true, 0),
		save(1, 0, 1, "b", 100, true, 0),
	)
	if errs := PerJob(one, cfg); len(errs) == 0 {
		t.Fatal("two holders in one job passed")
	}
}
