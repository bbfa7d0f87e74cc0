"""Reading RecordIO chunks from object stores: s3:// on any S3-compatible
endpoint and gs:// through Cloud Storage's S3-compatible XML API with HMAC
keys, with ranged GETs. It needs boto3, the optional extra "s3"
(``pip install raftmaster[s3]``, or Debian's python3-boto3), imported only
when an s3:// or gs:// chunk is read.

The settings are the Go reader's (docs/object-stores.md):

- s3://: RAFTMASTER_S3_ENDPOINT (else boto3's AWS_ENDPOINT_URL_S3 and
  AWS_ENDPOINT_URL; default AWS), RAFTMASTER_S3_REGION (else AWS_REGION,
  AWS_DEFAULT_REGION), RAFTMASTER_S3_PATH_STYLE (auto, true, false), and
  boto3's credentials chain: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY,
  AWS_PROFILE with the shared credentials and config files, the instance's
  role (AWS_EC2_METADATA_DISABLED=true turns that off).
- gs://: RAFTMASTER_GS_ENDPOINT (default https://storage.googleapis.com)
  and the HMAC key in GS_ACCESS_KEY_ID and GS_SECRET_ACCESS_KEY.

No secret is logged, and no error message holds one.
"""

from __future__ import annotations

import io
import os
import threading
from typing import Any, Dict, Tuple

READAHEAD = 1 << 20  # least bytes one ranged GET asks for

_clients: Dict[str, Any] = {}
_lock = threading.Lock()


class ObjectStoreError(OSError):
    """A failed request about one object or bucket: the message names its URL
    and the store's error code, never a credential."""


def is_url(path: str) -> bool:
    """Whether path names an object-store object: s3:// or gs://."""
    return path.startswith("s3://") or path.startswith("gs://")


def parse_url(url: str) -> Tuple[str, str, str]:
    """(scheme, bucket, key) of s3://bucket/key or gs://bucket/key."""
    scheme, sep, rest = url.partition("://")
    bucket, _, key = rest.partition("/")
    if not sep or scheme not in ("s3", "gs") or not bucket or not key:
        raise ValueError("%r is not an s3:// or gs:// object URL" % url)
    return scheme, bucket, key


def _boto3():
    try:
        import boto3  # type: ignore[import]  # no stubs: an optional extra
        import botocore.config  # type: ignore[import]
    except ImportError as e:
        raise ImportError("reading s3:// and gs:// chunks needs boto3: pip install 'raftmaster[s3]' "
                          "(or apt install python3-boto3)") from e
    return boto3, botocore.config


def _client(scheme: str):
    with _lock:
        c = _clients.get(scheme)
        if c is not None:
            return c
        boto3, bconfig = _boto3()
        env = os.environ
        if scheme == "s3":
            endpoint = env.get("RAFTMASTER_S3_ENDPOINT") or None
            region = env.get("RAFTMASTER_S3_REGION") or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None
            style = (env.get("RAFTMASTER_S3_PATH_STYLE") or "auto").lower()
            addressing = {"true": "path", "on": "path", "path": "path", "1": "path",
                          "false": "virtual", "off": "virtual", "virtual": "virtual", "0": "virtual"}.get(style, "auto")
            kw: Dict[str, Any] = {}
        else:
            endpoint = env.get("RAFTMASTER_GS_ENDPOINT") or "https://storage.googleapis.com"
            region, addressing = "auto", "path"
            kw = {}
            if env.get("GS_ACCESS_KEY_ID") or env.get("GS_SECRET_ACCESS_KEY"):
                kw = {"aws_access_key_id": env.get("GS_ACCESS_KEY_ID", ""),
                      "aws_secret_access_key": env.get("GS_SECRET_ACCESS_KEY", "")}
        if endpoint and "://" not in endpoint:
            endpoint = "https://" + endpoint
        cfg = bconfig.Config(s3={"addressing_style": addressing}, signature_version="s3v4",
                             retries={"max_attempts": 3, "mode": "standard"})
        session = boto3.session.Session()
        c = session.client("s3", endpoint_url=endpoint, region_name=region, config=cfg, **kw)
        _clients[scheme] = c
        return c


def reset_clients() -> None:
    """Forget the clients made so far, so that the next read takes the
    environment anew (tests)."""
    with _lock:
        _clients.clear()


def _error(url: str, e: BaseException) -> ObjectStoreError:
    code = ""
    resp = getattr(e, "response", None)
    if isinstance(resp, dict):
        code = str(resp.get("Error", {}).get("Code", ""))
    if code == "NoSuchBucket":
        return ObjectStoreError("%s: bucket does not exist" % _bucket_url(url))
    if code in ("NoSuchKey", "404", "NotFound"):
        return ObjectStoreError("%s: object does not exist" % url)
    if code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403", "ExpiredToken", "InvalidToken"):
        return ObjectStoreError("%s: access denied: check the credentials and the bucket's permissions (%s)"
                                % (url, code))
    if code:
        return ObjectStoreError("%s: %s" % (url, code))
    return ObjectStoreError("%s: %s" % (url, type(e).__name__))


def _bucket_url(url: str) -> str:
    scheme, _, rest = url.partition("://")
    return "%s://%s" % (scheme, rest.partition("/")[0])


class S3Object(io.RawIOBase):
    """An object opened for reading with seeks: each read outside its buffer
    is one ranged GET of at least READAHEAD bytes."""

    def __init__(self, url: str, readahead: int = READAHEAD) -> None:
        super().__init__()
        self.url = url
        self._scheme, self._bucket, self._key = parse_url(url)
        self._c = _client(self._scheme)
        self._readahead = max(readahead, 1)
        try:
            head = self._c.head_object(Bucket=self._bucket, Key=self._key)
        except Exception as e:  # botocore's ClientError and connection errors
            raise _error(url, e) from None
        self.size = int(head["ContentLength"])
        self._pos = 0
        self._buf = b""
        self._buf_off = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_SET:
            pos = offset
        elif whence == io.SEEK_CUR:
            pos = self._pos + offset
        elif whence == io.SEEK_END:
            pos = self.size + offset
        else:
            raise ValueError("bad whence %r" % whence)
        if pos < 0:
            raise ValueError("negative seek position %d" % pos)
        self._pos = pos
        return pos

    def _get(self, off: int, n: int) -> bytes:
        try:
            resp = self._c.get_object(Bucket=self._bucket, Key=self._key, Range="bytes=%d-%d" % (off, off + n - 1))
            return resp["Body"].read()
        except Exception as e:
            raise _error(self.url, e) from None

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            n = self.size - self._pos
        out = bytearray()
        while len(out) < n and self._pos < self.size:
            at = self._pos
            if self._buf_off <= at < self._buf_off + len(self._buf):
                take = self._buf[at - self._buf_off: at - self._buf_off + (n - len(out))]
                out += take
                self._pos += len(take)
                continue
            want = min(n - len(out), self.size - at)
            if want >= self._readahead:
                got = self._get(at, want)
                if not got:
                    break
                out += got
                self._pos += len(got)
                continue
            self._buf = self._get(at, min(self._readahead, self.size - at))
            self._buf_off = at
            if not self._buf:
                break
        return bytes(out)

    def readinto(self, b) -> int:
        data = self.read(len(b))
        b[:len(data)] = data
        return len(data)


def open_chunk_file(path: str):
    """Open the file of a chunk: an S3Object for s3:// and gs:// URLs, else
    the local file."""
    if is_url(path):
        try:
            return S3Object(path)
        except ImportError as e:
            raise ObjectStoreError("%s: %s" % (path, e)) from None
    return open(path, "rb")
