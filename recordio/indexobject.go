package recordio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// IndexSuffix ends the name of a RecordIO file's index object: the index
// of data/train-00000.recordio is data/train-00000.recordio.idx.
const IndexSuffix = ".idx"

// indexMagic starts every index object; indexVersion is the layout
// described at EncodeIndexObject.
const (
	indexMagic   = "RIOINDEX"
	indexVersion = 1

	indexHeaderSize = 8 + 4 + 8 + 4 + 8 // magic, version, file size, etag length, chunks
	indexEntrySize  = 8 + 4             // chunk offset, records
	indexTrailer    = 4                 // CRC-32
	maxIndexETag    = 256
)

// ErrBadIndexObject is matched (with errors.Is) by every error about an
// index object that is damaged or does not describe the file it sits
// beside. The leader then reads the file's chunk headers instead.
var ErrBadIndexObject = errors.New("recordio: bad index object")

// IndexObject is the decoded index object of a RecordIO file: the file's
// size (and, when known, its entity tag in an object store) when the index
// was written, and the file's chunks.
type IndexObject struct {
	// Size is the size of the data file in bytes.
	Size int64
	// ETag is the object store's entity tag of the data file, or "" when
	// it was not known (an index written beside a local file).
	ETag string
	// Index lists the chunks.
	Index *Index
}

// MaxIndexObjectSize returns the size of the index object of a file of
// maxChunks chunks with an entity tag of the longest length accepted: a
// reader need not read more.
func MaxIndexObjectSize(maxChunks int) int64 {
	return int64(indexHeaderSize+maxIndexETag+indexTrailer) + int64(maxChunks)*indexEntrySize
}

// EncodeIndexObject encodes the index object of a file of size bytes
// (and entity tag etag, or "") whose chunks idx lists. The layout, all
// integers little-endian:
//
//	magic      8 bytes  "RIOINDEX"
//	version    uint32   1
//	file size  uint64
//	etag len   uint32, then that many bytes of entity tag (at most 256)
//	chunks     uint64, then for each chunk:
//	  offset   uint64   byte offset of the chunk header
//	  records  uint32   records in the chunk
//	crc        uint32   CRC-32 (IEEE) of every byte before it
func EncodeIndexObject(idx *Index, size int64, etag string) ([]byte, error) {
	if _, err := idx.check(); err != nil {
		return nil, err
	}
	if len(etag) > maxIndexETag {
		return nil, fmt.Errorf("recordio: entity tag of %d bytes, at most %d", len(etag), maxIndexETag)
	}
	n := idx.NumChunks()
	b := make([]byte, 0, indexHeaderSize+len(etag)+n*indexEntrySize+indexTrailer)
	b = append(b, indexMagic...)
	b = binary.LittleEndian.AppendUint32(b, indexVersion)
	b = binary.LittleEndian.AppendUint64(b, uint64(size))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(etag)))
	b = append(b, etag...)
	b = binary.LittleEndian.AppendUint64(b, uint64(n))
	for i := range n {
		b = binary.LittleEndian.AppendUint64(b, uint64(idx.ChunkOffsets[i]))
		b = binary.LittleEndian.AppendUint32(b, uint32(idx.chunkRecords(i)))
	}
	return binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(b)), nil
}

// DecodeIndexObject decodes and checks an index object: its magic,
// version, checksum and layout, and that its chunks start at 0, grow, and
// each leave room for a chunk header within the file size it records.
// Every failure matches ErrBadIndexObject. It does not check that the
// index matches the data file: compare Size and ETag with the file's.
func DecodeIndexObject(b []byte) (*IndexObject, error) {
	bad := func(format string, args ...any) (*IndexObject, error) {
		return nil, fmt.Errorf("%w: %s", ErrBadIndexObject, fmt.Sprintf(format, args...))
	}
	if len(b) < indexHeaderSize+indexTrailer {
		return bad("%d bytes, too short", len(b))
	}
	if string(b[:8]) != indexMagic {
		return bad("wrong magic number")
	}
	body := b[:len(b)-indexTrailer]
	if sum := binary.LittleEndian.Uint32(b[len(b)-indexTrailer:]); sum != crc32.ChecksumIEEE(body) {
		return bad("checksum mismatch")
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != indexVersion {
		return bad("version %d, this release reads version %d", v, indexVersion)
	}
	size := binary.LittleEndian.Uint64(b[12:])
	if size > 1<<62 {
		return bad("file size %d out of range", size)
	}
	etagLen := int(binary.LittleEndian.Uint32(b[20:]))
	if etagLen > maxIndexETag || 24+etagLen+8 > len(body) {
		return bad("entity tag of %d bytes", etagLen)
	}
	etag := string(body[24 : 24+etagLen])
	rest := body[24+etagLen:]
	n := binary.LittleEndian.Uint64(rest)
	rest = rest[8:]
	if n > uint64(len(rest)) || uint64(len(rest)) != n*indexEntrySize {
		return bad("%d chunks in %d bytes of entries", n, len(rest))
	}
	idx := &Index{
		ChunkOffsets: make([]int64, n),
		ChunkLens:    make([]uint32, n),
		ChunkRecords: make([]int, n),
	}
	for i := range int(n) {
		e := rest[i*indexEntrySize:]
		off := binary.LittleEndian.Uint64(e)
		recs := binary.LittleEndian.Uint32(e[8:])
		switch {
		case i == 0 && off != 0:
			return bad("first chunk at offset %d, not 0", off)
		case i > 0 && off < uint64(idx.ChunkOffsets[i-1])+headerSize:
			return bad("chunk %d at offset %d overlaps the one before", i, off)
		case off+headerSize > size:
			return bad("chunk %d at offset %d leaves no room for its header in a %d-byte file", i, off, size)
		}
		idx.ChunkOffsets[i] = int64(off)
		idx.ChunkLens[i] = recs
		idx.ChunkRecords[i] = int(recs)
		idx.NumRecords += int(recs)
	}
	if n == 0 && size != 0 {
		return bad("no chunk in a %d-byte file", size)
	}
	return &IndexObject{Size: int64(size), ETag: etag, Index: idx}, nil
}

// WriteIndexObjectFile indexes the local RecordIO file at path and writes
// its index object beside it, at path+IndexSuffix, atomically (a
// temporary file renamed into place). It returns the index.
func WriteIndexObjectFile(path string) (*Index, error) {
	idx, err := LoadIndexFile(path)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("recordio: %w", err)
	}
	b, err := EncodeIndexObject(idx, st.Size(), "")
	if err != nil {
		return nil, err
	}
	dir, base := filepath.Split(path + IndexSuffix)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("recordio: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path+IndexSuffix)
	}
	if err != nil {
		os.Remove(f.Name())
		return nil, fmt.Errorf("recordio: %w", err)
	}
	return idx, nil
}

// DropIndexObjects returns paths without the index objects of files that
// are also in paths: a pattern such as data/* matches both a file and
// its index, and only the file is data. The order of paths is kept.
func DropIndexObjects(paths []string) []string {
	var set map[string]struct{}
	out := paths[:0:0]
	for _, p := range paths {
		if strings.HasSuffix(p, IndexSuffix) {
			if set == nil {
				set = make(map[string]struct{}, len(paths))
				for _, q := range paths {
					set[q] = struct{}{}
				}
			}
			if _, ok := set[strings.TrimSuffix(p, IndexSuffix)]; ok {
				continue
			}
		}
		out = append(out, p)
	}
	if len(out) == len(paths) {
		return slices.Clip(paths)
	}
	return out
}

// CheckLastChunkHeader checks that hdr, the bytes at the offset of idx's
// last chunk in a file of size bytes, are a chunk header that holds as
// many records as idx says and whose chunk ends exactly at the end of the
// file. A reader of an index object checks it with one ranged read, so
// that an index left beside a rewritten file of the same size is caught.
func CheckLastChunkHeader(idx *Index, size int64, hdr []byte) error {
	n := idx.NumChunks()
	if n == 0 {
		return nil
	}
	if len(hdr) < headerSize {
		return fmt.Errorf("%w: %d bytes of chunk header", ErrBadIndexObject, len(hdr))
	}
	off := idx.ChunkOffsets[n-1]
	h, err := decodeHeader((*[headerSize]byte)(hdr[:headerSize]), size-off-headerSize)
	if err != nil {
		return fmt.Errorf("%w: the last chunk's header: %v", ErrBadIndexObject, err)
	}
	if int(h.numRecords) != idx.chunkRecords(n-1) {
		return fmt.Errorf("%w: the last chunk holds %d records, the index says %d", ErrBadIndexObject, h.numRecords, idx.chunkRecords(n-1))
	}
	if end := off + headerSize + int64(h.compressedSize); end != size {
		return fmt.Errorf("%w: the last chunk ends at byte %d of a %d-byte file", ErrBadIndexObject, end, size)
	}
	return nil
}
