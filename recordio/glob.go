package recordio

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// Glob returns the files matched by globs (patterns as filepath.Glob takes
// them; a plain path matches itself), sorted by path and without
// duplicates, and without the index objects of matched files
// (DropIndexObjects). As in the original master, a pattern that matches nothing
// is skipped. It fails with ErrBadPattern for an empty, overlong or
// malformed pattern, ErrNoMatch naming the patterns when none of them
// matches a file, and ErrLimit when there are more than lim.MaxGlobs
// patterns or lim.MaxFiles files, or a matched path is longer than
// lim.MaxPathLen.
func Glob(globs []string, lim IndexLimits) ([]string, error) {
	lim = lim.WithDefaults()
	if len(globs) == 0 {
		return nil, fmt.Errorf("%w: no file patterns given", ErrBadPattern)
	}
	if len(globs) > lim.MaxGlobs {
		return nil, fmt.Errorf("%w: %d file patterns, at most %d", ErrLimit, len(globs), lim.MaxGlobs)
	}
	seen := make(map[string]struct{})
	for _, g := range globs {
		if g == "" {
			return nil, fmt.Errorf("%w: empty pattern", ErrBadPattern)
		}
		if len(g) > lim.MaxPathLen {
			return nil, fmt.Errorf("%w: pattern of %d bytes, at most %d", ErrBadPattern, len(g), lim.MaxPathLen)
		}
		m, err := filepath.Glob(g)
		if err != nil {
			return nil, fmt.Errorf("%w %q: %v", ErrBadPattern, g, err)
		}
		for _, p := range m {
			if len(p) > lim.MaxPathLen {
				return nil, fmt.Errorf("%w: path %.64q... is longer than %d bytes", ErrLimit, p, lim.MaxPathLen)
			}
			seen[p] = struct{}{}
		}
		if len(seen) > lim.MaxFiles {
			return nil, fmt.Errorf("%w: the patterns match more than %d files", ErrLimit, lim.MaxFiles)
		}
	}
	if len(seen) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNoMatch, QuotePatterns(globs))
	}
	paths := make([]string, 0, len(seen))
	for p := range seen {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	return DropIndexObjects(paths), nil
}

// QuotePatterns quotes the patterns for an error message, at most a few
// of them.
func QuotePatterns(globs []string) string {
	const most = 8
	var b strings.Builder
	for i, g := range globs[:min(len(globs), most)] {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", g)
	}
	if len(globs) > most {
		fmt.Fprintf(&b, " and %d more", len(globs)-most)
	}
	return b.String()
}
