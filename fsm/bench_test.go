package fsm

import (
	"fmt"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/google/uuid"
)

// benchSizes are the dataset sizes, in tasks, of the apply benchmarks.
var benchSizes = []int{1_000, 100_000, 1_000_000}

// benchBatch is how many tasks a benchmark leases or finishes between two
// pauses of the timer.
const benchBatch = 1024

// benchChunks returns n chunks over 100 files, as RecordIO indexes give
// them: consecutive chunks of one file, then the next file.
func benchChunks(n int) []Chunk {
	out := make([]Chunk, n)
	perFile := max(1, n/100)
	for i := range out {
		out[i] = Chunk{Path: fmt.Sprintf("/mnt/data/imagenet/train-%05d-of-00100.recordio", i/perFile%100), Offset: int64(i%perFile) << 20, Records: 1000}
	}
	return out
}

// benchFSM applies a dataset of n tasks, one chunk each.
type benchFSM struct {
	f     *FSM
	index uint64
}

func newBenchFSM(b *testing.B, n int) *benchFSM {
	b.Helper()
	bf := &benchFSM{f: New()}
	bf.mustApply(b, &SetDataset{Params: DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Hour, FailureMax: 3}, Chunks: benchChunks(n)})
	return bf
}

func (bf *benchFSM) apply(entry []byte) *Result {
	bf.index++
	return bf.f.ApplyEntry(bf.index, entry)
}

func (bf *benchFSM) mustApply(b *testing.B, c Command) *Result {
	c.Hdr().Now = t0
	r := bf.apply(Encode(c))
	if err := r.Err(); err != nil {
		b.Fatalf("%v: %v", c.Type(), err)
	}
	return r
}

// lease leases up to k tasks of the current pass and returns the encoded
// TaskFinished of each.
func (bf *benchFSM) lease(b *testing.B, k int) [][]byte {
	get := Encode(&GetTask{Header: Header{Now: t0}, Pass: bf.f.Pass(DefaultJob)})
	var out [][]byte
	for range k {
		r := bf.apply(get)
		if r.Task == nil {
			break
		}
		out = append(out, Encode(&TaskFinished{Header: Header{Now: t0}, Meta: r.Task.Meta}))
	}
	if len(out) == 0 {
		b.Fatalf("nothing to lease")
	}
	return out
}

// BenchmarkGetTask times GetTask alone; the finishes that make room for
// the next batch, and the pass rollovers they cause, are not timed.
func BenchmarkGetTask(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			bf := newBenchFSM(b, n)
			leased := make([]TaskMeta, 0, benchBatch)
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; {
				get := Encode(&GetTask{Header: Header{Now: t0}, Pass: bf.f.Pass(DefaultJob)})
				for ; done < b.N && len(leased) < benchBatch; done++ {
					r := bf.apply(get)
					if r.Task == nil {
						break
					}
					leased = append(leased, r.Task.Meta)
				}
				b.StopTimer()
				for _, m := range leased {
					bf.apply(Encode(&TaskFinished{Header: Header{Now: t0}, Meta: m}))
				}
				leased = leased[:0]
				b.StartTimer()
			}
		})
	}
}

// BenchmarkTaskFinished times TaskFinished, including the pass rollover
// that the last finish of each pass causes, amortised over the pass.
func BenchmarkTaskFinished(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			bf := newBenchFSM(b, n)
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; {
				b.StopTimer()
				finishes := bf.lease(b, min(benchBatch, b.N-done))
				b.StartTimer()
				for _, e := range finishes {
					if r := bf.apply(e); r.Code != CodeOK || r.Ignored {
						b.Fatalf("finish: %+v", r)
					}
				}
				done += len(finishes)
			}
		})
	}
}

// BenchmarkMemoryPerTask reports the heap that a dataset of a million
// one-chunk tasks over 100 files holds, per task.
func BenchmarkMemoryPerTask(b *testing.B) {
	const n = 1_000_000
	entry := Encode(&SetDataset{Header: Header{Now: t0}, Params: defaultParams, Chunks: benchChunks(n)})
	var total uint64
	for range b.N {
		b.StopTimer()
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		b.StartTimer()
		f := New()
		f.ApplyEntry(1, entry)
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(f)
		total += after.HeapAlloc - before.HeapAlloc
		b.StartTimer()
	}
	b.ReportMetric(float64(total)/float64(b.N)/n, "B/task")
}

// snapshotState returns an FSM with a million tasks spread over the
// queues: a tenth pending, a fifth done, some failed once.
func snapshotState(b *testing.B) *FSM {
	const n = 1_000_000
	bf := newBenchFSM(b, n)
	for i, e := range bf.lease(b, 300_000) {
		switch {
		case i%3 != 0:
			bf.apply(e)
		case i%9 == 0:
			m, _ := Decode(e)
			bf.apply(Encode(&TaskFailed{Header: Header{Now: t0}, Meta: m.(*TaskFinished).Meta}))
		}
	}
	return bf.f
}

// BenchmarkSnapshot reports, at a million tasks, the snapshot size and the
// time of Snapshot (the copy taken under the lock), Snapshot.WriteTo and
// Restore.
func BenchmarkSnapshot(b *testing.B) {
	f := snapshotState(b)
	data := f.SnapshotBytes()
	b.Run("Snapshot", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := f.Snapshot(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("WriteTo", func(b *testing.B) {
		sn, _ := f.Snapshot()
		b.SetBytes(int64(len(data)))
		b.ReportMetric(float64(len(data)), "snapshot-bytes")
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if _, err := sn.WriteTo(io.Discard); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Restore", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportMetric(float64(len(data)), "snapshot-bytes")
		b.ReportAllocs()
		for range b.N {
			if err := New().Restore(readCloser(data)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkGetTaskAfterGrace times GetTask while 100,000 leases moved by a
// LeaderGrace longer than the task timeout are pending.
func BenchmarkGetTaskAfterGrace(b *testing.B) {
	const pending = 100_000
	bf := &benchFSM{f: New()}
	bf.mustApply(b, &SetDataset{Params: DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Second}, Chunks: benchChunks(pending + max(b.N, 1000))})
	bf.lease(b, pending)
	bf.mustApply(b, &LeaderGrace{Grace: time.Hour})
	get := Encode(&GetTask{Header: Header{Now: t0}})
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if r := bf.apply(get); r.Task == nil {
			b.Fatalf("GetTask: %v", r.Err())
		}
	}
}

// BenchmarkDedupFullTable fills the de-duplication table of a Protocol2
// state to DedupMaxActiveClients clients of DedupPerClient outcomes each,
// the most it can hold, and reports the heap and the snapshot bytes it
// takes per client, and the time of Snapshot (the copy under the lock).
func BenchmarkDedupFullTable(b *testing.B) {
	var heap, snap uint64
	var copied time.Duration
	for range b.N {
		b.StopTimer()
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		b.StartTimer()
		f := New()
		f.ApplyEntry(1, Encode(&SetProtocol{Header: Header{Now: t0}, Level: Protocol2}))
		index := uint64(1)
		for n := range DedupMaxActiveClients {
			id := uuid.UUID{0: 0xee, 12: byte(n >> 24), 13: byte(n >> 16), 14: byte(n >> 8), 15: byte(n)}
			for seq := range uint64(DedupPerClient) {
				index++
				f.ApplyEntry(index, Encode(&Tick{Header: Header{Now: t0, Request: RequestID{Client: id, Seq: seq + 1}}}))
			}
		}
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		heap += after.HeapAlloc - before.HeapAlloc
		if r := f.ApplyEntry(index+1, Encode(&Tick{Header: Header{Now: t0, Request: RequestID{Client: uuid.New(), Seq: 1}}})); r.Code != CodeTooManyClients {
			b.Fatalf("a new client at the bound: %+v, want too_many_clients", r)
		}
		start := time.Now()
		if _, err := f.Snapshot(); err != nil {
			b.Fatal(err)
		}
		copied += time.Since(start)
		snap += uint64(len(f.SnapshotBytes()))
		b.StartTimer()
	}
	n := float64(b.N) * DedupMaxActiveClients
	b.ReportMetric(float64(heap)/n, "heap-B/client")
	b.ReportMetric(float64(snap)/n, "snapshot-B/client")
	b.ReportMetric(float64(copied.Milliseconds())/float64(b.N), "Snapshot-ms")
}

// cursorState returns, at Protocol7, a million one-chunk tasks of 1000
// records with the first half of the pass finished and inFlight more
// leased, each reported a third consumed; and the progress of those.
func cursorState(b *testing.B, inFlight int) (*benchFSM, []TaskProgress) {
	const n = 1_000_000
	bf := newBenchFSM(b, n)
	bf.mustApply(b, &SetProtocol{Level: Protocol7})
	for _, e := range bf.lease(b, n/2) {
		if r := bf.apply(e); r.Err() != nil {
			b.Fatal(r.Err())
		}
	}
	var ps []TaskProgress
	get := Encode(&GetTask{Header: Header{Now: t0}})
	for range inFlight {
		r := bf.apply(get)
		if r.Task == nil {
			b.Fatalf("GetTask: %v", r.Err())
		}
		ps = append(ps, TaskProgress{Meta: r.Task.Meta, Consumed: 333})
	}
	bf.mustApply(b, &ReportProgress{Progress: ps})
	return bf, ps
}

// BenchmarkCommitCursor times the apply of CommitCursor at a million
// tasks, half of the pass finished and 64 in flight with progress
// reported: without progress in the commit (the holders reported it), and
// with the 64 tasks' progress in it. It reports what a cursor adds to the
// state's size estimate (CursorInfo.Bytes), per cursor and per task, and
// to the snapshot once the job keeps its MaxJobCursors cursors.
func BenchmarkCommitCursor(b *testing.B) {
	const inFlight = 64
	bf, ps := cursorState(b, inFlight)
	before := len(bf.f.SnapshotBytes())
	for _, progress := range []bool{false, true} {
		b.Run(map[bool]string{false: "Reported", true: "WithProgress"}[progress], func(b *testing.B) {
			var bytes int64
			commit := func(i int) {
				c := &CommitCursor{Header: Header{Now: t0}, Step: int64(i)}
				if progress {
					c.Progress = ps
				}
				r := bf.apply(Encode(c))
				if r.Err() != nil || r.Cursor == nil || r.Cursor.InFlight != inFlight {
					b.Fatalf("CommitCursor: %+v", r)
				}
				bytes = r.Cursor.Bytes
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				commit(i)
			}
			b.StopTimer()
			for i := b.N; i < MaxJobCursors; i++ {
				commit(i)
			}
			b.ReportMetric(float64(bytes), "bytes/cursor")
			b.ReportMetric(float64(bytes)*8/1_000_000, "bits/task")
			b.ReportMetric(float64(len(bf.f.SnapshotBytes())-before)/MaxJobCursors, "snapshot-B/cursor")
		})
	}
}

// BenchmarkSetDatasetUpload sets a dataset of one-chunk tasks as a
// proposer does: split into parts of 256 KiB entries, each encoded, then
// applied with the commit. One op is the whole upload; figures per chunk
// are ns/op divided by the size.
func BenchmarkSetDatasetUpload(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		chunks := benchChunks(n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				bf := &benchFSM{f: New()}
				cmds := DatasetCommands(DefaultJob, RequestID{}, DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Hour}, nil, chunks, "upload", 256<<10)
				for _, c := range cmds {
					bf.mustApply(b, c)
				}
			}
		})
	}
}
