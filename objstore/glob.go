package objstore

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/raftmaster/raftmaster/recordio"
)

// Glob expands object-store patterns, s3://bucket/keypattern or
// gs://bucket/keypattern, with the rules of recordio.GlobRoot: the key
// pattern has path.Match syntax, in which '*' and '?' do not cross a '/',
// and a plain key matches itself. Each pattern's bucket is listed from
// the literal part of its key, before the first wildcard, and the keys
// are matched against the pattern. It returns the matched objects sorted
// by URL without duplicates, and without the index objects of matched
// objects (recordio.DropIndexObjects). The bucket must be literal.
//
// The work is bounded as GlobRoot's: at most lim.MaxGlobs patterns of at
// most lim.MaxPathLen bytes, glim.MaxWildcardLevels wildcard levels per
// pattern, glim.MaxVisited keys listed in all, lim.MaxFiles matches, and
// glim.Timeout. Errors match recordio.ErrBadPattern, ErrNoMatch and
// ErrLimit, or are *Error values naming a bucket (ErrNoBucket,
// ErrAccessDenied).
func (s *Store) Glob(ctx context.Context, patterns []string, lim recordio.IndexLimits, glim recordio.GlobLimits) ([]Info, error) {
	lim, glim = lim.WithDefaults(), glim.WithDefaults()
	if len(patterns) == 0 {
		return nil, fmt.Errorf("%w: no file patterns given", recordio.ErrBadPattern)
	}
	if len(patterns) > lim.MaxGlobs {
		return nil, fmt.Errorf("%w: %d file patterns, at most %d", recordio.ErrLimit, len(patterns), lim.MaxGlobs)
	}
	locs := make([]Location, len(patterns))
	for i, p := range patterns {
		loc, err := CheckPattern(p, lim.MaxPathLen, glim.MaxWildcardLevels)
		if err != nil {
			return nil, err
		}
		locs[i] = loc
	}
	ctx, cancel := context.WithTimeoutCause(ctx, glim.Timeout,
		fmt.Errorf("%w: listing the patterns took longer than %v; make them narrower", recordio.ErrLimit, glim.Timeout))
	defer cancel()
	seen := make(map[string]Info)
	visited := 0
	for _, loc := range locs {
		prefix := LiteralPrefix(loc.Key)
		err := s.List(ctx, loc.Scheme, loc.Bucket, prefix, func(in Info) error {
			if visited++; visited > glim.MaxVisited {
				return fmt.Errorf("%w: the patterns list more than %d keys; make them narrower", recordio.ErrLimit, glim.MaxVisited)
			}
			key := strings.TrimPrefix(in.URL, loc.Scheme+"://"+loc.Bucket+"/")
			if strings.HasSuffix(key, "/") {
				return nil // a "directory" marker
			}
			if ok, _ := path.Match(loc.Key, key); !ok {
				return nil
			}
			if len(in.URL) > lim.MaxPathLen {
				return fmt.Errorf("%w: URL %.64q... is longer than %d bytes", recordio.ErrLimit, in.URL, lim.MaxPathLen)
			}
			seen[in.URL] = in
			if len(seen) > lim.MaxFiles {
				return fmt.Errorf("%w: the patterns match more than %d files", recordio.ErrLimit, lim.MaxFiles)
			}
			return nil
		})
		if err != nil {
			if c := context.Cause(ctx); c != nil && ctx.Err() != nil {
				return nil, c
			}
			return nil, err
		}
	}
	if len(seen) == 0 {
		return nil, fmt.Errorf("%w: %s", recordio.ErrNoMatch, recordio.QuotePatterns(patterns))
	}
	urls := make([]string, 0, len(seen))
	for u := range seen {
		urls = append(urls, u)
	}
	slices.Sort(urls)
	urls = recordio.DropIndexObjects(urls)
	out := make([]Info, len(urls))
	for i, u := range urls {
		out[i] = seen[u]
	}
	return out, nil
}

// CheckPattern parses an object-store pattern and checks it: a literal
// bucket, a key pattern of path.Match syntax with wildcards in at most
// maxLevels of its '/'-separated elements, at most maxLen bytes in all.
func CheckPattern(p string, maxLen, maxLevels int) (Location, error) {
	if len(p) > maxLen {
		return Location{}, fmt.Errorf("%w: pattern of %d bytes, at most %d", recordio.ErrBadPattern, len(p), maxLen)
	}
	loc, err := ParseURL(p)
	if err != nil {
		return Location{}, fmt.Errorf("%w: %v", recordio.ErrBadPattern, err)
	}
	if loc.Key == "" || strings.HasSuffix(loc.Key, "/") {
		return Location{}, fmt.Errorf("%w %q: name objects, e.g. %s*.recordio", recordio.ErrBadPattern, p, strings.TrimSuffix(p, "/")+"/")
	}
	if _, err := path.Match(loc.Key, ""); err != nil {
		return Location{}, fmt.Errorf("%w %q: %v", recordio.ErrBadPattern, p, err)
	}
	levels := 0
	for _, el := range strings.Split(loc.Key, "/") {
		if hasMeta(el) {
			levels++
		}
	}
	if levels > maxLevels {
		return Location{}, fmt.Errorf("%w: pattern %q has wildcards in %d path elements, at most %d", recordio.ErrLimit, p, levels, maxLevels)
	}
	return loc, nil
}

// LiteralPrefix returns the part of a key pattern before its first
// wildcard: every key it matches starts with it.
func LiteralPrefix(keyPattern string) string {
	if i := strings.IndexAny(keyPattern, `*?[\`); i >= 0 {
		return keyPattern[:i]
	}
	return keyPattern
}

func hasMeta(s string) bool { return strings.ContainsAny(s, `*?[\`) }
