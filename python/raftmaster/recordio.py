"""RecordIO files, byte-compatible with the Go package recordio.

A file is a sequence of chunks and nothing else. Each chunk is a 20-byte
header followed by ``compressed_size`` bytes of chunk data; all integers are
little-endian uint32::

    bytes 0..4    magic number 0x01020304
    bytes 4..8    CRC-32 (IEEE) of the chunk data as stored (compressed)
    bytes 8..12   compressor: 0 none, 1 snappy (framing format), 2 gzip
    bytes 12..16  compressed_size
    bytes 16..20  number of records in the chunk

Decompressed, the chunk data is, for each record, a uint32 length followed
by the record's bytes. Empty records are legal.

Writing: :class:`Writer` cuts a chunk when adding the next record would take
the chunk's record bytes above ``max_chunk_size``, the original's rule, so
that with :data:`NO_COMPRESSION` it writes the same bytes as the Go writer.

Reading: :func:`load_index` reads only the chunk headers; a
:class:`RangeReader` reads records through an :class:`Index` (one chunk of a
task with :func:`read_chunk`), and a :class:`Scanner` reads every record of
the files that globs match. Every chunk read is verified: magic number,
compressor, checksum, sizes, record count and framing. Damaged data raises
:class:`CorruptError`; an error about one chunk is a :class:`ChunkError`
naming the file (when known), the chunk and its byte offset.

Snappy needs the ``snappy`` module: ``apt-get install python3-snappy`` on
Debian and Ubuntu, or ``pip install python-snappy``. None and gzip are pure
Python.
"""

from __future__ import annotations

import glob as _glob
import gzip as _gzip
import os
import struct
import sys
import zlib
from dataclasses import dataclass, field
from typing import BinaryIO, Iterator, List, Optional, Sequence, Set, Tuple, Union

__all__ = [
    "NO_COMPRESSION", "SNAPPY", "GZIP", "DEFAULT_MAX_CHUNK_SIZE", "HEADER_SIZE", "MAX_CHUNK_DATA",
    "compressor_name", "parse_compressor",
    "RecordIOError", "CorruptError", "ChunkError", "CorruptChunkError", "SnappyUnavailable",
    "Writer", "Index", "new_chunk_index", "load_index", "RangeReader", "read_chunk",
    "Scanner", "glob", "index_files", "FileChunk", "ChunkInfo", "inspect", "records",
]

#: Chunk data stored as is.
NO_COMPRESSION = 0
#: Chunk data compressed with the snappy framing (stream) format; the Go writer's default.
SNAPPY = 1
#: Chunk data compressed with gzip.
GZIP = 2

#: The original's default maximum chunk size (record bytes of one chunk).
DEFAULT_MAX_CHUNK_SIZE = 32 * 1024 * 1024
#: Size of a chunk header.
HEADER_SIZE = 20
#: Bound on the decompressed size of one chunk's data.
MAX_CHUNK_DATA = 1 << 30

_MAGIC = 0x01020304
_HEADER = struct.Struct("<IIIII")
_U32 = struct.Struct("<I")
_MAX_U32 = 0xFFFFFFFF

Source = Union[str, "os.PathLike[str]", BinaryIO]


def compressor_name(c: int) -> str:
    """Return the name of a compressor: "none", "snappy", "gzip" or "unknown(N)"."""
    return {NO_COMPRESSION: "none", SNAPPY: "snappy", GZIP: "gzip"}.get(c, "unknown(%d)" % c)


def parse_compressor(name: str) -> int:
    """Return the compressor named "none", "snappy" or "gzip"."""
    try:
        return {"none": NO_COMPRESSION, "snappy": SNAPPY, "gzip": GZIP}[name]
    except KeyError:
        raise ValueError("recordio: unknown compressor %r (want none, snappy or gzip)" % (name,)) from None


# Errors.

class RecordIOError(Exception):
    """The base of the errors of this module."""


class CorruptError(RecordIOError):
    """Damaged or malformed RecordIO data: a bad magic number, checksum, size,
    record count, compressed stream or record framing, or truncation."""


class ChunkError(RecordIOError):
    """A failure to read one chunk. ``path`` is the file ("" when reading
    from a file object without a name), ``chunk`` the chunk's number in the
    index it was read through (-1 for a one-chunk index of a chunk past the
    file's start, which gives only the offset), ``offset`` the byte offset
    of its header and ``err`` the underlying error."""

    def __init__(self, path: str, chunk: int, offset: int, err: BaseException) -> None:
        self.path = path
        self.chunk = chunk
        self.offset = offset
        self.err = err
        where = "chunk" if chunk < 0 else "chunk %d" % chunk
        if path:
            msg = "recordio: %s: %s at offset %d: %s" % (path, where, offset, err)
        else:
            msg = "recordio: %s at offset %d: %s" % (where, offset, err)
        super().__init__(msg)


class CorruptChunkError(ChunkError, CorruptError):
    """A chunk whose data is damaged: both a ChunkError and a CorruptError."""


class SnappyUnavailable(RecordIOError, ImportError):
    """Snappy chunks need the snappy module, which is not installed."""


def _chunk_error(path: str, chunk: int, offset: int, err: BaseException) -> ChunkError:
    cls = CorruptChunkError if isinstance(err, CorruptError) else ChunkError
    e = cls(path, chunk, offset, err)
    e.__cause__ = err
    return e


# Snappy (framing format), through the snappy module.

_SNAPPY_ID = b"\xff\x06\x00\x00sNaPpY"
_SNAPPY_BLOCK = 65536
_snappy_mod = None
_crc32c = None


def _snappy():
    """Return the snappy module and a CRC-32C function, or raise SnappyUnavailable."""
    global _snappy_mod, _crc32c
    if _snappy_mod is None:
        try:
            import snappy  # type: ignore
        except ImportError as e:
            raise SnappyUnavailable(
                "recordio: snappy chunks need the snappy module: apt-get install python3-snappy "
                "(Debian, Ubuntu) or pip install python-snappy") from e
        _crc32c = _fast_crc32c(snappy) or _crc32c_py
        _snappy_mod = snappy
    return _snappy_mod, _crc32c


def _fast_crc32c(snappy):
    """Return a CRC-32C function written in C, when one is installed and
    works: the crc32c or google-crc32c module, or the snappy module's own
    (whose C extension fails on some Python versions)."""
    candidates = []
    for name, attr in (("crc32c", "crc32c"), ("google_crc32c", "value")):
        try:
            candidates.append(getattr(__import__(name), attr))
        except (ImportError, AttributeError):
            pass
    inner = getattr(snappy, "_snappy", None)
    if inner is not None and hasattr(inner, "_crc32c"):
        candidates.append(inner._crc32c)
    for fn in candidates:
        try:
            if fn(b"123456789") == 0xE3069283:
                return fn
        except Exception:  # a broken build: try the next one
            continue
    return None


def _crc32c_tables() -> List[List[int]]:
    t0 = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t0.append(c)
    tables = [t0]
    for _ in range(7):
        prev = tables[-1]
        tables.append([(prev[i] >> 8) ^ t0[prev[i] & 0xFF] for i in range(256)])
    return tables


_CRC32C_TABLES: List[List[int]] = []


def _crc32c_py(data: bytes) -> int:
    """CRC-32C (Castagnoli) in Python, eight bytes at a time."""
    if not _CRC32C_TABLES:
        _CRC32C_TABLES.extend(_crc32c_tables())
    t0, t1, t2, t3, t4, t5, t6, t7 = _CRC32C_TABLES
    c = 0xFFFFFFFF
    n = len(data) // 8 * 8 if sys.byteorder == "little" else 0
    if n:
        for q in memoryview(data)[:n].cast("Q"):
            x = c ^ (q & 0xFFFFFFFF)
            hi = q >> 32
            c = (t7[x & 0xFF] ^ t6[(x >> 8) & 0xFF] ^ t5[(x >> 16) & 0xFF] ^ t4[x >> 24]
                 ^ t3[hi & 0xFF] ^ t2[(hi >> 8) & 0xFF] ^ t1[(hi >> 16) & 0xFF] ^ t0[hi >> 24])
    for b in data[n:]:
        c = t0[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def _masked_crc(crc32c, data: bytes) -> int:
    c = crc32c(data) & 0xFFFFFFFF
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _snappy_encode(data: bytes) -> bytes:
    mod, crc32c = _snappy()
    out = bytearray(_SNAPPY_ID)
    view = memoryview(data)
    for i in range(0, len(data), _SNAPPY_BLOCK):
        block = bytes(view[i:i + _SNAPPY_BLOCK])
        crc = _masked_crc(crc32c, block)
        comp = mod.compress(block)
        if len(comp) >= len(block) - len(block) // 8:
            kind, payload = 0x01, block
        else:
            kind, payload = 0x00, comp
        n = len(payload) + 4
        out += bytes((kind, n & 0xFF, (n >> 8) & 0xFF, n >> 16))
        out += _U32.pack(crc)
        out += payload
    return bytes(out)


def _uvarint(b: memoryview) -> int:
    v = 0
    for i in range(min(len(b), 5)):
        x = b[i]
        v |= (x & 0x7F) << (7 * i)
        if x < 0x80:
            return v
    return -1


def _snappy_decode(src: bytes, limit: int) -> bytes:
    mod, crc32c = _snappy()
    view = memoryview(src)
    out = bytearray()
    p, seen_id = 0, False
    while p < len(src):
        if len(src) - p < 4:
            raise CorruptError("snappy: truncated frame header")
        kind = src[p]
        n = src[p + 1] | src[p + 2] << 8 | src[p + 3] << 16
        p += 4
        if len(src) - p < n:
            raise CorruptError("snappy: frame of %d bytes runs past the end of the chunk data" % n)
        body = view[p:p + n]
        p += n
        if kind == 0xFF:
            if bytes(body) != b"sNaPpY":
                raise CorruptError("snappy: bad stream identifier")
            seen_id = True
            continue
        if not seen_id:
            raise CorruptError("snappy: missing stream identifier")
        if kind in (0x00, 0x01):
            if n < 4:
                raise CorruptError("snappy: frame too short for its checksum")
            want = _U32.unpack(body[:4])[0]
            if kind == 0x00:
                declared = _uvarint(body[4:])
                if declared < 0 or declared > _SNAPPY_BLOCK:
                    raise CorruptError("snappy: block of bad or oversized length")
                try:
                    block = mod.uncompress(bytes(body[4:]))
                except Exception as e:  # the module's own error types differ between versions
                    raise CorruptError("snappy: %s" % (e or type(e).__name__)) from None
            else:
                block = bytes(body[4:])
                if len(block) > _SNAPPY_BLOCK:
                    raise CorruptError("snappy: oversized uncompressed block")
            if _masked_crc(crc32c, block) != want:
                raise CorruptError("snappy: checksum mismatch")
            if len(out) + len(block) > limit:
                raise CorruptError("snappy: decompressed chunk data exceeds %d bytes" % limit)
            out += block
        elif kind < 0x80:
            raise CorruptError("snappy: unsupported frame type %#x" % kind)
        # 0x80..0xfe: skippable frames and padding.
    return bytes(out)


def _gzip_encode(data: bytes) -> bytes:
    return _gzip.compress(data, compresslevel=6, mtime=0)


def _gzip_decode(src: bytes, limit: int) -> bytes:
    out = bytearray()
    rest = src
    while True:
        d = zlib.decompressobj(31)
        buf = rest
        try:
            while not d.eof:
                piece = d.decompress(buf, limit - len(out) + 1)
                out += piece
                if len(out) > limit:
                    raise CorruptError("gzip: decompressed chunk data exceeds %d bytes" % limit)
                buf = d.unconsumed_tail
                if not piece and not buf:
                    break
        except zlib.error as e:
            raise CorruptError("gzip: %s" % e) from None
        if not d.eof:
            raise CorruptError("gzip: unexpected EOF")
        rest = d.unused_data
        if not rest:
            return bytes(out)


# Writing.

class Writer:
    """Writes records to a binary file object, a chunk at a time.

    A chunk is written when adding the next record would take the chunk's
    record bytes (length prefixes not counted) above ``max_chunk_size``, so
    a record larger than that gets a chunk of its own. ``compressor`` is
    NO_COMPRESSION, SNAPPY or GZIP. A negative ``max_chunk_size`` means
    32 MiB and a negative compressor SNAPPY, the Go writer's defaults.
    :meth:`close` writes the last chunk; it does not close the file object.
    """

    def __init__(self, f: BinaryIO, max_chunk_size: int = DEFAULT_MAX_CHUNK_SIZE,
                 compressor: int = SNAPPY) -> None:
        if max_chunk_size < 0:
            max_chunk_size = DEFAULT_MAX_CHUNK_SIZE
        if compressor < 0:
            compressor = SNAPPY
        if compressor not in (NO_COMPRESSION, SNAPPY, GZIP):
            raise ValueError("recordio: unknown compressor %d" % compressor)
        if compressor == SNAPPY:
            _snappy()  # fail now, naming the package, rather than at the first chunk
        self._f = f
        self._max = max_chunk_size
        self._compressor = compressor
        self._raw = bytearray()
        self._records = 0
        self._bytes = 0
        self._closed = False

    def write(self, record: bytes) -> int:
        """Add a record (bytes-like; copied) and return its length."""
        if self._closed:
            raise ValueError("recordio: write to closed Writer")
        rec = bytes(record)
        if len(rec) > _MAX_U32 - 4:
            raise ValueError("recordio: record of %d bytes is too large" % len(rec))
        if self._records > 0 and (self._bytes + len(rec) > self._max
                                  or len(self._raw) + 4 + len(rec) > _MAX_U32
                                  or self._records == _MAX_U32):
            self._flush()
        self._raw += _U32.pack(len(rec))
        self._raw += rec
        self._records += 1
        self._bytes += len(rec)
        return len(rec)

    def _flush(self) -> None:
        if self._records == 0:
            return
        raw = bytes(self._raw)
        if self._compressor == NO_COMPRESSION:
            data = raw
        elif self._compressor == SNAPPY:
            data = _snappy_encode(raw)
        else:
            data = _gzip_encode(raw)
        if len(data) > _MAX_U32:
            raise ValueError("recordio: compressed chunk of %d bytes is too large" % len(data))
        self._f.write(_HEADER.pack(_MAGIC, zlib.crc32(data) & 0xFFFFFFFF, self._compressor, len(data), self._records))
        self._f.write(data)
        self._raw = bytearray()
        self._records = 0
        self._bytes = 0

    def close(self) -> None:
        """Write the pending chunk. Calling it again does nothing."""
        if self._closed:
            return
        self._closed = True
        self._flush()

    def __enter__(self) -> "Writer":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self._closed = True


# Reading.

@dataclass
class Index:
    """The chunks of a RecordIO file: where each starts and how many records it holds."""

    chunk_offsets: List[int] = field(default_factory=list)
    chunk_records: List[int] = field(default_factory=list)
    num_records: int = 0

    @property
    def num_chunks(self) -> int:
        """The number of chunks."""
        return len(self.chunk_offsets)

    def chunk_index(self, i: int) -> Optional["Index"]:
        """Return the one-chunk Index of the i-th chunk, or None if there is no such chunk."""
        if i < 0 or i >= self.num_chunks:
            return None
        return new_chunk_index(self.chunk_offsets[i], self.chunk_records[i])

    def locate(self, record: int) -> Tuple[int, int]:
        """Return the chunk that holds the record-th record and its position in
        that chunk, or (-1, -1) when out of range."""
        if record < 0:
            return -1, -1
        for i, n in enumerate(self.chunk_records):
            if record < n:
                return i, record
            record -= n
        return -1, -1

    def _check(self) -> int:
        if len(self.chunk_offsets) != len(self.chunk_records):
            raise ValueError("recordio: invalid Index: %d chunk offsets, %d chunk record counts"
                             % (len(self.chunk_offsets), len(self.chunk_records)))
        total = 0
        for i, (off, n) in enumerate(zip(self.chunk_offsets, self.chunk_records)):
            if off < 0 or n < 0:
                raise ValueError("recordio: invalid Index: chunk %d has offset %d and %d records" % (i, off, n))
            total += n
        if total != self.num_records:
            raise ValueError("recordio: invalid Index: num_records is %d, its chunks hold %d records"
                             % (self.num_records, total))
        return total


def new_chunk_index(offset: int, num_records: int) -> Index:
    """Return the Index of the single chunk whose header is at offset and
    which holds num_records records: a task's chunk, as (path, offset, records)."""
    return Index([offset], [num_records], num_records)


class _Opened:
    """A source opened for reading: a path (opened and closed here) or a file object."""

    def __init__(self, source: Source) -> None:
        if isinstance(source, (str, bytes, os.PathLike)):
            self.path = os.fsdecode(source)
            self.f: BinaryIO = open(self.path, "rb")
            self.owned = True
        else:
            self.f = source
            name = getattr(source, "name", "")
            self.path = name if isinstance(name, str) else ""
            self.owned = False

    def close(self) -> None:
        if self.owned:
            self.f.close()

    def size(self) -> int:
        return self.f.seek(0, os.SEEK_END)


def _read_full(f: BinaryIO, n: int) -> bytes:
    b = f.read(n)
    if b is None or len(b) != n:
        raise CorruptError("truncated: unexpected end of file")
    return b


def _decode_header(b: bytes, remaining: int) -> Tuple[int, int, int, int]:
    magic, checksum, compressor, size, records = _HEADER.unpack(b)
    if magic != _MAGIC:
        raise CorruptError("bad magic number 0x%08x, want 0x%08x" % (magic, _MAGIC))
    if compressor > GZIP:
        raise CorruptError("unknown compressor %d" % compressor)
    if size > remaining:
        raise CorruptError("truncated: header claims %d bytes of chunk data, only %d remain in the file"
                           % (size, remaining))
    limit = size if compressor == NO_COMPRESSION else MAX_CHUNK_DATA
    if 4 * records > limit:
        raise CorruptError("header claims %d records, more than %d bytes of chunk data can hold" % (records, limit))
    return checksum, compressor, size, records


@dataclass
class _Chunk:
    compressor: int
    compressed_size: int
    data_size: int
    records: List[bytes]


def _read_chunk_at(f: BinaryIO, off: int, size: int, want: int) -> _Chunk:
    left = size - off
    if left < HEADER_SIZE:
        if left <= 0:
            raise CorruptError("truncated: chunk starts at or beyond the end of the file (%d bytes)" % size)
        raise CorruptError("truncated: %d bytes left for a %d-byte chunk header" % (left, HEADER_SIZE))
    f.seek(off)
    checksum, compressor, n, count = _decode_header(_read_full(f, HEADER_SIZE), left - HEADER_SIZE)
    if want >= 0 and count != want:
        raise CorruptError("chunk holds %d records, the index says %d" % (count, want))
    stored = _read_full(f, n)
    crc = zlib.crc32(stored) & 0xFFFFFFFF
    if crc != checksum:
        raise CorruptError("checksum mismatch: header says 0x%08x, data has 0x%08x" % (checksum, crc))
    if compressor == SNAPPY:
        data = _snappy_decode(stored, MAX_CHUNK_DATA)
    elif compressor == GZIP:
        data = _gzip_decode(stored, MAX_CHUNK_DATA)
    else:
        data = stored
    return _Chunk(compressor, n, len(data), _split(data, count))


def _split(data: bytes, n: int) -> List[bytes]:
    recs = []
    view = memoryview(data)
    p = 0
    for i in range(n):
        if len(data) - p < 4:
            raise CorruptError("record %d of %d: length prefix runs past the end of the chunk data (%d bytes)"
                               % (i, n, len(data)))
        length = _U32.unpack_from(data, p)[0]
        p += 4
        if length > len(data) - p:
            raise CorruptError("record %d of %d: length %d runs past the end of the chunk data (%d bytes left)"
                               % (i, n, length, len(data) - p))
        recs.append(bytes(view[p:p + length]))
        p += length
    if p != len(data):
        raise CorruptError("%d bytes of chunk data follow its %d records" % (len(data) - p, n))
    return recs


def load_index(source: Source) -> Index:
    """Read the chunk headers of a RecordIO file (a path, or a seekable
    binary file object) and return its Index. Each header's magic number,
    compressor and sizes are checked against the file's real size, so a
    truncated or damaged file is an error (a CorruptChunkError); chunk data
    is not read."""
    src = _Opened(source)
    try:
        size = src.size()
        idx = Index()
        off = 0
        while off < size:
            try:
                if size - off < HEADER_SIZE:
                    raise CorruptError("truncated: %d bytes left for a %d-byte chunk header"
                                       % (size - off, HEADER_SIZE))
                src.f.seek(off)
                _, _, n, records = _decode_header(_read_full(src.f, HEADER_SIZE), size - off - HEADER_SIZE)
            except (RecordIOError, OSError) as e:
                raise _chunk_error(src.path, idx.num_chunks, off, e) from e
            idx.chunk_offsets.append(off)
            idx.chunk_records.append(records)
            idx.num_records += records
            off += HEADER_SIZE + n
        return idx
    finally:
        src.close()


class RangeReader:
    """Iterates over the records [start, start+length) of one RecordIO file
    (a path, or a seekable binary file object) through its Index, reading
    and verifying one chunk at a time. A negative length, or one reaching
    past the end, means up to the last record. A chunk that cannot be read
    raises a ChunkError (a CorruptChunkError for damaged data). Use it as a
    context manager, or call close(), to close a file it opened."""

    def __init__(self, source: Source, index: Index, start: int = 0, length: int = -1) -> None:
        total = index._check()
        start = max(start, 0)
        if length < 0 or length > total - start:
            length = max(total - start, 0)
        self._index = index
        self._src = _Opened(source)
        self._size = -1
        self._next = start
        self._end = start + length
        self._chunk = -1
        self._pos = 0
        self._recs: List[bytes] = []

    def __iter__(self) -> "RangeReader":
        return self

    def __next__(self) -> bytes:
        if self._next >= self._end:
            self.close()
            raise StopIteration
        if self._chunk < 0:
            ci, ri = self._index.locate(self._next)
            self._load(ci)
            self._pos = ri
        else:
            self._pos += 1
            while self._pos >= len(self._recs):
                self._load(self._chunk + 1)
                self._pos = 0
        self._next += 1
        return self._recs[self._pos]

    def _load(self, i: int) -> None:
        off = self._index.chunk_offsets[i]
        try:
            if self._size < 0:
                self._size = self._src.size()
            c = _read_chunk_at(self._src.f, off, self._size, self._index.chunk_records[i])
        except (RecordIOError, OSError) as e:
            self._end = self._next  # nothing more after an error
            self.close()
            chunk = -1 if self._index.num_chunks == 1 and off != 0 else i
            raise _chunk_error(self._src.path, chunk, off, e) from e
        self._chunk, self._recs = i, c.records

    def close(self) -> None:
        """Close the file, if this reader opened it."""
        self._src.close()

    def __enter__(self) -> "RangeReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_chunk(path: str, offset: int, num_records: int) -> List[bytes]:
    """Read and verify the chunk whose header is at offset in the file at
    path and return its records, which must number num_records: how a
    trainer reads a task's chunk. Errors name the path and the offset."""
    with RangeReader(path, new_chunk_index(offset, num_records)) as r:
        return list(r)


def glob(patterns: Sequence[str]) -> List[str]:
    """Return the files that the patterns match (Python's glob rules),
    sorted, without duplicates. It raises RecordIOError when a pattern is
    empty or none matches a file."""
    if isinstance(patterns, str):
        patterns = [patterns]
    if not patterns:
        raise RecordIOError("recordio: bad file pattern: no file patterns given")
    seen: Set[str] = set()
    for p in patterns:
        if not p:
            raise RecordIOError("recordio: bad file pattern: empty pattern")
        seen.update(m for m in _glob.glob(p) if os.path.isfile(m))
    if not seen:
        raise RecordIOError("recordio: no pattern matches a file: %s" % ", ".join(repr(p) for p in patterns))
    return sorted(seen)


class Scanner:
    """Iterates over every record of the files that globs match, file after
    file in path order. Files are opened one at a time. Errors name the file
    and, for damaged data, the chunk and its offset."""

    def __init__(self, *globs: str) -> None:
        self.paths = glob(list(globs))
        self._next = 0
        self._reader: Optional[RangeReader] = None

    def __iter__(self) -> "Scanner":
        return self

    def __next__(self) -> bytes:
        while True:
            if self._reader is None:
                if self._next >= len(self.paths):
                    raise StopIteration
                path = self.paths[self._next]
                self._next += 1
                self._reader = RangeReader(path, load_index(path))
            try:
                return next(self._reader)
            except StopIteration:
                self._reader.close()
                self._reader = None
            except BaseException:
                self.close()
                raise

    def close(self) -> None:
        """Close the open file; the iteration ends."""
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        self._next = len(self.paths)

    def __enter__(self) -> "Scanner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@dataclass(frozen=True)
class FileChunk:
    """One chunk of a dataset: file, byte offset of its header and record count."""
    path: str
    offset: int
    records: int


def index_files(paths: Sequence[str]) -> List[FileChunk]:
    """Index the files, in the order given, as the leader indexes a dataset:
    every chunk of every file. A file that is not a regular file, or whose
    headers are damaged, is an error naming it."""
    chunks: List[FileChunk] = []
    for path in paths:
        if not os.path.isfile(path):
            raise RecordIOError("recordio: %s: not a regular file" % path)
        idx = load_index(path)
        chunks.extend(FileChunk(path, off, n) for off, n in zip(idx.chunk_offsets, idx.chunk_records))
    if not chunks:
        raise RecordIOError("recordio: dataset has no chunks: the %d matched files hold no chunk" % len(paths))
    return chunks


@dataclass(frozen=True)
class ChunkInfo:
    """One chunk of a file, as read and verified by inspect."""
    offset: int
    compressor: int
    num_records: int
    compressed_size: int
    uncompressed_size: int
    record_bytes: int


def inspect(source: Source) -> List[ChunkInfo]:
    """Read and verify every chunk of a RecordIO file and describe each.
    It raises a ChunkError at the first chunk that cannot be read."""
    src = _Opened(source)
    try:
        size = src.size()
        infos: List[ChunkInfo] = []
        off = 0
        while off < size:
            try:
                c = _read_chunk_at(src.f, off, size, -1)
            except (RecordIOError, OSError) as e:
                raise _chunk_error(src.path, len(infos), off, e) from e
            infos.append(ChunkInfo(off, c.compressor, len(c.records), c.compressed_size, c.data_size,
                                   sum(len(r) for r in c.records)))
            off += HEADER_SIZE + c.compressed_size
        return infos
    finally:
        src.close()


def records(source: Source) -> Iterator[bytes]:
    """Iterate over every record of one RecordIO file."""
    idx = load_index(source)
    with RangeReader(source, idx) as r:
        yield from r
