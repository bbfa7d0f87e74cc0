package objstore

import (
	"fmt"
	"strings"
)

// Schemes of object-store URLs.
const (
	SchemeS3 = "s3"
	SchemeGS = "gs"
)

// IsURL reports whether s names an object-store object or pattern: it
// starts with s3:// or gs://.
func IsURL(s string) bool {
	return strings.HasPrefix(s, SchemeS3+"://") || strings.HasPrefix(s, SchemeGS+"://")
}

// Location is a parsed object-store URL.
type Location struct {
	Scheme string // "s3" or "gs"
	Bucket string
	Key    string // may be empty (the whole bucket) or a pattern
}

// String returns the URL: scheme://bucket/key.
func (l Location) String() string {
	return l.Scheme + "://" + l.Bucket + "/" + l.Key
}

// ParseURL parses s3://bucket/key or gs://bucket/key. The bucket must be
// a plain name of 3 to 63 characters (lower-case letters, digits, '.',
// '-' and '_'); the key may be empty.
func ParseURL(s string) (Location, error) {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || (scheme != SchemeS3 && scheme != SchemeGS) {
		return Location{}, fmt.Errorf("objstore: %q is not an s3:// or gs:// URL", s)
	}
	bucket, key, _ := strings.Cut(rest, "/")
	if err := checkBucket(bucket); err != nil {
		return Location{}, fmt.Errorf("objstore: %q: %w", s, err)
	}
	return Location{Scheme: scheme, Bucket: bucket, Key: key}, nil
}

func checkBucket(b string) error {
	if len(b) < 3 || len(b) > 63 {
		return fmt.Errorf("bucket name %q: want 3 to 63 characters", b)
	}
	for _, r := range b {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_') {
			return fmt.Errorf("bucket name %q: want lower-case letters, digits, '.', '-' and '_'", b)
		}
	}
	return nil
}
