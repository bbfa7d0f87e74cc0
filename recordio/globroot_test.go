package recordio

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// openRoot opens dir as an os.Root for the test.
func openRoot(t *testing.T, dir string) *os.Root {
	t.Helper()
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// TestGlobRootMatchesInsideTheRoot: relative and absolute patterns inside
// the root expand to sorted relative paths, and IndexRoot indexes them
// through the root.
func TestGlobRootMatchesInsideTheRoot(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "a", "b", "x.recordio"), 10, 20)
	writeFile(t, filepath.Join(dir, "a", "y.recordio"), 10, 20)
	if err := os.Symlink("b/x.recordio", filepath.Join(dir, "a", "z.recordio")); err != nil {
		t.Fatal(err)
	}
	root := openRoot(t, dir)
	got, err := GlobRoot(context.Background(), root, []string{"a/*.recordio", filepath.Join(dir, "a/?/x.recordio"), "a/../a/y.recordio"}, IndexLimits{}, GlobLimits{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a/b/x.recordio", "a/y.recordio", "a/z.recordio"}
	if !slices.Equal(got, want) {
		t.Fatalf("GlobRoot = %q, want %q", got, want)
	}
	chunks, sum, err := IndexRoot(context.Background(), root, got, IndexLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Files != 3 || len(chunks) == 0 || chunks[0].Path != "a/b/x.recordio" {
		t.Fatalf("IndexRoot: %+v, first chunk %+v", sum, chunks[0])
	}
}

// TestGlobRootRefusesWhatLeadsOut: patterns and symbolic links that lead
// outside the root are refused, and no error names what lies outside.
func TestGlobRootRefusesWhatLeadsOut(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret-name")
	if err := os.WriteFile(secret, []byte("root:x:0:0"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(secret, filepath.Join(dir, "abs.recordio")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../"+filepath.Base(outside)+"/secret-name", filepath.Join(dir, "rel.recordio")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	root := openRoot(t, dir)
	for _, p := range []string{secret, filepath.Join(outside, "*"), "../x", "a/../../x", "abs.recordio", "rel.recordio", "*.recordio", "out/secret-name", "out/*"} {
		_, err := GlobRoot(context.Background(), root, []string{p}, IndexLimits{}, GlobLimits{})
		if err == nil {
			t.Errorf("GlobRoot(%q): no error", p)
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, "root:x") || (!strings.Contains(p, "secret-name") && strings.Contains(msg, "secret-name")) ||
			(!strings.Contains(p, outside) && strings.Contains(msg, outside)) {
			t.Errorf("GlobRoot(%q): %v names or quotes what lies outside", p, err)
		}
		if !errors.Is(err, ErrOutsideRoot) && !errors.Is(err, ErrNoMatch) {
			t.Errorf("GlobRoot(%q): %v, want ErrOutsideRoot or ErrNoMatch", p, err)
		}
	}
	// Opening through the root refuses the links too.
	if _, _, err := IndexRoot(context.Background(), root, []string{"abs.recordio"}, IndexLimits{}); !errors.Is(err, ErrOutsideRoot) {
		t.Errorf("IndexRoot(abs.recordio): %v, want ErrOutsideRoot", err)
	}
}

// TestGlobRootRefusesNonRegularFiles: a FIFO, whether matched or named, is
// refused and never opened for a blocking read; so is a directory.
func TestGlobRootRefusesNonRegularFiles(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.recordio"), 10, 20)
	if err := syscall.Mkfifo(filepath.Join(dir, "p.recordio"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "d.recordio"), 0o755); err != nil {
		t.Fatal(err)
	}
	root := openRoot(t, dir)
	for _, p := range []string{"*.recordio", "p.recordio", "d.recordio"} {
		if _, err := GlobRoot(context.Background(), root, []string{p}, IndexLimits{}, GlobLimits{}); !errors.Is(err, ErrNotRegular) {
			t.Errorf("GlobRoot(%q): %v, want ErrNotRegular", p, err)
		}
	}
	// A FIFO swapped in after the expansion is refused by the open.
	if _, _, err := IndexRoot(context.Background(), root, []string{"p.recordio"}, IndexLimits{}); !errors.Is(err, ErrNotRegular) {
		t.Errorf("IndexRoot(p.recordio): %v, want ErrNotRegular", err)
	}
}

// TestGlobRootBounds: wildcard levels, entries visited and the time taken
// are bounded, and a cancelled context stops the expansion.
func TestGlobRootBounds(t *testing.T) {
	dir := t.TempDir()
	for i := range 20 {
		sub := filepath.Join(dir, fmt.Sprintf("d%02d", i))
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		for j := range 20 {
			if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%02d", j)), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	root := openRoot(t, dir)
	ctx := context.Background()
	_, err := GlobRoot(ctx, root, []string{"/*/*/*/*/*/*/*/*"}, IndexLimits{}, GlobLimits{})
	if !errors.Is(err, ErrOutsideRoot) {
		t.Errorf("an absolute pattern outside the root: %v", err)
	}
	_, err = GlobRoot(ctx, root, []string{"*/*/*/*/*"}, IndexLimits{}, GlobLimits{})
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "wildcards in 5 path elements, at most 4") {
		t.Errorf("5 wildcard levels: %v", err)
	}
	_, err = GlobRoot(ctx, root, []string{"*/*"}, IndexLimits{}, GlobLimits{MaxVisited: 100})
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "more than 100 directory entries") {
		t.Errorf("over the visit bound: %v", err)
	}
	_, err = GlobRoot(ctx, root, []string{"*/*"}, IndexLimits{MaxFiles: 50}, GlobLimits{})
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "more than 50 files") {
		t.Errorf("over the file bound: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err = GlobRoot(cancelled, root, []string{"*/*"}, IndexLimits{}, GlobLimits{}); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled request: %v, want context.Canceled", err)
	}
	if _, err = GlobRoot(ctx, root, []string{"*/*"}, IndexLimits{}, GlobLimits{Timeout: time.Nanosecond}); !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "took longer than") {
		t.Errorf("over the time bound: %v", err)
	}
	got, err := GlobRoot(ctx, root, []string{"*/f0?"}, IndexLimits{}, GlobLimits{})
	if err != nil || len(got) != 200 {
		t.Errorf("*/f0?: %d files, %v; want 200", len(got), err)
	}
}

// TestHostDirFollowsLinks: without a root, absolute symbolic links are
// followed as the operating system follows them.
func TestHostDirFollowsLinks(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.recordio"), 10, 20)
	if err := os.Symlink(filepath.Join(dir, "a.recordio"), filepath.Join(dir, "l.recordio")); err != nil {
		t.Fatal(err)
	}
	got, err := GlobRoot(context.Background(), HostDir{}, []string{filepath.Join(dir, "*.recordio")}, IndexLimits{}, GlobLimits{})
	if err != nil || len(got) != 2 {
		t.Fatalf("GlobRoot on the host: %q %v", got, err)
	}
	if _, sum, err := IndexRoot(context.Background(), HostDir{}, got, IndexLimits{}); err != nil || sum.Files != 2 {
		t.Fatalf("IndexRoot on the host: %+v %v", sum, err)
	}
}

// TestGlobRootFIFOWhereADirectoryIsExpected: a pattern that lists below a
// FIFO neither blocks nor matches.
func TestGlobRootFIFOWhereADirectoryIsExpected(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "p"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, root := range []Dir{openRoot(t, dir), HostDir{}} {
		p := "p/*"
		if _, ok := root.(HostDir); ok {
			p = filepath.Join(dir, "p/*")
		}
		if _, err := GlobRoot(context.Background(), root, []string{p}, IndexLimits{}, GlobLimits{}); !errors.Is(err, ErrNoMatch) {
			t.Errorf("GlobRoot(%q): %v, want ErrNoMatch", p, err)
		}
	}
}
