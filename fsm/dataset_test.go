package fsm

import (
	"fmt"
	"slices"
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
			if st := h.f.Stats(DefaultJob); st.Tasks != before.Tasks || st.Chunks != 3 || st.Params != defaultParams || st.Pending != 1 {
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
			if st := h.f.Stats(DefaultJob); st.Uploads != 0 || st.Tasks != 6 || st.Params != defaultParams {
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
