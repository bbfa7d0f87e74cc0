package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/httpapi"
	"github.com/raftmaster/raftmaster/httpapi/apitest"
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
	globs := []string{filepath.Join(dir, "train-*"), a}
	// In id order, so that the first task holds the first chunks.
	e.ok(rpc.PathDataset, rpc.SetDatasetRequest{Globs: globs, ChunksPerTask: 3, Shuffle: ptr(false), Seed: ptr[uint64](7)}, &out)
	want := rpc.SetDatasetResponse{Files: 2, Chunks: nchunks, Tasks: (nchunks + 2) / 3, CurrentPatterns: globs, Seed: 7}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("response %+v, want %+v", out, want)
	}
	st := e.local.FSM().Stats(fsm.DefaultJob)
	wantParams := fsm.DatasetParams{ChunksPerTask: 3, TaskTimeout: time.Minute, FailureMax: 2, Seed: 7}
	if st.Chunks != nchunks || st.Tasks != want.Tasks || !reflect.DeepEqual(st.Params, wantParams) {
		t.Fatalf("stats %+v", st)
	}
	// Chunks are in file order: a's first.
	var got rpc.GetTaskResponse
	e.ok(rpc.PathTaskGet, rpc.GetTaskRequest{}, &got)
	if c := got.Task.Chunks[0]; c.Path != a || c.Offset != 0 || int(c.Records) != xa.ChunkRecords[0] {
		t.Errorf("first chunk %+v", c)
	}

	// A second dataset is ignored without touching the files or the
	// state, and answered with the patterns of the dataset in place; but
	// a pattern that matches nothing is still an error.
	before := e.state()
	out = rpc.SetDatasetResponse{}
	e.ok(rpc.PathDataset, rpc.SetDatasetRequest{Globs: []string{b}, ChunksPerTask: 1}, &out)
	if !out.Ignored || out.Chunks != nchunks || out.Tasks != want.Tasks || !slices.Equal(out.CurrentPatterns, globs) {
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
	e.ok(rpc.PathDataset, rpc.SetDatasetRequest{Chunks: chunks, TaskTimeout: rpc.Duration(time.Second), FailureMax: &failMax, Strict: true,
		Seed: ptr[uint64](11)}, &out)
	if want := (rpc.SetDatasetResponse{Files: 2, Chunks: 3, Tasks: 3, Shuffle: true, Seed: 11}); !reflect.DeepEqual(out, want) {
		t.Fatalf("response %+v, want %+v", out, want)
	}
	st := e.local.FSM().Stats(fsm.DefaultJob)
	if want := (fsm.DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Second, FailureMax: 0, Strict: true, Shuffle: true, Seed: 11}); !reflect.DeepEqual(st.Params, want) {
		t.Fatalf("params %+v, want %+v", st.Params, want)
	}
}

// TestSetDatasetRetry: a SetDataset retried with its request id is
// answered its first outcome without proposing anything: the retry of the
// request that installed the dataset is not ignored, even though a
// dataset is now in place; another request is ignored; and so is the
// retry of one that was.
func TestSetDatasetRetry(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	chunks := []rpc.Chunk{{Path: "/d/a", Records: 5}, {Path: "/d/a", Offset: 100, Records: 5}, {Path: "/d/b", Records: 7}}
	installer, other := reqID(uuid.New(), 1), reqID(uuid.New(), 1)
	var first rpc.SetDatasetResponse
	e.ok(rpc.JobPath("j", rpc.PathDataset), rpc.SetDatasetRequest{Chunks: chunks}, &first, installer...)
	if !first.Shuffle || first.Seed == 0 {
		t.Fatalf("first answer %+v, want a shuffle with the seed the leader drew", first)
	}
	want := rpc.SetDatasetResponse{Files: 2, Chunks: 3, Tasks: 3, Shuffle: true, Seed: first.Seed}
	if !reflect.DeepEqual(first, want) {
		t.Fatalf("first answer %+v, want %+v", first, want)
	}
	before := e.state()
	var retry rpc.SetDatasetResponse
	e.ok(rpc.JobPath("j", rpc.PathDataset), rpc.SetDatasetRequest{Chunks: chunks}, &retry, installer...)
	if !reflect.DeepEqual(retry, want) {
		t.Fatalf("retry of the request that installed the dataset: %+v, want its first answer %+v", retry, want)
	}
	var ignored, ignoredRetry rpc.SetDatasetResponse
	e.ok(rpc.JobPath("j", rpc.PathDataset), rpc.SetDatasetRequest{Chunks: chunks[:1]}, &ignored, other...)
	e.ok(rpc.JobPath("j", rpc.PathDataset), rpc.SetDatasetRequest{Chunks: chunks[:1]}, &ignoredRetry, other...)
	wantIgnored := rpc.SetDatasetResponse{Ignored: true, Chunks: 3, Tasks: 3, Shuffle: true, Seed: first.Seed}
	if !reflect.DeepEqual(ignored, wantIgnored) || !reflect.DeepEqual(ignoredRetry, wantIgnored) {
		t.Fatalf("another request %+v and its retry %+v, want both %+v", ignored, ignoredRetry, wantIgnored)
	}
	if e.state() != before {
		t.Fatal("a retry, or a request that found a dataset in place, reached the log")
	}
}

// The server's defaults fill what the request leaves out; with a zero
// Config they are the original master's.
func TestDatasetDefaults(t *testing.T) {
	cfg := testConfig()
	cfg.DatasetDefaults = fsm.DatasetParams{FailureMax: -1}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, cfg, nil, nil)
	e.ok(rpc.PathDataset, rpc.SetDatasetRequest{Chunks: []rpc.Chunk{{Path: "/a", Records: 1}}, Shuffle: ptr(false)}, nil)
	got := e.local.FSM().Stats(fsm.DefaultJob).Params
	if got.Seed == 0 {
		t.Fatalf("params %+v: no seed drawn", got)
	}
	if got.Seed = 0; !reflect.DeepEqual(got, httpapi.DefaultDatasetParams) {
		t.Fatalf("params %+v, want %+v", got, httpapi.DefaultDatasetParams)
	}
	bad := testConfig()
	bad.DatasetDefaults.TaskTimeout = 1000 * time.Hour
	if bad.Validate() == nil {
		t.Error("Validate accepted a task timeout above MaxDuration")
	}
}

// A pattern that matches nothing is skipped when another one matches, as
// in the original master.
func TestSetDatasetSkipsPatternsThatMatchNothing(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	dir := t.TempDir()
	a := writeRecordIO(t, dir, "train-a.recordio", 6, 64)
	x, err := recordio.LoadIndexFile(a)
	if err != nil {
		t.Fatal(err)
	}
	var out rpc.SetDatasetResponse
	e.ok(rpc.PathDataset, rpc.SetDatasetRequest{Globs: []string{filepath.Join(dir, "none-*"), a}}, &out)
	if out.Ignored || out.Files != 1 || out.Chunks != x.NumChunks() {
		t.Fatalf("response %+v, want 1 file of %d chunks", out, x.NumChunks())
	}
}

// gatedBackend holds the first n read barriers until all n have arrived,
// so that n SetDataset requests pass the handler's first check together.
// With failFirst its first SetDataset fails.
type gatedBackend struct {
	*apitest.Local
	n         int
	failFirst bool
	all       chan struct{}

	mu       sync.Mutex
	barriers int
	sets     int
}

func (g *gatedBackend) ReadBarrier(ctx context.Context) error {
	g.mu.Lock()
	g.barriers++
	gated := g.barriers <= g.n
	if g.barriers == g.n {
		close(g.all)
	}
	g.mu.Unlock()
	if gated {
		select {
		case <-g.all:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return g.Local.ReadBarrier(ctx)
}

func (g *gatedBackend) SetDataset(ctx context.Context, job string, req fsm.RequestID, p fsm.DatasetParams, patterns []string, chunks []fsm.Chunk) (*fsm.Result, error) {
	g.mu.Lock()
	g.sets++
	fail := g.failFirst && g.sets == 1
	g.mu.Unlock()
	if fail {
		return nil, httpapi.ErrUnknownOutcome
	}
	return g.Local.SetDataset(ctx, job, req, p, patterns, chunks)
}

// Concurrent SetDataset requests on one node index and propose the dataset
// once; the others wait and are answered Ignored. When the first attempt
// fails, the next caller makes its own.
func TestConcurrentSetDatasetProposesOnce(t *testing.T) {
	const n = 16
	for _, failFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("failFirst=%v", failFirst), func(t *testing.T) {
			g := &gatedBackend{n: n, failFirst: failFirst, all: make(chan struct{})}
			e := newEnv(t, testConfig(), func(l *apitest.Local) httpapi.Backend { g.Local = l; return g }, nil)
			dir := t.TempDir()
			writeRecordIO(t, dir, "train-a.recordio", 20, 64)
			body, err := json.Marshal(rpc.SetDatasetRequest{Globs: []string{filepath.Join(dir, "train-*")}})
			if err != nil {
				t.Fatal(err)
			}
			before := e.state()

			type answer struct {
				status int
				out    rpc.SetDatasetResponse
				err    error
			}
			answers := make([]answer, n)
			var wg sync.WaitGroup
			for i := range answers {
				wg.Go(func() {
					resp, err := http.Post(e.ts.URL+rpc.PathDataset, "application/json", bytes.NewReader(body))
					if err != nil {
						answers[i].err = err
						return
					}
					defer resp.Body.Close()
					answers[i].status = resp.StatusCode
					if resp.StatusCode == http.StatusOK {
						answers[i].err = json.NewDecoder(resp.Body).Decode(&answers[i].out)
					}
				})
			}
			wg.Wait()

			installed, ignored, failed := 0, 0, 0
			for i, a := range answers {
				switch {
				case a.err != nil:
					t.Errorf("request %d: %v", i, a.err)
				case a.status == http.StatusServiceUnavailable:
					failed++
				case a.status != http.StatusOK:
					t.Errorf("request %d: status %d", i, a.status)
				case a.out.Ignored:
					ignored++
				default:
					installed++
				}
			}
			wantFailed := 0
			if failFirst {
				wantFailed = 1
			}
			if installed != 1 || failed != wantFailed || ignored != n-1-wantFailed {
				t.Errorf("%d installed, %d ignored, %d failed; want 1, %d, %d", installed, ignored, failed, n-1-wantFailed, wantFailed)
			}
			g.mu.Lock()
			sets := g.sets
			g.mu.Unlock()
			if sets != 1+wantFailed {
				t.Errorf("the backend was asked to set the dataset %d times, want %d", sets, 1+wantFailed)
			}
			if after := e.state(); after.applied != before.applied+1 {
				t.Errorf("applied index %d -> %d, want one entry", before.applied, after.applied)
			}
		})
	}
}

// heldBackend holds every SetDataset of job held until release is closed,
// and says on entered when one is held.
type heldBackend struct {
	*apitest.Local
	held    string
	entered chan struct{}
	release chan struct{}

	mu   sync.Mutex
	sets map[string]int
}

func (h *heldBackend) SetDataset(ctx context.Context, job string, req fsm.RequestID, p fsm.DatasetParams, patterns []string, chunks []fsm.Chunk) (*fsm.Result, error) {
	h.mu.Lock()
	h.sets[job]++
	h.mu.Unlock()
	if job == h.held {
		h.entered <- struct{}{}
		select {
		case <-h.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return h.Local.SetDataset(ctx, job, req, p, patterns, chunks)
}

// A SetDataset held in one job's install (a slow glob, a slow proposal)
// does not hold up another job's: the second job's dataset is installed
// while the first is still held. Two calls of the held job still install
// it once.
func TestSetDatasetOfOneJobDoesNotWaitForAnother(t *testing.T) {
	h := &heldBackend{held: "slow", entered: make(chan struct{}, 2), release: make(chan struct{}), sets: map[string]int{}}
	e := newEnv(t, testConfig(), func(l *apitest.Local) httpapi.Backend { h.Local = l; return h }, nil)
	dir := t.TempDir()
	writeRecordIO(t, dir, "train-a.recordio", 20, 64)
	body, err := json.Marshal(rpc.SetDatasetRequest{Globs: []string{filepath.Join(dir, "train-*")}})
	if err != nil {
		t.Fatal(err)
	}
	post := func(job string) (int, rpc.SetDatasetResponse, error) {
		// A deadline, so that a call that waits for the other job fails
		// the test rather than hangs it.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.ts.URL+rpc.JobPath(job, rpc.PathDataset), bytes.NewReader(body))
		if err != nil {
			return 0, rpc.SetDatasetResponse{}, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, rpc.SetDatasetResponse{}, err
		}
		defer resp.Body.Close()
		var out rpc.SetDatasetResponse
		if resp.StatusCode == http.StatusOK {
			err = json.NewDecoder(resp.Body).Decode(&out)
		}
		return resp.StatusCode, out, err
	}

	type answer struct {
		status int
		out    rpc.SetDatasetResponse
		err    error
	}
	slow := make(chan answer, 2)
	for range 2 {
		go func() {
			status, out, err := post("slow")
			slow <- answer{status, out, err}
		}()
	}
	select {
	case <-h.entered:
	case <-time.After(time.Minute):
		t.Fatal("no SetDataset of job slow reached the backend")
	}
	// While job slow's install is held, job fast's goes through.
	status, out, err := post("fast")
	if err != nil || status != http.StatusOK || out.Ignored || out.Chunks == 0 {
		t.Fatalf("job fast while job slow is held: status %d, %+v, %v", status, out, err)
	}
	if st := e.local.FSM().Stats("slow"); st.HasDataset {
		t.Fatal("job slow has its dataset before its install was released")
	}
	close(h.release)
	installed, ignored := 0, 0
	for range 2 {
		a := <-slow
		switch {
		case a.err != nil || a.status != http.StatusOK:
			t.Errorf("job slow: status %d, %v", a.status, a.err)
		case a.out.Ignored:
			ignored++
		default:
			installed++
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if installed != 1 || ignored != 1 || h.sets["slow"] != 1 || h.sets["fast"] != 1 {
		t.Errorf("job slow: %d installed, %d ignored; backend sets %v; want one install per job", installed, ignored, h.sets)
	}
}

// TestDatasetPatternsShown: the job's description shows the globs its
// dataset was set with, as they were given, and a dataset given as
// chunks has none.
func TestDatasetPatternsShown(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	dir := t.TempDir()
	writeRecordIO(t, dir, "train-a.recordio", 6, 64)
	globs := []string{filepath.Join(dir, "train-*.recordio")}
	e.ok(rpc.JobPath("train", rpc.PathDataset), rpc.SetDatasetRequest{Globs: globs}, nil)
	e.ok(rpc.JobPath("given", rpc.PathDataset), rpc.SetDatasetRequest{Chunks: []rpc.Chunk{{Path: "/d/a", Records: 5}}}, nil)
	var train, given rpc.Job
	e.get(rpc.JobRoute(rpc.PathJob, "train")).decode(t, &train)
	e.get(rpc.JobRoute(rpc.PathJob, "given")).decode(t, &given)
	if !slices.Equal(train.Patterns, globs) || train.Files != 1 || given.Patterns != nil || given.Files != 1 {
		t.Fatalf("jobs %+v and %+v, want the patterns %q of the first only", train, given, globs)
	}
	var jobs rpc.JobsResponse
	e.get(rpc.PathJobs).decode(t, &jobs)
	for _, j := range jobs.Jobs {
		if j.Name == "train" && !slices.Equal(j.Patterns, globs) {
			t.Errorf("the job list gives train the patterns %q", j.Patterns)
		}
	}
	// An ignored request is answered with them; one from chunks too.
	var out rpc.SetDatasetResponse
	e.ok(rpc.JobPath("train", rpc.PathDataset), rpc.SetDatasetRequest{Chunks: []rpc.Chunk{{Path: "/d/a", Records: 5}}}, &out)
	if !out.Ignored || !slices.Equal(out.CurrentPatterns, globs) {
		t.Fatalf("a chunk list for a job with a dataset: %+v", out)
	}
}

// TestDatasetGlobsFitAnEntry: the globs, which the dataset records, are
// bounded together by fsm.MaxPatternBytes; more is refused and changes
// nothing.
func TestDatasetGlobsFitAnEntry(t *testing.T) {
	cfg := testConfig()
	cfg.Limits.MaxGlobs, cfg.Limits.MaxDatasetBodyBytes = 32, 1<<20
	e := newEnv(t, cfg, nil, nil)
	var globs []string
	for i := 0; len(globs)*4000 <= fsm.MaxPatternBytes; i++ {
		globs = append(globs, fmt.Sprintf("%04d", i)+strings.Repeat("x", 3996))
	}
	before := e.state()
	msg := wantError(t, e.post(rpc.PathDataset, rpc.SetDatasetRequest{Globs: globs}), http.StatusBadRequest, rpc.CodeInvalid).Message
	if !strings.Contains(msg, fmt.Sprint(fsm.MaxPatternBytes)) {
		t.Errorf("message %q names no bound", msg)
	}
	if e.state() != before {
		t.Fatal("refused globs changed the state")
	}
}

// level3 is a backend whose state is at protocol level 3, as in a cluster
// of a release before datasets recorded their patterns, or one being
// upgraded from it: its SetDataset proposes to that state what a Raft
// leader does, refusing what the level does not allow.
type level3 struct{ *level1 }

func (b level3) SetDataset(ctx context.Context, job string, req fsm.RequestID, p fsm.DatasetParams, patterns []string, chunks []fsm.Chunk) (*fsm.Result, error) {
	var r *fsm.Result
	for _, c := range fsm.DatasetCommands(job, req, p, patterns, chunks, uuid.NewString(), apitest.MaxEntryBytes) {
		if err := b.f.Allows(c); err != nil {
			return nil, err
		}
		var err error
		if r, err = b.Apply(ctx, c); err != nil || r.Code != fsm.CodeOK {
			return r, err
		}
	}
	return r, nil
}

// TestSetDatasetBelowProtocol4: a cluster below protocol level 4 is sent
// no patterns, which its older replicas would refuse: the dataset is set
// as before, and answers, ignored or not, name no patterns (unknown).
func TestSetDatasetBelowProtocol4(t *testing.T) {
	b := level3{&level1{f: fsm.New()}}
	if r, _ := b.Apply(context.Background(), &fsm.SetProtocol{Level: fsm.Protocol3}); r.Code != fsm.CodeOK {
		t.Fatal(r)
	}
	e := newEnv(t, testConfig(), func(l *apitest.Local) httpapi.Backend { b.Local = l; return b }, nil)
	dir := t.TempDir()
	writeRecordIO(t, dir, "train-a.recordio", 6, 64)
	globs := []string{filepath.Join(dir, "train-*.recordio")}
	var first, second rpc.SetDatasetResponse
	e.ok(rpc.PathDataset, rpc.SetDatasetRequest{Globs: globs}, &first)
	e.ok(rpc.PathDataset, rpc.SetDatasetRequest{Globs: []string{filepath.Join(dir, "*")}}, &second)
	if first.Ignored || first.Files != 1 || first.CurrentPatterns != nil || !second.Ignored || second.CurrentPatterns != nil {
		t.Fatalf("answers %+v and %+v, want the dataset set, then ignored, with no patterns", first, second)
	}
	if d, ok := b.f.Dataset(fsm.DefaultJob, 0); !ok || d.Patterns != nil {
		t.Fatalf("dataset %+v %v at protocol level 3", d, ok)
	}
}

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }

// TestSetDatasetOrder: a request that names no order is shuffled with a
// seed the leader draws, which the dataset records and the job's answer
// shows; the tasks are first dispatched in the permutation of the seed;
// shuffle false keeps id order; a later request is answered with the
// order in place.
func TestSetDatasetOrder(t *testing.T) {
	e := newEnv(t, testConfig(), nil, nil)
	chunks := make([]rpc.Chunk, 40)
	for i := range chunks {
		chunks[i] = rpc.Chunk{Path: "/d/a", Offset: int64(i) * 100, Records: 1}
	}
	var out rpc.SetDatasetResponse
	e.ok(rpc.JobPath("drawn", rpc.PathDataset), rpc.SetDatasetRequest{Chunks: chunks}, &out)
	if !out.Shuffle || out.Seed == 0 {
		t.Fatalf("answer %+v, want a shuffle and a drawn seed", out)
	}
	var job rpc.Job
	e.get(rpc.JobRoute(rpc.PathJob, "drawn")).decode(t, &job)
	if job.Params == nil || !job.Params.Shuffle || job.Params.Seed != out.Seed {
		t.Fatalf("job params %+v, want shuffle with seed %d", job.Params, out.Seed)
	}
	var ids []int
	for range chunks {
		var got rpc.GetTaskResponse
		e.ok(rpc.JobPath("drawn", rpc.PathTaskGet), rpc.GetTaskRequest{}, &got)
		if got.Task.Seed != out.Seed {
			t.Fatalf("task %+v carries seed %d, want %d", got.Task.Meta, got.Task.Seed, out.Seed)
		}
		ids = append(ids, got.Task.Meta.ID)
	}
	if want := fsm.PassOrder(out.Seed, true, 0, len(chunks)); !slices.Equal(ids, want) {
		t.Fatalf("dispatched %v, want the permutation %v", ids, want)
	}
	var again rpc.SetDatasetResponse
	e.ok(rpc.JobPath("drawn", rpc.PathDataset), rpc.SetDatasetRequest{Chunks: chunks[:1], Shuffle: ptr(false), Seed: ptr[uint64](3)}, &again)
	if !again.Ignored || !again.Shuffle || again.Seed != out.Seed {
		t.Fatalf("a later request: %+v, want ignored with the order in place (seed %d)", again, out.Seed)
	}

	e.ok(rpc.JobPath("ids", rpc.PathDataset), rpc.SetDatasetRequest{Chunks: chunks[:5], Shuffle: ptr(false)}, &out)
	if out.Shuffle || out.Seed == 0 {
		t.Fatalf("answer %+v, want id order with a drawn seed", out)
	}
	for want := 1; want <= 5; want++ {
		var got rpc.GetTaskResponse
		e.ok(rpc.JobPath("ids", rpc.PathTaskGet), rpc.GetTaskRequest{}, &got)
		if got.Task.Meta.ID != want {
			t.Fatalf("shuffle false dispatched task %d, want %d", got.Task.Meta.ID, want)
		}
	}
}

// TestSetDatasetOrderBelowProtocol8: a cluster below protocol level 8,
// whose older replicas would refuse a seed, sets a request that names no
// order in id order with no seed, and refuses one that asks for a seed
// or a shuffle (unavailable, until the upgrade), proposing nothing.
func TestSetDatasetOrderBelowProtocol8(t *testing.T) {
	b := level3{&level1{f: fsm.New()}}
	if r, _ := b.Apply(context.Background(), &fsm.SetProtocol{Level: fsm.Protocol7}); r.Code != fsm.CodeOK {
		t.Fatal(r)
	}
	e := newEnv(t, testConfig(), func(l *apitest.Local) httpapi.Backend { b.Local = l; return b }, nil)
	chunks := []rpc.Chunk{{Path: "/d/a", Records: 1}, {Path: "/d/a", Offset: 100, Records: 1}, {Path: "/d/a", Offset: 200, Records: 1}}
	for _, in := range []rpc.SetDatasetRequest{
		{Chunks: chunks, Seed: ptr[uint64](5)},
		{Chunks: chunks, Shuffle: ptr(true)},
		{Chunks: chunks, Shuffle: ptr(false), Seed: ptr[uint64](5)},
	} {
		before := b.f.StateHash()
		wantError(t, e.post(rpc.PathDataset, in), http.StatusServiceUnavailable, "unavailable")
		if b.f.StateHash() != before {
			t.Fatal("a refused request changed the state")
		}
	}
	var out rpc.SetDatasetResponse
	e.ok(rpc.PathDataset, rpc.SetDatasetRequest{Chunks: chunks}, &out)
	if out.Ignored || out.Shuffle || out.Seed != 0 {
		t.Fatalf("answer %+v, want the dataset set in id order with no seed", out)
	}
	if d, _ := b.f.Dataset(fsm.DefaultJob, 0); d.Params.Shuffle || d.Params.Seed != 0 {
		t.Fatalf("params %+v at protocol level 7", d.Params)
	}
}
