package recordio

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Default bounds of GlobRoot, used for zero fields of GlobLimits.
const (
	DefaultMaxWildcardLevels = 4
	DefaultMaxVisited        = 1_000_000
	DefaultGlobTimeout       = 30 * time.Second
)

// GlobLimits bound the work of expanding patterns with GlobRoot. A zero
// field takes its default.
type GlobLimits struct {
	// MaxWildcardLevels bounds the path elements of one pattern that hold
	// a wildcard: each one is a directory level to list.
	MaxWildcardLevels int
	// MaxVisited bounds the directory entries read for all the patterns
	// together.
	MaxVisited int
	// Timeout bounds the whole expansion.
	Timeout time.Duration
}

// WithDefaults returns l with each limit that is not positive set to
// its default.
func (l GlobLimits) WithDefaults() GlobLimits {
	if l.MaxWildcardLevels <= 0 {
		l.MaxWildcardLevels = DefaultMaxWildcardLevels
	}
	if l.MaxVisited <= 0 {
		l.MaxVisited = DefaultMaxVisited
	}
	if l.Timeout <= 0 {
		l.Timeout = DefaultGlobTimeout
	}
	return l
}

// Dir is a directory tree that GlobRoot and IndexRoot resolve names in,
// names relative to it with slashes: an *os.Root, through which no
// symbolic link or ".." leads out of the tree (a symbolic link with an
// absolute target counts as leading out), or a HostDir, which confines
// nothing.
type Dir interface {
	// Name is the directory's absolute path.
	Name() string
	Open(name string) (*os.File, error)
	OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error)
	Lstat(name string) (fs.FileInfo, error)
	Stat(name string) (fs.FileInfo, error)
}

var _ Dir = (*os.Root)(nil)

// HostDir is a directory of the host's file system as a Dir, with no
// confinement: names are taken under Path ("/" when empty), and symbolic
// links are followed wherever they lead.
type HostDir struct {
	// Path is the directory's absolute path; empty for "/".
	Path string
}

// Name returns the directory's path.
func (d HostDir) Name() string {
	if d.Path == "" {
		return "/"
	}
	return d.Path
}

// Open opens name under the directory.
func (d HostDir) Open(name string) (*os.File, error) { return os.Open(path.Join(d.Name(), name)) }

// OpenFile opens name under the directory with flag and perm.
func (d HostDir) OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	return os.OpenFile(path.Join(d.Name(), name), flag, perm)
}

// Lstat describes name under the directory, not following a final
// symbolic link.
func (d HostDir) Lstat(name string) (fs.FileInfo, error) { return os.Lstat(path.Join(d.Name(), name)) }

// Stat describes name under the directory.
func (d HostDir) Stat(name string) (fs.FileInfo, error) { return os.Stat(path.Join(d.Name(), name)) }

// GlobRoot expands patterns (path.Match syntax) into the files they match
// inside root, which must all be regular files (ErrNotRegular), as paths relative to root, sorted and without
// duplicates. A relative pattern is taken under root; an absolute one must
// lie inside root.Name(). Every directory is listed and every file looked
// at through root, so that no symbolic link or ".." leads out of it. A
// plain pattern matches itself. The index object of a matched file
// (DropIndexObjects) is left out. A pattern that matches nothing is
// skipped, as in Glob; ErrNoMatch reports patterns that match nothing at
// all.
//
// The work is bounded by glim and lim: a pattern may hold wildcards in at
// most MaxWildcardLevels of its path elements, at most MaxVisited
// directory entries are read, the expansion stops after Timeout and when
// ctx ends, and at most lim.MaxFiles files may match. Errors name the
// patterns as given and paths relative to root, never anything outside
// it.
func GlobRoot(ctx context.Context, root Dir, patterns []string, lim IndexLimits, glim GlobLimits) ([]string, error) {
	lim, glim = lim.WithDefaults(), glim.WithDefaults()
	if len(patterns) == 0 {
		return nil, fmt.Errorf("%w: no file patterns given", ErrBadPattern)
	}
	if len(patterns) > lim.MaxGlobs {
		return nil, fmt.Errorf("%w: %d file patterns, at most %d", ErrLimit, len(patterns), lim.MaxGlobs)
	}
	rels := make([]string, len(patterns))
	for i, p := range patterns {
		rel, err := rootPattern(root.Name(), p, lim, glim)
		if err != nil {
			return nil, err
		}
		rels[i] = rel
	}
	ctx, cancel := context.WithTimeoutCause(ctx, glim.Timeout,
		fmt.Errorf("%w: expanding the patterns took longer than %v; make them narrower", ErrLimit, glim.Timeout))
	defer cancel()
	w := &walker{ctx: ctx, root: root, lim: lim, glim: glim, seen: make(map[string]bool)}
	for i, rel := range rels {
		w.pattern = patterns[i]
		if rel == "." {
			continue
		}
		if err := w.walk(".", strings.Split(rel, "/")); err != nil {
			return nil, err
		}
	}
	if len(w.seen) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNoMatch, QuotePatterns(patterns))
	}
	paths := make([]string, 0, len(w.seen))
	for p := range w.seen {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		if w.seen[p] {
			return nil, &FileError{Path: p, Err: ErrNotRegular}
		}
	}
	return DropIndexObjects(paths), nil
}

// rootPattern checks pattern p before anything is read and returns it
// relative to the root directory dir.
func rootPattern(dir, p string, lim IndexLimits, glim GlobLimits) (string, error) {
	switch {
	case p == "":
		return "", fmt.Errorf("%w: empty pattern", ErrBadPattern)
	case len(p) > lim.MaxPathLen:
		return "", fmt.Errorf("%w: pattern of %d bytes, at most %d", ErrBadPattern, len(p), lim.MaxPathLen)
	}
	if _, err := path.Match(p, ""); err != nil {
		return "", fmt.Errorf("%w %q: %v", ErrBadPattern, p, err)
	}
	rel := path.Clean(p)
	if path.IsAbs(rel) {
		dir = path.Clean(dir)
		switch {
		case rel == dir:
			rel = "."
		case dir == "/":
			rel = rel[1:]
		case strings.HasPrefix(rel, dir+"/"):
			rel = rel[len(dir)+1:]
		default:
			return "", fmt.Errorf("pattern %q is %w", p, ErrOutsideRoot)
		}
	}
	if rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("pattern %q is %w", p, ErrOutsideRoot)
	}
	levels := 0
	for _, el := range strings.Split(rel, "/") {
		if hasMeta(el) {
			levels++
		}
	}
	if levels > glim.MaxWildcardLevels {
		return "", fmt.Errorf("%w: pattern %q has wildcards in %d path elements, at most %d", ErrLimit, p, levels, glim.MaxWildcardLevels)
	}
	return rel, nil
}

// hasMeta reports whether a path element holds a path.Match wildcard.
func hasMeta(el string) bool { return strings.ContainsAny(el, `*?[\`) }

// walker expands patterns inside one root, depth first, so that it holds
// one batch of directory entries per wildcard level at most.
type walker struct {
	ctx     context.Context
	root    Dir
	lim     IndexLimits
	glim    GlobLimits
	visited int
	seen    map[string]bool // match: not a regular file
	pattern string
}

// walk matches the path elements els below dir (relative to the root).
func (w *walker) walk(dir string, els []string) error {
	if err := w.ctx.Err(); err != nil {
		return w.stopped()
	}
	// Plain elements are taken as they are, without listing anything.
	i := 0
	for i < len(els) && !hasMeta(els[i]) {
		i++
	}
	if i > 0 {
		dir = path.Join(append([]string{dir}, els[:i]...)...)
		els = els[i:]
	}
	if len(els) == 0 {
		return w.match(dir)
	}
	rest := els[1:]
	// O_DIRECTORY: a FIFO where a directory is expected fails at once
	// instead of blocking the open.
	d, err := w.root.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil // as filepath.Glob: an unreadable directory matches nothing
	}
	defer d.Close()
	if fi, err := d.Stat(); err != nil || !fi.IsDir() {
		return nil
	}
	for {
		ents, err := d.ReadDir(256)
		for _, e := range ents {
			if w.visited++; w.visited > w.glim.MaxVisited {
				return fmt.Errorf("%w: pattern %q: more than %d directory entries to look through; make the patterns narrower", ErrLimit, w.pattern, w.glim.MaxVisited)
			}
			ok, _ := path.Match(els[0], e.Name())
			if !ok {
				continue
			}
			if err := w.walk(path.Join(dir, e.Name()), rest); err != nil {
				return err
			}
		}
		if err := w.ctx.Err(); err != nil {
			return w.stopped()
		}
		if err != nil || len(ents) == 0 {
			return nil // io.EOF, or a directory that stopped being readable
		}
	}
}

// stopped is the error of an expansion whose context ended.
func (w *walker) stopped() error {
	cause := context.Cause(w.ctx)
	if errors.Is(cause, ErrLimit) {
		return fmt.Errorf("pattern %q: %w", w.pattern, cause)
	}
	return cause
}

// match adds name to the matches when it exists, noting whether it is a
// regular file. A symbolic link that leads out of the root is refused.
func (w *walker) match(name string) error {
	fi, err := w.root.Lstat(name)
	if err != nil {
		return nil
	}
	// A dangling link is a match, as in Glob; indexing it fails.
	irregular := false
	if fi.Mode()&fs.ModeSymlink != 0 {
		if fi, err = w.root.Stat(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return &FileError{Path: name, Err: ErrOutsideRoot}
		}
	}
	if err == nil && !fi.Mode().IsRegular() {
		irregular = true
	}
	if len(name) > w.lim.MaxPathLen {
		return fmt.Errorf("%w: path %.64q... is longer than %d bytes", ErrLimit, name, w.lim.MaxPathLen)
	}
	w.seen[name] = irregular
	if len(w.seen) > w.lim.MaxFiles {
		return fmt.Errorf("%w: the patterns match more than %d files", ErrLimit, w.lim.MaxFiles)
	}
	return nil
}

// IndexRoot is IndexFiles on files named relative to root: each file is
// opened through root, so that no symbolic link or ".." leads out of it,
// without blocking (a FIFO cannot hold the call), and only a regular file
// is read. Chunks and errors name the files as in names.
func IndexRoot(ctx context.Context, root Dir, names []string, lim IndexLimits) ([]FileChunk, IndexSummary, error) {
	return IndexRootFunc(ctx, root, names, lim, newFileChunk)
}

// IndexRootFunc is IndexRoot, with each chunk made by chunk from its
// file's name (as in names), its offset and its records, in the order
// IndexRoot lists them: a caller that keeps chunks in a type of its own
// gets them without holding a list of FileChunk as well.
func IndexRootFunc[T any](ctx context.Context, root Dir, names []string, lim IndexLimits, chunk func(name string, offset int64, records uint32) T) ([]T, IndexSummary, error) {
	return indexFilesFunc(ctx, names, lim, func(name string) (*Index, error) { return indexRootFile(root, name) }, chunk)
}

// indexRootFile indexes one file of root.
func indexRootFile(root Dir, name string) (*Index, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, &FileError{Path: name, Err: rootOpenError(err)}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, &FileError{Path: name, Err: errors.New("cannot be read")}
	}
	if !st.Mode().IsRegular() {
		return nil, &FileError{Path: name, Err: ErrNotRegular}
	}
	x, err := LoadIndex(f)
	if err != nil {
		return nil, &FileError{Path: name, Err: err}
	}
	return x, nil
}

// rootOpenError gives the cause of a failed open without the path inside
// the operating system's error, which may be a link's target.
func rootOpenError(err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fs.ErrNotExist
	case errors.Is(err, fs.ErrPermission):
		return fs.ErrPermission
	case errors.Is(err, syscall.ELOOP):
		return errors.New("too many symbolic links")
	}
	if pe, ok := errors.AsType[*fs.PathError](err); ok && strings.Contains(pe.Err.Error(), "escapes") {
		return ErrOutsideRoot
	}
	return errors.New("cannot be opened")
}
