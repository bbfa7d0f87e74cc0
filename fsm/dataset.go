package fsm

// dataset is the immutable part of the task queue: settings, the patterns
// it was set with, interned file paths and the chunk list. Snapshots share
// it rather than copy it.
type dataset struct {
	params DatasetParams
	// patterns are the file patterns the dataset was indexed from, as its
	// SetDataset or DatasetCommit gave them: none before Protocol4, or
	// for a chunk list given as such.
	patterns []string
	paths    []string
	chunks   chunkIndex
	// sources are where the sources of a mixture lie (derived from
	// params.Sources); none for a dataset of one source.
	sources []sourceRange
	// bytes is the size estimate of the dataset and its tasks (derived).
	bytes int64
}

// newDataset returns the dataset of params, patterns, paths and chunks,
// with its size estimate.
func newDataset(params DatasetParams, patterns, paths []string, chunks chunkIndex) *dataset {
	d := &dataset{params: params, patterns: patterns, paths: paths, chunks: chunks}
	d.sources = sourceRanges(params.Sources, params.ChunksPerTask)
	d.bytes = pathBytes(patterns) + pathBytes(paths) + estChunk*int64(chunks.len()) + estTask*int64(d.numTasks()) +
		sourcesBytes(params.Sources)
	return d
}

// pathBytes is the size estimate of a path table, or of a list of
// patterns.
func pathBytes(paths []string) int64 {
	var n int64
	for _, p := range paths {
		n += estPath + int64(len(p))
	}
	return n
}

// chunkRef is a chunk with its path interned, as a chunkIndex holds it.
type chunkRef struct {
	offset  int64
	path    uint32
	records uint32
}

// upload is a dataset being staged by DatasetPart entries.
type upload struct {
	paths     []string
	pathIndex map[string]uint32
	chunks    chunkIndex
	parts     uint32
	touched   int64 // FSM time of the last part
	pathBytes int64 // pathBytes(paths) (derived)
}

func (u *upload) add(chunks []Chunk) {
	var p uint32
	last := ""
	for i, c := range chunks {
		// The chunks of a file come together: look a path up once a run.
		if i == 0 || c.Path != last {
			var ok bool
			p, ok = u.pathIndex[c.Path]
			if !ok {
				p = uint32(len(u.paths))
				u.pathIndex[c.Path] = p
				u.paths = append(u.paths, c.Path)
				u.pathBytes += estPath + int64(len(c.Path))
			}
			last = c.Path
		}
		u.chunks.add(chunkRef{offset: c.Offset, path: p, records: c.Records})
	}
}

// size is the size estimate of upload id.
func (u *upload) size(id string) int64 {
	return estUpload + int64(len(id)) + u.pathBytes + estChunk*int64(u.chunks.len())
}

// cost returns how much adding chunks would grow the size estimate of u,
// without adding them.
func (u *upload) cost(chunks []Chunk) int64 {
	n := estChunk * int64(len(chunks))
	var added map[string]bool
	last := ""
	for i, c := range chunks {
		if i > 0 && c.Path == last {
			continue // the chunks of one file usually come together
		}
		last = c.Path
		if _, ok := u.pathIndex[c.Path]; ok || added[c.Path] {
			continue
		}
		if added == nil {
			added = make(map[string]bool)
		}
		added[c.Path] = true
		n += estPath + int64(len(c.Path))
	}
	return n
}

func newUpload() *upload { return &upload{pathIndex: make(map[string]uint32)} }

// numTasks is the number of tasks the chunks make.
func (d *dataset) numTasks() int {
	if n := len(d.sources); n > 0 {
		return d.sources[n-1].task0 + d.sources[n-1].tasks
	}
	cpt := d.params.ChunksPerTask
	return (d.chunks.len() + cpt - 1) / cpt
}

// taskChunks returns the chunks of task index i.
func (d *dataset) taskChunks(i int) []Chunk {
	lo, hi := d.taskSpan(i)
	out := make([]Chunk, 0, hi-lo)
	d.chunks.each(lo, hi, func(c chunkRef) {
		out = append(out, Chunk{Path: d.paths[c.path], Offset: c.offset, Records: c.records})
	})
	return out
}

// checkDataset checks a dataset that is about to be installed against the
// job's limits, with freed the size estimate it frees (an upload's).
func (j *job) checkDataset(d *dataset, freed int64) error {
	if err := d.checkSources(); err != nil {
		return err
	}
	l := j.cluster.effectiveLimits()
	if n := d.chunks.len(); n > l.MaxJobChunks {
		return limitf("max_job_chunks", int64(l.MaxJobChunks), "job %q would have %d chunks", j.name, n)
	}
	if n := d.numTasks(); n > l.MaxJobTasks {
		return limitf("max_job_tasks", int64(l.MaxJobTasks), "job %q would have %d tasks", j.name, n)
	}
	return j.room(d.bytes - freed)
}

// install makes d the dataset and starts pass 0.
func (j *job) install(d *dataset) {
	j.ds = d
	j.setTasks(d.numTasks())
	j.account(d.bytes)
}

// setDataset installs the dataset unless the job has one: the first
// dataset counts, and a later one is ignored whatever its chunks or
// patterns (the caller compares its patterns with the dataset's).
func (j *job) setDataset(c *SetDataset) *Result {
	if j.ds != nil {
		return &Result{Ignored: true}
	}
	u := newUpload()
	u.chunks = newChunkIndex(len(c.Chunks)) // the dataset keeps it
	u.add(c.Chunks)
	d := newDataset(c.Params, c.Patterns, u.paths, u.chunks)
	if err := j.checkDataset(d, 0); err != nil {
		return errResult(err)
	}
	j.install(d)
	return &Result{}
}

func (j *job) datasetPart(c *DatasetPart) *Result {
	if j.ds != nil {
		return &Result{Ignored: true}
	}
	u := j.uploads[c.UploadID]
	switch {
	case u == nil && c.Part != 0:
		return errResult(invalidf("upload %q: unknown upload for part %d", c.UploadID, c.Part))
	case u == nil && len(j.uploads) >= MaxUploads:
		return errResult(invalidf("too many dataset uploads in progress (%d)", MaxUploads))
	case u != nil && c.Part != u.parts:
		return errResult(invalidf("upload %q: part %d out of order, want %d", c.UploadID, c.Part, u.parts))
	}
	l := j.cluster.effectiveLimits()
	if n := j.staged + len(c.Chunks); n > l.MaxJobChunks {
		return errResult(limitf("max_job_chunks", int64(l.MaxJobChunks), "job %q would stage %d chunks", j.name, n))
	}
	var grow int64
	if u == nil {
		grow = newUpload().size(c.UploadID) + newUpload().cost(c.Chunks)
	} else {
		grow = u.cost(c.Chunks)
	}
	if err := j.room(grow); err != nil {
		return errResult(err)
	}
	if u == nil {
		u = newUpload()
		j.uploads[c.UploadID] = u
	}
	u.add(c.Chunks)
	u.parts++
	u.touched = j.cluster.clock
	j.staged += len(c.Chunks)
	j.account(grow)
	return &Result{}
}

func (j *job) datasetCommit(c *DatasetCommit) *Result {
	u := j.uploads[c.UploadID]
	if j.ds != nil {
		if u != nil {
			j.dropUpload(c.UploadID)
		}
		return &Result{Ignored: true}
	}
	switch {
	case u == nil:
		return errResult(invalidf("upload %q: unknown upload", c.UploadID))
	case u.parts != c.Parts || uint32(u.chunks.len()) != c.NumChunks:
		return errResult(invalidf("upload %q: staged %d parts and %d chunks, commit says %d and %d",
			c.UploadID, u.parts, u.chunks.len(), c.Parts, c.NumChunks))
	case u.chunks.len() == 0:
		return errResult(invalidf("upload %q: no chunks", c.UploadID))
	}
	d := newDataset(c.Params, c.Patterns, u.paths, u.chunks)
	if err := j.checkDataset(d, u.size(c.UploadID)); err != nil {
		return errResult(err)
	}
	j.dropUpload(c.UploadID)
	j.install(d)
	return &Result{}
}

// dropUpload forgets upload id.
func (j *job) dropUpload(id string) {
	u := j.uploads[id]
	j.staged -= u.chunks.len()
	j.account(-u.size(id))
	delete(j.uploads, id)
}

// expireUploads drops staged uploads that went idle.
func (j *job) expireUploads() {
	if len(j.uploads) == 0 {
		return
	}
	for _, id := range sortedKeys(j.uploads) {
		if j.cluster.clock-j.uploads[id].touched >= int64(UploadIdleTimeout) {
			j.dropUpload(id)
		}
	}
}
