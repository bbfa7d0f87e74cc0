package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftmaster/raftmaster/client"
	"github.com/raftmaster/raftmaster/rpc"
)

// mixServer is a fake cluster that serves a mixture's dataset, weights and
// tasks: it records every request's path, request id and body, and
// answers the first request to failFirst with 503 unknown_outcome.
type mixServer struct {
	t         *testing.T
	failFirst string

	mu   sync.Mutex
	reqs []mixRequest
}

type mixRequest struct {
	path, id string
	body     []byte
}

func newMixServer(t *testing.T, failFirst string) (*mixServer, *httptest.Server) {
	m := &mixServer{t: t, failFirst: failFirst}
	ts := httptest.NewServer(m)
	t.Cleanup(ts.Close)
	return m, ts
}

func (m *mixServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body json.RawMessage
	if r.Body != nil {
		json.NewDecoder(r.Body).Decode(&body)
	}
	m.mu.Lock()
	m.reqs = append(m.reqs, mixRequest{path: r.URL.Path, id: r.Header.Get(rpc.HeaderRequestID), body: body})
	first := 0
	for _, q := range m.reqs {
		if q.path == r.URL.Path {
			first++
		}
	}
	m.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path == m.failFirst && first == 1 {
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(rpc.Error{Code: rpc.CodeUnknownOutcome, Message: "injected"})
		return
	}
	var out any
	switch {
	case strings.HasSuffix(r.URL.Path, "/dataset"):
		out = rpc.SetDatasetResponse{Files: 3, Chunks: 6, Tasks: 6, Shuffle: true, Seed: 9}
	case strings.HasSuffix(r.URL.Path, "/weights"):
		var req rpc.SetWeightsRequest
		if err := json.Unmarshal(body, &req); err != nil {
			m.t.Errorf("weights body %s: %v", body, err)
		}
		out = rpc.SetWeightsResponse{
			Sources: []rpc.SourceStatus{
				{Name: "web", Weight: req.Weights["web"], Pass: 1, Tasks: 4, Records: 120, Finished: 4},
				{Name: "code", Weight: 0.3, Tasks: 2},
			},
			Schedule: req.Schedule,
		}
	case strings.HasSuffix(r.URL.Path, "/task/get"):
		out = rpc.GetTaskResponse{Task: rpc.Task{Meta: rpc.TaskMeta{ID: 4, Epoch: 1}, Chunks: []rpc.Chunk{{Path: "/web/a.rio", Records: 10}},
			Source: "web"}, JobNumber: 1}
	default:
		w.WriteHeader(http.StatusNotFound)
		json.NewEncoder(w).Encode(rpc.Error{Code: rpc.CodeNotFound, Message: r.URL.Path})
		return
	}
	json.NewEncoder(w).Encode(out)
}

// requests returns the requests made to path.
func (m *mixServer) requests(path string) []mixRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []mixRequest
	for _, q := range m.reqs {
		if q.path == path {
			out = append(out, q)
		}
	}
	return out
}

func (m *mixServer) total() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.reqs)
}

// TestSetDatasetSources: DatasetParams.Sources go as the request's sources,
// without globs, to the client's job; the answer is the dataset's; a task
// of the mixture names its source in Task.Source.
func TestSetDatasetSources(t *testing.T) {
	m, ts := newMixServer(t, "")
	c := newClient(t, client.WithAddr(ts.URL), client.WithJob("mix"), client.WithoutSession())
	resp, err := c.SetDatasetWithParamsContext(context.Background(), nil, client.DatasetParams{
		ChunksPerTask: 2,
		Sources: []client.Source{
			{Name: "web", Weight: 0.7, Patterns: []string{"/web/*.rio", "s3://bucket/web/*.rio"}},
			{Name: "code", Weight: 0.3, Patterns: []string{"/code/*.rio"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Tasks != 6 || resp.Seed != 9 {
		t.Fatalf("response %+v", resp)
	}
	reqs := m.requests("/v1/jobs/mix/dataset")
	if len(reqs) != 1 {
		t.Fatalf("dataset requests %d, want 1 at /v1/jobs/mix/dataset", len(reqs))
	}
	var req rpc.SetDatasetRequest
	if err := json.Unmarshal(reqs[0].body, &req); err != nil {
		t.Fatal(err)
	}
	want := []rpc.SourceSpec{
		{Name: "web", Weight: 0.7, Globs: []string{"/web/*.rio", "s3://bucket/web/*.rio"}},
		{Name: "code", Weight: 0.3, Globs: []string{"/code/*.rio"}},
	}
	if !reflect.DeepEqual(req.Sources, want) || req.Globs != nil || req.Chunks != nil || req.ChunksPerTask != 2 {
		t.Fatalf("request %+v, want sources %+v and no globs", req, want)
	}

	task, err := c.GetTask(0)
	if err != nil {
		t.Fatal(err)
	}
	if task.Source != "web" || task.Meta.ID != 4 {
		t.Fatalf("task %+v, want task 4 of source web", task)
	}
}

// TestSetDatasetSourcesRefused: sources with globs, under client
// indexing, or malformed are ErrInvalid, and nothing is sent.
func TestSetDatasetSourcesRefused(t *testing.T) {
	m, ts := newMixServer(t, "")
	c := newClient(t, client.WithAddr(ts.URL), client.WithoutSession())
	indexing := newClient(t, client.WithAddr(ts.URL), client.WithoutSession(), client.WithClientIndexing(true))
	web := client.Source{Name: "web", Weight: 1, Patterns: []string{"/web/*.rio"}}
	for _, tc := range []struct {
		name    string
		c       *client.Client
		globs   []string
		sources []client.Source
		want    string
	}{
		{"globs and sources", c, []string{"/x/*.rio"}, []client.Source{web}, "globs and sources"},
		{"client indexing", indexing, nil, []client.Source{web}, "WithClientIndexing"},
		{"no name", c, nil, []client.Source{{Weight: 1, Patterns: []string{"/a"}}}, "source 0 has no name"},
		{"a name twice", c, nil, []client.Source{web, web}, `"web" is named twice`},
		{"a negative weight", c, nil, []client.Source{{Name: "a", Weight: -1, Patterns: []string{"/a"}}}, "weight -1"},
		{"NaN", c, nil, []client.Source{{Name: "a", Weight: math.NaN(), Patterns: []string{"/a"}}}, "weight NaN"},
		{"infinity", c, nil, []client.Source{{Name: "a", Weight: math.Inf(1), Patterns: []string{"/a"}}}, "weight +Inf"},
		{"no pattern", c, nil, []client.Source{{Name: "a", Weight: 1}}, `"a" has no pattern`},
		{"an empty pattern", c, nil, []client.Source{{Name: "a", Weight: 1, Patterns: []string{""}}}, "empty pattern"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.c.SetDatasetWithParams(tc.globs, client.DatasetParams{Sources: tc.sources})
			if !errors.Is(err, client.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want ErrInvalid saying %q", err, tc.want)
			}
		})
	}
	if n := m.total(); n != 0 {
		t.Fatalf("%d requests sent for refused datasets", n)
	}
}

// TestSetWeights: SetWeights posts the weights to the job's weights path
// (the default job's without WithJob), retries a lost answer with the same
// request id, and returns the sources the cluster answered.
func TestSetWeights(t *testing.T) {
	m, ts := newMixServer(t, "/v1/jobs/mix/weights")
	c := newClient(t, client.WithAddr(ts.URL), client.WithJob("mix"), client.WithRetry(10*time.Second))
	resp, err := c.SetWeights(context.Background(), map[string]float64{"web": 0.25})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Sources) != 2 || resp.Sources[0].Name != "web" || resp.Sources[0].Weight != 0.25 || resp.Sources[0].Records != 120 {
		t.Fatalf("sources %+v", resp.Sources)
	}
	reqs := m.requests("/v1/jobs/mix/weights")
	if len(reqs) != 2 || reqs[0].id == "" || reqs[0].id != reqs[1].id {
		t.Fatalf("%d weight requests with ids %v, want 2 under one request id", len(reqs), reqs)
	}
	var req rpc.SetWeightsRequest
	if err := json.Unmarshal(reqs[1].body, &req); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(req, rpc.SetWeightsRequest{Weights: map[string]float64{"web": 0.25}}) {
		t.Fatalf("request %+v", req)
	}

	def := newClient(t, client.WithAddr(ts.URL))
	if _, err := def.SetWeights(context.Background(), map[string]float64{"code": 2}); err != nil {
		t.Fatal(err)
	}
	if n := len(m.requests(rpc.PathWeights)); n != 1 {
		t.Fatalf("%d requests to %s for the default job, want 1", n, rpc.PathWeights)
	}

	before := m.total()
	for _, tc := range []struct {
		weights map[string]float64
		want    string
	}{
		{nil, "no weight given"},
		{map[string]float64{"web": -0.5}, "weight -0.5"},
		{map[string]float64{"web": math.NaN()}, "weight NaN"},
		{map[string]float64{"": 1}, "without a source name"},
	} {
		if _, err := c.SetWeights(context.Background(), tc.weights); !errors.Is(err, client.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("SetWeights(%v): %v, want ErrInvalid saying %q", tc.weights, err, tc.want)
		}
	}
	if n := m.total(); n != before {
		t.Fatalf("%d requests sent for refused weights", n-before)
	}
}

// TestSetWeightSchedule: SetWeightSchedule replaces the schedule with its
// steps, and nil clears it (replace_schedule with no step); steps out of
// order are ErrInvalid, and nothing is sent.
func TestSetWeightSchedule(t *testing.T) {
	m, ts := newMixServer(t, "")
	c := newClient(t, client.WithAddr(ts.URL), client.WithJob("mix"))
	steps := []client.WeightStep{
		{AtRecords: 1000, Weights: map[string]float64{"web": 0.2, "code": 0.8}},
		{AtRecords: 5000, Weights: map[string]float64{"web": 0.5}},
	}
	resp, err := c.SetWeightSchedule(context.Background(), steps)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(resp.Schedule, steps) {
		t.Fatalf("schedule answered %+v, want %+v", resp.Schedule, steps)
	}
	if _, err := c.SetWeightSchedule(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	reqs := m.requests("/v1/jobs/mix/weights")
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	var set, cleared map[string]any
	if err := json.Unmarshal(reqs[0].body, &set); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(reqs[1].body, &cleared); err != nil {
		t.Fatal(err)
	}
	if set["replace_schedule"] != true || len(set["schedule"].([]any)) != 2 || set["weights"] != nil {
		t.Fatalf("schedule request %v", set)
	}
	if cleared["replace_schedule"] != true || cleared["schedule"] != nil || cleared["weights"] != nil {
		t.Fatalf("clearing request %v, want replace_schedule alone", cleared)
	}

	for _, tc := range []struct {
		steps []client.WeightStep
		want  string
	}{
		{[]client.WeightStep{{AtRecords: 5, Weights: map[string]float64{"a": 1}}, {AtRecords: 5, Weights: map[string]float64{"a": 2}}}, "not after the step before"},
		{[]client.WeightStep{{AtRecords: -1, Weights: map[string]float64{"a": 1}}}, "negative record count"},
		{[]client.WeightStep{{AtRecords: 1}}, "names no weight"},
		{[]client.WeightStep{{AtRecords: 1, Weights: map[string]float64{"a": -1}}}, "weight -1"},
	} {
		if _, err := c.SetWeightSchedule(context.Background(), tc.steps); !errors.Is(err, client.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("SetWeightSchedule(%v): %v, want ErrInvalid saying %q", tc.steps, err, tc.want)
		}
	}
	if n := m.total(); n != 2 {
		t.Fatalf("%d requests, want only the 2 valid ones", n)
	}
}
