package recordio

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

// smallFile returns a RecordIO file of several chunks.
func smallFile(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf, 64, NoCompression)
	for i := range 50 {
		if _, err := w.Write(bytes.Repeat([]byte{byte(i)}, 10+i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestIndexObjectRoundTrip(t *testing.T) {
	data := smallFile(t)
	idx, err := LoadIndex(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if idx.NumChunks() < 3 {
		t.Fatalf("want several chunks, got %d", idx.NumChunks())
	}
	b, err := EncodeIndexObject(idx, int64(len(data)), `"etag-1"`)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := DecodeIndexObject(b)
	if err != nil {
		t.Fatal(err)
	}
	if obj.Size != int64(len(data)) || obj.ETag != `"etag-1"` || !reflect.DeepEqual(obj.Index, idx) {
		t.Fatalf("decoded %+v %+v, want size %d and %+v", obj, obj.Index, len(data), idx)
	}
	last := idx.ChunkOffsets[idx.NumChunks()-1]
	if err := CheckLastChunkHeader(idx, int64(len(data)), data[last:last+headerSize]); err != nil {
		t.Fatalf("last header of the same file: %v", err)
	}
}

func TestIndexObjectDamageIsAnError(t *testing.T) {
	data := smallFile(t)
	idx, err := LoadIndex(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	good, err := EncodeIndexObject(idx, int64(len(data)), "")
	if err != nil {
		t.Fatal(err)
	}
	// Every single-byte change and every truncation is caught.
	for i := range good {
		b := slices.Clone(good)
		b[i] ^= 0x40
		if _, err := DecodeIndexObject(b); !errors.Is(err, ErrBadIndexObject) {
			t.Fatalf("byte %d flipped: got %v, want ErrBadIndexObject", i, err)
		}
		if _, err := DecodeIndexObject(good[:i]); !errors.Is(err, ErrBadIndexObject) {
			t.Fatalf("truncated to %d bytes: got %v, want ErrBadIndexObject", i, err)
		}
	}
	// An index whose checksum holds but whose chunks lie is refused.
	lying := &Index{ChunkOffsets: []int64{0, 10}, ChunkLens: []uint32{1, 1}, ChunkRecords: []int{1, 1}, NumRecords: 2}
	b, err := EncodeIndexObject(lying, 15, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeIndexObject(b); !errors.Is(err, ErrBadIndexObject) {
		t.Fatalf("overlapping chunks: got %v, want ErrBadIndexObject", err)
	}
}

func TestCheckLastChunkHeaderCatchesAnotherFile(t *testing.T) {
	data := smallFile(t)
	idx, err := LoadIndex(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	// The same size, other contents: a file of one chunk.
	var buf bytes.Buffer
	w := NewWriter(&buf, 1<<20, NoCompression)
	w.Write(bytes.Repeat([]byte{1}, len(data)-headerSize-4))
	w.Close()
	other := buf.Bytes()
	if len(other) != len(data) {
		t.Fatalf("sizes %d and %d", len(other), len(data))
	}
	last := idx.ChunkOffsets[idx.NumChunks()-1]
	if err := CheckLastChunkHeader(idx, int64(len(other)), other[last:last+headerSize]); !errors.Is(err, ErrBadIndexObject) {
		t.Fatalf("got %v, want ErrBadIndexObject", err)
	}
}

func TestWriteIndexObjectFileAndGlobSkipsIt(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.recordio")
	data := smallFile(t)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	idx, err := WriteIndexObjectFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path + IndexSuffix)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := DecodeIndexObject(b)
	if err != nil || obj.Size != int64(len(data)) || !reflect.DeepEqual(obj.Index, idx) {
		t.Fatalf("index object %+v, %v", obj, err)
	}
	paths, err := Glob([]string{filepath.Join(dir, "*")}, IndexLimits{})
	if err != nil || !slices.Equal(paths, []string{path}) {
		t.Fatalf("Glob = %v, %v; want only the data file", paths, err)
	}
	names, err := GlobRoot(t.Context(), HostDir{Path: dir}, []string{"*"}, IndexLimits{}, GlobLimits{})
	if err != nil || !slices.Equal(names, []string{"a.recordio"}) {
		t.Fatalf("GlobRoot = %v, %v; want only the data file", names, err)
	}
	// An index object alone is matched: it is then not an index "beside"
	// a data file, and indexing it fails as any non-RecordIO file does.
	if got := DropIndexObjects([]string{"x.idx"}); !slices.Equal(got, []string{"x.idx"}) {
		t.Fatalf("DropIndexObjects dropped a lone index: %v", got)
	}
}
