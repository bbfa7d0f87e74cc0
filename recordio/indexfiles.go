package recordio

import (
	"context"
	"fmt"
	"math"
	"os"
	"sync"
	"sync/atomic"
)

// FileChunk is one chunk of a dataset: its file, the offset of its header
// and its record count.
type FileChunk struct {
	Path    string
	Offset  int64
	Records uint32
}

// IndexSummary counts what IndexGlobs or IndexFiles found.
type IndexSummary struct {
	Files   int `json:"files"`
	Chunks  int `json:"chunks"`
	Records int `json:"records"`
}

// IndexGlobs turns file patterns into the chunk list of a dataset: it
// expands them with Glob and indexes the files with IndexFiles. Chunks
// come out in file order and, within a file, in offset order. The leader
// calls it before it proposes a dataset, so that the log carries the
// chunks and followers never touch the files; a client may call it too,
// when the masters cannot see the data volume.
func IndexGlobs(ctx context.Context, globs []string, lim IndexLimits) ([]FileChunk, IndexSummary, error) {
	paths, err := Glob(globs, lim)
	if err != nil {
		return nil, IndexSummary{}, err
	}
	return IndexFiles(ctx, paths, lim)
}

// IndexFiles reads the chunk headers of each file in paths and returns the
// chunks in the order of paths: Path as given, Offset of the chunk header
// and its record count. A file that cannot be opened, is not a regular file
// or is not valid RecordIO gives a *FileError naming it; more than
// lim.MaxChunks chunks give ErrLimit, and no chunk at all ErrEmpty. Up to
// lim.Parallelism files are read at once; when several fail, the error of
// the first in paths order is returned.
func IndexFiles(ctx context.Context, paths []string, lim IndexLimits) ([]FileChunk, IndexSummary, error) {
	return indexFiles(ctx, paths, lim, indexFile)
}

// IndexFilesWith is IndexFiles with index reading the Index of each
// file: the object-store reader passes its own. index should return a
// *FileError naming the path.
func IndexFilesWith(ctx context.Context, paths []string, lim IndexLimits, index func(ctx context.Context, path string) (*Index, error)) ([]FileChunk, IndexSummary, error) {
	return indexFiles(ctx, paths, lim, func(p string) (*Index, error) { return index(ctx, p) })
}

// indexFiles indexes each of paths with index, as IndexFiles describes.
func indexFiles(ctx context.Context, paths []string, lim IndexLimits, index func(string) (*Index, error)) ([]FileChunk, IndexSummary, error) {
	return indexFilesFunc(ctx, paths, lim, index, newFileChunk)
}

func newFileChunk(path string, offset int64, records uint32) FileChunk {
	return FileChunk{Path: path, Offset: offset, Records: records}
}

// indexFilesFunc is indexFiles, with each chunk made by chunk.
func indexFilesFunc[T any](ctx context.Context, paths []string, lim IndexLimits, index func(string) (*Index, error),
	chunk func(path string, offset int64, records uint32) T) ([]T, IndexSummary, error) {
	lim = lim.WithDefaults()
	if len(paths) > lim.MaxFiles {
		return nil, IndexSummary{}, fmt.Errorf("%w: %d files, at most %d", ErrLimit, len(paths), lim.MaxFiles)
	}
	idx := make([]*Index, len(paths))
	errs := make([]error, len(paths))
	// firstFail is the lowest index of a file that failed: files after it
	// need not be read, files before it still must, so that the error
	// reported is always the first in paths order.
	var firstFail atomic.Int64
	firstFail.Store(math.MaxInt64)
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(lim.Parallelism, len(paths)) {
		wg.Go(func() {
			for i := range work {
				if err := ctx.Err(); err != nil {
					errs[i] = err
					continue
				}
				idx[i], errs[i] = index(paths[i])
				for errs[i] != nil {
					f := firstFail.Load()
					if int64(i) >= f || firstFail.CompareAndSwap(f, int64(i)) {
						break
					}
				}
			}
		})
	}
	for i := range paths {
		if int64(i) > firstFail.Load() {
			break
		}
		work <- i
	}
	close(work)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, IndexSummary{}, err
		}
	}
	return collect(paths, idx, lim.MaxChunks, chunk)
}

func indexFile(path string) (*Index, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &FileError{Path: path, Err: err}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, &FileError{Path: path, Err: err}
	}
	if !st.Mode().IsRegular() {
		return nil, &FileError{Path: path, Err: ErrNotRegular}
	}
	x, err := LoadIndex(f)
	if err != nil {
		return nil, &FileError{Path: path, Err: err}
	}
	return x, nil
}

func collect[T any](paths []string, idx []*Index, maxChunks int, chunk func(path string, offset int64, records uint32) T) ([]T, IndexSummary, error) {
	sum := IndexSummary{Files: len(paths)}
	for _, x := range idx {
		sum.Chunks += len(x.ChunkOffsets)
		sum.Records += x.NumRecords
	}
	if sum.Chunks > maxChunks {
		return nil, IndexSummary{}, fmt.Errorf("%w: %d chunks, at most %d", ErrLimit, sum.Chunks, maxChunks)
	}
	if sum.Chunks == 0 {
		return nil, IndexSummary{}, fmt.Errorf("%w: the %d matched files hold no chunk", ErrEmpty, len(paths))
	}
	chunks := make([]T, 0, sum.Chunks)
	for i, x := range idx {
		idx[i] = nil // not needed any more
		for j, off := range x.ChunkOffsets {
			chunks = append(chunks, chunk(paths[i], off, x.ChunkLens[j]))
		}
	}
	return chunks, sum, nil
}
