package recordio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
)

// chunkReader reads and verifies chunks. It keeps its buffers and
// decompressors between chunks, so reading costs few allocations per chunk
// and almost none per record.
type chunkReader struct {
	hdr    [headerSize]byte
	comp   []byte // compressed chunk data, reused
	src    bytes.Reader
	snappy *snappy.Reader
	gzip   *gzip.Reader
	recs   [][]byte // records of the last chunk, reused
	limit  int      // maximum decompressed chunk data size, 0 for maxChunkData
	ratio  float64  // decompressed/compressed size of the last chunk
}

// chunk is one decoded chunk. records are sub-slices of a buffer that
// belongs to this chunk alone, so they stay valid after later reads.
type chunk struct {
	header
	dataSize int // decompressed chunk data size
	records  [][]byte
}

// read reads the chunk whose header is at off in r. size is the file size.
// If want >= 0 the chunk must hold exactly want records. The errors are
// not yet wrapped in a *ChunkError.
func (d *chunkReader) read(r io.ReadSeeker, off, size int64, want int) (chunk, error) {
	left := size - off
	if left < headerSize {
		if left <= 0 {
			return chunk{}, corruptf("truncated: chunk starts at or beyond the end of the file (%d bytes)", size)
		}
		return chunk{}, corruptf("truncated: %d bytes left for a %d-byte chunk header", left, headerSize)
	}
	if _, err := r.Seek(off, io.SeekStart); err != nil {
		return chunk{}, err
	}
	if _, err := io.ReadFull(r, d.hdr[:]); err != nil {
		return chunk{}, readErr(err)
	}
	h, err := decodeHeader(&d.hdr, left-headerSize)
	if err != nil {
		return chunk{}, err
	}
	if want >= 0 && int(h.numRecords) != want {
		return chunk{}, corruptf("chunk holds %d records, the index says %d", h.numRecords, want)
	}

	n := int(h.compressedSize)
	var stored []byte
	if h.compressor == NoCompression {
		stored = make([]byte, n) // the records will point into it
	} else {
		if cap(d.comp) < n {
			d.comp = make([]byte, n)
		}
		stored = d.comp[:n]
	}
	if _, err := io.ReadFull(r, stored); err != nil {
		return chunk{}, readErr(err)
	}
	if sum := crc32.ChecksumIEEE(stored); sum != h.checksum {
		return chunk{}, corruptf("checksum mismatch: header says %#08x, data has %#08x", h.checksum, sum)
	}

	data := stored
	if h.compressor != NoCompression {
		if data, err = d.decompress(h.compressor, stored); err != nil {
			return chunk{}, err
		}
	}
	recs, err := d.split(data, int(h.numRecords))
	if err != nil {
		return chunk{}, err
	}
	return chunk{header: h, dataSize: len(data), records: recs}, nil
}

// readErr turns a short read of a region the file size promised into
// corruption: the file shrank, or the ReadSeeker lied about its size.
func readErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return corruptf("truncated: unexpected end of file")
	}
	return err
}

// decompress returns the decompressed form of src in a new buffer, at most
// d.limit bytes long.
func (d *chunkReader) decompress(compressor uint32, src []byte) ([]byte, error) {
	name := CompressorName(int(compressor))
	d.src.Reset(src)
	var dec io.Reader
	switch compressor {
	case Snappy:
		if d.snappy == nil {
			d.snappy = snappy.NewReader(&d.src)
		} else {
			d.snappy.Reset(&d.src)
		}
		dec = d.snappy
	case Gzip:
		if d.gzip == nil {
			d.gzip = new(gzip.Reader)
		}
		if err := d.gzip.Reset(&d.src); err != nil {
			return nil, corruptf("%s: %w", name, err)
		}
		dec = d.gzip
	}
	limit := d.limit
	if limit <= 0 {
		limit = maxChunkData
	}
	// Size the buffer by the last chunk's compression ratio, within bounds
	// that a hostile chunk cannot abuse; it grows as data really arrives.
	ratio := d.ratio
	if ratio <= 0 {
		ratio = 3
	}
	guess := int(float64(len(src))*min(ratio, 16)*1.05) + 512
	out := appendBuffer{b: make([]byte, 0, min(guess, initialBufferLimit, limit)), limit: limit}
	if _, err := io.Copy(&out, dec); err != nil {
		if errors.Is(err, errTooLarge) {
			return nil, corruptf("%s: decompressed chunk data exceeds %d bytes", name, limit)
		}
		return nil, corruptf("%s: %w", name, err)
	}
	if len(src) > 0 {
		d.ratio = float64(len(out.b)) / float64(len(src))
	}
	return out.b, nil
}

// initialBufferLimit caps the first allocation for decompressed data.
const initialBufferLimit = 64 << 20

var errTooLarge = errors.New("too large")

// appendBuffer collects decompressed data, up to limit bytes.
type appendBuffer struct {
	b     []byte
	limit int
}

// Write appends p, or fails with errTooLarge past the limit.
func (a *appendBuffer) Write(p []byte) (int, error) {
	if len(p) > a.limit-len(a.b) {
		return 0, errTooLarge
	}
	a.b = append(a.b, p...)
	return len(p), nil
}

// ReadFrom reads r to its end straight into the buffer.
func (a *appendBuffer) ReadFrom(r io.Reader) (int64, error) {
	var total int64
	for {
		if len(a.b) == cap(a.b) {
			if len(a.b) >= a.limit {
				// Full: only the end of the stream may follow.
				var one [1]byte
				n, err := io.ReadFull(r, one[:])
				if n > 0 {
					return total, errTooLarge
				}
				if err == io.EOF {
					return total, nil
				}
				return total, err
			}
			grown := append(a.b, 0)[:len(a.b)]
			a.b = grown[:len(grown):min(cap(grown), a.limit)]
		}
		n, err := r.Read(a.b[len(a.b):cap(a.b)])
		a.b = a.b[:len(a.b)+n]
		total += int64(n)
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// split cuts decompressed chunk data into exactly n records.
func (d *chunkReader) split(data []byte, n int) ([][]byte, error) {
	recs := d.recs[:0]
	if cap(recs) < n && n <= len(data)/4 {
		recs = make([][]byte, 0, n)
	}
	p := 0
	for i := 0; i < n; i++ {
		if len(data)-p < 4 {
			return nil, corruptf("record %d of %d: length prefix runs past the end of the chunk data (%d bytes)", i, n, len(data))
		}
		l := binary.LittleEndian.Uint32(data[p:])
		p += 4
		if int64(l) > int64(len(data)-p) {
			return nil, corruptf("record %d of %d: length %d runs past the end of the chunk data (%d bytes left)", i, n, l, len(data)-p)
		}
		end := p + int(l)
		recs = append(recs, data[p:end:end])
		p = end
	}
	if p != len(data) {
		return nil, corruptf("%d bytes of chunk data follow its %d records", len(data)-p, n)
	}
	d.recs = recs
	return recs, nil
}
