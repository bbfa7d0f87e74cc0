package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/rpc"
)

// TestParseSources: --source is NAME=WEIGHT:PATTERN; a name repeated with
// its weight adds a pattern; patterns keep their ':' and ','; a malformed
// flag is refused, naming what is wrong.
func TestParseSources(t *testing.T) {
	got, err := parseSources([]string{
		"web=0.7:/data/web/*.recordio",
		"code=0.3:s3://corpus/code/{a,b}*.recordio",
		"web=0.70:/data/forums/*.recordio",
		"web=0.7:/data/web/*.recordio",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []client.Source{
		{Name: "web", Weight: 0.7, Patterns: []string{"/data/web/*.recordio", "/data/forums/*.recordio"}},
		{Name: "code", Weight: 0.3, Patterns: []string{"s3://corpus/code/{a,b}*.recordio"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("sources %+v, want %+v", got, want)
	}
	for _, tc := range []struct {
		specs []string
		want  string
	}{
		{[]string{"web0.7:/data/*.rio"}, "no '='"},
		{[]string{"=0.7:/data/*.rio"}, "no NAME before '='"},
		{[]string{"web=0.7"}, "no ':' between the weight and the pattern"},
		{[]string{"web=:/data/*.rio"}, `weight "" is not a number`},
		{[]string{"web=lots:/data/*.rio"}, `weight "lots" is not a number`},
		{[]string{"web=-1:/data/*.rio"}, `weight "-1" is not a number of at least 0`},
		{[]string{"web=NaN:/data/*.rio"}, `weight "NaN"`},
		{[]string{"web=0.7:"}, "no PATTERN after ':'"},
		{[]string{"web=0.7:/a", "web=0.5:/b"}, "source web has weight 0.7 already"},
	} {
		if _, err := parseSources(tc.specs); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error saying %q", tc.specs, err, tc.want)
		}
	}
}

// TestParseWeights: NAME=WEIGHT arguments, each name once.
func TestParseWeights(t *testing.T) {
	got, err := parseWeights([]string{"web=0.2", "code=0.8", "math=0"})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]float64{"web": 0.2, "code": 0.8, "math": 0}; !reflect.DeepEqual(got, want) {
		t.Fatalf("weights %v, want %v", got, want)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"web"}, "no '='"},
		{[]string{"=1"}, "no NAME"},
		{[]string{"web=x"}, `weight "x" is not a number`},
		{[]string{"web=-0.1"}, "at least 0"},
		{[]string{"web=1", "web=2"}, "given a weight twice"},
	} {
		if _, err := parseWeights(tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error saying %q", tc.args, err, tc.want)
		}
	}
}

// TestScheduleWith: a step goes in order of records, in place of one at
// the same count, leaving the schedule it was given alone.
func TestScheduleWith(t *testing.T) {
	w := func(v float64) map[string]float64 { return map[string]float64{"web": v} }
	old := []rpc.WeightStep{{AtRecords: 100, Weights: w(1)}, {AtRecords: 300, Weights: w(3)}}
	got := scheduleWith(old, rpc.WeightStep{AtRecords: 200, Weights: w(2)})
	if want := []rpc.WeightStep{{AtRecords: 100, Weights: w(1)}, {AtRecords: 200, Weights: w(2)}, {AtRecords: 300, Weights: w(3)}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("added: %+v", got)
	}
	got = scheduleWith(old, rpc.WeightStep{AtRecords: 300, Weights: w(9)})
	if want := []rpc.WeightStep{{AtRecords: 100, Weights: w(1)}, {AtRecords: 300, Weights: w(9)}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("replaced: %+v", got)
	}
	if old[1].Weights["web"] != 3 || len(old) != 2 {
		t.Fatalf("the schedule given changed: %+v", old)
	}
}

// mixCluster is a fake cluster of one mixture job, train: it answers the
// job's description, its dataset and its weights, as a cluster at
// protocol level 9 would, and records the bodies it was sent, by path.
type mixCluster struct {
	mu     sync.Mutex
	job    rpc.Job
	bodies map[string][]json.RawMessage
}

func newMixCluster(t *testing.T) (*mixCluster, string) {
	m := &mixCluster{
		job: rpc.Job{Name: "train", HasDataset: true, Pass: 1, Tasks: 6, Todo: 3, Pending: 1, Done: 2, Files: 3, Chunks: 6,
			Params: &rpc.DatasetParams{ChunksPerTask: 1, FailureMax: 3, Shuffle: true, Seed: 5},
			Sources: []rpc.SourceStatus{
				{Name: "web", Weight: 0.75, Pass: 2, Tasks: 4, Todo: 2, Pending: 1, Done: 1, Records: 5000, Finished: 6, Globs: []string{"/data/web/*.rio", "/data/forums/*.rio"}},
				{Name: "code", Weight: 0.25, Pass: 1, Tasks: 2, Todo: 1, Done: 1, Failed: 0, Records: 1500, Finished: 1, Globs: []string{"s3://corpus/code/*.rio"}},
			},
			Schedule: []rpc.WeightStep{{AtRecords: 10000, Weights: map[string]float64{"web": 0.5, "code": 0.5}}},
			Records:  6500,
		},
		bodies: map[string][]json.RawMessage{},
	}
	ts := httptest.NewServer(m)
	t.Cleanup(ts.Close)
	return m, strings.TrimPrefix(ts.URL, "http://")
}

func (m *mixCluster) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var body json.RawMessage
	json.NewDecoder(r.Body).Decode(&body)
	m.bodies[r.URL.Path] = append(m.bodies[r.URL.Path], body)
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/v1/jobs/train":
		json.NewEncoder(w).Encode(m.job)
	case "/v1/jobs/train/dataset":
		json.NewEncoder(w).Encode(rpc.SetDatasetResponse{Files: 3, Chunks: 6, Tasks: 6, Shuffle: true, Seed: 5})
	case "/v1/jobs/train/weights":
		var req rpc.SetWeightsRequest
		json.Unmarshal(body, &req)
		for k := range m.job.Sources {
			if v, ok := req.Weights[m.job.Sources[k].Name]; ok {
				m.job.Sources[k].Weight = v
			}
		}
		if req.ReplaceSchedule {
			// The steps the job has reached take effect, the others stay.
			m.job.Schedule = nil
			for _, s := range req.Schedule {
				if s.AtRecords > m.job.Records {
					m.job.Schedule = append(m.job.Schedule, s)
					continue
				}
				for k := range m.job.Sources {
					if v, ok := s.Weights[m.job.Sources[k].Name]; ok {
						m.job.Sources[k].Weight = v
					}
				}
			}
		}
		json.NewEncoder(w).Encode(rpc.SetWeightsResponse{Sources: m.job.Sources, Schedule: m.job.Schedule})
	default:
		w.WriteHeader(http.StatusNotFound)
		json.NewEncoder(w).Encode(rpc.Error{Code: rpc.CodeNotFound, Message: r.URL.Path})
	}
}

// sent returns the bodies sent to path, decoded into a new T each.
func sent[T any](t *testing.T, m *mixCluster, path string) []T {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []T
	for _, b := range m.bodies[path] {
		var v T
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %s: %v", path, b, err)
		}
		out = append(out, v)
	}
	return out
}

// TestDatasetSetSources: dataset set --source sends the mixture's sources
// and no globs, and says which it set; --source with GLOBs or
// --client-index, or a malformed --source, is refused before anything is
// sent.
func TestDatasetSetSources(t *testing.T) {
	m, addr := newMixCluster(t)
	code, out, errOut := runCLI("dataset", "set", "--addr", addr, "--job", "train", "--chunks-per-task", "2",
		"--source", "web=0.75:/data/web/*.rio", "--source", "code=0.25:s3://corpus/code/a,b/*.rio", "--source=web=0.75:/data/forums/*.rio")
	if code != 0 || !strings.Contains(out, "mixture of 2 sources: web=0.75 code=0.25") || !strings.Contains(out, "dataset set: 3 files, 6 chunks, 6 tasks") {
		t.Fatalf("dataset set --source: exit %d:\n%s%s", code, out, errOut)
	}
	reqs := sent[rpc.SetDatasetRequest](t, m, "/v1/jobs/train/dataset")
	if len(reqs) != 1 {
		t.Fatalf("%d dataset requests, want 1", len(reqs))
	}
	want := []rpc.SourceSpec{
		{Name: "web", Weight: 0.75, Globs: []string{"/data/web/*.rio", "/data/forums/*.rio"}},
		{Name: "code", Weight: 0.25, Globs: []string{"s3://corpus/code/a,b/*.rio"}},
	}
	if req := reqs[0]; !reflect.DeepEqual(req.Sources, want) || req.Globs != nil || req.ChunksPerTask != 2 {
		t.Fatalf("request %+v, want the sources %+v and no globs", req, want)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--source", "web=1:/a", "/b/*.rio"}, "--source and GLOB arguments (/b/*.rio)"},
		{[]string{"--source", "web=1:/a", "--client-index"}, "--source and --client-index"},
		{[]string{"--source", "web:/a"}, "no '='"},
		{[]string{"--source", "web=1"}, "no ':'"},
		{[]string{"--source", "web=1,5:/a"}, `weight "1,5" is not a number`},
		{[]string{"--source", "web=1:/a", "--source", "web=2:/b"}, "source web has weight 1 already"},
		{nil, "give at least one GLOB, or --source"},
	} {
		args := append([]string{"dataset", "set", "--addr", addr, "--job", "train"}, tc.args...)
		if code, out, errOut := runCLI(args...); code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, want an error saying %q:\n%s%s", tc.args, code, tc.want, out, errOut)
		}
	}
	if n := len(sent[json.RawMessage](t, m, "/v1/jobs/train/dataset")); n != 1 {
		t.Fatalf("%d dataset requests, want only the first", n)
	}
}

// TestJobWeights: job weights set changes the weights now; with --at it
// adds a step to the schedule the job has, in order; a step already
// reached takes effect at once; schedule clear sends an empty schedule;
// malformed arguments are refused before anything is sent.
func TestJobWeights(t *testing.T) {
	m, addr := newMixCluster(t)
	code, out, errOut := runCLI("job", "weights", "set", "--addr", addr, "train", "web=0.2", "code=0.8")
	if code != 0 || !strings.Contains(out, "job train: weights set, from the next task: web=0.2 code=0.8") ||
		!strings.Contains(lineWith(out, "  web "), "20.0%") {
		t.Fatalf("weights set: exit %d:\n%s%s", code, out, errOut)
	}
	reqs := sent[rpc.SetWeightsRequest](t, m, "/v1/jobs/train/weights")
	if len(reqs) != 1 || !reflect.DeepEqual(reqs[0], rpc.SetWeightsRequest{Weights: map[string]float64{"web": 0.2, "code": 0.8}}) {
		t.Fatalf("requests %+v", reqs)
	}

	code, out, errOut = runCLI("job", "weights", "set", "--addr", addr, "train", "--at", "20000", "code=1")
	if code != 0 || !strings.Contains(out, "job train: at 20000 records (6500 consumed so far): code=1") ||
		!strings.Contains(out, "schedule:   at 10000 records: web=0.5 code=0.5\n            at 20000 records: code=1\n") {
		t.Fatalf("weights set --at: exit %d:\n%s%s", code, out, errOut)
	}
	reqs = sent[rpc.SetWeightsRequest](t, m, "/v1/jobs/train/weights")
	want := rpc.SetWeightsRequest{ReplaceSchedule: true, Schedule: []rpc.WeightStep{
		{AtRecords: 10000, Weights: map[string]float64{"web": 0.5, "code": 0.5}},
		{AtRecords: 20000, Weights: map[string]float64{"code": 1}},
	}}
	if len(reqs) != 2 || !reflect.DeepEqual(reqs[1], want) {
		t.Fatalf("--at request %+v, want %+v", reqs[len(reqs)-1], want)
	}

	code, out, errOut = runCLI("job", "weights", "set", "--addr", addr, "--at", "100", "train", "web=3")
	if code != 0 || !strings.Contains(out, "the step took effect at once: web=3") || !strings.Contains(lineWith(out, "  web "), "78.9%") {
		t.Fatalf("a step reached already: exit %d:\n%s%s", code, out, errOut)
	}

	code, out, errOut = runCLI("job", "weights", "schedule", "clear", "--addr", addr, "train")
	if code != 0 || !strings.Contains(out, "weight schedule cleared") || !strings.Contains(out, "schedule:   none") {
		t.Fatalf("schedule clear: exit %d:\n%s%s", code, out, errOut)
	}
	m.mu.Lock()
	last := m.bodies["/v1/jobs/train/weights"][3]
	m.mu.Unlock()
	if string(last) != `{"replace_schedule":true}` {
		t.Fatalf("clear sent %s", last)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"train"}, "give JOB, then NAME=WEIGHT"},
		{[]string{"web=1", "code=2"}, `"web=1": the first argument is the JOB`},
		{[]string{"train", "web"}, "no '='"},
		{[]string{"train", "web=two"}, `weight "two" is not a number`},
		{[]string{"train", "web=1", "web=2"}, "given a weight twice"},
		{[]string{"--at", "-5", "train", "web=1"}, "--at -5"},
	} {
		args := append([]string{"job", "weights", "set", "--addr", addr}, tc.args...)
		if code, out, errOut := runCLI(args...); code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, want an error saying %q:\n%s%s", tc.args, code, tc.want, out, errOut)
		}
	}
	if n := len(sent[json.RawMessage](t, m, "/v1/jobs/train/weights")); n != 4 {
		t.Fatalf("%d weight requests, want the 4 valid ones", n)
	}
}

// TestJobInspectMixture: job inspect shows a mixture's sources, one a
// line with its weight, share, pass, queues and records, its schedule and
// each source's patterns; --json carries them.
func TestJobInspectMixture(t *testing.T) {
	_, addr := newMixCluster(t)
	code, out, errOut := runCLI("job", "inspect", "--addr", addr, "train")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"sources:    2, 6500 records consumed\n",
		"  SOURCE  WEIGHT  SHARE  PASS  TASKS  TODO  PENDING  DONE  FAILED  RECORDS  FINISHED\n",
		"  web     0.75    75.0%  2     4      2     1        1     0       5000     6\n",
		"  code    0.25    25.0%  1     2      1     0        1     0       1500     1\n",
		"schedule:   at 10000 records: web=0.5 code=0.5\n",
		"patterns:   web   /data/web/*.rio\n            web   /data/forums/*.rio\n            code  s3://corpus/code/*.rio\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	code, out, _ = runCLI("job", "inspect", "--addr", addr, "train", "--json")
	var j rpc.Job
	if err := json.Unmarshal([]byte(out), &j); code != 0 || err != nil || len(j.Sources) != 2 || j.Records != 6500 || len(j.Schedule) != 1 {
		t.Fatalf("--json: exit %d, %v:\n%s", code, err, out)
	}
}
