package recordio

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeFile writes a RecordIO file of n records, chunkSize record bytes a
// chunk, and returns its index as LoadIndex reads it back.
func writeFile(t *testing.T, path string, n, chunkSize int) *Index {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := NewWriter(f, chunkSize, Snappy)
	for i := range n {
		if _, err := w.Write(fmt.Appendf(nil, "record %s %04d", filepath.Base(path), i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	x, err := LoadIndexFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func TestIndexChunksInFileOrder(t *testing.T) {
	dir := t.TempDir()
	b := filepath.Join(dir, "train-b.recordio")
	a := filepath.Join(dir, "train-a.recordio")
	c := filepath.Join(dir, "test-c.recordio")
	xb := writeFile(t, b, 30, 100)
	xa := writeFile(t, a, 10, 100)
	xc := writeFile(t, c, 5, 1<<20)
	if xa.NumChunks() < 2 || xb.NumChunks() < 2 {
		t.Fatalf("want several chunks a file, got %d and %d", xa.NumChunks(), xb.NumChunks())
	}

	// Overlapping patterns: a plain path, a glob that matches it again and
	// another glob. Matches are sorted and de-duplicated.
	globs := []string{filepath.Join(dir, "train-*.recordio"), a, filepath.Join(dir, "test-?.recordio")}
	chunks, sum, err := IndexGlobs(context.Background(), globs, IndexLimits{})
	if err != nil {
		t.Fatal(err)
	}
	var want []FileChunk
	records := 0
	for _, f := range []struct {
		path string
		x    *Index
	}{{c, xc}, {a, xa}, {b, xb}} {
		for i, off := range f.x.ChunkOffsets {
			want = append(want, FileChunk{Path: f.path, Offset: off, Records: uint32(f.x.ChunkRecords[i])})
		}
		records += f.x.NumRecords
	}
	if len(chunks) != len(want) {
		t.Fatalf("got %d chunks, want %d", len(chunks), len(want))
	}
	for i := range want {
		if chunks[i] != want[i] {
			t.Errorf("chunk %d = %+v, want %+v", i, chunks[i], want[i])
		}
	}
	wantSum := IndexSummary{Files: 3, Chunks: len(want), Records: records}
	if sum != wantSum || records != 45 {
		t.Errorf("summary %+v, want %+v (45 records)", sum, wantSum)
	}
}

func TestIndexSerialAndParallelAgree(t *testing.T) {
	dir := t.TempDir()
	for i := range 20 {
		writeFile(t, filepath.Join(dir, fmt.Sprintf("part-%02d", i)), 3+i, 40)
	}
	glob := []string{filepath.Join(dir, "part-*")}
	serial, s1, err := IndexGlobs(context.Background(), glob, IndexLimits{Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	parallel, s2, err := IndexGlobs(context.Background(), glob, IndexLimits{Parallelism: 16})
	if err != nil {
		t.Fatal(err)
	}
	if s1 != s2 || len(serial) != len(parallel) {
		t.Fatalf("summaries %+v and %+v", s1, s2)
	}
	for i := range serial {
		if serial[i] != parallel[i] {
			t.Fatalf("chunk %d: %+v vs %+v", i, serial[i], parallel[i])
		}
	}
}

func TestIndexErrors(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.recordio")
	writeFile(t, good, 10, 50)
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(dir, "truncated.recordio")
	if err := os.WriteFile(truncated, data[:len(data)-3], 0o644); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "garbage.recordio")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("not recordio ", 10)), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.recordio")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	subdir := filepath.Join(dir, "sub.recordio")
	if err := os.Mkdir(subdir, 0o755); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "nothing-*.recordio")

	cases := []struct {
		name    string
		globs   []string
		lim     IndexLimits
		is      error
		mention string
	}{
		{"no patterns", nil, IndexLimits{}, ErrBadPattern, "no file patterns"},
		{"empty pattern", []string{""}, IndexLimits{}, ErrBadPattern, "empty"},
		{"malformed pattern", []string{filepath.Join(dir, "[")}, IndexLimits{}, ErrBadPattern, "["},
		{"overlong pattern", []string{strings.Repeat("x", DefaultMaxPathLen+1)}, IndexLimits{}, ErrBadPattern, "bytes"},
		{"no match", []string{missing}, IndexLimits{}, ErrNoMatch, missing},
		{"bad pattern among matches", []string{good, filepath.Join(dir, "[")}, IndexLimits{}, ErrBadPattern, "["},
		{"too many globs", []string{good, good, good}, IndexLimits{MaxGlobs: 2}, ErrLimit, "3 file patterns"},
		{"too many files", []string{filepath.Join(dir, "*.recordio")}, IndexLimits{MaxFiles: 2}, ErrLimit, "more than 2 files"},
		{"too many chunks", []string{good}, IndexLimits{MaxChunks: 1}, ErrLimit, "chunks"},
		{"truncated", []string{good, truncated}, IndexLimits{}, ErrCorrupt, truncated},
		{"not recordio", []string{garbage}, IndexLimits{}, ErrCorrupt, garbage},
		{"directory", []string{subdir}, IndexLimits{}, nil, subdir},
		{"no chunks", []string{empty}, IndexLimits{}, ErrEmpty, "no chunk"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := IndexGlobs(context.Background(), tc.globs, tc.lim)
			if err == nil {
				t.Fatal("no error")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %q is not %q", err, tc.is)
			}
			if !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("error %q does not mention %q", err, tc.mention)
			}
		})
	}
}

func TestIndexFileErrorNamesFile(t *testing.T) {
	dir := t.TempDir()
	gone := filepath.Join(dir, "gone.recordio")
	_, _, err := IndexFiles(context.Background(), []string{gone}, IndexLimits{})
	var fe *FileError
	if !errors.As(err, &fe) || fe.Path != gone || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("error %v, want a FileError for %s wrapping ErrNotExist", err, gone)
	}
}

func TestIndexFirstFailureInPathOrder(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for i := range 12 {
		p := filepath.Join(dir, fmt.Sprintf("f%02d", i))
		writeFile(t, p, 4, 10)
		paths = append(paths, p)
	}
	for _, i := range []int{3, 9} {
		if err := os.WriteFile(paths[i], []byte("bad"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 {
		_, _, err := IndexFiles(context.Background(), paths, IndexLimits{Parallelism: 4})
		var fe *FileError
		if !errors.As(err, &fe) || fe.Path != paths[3] {
			t.Fatalf("error %v, want the failure of %s", err, paths[3])
		}
	}
}

func TestIndexCanceled(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.recordio")
	writeFile(t, p, 4, 10)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := IndexGlobs(ctx, []string{p}, IndexLimits{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
}

// As in the original master, a pattern that matches nothing is skipped as
// long as another one matches a file.
func TestGlobSkipsPatternsThatMatchNothing(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "train-a.recordio")
	b := filepath.Join(dir, "train-b.recordio")
	writeFile(t, a, 10, 50)
	writeFile(t, b, 10, 50)
	missing := filepath.Join(dir, "nothing-*.recordio")
	gone := filepath.Join(dir, "gone.recordio")

	paths, err := Glob([]string{missing, filepath.Join(dir, "train-*.recordio"), gone}, IndexLimits{})
	if err != nil {
		t.Fatalf("Glob: %v", err)
	}
	if want := []string{a, b}; !slices.Equal(paths, want) {
		t.Fatalf("Glob = %q, want %q", paths, want)
	}
	chunks, sum, err := IndexGlobs(context.Background(), []string{gone, a}, IndexLimits{})
	if err != nil {
		t.Fatalf("Index: %v", err)
	}
	if sum.Files != 1 || len(chunks) == 0 || chunks[0].Path != a {
		t.Fatalf("Index: %+v, first chunk %+v", sum, chunks[0])
	}

	// When no pattern matches anything the error names all of them.
	_, err = Glob([]string{missing, gone}, IndexLimits{})
	if !errors.Is(err, ErrNoMatch) {
		t.Fatalf("error %v, want ErrNoMatch", err)
	}
	for _, g := range []string{missing, gone} {
		if !strings.Contains(err.Error(), g) {
			t.Errorf("error %q does not name %q", err, g)
		}
	}
}
