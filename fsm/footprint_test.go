package fsm

import (
	"io"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestFootprint measures, for RM_FOOTPRINT_TASKS one-chunk tasks of one
// file (the benchmark suite's dataset), the heap a dataset holds after
// it was set through the DatasetPart entries a cluster logs, the time of
// their applies, and the time and size of a snapshot. It is skipped
// unless the variable is set; it measures and asserts no timing:
//
//	RM_FOOTPRINT_TASKS=10000000 go test -run TestFootprint -v ./fsm/ -memprofile mem.out
func TestFootprint(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("RM_FOOTPRINT_TASKS"))
	if n <= 0 {
		t.Skip("set RM_FOOTPRINT_TASKS to the number of tasks")
	}
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	base := heap()
	chunks := make([]Chunk, n)
	for i := range chunks {
		chunks[i] = Chunk{Path: "/data/tasks.recordio", Offset: int64(i) * 24, Records: 1}
	}
	cmds := DatasetCommands("", RequestID{Client: uuid.New(), Seq: 1},
		DatasetParams{ChunksPerTask: 1, TaskTimeout: time.Hour, FailureMax: 3}, nil, chunks, "upload", 256<<10)
	entries := make([][]byte, len(cmds))
	var entryBytes int
	for i, c := range cmds {
		c.Hdr().Now = t0
		entries[i] = Encode(c)
		entryBytes += len(entries[i])
	}
	chunks, cmds = nil, nil
	withEntries := heap()
	t.Logf("%d tasks: %d entries of %d bytes together (%.1f B/chunk)", n, len(entries), entryBytes, float64(entryBytes)/float64(n))

	f := New()
	var peak uint64
	start := time.Now()
	for i, e := range entries {
		if r := f.ApplyEntry(uint64(i+1), e); r.Err() != nil {
			t.Fatalf("entry %d: %v", i, r.Err())
		}
		if i%(len(entries)/8+1) == 0 {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
		}
	}
	applied := time.Since(start)
	entries = nil
	held := heap() - base
	t.Logf("apply: %v (%.0f ns/task); heap held %.1f MB (%.1f B/task); in use while applying, at most %.1f MB (entries %.1f MB)",
		applied, float64(applied.Nanoseconds())/float64(n), float64(held)/1e6, float64(held)/float64(n),
		float64(peak)/1e6, float64(withEntries-base)/1e6)

	// Half of the pass leased, as the suite's footprint part leaves it.
	get := Encode(&GetTask{Header: Header{Now: t0}})
	start = time.Now()
	for i := range n / 2 {
		if r := f.ApplyEntry(uint64(1_000_000+i), get); r.Task == nil {
			t.Fatalf("GetTask %d: %v", i, r.Err())
		}
	}
	leased := time.Since(start)
	t.Logf("leased %d: %v (%.0f ns/GetTask); heap held %.1f MB", n/2, leased, float64(leased.Nanoseconds())/float64(n/2), float64(heap()-base)/1e6)

	start = time.Now()
	sn, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	copied := time.Since(start)
	withCopy := heap() - base
	start = time.Now()
	var size countWriter
	if _, err := sn.WriteTo(&size); err != nil {
		t.Fatal(err)
	}
	written := time.Since(start)
	t.Logf("snapshot: copy %v (heap with the copy %.1f MB), write %v, %.1f MB (%.1f B/task)",
		copied, float64(withCopy)/1e6, written, float64(size)/1e6, float64(size)/float64(n))
	sn = nil
	data := f.SnapshotBytes()
	f = nil
	heap()
	start = time.Now()
	g := New()
	if err := g.Restore(readCloser(data)); err != nil {
		t.Fatal(err)
	}
	t.Logf("restore: %v", time.Since(start))
	runtime.KeepAlive(g)
}

type countWriter int64

func (w *countWriter) Write(p []byte) (int, error) { *w += countWriter(len(p)); return len(p), nil }

var _ io.Writer = (*countWriter)(nil)
