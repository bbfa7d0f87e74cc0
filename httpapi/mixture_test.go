package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
	"github.com/raftmaster/raftmaster/recordio"
	"github.com/raftmaster/raftmaster/rpc"
)

// mixtureFiles are RecordIO files of three sources in one directory: two
// files of web, one of code, one of books.
type mixtureFiles struct {
	dir     string
	sources []rpc.SourceSpec
	// source names the source of each file, chunks counts each source's
	// chunks.
	source map[string]string
	chunks map[string]int
}

func makeMixtureFiles(t *testing.T) mixtureFiles {
	t.Helper()
	m := mixtureFiles{dir: t.TempDir(), source: map[string]string{}, chunks: map[string]int{}}
	for _, f := range []struct {
		source, name string
		records      int
	}{{"web", "web-0.recordio", 8}, {"web", "web-1.recordio", 6}, {"code", "code-0.recordio", 10}, {"books", "books-0.recordio", 6}} {
		path := writeRecordIO(t, m.dir, f.name, f.records, 64)
		x, err := recordio.LoadIndexFile(path)
		if err != nil {
			t.Fatal(err)
		}
		m.source[path] = f.source
		m.chunks[f.source] += x.NumChunks()
	}
	m.sources = []rpc.SourceSpec{
		{Name: "web", Weight: 0.5, Globs: []string{filepath.Join(m.dir, "web-*.recordio")}},
		{Name: "code", Weight: 0.3, Globs: []string{filepath.Join(m.dir, "code-*.recordio")}},
		{Name: "books", Weight: 0.2, Globs: []string{filepath.Join(m.dir, "books-*.recordio")}},
	}
	return m
}

// globs are the sources' globs one source after the other.
func (m mixtureFiles) globs() []string {
	var out []string
	for _, s := range m.sources {
		out = append(out, s.Globs...)
	}
	return out
}

// job describes job, linearizably.
func (e *env) job(job string) rpc.Job {
	e.t.Helper()
	r := e.get(rpc.JobRoute(rpc.PathJob, job))
	if r.status != http.StatusOK {
		e.t.Fatalf("GET job %s: %d %s", job, r.status, r.body)
	}
	var out rpc.Job
	r.decode(e.t, &out)
	return out
}

// sourceWeights returns the weights of j's sources by name.
func sourceWeights(j rpc.Job) map[string]float64 {
	out := map[string]float64{}
	for _, s := range j.Sources {
		out[s.Name] = s.Weight
	}
	return out
}

// TestMixtureDataset: a dataset of three sources is indexed source by
// source: each task names its source and holds that source's chunks
// only; the job shows each source's weight, tasks and globs; and the
// records and tasks each source counts finished are those of the tasks
// finished, exactly. A second request is ignored, answered with the
// sources' globs, and a retry of the first gets its first answer.
func TestMixtureDataset(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	m := makeMixtureFiles(t)
	const perTask = 2
	installer := reqID(uuid.New(), 1)
	var out rpc.SetDatasetResponse
	e.ok(rpc.JobPath("mix", rpc.PathDataset), rpc.SetDatasetRequest{Sources: m.sources, ChunksPerTask: perTask, Shuffle: ptr(false)},
		&out, installer...)
	tasks, chunks := 0, 0
	for _, s := range m.sources {
		tasks += (m.chunks[s.Name] + perTask - 1) / perTask
		chunks += m.chunks[s.Name]
	}
	want := rpc.SetDatasetResponse{Files: 4, Chunks: chunks, Tasks: tasks, CurrentPatterns: m.globs(), Seed: out.Seed}
	if !reflect.DeepEqual(out, want) || out.Seed == 0 {
		t.Fatalf("answer %+v, want %+v with a seed", out, want)
	}
	var retry rpc.SetDatasetResponse
	e.ok(rpc.JobPath("mix", rpc.PathDataset), rpc.SetDatasetRequest{Sources: m.sources, ChunksPerTask: perTask, Shuffle: ptr(false)},
		&retry, installer...)
	if !reflect.DeepEqual(retry, want) {
		t.Fatalf("the retry of the request that installed the mixture: %+v, want %+v", retry, want)
	}
	st := e.local.FSM().Stats("mix")
	if st.Patterns != nil || len(st.Params.Sources) != 3 {
		t.Fatalf("the dataset records patterns %q and sources %+v, want the sources' only", st.Patterns, st.Params.Sources)
	}
	for k, s := range m.sources {
		got := st.Params.Sources[k]
		if got.Name != s.Name || float64(got.Weight) != s.Weight*fsm.WeightUnit || got.Chunks != m.chunks[s.Name] || !slices.Equal(got.Patterns, s.Globs) {
			t.Errorf("source %d recorded as %+v, want %s of weight %v, %d chunks and globs %q", k, got, s.Name, s.Weight, m.chunks[s.Name], s.Globs)
		}
	}

	job := e.job("mix")
	if len(job.Sources) != 3 || job.Records != 0 || job.Patterns != nil {
		t.Fatalf("job %+v, want its three sources", job)
	}
	for k, s := range m.sources {
		got := job.Sources[k]
		if got.Name != s.Name || got.Weight != s.Weight || got.Tasks != (m.chunks[s.Name]+perTask-1)/perTask || got.Todo != got.Tasks ||
			!slices.Equal(got.Globs, s.Globs) {
			t.Errorf("job source %d: %+v, want %s of weight %v with its tasks to do and globs %q", k, got, s.Name, s.Weight, s.Globs)
		}
	}

	// A second request is ignored and changes nothing.
	before := e.state()
	var again rpc.SetDatasetResponse
	e.ok(rpc.JobPath("mix", rpc.PathDataset), rpc.SetDatasetRequest{Sources: m.sources[:1]}, &again)
	if !again.Ignored || again.Chunks != chunks || again.Tasks != tasks || !slices.Equal(again.CurrentPatterns, m.globs()) {
		t.Fatalf("a second request: %+v, want ignored with the sources' globs", again)
	}
	if e.state() != before {
		t.Fatal("an ignored request changed the state")
	}

	// Each task is of one source, and holds that source's chunks; the
	// job counts what was finished, source by source.
	records, finished := map[string]int64{}, map[string]int64{}
	for range 3 * tasks {
		var got rpc.GetTaskResponse
		e.ok(rpc.JobPath("mix", rpc.PathTaskGet), rpc.GetTaskRequest{Pass: e.local.FSM().Pass("mix")}, &got)
		if got.Task.Source == "" || len(got.Task.Chunks) == 0 || len(got.Task.Chunks) > perTask {
			t.Fatalf("task %+v: no source, or not 1 to %d chunks", got.Task, perTask)
		}
		for _, c := range got.Task.Chunks {
			if m.source[c.Path] != got.Task.Source {
				t.Fatalf("task %d of source %q holds a chunk of %q (%s)", got.Task.Meta.ID, got.Task.Source, m.source[c.Path], c.Path)
			}
			records[got.Task.Source] += int64(c.Records)
		}
		finished[got.Task.Source]++
		e.ok(rpc.JobPath("mix", rpc.PathTaskFinished), rpc.TaskRequest{Meta: got.Task.Meta}, nil)
	}
	job = e.job("mix")
	var total int64
	for _, s := range job.Sources {
		if finished[s.Name] == 0 {
			t.Errorf("source %s was never read", s.Name)
		}
		if s.Records != records[s.Name] || s.Finished != finished[s.Name] {
			t.Errorf("source %s counts %d records of %d tasks finished; the tasks finished hold %d of %d", s.Name, s.Records, s.Finished,
				records[s.Name], finished[s.Name])
		}
		total += records[s.Name]
	}
	if job.Records != total {
		t.Errorf("the job counts %d records finished, its tasks held %d", job.Records, total)
	}
}

// TestSetWeights: a weight change holds from the next task, shows in the
// answer and in the job; a schedule is kept until replaced, and cleared
// by replacing it with none.
func TestSetWeights(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	m := makeMixtureFiles(t)
	e.ok(rpc.PathDataset, rpc.SetDatasetRequest{Sources: m.sources}, nil)

	var out rpc.SetWeightsResponse
	e.ok(rpc.PathWeights, rpc.SetWeightsRequest{Weights: map[string]float64{"code": 2.5, "books": 0}}, &out, reqID(uuid.New(), 1)...)
	wantWeights := map[string]float64{"web": 0.5, "code": 2.5, "books": 0}
	got := map[string]float64{}
	for _, s := range out.Sources {
		got[s.Name] = s.Weight
	}
	if !reflect.DeepEqual(got, wantWeights) || len(out.Sources) != 3 || out.Sources[0].Name != "web" || out.Schedule != nil {
		t.Fatalf("answer %+v, want the sources in order with weights %v", out, wantWeights)
	}
	if w := sourceWeights(e.job(fsm.DefaultJob)); !reflect.DeepEqual(w, wantWeights) {
		t.Fatalf("the job's weights %v, want %v", w, wantWeights)
	}
	// books, of weight 0, is not read.
	for range 6 {
		var task rpc.GetTaskResponse
		e.ok(rpc.PathTaskGet, rpc.GetTaskRequest{Pass: e.local.FSM().Pass(fsm.DefaultJob)}, &task)
		if task.Task.Source == "books" {
			t.Fatalf("task %+v of books, of weight 0", task.Task)
		}
		e.ok(rpc.PathTaskFinished, rpc.TaskRequest{Meta: task.Task.Meta}, nil)
	}

	schedule := []rpc.WeightStep{{AtRecords: 1 << 40, Weights: map[string]float64{"books": 1}}, {AtRecords: 1 << 41, Weights: map[string]float64{"web": 0.25, "code": 0}}}
	out = rpc.SetWeightsResponse{}
	e.ok(rpc.PathWeights, rpc.SetWeightsRequest{ReplaceSchedule: true, Schedule: schedule}, &out)
	if !reflect.DeepEqual(out.Schedule, schedule) {
		t.Fatalf("schedule %+v, want %+v", out.Schedule, schedule)
	}
	job := e.job(fsm.DefaultJob)
	if !reflect.DeepEqual(job.Schedule, schedule) || !reflect.DeepEqual(sourceWeights(job), wantWeights) {
		t.Fatalf("job schedule %+v and weights %v, want %+v and the weights unchanged", job.Schedule, sourceWeights(job), schedule)
	}
	out = rpc.SetWeightsResponse{}
	e.ok(rpc.PathWeights, rpc.SetWeightsRequest{ReplaceSchedule: true}, &out)
	if out.Schedule != nil || e.job(fsm.DefaultJob).Schedule != nil {
		t.Fatalf("a schedule replaced by none: %+v", out)
	}

	// A step already reached applies at once.
	e.ok(rpc.PathWeights, rpc.SetWeightsRequest{ReplaceSchedule: true, Schedule: []rpc.WeightStep{{AtRecords: 0, Weights: map[string]float64{"books": 4000}}}}, &out)
	if w := sourceWeights(e.job(fsm.DefaultJob)); w["books"] != 4000 || out.Schedule != nil {
		t.Fatalf("a step already reached: weights %v, schedule %+v", w, out.Schedule)
	}
}

// TestMixtureBadInput: a mixture's dataset request and weight changes
// that are malformed, out of range, or that do not fit the job are
// answered 400 (409 for a job without a dataset), naming what is wrong,
// and change nothing.
func TestMixtureBadInput(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	m := makeMixtureFiles(t)
	e.ok(rpc.JobPath("mix", rpc.PathDataset), rpc.SetDatasetRequest{Sources: m.sources}, nil)
	e.ok(rpc.JobPath("one", rpc.PathDataset), rpc.SetDatasetRequest{Chunks: []rpc.Chunk{{Path: "/d/a", Records: 5}}}, nil)
	web, code := quoted(m.sources[0].Globs...), quoted(m.sources[1].Globs...)
	src := func(name, weight, globs string) string {
		return fmt.Sprintf(`{"name":%q,"weight":%s,"globs":[%s]}`, name, weight, globs)
	}
	sources := func(ss ...string) string { return `{"sources":[` + strings.Join(ss, ",") + `]}` }
	many := make([]string, fsm.MaxSources+1)
	for i := range many {
		many[i] = src(fmt.Sprintf("s%d", i), "1", web)
	}
	dataset, weights := rpc.JobPath("new", rpc.PathDataset), rpc.JobPath("mix", rpc.PathWeights)
	cases := []struct {
		name, path, body string
		status           int
		code             string
		mention          string
	}{
		{"sources and globs", dataset, `{"globs":[` + web + `],"sources":[` + src("web", "1", web) + `]}`, bad, invalid, "not both"},
		{"sources and chunks", dataset, `{"chunks":[{"path":"/a","offset":0,"records":1}],"sources":[` + src("web", "1", web) + `]}`, bad, invalid, "not both"},
		{"duplicate names", dataset, sources(src("web", "1", web), src("web", "1", code)), bad, invalid, `"web" is named twice`},
		{"every weight 0", dataset, sources(src("web", "0", web), src("code", "0", code)), bad, invalid, "weight 0"},
		{"negative weight", dataset, sources(src("web", "-1", web)), bad, invalid, "negative"},
		{"weight too big", dataset, sources(src("web", "4000.5", web)), bad, invalid, "exceeds 4000"},
		{"weight too small", dataset, sources(src("web", "1e-9", web)), bad, invalid, "smallest"},
		{"NaN weight", dataset, sources(src("web", "NaN", web)), bad, invalid, ""},
		{"weight past float64", dataset, sources(src("web", "1e999", web)), bad, invalid, "weight"},
		{"bad name", dataset, sources(src("we b", "1", web)), bad, invalid, "we b"},
		{"empty name", dataset, sources(src("", "1", web)), bad, invalid, "source name"},
		{"no globs", dataset, sources(src("web", "1", "")), bad, invalid, `"web" has no globs`},
		{"too many sources", dataset, sources(many...), bad, invalid, "at most 16"},
		{"too many globs", dataset, sources(src("web", "1", web+","+web+","+web), src("code", "1", code+","+code)), bad, invalid, "5 globs"},
		{"globs matching nothing", dataset, sources(src("web", "1", web), src("none", "1", quoted(filepath.Join(m.dir, "none-*")))), bad, invalid, `source "none"`},

		{"unknown source", weights, `{"weights":{"web":1,"nosuch":2}}`, bad, invalid, `"nosuch"`},
		{"every weight 0 named", weights, `{"weights":{"web":0,"code":0,"books":0}}`, bad, invalid, "weight 0"},
		{"negative weight change", weights, `{"weights":{"web":-0.5}}`, bad, invalid, "negative"},
		{"weight change too big", weights, `{"weights":{"web":5000}}`, bad, invalid, "exceeds 4000"},
		{"NaN weight change", weights, `{"weights":{"web":NaN}}`, bad, invalid, ""},
		{"bad name change", weights, `{"weights":{"w/b":1}}`, bad, invalid, "w/b"},
		{"no change", weights, `{}`, bad, invalid, "no weights"},
		{"schedule not replacing", weights, `{"schedule":[{"at_records":5,"weights":{"web":1}}]}`, bad, invalid, "replace_schedule"},
		{"steps out of order", weights, `{"replace_schedule":true,"schedule":[{"at_records":5,"weights":{"web":1}},{"at_records":5,"weights":{"code":1}}]}`, bad, invalid, "step 1"},
		{"negative step", weights, `{"replace_schedule":true,"schedule":[{"at_records":-1,"weights":{"web":1}}]}`, bad, invalid, "step 0"},
		{"empty step", weights, `{"replace_schedule":true,"schedule":[{"at_records":1,"weights":{}}]}`, bad, invalid, "step 0"},
		{"unknown source in a step", weights, `{"replace_schedule":true,"schedule":[{"at_records":1,"weights":{"nosuch":1}}]}`, bad, invalid, `"nosuch"`},
		{"weights of one source", rpc.JobPath("one", rpc.PathWeights), `{"weights":{"web":1}}`, bad, invalid, "one source"},
		{"weights without a dataset", rpc.JobPath("none", rpc.PathWeights), `{"weights":{"web":1}}`, http.StatusConflict, rpc.CodeNoDataset, "no dataset"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := e.state()
			r := e.do(http.MethodPost, c.path, []byte(c.body), reqID(uuid.New(), 1)...)
			msg := wantError(t, r, c.status, c.code).Message
			if !strings.Contains(msg, c.mention) {
				t.Errorf("message %q does not mention %q", msg, c.mention)
			}
			if e.state() != before {
				t.Error("a refused request changed the state")
			}
			if _, ok := e.local.FSM().Job("new"); ok {
				t.Error("a refused dataset created its job")
			}
		})
	}
	if w := sourceWeights(e.job("mix")); !reflect.DeepEqual(w, map[string]float64{"web": 0.5, "code": 0.3, "books": 0.2}) {
		t.Fatalf("weights %v after refused changes", w)
	}

	// Weights that would all be 0 only with the weights in place are
	// refused by the state machine, which leaves the state as it was.
	e.ok(weights, rpc.SetWeightsRequest{Weights: map[string]float64{"books": 0}}, nil)
	hash := e.local.FSM().StateHash()
	msg := wantError(t, e.post(weights, rpc.SetWeightsRequest{Weights: map[string]float64{"web": 0, "code": 0}}), bad, invalid).Message
	if !strings.Contains(msg, "weight 0") || e.local.FSM().StateHash() != hash {
		t.Fatalf("weights all 0 with those in place: %q, state changed %v", msg, e.local.FSM().StateHash() != hash)
	}
}

// TestMixtureBelowProtocol9: a cluster below protocol level 9, whose
// older replicas would refuse a dataset of sources, answers a mixture
// and a weight change unavailable and changes nothing; a dataset of one
// source is set as before.
func TestMixtureBelowProtocol9(t *testing.T) {
	b := level3{&level1{f: fsm.New()}}
	if r, _ := b.Apply(context.Background(), &fsm.SetProtocol{Level: fsm.Protocol8}); r.Code != fsm.CodeOK {
		t.Fatal(r)
	}
	e := newEnv(t, testConfig(), func(l *apitest.Local) httpapi.Backend { b.Local = l; return b }, nil)
	m := makeMixtureFiles(t)
	before := b.f.StateHash()
	wantError(t, e.post(rpc.PathDataset, rpc.SetDatasetRequest{Sources: m.sources}), http.StatusServiceUnavailable, rpc.CodeUnavailable)
	wantError(t, e.post(rpc.PathWeights, rpc.SetWeightsRequest{Weights: map[string]float64{"web": 1}}), http.StatusServiceUnavailable, rpc.CodeUnavailable)
	if b.f.StateHash() != before {
		t.Fatal("a refused request changed the state")
	}
	var out rpc.SetDatasetResponse
	e.ok(rpc.PathDataset, rpc.SetDatasetRequest{Globs: m.sources[0].Globs}, &out)
	if out.Ignored || out.Files != 2 {
		t.Fatalf("a dataset of one source at protocol level 8: %+v", out)
	}
}

// smallEntries is a backend whose dataset entries hold a few hundred
// bytes, so that a mixture is uploaded in parts and committed; it counts
// the entries.
type smallEntries struct {
	*apitest.Local
	mu      sync.Mutex
	entries int
}

func (b *smallEntries) SetDataset(ctx context.Context, job string, req fsm.RequestID, p fsm.DatasetParams, patterns []string, chunks []fsm.Chunk) (*fsm.Result, error) {
	var r *fsm.Result
	cmds := fsm.DatasetCommands(job, req, p, patterns, chunks, uuid.NewString(), 400)
	b.mu.Lock()
	b.entries += len(cmds)
	b.mu.Unlock()
	for _, c := range cmds {
		var err error
		if r, err = b.Apply(ctx, c); err != nil || r.Code != fsm.CodeOK {
			return r, err
		}
	}
	return r, nil
}

// TestMixtureUploadedInParts: a mixture too large for one entry is
// uploaded in parts, and its commit carries the sources: each task holds
// its source's chunks.
func TestMixtureUploadedInParts(t *testing.T) {
	b := &smallEntries{}
	e := newEnv(t, testConfig(), func(l *apitest.Local) httpapi.Backend { b.Local = l; return b }, nil)
	m := makeMixtureFiles(t)
	var out rpc.SetDatasetResponse
	e.ok(rpc.PathDataset, rpc.SetDatasetRequest{Sources: m.sources}, &out)
	b.mu.Lock()
	entries := b.entries
	b.mu.Unlock()
	if entries < 3 {
		t.Fatalf("the mixture took %d entries, want parts and a commit", entries)
	}
	st := e.local.FSM().Stats(fsm.DefaultJob)
	if st.Chunks != out.Chunks || st.Tasks != out.Tasks || len(st.Sources) != 3 {
		t.Fatalf("stats %+v after the answer %+v", st, out)
	}
	for range out.Tasks {
		var got rpc.GetTaskResponse
		e.ok(rpc.PathTaskGet, rpc.GetTaskRequest{}, &got)
		for _, c := range got.Task.Chunks {
			if m.source[c.Path] != got.Task.Source {
				t.Fatalf("task %+v of source %q holds a chunk of %q", got.Task.Meta, got.Task.Source, m.source[c.Path])
			}
		}
	}
}
