package recordio

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w bytes.Buffer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return c.w.Write(p)
}

// TestLoadIndexAcrossWindows: LoadIndex finds every chunk of a file whose
// chunks mix tiny ones (many headers to a window, some across its end)
// with ones larger than a window, at the offsets the writer put them.
func TestLoadIndexAcrossWindows(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	var out countingWriter
	w := NewWriter(&out, 1, NoCompression) // every record closes its chunk
	var offsets []int64
	for i := range 20_000 {
		size := 1 + rng.IntN(40)
		switch {
		case i%997 == 0:
			size = headerWindowSize + rng.IntN(3*headerWindowSize)
		case i%101 == 0:
			size = smallChunk + rng.IntN(2*smallChunk)
		}
		if _, err := w.Write(bytes.Repeat([]byte{byte(i)}, size)); err != nil {
			t.Fatal(err)
		}
		// The write closed the chunk before: this one starts here.
		offsets = append(offsets, out.n)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	idx, err := LoadIndex(bytes.NewReader(out.w.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if idx.NumChunks() != len(offsets) || idx.NumRecords != len(offsets) {
		t.Fatalf("%d chunks of %d records, want %d of one each", idx.NumChunks(), idx.NumRecords, len(offsets))
	}
	for i, off := range offsets {
		if idx.ChunkOffsets[i] != off {
			t.Fatalf("chunk %d at %d, want %d", i, idx.ChunkOffsets[i], off)
		}
	}
	// A file cut inside the last chunk's data is refused, naming that chunk.
	data := out.w.Bytes()
	cut := data[:offsets[len(offsets)-1]+headerSize+1]
	if _, err := LoadIndex(bytes.NewReader(cut)); err == nil {
		t.Fatal("a truncated file was indexed")
	} else if ce, ok := err.(*ChunkError); !ok || ce.Chunk != len(offsets)-1 {
		t.Fatalf("error %v, want a ChunkError of chunk %d", err, len(offsets)-1)
	}
}
