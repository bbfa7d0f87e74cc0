package recordio

import (
	"fmt"
	"io"
	"os"
)

// ReadChunk reads and verifies the chunk whose header is at offset in the
// file at path and returns its records, which must number numRecords. This
// is how a trainer reads a task's chunk described by (path, offset, records).
// Errors name the path and the offset.
func ReadChunk(path string, offset int64, numRecords int) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("recordio: %w", err)
	}
	defer f.Close()
	recs := make([][]byte, 0, max(numRecords, 0))
	s := newRangeScanner(f, NewChunkIndex(offset, numRecords), 0, -1, path, nil)
	for s.Scan() {
		recs = append(recs, s.Record())
	}
	return recs, s.Err()
}

// ChunkInfo describes one chunk of a file, as read and verified by Inspect.
type ChunkInfo struct {
	// Offset is the byte offset of the chunk's header.
	Offset int64
	// Compressor is NoCompression, Snappy or Gzip.
	Compressor int
	// NumRecords is the number of records in the chunk.
	NumRecords int
	// CompressedSize is the size of the chunk data as stored, header not
	// counted.
	CompressedSize int64
	// UncompressedSize is the size of the decompressed chunk data: records
	// and their 4-byte length prefixes.
	UncompressedSize int64
	// RecordBytes is the total size of the chunk's records.
	RecordBytes int64
}

// Inspect reads and verifies every chunk of the RecordIO data in r, from its
// start to its end, and describes each. On error it returns the chunks read
// so far with a *ChunkError.
func Inspect(r io.ReadSeeker) ([]ChunkInfo, error) {
	size, err := r.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, fmt.Errorf("recordio: %w", err)
	}
	var infos []ChunkInfo
	var d chunkReader
	for off := int64(0); off < size; {
		c, err := d.read(r, off, size, -1)
		if err != nil {
			return infos, &ChunkError{Chunk: len(infos), Offset: off, Err: err}
		}
		info := ChunkInfo{
			Offset:           off,
			Compressor:       int(c.compressor),
			NumRecords:       len(c.records),
			CompressedSize:   int64(c.compressedSize),
			UncompressedSize: int64(c.dataSize),
		}
		for _, rec := range c.records {
			info.RecordBytes += int64(len(rec))
		}
		infos = append(infos, info)
		off += headerSize + int64(c.compressedSize)
	}
	return infos, nil
}
