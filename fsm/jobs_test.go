package fsm

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// in addresses c to job.
func in[C Command](job string, c C) C { c.Hdr().Job = job; return c }

// jobView is everything the queries say about one job, but the cluster's
// fields, for comparing a job before and after something happened to
// another.
type jobView struct {
	Stats   Stats
	Info    JobInfo
	Exists  bool
	Groups  []GroupInfo
	Tasks   []TaskState
	Holder  string
	Watches []WatchResult
}

func viewJob(f *FSM, job string) jobView {
	v := jobView{Stats: f.Stats(job), Groups: f.Groups(job)}
	v.Info, v.Exists = f.Job(job)
	v.Stats.Clock, v.Stats.Jobs, v.Stats.StateBytes, v.Stats.DedupClients, v.Stats.AppliedIndex = 0, 0, 0, 0, 0
	v.Info.CollectAt = 0
	for id := 1; id <= v.Stats.Tasks; id++ {
		ts, _ := f.Task(job, id)
		v.Tasks = append(v.Tasks, ts)
	}
	v.Holder, _, _ = f.SaveModelHolder(job)
	for _, g := range v.Groups {
		for _, m := range g.Members {
			w := f.Watch(job, g.ID, m.ID, m.Generation)
			w.Gathered = nil
			v.Watches = append(v.Watches, w)
		}
	}
	return v
}

// loadJob gives job a dataset of 3 tasks, a leased task, a finished task,
// a save-model holder and an open group "g" of two with one member.
func (h *harness) loadJob(job string) {
	h.t.Helper()
	h.ok(in(job, &SetDataset{Params: withParams(func(p *DatasetParams) { p.TaskTimeout = time.Hour }), Chunks: testChunks(3)}))
	h.ok(in(job, &GetTask{}))
	r := h.ok(in(job, &GetTask{}))
	h.ok(in(job, &TaskFinished{Meta: r.Task.Meta}))
	h.ok(in(job, &RequestSaveModel{TrainerID: "t-" + job, BlockDur: time.Hour}))
	h.ok(in(job, &Join{Group: "g", Member: memberID(1), NumPeers: 2, Data: []byte(job), Timeout: time.Hour}))
}

// TestJobsAreIndependent applies each command to one of two loaded jobs
// and checks that the other job's queries did not change.
func TestJobsAreIndependent(t *testing.T) {
	ops := []struct {
		name string
		run  func(h *harness, job string)
	}{
		{"lease", func(h *harness, job string) { h.ok(in(job, &GetTask{})) }},
		{"finish the pass", func(h *harness, job string) {
			for _, id := range []int{1, 3} {
				ts, _ := h.f.Task(job, id)
				if ts.Queue == "todo" {
					ts.Meta = h.ok(in(job, &GetTask{})).Task.Meta
				}
				h.ok(in(job, &TaskFinished{Meta: ts.Meta}))
			}
			if p := h.f.Pass(job); p != 1 {
				h.t.Fatalf("pass %d, want 1", p)
			}
		}},
		{"fail", func(h *harness, job string) {
			ts, _ := h.f.Task(job, 1)
			h.ok(in(job, &TaskFailed{Meta: ts.Meta}))
		}},
		{"renew", func(h *harness, job string) {
			h.advance(time.Minute)
			ts, _ := h.f.Task(job, 1)
			h.ok(in(job, &RenewLease{Meta: ts.Meta}))
		}},
		{"second dataset", func(h *harness, job string) {
			h.ignored(in(job, &SetDataset{Params: defaultParams, Chunks: testChunks(9)}))
		}},
		{"upload", func(h *harness, job string) {
			h.ignored(in(job, &DatasetPart{UploadID: "u", Chunks: testChunks(1)}))
		}},
		{"save-model", func(h *harness, job string) {
			if r := h.ok(in(job, &RequestSaveModel{TrainerID: "t-" + job, BlockDur: 2 * time.Hour})); !r.Granted {
				h.t.Fatalf("not granted")
			}
			if r := h.ok(in(job, &RequestSaveModel{TrainerID: "other", BlockDur: time.Hour})); r.Granted {
				h.t.Fatalf("granted to another trainer")
			}
		}},
		{"complete the group of the same id", func(h *harness, job string) {
			h.ok(in(job, &Join{Group: "g", Member: memberID(2), NumPeers: 2, Data: []byte("x")}))
			if g, _ := h.f.Group(job, "g"); g.Status != "complete" {
				h.t.Fatalf("group %+v", g)
			}
		}},
		{"leave", func(h *harness, job string) { h.ok(in(job, &Leave{Group: "g", Member: memberID(1)})) }},
		{"create another group", func(h *harness, job string) {
			h.ok(in(job, &Join{Group: "other", Member: memberID(1), NumPeers: 3}))
		}},
		{"delete", func(h *harness, job string) { h.ok(&DeleteJob{Header: Header{Job: jobName(job)}}) }},
		{"delete and create again", func(h *harness, job string) {
			h.ok(&DeleteJob{Header: Header{Job: jobName(job)}})
			h.ok(in(job, &SetDataset{Params: defaultParams, Chunks: testChunks(5)}))
		}},
	}
	for _, pair := range [][2]string{{"", "resnet-2026-11-30"}, {"resnet-2026-11-30", DefaultJob}, {"a", "b"}} {
		for _, op := range ops {
			t.Run(pair[0]+"/"+op.name, func(t *testing.T) {
				h := newHarness(t)
				h.loadJob(pair[0])
				h.loadJob(pair[1])
				other := viewJob(h.f, pair[1])
				before := viewJob(h.f, pair[0])
				h.advance(time.Second) // so that even an ignored command shows, as activity
				op.run(h, pair[0])
				if got := viewJob(h.f, pair[1]); !reflect.DeepEqual(got, other) {
					t.Fatalf("job %q changed:\n%+v\nwas\n%+v", pair[1], got, other)
				}
				if reflect.DeepEqual(viewJob(h.f, pair[0]), before) {
					t.Fatalf("the operation changed nothing in job %q", pair[0])
				}
				checkEstimate(t, h.f)
			})
		}
	}
}

// TestJobWaitsAreSeparate: completing, closing or deleting a group of one
// job wakes no watch of another job's group of the same id.
func TestJobWaitsAreSeparate(t *testing.T) {
	h := newHarness(t)
	gen := h.ok(in("a", &Join{Group: "g", Member: memberID(1), NumPeers: 2})).Generation
	other := h.ok(in("b", &Join{Group: "g", Member: memberID(1), NumPeers: 2})).Generation
	if other != gen+1 {
		t.Fatalf("generations %d and %d: not one counter across jobs", gen, other)
	}
	// A generation applied here that is no join of this member to this
	// group names no outcome of it: refused, not left waiting.
	if w := h.f.Watch("a", "g", memberID(1), other); w.Status != WatchClosed {
		t.Fatalf("job a's member under job b's generation: %+v", w)
	}
	res, w := h.f.WatchWait("a", "g", memberID(1), gen)
	defer w.Release()
	if res.Status != WatchPending || w == nil {
		t.Fatalf("watch %+v", res)
	}
	fired := func() bool {
		select {
		case <-w.Group:
			return true
		case <-w.Member:
			return true
		default:
			return false
		}
	}
	h.ok(in("b", &Join{Group: "g", Member: memberID(2), NumPeers: 2}))
	h.ok(in("b", &Join{Group: "g", Member: memberID(1), NumPeers: 2}))
	h.ok(in("b", &Leave{Group: "g", Member: memberID(1)}))
	h.ok(&DeleteJob{Header: Header{Job: "b"}})
	if fired() {
		t.Fatalf("job b woke a watch of job a")
	}
	if got := h.f.Watch("b", "g", memberID(1), other); got.Status != WatchClosed {
		t.Fatalf("deleted job's watch: %+v", got)
	}
	h.ok(in("a", &Join{Group: "g", Member: memberID(2), NumPeers: 2}))
	if !fired() {
		t.Fatalf("the group's completion did not wake its watch")
	}
}

func TestDeleteJob(t *testing.T) {
	runScenarios(t, []scenario{
		{"unknown job", func(h *harness) {
			h.fails(&DeleteJob{Header: Header{Job: "nope"}}, ErrUnknownJob)
			before := h.f.StateHash()
			if r := h.apply(&DeleteJob{Header: Header{Job: "nope"}}); r.Code != CodeUnknownJob || h.f.StateHash() != before {
				h.t.Fatalf("got %+v, or the state changed", r)
			}
		}},
		{"an unnamed job is refused", func(h *harness) {
			h.setDataset(2, defaultParams)
			if r := h.rejects(&DeleteJob{}); !strings.Contains(r.Message, "names no job") {
				h.t.Fatalf("message %q", r.Message)
			}
		}},
		{"frees everything while the other job runs", func(h *harness) {
			h.loadJob("a")
			h.loadJob("b")
			h.ok(in("a", &DatasetPart{UploadID: "u", Chunks: testChunks(2)})) // ignored: a has a dataset
			gens := h.f.Groups("a")[0].Members
			res, w := h.f.WatchWait("a", "g", gens[0].ID, gens[0].Generation)
			if res.Status != WatchPending {
				h.t.Fatalf("watch %+v", res)
			}
			defer w.Release()
			b := viewJob(h.f, "b")
			if r := h.ok(&DeleteJob{Header: Header{Job: "a"}}); r.Ignored {
				h.t.Fatalf("delete ignored")
			}
			select {
			case <-w.Group:
			default:
				h.t.Fatalf("the deleted job's watch was not woken")
			}
			if got := h.f.Watch("a", "g", gens[0].ID, gens[0].Generation); got.Status != WatchClosed {
				h.t.Fatalf("deleted job's watch %+v", got)
			}
			if _, ok := h.f.Job("a"); ok {
				h.t.Fatalf("job a still exists")
			}
			if st := h.f.Stats("a"); st.HasDataset || st.Tasks != 0 || st.Groups != 0 || st.SaveHolder != "" || st.Uploads != 0 {
				h.t.Fatalf("deleted job stats %+v", st)
			}
			if !reflect.DeepEqual(viewJob(h.f, "b"), b) {
				h.t.Fatalf("deleting a changed b")
			}
			if names := jobNames(h.f); !slices.Equal(names, []string{"b"}) {
				h.t.Fatalf("jobs %v", names)
			}
			checkEstimate(h.t, h.f)
			if h.f.Stats("").StateBytes != h.f.Stats("b").StateBytes || h.f.Stats("").StateBytes <= 0 {
				h.t.Fatalf("state estimate %d", h.f.Stats("").StateBytes)
			}
			h.fails(in("a", &GetTask{}), ErrNoDataset)
			h.fails(&DeleteJob{Header: Header{Job: "a"}}, ErrUnknownJob)
		}},
		{"the default job may be deleted and starts empty", func(h *harness) {
			h.loadJob("")
			h.ok(&DeleteJob{Header: Header{Job: DefaultJob}})
			h.fails(&GetTask{}, ErrNoDataset)
			if _, ok := h.f.Job(""); ok {
				h.t.Fatalf("default job exists")
			}
			if !h.requestSave("other", time.Minute) {
				h.t.Fatalf("save-model lease not granted in an empty default job")
			}
			h.setDataset(4, defaultParams)
			if st := h.f.Stats(""); st.Tasks != 4 || st.Pass != 0 {
				h.t.Fatalf("stats %+v", st)
			}
		}},
	})
}

// TestRecreateJob: a job deleted and created again starts from nothing,
// and nothing of the old job's answers reaches the new one.
func TestRecreateJob(t *testing.T) {
	h := newHarness(t)
	h.ok(in("a", &SetDataset{Params: defaultParams, Chunks: testChunks(2)}))
	first := h.ok(withRequest(in("a", &GetTask{}), 1, 1))
	h.ok(in("a", &TaskFinished{Meta: first.Task.Meta}))
	h.ok(in("a", &TaskFinished{Meta: h.ok(in("a", &GetTask{})).Task.Meta}))
	if h.f.Pass("a") != 1 {
		t.Fatalf("pass %d", h.f.Pass("a"))
	}
	// The first dataset counts for ever, until the job is deleted.
	h.ignored(in("a", &SetDataset{Params: defaultParams, Chunks: testChunks(5)}))
	gen := h.ok(in("a", &Join{Group: "g", Member: memberID(1), NumPeers: 2})).Generation
	h.ok(&DeleteJob{Header: Header{Job: "a"}})
	h.ok(in("a", &SetDataset{Params: defaultParams, Chunks: testChunks(5)}))
	if st := h.f.Stats("a"); st.Tasks != 5 || st.Pass != 0 || st.Done != 0 || st.Groups != 0 {
		t.Fatalf("re-created job %+v", st)
	}
	// The same task and epoch are leased again in the new job; a retry of
	// the old job's GetTask must not claim it.
	again := h.ok(in("a", &GetTask{}))
	if again.Task.Meta != first.Task.Meta {
		t.Fatalf("leased %+v, want the old lease's id and epoch %+v", again.Task.Meta, first.Task.Meta)
	}
	// The job's number tells the two apart, for a reader of the old one.
	if first.Task.JobNumber == 0 || again.Task.JobNumber <= first.Task.JobNumber {
		t.Fatalf("job numbers %d, then %d after a delete: want a larger one", first.Task.JobNumber, again.Task.JobNumber)
	}
	if r := h.apply(withRequest(in("a", &GetTask{}), 1, 1)); !r.Duplicate || r.Code != CodeStaleEpoch {
		t.Fatalf("retry of the old job's GetTask: %+v", r)
	}
	// A new join in the new job never matches the old generation.
	gen2 := h.ok(in("a", &Join{Group: "g", Member: memberID(1), NumPeers: 2})).Generation
	if gen2 <= gen {
		t.Fatalf("generation %d after %d", gen2, gen)
	}
	if w := h.f.Watch("a", "g", memberID(1), gen); w.Status != WatchReconnected {
		t.Fatalf("old generation sees %+v", w)
	}
}

// TestGetTaskOfTheJobRead: a GetTask that names the number of the job
// its caller read is answered ErrUnknownJob, leasing nothing, once that
// job is deleted, whether or not a job of the name exists again; below
// Protocol2 it is invalid, as the previous release, which cannot decode
// it, answers it.
func TestGetTaskOfTheJobRead(t *testing.T) {
	h := newHarness(t)
	h.ok(in("a", &SetDataset{Params: defaultParams, Chunks: testChunks(3)}))
	first := h.ok(in("a", &GetTask{}))
	number := first.Task.JobNumber
	h.invalid(Encode(in("a", &GetTask{Header: Header{Now: h.now}, JobNumber: number})))
	h.ok(&SetProtocol{Level: Protocol2})
	if r := h.ok(in("a", &GetTask{JobNumber: number})); r.Task.JobNumber != number {
		t.Fatalf("GetTask naming the job's own number: %+v", r.Task)
	}
	h.fails(in("a", &GetTask{JobNumber: number + 1}), ErrUnknownJob)
	h.ok(&DeleteJob{Header: Header{Job: "a"}})
	// The job is gone: unknown to its readers, while a GetTask without
	// the number cannot tell it from a job not created yet.
	h.fails(in("a", &GetTask{JobNumber: number}), ErrUnknownJob)
	h.fails(in("a", &GetTask{}), ErrNoDataset)
	h.ok(in("a", &SetDataset{Params: defaultParams, Chunks: testChunks(3)}))
	before := h.f.Stats("a")
	h.fails(in("a", &GetTask{JobNumber: number}), ErrUnknownJob)
	if st := h.f.Stats("a"); st.Pending != 0 || st.Todo != before.Todo {
		t.Fatalf("a GetTask of the deleted job leased a task of the new one: %+v", st)
	}
	// A retry replays the answer.
	retry := withRequest(in("a", &GetTask{JobNumber: number}), 1, 1)
	h.fails(retry, ErrUnknownJob)
	if r := h.apply(withRequest(in("a", &GetTask{JobNumber: number}), 1, 1)); !r.Duplicate || r.Code != CodeUnknownJob {
		t.Fatalf("retry %+v", r)
	}
	// Written without the number, a GetTask is the bytes it always was.
	if b := Encode(&GetTask{Pass: 3}); !bytes.Equal(b, Encode(&GetTask{Pass: 3, JobNumber: 0})) || len(Encode(&GetTask{Pass: 3, JobNumber: 9})) != len(b)+1 {
		t.Fatalf("encoding %x", b)
	}
}

func jobNames(f *FSM) []string {
	var names []string
	for _, j := range f.Jobs() {
		names = append(names, j.Name)
	}
	return names
}

func TestJobCreation(t *testing.T) {
	runScenarios(t, []scenario{
		{"commands that do not create answer as an empty job", func(h *harness) {
			before := h.f.StateHash()
			h.fails(in("a", &GetTask{}), ErrNoDataset)
			h.fails(in("a", &TaskFinished{Meta: TaskMeta{ID: 1, Epoch: 1}}), ErrNoDataset)
			h.fails(in("a", &TaskFailed{Meta: TaskMeta{ID: 1, Epoch: 1}}), ErrNoDataset)
			h.fails(in("a", &RenewLease{Meta: TaskMeta{ID: 1, Epoch: 1}}), ErrNoDataset)
			h.ignored(in("a", &Leave{Group: "g", Member: memberID(1)}))
			h.rejects(in("a", &DatasetCommit{UploadID: "u", Parts: 1, NumChunks: 1, Params: defaultParams}))
			h.fails(&GetTask{}, ErrNoDataset)
			if n := jobNames(h.f); len(n) != 0 {
				h.t.Fatalf("jobs %v created", n)
			}
			if _, err := h.f.Task("a", 1); !errors.Is(err, ErrNoDataset) {
				h.t.Fatalf("Task: %v", err)
			}
			if st := h.f.Stats("a"); st.Job != "a" || st.HasDataset || st.Jobs != 0 || st.Tasks != 0 {
				h.t.Fatalf("stats %+v", st)
			}
			// Only the clock moved.
			ticked := New()
			ticked.ApplyEntry(1, Encode(&Tick{Header: Header{Now: h.now}}))
			if h.f.StateHash() != ticked.StateHash() || h.f.StateHash() == before {
				h.t.Fatalf("commands to an unknown job changed more than the clock")
			}
		}},
		{"commands that create", func(h *harness) {
			h.ok(in("ds", &SetDataset{Params: defaultParams, Chunks: testChunks(1)}))
			h.ok(in("part", &DatasetPart{UploadID: "u", Chunks: testChunks(1)}))
			h.ok(in("save", &RequestSaveModel{TrainerID: "t", BlockDur: time.Second}))
			h.ok(in("join", &Join{Group: "g", Member: memberID(1), NumPeers: 2}))
			h.ok(in("new", &CreateJob{}))
			h.ignored(in("new", &CreateJob{}))
			h.ignored(in("ds", &CreateJob{}))
			if n := jobNames(h.f); !slices.Equal(n, []string{"ds", "join", "new", "part", "save"}) {
				h.t.Fatalf("jobs %v", n)
			}
			h.fails(in("new", &GetTask{}), ErrNoDataset)
			ji, ok := h.f.Job("new")
			if !ok || ji.Name != "new" || ji.CreatedAt != h.now || ji.LastActivity != h.now || ji.HasDataset || ji.Bytes != emptyJobBytes("new") {
				h.t.Fatalf("job info %+v", ji)
			}
		}},
		{"a rejected command creates nothing", func(h *harness) {
			h.rejects(in("a", &DatasetPart{UploadID: "u", Part: 3, Chunks: testChunks(1)}))
			if n := jobNames(h.f); len(n) != 0 {
				h.t.Fatalf("jobs %v", n)
			}
		}},
		{"job info", func(h *harness) {
			h.loadJob("a")
			h.advance(time.Second)
			h.tick()
			ji, _ := h.f.Job("a")
			want := JobInfo{Name: "a", Number: 1, CreatedAt: t0, LastActivity: t0, HasDataset: true, Tasks: 3, Todo: 1, Pending: 1, Done: 1,
				Groups: 1, SaveHolder: "t-a", SaveDeadline: t0 + int64(time.Hour), Bytes: ji.Bytes}
			if ji != want || ji.Bytes <= emptyJobBytes("a") {
				t.Fatalf("job info %+v, want %+v", ji, want)
			}
			if all := h.f.Jobs(); len(all) != 1 || all[0] != ji {
				t.Fatalf("jobs %+v", all)
			}
		}},
	})
}

func TestJobNames(t *testing.T) {
	for _, name := range []string{"a", "0", "resnet-2026-11-30", "a-b-c", strings.Repeat("x", 63), DefaultJob} {
		if err := ValidateJobName(name); err != nil {
			t.Errorf("%q refused: %v", name, err)
		}
	}
	for _, name := range []string{strings.Repeat("x", 64), "-a", "a-", "-", "A", "a_b", "a.b", "a/b", "a b", "é"} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			h.setDataset(2, defaultParams)
			for _, c := range []Command{in(name, &GetTask{}), in(name, &SetDataset{Params: defaultParams, Chunks: testChunks(1)}), in(name, &CreateJob{})} {
				if r := h.rejects(c); !strings.Contains(r.Message, "a job name is 1 to 63 characters of a-z, 0-9 and '-'") {
					t.Errorf("message %q does not name the rule", r.Message)
				}
			}
		})
	}
	h := newHarness(t)
	if r := h.rejects(in("a", &Tick{})); !strings.Contains(r.Message, "cluster-wide") {
		t.Errorf("a job on a Tick: %q", r.Message)
	}
	h.rejects(in("a", &SetLimits{}))
}

// encodeV1 encodes c as version 1 did: no job in the header.
func encodeV1(c Command) []byte {
	e := &encoder{}
	e.byte(1)
	e.byte(byte(c.Type()))
	h := c.Hdr()
	e.varint(h.Now)
	e.uuid(h.Request.Client)
	e.uvarint(h.Request.Seq)
	c.encode(e)
	return e.buf
}

func TestCommandVersions(t *testing.T) {
	// A GetTask of pass 1 at Now 5, as version 1 wrote it.
	v1 := []byte{1, byte(TypeGetTask), 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2}
	c, err := Decode(v1)
	if err != nil {
		t.Fatal(err)
	}
	if g, ok := c.(*GetTask); !ok || g.Now != 5 || g.Pass != 1 || g.Job != "" {
		t.Fatalf("decoded %#v", c)
	}
	if !bytes.Equal(encodeV1(c), v1) {
		t.Fatalf("encodeV1 does not write version 1")
	}
	// Every command of version 1 decodes, addressed to the default job,
	// and applies as its version 2 form without a job does.
	for _, c := range seedCommands() {
		c.Hdr().Job = ""
		got, err := Decode(encodeV1(c))
		if err != nil || !bytes.Equal(Encode(got), Encode(c)) {
			t.Errorf("%v: version 1 decodes to %#v, %v", c.Type(), got, err)
		}
		a, b := applyLog(setupLog()), applyLog(setupLog())
		ra, rb := a.ApplyEntry(100, encodeV1(c)), b.ApplyEntry(100, Encode(c))
		if !sameResult(ra, rb) || a.StateHash() != b.StateHash() {
			t.Errorf("%v: version 1 applies as %+v, version 2 as %+v", c.Type(), ra, rb)
		}
	}
	// Version 2 carries the job.
	j := &Join{Header: Header{Now: t0, Request: RequestID{Client: clientID(1), Seq: 9}, Job: "resnet-2026-11-30"},
		Group: "g", Member: memberID(1), NumPeers: 2, Data: []byte("x"), Timeout: time.Minute}
	b := Encode(j)
	if b[0] != 2 {
		t.Fatalf("version %d", b[0])
	}
	got, err := Decode(b)
	if err != nil || !reflect.DeepEqual(got, j) {
		t.Fatalf("round trip: %#v, %v", got, err)
	}
	// A version 2 entry of the default job is its version 1 form with
	// another version byte and an empty job after the header.
	j.Job = ""
	v1 = encodeV1(j)
	payload := encodePayload(j)
	hdr := v1[1 : len(v1)-len(payload)]
	want := append(append(append([]byte{2}, hdr...), 0), payload...)
	if v2 := Encode(j); !bytes.Equal(v2, want) {
		t.Fatalf("version 2 of the default job\n%x, want\n%x", v2, want)
	}
	// Version 3 carries the request's owner after the job, and only a
	// command with an owner is written so.
	o := &RequestSaveModel{Header: Header{Now: t0, Request: RequestID{Client: clientID(1), Seq: 2, Owner: [16]byte{9}}, Job: "j"},
		TrainerID: "t", BlockDur: time.Minute}
	if b := Encode(o); b[0] != 3 {
		t.Fatalf("an owned command in version %d", b[0])
	} else if got, err := Decode(b); err != nil || !reflect.DeepEqual(got, o) {
		t.Fatalf("version 3 round trip: %#v, %v", got, err)
	} else if _, err := Decode(append([]byte{3}, Encode(j)[1:]...)); err == nil {
		t.Fatal("a version 3 entry without its owner decoded")
	}
	// A newer version halts, as before.
	f := New()
	newer := append([]byte{commandVersion + 1}, b[1:]...)
	if r := f.ApplyEntry(1, newer); !errors.Is(f.HaltErr(), ErrUnsupported) || r.Code != CodeInvalid {
		t.Fatalf("version %d: %+v, halt %v", commandVersion+1, r, f.HaltErr())
	}
	if _, err := Decode([]byte{0, byte(TypeTick)}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("version 0: %v", err)
	}
}

// encodePayload returns c's payload alone.
func encodePayload(c Command) []byte {
	e := &encoder{}
	c.encode(e)
	return e.buf
}

// encodeLegacy writes the default job of s in the snapshot format of
// version 1 or 2, as those versions did.
func encodeLegacy(t *testing.T, s *state, version uint64) []byte {
	t.Helper()
	var b bytes.Buffer
	sw := &snapWriter{w: &b}
	e := &sw.e
	e.raw([]byte(snapshotMagic))
	e.uvarint(version)
	e.varint(s.clock)
	j := s.jobs[DefaultJob]
	if j == nil {
		j = s.newJob(DefaultJob)
	}
	e.int(j.pass)
	e.uvarint(s.nextGen)
	e.varint(s.graceUntil)
	if version == 1 {
		encodeJobV1(sw, j) // version 1 groups have no timeout mode
	} else {
		encodeJob(sw, j, version)
	}
	encodeNodes(e, s.nodes, version)
	encodeDedup(sw, &s.dedup, version)
	sw.flush()
	if sw.err != nil {
		t.Fatal(sw.err)
	}
	return b.Bytes()
}

// encodeJobV1 is encodeJob without the groups' timeout mode.
func encodeJobV1(sw *snapWriter, s *job) {
	groups := s.groups
	s.groups = nil
	encodeJob(sw, s, 1) // an empty group table at the end
	s.groups = groups
	e := &sw.e
	e.buf = e.buf[:len(e.buf)-1] // drop the empty table's count
	e.uvarint(uint64(len(groups)))
	for _, id := range sortedKeys(groups) {
		g := groups[id]
		e.string(id)
		e.int(g.numPeers)
		e.varint(int64(g.timeout))
		e.varint(g.deadline)
		e.byte(byte(g.status))
		e.uvarint(uint64(len(g.members)))
		for _, m := range g.members {
			e.uuid(m.id)
			e.bytes(m.data)
			e.uvarint(m.gen)
			e.bool(m.left)
		}
	}
}

// TestRestoreOldSnapshots: snapshots of versions 1 and 2, written before
// jobs existed, restore as the default job.
func TestRestoreOldSnapshots(t *testing.T) {
	// The default job of setupLog, alone, with groups that fail on
	// timeout, which version 1 implies.
	var log [][]byte
	for _, b := range setupLog() {
		c, _ := Decode(b)
		if j, ok := c.(*Join); ok {
			j.FailOnTimeout = true
		}
		if c.Hdr().Job == "" {
			log = append(log, Encode(c))
		}
	}
	orig := applyLog(log)
	want := orig.s.clone()
	// Restored, the job was created and last active at the snapshot's clock.
	want.jobs[DefaultJob].createdAt = want.clock
	want.jobs[DefaultJob].lastActivity = want.clock
	var wantBytes bytes.Buffer
	if err := encodeState(&wantBytes, want); err != nil {
		t.Fatal(err)
	}
	for _, version := range []uint64{1, 2} {
		b := encodeLegacy(t, orig.s, version)
		f := restored(t, b)
		if got := f.SnapshotBytes(); !bytes.Equal(got, wantBytes.Bytes()) {
			t.Errorf("version %d restores to other state", version)
		}
		if n := jobNames(f); !slices.Equal(n, []string{DefaultJob}) {
			t.Errorf("version %d: jobs %v", version, n)
		}
		if st := f.Stats(""); st.Tasks != 6 || st.Pending != 2 || st.Groups != 2 || st.SaveHolder != "t0" || st.Uploads != 1 {
			t.Errorf("version %d: stats %+v", version, st)
		}
		checkEstimate(t, f)
	}
	// An empty state of version 2 holds no job.
	empty := restored(t, encodeLegacy(t, New().s, 2))
	if n := jobNames(empty); len(n) != 0 || empty.Stats("").StateBytes != 0 {
		t.Errorf("an empty old snapshot restores jobs %v", n)
	}
	// Version 3 round trip, with several jobs and limits.
	f := applyLog(setupLog())
	h := &harness{t: t, f: f, index: 100, now: t0 + int64(time.Second)}
	h.ok(&SetLimits{Limits: Limits{MaxJobs: 9, JobTTL: time.Hour, MaxStateBytes: 1 << 30}})
	checkRoundTrip(t, f)
	g := restored(t, f.SnapshotBytes())
	if !reflect.DeepEqual(g.Jobs(), f.Jobs()) || g.Limits() != f.Limits() || g.Stats("").StateBytes != f.Stats("").StateBytes {
		t.Errorf("restored jobs or limits differ")
	}
}

// TestRestoreRefusesBrokenJob: an invariant broken in any job refuses the
// snapshot.
func TestRestoreRefusesBrokenJob(t *testing.T) {
	b := func(s *state) *job { return s.jobs["job-b"] }
	for _, tc := range []struct {
		name string
		fn   func(s *state)
	}{
		{"pending without deadline", func(s *state) { b(s).tasks[b(s).queues[qPending].head].deadline = 0 }},
		{"tasks without dataset", func(s *state) { b(s).ds = nil }},
		{"member generation from the future", func(s *state) { b(s).groups["g"].members[0].gen = s.nextGen + 1 }},
		{"last activity after the clock", func(s *state) { b(s).lastActivity = s.clock + 1 }},
		{"created after its last activity", func(s *state) { b(s).createdAt = b(s).lastActivity + 1 }},
		{"bad job name", func(s *state) {
			j := b(s)
			delete(s.jobs, j.name)
			j.name = "Job-B"
			s.jobs[j.name] = j
		}},
		{"empty job's bad name", func(s *state) {
			j := s.jobs["empty"]
			delete(s.jobs, j.name)
			j.name = "-"
			s.jobs[j.name] = j
		}},
		{"job number twice", func(s *state) { b(s).seq = s.jobs["empty"].seq }},
		{"job number past the counter", func(s *state) { b(s).seq = s.jobSeq + 1 }},
		{"job number 0", func(s *state) { b(s).seq = 0 }},
		{"remembered request of a job from the future", func(s *state) { s.dedup.head.entries[0].job = s.jobSeq + 1 }},
		{"limit out of range", func(s *state) { s.limits.MaxJobGroups = MaxGroups + 1 }},
		{"negative limit", func(s *state) { s.limits.JobTTL = -1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := applyLog(setupLog()).s
			if b(s) == nil || s.jobs["empty"] == nil {
				t.Fatal("setupLog has no job-b or no empty job")
			}
			tc.fn(s)
			var buf bytes.Buffer
			if err := encodeState(&buf, s); err != nil {
				t.Fatal(err)
			}
			wantRefused(t, buf.Bytes())
		})
	}
}

// wantLimit applies c and fails the test unless it is rejected with
// CodeLimit, a message that starts with "limit NAME (VALUE) exceeded", and
// no change to the state.
func (h *harness) wantLimit(c Command, prefix string) *Result {
	h.t.Helper()
	before := h.f.StateHash()
	r := h.apply(c)
	if r.Code != CodeLimit || !errors.Is(r.Err(), ErrLimitExceeded) || CodeOf(r.Err()) != CodeLimit {
		h.t.Fatalf("%v: got %+v, want CodeLimit", c.Type(), r)
	}
	if !strings.HasPrefix(r.Message, prefix) || r.Err().Error() != r.Message {
		h.t.Fatalf("%v: message %q, want it to start with %q", c.Type(), r.Message, prefix)
	}
	if h.f.StateHash() != before {
		h.t.Fatalf("%v: a command past a limit changed the state", c.Type())
	}
	checkEstimate(h.t, h.f)
	return r
}

func TestLimits(t *testing.T) {
	runScenarios(t, []scenario{
		{"defaults", func(h *harness) {
			want := Limits{MaxJobs: DefaultMaxJobs, MaxJobTasks: DefaultMaxJobTasks, MaxJobChunks: DefaultMaxJobChunks,
				MaxJobGroups: DefaultMaxJobGroups, MaxJobGroupBytes: DefaultMaxJobGroupBytes, MaxStateBytes: DefaultMaxStateBytes,
				MaxJobKVKeys: DefaultMaxJobKVKeys, MaxKVValueBytes: DefaultMaxKVValueBytes}
			if got := h.f.Limits(); got != want {
				h.t.Fatalf("limits %+v, want %+v", got, want)
			}
			h.ok(&SetLimits{Limits: Limits{MaxJobs: 5, JobTTL: time.Minute}})
			want.MaxJobs, want.JobTTL = 5, time.Minute
			if got := h.f.Limits(); got != want {
				h.t.Fatalf("limits %+v, want %+v", got, want)
			}
		}},
		{"out of range", func(h *harness) {
			for _, l := range []Limits{{MaxJobs: -1}, {MaxJobs: MaxJobsCeiling + 1}, {MaxJobTasks: MaxChunks + 1},
				{MaxJobChunks: -1}, {MaxJobGroups: MaxGroups + 1}, {MaxJobGroupBytes: MaxJobGroupBytesCeiling + 1},
				{MaxStateBytes: -1}, {JobTTL: MaxJobTTL + 1}} {
				h.rejects(&SetLimits{Limits: l})
			}
		}},
		{"max_jobs", func(h *harness) {
			h.ok(&SetLimits{Limits: Limits{MaxJobs: 2}})
			h.ok(in("a", &CreateJob{}))
			h.setDataset(1, defaultParams)
			r := h.wantLimit(in("b", &SetDataset{Params: defaultParams, Chunks: testChunks(1)}), "limit max_jobs (2) exceeded")
			if r.Message != `limit max_jobs (2) exceeded: creating job "b" would make 3 jobs` {
				h.t.Fatalf("message %q", r.Message)
			}
			h.wantLimit(in("b", &DatasetPart{UploadID: "u", Chunks: testChunks(1)}), "limit max_jobs (2)")
			h.wantLimit(in("b", &RequestSaveModel{TrainerID: "t", BlockDur: time.Second}), "limit max_jobs (2)")
			h.wantLimit(in("b", &Join{Group: "g", Member: memberID(1), NumPeers: 2}), "limit max_jobs (2)")
			h.wantLimit(in("b", &CreateJob{}), "limit max_jobs (2)")
			// Commands that do not create are not limited, and existing
			// jobs go on.
			h.fails(in("b", &GetTask{}), ErrNoDataset)
			h.ok(in("a", &Join{Group: "g", Member: memberID(1), NumPeers: 2}))
			h.ok(&DeleteJob{Header: Header{Job: "a"}})
			h.ok(in("b", &CreateJob{}))
		}},
		{"max_job_tasks", func(h *harness) {
			h.ok(&SetLimits{Limits: Limits{MaxJobTasks: 2}})
			r := h.wantLimit(in("a", &SetDataset{Params: defaultParams, Chunks: testChunks(3)}), "limit max_job_tasks (2) exceeded")
			if r.Message != `limit max_job_tasks (2) exceeded: job "a" would have 3 tasks` {
				h.t.Fatalf("message %q", r.Message)
			}
			h.ok(in("a", &SetDataset{Params: withParams(func(p *DatasetParams) { p.ChunksPerTask = 2 }), Chunks: testChunks(3)}))
			// Through an upload too: the upload stays for a commit that fits.
			h.ok(&DatasetPart{UploadID: "u", Chunks: testChunks(3)})
			h.wantLimit(&DatasetCommit{UploadID: "u", Parts: 1, NumChunks: 3, Params: defaultParams}, "limit max_job_tasks (2)")
			h.ok(&DatasetCommit{UploadID: "u", Parts: 1, NumChunks: 3, Params: withParams(func(p *DatasetParams) { p.ChunksPerTask = 3 })})
		}},
		{"max_job_chunks", func(h *harness) {
			h.ok(&SetLimits{Limits: Limits{MaxJobChunks: 3}})
			h.wantLimit(&SetDataset{Params: withParams(func(p *DatasetParams) { p.ChunksPerTask = 4 }), Chunks: testChunks(4)},
				`limit max_job_chunks (3) exceeded: job "default" would have 4 chunks`)
			h.ok(&DatasetPart{UploadID: "u", Chunks: testChunks(2)})
			h.wantLimit(&DatasetPart{UploadID: "v", Chunks: testChunks(2)}, `limit max_job_chunks (3) exceeded: job "default" would stage 4 chunks`)
			h.wantLimit(&DatasetPart{UploadID: "u", Part: 1, Chunks: testChunks(2)}, "limit max_job_chunks (3)")
			h.ok(&DatasetPart{UploadID: "u", Part: 1, Chunks: testChunks(1)})
			h.ok(&DatasetCommit{UploadID: "u", Parts: 2, NumChunks: 3, Params: defaultParams})
		}},
		{"max_job_groups", func(h *harness) {
			h.ok(&SetLimits{Limits: Limits{MaxJobGroups: 1}})
			h.ok(&Join{Group: "g1", Member: memberID(1), NumPeers: 2})
			h.wantLimit(&Join{Group: "g2", Member: memberID(1), NumPeers: 2},
				`limit max_job_groups (1) exceeded: job "default" would have 2 allgather groups`)
			h.ok(&Join{Group: "g1", Member: memberID(2), NumPeers: 2}) // joins of the group go on
			h.ok(in("other", &Join{Group: "g2", Member: memberID(1), NumPeers: 2}))
		}},
		{"max_job_groups counts a timed-out group started afresh once", func(h *harness) {
			h.ok(&SetLimits{Limits: Limits{MaxJobGroups: 1}})
			h.ok(&Join{Group: "g", Member: memberID(1), NumPeers: 2, Timeout: time.Second, FailOnTimeout: true})
			h.advance(2 * time.Second)
			h.tick()
			if g, _ := h.f.Group("", "g"); g.Status != "timed_out" {
				h.t.Fatalf("group %+v", g)
			}
			h.ok(&Join{Group: "g", Member: memberID(2), NumPeers: 2})
		}},
		{"max_job_group_bytes", func(h *harness) {
			h.ok(&SetLimits{Limits: Limits{MaxJobGroupBytes: 4}})
			h.ok(&Join{Group: "g1", Member: memberID(1), NumPeers: 3, Data: []byte("abc")})
			h.wantLimit(&Join{Group: "g2", Member: memberID(1), NumPeers: 2, Data: []byte("xy")},
				`limit max_job_group_bytes (4) exceeded: job "default" would hold 5 bytes of allgather data (group "g2")`)
			h.wantLimit(&Join{Group: "g1", Member: memberID(2), NumPeers: 3, Data: []byte("xy")}, "limit max_job_group_bytes (4)")
			h.wantLimit(&Join{Group: "g1", Member: memberID(1), NumPeers: 3, Data: []byte("abcde")}, "limit max_job_group_bytes (4)")
			h.ok(&Join{Group: "g1", Member: memberID(1), NumPeers: 3, Data: []byte("ab")}) // a re-join that shrinks
			h.ok(&Join{Group: "g2", Member: memberID(1), NumPeers: 2, Data: []byte("xy")})
			h.ok(in("other", &Join{Group: "g1", Member: memberID(1), NumPeers: 2, Data: []byte("1234")}))
		}},
		{"max_state_bytes", func(h *harness) {
			h.setDataset(3, defaultParams)
			used := h.f.Stats("").StateBytes
			h.ok(&SetLimits{Limits: Limits{MaxStateBytes: used + emptyJobBytes("a")}})
			h.ok(in("a", &CreateJob{}))
			r := h.wantLimit(in("b", &CreateJob{}), "limit max_state_bytes (")
			if !strings.Contains(r.Message, `creating job "b" would bring the state to`) {
				h.t.Fatalf("message %q", r.Message)
			}
			h.wantLimit(in("a", &SetDataset{Params: defaultParams, Chunks: testChunks(1)}), "limit max_state_bytes (")
			h.wantLimit(in("a", &Join{Group: "g", Member: memberID(1), NumPeers: 2}), "limit max_state_bytes (")
			h.wantLimit(in("a", &RequestSaveModel{TrainerID: "t", BlockDur: time.Second}), "limit max_state_bytes (")
			h.wantLimit(in("a", &DatasetPart{UploadID: "u", Chunks: testChunks(1)}), "limit max_state_bytes (")
			// What frees space makes room.
			h.ok(&DeleteJob{Header: Header{Job: "a"}})
			h.ok(in("b", &CreateJob{}))
		}},
		{"lowering a limit removes nothing", func(h *harness) {
			h.loadJob("a")
			h.loadJob("b")
			before := viewJob(h.f, "a")
			h.ok(&SetLimits{Limits: Limits{MaxJobs: 1, MaxJobTasks: 1, MaxJobGroups: 1, MaxJobGroupBytes: 1, MaxStateBytes: 1}})
			if got := viewJob(h.f, "a"); !reflect.DeepEqual(got, before) || len(h.f.Jobs()) != 2 {
				h.t.Fatalf("lowering limits changed a job")
			}
			h.ok(in("a", &GetTask{}))
			h.ok(in("a", &Leave{Group: "g", Member: memberID(1)}))
		}},
	})
}

// TestEstimate: the size estimate follows the content and comes back to
// nothing.
func TestEstimate(t *testing.T) {
	h := newHarness(t)
	if h.f.Stats("").StateBytes != 0 {
		t.Fatalf("empty state estimate %d", h.f.Stats("").StateBytes)
	}
	h.ok(&SetDataset{Params: defaultParams, Chunks: []Chunk{{Path: "/p", Records: 1}, {Path: "/p", Offset: 9, Records: 1}}})
	want := emptyJobBytes(DefaultJob) + estPath + 2 + 2*estChunk + 2*estTask
	if ji, _ := h.f.Job(""); ji.Bytes != want {
		t.Fatalf("estimate %d, want %d", ji.Bytes, want)
	}
	h.ok(&Join{Group: "g", Member: memberID(1), NumPeers: 2, Data: []byte("abc")})
	want += estGroup + 1 + estMember + 3
	h.requestSave("trainer", time.Minute)
	want += int64(len("trainer"))
	if ji, _ := h.f.Job(""); ji.Bytes != want || h.f.Stats("").StateBytes != want {
		t.Fatalf("estimate %d, want %d", ji.Bytes, want)
	}
	checkEstimate(t, h.f)
	h.ok(&DeleteJob{Header: Header{Job: DefaultJob}})
	if h.f.Stats("").StateBytes != 0 {
		t.Fatalf("estimate %d after deleting every job", h.f.Stats("").StateBytes)
	}
}

func TestJobTTL(t *testing.T) {
	const ttl = time.Minute
	long := withParams(func(p *DatasetParams) { p.TaskTimeout = time.Hour })
	runScenarios(t, []scenario{
		{"off by default", func(h *harness) {
			h.setDataset(2, defaultParams)
			if _, ok := h.f.NextDeadline(); ok {
				h.t.Fatalf("a deadline with nothing waiting")
			}
			h.advance(1000 * time.Hour)
			h.tick()
			if len(h.f.Jobs()) != 1 {
				h.t.Fatalf("collected with JobTTL off")
			}
		}},
		{"an idle job is collected after JobTTL", func(h *harness) {
			h.ok(&SetLimits{Limits: Limits{JobTTL: ttl}})
			h.ok(in("b", &SetDataset{Params: defaultParams, Chunks: testChunks(2)}))
			h.advance(time.Second)
			h.ok(in("a", &SetDataset{Params: defaultParams, Chunks: testChunks(2)}))
			h.ok(in("c", &CreateJob{}))
			if d, ok := h.f.NextDeadline(); !ok || d != t0+int64(ttl) {
				h.t.Fatalf("NextDeadline %d %v, want job b's expiry %d", d, ok, t0+int64(ttl))
			}
			if ji, _ := h.f.Job("a"); ji.CollectAt != h.now+int64(ttl) {
				h.t.Fatalf("collect at %d", ji.CollectAt)
			}
			h.advance(ttl - time.Second - 1)
			if r := h.ok(&Tick{}); len(r.Collected) != 0 {
				h.t.Fatalf("collected %v early", r.Collected)
			}
			h.advance(1)
			if r := h.ok(&Tick{}); !slices.Equal(r.Collected, []string{"b"}) {
				h.t.Fatalf("collected %v, want [b]", r.Collected)
			}
			h.fails(in("c", &GetTask{}), ErrNoDataset) // activity, though an error
			h.advance(time.Second)
			if r := h.ok(&Tick{}); !slices.Equal(r.Collected, []string{"a"}) {
				h.t.Fatalf("collected %v, want [a]", r.Collected)
			}
			h.advance(ttl)
			if r := h.ok(&Tick{}); !slices.Equal(r.Collected, []string{"c"}) || len(h.f.Jobs()) != 0 {
				h.t.Fatalf("collected %v, want [c]", r.Collected)
			}
			if _, ok := h.f.NextDeadline(); ok {
				h.t.Fatalf("a deadline with no job")
			}
		}},
		{"several at once, sorted, the default job too", func(h *harness) {
			h.ok(&SetLimits{Limits: Limits{JobTTL: ttl}})
			for _, job := range []string{"z", "", "a"} {
				h.ok(in(job, &CreateJob{}))
			}
			h.advance(ttl)
			if r := h.ok(&Tick{}); !slices.Equal(r.Collected, []string{"a", DefaultJob, "z"}) {
				h.t.Fatalf("collected %v", r.Collected)
			}
		}},
		{"not while a task lease is out", func(h *harness) {
			h.ok(&SetLimits{Limits: Limits{JobTTL: ttl}})
			h.setDataset(2, long)
			h.getTask(0)
			if d, _ := h.f.NextDeadline(); d != h.now+int64(time.Hour) {
				h.t.Fatalf("NextDeadline %d, want the lease's end", d)
			}
			h.advance(2 * ttl)
			h.tick()
			if len(h.f.Jobs()) != 1 {
				h.t.Fatalf("collected with a lease out")
			}
			h.advance(time.Hour)
			if r := h.ok(&Tick{}); !slices.Equal(r.Collected, []string{DefaultJob}) {
				h.t.Fatalf("the lease expired and the job is idle: collected %v", r.Collected)
			}
		}},
		{"not while a save-model holder exists", func(h *harness) {
			h.ok(&SetLimits{Limits: Limits{JobTTL: ttl}})
			h.requestSave("t", time.Hour)
			h.advance(2 * ttl)
			h.tick()
			if len(h.f.Jobs()) != 1 {
				h.t.Fatalf("collected with a save-model holder")
			}
			if d, _ := h.f.NextDeadline(); d != t0+int64(time.Hour) {
				h.t.Fatalf("NextDeadline %d", d)
			}
			h.advance(time.Hour)
			if r := h.ok(&Tick{}); !slices.Equal(r.Collected, []string{DefaultJob}) {
				h.t.Fatalf("collected %v", r.Collected)
			}
		}},
		{"not while a group exists", func(h *harness) {
			h.ok(&SetLimits{Limits: Limits{JobTTL: ttl}})
			h.ok(&Join{Group: "g", Member: memberID(1), NumPeers: 1, Timeout: time.Hour})
			h.advance(2 * ttl)
			h.tick()
			if len(h.f.Jobs()) != 1 {
				h.t.Fatalf("collected with a group")
			}
			h.advance(time.Hour) // the complete group's retention ends
			if r := h.ok(&Tick{}); !slices.Equal(r.Collected, []string{DefaultJob}) {
				h.t.Fatalf("collected %v", r.Collected)
			}
		}},
		{"a rejected or replayed command is no activity", func(h *harness) {
			h.ok(&SetLimits{Limits: Limits{JobTTL: ttl}})
			h.ok(withRequest(in("a", &CreateJob{}), 1, 1))
			h.advance(ttl / 2)
			h.rejects(in("a", &DatasetPart{UploadID: "u", Part: 5, Chunks: testChunks(1)}))
			if r := h.apply(withRequest(in("a", &CreateJob{}), 1, 1)); !r.Duplicate {
				h.t.Fatalf("not a duplicate: %+v", r)
			}
			h.advance(ttl / 2)
			if r := h.ok(&Tick{}); !slices.Equal(r.Collected, []string{"a"}) {
				h.t.Fatalf("collected %v", r.Collected)
			}
		}},
	})
}

// TestDatasetCommandsAddressTheJob: every command DatasetCommands returns
// names the job, and the parts of a job with the longest name still fit.
func TestDatasetCommandsAddressTheJob(t *testing.T) {
	job := strings.Repeat("j", MaxJobNameLen)
	chunks := testChunks(1000)
	const limit = 2 << 10
	cmds := DatasetCommands(job, RequestID{Client: clientID(1), Seq: 1}, defaultParams, nil, chunks, "up", limit)
	if len(cmds) < 3 {
		t.Fatalf("%d commands", len(cmds))
	}
	h := newHarness(t)
	for _, c := range cmds {
		if c.Hdr().Job != job {
			t.Fatalf("%v addresses %q", c.Type(), c.Hdr().Job)
		}
		c.Hdr().Now = h.now
		if n := len(Encode(c)); n > limit {
			t.Fatalf("%v entry of %d bytes", c.Type(), n)
		}
		h.ok(c)
	}
	if st := h.f.Stats(job); st.Chunks != 1000 || h.f.Stats("").HasDataset {
		t.Fatalf("stats %+v", st)
	}
	if c := DatasetCommands("", RequestID{}, defaultParams, nil, chunks[:1], "up", limit); len(c) != 1 || c[0].Hdr().Job != "" {
		t.Fatalf("one entry: %+v", c)
	}
}

// TestDatasetCommandsCarryThePatterns: the patterns go on the command that
// installs the dataset: one SetDataset while the chunks and the patterns
// fit one entry, else the DatasetCommit after the parts, each entry
// within the limit.
func TestDatasetCommandsCarryThePatterns(t *testing.T) {
	const limit = 8 << 10
	small := []string{"data/demo/train-*.recordio"}
	// Patterns that fit an entry with no chunks, not with these.
	large := []string{strings.Repeat("a", limit/2-200), strings.Repeat("b", limit/2-200)}
	chunks := testChunks(400)
	if runs, n := SplitChunks(chunks, limit), len(Encode(&SetDataset{Chunks: chunks})); len(runs) != 1 || n < 1000 {
		t.Fatalf("%d runs, an entry of %d bytes; want 1 run of more than 1000 bytes", len(runs), n)
	}
	for _, tc := range []struct {
		patterns []string
		types    []CmdType
	}{
		{nil, []CmdType{TypeSetDataset}},
		{small, []CmdType{TypeSetDataset}},
		{large, []CmdType{TypeDatasetPart, TypeDatasetCommit}},
	} {
		cmds := DatasetCommands("job-a", RequestID{Client: clientID(1), Seq: 1}, defaultParams, tc.patterns, chunks, "up", limit)
		var types []CmdType
		h := newHarness(t)
		h.ok(&SetProtocol{Level: Protocol4})
		for _, c := range cmds {
			types = append(types, c.Type())
			c.Hdr().Now = h.now
			if n := len(Encode(c)); n > limit {
				t.Fatalf("%d bytes of patterns: %v entry of %d bytes", len(strings.Join(tc.patterns, "")), c.Type(), n)
			}
			h.ok(c)
		}
		if !slices.Equal(types, tc.types) {
			t.Errorf("%d bytes of patterns: commands %v, want %v", len(strings.Join(tc.patterns, "")), types, tc.types)
		}
		if d, _ := h.f.Dataset("job-a", 0); !slices.Equal(d.Patterns, tc.patterns) || d.Chunks != len(chunks) {
			t.Errorf("dataset %+v, want the patterns %q", d, tc.patterns)
		}
	}
}
