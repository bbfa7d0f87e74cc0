"""raftmaster.recordio against the golden vectors of the Go package, round
trips, and damaged files."""

import glob
import hashlib
import io
import json
import os
import sys

import pytest

from raftmaster import recordio
from cluster import REPO

GOLDEN = os.path.join(REPO, "recordio", "testdata")
MANIFEST = json.load(open(os.path.join(GOLDEN, "MANIFEST.json")))


def sha(recs):
    return [hashlib.sha256(r).hexdigest() for r in recs]


def test_the_manifest_covers_every_golden_file():
    files = sorted(os.path.basename(p) for p in glob.glob(os.path.join(GOLDEN, "*.recordio")))
    assert files == sorted(g["file"] for g in MANIFEST)
    compressors = {g["compressor"] for g in MANIFEST}
    assert compressors == {"none", "snappy", "gzip"}


@pytest.mark.parametrize("g", MANIFEST, ids=[g["file"] for g in MANIFEST])
def test_golden(g):
    path = os.path.join(GOLDEN, g["file"])
    data = open(path, "rb").read()
    idx = recordio.load_index(path)
    assert idx.chunk_offsets == g["chunk_offsets"]
    assert idx.chunk_records == g["chunk_records"]
    assert (idx.num_records, idx.num_chunks) == (g["num_records"], len(g["chunk_offsets"]))
    assert recordio.load_index(io.BytesIO(data)) == idx

    recs = list(recordio.RangeReader(path, idx))
    assert [len(r) for r in recs] == g["record_lens"]
    assert sha(recs) == g["record_sha256"]
    assert list(recordio.Scanner(path)) == recs
    assert list(recordio.records(io.BytesIO(data))) == recs

    # Chunk by chunk, as a trainer reads a task's chunks.
    first = 0
    for i, (off, n) in enumerate(zip(g["chunk_offsets"], g["chunk_records"])):
        want = recs[first:first + n]
        assert recordio.read_chunk(path, off, n) == want
        assert list(recordio.RangeReader(io.BytesIO(data), idx.chunk_index(i))) == want
        first += n
    # Ranges and locate.
    assert list(recordio.RangeReader(path, idx, 3, 5)) == recs[3:8]
    assert list(recordio.RangeReader(path, idx, len(recs) - 2, 100)) == recs[-2:]
    n = 0
    for c, cnt in enumerate(g["chunk_records"]):
        for r in range(cnt):
            assert idx.locate(n) == (c, r)
            n += 1
    assert idx.locate(n) == (-1, -1)

    infos = recordio.inspect(path)
    assert [i.offset for i in infos] == g["chunk_offsets"]
    assert [i.num_records for i in infos] == g["chunk_records"]
    assert {recordio.compressor_name(i.compressor) for i in infos} == {g["compressor"]}
    assert sum(i.record_bytes for i in infos) == sum(g["record_lens"])

    # Writing the records again: the same chunks, and for no compression
    # (the deterministic case) the same bytes.
    comp = recordio.parse_compressor(g["compressor"])
    buf = io.BytesIO()
    with recordio.Writer(buf, g["max_chunk_size"], comp) as w:
        for r in recs:
            assert w.write(r) == len(r)
    out = buf.getvalue()
    if comp == recordio.NO_COMPRESSION:
        assert out == data
    idx2 = recordio.load_index(io.BytesIO(out))
    assert idx2.chunk_records == g["chunk_records"]
    assert sha(recordio.RangeReader(io.BytesIO(out), idx2)) == g["record_sha256"]


def test_scanner_over_globs_reads_each_file_once_in_path_order():
    s = recordio.Scanner(os.path.join(GOLDEN, "*.recordio"), os.path.join(GOLDEN, "gzip-*"))
    want = [h for g in sorted(MANIFEST, key=lambda g: g["file"]) for h in g["record_sha256"]]
    assert sha(s) == want
    with pytest.raises(recordio.RecordIOError, match="no pattern matches"):
        recordio.Scanner(os.path.join(GOLDEN, "*.nothing"))


# Where each damaged file must be reported (as the Go package's golden test says).
CORRUPT = {
    "bad-checksum-chunk2.recordio": "chunk 2 at offset 2159: checksum mismatch",
    "bad-magic-chunk2.recordio": "chunk 2 at offset 561: bad magic number",
    "not-recordio.recordio": "chunk 0 at offset 0: bad magic number",
    "truncated-last-chunk.recordio": "chunk 18 at offset 19832: truncated",
}


@pytest.mark.parametrize("name", sorted(CORRUPT))
def test_golden_corrupt(name):
    path = os.path.join(GOLDEN, "corrupt", name)
    assert sorted(os.listdir(os.path.join(GOLDEN, "corrupt"))) == sorted(CORRUPT)
    want = CORRUPT[name]

    def check(exc, with_path=True, where=want):
        e = exc.value
        assert isinstance(e, recordio.CorruptError) and isinstance(e, recordio.ChunkError)
        assert where in str(e), str(e)
        if with_path:
            assert path in str(e)

    with pytest.raises(recordio.ChunkError) as e:
        list(recordio.Scanner(path))
    check(e)
    data = open(path, "rb").read()
    with pytest.raises(recordio.ChunkError) as e:
        list(recordio.records(io.BytesIO(data)))
    check(e, with_path=False)
    with pytest.raises(recordio.ChunkError) as e:
        recordio.inspect(io.BytesIO(data))
    check(e, with_path=False)
    try:
        idx = recordio.load_index(path)
    except recordio.ChunkError as err:
        assert want in str(err) and path in str(err)
        return
    # The headers index: reading the chunks one at a time finds the damage,
    # and a one-chunk index gives only the offset.
    with pytest.raises(recordio.ChunkError) as e:
        for off, n in zip(idx.chunk_offsets, idx.chunk_records):
            recordio.read_chunk(path, off, n)
    check(e, where="chunk" + want[want.index(" at offset "):])


def write(recs, max_chunk_size=-1, compressor=recordio.GZIP):
    buf = io.BytesIO()
    with recordio.Writer(buf, max_chunk_size, compressor) as w:
        for r in recs:
            w.write(r)
    return buf.getvalue()


@pytest.mark.parametrize("compressor", [recordio.NO_COMPRESSION, recordio.SNAPPY, recordio.GZIP])
def test_round_trip(compressor):
    if compressor == recordio.SNAPPY:
        pytest.importorskip("snappy", reason="snappy chunks need python3-snappy")
    recs = [b"", b"x", os.urandom(100_000), b"", bytes(200_000), b"last"]
    data = write(recs, 1000, compressor)
    idx = recordio.load_index(io.BytesIO(data))
    # A record above the maximum chunk size gets a chunk of its own.
    assert idx.chunk_records == [2, 1, 1, 1, 1]
    assert list(recordio.RangeReader(io.BytesIO(data), idx)) == recs
    assert recordio.load_index(io.BytesIO(write([]))).num_chunks == 0


def test_chunks_are_cut_by_record_bytes():
    data = write([b"a" * 10] * 10, 30, recordio.NO_COMPRESSION)
    assert recordio.load_index(io.BytesIO(data)).chunk_records == [3, 3, 3, 1]
    with pytest.raises(ValueError):
        recordio.Writer(io.BytesIO(), 10, 7)
    with pytest.raises(ValueError):
        recordio.parse_compressor("lz4")
    w = recordio.Writer(io.BytesIO(), 10, recordio.NO_COMPRESSION)
    w.close()
    with pytest.raises(ValueError, match="closed"):
        w.write(b"x")


def damaged(data, offset, value):
    b = bytearray(data)
    b[offset:offset + len(value)] = value
    return bytes(b)


def fix_crc(data):
    """Recompute the checksum of the first chunk, so that only the damage behind it is seen."""
    import struct
    import zlib
    size = struct.unpack_from("<I", data, 12)[0]
    return damaged(data, 4, struct.pack("<I", zlib.crc32(data[20:20 + size])))


@pytest.mark.parametrize("case,want", [
    ("header claims too many records", "more than"),
    ("unknown compressor", "unknown compressor 9"),
    ("record length past the end", "runs past the end"),
    ("bytes after the records", "follow its"),
    ("truncated gzip stream", "gzip"),
    ("garbage in the gzip stream", "gzip"),
    ("short header", "bytes left for a 20-byte chunk header"),
])
def test_damage_is_a_clear_error(case, want):
    import struct
    plain = write([b"abc", b"defg"], -1, recordio.NO_COMPRESSION)
    gz = write([b"abc" * 100], -1, recordio.GZIP)
    data = {
        "header claims too many records": damaged(plain, 16, struct.pack("<I", 1 << 30)),
        "unknown compressor": damaged(plain, 8, struct.pack("<I", 9)),
        "record length past the end": fix_crc(damaged(plain, 20, struct.pack("<I", 999))),
        "bytes after the records": fix_crc(damaged(plain, 16, struct.pack("<I", 1))),
        "truncated gzip stream": fix_crc(damaged(gz, 12, struct.pack("<I", len(gz) - 30))[:-10]),
        "garbage in the gzip stream": fix_crc(damaged(gz, 40, b"\xff\xff\xff\xff")),
        "short header": plain + b"\x04\x03\x02",
    }[case]
    with pytest.raises(recordio.CorruptChunkError, match=want) as e:
        list(recordio.records(io.BytesIO(data)))
    assert e.value.offset in (0, len(plain)) and " at offset " in str(e.value)


def test_damaged_snappy_streams():
    pytest.importorskip("snappy", reason="snappy chunks need python3-snappy")
    data = write([b"hello world " * 50], -1, recordio.SNAPPY)
    for bad, want in [(damaged(data, 20, b"\x00"), "missing stream identifier"),
                      (damaged(data, len(data) - 5, b"\x00\x00"), "snappy"),
                      (damaged(data, 30, b"\x05"), "unsupported frame type")]:
        with pytest.raises(recordio.CorruptChunkError, match=want):
            list(recordio.records(io.BytesIO(fix_crc(bad))))


def test_missing_snappy_names_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "snappy", None)
    monkeypatch.setattr(recordio, "_snappy_mod", None)
    with pytest.raises(recordio.SnappyUnavailable, match="apt-get install python3-snappy"):
        recordio.Writer(io.BytesIO(), compressor=recordio.SNAPPY)
    path = os.path.join(GOLDEN, "snappy-multi.recordio")
    with pytest.raises(recordio.ChunkError, match="python3-snappy") as e:
        list(recordio.Scanner(path))
    assert not isinstance(e.value, recordio.CorruptError)
    # None and gzip need nothing.
    assert list(recordio.records(os.path.join(GOLDEN, "gzip-multi.recordio")))


def test_crc32c_in_python():
    assert recordio._crc32c_py(b"123456789") == 0xE3069283
    data = os.urandom(1001)
    assert recordio._crc32c_py(data) == _crc32c_bytewise(data)


def _crc32c_bytewise(data):
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    return c ^ 0xFFFFFFFF


def test_index_files(tmp_path):
    paths = []
    for i in range(2):
        p = tmp_path / ("f%d.recordio" % i)
        p.write_bytes(write([b"r%d" % j for j in range(5)], 4, recordio.NO_COMPRESSION))
        paths.append(str(p))
    chunks = recordio.index_files(recordio.glob([str(tmp_path / "*.recordio")]))
    assert [(c.path, c.records) for c in chunks] == [(paths[0], 2), (paths[0], 2), (paths[0], 1),
                                                     (paths[1], 2), (paths[1], 2), (paths[1], 1)]
    assert [c.offset for c in chunks[:3]] == [0, 32, 64]
