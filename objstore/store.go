package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Errors of the store, matched with errors.Is. Errors about one object or
// bucket are *Error values naming its URL.
var (
	// ErrNoBucket means the bucket does not exist.
	ErrNoBucket = errors.New("bucket does not exist")
	// ErrAccessDenied means the store refused the credentials, or they do
	// not grant the request.
	ErrAccessDenied = errors.New("access denied: check the credentials and the bucket's permissions")
)

// Error reports a failed request about one object or bucket. Its message
// names the URL and the cause, never a credential.
type Error struct {
	// URL is the object's or the bucket's URL.
	URL string
	// Err is the cause: ErrNoBucket, ErrAccessDenied, fs.ErrNotExist for
	// a missing object, or what the store or the network said.
	Err error
}

// Error returns "objstore: <url>: <cause>".
func (e *Error) Error() string { return fmt.Sprintf("objstore: %s: %v", e.URL, e.Err) }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Store reads objects of s3:// and gs:// URLs. Its clients are made on
// first use, and it is safe for concurrent use.
type Store struct {
	cfg       Config
	transport http.RoundTripper

	mu      sync.Mutex
	clients map[string]*minio.Core
}

// New returns a Store for cfg.
func New(cfg Config) *Store {
	return &Store{cfg: cfg, clients: make(map[string]*minio.Core)}
}

// NewFromEnv returns a Store configured by ConfigFromEnv.
func NewFromEnv() (*Store, error) {
	cfg, err := ConfigFromEnv()
	if err != nil {
		return nil, err
	}
	return New(cfg), nil
}

// WithTransport sets the HTTP transport of the Store's clients (tests);
// call it before the first request.
func (s *Store) WithTransport(rt http.RoundTripper) *Store {
	s.transport = rt
	return s
}

// Config returns the Store's configuration.
func (s *Store) Config() Config { return s.cfg }

// client returns the client of scheme, made on first use.
func (s *Store) client(scheme string) (*minio.Core, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.clients[scheme]; c != nil {
		return c, nil
	}
	var (
		opts   minio.Options
		setEnd string
		def    string
	)
	switch scheme {
	case SchemeS3:
		setEnd, def = s.cfg.S3Endpoint, DefaultS3Endpoint
		providers := []credentials.Provider{&credentials.EnvAWS{}, &credentials.FileAWSCredentials{}}
		if !s.cfg.NoIAM {
			providers = append(providers, &credentials.IAM{})
		}
		opts.Creds = credentials.NewChainCredentials(providers)
		opts.Region = s.cfg.S3Region
		switch s.cfg.S3PathStyle {
		case PathStyleOn:
			opts.BucketLookup = minio.BucketLookupPath
		case PathStyleOff:
			opts.BucketLookup = minio.BucketLookupDNS
		}
	case SchemeGS:
		setEnd, def = s.cfg.GSEndpoint, DefaultGSEndpoint
		id, secret := os.Getenv(EnvGSAccessKey), os.Getenv(EnvGSSecretKey)
		if id != "" || secret != "" {
			opts.Creds = credentials.NewStaticV4(id, secret, "")
		} else {
			opts.Creds = credentials.NewStatic("", "", "", credentials.SignatureAnonymous)
		}
		opts.Region = "auto"
		opts.BucketLookup = minio.BucketLookupPath
	default:
		return nil, fmt.Errorf("objstore: unknown scheme %q", scheme)
	}
	host, secure, err := endpoint(setEnd, def)
	if err != nil {
		return nil, err
	}
	opts.Secure = secure
	opts.Transport = s.transport
	opts.MaxRetries = 3
	c, err := minio.NewCore(host, &opts)
	if err != nil {
		return nil, fmt.Errorf("objstore: %s endpoint %q: %v", scheme, host, err)
	}
	s.clients[scheme] = c
	return c, nil
}

// Info describes an object.
type Info struct {
	// URL is the object's URL.
	URL string
	// Size is its size in bytes.
	Size int64
	// ETag is its entity tag, without quotes.
	ETag string
}

// Stat returns the size and entity tag of the object at url.
func (s *Store) Stat(ctx context.Context, url string) (Info, error) {
	loc, c, err := s.locate(url)
	if err != nil {
		return Info{}, err
	}
	oi, err := c.StatObject(ctx, loc.Bucket, loc.Key, minio.StatObjectOptions{})
	if err != nil {
		return Info{}, s.wrap(loc, err)
	}
	return Info{URL: url, Size: oi.Size, ETag: trimETag(oi.ETag)}, nil
}

// readRange reads len(p) bytes of the object at loc from byte off with
// one ranged GET, and returns how many it read: fewer only at the end of
// the object.
func (s *Store) readRange(ctx context.Context, loc Location, c *minio.Core, off int64, p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var opts minio.GetObjectOptions
	if err := opts.SetRange(off, off+int64(len(p))-1); err != nil {
		return 0, &Error{URL: loc.String(), Err: err}
	}
	body, _, _, err := c.GetObject(ctx, loc.Bucket, loc.Key, opts)
	if err != nil {
		return 0, s.wrap(loc, err)
	}
	defer body.Close()
	n, err := io.ReadFull(body, p)
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		err = nil
	}
	if err != nil {
		return n, s.wrap(loc, err)
	}
	return n, nil
}

// ReadRange reads len(p) bytes of the object at url from byte off, with
// one ranged GET, and returns how many it read: fewer only at the end of
// the object.
func (s *Store) ReadRange(ctx context.Context, url string, off int64, p []byte) (int, error) {
	loc, c, err := s.locate(url)
	if err != nil {
		return 0, err
	}
	return s.readRange(ctx, loc, c, off, p)
}

// ReadAll reads the whole object at url with one GET. An object larger
// than limit bytes is an error.
func (s *Store) ReadAll(ctx context.Context, url string, limit int64) ([]byte, error) {
	loc, c, err := s.locate(url)
	if err != nil {
		return nil, err
	}
	body, _, _, err := c.GetObject(ctx, loc.Bucket, loc.Key, minio.GetObjectOptions{})
	if err != nil {
		return nil, s.wrap(loc, err)
	}
	defer body.Close()
	b, err := io.ReadAll(io.LimitReader(body, limit+1))
	if err != nil {
		return nil, s.wrap(loc, err)
	}
	if int64(len(b)) > limit {
		return nil, &Error{URL: url, Err: fmt.Errorf("larger than %d bytes", limit)}
	}
	return b, nil
}

// Put writes data as the object at url.
func (s *Store) Put(ctx context.Context, url string, data []byte) error {
	loc, c, err := s.locate(url)
	if err != nil {
		return err
	}
	_, err = c.Client.PutObject(ctx, loc.Bucket, loc.Key, strings.NewReader(string(data)), int64(len(data)),
		minio.PutObjectOptions{ContentType: "application/octet-stream", DisableMultipart: true})
	if err != nil {
		return s.wrap(loc, err)
	}
	return nil
}

// List calls fn for each object whose key starts with prefix in the
// bucket of scheme, in key order, until fn returns an error, which List
// returns.
func (s *Store) List(ctx context.Context, scheme, bucket, prefix string, fn func(Info) error) error {
	loc := Location{Scheme: scheme, Bucket: bucket}
	if err := checkBucket(bucket); err != nil {
		return fmt.Errorf("objstore: %w", err)
	}
	c, err := s.client(scheme)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for oi := range c.Client.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if oi.Err != nil {
			return s.wrap(loc, oi.Err)
		}
		if err := fn(Info{URL: Location{Scheme: scheme, Bucket: bucket, Key: oi.Key}.String(), Size: oi.Size, ETag: trimETag(oi.ETag)}); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// locate parses url and returns its client.
func (s *Store) locate(url string) (Location, *minio.Core, error) {
	loc, err := ParseURL(url)
	if err != nil {
		return loc, nil, err
	}
	if loc.Key == "" {
		return loc, nil, fmt.Errorf("objstore: %q names a bucket, not an object", url)
	}
	c, err := s.client(loc.Scheme)
	return loc, c, err
}

// wrap turns a client error into an *Error naming loc: a missing bucket,
// a missing object and refused credentials get causes of their own.
// Only the store's error code and message are kept, which hold no
// credential.
func (s *Store) wrap(loc Location, err error) error {
	var resp minio.ErrorResponse
	if errors.As(err, &resp) {
		switch resp.Code {
		case "NoSuchBucket":
			return &Error{URL: loc.Scheme + "://" + loc.Bucket, Err: ErrNoBucket}
		case "NoSuchKey", "NotFound":
			if resp.Code == "NotFound" && loc.Key == "" {
				return &Error{URL: loc.Scheme + "://" + loc.Bucket, Err: ErrNoBucket}
			}
			return &Error{URL: loc.String(), Err: fs.ErrNotExist}
		case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken",
			"ExpiredToken", "InvalidSecurity", "AllAccessDisabled", "AuthorizationHeaderMalformed":
			return &Error{URL: loc.String(), Err: fmt.Errorf("%w (%s)", ErrAccessDenied, resp.Code)}
		}
		if resp.StatusCode == http.StatusForbidden {
			return &Error{URL: loc.String(), Err: fmt.Errorf("%w (%s)", ErrAccessDenied, resp.Code)}
		}
		msg := resp.Code
		if resp.Message != "" {
			msg += ": " + resp.Message
		}
		return &Error{URL: loc.String(), Err: errors.New(msg)}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &Error{URL: loc.String(), Err: err}
	}
	if strings.Contains(err.Error(), "Access Key Id") || strings.Contains(err.Error(), "credentials") {
		return &Error{URL: loc.String(), Err: fmt.Errorf("%w (%v)", ErrAccessDenied, err)}
	}
	return &Error{URL: loc.String(), Err: err}
}

func trimETag(e string) string { return strings.Trim(e, `"`) }
