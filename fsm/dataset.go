package fsm

// dataset is the immutable part of the task queue: settings, interned file
// paths and the chunk list. Snapshots share it rather than copy it.
type dataset struct {
	params DatasetParams
	paths  []string
	chunks []chunkRef
}

// chunkRef is a chunk with its path interned: 16 bytes each.
type chunkRef struct {
	offset  int64
	path    uint32
	records uint32
}

// upload is a dataset being staged by DatasetPart entries.
type upload struct {
	paths     []string
	pathIndex map[string]uint32
	chunks    []chunkRef
	parts     uint32
	touched   int64 // FSM time of the last part
}

func (u *upload) add(chunks []Chunk) {
	for _, c := range chunks {
		p, ok := u.pathIndex[c.Path]
		if !ok {
			p = uint32(len(u.paths))
			u.pathIndex[c.Path] = p
			u.paths = append(u.paths, c.Path)
		}
		u.chunks = append(u.chunks, chunkRef{offset: c.Offset, path: p, records: c.Records})
	}
}

func newUpload() *upload { return &upload{pathIndex: make(map[string]uint32)} }

// numTasks is the number of tasks the chunks make.
func (d *dataset) numTasks() int {
	cpt := d.params.ChunksPerTask
	return (len(d.chunks) + cpt - 1) / cpt
}

// taskChunks returns the chunks of task index i.
func (d *dataset) taskChunks(i int) []Chunk {
	cpt := d.params.ChunksPerTask
	lo, hi := i*cpt, min((i+1)*cpt, len(d.chunks))
	out := make([]Chunk, 0, hi-lo)
	for _, c := range d.chunks[lo:hi] {
		out = append(out, Chunk{Path: d.paths[c.path], Offset: c.offset, Records: c.records})
	}
	return out
}

// install makes d the dataset and starts pass 0.
func (s *state) install(d *dataset) {
	s.ds = d
	s.setTasks(d.numTasks())
}

func (s *state) setDataset(c *SetDataset) *Result {
	if s.ds != nil {
		return &Result{Ignored: true}
	}
	u := newUpload()
	u.chunks = make([]chunkRef, 0, len(c.Chunks)) // the dataset keeps it
	u.add(c.Chunks)
	s.install(&dataset{params: c.Params, paths: u.paths, chunks: u.chunks})
	return &Result{}
}

func (s *state) datasetPart(c *DatasetPart) *Result {
	if s.ds != nil {
		return &Result{Ignored: true}
	}
	u := s.uploads[c.UploadID]
	switch {
	case u == nil && c.Part != 0:
		return errResult(invalidf("upload %q: unknown upload for part %d", c.UploadID, c.Part))
	case u == nil && len(s.uploads) >= MaxUploads:
		return errResult(invalidf("too many dataset uploads in progress (%d)", MaxUploads))
	case u != nil && c.Part != u.parts:
		return errResult(invalidf("upload %q: part %d out of order, want %d", c.UploadID, c.Part, u.parts))
	case u != nil && len(u.chunks)+len(c.Chunks) > MaxChunks:
		return errResult(invalidf("upload %q: more than %d chunks", c.UploadID, MaxChunks))
	}
	if u == nil {
		u = newUpload()
		s.uploads[c.UploadID] = u
	}
	u.add(c.Chunks)
	u.parts++
	u.touched = s.clock
	return &Result{}
}

func (s *state) datasetCommit(c *DatasetCommit) *Result {
	u := s.uploads[c.UploadID]
	if s.ds != nil {
		delete(s.uploads, c.UploadID)
		return &Result{Ignored: true}
	}
	switch {
	case u == nil:
		return errResult(invalidf("upload %q: unknown upload", c.UploadID))
	case u.parts != c.Parts || uint32(len(u.chunks)) != c.NumChunks:
		return errResult(invalidf("upload %q: staged %d parts and %d chunks, commit says %d and %d",
			c.UploadID, u.parts, len(u.chunks), c.Parts, c.NumChunks))
	case len(u.chunks) == 0:
		return errResult(invalidf("upload %q: no chunks", c.UploadID))
	}
	delete(s.uploads, c.UploadID)
	s.install(&dataset{params: c.Params, paths: u.paths, chunks: u.chunks})
	return &Result{}
}

// expireUploads drops staged uploads that went idle.
func (s *state) expireUploads() {
	for _, id := range sortedKeys(s.uploads) {
		if s.clock-s.uploads[id].touched >= int64(UploadIdleTimeout) {
			delete(s.uploads, id)
		}
	}
}
