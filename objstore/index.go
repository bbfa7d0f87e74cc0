package objstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync/atomic"

	"github.com/raftmaster/raftmaster/recordio"
)

// IndexStats counts how the files of an Index call were indexed.
type IndexStats struct {
	// IndexObjects counts the files indexed from their index object.
	IndexObjects int
	// HeaderScans counts the files whose chunk headers were read, because
	// their index object was missing, damaged or stale.
	HeaderScans int
}

// Index returns the chunks of the objects files lists (as Glob returns
// them), in that order, as recordio.IndexFiles does for local files. For
// each object it reads its index object (URL + recordio.IndexSuffix) with
// one GET and checks it: it must decode, record the object's size (and
// entity tag, when it records one), and the last chunk's header, read
// with one ranged GET, must agree with it. Otherwise the chunk headers
// are read one ranged GET each. Up to lim.Parallelism objects are indexed
// at once. An object that is not valid RecordIO fails as a
// *recordio.FileError matching recordio.ErrCorrupt; one that cannot be
// read wraps the *Error.
func (s *Store) Index(ctx context.Context, files []Info, lim recordio.IndexLimits) ([]recordio.FileChunk, recordio.IndexSummary, IndexStats, error) {
	lim = lim.WithDefaults()
	byURL := make(map[string]Info, len(files))
	urls := make([]string, len(files))
	for i, f := range files {
		byURL[f.URL] = f
		urls[i] = f.URL
	}
	var fromIndex, scanned atomic.Int64
	chunks, sum, err := recordio.IndexFilesWith(ctx, urls, lim, func(ctx context.Context, url string) (*recordio.Index, error) {
		info := byURL[url]
		if idx, err := s.indexFromObject(ctx, info, lim.MaxChunks); err == nil {
			fromIndex.Add(1)
			return idx, nil
		}
		scanned.Add(1)
		idx, err := s.ScanHeaders(ctx, info)
		if err != nil {
			return nil, &recordio.FileError{Path: url, Err: err}
		}
		return idx, nil
	})
	return chunks, sum, IndexStats{IndexObjects: int(fromIndex.Load()), HeaderScans: int(scanned.Load())}, err
}

// indexFromObject reads and checks the index object of info.
func (s *Store) indexFromObject(ctx context.Context, info Info, maxChunks int) (*recordio.Index, error) {
	b, err := s.ReadAll(ctx, info.URL+recordio.IndexSuffix, recordio.MaxIndexObjectSize(maxChunks))
	if err != nil {
		return nil, err
	}
	obj, err := recordio.DecodeIndexObject(b)
	if err != nil {
		return nil, err
	}
	if obj.Size != info.Size {
		return nil, fmt.Errorf("%w: it indexes a file of %d bytes, the object has %d", recordio.ErrBadIndexObject, obj.Size, info.Size)
	}
	if obj.ETag != "" && info.ETag != "" && trimETag(obj.ETag) != info.ETag {
		return nil, fmt.Errorf("%w: it indexes another version of the object", recordio.ErrBadIndexObject)
	}
	if n := obj.Index.NumChunks(); n > 0 {
		var hdr [recordio.HeaderSize]byte
		got, err := s.ReadRange(ctx, info.URL, obj.Index.ChunkOffsets[n-1], hdr[:])
		if err != nil {
			return nil, err
		}
		if err := recordio.CheckLastChunkHeader(obj.Index, info.Size, hdr[:got]); err != nil {
			return nil, err
		}
	}
	return obj.Index, nil
}

// ScanHeaders indexes the object info describes by reading its chunk
// headers, one ranged GET each.
func (s *Store) ScanHeaders(ctx context.Context, info Info) (*recordio.Index, error) {
	o, err := s.OpenInfo(ctx, info)
	if err != nil {
		return nil, err
	}
	defer o.Close()
	o.SetReadahead(recordio.HeaderSize)
	return recordio.LoadIndex(o)
}

// WriteIndexObject indexes the object at url by reading its chunk headers
// and writes its index object beside it, recording its size and entity
// tag. It returns the index.
func (s *Store) WriteIndexObject(ctx context.Context, url string) (*recordio.Index, error) {
	info, err := s.Stat(ctx, url)
	if err != nil {
		return nil, err
	}
	idx, err := s.ScanHeaders(ctx, info)
	if err != nil {
		return nil, err
	}
	b, err := recordio.EncodeIndexObject(idx, info.Size, info.ETag)
	if err != nil {
		return nil, err
	}
	if err := s.Put(ctx, url+recordio.IndexSuffix, b); err != nil {
		return nil, err
	}
	return idx, nil
}

// IsNotExist reports whether err says an object or a bucket does not
// exist.
func IsNotExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrNoBucket)
}
