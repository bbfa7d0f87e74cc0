package recordio

import (
	"fmt"
	"math"
	"os"

	"slices"
)

// Scanner reads every record of several RecordIO files in turn. Errors name
// the file and, for damaged data, the chunk and its offset.
type Scanner struct {
	paths  []string
	next   int // position in paths of the next file to open
	f      *os.File
	rs     *RangeScanner
	dec    chunkReader
	err    error
	closed bool
}

// NewScanner returns a Scanner over the files matched by globs, as Glob
// matches them with the default limits: sorted by path, without
// duplicates, and an error only when a glob is malformed or none matches a
// file. Files are opened one at a time, as Scan reaches them.
func NewScanner(globs ...string) (*Scanner, error) {
	paths, err := Glob(globs, IndexLimits{MaxFiles: math.MaxInt})
	if err != nil {
		return nil, fmt.Errorf("recordio: %w", err)
	}
	return &Scanner{paths: paths}, nil
}

// Paths returns the files the Scanner reads, in order.
func (s *Scanner) Paths() []string { return slices.Clone(s.paths) }

// Scan advances to the next record, opening the next file when one is done.
// It returns false after the last record or on error; then Err tells which.
func (s *Scanner) Scan() bool {
	for s.err == nil && !s.closed {
		if s.rs == nil && !s.open() {
			return false
		}
		if s.rs.Scan() {
			return true
		}
		if err := s.rs.Err(); err != nil {
			s.err = err
			s.closeFile()
			return false
		}
		if err := s.closeFile(); err != nil {
			s.err = fmt.Errorf("recordio: %w", err)
		}
	}
	return false
}

// open opens the next file and loads its index. It returns false when there
// is no next file or on error.
func (s *Scanner) open() bool {
	if s.next >= len(s.paths) {
		return false
	}
	path := s.paths[s.next]
	s.next++
	f, err := os.Open(path)
	if err != nil {
		s.err = fmt.Errorf("recordio: %w", err)
		return false
	}
	idx, err := loadIndex(f, path)
	if err != nil {
		f.Close()
		s.err = err
		return false
	}
	s.f = f
	s.rs = newRangeScanner(f, idx, 0, -1, path, &s.dec)
	return true
}

func (s *Scanner) closeFile() error {
	s.rs = nil
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}

// Record returns the current record. Like RangeScanner.Record, the slice
// stays valid after later calls to Scan.
func (s *Scanner) Record() []byte {
	if s.rs == nil {
		return nil
	}
	return s.rs.Record()
}

// Err returns the error that stopped Scan, or nil if every file was read.
func (s *Scanner) Err() error { return s.err }

// Close closes the open file, if any; later calls to Scan return false.
func (s *Scanner) Close() error {
	s.closed = true
	if err := s.closeFile(); err != nil {
		return fmt.Errorf("recordio: %w", err)
	}
	return nil
}
