package recordio

import (
	"bytes"
	"testing"

	"pgregory.net/rapid"
)

// modelChunks returns the record counts of the chunks the cut rule makes.
func modelChunks(recs [][]byte, maxChunkSize int) []int {
	if maxChunkSize < 0 {
		maxChunkSize = defaultMaxChunkSize
	}
	var chunks []int
	n, size := 0, 0
	for _, r := range recs {
		if n > 0 && size+len(r) > maxChunkSize {
			chunks = append(chunks, n)
			n, size = 0, 0
		}
		n++
		size += len(r)
	}
	if n > 0 {
		chunks = append(chunks, n)
	}
	return chunks
}

func genRecord() *rapid.Generator[[]byte] {
	return rapid.OneOf(
		rapid.SliceOfN(rapid.Byte(), 0, 300),
		rapid.Custom(func(t *rapid.T) []byte {
			return bytes.Repeat([]byte{rapid.Byte().Draw(t, "b")}, rapid.IntRange(0, 2000).Draw(t, "n"))
		}),
		rapid.Just([]byte{}),
	)
}

func TestPropertyRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		recs := rapid.SliceOfN(genRecord(), 0, 80).Draw(t, "records")
		comp := rapid.SampledFrom([]int{NoCompression, Snappy, Gzip, -1}).Draw(t, "compressor")
		maxChunk := rapid.OneOf(rapid.IntRange(0, 3000), rapid.Just(-1)).Draw(t, "maxChunkSize")

		var buf bytes.Buffer
		w := NewWriter(&buf, maxChunk, comp)
		for _, r := range recs {
			if n, err := w.Write(r); err != nil || n != len(r) {
				t.Fatalf("Write: %d, %v", n, err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		data := buf.Bytes()

		idx, err := LoadIndex(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		if idx.NumRecords != len(recs) {
			t.Fatalf("NumRecords = %d, want %d", idx.NumRecords, len(recs))
		}
		chunks := modelChunks(recs, maxChunk)
		if len(chunks) != idx.NumChunks() {
			t.Fatalf("%d chunks, want %d", idx.NumChunks(), len(chunks))
		}
		first := 0
		for c, n := range chunks {
			if idx.ChunkRecords[c] != n || int(idx.ChunkLens[c]) != n {
				t.Fatalf("chunk %d holds %d records, want %d", c, idx.ChunkRecords[c], n)
			}
			for r := range n {
				if gc, gr := idx.Locate(first + r); gc != c || gr != r {
					t.Fatalf("Locate(%d) = %d, %d; want %d, %d", first+r, gc, gr, c, r)
				}
			}
			got := readRange(t, data, idx.ChunkIndex(c), -1, -1)
			if !equalRecords(got, recs[first:first+n]) {
				t.Fatalf("chunk %d: records differ", c)
			}
			first += n
		}
		for _, i := range []int{-1, len(recs), len(recs) + 1} {
			if c, r := idx.Locate(i); c != -1 || r != -1 {
				t.Fatalf("Locate(%d) = %d, %d; want -1, -1", i, c, r)
			}
		}

		for range 3 {
			start := rapid.IntRange(-2, len(recs)+2).Draw(t, "start")
			n := rapid.IntRange(-2, len(recs)+3).Draw(t, "len")
			from := max(start, 0)
			to := len(recs)
			if n >= 0 && n < len(recs)-from {
				to = from + n
			}
			var want [][]byte
			if from < to {
				want = recs[from:to]
			}
			if got := readRange(t, data, idx, start, n); !equalRecords(got, want) {
				t.Fatalf("range (%d, %d): read %d records, want %d", start, n, len(got), len(want))
			}
		}
	})
}

func readRange(t *rapid.T, data []byte, idx *Index, start, n int) [][]byte {
	s := NewRangeScanner(bytes.NewReader(data), idx, start, n)
	var got [][]byte
	for s.Scan() {
		got = append(got, s.Record())
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}
