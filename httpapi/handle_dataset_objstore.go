package httpapi

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"time"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/objstore"
	"github.com/raftmaster/raftmaster/recordio"
	"github.com/raftmaster/raftmaster/rpc"
)

// objectPatterns reports whether globs are object-store patterns (s3://,
// gs://). A request mixes none: its patterns are all local or all in
// object stores.
func objectPatterns(globs []string) (bool, error) {
	n := 0
	for _, g := range globs {
		if objstore.IsURL(g) {
			n++
		}
	}
	if n > 0 && n < len(globs) {
		return false, invalidf("give either object-store patterns (s3://, gs://) or local ones, not both")
	}
	return n > 0, nil
}

// objectFiles checks object-store patterns against Config.DatasetBuckets
// and expands them, within the bounds of Config.Glob and lim. A pattern
// outside the allowed buckets is refused before any request is made.
func (s *Handler) objectFiles(ctx context.Context, globs []string, lim recordio.IndexLimits) ([]objstore.Info, error) {
	if s.cfg.ObjectStore == nil || len(s.cfg.DatasetBuckets) == 0 {
		return nil, invalidf("this server reads no object-store datasets: start it with --dataset-buckets naming the buckets (s3://bucket/prefix) it may read")
	}
	allowed, err := objstore.ParseAllowlist(s.cfg.DatasetBuckets)
	if err != nil {
		s.log.Error("the allowed dataset buckets", "error", err)
		return nil, rpc.Errorf(rpc.CodeUnavailable, "the server's allowed dataset buckets are invalid")
	}
	glim := s.cfg.Glob
	maxLevels := glim.MaxWildcardLevels
	if maxLevels <= 0 {
		maxLevels = recordio.DefaultMaxWildcardLevels
	}
	for _, g := range globs {
		loc, err := objstore.CheckPattern(g, fsm.MaxPathLen, maxLevels)
		if err != nil {
			return nil, invalidf("%v", err)
		}
		if !allowed.Allows(loc) {
			return nil, invalidf("pattern %q is outside the buckets this server may read (--dataset-buckets %s)",
				g, strings.Join(allowed.Strings(), ","))
		}
	}
	files, err := s.cfg.ObjectStore.Glob(ctx, globs, lim, glim)
	if err != nil {
		return nil, objectDatasetError(err)
	}
	return files, nil
}

// indexObjects expands and indexes object-store patterns into the
// dataset's chunks, and counts its files.
func (s *Handler) indexObjects(ctx context.Context, globs []string, lim recordio.IndexLimits) ([]fsm.Chunk, int, error) {
	start := time.Now()
	files, err := s.objectFiles(ctx, globs, lim)
	if err != nil {
		return nil, 0, err
	}
	found, sum, stats, err := s.cfg.ObjectStore.Index(ctx, files, lim)
	if err != nil {
		return nil, 0, objectDatasetError(err)
	}
	chunks := make([]fsm.Chunk, len(found))
	for i, c := range found {
		chunks[i] = fsm.Chunk{Path: c.Path, Offset: c.Offset, Records: c.Records}
	}
	s.log.Info("indexed dataset", "files", sum.Files, "chunks", sum.Chunks, "records", sum.Records,
		"index_objects", stats.IndexObjects, "header_scans", stats.HeaderScans, "duration", time.Since(start))
	return chunks, sum.Files, nil
}

// objectDatasetError turns a failure to list or index objects into a 400
// naming the bucket or the object, unless the request was cancelled. The
// store's errors name URLs and the store's error codes, never a
// credential.
func objectDatasetError(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return rpc.Errorf(rpc.CodeUnavailable, "indexing the dataset: %v", err)
	}
	name := ""
	if fe, ok := errors.AsType[*recordio.FileError](err); ok {
		name = fe.Path
	}
	oe, isStore := errors.AsType[*objstore.Error](err)
	switch {
	case errors.Is(err, objstore.ErrNoBucket):
		return invalidf("dataset bucket %q does not exist", oe.URL)
	case errors.Is(err, objstore.ErrAccessDenied):
		return invalidf("dataset location %q: %v", oe.URL, objstore.ErrAccessDenied)
	case errors.Is(err, recordio.ErrCorrupt):
		return invalidf("dataset file %q is not a valid RecordIO file (raftmaster recordio inspect shows why)", name)
	case errors.Is(err, fs.ErrNotExist) && isStore:
		return invalidf("dataset file %q does not exist", oe.URL)
	case isStore:
		return invalidf("dataset location %q cannot be read: %v", oe.URL, oe.Err)
	}
	return invalidf("%v", err)
}
