// Package recordio reads and writes RecordIO files, byte-compatible with the
// format of the PaddlePaddle v2 RecordIO package (github.com/PaddlePaddle/recordio)
// that the PaddlePaddle master dispatched training data from.
//
// # Format
//
// A file is a sequence of chunks and nothing else: no file header, no footer.
// Each chunk is a 20-byte header followed by compressed_size bytes of chunk
// data. All integers are little-endian uint32:
//
//	bytes 0..4    magic number 0x01020304
//	bytes 4..8    CRC-32 (IEEE) of the chunk data as stored (compressed)
//	bytes 8..12   compressor: 0 none, 1 snappy (framing/stream format), 2 gzip
//	bytes 12..16  compressed_size, the number of chunk data bytes that follow
//	bytes 16..20  number of records in the chunk
//
// Decompressed, the chunk data is, for each record, a uint32 length followed
// by the record's bytes. Empty records are legal. Because chunks are only
// appended, a crashed writer leaves at worst an incomplete last chunk.
//
// # Writing
//
// A Writer buffers records into a chunk and writes the chunk when adding the
// next record would take the chunk's record bytes (length prefixes not
// counted) above the maximum chunk size. A record larger than the maximum
// gets a chunk of its own. This is the original's rule, so a Writer with
// NoCompression reproduces the original's files byte for byte.
//
// # Reading
//
// LoadIndex reads only the chunk headers and returns an Index: each chunk's
// offset and record count. The dispatching master cuts datasets into tasks
// from these indexes. A RangeScanner reads a range of records of one file
// through an Index (for one chunk, see NewChunkIndex and ReadChunk), and a
// Scanner reads every record of a list of files found by glob.
//
// Every chunk read is verified: magic number, compressor, checksum, sizes,
// record count and record framing. Unlike the original, a truncated file is
// an error everywhere, never a silently short read. Errors about a damaged
// file match ErrCorrupt with errors.Is and are reported as a *ChunkError that
// names the file (when known), the chunk and its byte offset. Sizes claimed
// by headers are checked against the real file size before anything is
// allocated, and decompressed chunk data is limited to 1 GiB, so damaged or
// hostile files cannot exhaust memory.
package recordio
