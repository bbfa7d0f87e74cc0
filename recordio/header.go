package recordio

import (
	"encoding/binary"
	"fmt"
)

// Compressors, as stored in a chunk header.
const (
	// NoCompression stores chunk data as is.
	NoCompression = 0
	// Snappy compresses chunk data with the snappy framing (stream) format.
	// It is the default.
	Snappy = 1
	// Gzip compresses chunk data with gzip.
	Gzip = 2
)

// HeaderSize is the size of a chunk header in bytes.
const HeaderSize = 20

// magicNumber starts every chunk header.
const magicNumber uint32 = 0x01020304

const (
	headerSize = HeaderSize

	// defaultMaxChunkSize is the original's default maximum chunk size.
	defaultMaxChunkSize = 32 * 1024 * 1024
	defaultCompressor   = Snappy

	// maxChunkData bounds the decompressed size of one chunk's data.
	maxChunkData = 1 << 30
)

// CompressorName returns the name of a compressor: "none", "snappy" or
// "gzip", or "unknown(N)".
func CompressorName(c int) string {
	switch c {
	case NoCompression:
		return "none"
	case Snappy:
		return "snappy"
	case Gzip:
		return "gzip"
	}
	return fmt.Sprintf("unknown(%d)", c)
}

// ParseCompressor returns the compressor named "none", "snappy" or "gzip".
func ParseCompressor(name string) (int, error) {
	switch name {
	case "none":
		return NoCompression, nil
	case "snappy":
		return Snappy, nil
	case "gzip":
		return Gzip, nil
	}
	return 0, fmt.Errorf("recordio: unknown compressor %q (want none, snappy or gzip)", name)
}

// header is a chunk header without its magic number.
type header struct {
	checksum       uint32
	compressor     uint32
	compressedSize uint32
	numRecords     uint32
}

func (h *header) encode(b *[headerSize]byte) {
	binary.LittleEndian.PutUint32(b[0:4], magicNumber)
	binary.LittleEndian.PutUint32(b[4:8], h.checksum)
	binary.LittleEndian.PutUint32(b[8:12], h.compressor)
	binary.LittleEndian.PutUint32(b[12:16], h.compressedSize)
	binary.LittleEndian.PutUint32(b[16:20], h.numRecords)
}

// decodeHeader parses and checks a chunk header. remaining is the number of
// file bytes after the header.
func decodeHeader(b *[headerSize]byte, remaining int64) (header, error) {
	if m := binary.LittleEndian.Uint32(b[0:4]); m != magicNumber {
		return header{}, corruptf("bad magic number %#08x, want %#08x", m, magicNumber)
	}
	h := header{
		checksum:       binary.LittleEndian.Uint32(b[4:8]),
		compressor:     binary.LittleEndian.Uint32(b[8:12]),
		compressedSize: binary.LittleEndian.Uint32(b[12:16]),
		numRecords:     binary.LittleEndian.Uint32(b[16:20]),
	}
	if h.compressor > Gzip {
		return header{}, corruptf("unknown compressor %d", h.compressor)
	}
	if int64(h.compressedSize) > remaining {
		return header{}, corruptf("truncated: header claims %d bytes of chunk data, only %d remain in the file",
			h.compressedSize, remaining)
	}
	// Each record takes at least its 4-byte length prefix.
	limit := int64(maxChunkData)
	if h.compressor == NoCompression {
		limit = int64(h.compressedSize)
	}
	if 4*int64(h.numRecords) > limit {
		return header{}, corruptf("header claims %d records, more than %d bytes of chunk data can hold",
			h.numRecords, limit)
	}
	return h, nil
}
