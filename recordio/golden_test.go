package recordio

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// goldenFile is one entry of testdata/MANIFEST.json.
type goldenFile struct {
	File         string   `json:"file"`
	Compressor   string   `json:"compressor"`
	MaxChunkSize int      `json:"max_chunk_size"`
	NumRecords   int      `json:"num_records"`
	ChunkOffsets []int64  `json:"chunk_offsets"`
	ChunkRecords []int    `json:"chunk_records"`
	RecordSHA256 []string `json:"record_sha256"`
	RecordLens   []int    `json:"record_lens"`
}

func loadManifest(t testing.TB) []goldenFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "MANIFEST.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m []goldenFile
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// checkRecords compares records with a golden file's lengths and digests.
func checkRecords(t *testing.T, g goldenFile, recs [][]byte) {
	t.Helper()
	if len(recs) != g.NumRecords {
		t.Fatalf("read %d records, want %d", len(recs), g.NumRecords)
	}
	for i, r := range recs {
		sum := sha256.Sum256(r)
		if len(r) != g.RecordLens[i] || hex.EncodeToString(sum[:]) != g.RecordSHA256[i] {
			t.Fatalf("record %d: %d bytes, sha256 %x; want %d bytes, sha256 %s",
				i, len(r), sum, g.RecordLens[i], g.RecordSHA256[i])
		}
	}
}

func scanRange(t *testing.T, s *RangeScanner) [][]byte {
	t.Helper()
	var recs [][]byte
	for s.Scan() {
		recs = append(recs, s.Record())
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return recs
}

func TestGoldenManifestCoversEveryFile(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.recordio"))
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, g := range loadManifest(t) {
		listed = append(listed, filepath.Join("testdata", g.File))
	}
	slices.Sort(listed)
	if !slices.Equal(files, listed) {
		t.Fatalf("testdata has %v, MANIFEST.json lists %v", files, listed)
	}
}

func TestGolden(t *testing.T) {
	for _, g := range loadManifest(t) {
		t.Run(g.File, func(t *testing.T) {
			path := filepath.Join("testdata", g.File)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			idx, err := LoadIndex(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			checkGoldenIndex(t, g, idx)

			recs := scanRange(t, NewRangeScanner(bytes.NewReader(data), idx, -1, -1))
			checkRecords(t, g, recs)

			t.Run("Scanner", func(t *testing.T) {
				s, err := NewScanner(path)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				var got [][]byte
				for s.Scan() {
					got = append(got, s.Record())
				}
				if err := s.Err(); err != nil {
					t.Fatal(err)
				}
				checkRecords(t, g, got)
			})
			t.Run("ChunkIndex", func(t *testing.T) {
				first := 0
				for i := range idx.NumChunks() {
					ci := idx.ChunkIndex(i)
					got := scanRange(t, NewRangeScanner(bytes.NewReader(data), ci, -1, -1))
					want := recs[first : first+g.ChunkRecords[i]]
					if !equalRecords(got, want) {
						t.Fatalf("chunk %d: records differ from the whole-file scan", i)
					}
					viaFile, err := ReadChunk(path, g.ChunkOffsets[i], g.ChunkRecords[i])
					if err != nil || !equalRecords(viaFile, want) {
						t.Fatalf("ReadChunk of chunk %d: %v", i, err)
					}
					first += g.ChunkRecords[i]
				}
			})
			t.Run("Locate", func(t *testing.T) {
				n := 0
				for c, cnt := range g.ChunkRecords {
					for r := range cnt {
						if gc, gr := idx.Locate(n); gc != c || gr != r {
							t.Fatalf("Locate(%d) = %d, %d; want %d, %d", n, gc, gr, c, r)
						}
						n++
					}
				}
				if c, r := idx.Locate(n); c != -1 || r != -1 {
					t.Fatalf("Locate(%d) = %d, %d; want -1, -1", n, c, r)
				}
			})
			t.Run("Inspect", func(t *testing.T) {
				infos, err := Inspect(bytes.NewReader(data))
				if err != nil {
					t.Fatal(err)
				}
				if len(infos) != len(g.ChunkOffsets) {
					t.Fatalf("Inspect found %d chunks, want %d", len(infos), len(g.ChunkOffsets))
				}
				for i, in := range infos {
					if in.Offset != g.ChunkOffsets[i] || in.NumRecords != g.ChunkRecords[i] ||
						CompressorName(in.Compressor) != g.Compressor {
						t.Fatalf("chunk %d: %+v", i, in)
					}
				}
			})
			t.Run("Rewrite", func(t *testing.T) {
				comp, err := ParseCompressor(g.Compressor)
				if err != nil {
					t.Fatal(err)
				}
				var buf bytes.Buffer
				w := NewWriter(&buf, g.MaxChunkSize, comp)
				for _, r := range recs {
					if _, err := w.Write(r); err != nil {
						t.Fatal(err)
					}
				}
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				if comp == NoCompression && !bytes.Equal(buf.Bytes(), data) {
					t.Fatalf("rewritten file differs from the golden file (%d vs %d bytes)", buf.Len(), len(data))
				}
				idx2, err := LoadIndex(bytes.NewReader(buf.Bytes()))
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(idx2.ChunkRecords, g.ChunkRecords) {
					t.Fatalf("rewritten chunk records %v, want %v", idx2.ChunkRecords, g.ChunkRecords)
				}
				checkRecords(t, g, scanRange(t, NewRangeScanner(bytes.NewReader(buf.Bytes()), idx2, -1, -1)))
			})
		})
	}
}

func checkGoldenIndex(t *testing.T, g goldenFile, idx *Index) {
	t.Helper()
	if !slices.Equal(idx.ChunkOffsets, g.ChunkOffsets) {
		t.Fatalf("chunk offsets %v, want %v", idx.ChunkOffsets, g.ChunkOffsets)
	}
	if !slices.Equal(idx.ChunkRecords, g.ChunkRecords) {
		t.Fatalf("chunk records %v, want %v", idx.ChunkRecords, g.ChunkRecords)
	}
	for i, l := range idx.ChunkLens {
		if int(l) != g.ChunkRecords[i] {
			t.Fatalf("ChunkLens[%d] = %d, want %d", i, l, g.ChunkRecords[i])
		}
	}
	if idx.NumRecords != g.NumRecords || idx.NumChunks() != len(g.ChunkOffsets) {
		t.Fatalf("%d records in %d chunks, want %d in %d",
			idx.NumRecords, idx.NumChunks(), g.NumRecords, len(g.ChunkOffsets))
	}
}

func equalRecords(a, b [][]byte) bool {
	return slices.EqualFunc(a, b, bytes.Equal)
}

func TestGoldenScannerOverGlob(t *testing.T) {
	m := loadManifest(t)
	slices.SortFunc(m, func(a, b goldenFile) int { return strings.Compare(a.File, b.File) })
	s, err := NewScanner(filepath.Join("testdata", "*.recordio"), filepath.Join("testdata", "gzip-*"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var want []string
	for _, g := range m {
		want = append(want, g.RecordSHA256...)
	}
	n := 0
	for s.Scan() {
		sum := sha256.Sum256(s.Record())
		if n >= len(want) || hex.EncodeToString(sum[:]) != want[n] {
			t.Fatalf("record %d differs", n)
		}
		n++
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if n != len(want) {
		t.Fatalf("read %d records, want %d (each file once, in path order)", n, len(want))
	}
}

// corruptWant says where each damaged file must be reported.
var corruptWant = map[string]string{
	"bad-checksum-chunk2.recordio":  "chunk 2 at offset 2159: checksum mismatch",
	"bad-magic-chunk2.recordio":     "chunk 2 at offset 561: bad magic number",
	"not-recordio.recordio":         "chunk 0 at offset 0: bad magic number",
	"truncated-last-chunk.recordio": "chunk 18 at offset 19832: truncated",
}

func TestGoldenCorrupt(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "corrupt", "*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no files in testdata/corrupt")
	}
	for _, path := range files {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			want, ok := corruptWant[name]
			if !ok {
				want = "chunk "
			}
			// Through a one-chunk index only the offset is known.
			wantOneChunk := want
			if i := strings.Index(want, " at offset "); i > 0 && !strings.Contains(want, "offset 0:") {
				wantOneChunk = "chunk" + want[i:]
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}

			checkErr := func(how string, err error, withPath bool) {
				t.Helper()
				want := want
				if how == "ReadChunk" {
					want = wantOneChunk
				}
				if err == nil {
					t.Fatalf("%s: no error", how)
				}
				msg := err.Error()
				if !errors.Is(err, ErrCorrupt) {
					t.Errorf("%s: %q does not match ErrCorrupt", how, msg)
				}
				var ce *ChunkError
				if !errors.As(err, &ce) {
					t.Errorf("%s: %q is not a *ChunkError", how, msg)
				}
				if !strings.Contains(msg, want) || !strings.Contains(msg, " at offset ") {
					t.Errorf("%s: %q does not name the chunk and offset (%q)", how, msg, want)
				}
				if withPath && !strings.Contains(msg, path) {
					t.Errorf("%s: %q does not name the file %s", how, msg, path)
				}
				t.Logf("%s: %v", how, err)
			}

			s, err := NewScanner(path)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for s.Scan() {
				n++
			}
			checkErr(fmt.Sprintf("Scanner after %d records", n), s.Err(), true)
			s.Close()

			checkErr("ReadSeeker", readAll(bytes.NewReader(data)), false)
			_, err = Inspect(bytes.NewReader(data))
			checkErr("Inspect", err, false)
			if idx, err := LoadIndexFile(path); err != nil {
				checkErr("LoadIndexFile", err, true)
			} else {
				for i := range idx.NumChunks() {
					if _, err = ReadChunk(path, idx.ChunkOffsets[i], idx.ChunkRecords[i]); err != nil {
						break
					}
				}
				checkErr("ReadChunk", err, true)
			}
		})
	}
}

// readAll loads the index of r and reads every record.
func readAll(r *bytes.Reader) error {
	idx, err := LoadIndex(r)
	if err != nil {
		return err
	}
	s := NewRangeScanner(r, idx, -1, -1)
	for s.Scan() {
	}
	return s.Err()
}
