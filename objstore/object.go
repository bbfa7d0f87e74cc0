package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/minio/minio-go/v7"
)

// DefaultReadahead is how many bytes an Object asks for at least in one
// ranged GET: a chunk smaller than that is read with one request.
const DefaultReadahead = 1 << 20

// Object is an open object: an io.ReadSeeker and io.ReaderAt over ranged
// GETs, so that reading a chunk costs a request or two however large the
// object is. Each read outside its buffer is one GET of at least
// Readahead bytes. It is not safe for concurrent use.
type Object struct {
	s    *Store
	c    *minio.Core
	loc  Location
	ctx  context.Context
	size int64
	etag string

	pos       int64
	buf       []byte
	bufOff    int64
	readahead int
	requests  int
}

// Open opens the object at url: one HEAD learns its size and entity tag;
// reads are ranged GETs, made under ctx.
func (s *Store) Open(ctx context.Context, url string) (*Object, error) {
	info, err := s.Stat(ctx, url)
	if err != nil {
		return nil, err
	}
	return s.OpenInfo(ctx, info)
}

// OpenInfo opens the object info describes, whose size is known (from a
// listing), without a request.
func (s *Store) OpenInfo(ctx context.Context, info Info) (*Object, error) {
	loc, c, err := s.locate(info.URL)
	if err != nil {
		return nil, err
	}
	return &Object{s: s, c: c, loc: loc, ctx: ctx, size: info.Size, etag: info.ETag, readahead: DefaultReadahead}, nil
}

// Opener returns a function that opens the object at a URL for reading,
// under ctx: the form client.WithChunkOpener takes.
func (s *Store) Opener() func(ctx context.Context, url string) (io.ReadSeekCloser, error) {
	return func(ctx context.Context, url string) (io.ReadSeekCloser, error) {
		o, err := s.Open(ctx, url)
		if err != nil {
			return nil, err
		}
		return o, nil
	}
}

// SetReadahead sets the least number of bytes one GET asks for; n < 1
// means 1.
func (o *Object) SetReadahead(n int) { o.readahead = max(n, 1) }

// Size returns the object's size.
func (o *Object) Size() int64 { return o.size }

// ETag returns the object's entity tag, without quotes.
func (o *Object) ETag() string { return o.etag }

// Requests returns the number of GETs made so far.
func (o *Object) Requests() int { return o.requests }

// Read reads from the current offset.
func (o *Object) Read(p []byte) (int, error) {
	n, err := o.ReadAt(p, o.pos)
	o.pos += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

// ReadAt reads len(p) bytes from off. It returns io.EOF with fewer bytes
// at the end of the object.
func (o *Object) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, &Error{URL: o.loc.String(), Err: errors.New("negative offset")}
	}
	done := 0
	for done < len(p) {
		at := off + int64(done)
		if at >= o.size {
			return done, io.EOF
		}
		if at >= o.bufOff && at < o.bufOff+int64(len(o.buf)) {
			done += copy(p[done:], o.buf[at-o.bufOff:])
			continue
		}
		want := min(int64(len(p)-done), o.size-at)
		if want >= int64(o.readahead) {
			// Large enough: straight into p.
			n, err := o.get(at, p[done:done+int(want)])
			done += n
			if err != nil {
				return done, err
			}
			if int64(n) < want {
				return done, io.ErrUnexpectedEOF
			}
			continue
		}
		n := int(min(int64(o.readahead), o.size-at))
		if cap(o.buf) < n {
			o.buf = make([]byte, n)
		}
		o.buf = o.buf[:n]
		got, err := o.get(at, o.buf)
		o.buf, o.bufOff = o.buf[:got], at
		if err != nil {
			return done, err
		}
		if got == 0 {
			return done, io.ErrUnexpectedEOF
		}
	}
	return done, nil
}

func (o *Object) get(off int64, p []byte) (int, error) {
	if err := o.ctx.Err(); err != nil {
		return 0, err
	}
	o.requests++
	return o.s.readRange(o.ctx, o.loc, o.c, off, p)
}

// Seek sets the offset of the next Read.
func (o *Object) Seek(offset int64, whence int) (int64, error) {
	var abs int64
	switch whence {
	case io.SeekStart:
		abs = offset
	case io.SeekCurrent:
		abs = o.pos + offset
	case io.SeekEnd:
		abs = o.size + offset
	default:
		return o.pos, fmt.Errorf("objstore: seek: bad whence %d", whence)
	}
	if abs < 0 {
		return o.pos, fmt.Errorf("objstore: seek to negative offset %d", abs)
	}
	o.pos = abs
	return abs, nil
}

// Close releases the buffer. No connection is held between reads.
func (o *Object) Close() error {
	o.buf = nil
	return nil
}
