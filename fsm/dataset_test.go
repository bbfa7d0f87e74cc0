package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// part returns DatasetPart n of upload id.
func part(id string, n uint32, chunks []Chunk) *DatasetPart {
	return &DatasetPart{UploadID: id, Part: n, Chunks: chunks}
}

// commit returns the DatasetCommit of upload id.
func commit(id string, parts, numChunks uint32) *DatasetCommit {
	return &DatasetCommit{UploadID: id, Parts: parts, NumChunks: numChunks, Params: defaultParams}
}

// leasedChunks leases every task of pass 0 and returns their chunks.
func leasedChunks(h *harness) []Chunk {
	h.t.Helper()
	var out []Chunk
	for range h.f.Stats(DefaultJob).Tasks {
		out = append(out, h.ok(&GetTask{Pass: 0}).Task.Chunks...)
	}
	return out
}

func TestDataset(t *testing.T) {
	all := testChunks(6)
	runScenarios(t, []scenario{
		{"set dataset is honoured once", func(h *harness) {
			h.setDataset(3, defaultParams)
			h.getTask(0)
			before := h.f.Stats(DefaultJob)
			h.ignored(&SetDataset{Params: withParams(func(p *DatasetParams) { p.ChunksPerTask = 3 }), Chunks: testChunks(9)})
			h.ignored(part("late", 0, all))
			h.ignored(commit("late", 1, 6))
			if st := h.f.Stats(DefaultJob); st.Tasks != before.Tasks || st.Chunks != 3 || !reflect.DeepEqual(st.Params, defaultParams) || st.Pending != 1 {
				h.t.Fatalf("second dataset changed the queue: %+v", st)
			}
		}},
		{"parts in order", func(h *harness) {
			h.ok(part("u", 0, all[:2]))
			h.ok(part("u", 1, nil))
			h.ok(part("u", 2, all[2:]))
			if st := h.f.Stats(DefaultJob); st.Uploads != 1 || st.HasDataset {
				h.t.Fatalf("stats %+v, want one staged upload and no dataset", st)
			}
			h.fails(&GetTask{Pass: 0}, ErrNoDataset)
			h.ok(commit("u", 3, 6))
			if st := h.f.Stats(DefaultJob); st.Uploads != 0 || st.Tasks != 6 || !reflect.DeepEqual(st.Params, defaultParams) {
				h.t.Fatalf("stats %+v, want the committed dataset", st)
			}
			if got := leasedChunks(h); !slices.Equal(got, all) {
				h.t.Fatalf("tasks cover %v, want %v", got, all)
			}
		}},
		{"two uploads at once", func(h *harness) {
			h.ok(part("a", 0, all[:1]))
			h.ok(part("b", 0, all[3:]))
			h.ok(part("a", 1, all[1:3]))
			h.ok(commit("b", 1, 3))
			h.ignored(commit("a", 2, 3)) // a dataset is set; a is dropped
			if st := h.f.Stats(DefaultJob); st.Uploads != 0 || st.Chunks != 3 {
				h.t.Fatalf("stats %+v, want upload b as the dataset", st)
			}
			if got := leasedChunks(h); !slices.Equal(got, all[3:]) {
				h.t.Fatalf("tasks cover %v, want %v", got, all[3:])
			}
		}},
		{"out of order parts are rejected", func(h *harness) {
			h.rejects(part("u", 1, all[:1])) // unknown upload
			h.ok(part("u", 0, all[:1]))
			h.rejects(part("u", 0, all[1:2])) // repeated
			h.rejects(part("u", 2, all[1:2])) // gap
			h.ok(part("u", 1, all[1:2]))
			h.ok(commit("u", 2, 2))
		}},
		{"commit mismatch is rejected", func(h *harness) {
			h.rejects(commit("u", 1, 2)) // unknown upload
			h.ok(part("u", 0, all[:2]))
			h.rejects(commit("u", 2, 2))
			h.rejects(commit("u", 1, 3))
			h.ok(part("e", 0, nil))
			h.rejects(commit("e", 1, 0)) // no chunks
			h.ok(commit("u", 1, 2))      // still staged
		}},
		{"too many uploads", func(h *harness) {
			for i := range MaxUploads {
				h.ok(part(fmt.Sprint("u", i), 0, all[:1]))
			}
			h.rejects(part("one-more", 0, all[:1]))
			h.ok(part("u0", 1, all[1:2])) // existing uploads go on
		}},
		{"idle upload expiry", func(h *harness) {
			h.ok(part("u", 0, all[:1]))
			h.advance(UploadIdleTimeout / 2)
			h.ok(part("u", 1, all[1:2])) // a part keeps the upload alive
			touched := h.now
			if d, ok := h.f.NextDeadline(); !ok || d != touched+int64(UploadIdleTimeout) {
				h.t.Fatalf("NextDeadline %d %v, want the upload's idle deadline", d, ok)
			}
			h.advance(UploadIdleTimeout - 1)
			h.tick()
			if h.f.Stats(DefaultJob).Uploads != 1 {
				h.t.Fatalf("upload dropped before it was idle for %v", UploadIdleTimeout)
			}
			h.advance(1)
			h.tick()
			if h.f.Stats(DefaultJob).Uploads != 0 {
				h.t.Fatalf("idle upload not dropped")
			}
			h.rejects(commit("u", 2, 2))
			h.rejects(part("u", 2, all[2:3]))
			h.ok(part("u", 0, all[:1])) // the id starts afresh
		}},
	})
}

func TestLeaderGrace(t *testing.T) {
	runScenarios(t, []scenario{
		{"extends due deadlines", func(h *harness) {
			h.setDataset(2, defaultParams)
			early := h.getTask(0)
			h.advance(30 * time.Second)
			late := h.getTask(0) // due at +40s
			h.ok(&RequestSaveModel{TrainerID: "a", BlockDur: 5 * time.Second})
			h.ok(&Join{Group: "g", Member: memberID(1), NumPeers: 2, Timeout: 10 * time.Second, FailOnTimeout: true})
			h.ok(part("u", 0, testChunks(1)))

			// No leader from +30s to +45s; the new leader grants 10s.
			h.advance(15 * time.Second)
			h.ok(&LeaderGrace{Grace: 10 * time.Second})
			limit := h.now + int64(10*time.Second)
			for _, m := range []TaskMeta{early, late} {
				if ts := h.wantTask(m.ID, "pending", 1, 0); ts.Deadline != limit {
					h.t.Fatalf("task %d deadline %d, want %d", m.ID, ts.Deadline, limit)
				}
			}
			if _, d, ok := h.f.SaveModelHolder(DefaultJob); !ok || d != limit {
				h.t.Fatalf("save lease ends %d (%v), want %d", d, ok, limit)
			}
			if g, _ := h.f.Group(DefaultJob, "g"); g.Deadline != limit {
				h.t.Fatalf("group deadline %d, want %d", g.Deadline, limit)
			}
			h.advance(10*time.Second - 1)
			h.tick()
			if st := h.f.Stats(DefaultJob); st.Pending != 2 || st.SaveHolder != "a" || st.Groups != 1 {
				h.t.Fatalf("stats %+v: something expired during the grace", st)
			}
			h.advance(1)
			h.tick()
			if st := h.f.Stats(DefaultJob); st.Pending != 0 || st.SaveHolder != "" {
				h.t.Fatalf("stats %+v: leases outlived the grace", st)
			}
			if g, _ := h.f.Group(DefaultJob, "g"); g.Status != "timed_out" {
				h.t.Fatalf("group %+v, want timed out after the grace", g)
			}
		}},
		{"a renewal's lease outlasts the grace, then is the timeout", func(h *harness) {
			h.setDataset(1, defaultParams)
			m := h.getTask(0)
			h.ok(&LeaderGrace{Grace: 3 * defaultParams.TaskTimeout})
			if got := h.ok(&RenewLease{Meta: m}).Lease; got != 3*defaultParams.TaskTimeout {
				h.t.Fatalf("lease during the grace %v, want %v", got, 3*defaultParams.TaskTimeout)
			}
			h.advance(3 * defaultParams.TaskTimeout)
			if got := h.ok(&RenewLease{Meta: m}).Lease; got != defaultParams.TaskTimeout {
				h.t.Fatalf("lease after the grace %v, want the timeout %v", got, defaultParams.TaskTimeout)
			}
			if ts := h.wantTask(m.ID, "pending", 1, 0); ts.Deadline != h.now+int64(defaultParams.TaskTimeout) {
				h.t.Fatalf("deadline %d, want now+timeout", ts.Deadline)
			}
		}},
		{"extends an idle upload", func(h *harness) {
			h.ok(part("u", 0, testChunks(1)))
			h.advance(UploadIdleTimeout - time.Second)
			h.ok(&LeaderGrace{Grace: time.Minute})
			h.advance(time.Minute - 1)
			h.tick()
			if h.f.Stats(DefaultJob).Uploads != 1 {
				h.t.Fatalf("upload dropped during the grace")
			}
			h.advance(1)
			h.tick()
			if h.f.Stats(DefaultJob).Uploads != 0 {
				h.t.Fatalf("upload outlived the grace")
			}
		}},
		{"leases granted during the grace end no earlier", func(h *harness) {
			h.setDataset(2, defaultParams)
			h.ok(&LeaderGrace{Grace: time.Minute})
			limit := h.now + int64(time.Minute)
			m := h.getTask(0)
			if ts := h.wantTask(m.ID, "pending", 1, 0); ts.Deadline != limit {
				h.t.Fatalf("lease granted in the grace ends %d, want %d", ts.Deadline, limit)
			}
			h.advance(time.Minute - 5*time.Second)
			h.ok(&RenewLease{Meta: m}) // clock+timeout is past the grace now
			if ts := h.wantTask(m.ID, "pending", 1, 0); ts.Deadline != h.now+int64(10*time.Second) {
				h.t.Fatalf("lease renewed after the grace ends %d", ts.Deadline)
			}
		}},
		{"leaves later deadlines alone", func(h *harness) {
			h.setDataset(1, defaultParams)
			m := h.getTask(0)
			want := h.wantTask(m.ID, "pending", 1, 0).Deadline
			h.ok(&LeaderGrace{Grace: 5 * time.Second})
			if got := h.wantTask(m.ID, "pending", 1, 0).Deadline; got != want {
				h.t.Fatalf("deadline moved from %d to %d", want, got)
			}
		}},
	})
}

// patternsOf returns the patterns the default job's dataset records, as
// Stats and Dataset both answer them.
func patternsOf(h *harness) []string {
	h.t.Helper()
	st := h.f.Stats(DefaultJob)
	d, _ := h.f.Dataset(DefaultJob, 0)
	if !slices.Equal(st.Patterns, d.Patterns) {
		h.t.Fatalf("Stats says patterns %q, Dataset %q", st.Patterns, d.Patterns)
	}
	return d.Patterns
}

// TestDatasetPatterns: from Protocol4 a dataset records the patterns it
// was set with, in one entry or in parts; a later dataset, whatever its
// patterns, is ignored and leaves them; below Protocol4, and past the
// limits, patterns are refused and change nothing.
func TestDatasetPatterns(t *testing.T) {
	first := []string{"data/quick/train-*.recordio"}
	other := []string{"data/demo/train-*.recordio", "data/demo/extra.recordio"}
	runScenarios(t, []scenario{
		{"one entry", func(h *harness) {
			h.ok(&SetProtocol{Level: Protocol4})
			h.ok(&SetDataset{Params: defaultParams, Chunks: testChunks(3), Patterns: first})
			if got := patternsOf(h); !slices.Equal(got, first) {
				h.t.Fatalf("patterns %q, want %q", got, first)
			}
			h.ignored(&SetDataset{Params: defaultParams, Chunks: testChunks(5), Patterns: other})
			h.ignored(&SetDataset{Params: defaultParams, Chunks: testChunks(5)})
			h.ok(part("late", 0, testChunks(2)))
			h.ignored(&DatasetCommit{UploadID: "late", Parts: 1, NumChunks: 2, Params: defaultParams, Patterns: other})
			if got, st := patternsOf(h), h.f.Stats(DefaultJob); !slices.Equal(got, first) || st.Chunks != 3 || st.Uploads != 0 {
				h.t.Fatalf("after later datasets: patterns %q, %+v", got, st)
			}
		}},
		{"in parts", func(h *harness) {
			h.ok(&SetProtocol{Level: Protocol4})
			h.ok(part("u", 0, testChunks(2)))
			h.ok(&DatasetCommit{UploadID: "u", Parts: 1, NumChunks: 2, Params: defaultParams, Patterns: other})
			if got := patternsOf(h); !slices.Equal(got, other) {
				h.t.Fatalf("patterns %q, want %q", got, other)
			}
		}},
		{"a chunk list records none", func(h *harness) {
			h.ok(&SetProtocol{Level: Protocol4})
			h.setDataset(2, defaultParams)
			if got := patternsOf(h); got != nil {
				h.t.Fatalf("patterns %q of a chunk list", got)
			}
		}},
		{"refused below Protocol4", func(h *harness) {
			h.ok(&SetProtocol{Level: Protocol3})
			c := &SetDataset{Params: defaultParams, Chunks: testChunks(2), Patterns: first}
			if err := h.f.Allows(c); !errors.Is(err, ErrUpgradePending) {
				h.t.Fatalf("Allows at level 3: %v, want ErrUpgradePending", err)
			}
			h.rejects(c)
			h.ok(part("u", 0, testChunks(2)))
			h.rejects(&DatasetCommit{UploadID: "u", Parts: 1, NumChunks: 2, Params: defaultParams, Patterns: first})
			h.ok(&SetDataset{Params: defaultParams, Chunks: testChunks(2)}) // without patterns, as before
			if got := patternsOf(h); got != nil {
				h.t.Fatalf("patterns %q below Protocol4", got)
			}
		}},
		{"limits", func(h *harness) {
			h.ok(&SetProtocol{Level: Protocol4})
			long := strings.Repeat("p", MaxPathLen+1)
			many := make([]string, MaxPatterns+1)
			for i := range many {
				many[i] = fmt.Sprint("p", i)
			}
			big := make([]string, MaxPatternBytes/MaxPathLen+1)
			for i := range big {
				big[i] = strings.Repeat("b", MaxPathLen)
			}
			for _, patterns := range [][]string{{""}, {"a", ""}, {long}, many, big} {
				h.rejects(&SetDataset{Params: defaultParams, Chunks: testChunks(2), Patterns: patterns})
				h.ok(part("u", 0, testChunks(1)))
				h.rejects(&DatasetCommit{UploadID: "u", Parts: 1, NumChunks: 1, Params: defaultParams, Patterns: patterns})
				h.advance(UploadIdleTimeout)
				h.tick() // drops upload u
			}
			h.ok(&SetDataset{Params: defaultParams, Chunks: testChunks(2), Patterns: big[1:]})
			if got := patternsOf(h); len(got) != len(big)-1 {
				h.t.Fatalf("%d patterns, want %d", len(got), len(big)-1)
			}
		}},
		{"an empty list is never written", func(h *harness) {
			h.ok(&SetProtocol{Level: Protocol4})
			b := Encode(&SetDataset{Header: Header{Now: h.now}, Params: defaultParams, Chunks: testChunks(1)})
			h.invalid(append(b, 0)) // a list of no patterns
		}},
	})
}

// TestDatasetPatternsCount: the patterns count in the size estimate, and a
// dataset whose patterns would pass MaxStateBytes is refused.
func TestDatasetPatternsCount(t *testing.T) {
	h := newHarness(t)
	h.ok(&SetProtocol{Level: Protocol4})
	h.ok(&SetDataset{Header: Header{Job: "plain"}, Params: defaultParams, Chunks: testChunks(2)})
	patterns := []string{strings.Repeat("p", 1000)}
	h.ok(&SetDataset{Header: Header{Job: "patterned"}, Params: defaultParams, Chunks: testChunks(2), Patterns: patterns})
	plain, _ := h.f.Job("plain")
	patterned, _ := h.f.Job("patterned")
	if d := patterned.Bytes - plain.Bytes; d != pathBytes(patterns)+int64(len("patterned")-len("plain")) {
		h.t.Fatalf("the patterns add %d bytes to the estimate, want %d", d, pathBytes(patterns))
	}
	// Room for a third job like plain, not for one like patterned.
	third := patterned.Bytes - int64(len("patterned")-len("third"))
	h.ok(&SetLimits{Limits: Limits{MaxStateBytes: h.f.Stats("").StateBytes + third - 1}})
	before := h.f.SnapshotBytes()
	h.fails(&SetDataset{Header: Header{Job: "third"}, Params: defaultParams, Chunks: testChunks(2), Patterns: patterns}, ErrLimitExceeded)
	if !bytes.Equal(before, h.f.SnapshotBytes()) {
		h.t.Fatal("a refused dataset changed the state")
	}
	h.ok(&SetDataset{Header: Header{Job: "third"}, Params: defaultParams, Chunks: testChunks(2)})
}

// TestDatasetPatternsInSnapshots: a state at Protocol3 writes snapshot
// version 6, as the previous release does, and restores with datasets of
// no patterns; from Protocol4 version 7 keeps each dataset's patterns.
func TestDatasetPatternsInSnapshots(t *testing.T) {
	patterns := []string{"data/demo/train-*.recordio", "/abs/x.recordio"}
	f := New()
	f.ApplyEntry(1, Encode(&SetProtocol{Header: Header{Now: t0}, Level: Protocol3}))
	f.ApplyEntry(2, Encode(&SetDataset{Header: Header{Now: t0, Job: "a"}, Params: defaultParams, Chunks: testChunks(3)}))
	if v := snapshotVersionOf(t, f); v != 6 {
		t.Fatalf("a Protocol3 state writes snapshot version %d, want 6", v)
	}
	g := restored(t, f.SnapshotBytes())
	if d, ok := g.Dataset("a", 0); !ok || d.Patterns != nil || d.Chunks != 3 || g.StateHash() != f.StateHash() {
		t.Fatalf("version 6 restored as %+v %v", d, ok)
	}

	for _, fsm := range []*FSM{f, g} {
		fsm.ApplyEntry(3, Encode(&SetProtocol{Header: Header{Now: t0}, Level: Protocol4}))
		if r := fsm.ApplyEntry(4, Encode(&SetDataset{Header: Header{Now: t0, Job: "b"}, Params: defaultParams,
			Chunks: testChunks(2), Patterns: patterns})); r.Code != CodeOK {
			t.Fatalf("SetDataset with patterns at Protocol4: %+v", r)
		}
	}
	if v := snapshotVersionOf(t, f); v != 7 {
		t.Fatalf("a Protocol4 state writes snapshot version %d, want 7", v)
	}
	if f.StateHash() != g.StateHash() {
		t.Fatal("a replica restored from version 6 and one that was not disagree")
	}
	r := restored(t, f.SnapshotBytes())
	if d, _ := r.Dataset("b", 0); !slices.Equal(d.Patterns, patterns) || r.StateHash() != f.StateHash() {
		t.Fatalf("version 7 restored the patterns as %q", d.Patterns)
	}
	if d, _ := r.Dataset("a", 0); d.Patterns != nil {
		t.Fatalf("the dataset set before Protocol4 has patterns %q", d.Patterns)
	}

	// A version 7 snapshot of a state below Protocol4 is refused.
	s := r.s.clone()
	s.protocol = Protocol3
	var b bytes.Buffer
	if err := encodeStateVersion(&b, s, 7); err != nil {
		t.Fatal(err)
	}
	if _, err := decodeState(b.Bytes()); err == nil {
		t.Fatal("a version 7 snapshot at protocol level 3 restored")
	}
}
