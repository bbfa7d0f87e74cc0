package recordio

import (
	"fmt"
	"io"
	"os"
)

// Index lists the chunks of a RecordIO file: where each starts and how many
// records it holds. LoadIndex builds it from the chunk headers; ChunkIndex
// and NewChunkIndex build one-chunk indexes that describe a task's share of
// a file.
//
// The fields are exported so that an Index can be encoded (JSON, gob) and
// sent along with a task, as the PaddlePaddle master did.
type Index struct {
	// ChunkOffsets holds the byte offset of each chunk's header.
	ChunkOffsets []int64
	// ChunkLens holds the number of records of each chunk, as in the
	// original package: despite its name it counts records, not bytes, and
	// equals ChunkRecords.
	ChunkLens []uint32
	// NumRecords is the total number of records.
	NumRecords int
	// ChunkRecords holds the number of records of each chunk.
	ChunkRecords []int
}

// NewChunkIndex returns the Index of a single chunk whose header is at offset
// and which holds numRecords records. With NewRangeScanner or ReadChunk it
// reads one chunk described by (path, offset, records).
func NewChunkIndex(offset int64, numRecords int) *Index {
	return &Index{
		ChunkOffsets: []int64{offset},
		ChunkLens:    []uint32{uint32(numRecords)},
		NumRecords:   numRecords,
		ChunkRecords: []int{numRecords},
	}
}

// LoadIndex reads the chunk headers of the RecordIO data in r, from its
// start to its end, and returns its Index. It checks each header's magic
// number, compressor and sizes against the real size of r, so a truncated
// or damaged file is an error; it does not read or verify chunk data.
func LoadIndex(r io.ReadSeeker) (*Index, error) {
	return loadIndex(r, "")
}

// LoadIndexFile is LoadIndex on the file at path; errors name the path.
func LoadIndexFile(path string) (*Index, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("recordio: %w", err)
	}
	defer f.Close()
	return loadIndex(f, path)
}

func loadIndex(r io.ReadSeeker, path string) (*Index, error) {
	size, err := r.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, fmt.Errorf("recordio: %s: %w", pathOrInput(path), err)
	}
	idx := &Index{}
	var buf [headerSize]byte
	win := headerWindow{r: r}
	var gap int64 // the bytes of the chunk before, which the window skips
	for off := int64(0); off < size; {
		fail := func(err error) (*Index, error) {
			return nil, &ChunkError{Path: path, Chunk: len(idx.ChunkOffsets), Offset: off, Err: err}
		}
		if size-off < headerSize {
			return fail(corruptf("truncated: %d bytes left for a %d-byte chunk header", size-off, headerSize))
		}
		if err := win.read(buf[:], off, size, gap); err != nil {
			return fail(err)
		}
		h, err := decodeHeader(&buf, size-off-headerSize)
		if err != nil {
			return fail(err)
		}
		idx.ChunkOffsets = append(idx.ChunkOffsets, off)
		idx.ChunkLens = append(idx.ChunkLens, h.numRecords)
		idx.ChunkRecords = append(idx.ChunkRecords, int(h.numRecords))
		idx.NumRecords += int(h.numRecords)
		off += headerSize + int64(h.compressedSize)
		gap = int64(h.compressedSize)
	}
	return idx, nil
}

// headerWindowSize is how much of a file LoadIndex reads at once while
// its chunks are small (smallChunk bytes or less): their headers come from
// one read, where a seek and a read each would cost two system calls a
// chunk. After a larger chunk it reads the next header alone, so that a
// file of large chunks is not read through.
const (
	headerWindowSize = 64 << 10
	smallChunk       = 4 << 10
)

// headerWindow reads the chunk headers of a file, through a window of it
// while the chunks are small.
type headerWindow struct {
	r    io.ReadSeeker
	buf  []byte
	base int64 // the file offset of buf[0]
}

// read fills p with the bytes at off, of a file of size bytes: from the
// window when they are in it, else from a new window at off when the
// chunk before was small (a chunk of gap bytes), else alone. A window that
// cannot be read (a short file, a bad sector in a chunk's data) gives way
// to reading p alone, so that an error names the header it is in.
func (w *headerWindow) read(p []byte, off, size, gap int64) error {
	if off >= w.base && off+int64(len(p)) <= w.base+int64(len(w.buf)) {
		copy(p, w.buf[off-w.base:])
		return nil
	}
	if gap <= smallChunk {
		n := int(min(headerWindowSize, size-off))
		if cap(w.buf) < n {
			w.buf = make([]byte, n)
		}
		w.buf = w.buf[:n]
		if _, err := w.r.Seek(off, io.SeekStart); err == nil {
			if _, err := io.ReadFull(w.r, w.buf); err == nil {
				w.base = off
				copy(p, w.buf)
				return nil
			}
		}
		w.buf = w.buf[:0]
	}
	if _, err := w.r.Seek(off, io.SeekStart); err != nil {
		return err
	}
	if _, err := io.ReadFull(w.r, p); err != nil {
		return readErr(err)
	}
	return nil
}

func pathOrInput(path string) string {
	if path == "" {
		return "input"
	}
	return path
}

// NumChunks returns the number of chunks.
func (x *Index) NumChunks() int {
	if x == nil {
		return 0
	}
	return len(x.ChunkOffsets)
}

// ChunkIndex returns the one-chunk Index of the i-th chunk, or nil if there
// is no such chunk.
func (x *Index) ChunkIndex(i int) *Index {
	if i < 0 || i >= x.NumChunks() {
		return nil
	}
	return NewChunkIndex(x.ChunkOffsets[i], x.chunkRecords(i))
}

// Locate returns the chunk that holds the recordIndex-th record and the
// record's position within that chunk, or (-1, -1) if recordIndex is out of
// range.
func (x *Index) Locate(recordIndex int) (chunk, offsetInChunk int) {
	if recordIndex < 0 {
		return -1, -1
	}
	for i := range x.NumChunks() {
		n := x.chunkRecords(i)
		if recordIndex < n {
			return i, recordIndex
		}
		recordIndex -= n
	}
	return -1, -1
}

// chunkRecords returns the record count of chunk i from ChunkRecords, or
// from ChunkLens for an Index built by code that only filled those, or -1.
func (x *Index) chunkRecords(i int) int {
	switch {
	case i < len(x.ChunkRecords):
		return x.ChunkRecords[i]
	case i < len(x.ChunkLens):
		return int(x.ChunkLens[i])
	}
	return -1
}

// check reports whether the Index is consistent and returns its total number
// of records.
func (x *Index) check() (int, error) {
	if x == nil {
		return 0, fmt.Errorf("recordio: nil Index")
	}
	n := len(x.ChunkOffsets)
	if len(x.ChunkRecords) != n && len(x.ChunkLens) != n {
		return 0, fmt.Errorf("recordio: invalid Index: %d chunk offsets, %d chunk record counts",
			n, max(len(x.ChunkRecords), len(x.ChunkLens)))
	}
	total := 0
	for i := range n {
		c := x.chunkRecords(i)
		if c < 0 || x.ChunkOffsets[i] < 0 {
			return 0, fmt.Errorf("recordio: invalid Index: chunk %d has offset %d and %d records",
				i, x.ChunkOffsets[i], c)
		}
		total += c
	}
	if total != x.NumRecords {
		return 0, fmt.Errorf("recordio: invalid Index: NumRecords is %d, its chunks hold %d records",
			x.NumRecords, total)
	}
	return total, nil
}
