package recordio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
)

// errClosed is returned by Write after Close.
var errClosed = errors.New("recordio: write to closed Writer")

// Writer writes records to a RecordIO file, a chunk at a time.
type Writer struct {
	w            io.Writer
	maxChunkSize int
	compressor   int

	raw        []byte // pending chunk data: length-prefixed records
	numRecords int    // records in raw
	numBytes   int    // record bytes in raw, length prefixes not counted

	comp   bytes.Buffer // compressed chunk data, reused
	snappy *s2.Writer
	gzip   *gzip.Writer

	closed bool
	err    error // sticky
}

// NewWriter returns a Writer that writes to w. A chunk is written when adding
// the next record would take the chunk's record bytes (length prefixes not
// counted) above maxChunkSize, so a record larger than maxChunkSize gets a
// chunk of its own. compressor is NoCompression, Snappy or Gzip. A negative
// maxChunkSize means 32 MiB and a negative compressor means Snappy, the
// original's defaults. An unknown compressor makes Write fail.
func NewWriter(w io.Writer, maxChunkSize, compressor int) *Writer {
	if maxChunkSize < 0 {
		maxChunkSize = defaultMaxChunkSize
	}
	if compressor < 0 {
		compressor = defaultCompressor
	}
	wr := &Writer{w: w, maxChunkSize: maxChunkSize, compressor: compressor}
	if compressor > Gzip {
		wr.err = fmt.Errorf("recordio: unknown compressor %d", compressor)
	}
	return wr
}

// Write adds a record. The record is copied, so the caller may reuse it. It
// returns len(record), or an error if the record is too large for the format
// (4 GiB), if writing a chunk failed or if Close was called.
func (w *Writer) Write(record []byte) (int, error) {
	if w.closed {
		return 0, errClosed
	}
	if w.err != nil {
		return 0, w.err
	}
	if int64(len(record)) > math.MaxUint32-4 {
		return 0, fmt.Errorf("recordio: record of %d bytes is too large", len(record))
	}
	if w.numRecords > 0 && (w.numBytes+len(record) > w.maxChunkSize ||
		len(w.raw)+4+len(record) > math.MaxUint32 || w.numRecords == math.MaxUint32) {
		if err := w.flush(); err != nil {
			return 0, err
		}
	}
	w.raw = binary.LittleEndian.AppendUint32(w.raw, uint32(len(record)))
	w.raw = append(w.raw, record...)
	w.numRecords++
	w.numBytes += len(record)
	return len(record), nil
}

// flush writes the pending chunk, if any.
func (w *Writer) flush() error {
	if w.numRecords == 0 {
		return nil
	}
	data, err := w.compress()
	if err != nil {
		w.err = fmt.Errorf("recordio: compressing chunk: %w", err)
		return w.err
	}
	if len(data) > math.MaxUint32 {
		w.err = fmt.Errorf("recordio: compressed chunk of %d bytes is too large", len(data))
		return w.err
	}
	h := header{
		checksum:       crc32.ChecksumIEEE(data),
		compressor:     uint32(w.compressor),
		compressedSize: uint32(len(data)),
		numRecords:     uint32(w.numRecords),
	}
	var hb [headerSize]byte
	h.encode(&hb)
	if _, err := w.w.Write(hb[:]); err != nil {
		w.err = fmt.Errorf("recordio: writing chunk header: %w", err)
		return w.err
	}
	if _, err := w.w.Write(data); err != nil {
		w.err = fmt.Errorf("recordio: writing chunk data: %w", err)
		return w.err
	}
	w.raw, w.numRecords, w.numBytes = w.raw[:0], 0, 0
	return nil
}

// compress returns the pending chunk's data as stored.
func (w *Writer) compress() ([]byte, error) {
	if w.compressor == NoCompression {
		return w.raw, nil
	}
	w.comp.Reset()
	var zw io.WriteCloser
	switch w.compressor {
	case Snappy:
		if w.snappy == nil {
			w.snappy = s2.NewWriter(&w.comp, s2.WriterSnappyCompat())
		} else {
			w.snappy.Reset(&w.comp)
		}
		zw = w.snappy
	case Gzip:
		if w.gzip == nil {
			w.gzip = gzip.NewWriter(&w.comp)
		} else {
			w.gzip.Reset(&w.comp)
		}
		zw = w.gzip
	}
	if _, err := zw.Write(w.raw); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return w.comp.Bytes(), nil
}

// Close writes the pending chunk. It does not close the underlying writer.
// Calling Close again does nothing.
func (w *Writer) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	if w.err != nil {
		return w.err
	}
	return w.flush()
}
