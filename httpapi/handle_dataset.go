package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/raftmaster/raftmaster/fsm"
	"github.com/raftmaster/raftmaster/recordio"
	"github.com/raftmaster/raftmaster/rpc"
)

// handleSetDataset sets the dataset. The request is checked first; then
// leadership is confirmed with a read barrier, so that a follower
// redirects before it reads any file. When a dataset is already set the
// request is answered Ignored without indexing or proposing anything (as
// the original master did): Chunks and Tasks then describe the dataset in
// place, CurrentPatterns the globs it was set with, and Files is 0; but a
// retry of a request already applied gets its first outcome, so a retry
// of the request that installed the dataset is not Ignored. Otherwise the
// leader indexes the globs, or takes the client's chunk list, and
// proposes it, with the globs as given for the dataset to record. A
// request of Sources (a weighted mixture, fsm.Protocol9) has each
// source's globs indexed apart, as Globs are, and proposes the sources'
// chunk lists one after the other, with each source's name, weight,
// chunk count and globs.
//
// Every trainer calls SetDataset, often at the same moment, so one call of
// a job at a time on a node runs from the check to the proposal: the
// others of the job wait for its outcome and are then answered Ignored,
// and the files are indexed and the chunk list logged once. If the call
// fails, the next one tries its own request. Calls of different jobs do
// not wait for each other.
func (s *Handler) handleSetDataset(w http.ResponseWriter, r *http.Request) error {
	if r.Header.Get(rpc.HeaderSession) != "" {
		// The dataset's entries carry a request id and no session
		// (Backend.SetDataset).
		return invalidf("a dataset is not set under a session: send no %s, and a request id of a client id used outside sessions", rpc.HeaderSession)
	}
	var in rpc.SetDatasetRequest
	req, err := s.readWriteLimit(w, r, &in, s.cfg.Limits.MaxDatasetBodyBytes)
	if err != nil {
		return err
	}
	params, err := s.datasetParams(in)
	if err != nil {
		return err
	}
	if err := s.checkDatasetSource(in); err != nil {
		return err
	}
	ctx := r.Context()
	job := jobOf(r)
	if err := s.b.ReadBarrier(ctx); err != nil {
		return readError(err)
	}
	lim := recordio.IndexLimits{MaxGlobs: s.cfg.Limits.MaxGlobs, MaxFiles: s.cfg.Limits.MaxFiles,
		MaxChunks: min(s.cfg.Limits.MaxChunks, fsm.MaxChunks), MaxPathLen: fsm.MaxPathLen}
	sets, err := globSets(in)
	if err != nil {
		return err
	}
	for _, g := range sets {
		// Expanding and listing are bounded, and catch patterns that
		// match nothing at all even when the request is going to be
		// ignored.
		if err := s.expandGlobs(ctx, g, lim); err != nil {
			return err
		}
	}
	if out, ok := datasetInPlace(s.b.FSM(), job, req); ok {
		writeJSON(w, http.StatusOK, out)
		return nil
	}
	if len(in.Sources) > 0 {
		if err := s.mixtureAllowed(); err != nil {
			return err
		}
	}
	release, err := s.datasetSlots.acquire(ctx, job)
	if err != nil {
		return rpc.Errorf(rpc.CodeUnavailable, "waiting for another dataset request of job %q: %v", job, err)
	}
	defer release()
	// The call that held the slot may have set the dataset, or this node
	// may have lost leadership while it waited.
	if err := s.b.ReadBarrier(ctx); err != nil {
		return readError(err)
	}
	if out, ok := datasetInPlace(s.b.FSM(), job, req); ok {
		writeJSON(w, http.StatusOK, out)
		return nil
	}
	var chunks []fsm.Chunk
	var files int
	switch {
	case len(in.Sources) > 0:
		if chunks, files, params.Sources, err = s.indexSources(ctx, in.Sources, sets, lim); err != nil {
			return err
		}
	case len(sets) > 0:
		if chunks, files, err = s.indexGlobs(ctx, sets[0], lim); err != nil {
			return err
		}
	default:
		chunks, files = clientChunks(in.Chunks)
	}
	patterns := recordedPatterns(s.b.FSM(), in.Globs)
	if params, err = s.datasetOrder(params, in); err != nil {
		return err
	}
	res, err := s.b.SetDataset(ctx, job, req, params, patterns, chunks)
	if err != nil {
		return err
	}
	if err := resultError(res); err != nil {
		return err
	}
	out := rpc.SetDatasetResponse{Ignored: res.Ignored, Files: files, Chunks: len(chunks), Tasks: datasetTasks(len(chunks), params),
		CurrentPatterns: currentPatterns(patterns, params.Sources), Shuffle: params.Shuffle, Seed: params.Seed}
	if res.Ignored {
		out = ignoredDataset(s.b.FSM().Stats(job))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// datasetSlots are one-slot semaphores by job name. A job's slot exists
// while a call holds or waits for it, so the map holds no more than the
// calls in flight.
type datasetSlots struct {
	mu    sync.Mutex
	slots map[string]*datasetSlot
}

// datasetSlot is one job's semaphore and the number of calls holding or
// waiting for it.
type datasetSlot struct {
	ch    chan struct{}
	users int
}

// acquire waits for job's slot, or for ctx to end (then with its cause);
// release gives the slot back.
func (d *datasetSlots) acquire(ctx context.Context, job string) (release func(), err error) {
	d.mu.Lock()
	if d.slots == nil {
		d.slots = make(map[string]*datasetSlot)
	}
	sl := d.slots[job]
	if sl == nil {
		sl = &datasetSlot{ch: make(chan struct{}, 1)}
		d.slots[job] = sl
	}
	sl.users++
	d.mu.Unlock()
	leave := func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if sl.users--; sl.users == 0 {
			delete(d.slots, job)
		}
	}
	select {
	case sl.ch <- struct{}{}:
	case <-ctx.Done():
		leave()
		return nil, context.Cause(ctx)
	}
	return func() { <-sl.ch; leave() }, nil
}

// ignoredDataset answers a request that found a dataset in place, with
// the patterns it was set with.
func ignoredDataset(st fsm.Stats) rpc.SetDatasetResponse {
	return rpc.SetDatasetResponse{Ignored: true, Chunks: st.Chunks, Tasks: st.Tasks, CurrentPatterns: currentPatterns(st.Patterns, st.Params.Sources),
		Shuffle: st.Params.Shuffle, Seed: st.Params.Seed}
}

// currentPatterns are the patterns a dataset answers as its own: those it
// was set with, or a mixture's, its sources' globs one source after the
// other, as its request gave them.
func currentPatterns(patterns []string, sources []fsm.Source) []string {
	if len(sources) == 0 {
		return patterns
	}
	var out []string
	for _, src := range sources {
		out = append(out, src.Patterns...)
	}
	return out
}

// datasetTasks is the number of tasks a dataset of chunks and params
// makes: a mixture's are cut from each source's chunks apart.
func datasetTasks(chunks int, p fsm.DatasetParams) int {
	if len(p.Sources) == 0 {
		return numTasks(chunks, p.ChunksPerTask)
	}
	n := 0
	for _, src := range p.Sources {
		n += numTasks(src.Chunks, p.ChunksPerTask)
	}
	return n
}

// datasetOrder sets the order of the dataset a request proposes, on the
// leader, after a read barrier: from fsm.Protocol8 its shuffle flag
// (true unless the request says false) and its seed, the request's or
// one drawn here, which the dataset records so that every replica
// computes the same permutations. Below that level replicas of earlier
// releases would refuse both, so the dataset keeps id order: a request
// that sets neither is served so, and one that asks for either is
// refused with fsm.ErrUpgradePending (unavailable) rather than served
// in another order than it asked for.
func (s *Handler) datasetOrder(p fsm.DatasetParams, in rpc.SetDatasetRequest) (fsm.DatasetParams, error) {
	if level := s.b.FSM().Protocol(); level < fsm.Protocol8 {
		if in.Seed != nil || (in.Shuffle != nil && *in.Shuffle) {
			return p, fmt.Errorf("%w: a dataset's seed and shuffle need protocol level %d, and the cluster is at %d "+
				"until every node runs a release that knows it; send shuffle false and no seed for id order",
				fsm.ErrUpgradePending, fsm.Protocol8, level)
		}
		return p, nil
	}
	p.Shuffle = in.Shuffle == nil || *in.Shuffle
	if in.Seed != nil {
		p.Seed = *in.Seed
	}
	for p.Seed == 0 && in.Seed == nil {
		p.Seed = rand.Uint64()
	}
	return p, nil
}

// recordedPatterns returns the patterns a dataset indexed from globs
// records: the globs as the request gave them, once the cluster is at
// fsm.Protocol4, which added them to the dataset; none before, when
// replicas of earlier releases would refuse them.
func recordedPatterns(f *fsm.FSM, globs []string) []string {
	if f.Protocol() < fsm.Protocol4 {
		return nil
	}
	return globs
}

// datasetInPlace answers, without indexing or proposing anything, a retry
// of a request that f remembers, as its first outcome (one that installed
// the dataset is not ignored), and a request that finds the job's dataset
// in place, ignored. It reports false for a request to carry out.
func datasetInPlace(f *fsm.FSM, job string, req fsm.RequestID) (rpc.SetDatasetResponse, bool) {
	st := f.Stats(job)
	if first, ok := f.DatasetOutcome(req); ok {
		out := ignoredDataset(st)
		if !first.Ignored {
			out.Ignored, out.Files = false, st.Files
		}
		return out, true
	}
	return ignoredDataset(st), st.HasDataset
}

// datasetParams applies the server's defaults to the request's settings
// and checks them.
func (s *Handler) datasetParams(in rpc.SetDatasetRequest) (fsm.DatasetParams, error) {
	p := s.cfg.DatasetDefaults
	p.Strict = in.Strict
	if in.ChunksPerTask < 0 || in.ChunksPerTask > s.cfg.Limits.MaxChunks {
		return p, invalidf("chunks_per_task %d out of range [1, %d]", in.ChunksPerTask, s.cfg.Limits.MaxChunks)
	}
	if in.ChunksPerTask > 0 {
		p.ChunksPerTask = in.ChunksPerTask
	}
	maxDur := min(s.cfg.Limits.MaxDuration, fsm.MaxTaskTimeout)
	if in.TaskTimeout != 0 {
		if err := checkDuration("task_timeout", time.Duration(in.TaskTimeout), time.Millisecond, maxDur); err != nil {
			return p, err
		}
		p.TaskTimeout = time.Duration(in.TaskTimeout)
	}
	if in.FailureMax != nil {
		if *in.FailureMax < 0 || *in.FailureMax > fsm.MaxFailureMax {
			return p, invalidf("failure_max %d out of range [0, %d]", *in.FailureMax, fsm.MaxFailureMax)
		}
		p.FailureMax = *in.FailureMax
	}
	return p, nil
}

// checkDatasetSource checks that the request names globs, chunks or
// sources, one of them, within the limits. The globs themselves are
// expanded later.
func (s *Handler) checkDatasetSource(in rpc.SetDatasetRequest) error {
	lim := s.cfg.Limits
	switch {
	case len(in.Sources) > 0 && (len(in.Globs) > 0 || len(in.Chunks) > 0):
		return invalidf("give either sources or globs or chunks, not both: a mixture's globs are given in its sources")
	case len(in.Sources) > 0:
		return s.checkSources(in.Sources)
	case len(in.Globs) > 0 && len(in.Chunks) > 0:
		return invalidf("give either globs or chunks, not both")
	case len(in.Globs) == 0 && len(in.Chunks) == 0:
		return invalidf("no dataset: give globs or chunks (or sources, for a mixture)")
	case len(in.Chunks) > lim.MaxChunks:
		return invalidf("%d chunks, at most %d", len(in.Chunks), lim.MaxChunks)
	}
	if err := s.checkGlobs(in.Globs); err != nil {
		return err
	}
	files := make(map[string]struct{})
	for i, c := range in.Chunks {
		if c.Path == "" || len(c.Path) > fsm.MaxPathLen {
			return invalidf("chunk %d: path length %d out of range [1, %d]", i, len(c.Path), fsm.MaxPathLen)
		}
		if c.Offset < 0 {
			return invalidf("chunk %d: negative offset %d", i, c.Offset)
		}
		files[c.Path] = struct{}{}
		if len(files) > lim.MaxFiles {
			return invalidf("chunks name more than %d files", lim.MaxFiles)
		}
	}
	return nil
}

// checkGlobs checks the globs of a dataset, all of its sources' together:
// at most Limits.MaxGlobs, each of 1 to fsm.MaxPathLen bytes, and
// fsm.MaxPatternBytes together, which the dataset records.
func (s *Handler) checkGlobs(globs []string) error {
	if len(globs) > s.cfg.Limits.MaxGlobs {
		return invalidf("%d globs, at most %d", len(globs), s.cfg.Limits.MaxGlobs)
	}
	total := 0
	for i, g := range globs {
		if g == "" || len(g) > fsm.MaxPathLen {
			return invalidf("glob %d: length %d out of range [1, %d]", i, len(g), fsm.MaxPathLen)
		}
		total += len(g)
	}
	if total > fsm.MaxPatternBytes {
		// The dataset records them: they must fit an entry.
		return invalidf("globs of %d bytes together, at most %d", total, fsm.MaxPatternBytes)
	}
	return nil
}

// clientChunks converts the client's chunk list and counts its files.
func clientChunks(in []rpc.Chunk) ([]fsm.Chunk, int) {
	out := make([]fsm.Chunk, len(in))
	files := make(map[string]struct{})
	for i, c := range in {
		out[i] = ChunkToFSM(c)
		files[c.Path] = struct{}{}
	}
	return out, len(files)
}

func numTasks(chunks, perTask int) int {
	if perTask <= 0 {
		return 0
	}
	return (chunks + perTask - 1) / perTask
}

// withDatasetRoot calls fn with the directory tree the patterns globs
// are expanded in, and the patterns to give it. With Config.DatasetRoot,
// it is the root opened as an os.Root, through which every path is
// resolved, so that no symbolic link or ".." leads out of it. Without
// one, it is the host's file system: the server's working directory when
// every pattern is relative and stays below it (the files are then named
// relative to it, as the patterns are), else "/", with relative patterns
// taken under the working directory.
func (s *Handler) withDatasetRoot(globs []string, fn func(root recordio.Dir, globs []string) error) error {
	if s.cfg.DatasetRoot != "" {
		root, err := os.OpenRoot(s.cfg.DatasetRoot)
		if err != nil {
			s.log.Error("opening the dataset root", "error", err)
			return rpc.Errorf(rpc.CodeUnavailable, "the server's dataset root cannot be opened")
		}
		defer root.Close()
		return fn(root, globs)
	}
	wd, err := os.Getwd()
	if err != nil {
		wd = "/"
	}
	below := true
	for _, g := range globs {
		c := filepath.Clean(g)
		below = below && !filepath.IsAbs(c) && c != ".." && !strings.HasPrefix(c, "../")
	}
	if below {
		return fn(recordio.HostDir{Path: wd}, globs)
	}
	abs := make([]string, len(globs))
	for i, g := range globs {
		abs[i] = g
		if !filepath.IsAbs(g) {
			abs[i] = filepath.Join(wd, g)
		}
	}
	return fn(recordio.HostDir{}, abs)
}

// chunkPath is the path a chunk of file name, relative to root, records:
// absolute, except under a working directory that relative patterns were
// expanded in.
func chunkPath(root recordio.Dir, name string) string {
	if d, ok := root.(recordio.HostDir); ok && d.Path != "" {
		return name
	}
	return filepath.Join(root.Name(), name)
}

// datasetFiles expands the request's patterns into the files to index,
// relative to root, within the bounds of Config.Glob. Nothing outside the
// root is listed, opened or named.
func (s *Handler) datasetFiles(ctx context.Context, root recordio.Dir, globs []string, lim recordio.IndexLimits) ([]string, error) {
	files, err := recordio.GlobRoot(ctx, root, globs, lim, s.cfg.Glob)
	if err != nil {
		return nil, datasetError(err, root)
	}
	return files, nil
}

// datasetError turns a GlobRoot or IndexRoot failure into a 400 naming
// the pattern, or the file as the client would name it, unless the
// request itself was cancelled. It never quotes a file's bytes or size,
// nor anything the operating system says of a path.
func datasetError(err error, root recordio.Dir) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return rpc.Errorf(rpc.CodeUnavailable, "indexing the dataset: %v", err)
	}
	if fe, ok := errors.AsType[*recordio.FileError](err); ok {
		name := fe.Path
		if _, ok := root.(recordio.HostDir); ok {
			name = chunkPath(root, name)
		}
		switch {
		case errors.Is(err, recordio.ErrCorrupt):
			return invalidf("dataset file %q is not a valid RecordIO file (raftmaster recordio inspect shows why)", name)
		case errors.Is(err, recordio.ErrOutsideRoot):
			return invalidf("dataset file %q leads %v", name, recordio.ErrOutsideRoot)
		case errors.Is(err, fs.ErrNotExist):
			return invalidf("dataset file %q does not exist", name)
		case errors.Is(err, fs.ErrPermission):
			return invalidf("dataset file %q: permission denied", name)
		case errors.Is(err, recordio.ErrNotRegular):
			return invalidf("dataset file %q is not a regular file", name)
		}
		return invalidf("dataset file %q cannot be read", name)
	}
	return invalidf("%v", err)
}
