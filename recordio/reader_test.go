package recordio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// rawChunk builds a chunk by hand, with a correct checksum.
func rawChunk(compressor, numRecords uint32, data []byte) []byte {
	h := header{
		checksum:       crc32.ChecksumIEEE(data),
		compressor:     compressor,
		compressedSize: uint32(len(data)),
		numRecords:     numRecords,
	}
	var b [headerSize]byte
	h.encode(&b)
	return append(b[:], data...)
}

func lengthPrefixed(recs ...string) []byte {
	var b []byte
	for _, r := range recs {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(r)))
		b = append(b, r...)
	}
	return b
}

func TestBadChunks(t *testing.T) {
	good := rawChunk(NoCompression, 2, lengthPrefixed("ab", "c"))
	hugeSize := bytes.Clone(good)
	binary.LittleEndian.PutUint32(hugeSize[12:], 0xfffffff0)
	manyRecords := rawChunk(NoCompression, 0xffffffff, lengthPrefixed("ab", "c"))
	hugeRecord := rawChunk(NoCompression, 1, binary.LittleEndian.AppendUint32(nil, 0xffffffff))
	badComp := bytes.Clone(good)
	binary.LittleEndian.PutUint32(badComp[8:], 9)

	tests := []struct {
		name, want string
		data       []byte
	}{
		{"short header", "truncated: 10 bytes left", good[:10]},
		{"huge compressed size", "truncated: header claims 4294967280 bytes", hugeSize},
		{"huge record count", "header claims 4294967295 records", manyRecords},
		{"huge record length", "length 4294967295 runs past the end", hugeRecord},
		{"unknown compressor", "unknown compressor 9", badComp},
		{"trailing bytes", "2 bytes of chunk data follow its 2 records", rawChunk(NoCompression, 2, append(lengthPrefixed("ab", "c"), 0, 0))},
		{"short length prefix", "record 2 of 3: length prefix runs past", rawChunk(NoCompression, 3, append(lengthPrefixed("ab", "c"), 0, 0))},
		{"bad snappy", "snappy:", rawChunk(Snappy, 1, []byte("not snappy at all"))},
		{"bad gzip", "gzip:", rawChunk(Gzip, 1, []byte("not gzip at all"))},
		{"second chunk truncated", "chunk 1 at offset 31: truncated", append(bytes.Clone(good), good[:25]...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, ierr := Inspect(bytes.NewReader(tt.data))
			rerr := readAll(bytes.NewReader(tt.data))
			runtime.ReadMemStats(&after)
			for _, err := range []error{ierr, rerr} {
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("got %v, want an ErrCorrupt containing %q", err, tt.want)
				}
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
				t.Errorf("reading allocated %d bytes", alloc)
			}
		})
	}
}

func TestChunkRecordCountMismatch(t *testing.T) {
	data := rawChunk(NoCompression, 2, lengthPrefixed("ab", "c"))
	s := NewRangeScanner(bytes.NewReader(data), NewChunkIndex(0, 3), -1, -1)
	for s.Scan() {
	}
	if err := s.Err(); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "chunk 0 at offset 0: chunk holds 2 records, the index says 3") {
		t.Fatalf("got %v", err)
	}
}

func TestDecompressionLimit(t *testing.T) {
	for _, comp := range []int{Snappy, Gzip} {
		t.Run(CompressorName(comp), func(t *testing.T) {
			var buf bytes.Buffer
			w := NewWriter(&buf, -1, comp)
			w.Write(make([]byte, 4<<20))
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			d := chunkReader{limit: 1 << 20}
			_, err := d.read(bytes.NewReader(buf.Bytes()), 0, int64(buf.Len()), -1)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "exceeds 1048576 bytes") {
				t.Fatalf("got %v, want the decompression limit", err)
			}
			d.limit = 4<<20 + 4
			if _, err := d.read(bytes.NewReader(buf.Bytes()), 0, int64(buf.Len()), -1); err != nil {
				t.Fatalf("at the limit: %v", err)
			}
		})
	}
}

func TestEmptyFile(t *testing.T) {
	idx, err := LoadIndex(bytes.NewReader(nil))
	if err != nil || idx.NumChunks() != 0 || idx.NumRecords != 0 {
		t.Fatalf("LoadIndex of an empty file: %+v, %v", idx, err)
	}
	if recs := readAllRecords(t, nil); len(recs) != 0 {
		t.Fatalf("read %d records", len(recs))
	}
}

func TestIndexChecks(t *testing.T) {
	data := rawChunk(NoCompression, 2, lengthPrefixed("ab", "c"))
	for name, idx := range map[string]*Index{
		"nil":                 nil,
		"missing counts":      {ChunkOffsets: []int64{0}, NumRecords: 2},
		"wrong NumRecords":    {ChunkOffsets: []int64{0}, ChunkRecords: []int{2}, NumRecords: 5},
		"negative offset":     {ChunkOffsets: []int64{-4}, ChunkRecords: []int{2}, NumRecords: 2},
		"offset past the end": {ChunkOffsets: []int64{100}, ChunkRecords: []int{2}, NumRecords: 2},
	} {
		s := NewRangeScanner(bytes.NewReader(data), idx, -1, -1)
		if s.Scan() || s.Err() == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// An Index filled like the original's, with ChunkLens only, still works.
	idx := &Index{ChunkOffsets: []int64{0}, ChunkLens: []uint32{2}, NumRecords: 2}
	s := NewRangeScanner(bytes.NewReader(data), idx, 1, 5)
	if !s.Scan() || string(s.Record()) != "c" || s.Scan() || s.Err() != nil {
		t.Fatalf("ChunkLens-only index: %v", s.Err())
	}
	if idx.ChunkIndex(1) != nil || idx.ChunkIndex(-1) != nil {
		t.Fatal("ChunkIndex out of range is not nil")
	}
	var none *Index
	if c, r := none.Locate(0); c != -1 || r != -1 || none.NumChunks() != 0 {
		t.Fatal("nil Index")
	}
}

func TestRecordsStayValid(t *testing.T) {
	for _, comp := range []int{NoCompression, Snappy, Gzip} {
		var buf bytes.Buffer
		w := NewWriter(&buf, 50, comp)
		var want [][]byte
		for i := range 200 {
			r := []byte(fmt.Sprintf("record %d", i))
			want = append(want, r)
			w.Write(r)
		}
		w.Close()
		got := readAllRecords(t, buf.Bytes()) // keeps every record across chunks
		if !equalRecords(got, want) {
			t.Fatalf("%s: records changed after later chunks were read", CompressorName(comp))
		}
		if len(got) > 0 && cap(got[0]) != len(got[0]) {
			t.Fatalf("record capacity %d reaches into the next record", cap(got[0]))
		}
	}
}

func TestScannerFiles(t *testing.T) {
	dir := t.TempDir()
	var want []string
	for f := range 3 {
		var buf bytes.Buffer
		w := NewWriter(&buf, 20, f%3)
		for i := range 10 * f {
			r := fmt.Sprintf("file %d record %d", f, i)
			want = append(want, r)
			w.Write([]byte(r))
		}
		w.Close()
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("part-%d.recordio", f)), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := NewScanner(filepath.Join(dir, "part-2.recordio"), filepath.Join(dir, "part-*.recordio"))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Paths()) != 3 {
		t.Fatalf("paths %v, want 3 files", s.Paths())
	}
	var got []string
	for s.Scan() {
		got = append(got, string(s.Record()))
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("read %q, want %q", got, want)
	}
	if err := s.Close(); err != nil || s.Scan() {
		t.Fatalf("after Close: %v", err)
	}

	s, _ = NewScanner(filepath.Join(dir, "*"))
	s.Scan()
	s.Close()
	if s.Scan() || s.Err() != nil {
		t.Fatalf("Scan after Close: %v", s.Err())
	}

	for _, globs := range [][]string{nil, {filepath.Join(dir, "nothing-*")}, {"[bad"}} {
		if _, err := NewScanner(globs...); err == nil {
			t.Errorf("NewScanner(%q) succeeded", globs)
		}
	}
}

func TestReadChunkErrors(t *testing.T) {
	if _, err := ReadChunk(filepath.Join(t.TempDir(), "missing"), 0, 1); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("got %v", err)
	}
	if _, err := LoadIndexFile(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("LoadIndexFile of a missing file succeeded")
	}
}

func TestAllocsPerRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	for _, comp := range []int{NoCompression, Snappy, Gzip} {
		var buf bytes.Buffer
		w := NewWriter(&buf, 64<<10, comp)
		const n = 20000
		for i := range n {
			w.Write([]byte(fmt.Sprintf("a record of some length, number %d", i)))
		}
		w.Close()
		idx, err := LoadIndex(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		r := bytes.NewReader(buf.Bytes())
		allocs := testing.AllocsPerRun(3, func() {
			s := NewRangeScanner(r, idx, -1, -1)
			for s.Scan() {
			}
		})
		if perRecord := allocs / n; perRecord > 0.05 {
			t.Errorf("%s: %.3f allocations per record", CompressorName(comp), perRecord)
		}
		t.Logf("%s: %.0f allocations for %d records in %d chunks", CompressorName(comp), allocs, n, idx.NumChunks())
	}
}
