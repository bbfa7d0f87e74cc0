package objstore

import (
	"fmt"
	"strings"
)

// Allowlist is the set of object-store locations datasets may be read
// from (serve --dataset-buckets): each an s3:// or gs:// bucket,
// optionally with a key prefix taken as a directory.
type Allowlist []Location

// ParseAllowlist parses entries such as s3://bucket or
// gs://bucket/prefix. A prefix names a directory: s3://b/train allows
// s3://b/train/... but not s3://b/training/....
func ParseAllowlist(entries []string) (Allowlist, error) {
	var out Allowlist
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		loc, err := ParseURL(e)
		if err != nil {
			return nil, err
		}
		if hasMeta(loc.Key) {
			return nil, fmt.Errorf("objstore: %q: an allowed location holds no wildcard", e)
		}
		if loc.Key != "" && !strings.HasSuffix(loc.Key, "/") {
			loc.Key += "/"
		}
		out = append(out, loc)
	}
	return out, nil
}

// Allows reports whether every object the pattern loc (as CheckPattern
// returns it) can match lies under one of the list's locations.
func (a Allowlist) Allows(loc Location) bool {
	prefix := LiteralPrefix(loc.Key)
	for _, e := range a {
		if e.Scheme == loc.Scheme && e.Bucket == loc.Bucket && strings.HasPrefix(prefix, e.Key) {
			return true
		}
	}
	return false
}

// Strings returns the entries as URLs.
func (a Allowlist) Strings() []string {
	out := make([]string, len(a))
	for i, e := range a {
		out[i] = strings.TrimSuffix(e.String(), "/")
	}
	return out
}
