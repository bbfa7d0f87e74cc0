package fsm

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// partSize is the encoded size of the largest DatasetPart entry of chunks.
func partSize(chunks []Chunk) int { return len(Encode(largestPart(chunks))) }

// checkSplit checks SplitChunks' contract for one input: the runs
// concatenate to chunks; each run's largest DatasetPart entry, and its
// largest SetDataset entry, fits maxEntryBytes unless the run is one
// chunk; and no run could take the chunk after it.
func checkSplit(t rapid.TB, chunks []Chunk, maxEntryBytes int) [][]Chunk {
	t.Helper()
	runs := SplitChunks(chunks, maxEntryBytes)
	if len(chunks) == 0 {
		if runs != nil {
			t.Fatalf("%d runs of no chunks", len(runs))
		}
		return runs
	}
	var all []Chunk
	for i, run := range runs {
		if len(run) == 0 {
			t.Fatalf("run %d is empty", i)
		}
		all = append(all, run...)
		size := partSize(run)
		if size > maxEntryBytes && len(run) > 1 {
			t.Fatalf("run %d of %d chunks encodes to %d bytes, over %d", i, len(run), size, maxEntryBytes)
		}
		if size <= maxEntryBytes {
			set := Encode(&SetDataset{Header: largestPart(nil).Header, Params: largestParams, Chunks: run})
			if len(set) > maxEntryBytes {
				t.Fatalf("run %d fits a DatasetPart but not a SetDataset: %d bytes", i, len(set))
			}
		}
		if i+1 < len(runs) {
			fuller := append(slices.Clip(run), runs[i+1][0])
			if grown := partSize(fuller); grown <= maxEntryBytes {
				t.Fatalf("run %d (%d chunks, %d bytes) could take the next chunk: %d bytes, limit %d",
					i, len(run), size, grown, maxEntryBytes)
			}
		}
	}
	if !slices.Equal(all, chunks) {
		t.Fatalf("the runs hold %d chunks, not the %d given in order", len(all), len(chunks))
	}
	return runs
}

// largestParams are the dataset settings with the longest encoding.
var largestParams = DatasetParams{ChunksPerTask: MaxChunks, TaskTimeout: MaxTaskTimeout, FailureMax: MaxFailureMax, Strict: true}

func TestSplitChunks(t *testing.T) {
	small := testChunks(10)
	oneRun := partSize(small)
	long := Chunk{Path: "/" + strings.Repeat("x", 3000), Offset: 1, Records: 1}
	many := make([]Chunk, 20000)
	for i := range many {
		// Past 128 paths and 128 and 16384 chunks, the counts take
		// more bytes; offsets and records take from one to ten.
		many[i] = Chunk{Path: fmt.Sprint("/data/", i%300), Offset: int64(i) << (i % 50), Records: uint32(i) << (i % 25)}
	}
	negative := []Chunk{{Path: "p", Offset: math.MinInt64}, {Path: "p", Offset: math.MaxInt64, Records: math.MaxUint32}}
	cases := []struct {
		name   string
		chunks []Chunk
		limit  int
		runs   []int // lengths, when the case fixes them
	}{
		{"no chunks", nil, 1 << 10, nil},
		{"all fit", small, oneRun, []int{10}},
		{"one byte short", small, oneRun - 1, []int{9, 1}},
		{"limit below the header", small, 100, []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
		{"no limit at all", small[:3], 0, []int{1, 1, 1}},
		{"oversized chunk alone", []Chunk{small[0], small[1], long, small[2]}, 2048, []int{2, 1, 1}},
		{"oversized first and last", []Chunk{long, small[0], long}, 2048, []int{1, 1, 1}},
		{"wide varints", negative, 1 << 10, []int{2}},
		{"many paths and chunks, 1 KiB", many, 1 << 10, nil},
		{"many paths and chunks, 64 KiB", many, 64 << 10, nil},
		{"many paths and chunks, 256 KiB", many, 256 << 10, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			runs := checkSplit(t, tc.chunks, tc.limit)
			var lens []int
			for _, r := range runs {
				lens = append(lens, len(r))
			}
			if tc.runs != nil && !slices.Equal(lens, tc.runs) {
				t.Fatalf("run lengths %v, want %v", lens, tc.runs)
			}
		})
	}
}

// TestSplitChunksMeasure checks the running size SplitChunks keeps
// against the encoder, after every chunk of random inputs.
func TestSplitChunksMeasure(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		chunks := splitChunksGen().Draw(t, "chunks")
		z := newPartSizer()
		start := 0
		for i, c := range chunks {
			if i > start && rapid.IntRange(0, 9).Draw(t, "newRun") == 0 {
				z.newRun()
				start = i
			}
			size, cost := z.measure(c)
			if want := partSize(chunks[start : i+1]); size != want {
				t.Fatalf("chunk %d of a run from %d: measured %d bytes, Encode writes %d", i, start, size, want)
			}
			z.add(c, cost)
		}
	})
}

// TestPropertySplitChunks checks SplitChunks' contract on random chunk
// lists and limits.
func TestPropertySplitChunks(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		chunks := splitChunksGen().Draw(t, "chunks")
		limit := rapid.OneOf(rapid.IntRange(-1, 700), rapid.IntRange(700, 4096)).Draw(t, "limit")
		checkSplit(t, chunks, limit)
	})
}

// splitChunksGen draws chunk lists whose paths repeat, in runs and not,
// with lengths whose prefixes take one or two bytes, and whose offsets and
// record counts span every varint length.
func splitChunksGen() *rapid.Generator[[]Chunk] {
	path := rapid.Custom(func(t *rapid.T) string {
		n := rapid.SampledFrom([]int{1, 5, 40, 127, 128, 300}).Draw(t, "pathLen")
		return strings.Repeat(string(rune('a'+rapid.IntRange(0, 5).Draw(t, "pathChar"))), n)
	})
	chunk := rapid.Custom(func(t *rapid.T) Chunk {
		return Chunk{
			Path:    path.Draw(t, "path"),
			Offset:  rapid.Int64().Draw(t, "offset") >> rapid.IntRange(0, 63).Draw(t, "offsetShift"),
			Records: rapid.Uint32().Draw(t, "records") >> rapid.IntRange(0, 31).Draw(t, "recordsShift"),
		}
	})
	return rapid.Custom(func(t *rapid.T) []Chunk {
		var out []Chunk
		for range rapid.IntRange(0, 40).Draw(t, "groups") {
			c := chunk.Draw(t, "chunk")
			for range rapid.IntRange(1, 20).Draw(t, "repeat") {
				out = append(out, c)
				c.Offset += int64(rapid.IntRange(0, 1<<20).Draw(t, "step"))
			}
		}
		return out
	})
}

// splitBenchChunks returns n chunks over files of files chunks each, their
// paths shared strings, as a RecordIO index gives them.
func splitBenchChunks(n, perFile int) []Chunk {
	paths := make([]string, (n+perFile-1)/perFile)
	for i := range paths {
		paths[i] = fmt.Sprintf("/mnt/data/imagenet/train-%07d.recordio", i)
	}
	out := make([]Chunk, n)
	for i := range out {
		out[i] = Chunk{Path: paths[i/perFile], Offset: int64(i%perFile) << 20, Records: 1000}
	}
	return out
}

// BenchmarkSplitChunks reports the time per chunk of cutting a dataset
// into 256 KiB entries: flat from ten thousand to ten million chunks,
// with one file per 1000 chunks and with a file per chunk.
func BenchmarkSplitChunks(b *testing.B) {
	for _, bc := range []struct {
		n, perFile int
	}{{10_000, 1000}, {1_000_000, 1000}, {10_000_000, 1000}, {1_000_000, 1}} {
		b.Run(fmt.Sprintf("chunks=%d/perFile=%d", bc.n, bc.perFile), func(b *testing.B) {
			chunks := splitBenchChunks(bc.n, bc.perFile)
			b.ReportAllocs()
			b.ResetTimer()
			var runs int
			for range b.N {
				runs = len(SplitChunks(chunks, 256<<10))
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(bc.n), "ns/chunk")
			b.ReportMetric(float64(runs), "entries")
		})
	}
}
