package integration

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/raftmaster/raftmaster/internal/proccluster"
)

// previousRelease is the commit of the release before this one (the last
// that landed, CI passing). The mixed-version tests run its binary, its
// image and its clients against this build.
const previousRelease = "bf5748e"

// previous is the source of previousRelease and what was built of it,
// kept in the user's cache directory under the commit's hash, so that
// later runs build nothing again.
type previous struct {
	// Commit is the full hash of previousRelease; Version is what `make
	// build` stamped into its binaries (git describe).
	Commit, Version string
	// Tree holds the release's files, as git archive writes them.
	Tree string
}

var (
	previousOnce sync.Once
	previousSrc  previous
	previousErr  error
	// previousBuild serializes builds of the tree within the process.
	previousBuild sync.Mutex
)

// previousSource returns previousRelease's tree, extracted once.
func previousSource(t testing.TB) previous {
	t.Helper()
	previousOnce.Do(func() { previousSrc, previousErr = extractPrevious() })
	if previousErr != nil {
		t.Fatalf("the previous release, %s: %v", previousRelease, previousErr)
	}
	return previousSrc
}

func extractPrevious() (previous, error) {
	root, err := proccluster.ModuleRoot()
	if err != nil {
		return previous{}, err
	}
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		out, err := cmd.Output()
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			return "", fmt.Errorf("git %s: %v: %s (the tests need the repository's history)", strings.Join(args, " "), err, ee.Stderr)
		}
		return strings.TrimSpace(string(out)), err
	}
	var p previous
	if p.Commit, err = git("rev-parse", "--verify", previousRelease+"^{commit}"); err != nil {
		return p, err
	}
	if p.Version, err = git("describe", "--tags", "--always", p.Commit); err != nil {
		return p, err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	p.Tree = filepath.Join(cache, "raftmaster-test", "previous-"+p.Commit, "tree")
	complete := filepath.Join(p.Tree, ".extracted")
	if _, err := os.Stat(complete); err == nil {
		return p, nil
	}
	// Extract beside the tree and rename, so that a process interrupted
	// half-way, or another extracting at the same time, leaves no partial
	// tree behind.
	if err := os.MkdirAll(filepath.Dir(p.Tree), 0o755); err != nil {
		return p, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(p.Tree), "tree-")
	if err != nil {
		return p, err
	}
	defer os.RemoveAll(tmp)
	archive := exec.Command("git", "archive", "--format=tar", p.Commit)
	archive.Dir = root
	tarball, err := archive.Output()
	if err != nil {
		return p, fmt.Errorf("git archive %s: %w", p.Commit, err)
	}
	untar := exec.Command("tar", "-x", "-C", tmp)
	untar.Stdin = bytes.NewReader(tarball)
	if out, err := untar.CombinedOutput(); err != nil {
		return p, fmt.Errorf("tar: %v: %s", err, out)
	}
	if err := os.WriteFile(filepath.Join(tmp, ".extracted"), []byte(p.Commit+"\n"), 0o644); err != nil {
		return p, err
	}
	if err := os.Rename(tmp, p.Tree); err != nil {
		if _, serr := os.Stat(complete); serr != nil {
			return p, err
		}
	}
	return p, nil
}

// build builds the package pkg of the previous release (such as
// "./cmd/raftmaster") for goos/goarch with the flags of `make build` and
// `make image`, once: later calls, and later runs, find it in the cache.
func (p previous) build(t testing.TB, pkg, goos, goarch string) string {
	t.Helper()
	previousBuild.Lock()
	defer previousBuild.Unlock()
	out := filepath.Join(filepath.Dir(p.Tree), "bin", goos+"-"+goarch, filepath.Base(pkg))
	if _, err := os.Stat(out); err == nil {
		return out
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := fmt.Sprintf("%s.%d.tmp", out, os.Getpid())
	p.goBuild(t, pkg, goos, goarch, tmp)
	if err := os.Rename(tmp, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// goBuild builds pkg of the tree into out.
func (p previous) goBuild(t testing.TB, pkg, goos, goarch, out string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-trimpath",
		"-ldflags", "-X github.com/raftmaster/raftmaster/internal/version.stamp="+p.Version, "-o", out, pkg)
	cmd.Dir = p.Tree
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch, "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		os.Remove(out)
		t.Fatalf("building %s of the previous release %s: %v\n%s", pkg, p.Version, err, b)
	}
}

// buildProgram builds the program in this package's testdata/dir, written
// against the previous release's API, inside its tree (as
// internal/compat/dir), for this machine, and returns the binary.
func (p previous) buildProgram(t testing.TB, dir string) string {
	t.Helper()
	previousBuild.Lock()
	defer previousBuild.Unlock()
	src := os.DirFS(filepath.Join("testdata", dir))
	dest := filepath.Join("internal", "compat", dir)
	err := fs.WalkDir(src, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(p.Tree, dest, path)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), dir)
	p.goBuild(t, "./"+filepath.ToSlash(dest), runtime.GOOS, runtime.GOARCH, out)
	return out
}
