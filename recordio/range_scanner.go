package recordio

import (
	"io"
)

// RangeScanner reads a range of records of one RecordIO file through its
// Index. It reads and verifies one chunk at a time.
type RangeScanner struct {
	r    io.ReadSeeker
	idx  *Index
	path string
	dec  *chunkReader
	size int64 // file size, -1 until known

	end   int      // one past the last record to read
	cur   int      // record number of the current record
	chunk int      // position in idx of the loaded chunk, -1 if none
	pos   int      // position of the current record in recs
	recs  [][]byte // records of the loaded chunk
	err   error    // io.EOF at the end of the range
}

// NewRangeScanner returns a RangeScanner over the records [start, start+len)
// of the file r described by idx. A negative start means 0; a negative len,
// or one reaching past the end, means up to the last record. An inconsistent
// idx is reported by Err after the first Scan.
func NewRangeScanner(r io.ReadSeeker, idx *Index, start, len int) *RangeScanner {
	return newRangeScanner(r, idx, start, len, "", nil)
}

func newRangeScanner(r io.ReadSeeker, idx *Index, start, n int, path string, dec *chunkReader) *RangeScanner {
	if dec == nil {
		dec = &chunkReader{}
	}
	s := &RangeScanner{r: r, idx: idx, path: path, dec: dec, size: -1, chunk: -1}
	total, err := idx.check()
	if err != nil {
		s.err = err
		return s
	}
	start = max(start, 0)
	if n < 0 || n > total-start {
		n = max(total-start, 0)
	}
	s.cur = start - 1
	s.end = start + n
	return s
}

// Scan advances to the next record, reading its chunk when needed. It
// returns false at the end of the range or on error; then Err tells which.
func (s *RangeScanner) Scan() bool {
	if s.err != nil {
		return false
	}
	next := s.cur + 1
	if next >= s.end {
		s.err = io.EOF
		s.recs = nil
		return false
	}
	if s.chunk < 0 {
		ci, ri := s.idx.Locate(next)
		if !s.load(ci) {
			return false
		}
		s.pos = ri
	} else {
		s.pos++
		for s.pos >= len(s.recs) {
			if !s.load(s.chunk + 1) {
				return false
			}
			s.pos = 0
		}
	}
	s.cur = next
	return true
}

// load reads the i-th chunk of the index.
func (s *RangeScanner) load(i int) bool {
	off := s.idx.ChunkOffsets[i]
	if s.size < 0 {
		size, err := s.r.Seek(0, io.SeekEnd)
		if err != nil {
			return s.fail(i, off, err)
		}
		s.size = size
	}
	c, err := s.dec.read(s.r, off, s.size, s.idx.chunkRecords(i))
	if err != nil {
		return s.fail(i, off, err)
	}
	s.chunk, s.recs = i, c.records
	return true
}

func (s *RangeScanner) fail(i int, off int64, err error) bool {
	if s.idx.NumChunks() == 1 && off != 0 {
		i = -1 // a one-chunk Index does not say which chunk of the file it is
	}
	s.err = &ChunkError{Path: s.path, Chunk: i, Offset: off, Err: err}
	s.recs = nil
	return false
}

// Record returns the current record. The slice stays valid after later calls
// to Scan: each chunk is decoded into a buffer of its own.
func (s *RangeScanner) Record() []byte {
	if s.pos < 0 || s.pos >= len(s.recs) {
		return nil
	}
	return s.recs[s.pos]
}

// Err returns the error that stopped Scan, or nil if Scan reached the end of
// the range.
func (s *RangeScanner) Err() error {
	if s.err == io.EOF {
		return nil
	}
	return s.err
}
