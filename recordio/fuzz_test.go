package recordio

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
)

// fuzzLimit bounds decompressed chunk data while fuzzing.
const fuzzLimit = 16 << 20

// addGoldenSeeds adds every golden and damaged file, and every chunk of the
// golden files on its own.
func addGoldenSeeds(f *testing.F, add func(data []byte)) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.recordio"))
	if err != nil {
		f.Fatal(err)
	}
	corrupt, _ := filepath.Glob(filepath.Join("testdata", "corrupt", "*"))
	for _, path := range append(files, corrupt...) {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		add(data)
	}
	for _, path := range files {
		data, _ := os.ReadFile(path)
		idx, err := LoadIndex(bytes.NewReader(data))
		if err != nil {
			f.Fatal(err)
		}
		for i, off := range idx.ChunkOffsets {
			end := int64(len(data))
			if i+1 < len(idx.ChunkOffsets) {
				end = idx.ChunkOffsets[i+1]
			}
			add(data[off:end])
		}
	}
}

func FuzzLoadIndex(f *testing.F) {
	addGoldenSeeds(f, func(data []byte) { f.Add(data) })
	f.Fuzz(func(t *testing.T, data []byte) {
		idx, err := LoadIndex(bytes.NewReader(data))
		if err != nil {
			return
		}
		total, off := 0, int64(0)
		for i, o := range idx.ChunkOffsets {
			if o != off {
				t.Fatalf("chunk %d at offset %d, want %d", i, o, off)
			}
			size := int64(binary.LittleEndian.Uint32(data[o+12:]))
			off = o + headerSize + size
			total += idx.ChunkRecords[i]
		}
		if off != int64(len(data)) || total != idx.NumRecords {
			t.Fatalf("index covers %d of %d bytes and %d of %d records", off, len(data), total, idx.NumRecords)
		}
		s := newRangeScanner(bytes.NewReader(data), idx, -1, -1, "", &chunkReader{limit: fuzzLimit})
		n := 0
		for s.Scan() {
			n++
		}
		if s.Err() == nil && n != idx.NumRecords {
			t.Fatalf("read %d records without error, index says %d", n, idx.NumRecords)
		}
	})
}

func FuzzChunk(f *testing.F) {
	addGoldenSeeds(f, func(data []byte) {
		f.Add(data, false)
		f.Add(data, true)
	})
	f.Fuzz(func(t *testing.T, data []byte, fixChecksum bool) {
		if fixChecksum && len(data) >= headerSize {
			// Let mutations reach the decompressors and the record framing.
			n := min(int(binary.LittleEndian.Uint32(data[12:])), len(data)-headerSize)
			data = bytes.Clone(data)
			binary.LittleEndian.PutUint32(data[4:], crc32.ChecksumIEEE(data[headerSize:headerSize+n]))
		}
		d := chunkReader{limit: fuzzLimit}
		c, err := d.read(bytes.NewReader(data), 0, int64(len(data)), -1)
		if err != nil {
			return
		}
		if len(c.records) != int(c.numRecords) {
			t.Fatalf("%d records, header says %d", len(c.records), c.numRecords)
		}
		if c.numRecords == 0 {
			return
		}
		// Writing the records again gives a chunk that reads back the same;
		// without compression it is the same bytes.
		var buf bytes.Buffer
		w := NewWriter(&buf, fuzzLimit, int(c.compressor))
		for _, r := range c.records {
			w.Write(r)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		size := headerSize + int(c.compressedSize)
		if c.compressor == NoCompression && !bytes.Equal(buf.Bytes(), data[:size]) {
			t.Fatal("rewritten chunk differs")
		}
		var d2 chunkReader
		c2, err := d2.read(bytes.NewReader(buf.Bytes()), 0, int64(buf.Len()), int(c.numRecords))
		if err != nil {
			t.Fatal(err)
		}
		if !equalRecords(c.records, c2.records) {
			t.Fatal("rewritten chunk reads back different records")
		}
	})
}
