"""WebHDFS, read side, with the Python standard library only (the launcher runs in a stock Triton image).

Four operations: LISTSTATUS (walked recursively), GETFILESTATUS, GETFILECHECKSUM and OPEN. The
NameNode answers metadata calls itself and redirects (307) data calls, GETFILECHECKSUM included,
to a DataNode; the client follows that one hop explicitly so that a retry goes back to the
NameNode, which may pick another DataNode. Connection errors, timeouts and 5xx answers are
retried with exponential backoff; an OPEN cut off mid-stream resumes at the offset it reached.

The second half of the module is HDFS's file checksum (``MD5-of-<n>MD5-of-<bytesPerCRC>CRC32C``),
computed locally so that a downloaded copy can be checked against what GETFILECHECKSUM says.

Not here yet:
- SPNEGO (Kerberos): `Authenticator` is the extension point; a SPNEGO authenticator sends
  ``Authorization: Negotiate …`` and needs GSSAPI, which the standard library lacks. Inside a
  secured YARN container the practical route is the HDFS delegation token YARN localizes
  (`DelegationTokenAuth`, untested against a real cluster).
- NameNode HA: the hdfs:// authority is then a nameservice id; pass the active NameNode's HTTP
  address as the WebHDFS URL until the client learns to try each NameNode in turn.
- COMPOSITE-CRC checksums and erasure-coded files: content checks are skipped (with a warning).
"""

from __future__ import annotations

import functools
import hashlib
import http.client
import json
import logging
import re
import time
import urllib.error
import urllib.parse
import urllib.request
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Hadoop 3's default NameNode HTTP port (dfs.namenode.http-address).
DEFAULT_NAMENODE_HTTP_PORT = 9870


class WebHdfsError(Exception):
    """A WebHDFS call failed: `status` is the HTTP status (None when no answer came)."""

    def __init__(self, message: str, status: int | None = None, exception: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.exception = exception  # the Java exception HDFS named, e.g. FileNotFoundException

    @property
    def retryable(self) -> bool:
        return self.status is None or self.status >= 500


class HdfsNotFoundError(WebHdfsError):
    """The path does not exist in HDFS."""


# ---- where to send requests ------------------------------------------------------------------


def namenode_location(
    source: str, webhdfs_url: str | None = None, default_fs: str | None = None
) -> tuple[str, str]:
    """(NameNode HTTP URL, HDFS path) for an ``hdfs://authority/path`` repository.

    The authority names the NameNode's RPC address; WebHDFS lives on its HTTP address, which the
    operator gives as `webhdfs_url` (it wins). Without it the RPC host is assumed to serve HTTP on
    Hadoop 3's default port. ``hdfs:///path`` takes its authority from `default_fs` (fs.defaultFS).
    """
    parts = urllib.parse.urlsplit(source)
    if parts.scheme != "hdfs":
        raise ValueError(f"not an hdfs:// URI: {source!r}")
    path = urllib.parse.unquote(parts.path) or "/"
    if webhdfs_url:
        return webhdfs_url.rstrip("/"), path
    authority = parts.netloc
    if not authority:
        default = urllib.parse.urlsplit(default_fs or "")
        if default.scheme != "hdfs" or not default.netloc:
            raise ValueError(
                f"{source!r} has no NameNode: pass the WebHDFS URL or set fs.defaultFS to hdfs://NN:PORT"
            )
        authority = default.netloc
    host = urllib.parse.urlsplit(f"//{authority}").hostname
    return f"http://{host}:{DEFAULT_NAMENODE_HTTP_PORT}", path


# ---- authentication: the extension point for SPNEGO -----------------------------------------


class Authenticator(Protocol):
    """What a request carries to authenticate: query parameters and headers."""

    def query(self) -> dict[str, str]: ...

    def headers(self, url: str) -> dict[str, str]: ...


@dataclass(frozen=True)
class SimpleAuth:
    """Hadoop's simple authentication: the user name as ``user.name``."""

    user: str

    def query(self) -> dict[str, str]:
        return {"user.name": self.user}

    def headers(self, url: str) -> dict[str, str]:
        return {}


@dataclass(frozen=True)
class DelegationTokenAuth:
    """An HDFS delegation token (URL-safe encoded, as WebHDFS takes it) as ``delegation``."""

    token: str

    def query(self) -> dict[str, str]:
        return {"delegation": self.token}

    def headers(self, url: str) -> dict[str, str]:
        return {}

    def __repr__(self) -> str:  # never print the token
        return "DelegationTokenAuth(token=<redacted>)"


# ---- replies ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileStatus:
    path: str  # absolute HDFS path
    type: str  # FILE, DIRECTORY or SYMLINK
    length: int
    block_size: int
    modification_time: int  # milliseconds since the epoch
    erasure_coded: bool = False

    @classmethod
    def from_json(cls, path: str, obj: dict[str, Any]) -> FileStatus:
        return cls(
            path=path,
            type=str(obj["type"]),
            length=int(obj.get("length", 0)),
            block_size=int(obj.get("blockSize", 0)),
            modification_time=int(obj.get("modificationTime", 0)),
            erasure_coded=bool(obj.get("ecBit") or obj.get("ecPolicy")),
        )


@dataclass(frozen=True)
class FileChecksum:
    """GETFILECHECKSUM's answer: the algorithm's name and the serialized checksum, in hex."""

    algorithm: str
    bytes: str
    length: int

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> FileChecksum:
        return cls(
            algorithm=str(obj["algorithm"]), bytes=str(obj["bytes"]).lower(), length=int(obj["length"])
        )


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects surface as HTTPError, so the client follows them itself (see module doc)."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_TRANSIENT = (OSError, http.client.HTTPException)  # URLError, timeouts, resets, IncompleteRead


class WebHdfsClient:
    """Read-only WebHDFS client. `sleep` is injectable so tests need not wait out the backoff."""

    def __init__(
        self,
        namenode_url: str,
        auth: Authenticator,
        *,
        timeout: float = 60.0,
        retries: int = 4,
        backoff: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._base = namenode_url.rstrip("/") + "/webhdfs/v1"
        self._auth = auth
        self._timeout = timeout
        self._retries = retries
        self._backoff = backoff
        self._sleep = sleep
        # No proxies from the environment: WebHDFS traffic is intra-cluster, and the DataNode
        # host names in redirects are rarely resolvable by a proxy.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())

    # ---- operations
    def status(self, path: str) -> FileStatus:
        obj = self._json(path, "GETFILESTATUS")["FileStatus"]
        return FileStatus.from_json(path, obj)

    def list_dir(self, path: str) -> list[FileStatus]:
        """The entries of a directory (a file lists as itself)."""
        entries = self._json(path, "LISTSTATUS")["FileStatuses"]["FileStatus"]
        base = path.rstrip("/")
        return [
            FileStatus.from_json(f"{base}/{e['pathSuffix']}" if e.get("pathSuffix") else path, e)
            for e in entries
        ]

    def walk(self, path: str) -> list[FileStatus]:
        """Every file under `path` (or `path` itself when it is a file), in path order."""
        files: list[FileStatus] = []
        pending = [path]
        while pending:
            for entry in self.list_dir(pending.pop()):
                if entry.type == "DIRECTORY":
                    pending.append(entry.path)
                elif entry.type == "FILE":
                    files.append(entry)
                else:
                    log.warning("skipping %s: WebHDFS type %s is not staged", entry.path, entry.type)
        return sorted(files, key=lambda f: f.path)

    def checksum(self, path: str) -> FileChecksum | None:
        """HDFS's checksum of a file; None when the file system has none to give."""
        obj = self._json(path, "GETFILECHECKSUM").get("FileChecksum")
        return FileChecksum.from_json(obj) if obj else None

    def read(self, path: str, chunk_size: int = 1 << 20) -> Iterator[bytes]:
        """The file's bytes in chunks; a stream cut off mid-way resumes where it stopped."""
        offset = 0
        failures = 0
        while True:
            url = self._url(path, "OPEN", offset=str(offset))
            reply = self._retrying(f"OPEN {path}", functools.partial(self._open, url))
            try:
                with reply:
                    declared, got = reply.headers.get("Content-Length"), 0
                    while chunk := reply.read(chunk_size):
                        offset += len(chunk)
                        got += len(chunk)
                        yield chunk
                # http.client's read(n) ends quietly when the peer closes early: check the length
                if declared is not None and got < int(declared):
                    raise http.client.IncompleteRead(b"", int(declared) - got)
                return
            except _TRANSIENT as exc:
                failures += 1
                if failures > self._retries:
                    raise WebHdfsError(f"WebHDFS OPEN {path} at offset {offset}: {exc}") from exc
                delay = self._delay(failures - 1)
                log.warning(
                    "WebHDFS OPEN %s broke at offset %d (%s); resuming in %.1fs", path, offset, exc, delay
                )
                self._sleep(delay)

    # ---- transport
    def _url(self, path: str, op: str, **params: str) -> str:
        if not path.startswith("/"):
            raise ValueError(f"HDFS path must be absolute: {path!r}")
        query = urllib.parse.urlencode({"op": op, **params, **self._auth.query()})
        return f"{self._base}{urllib.parse.quote(path)}?{query}"

    def _json(self, path: str, op: str) -> dict[str, Any]:
        def attempt() -> dict[str, Any]:
            with self._open(self._url(path, op)) as reply:
                body = reply.read()
            try:
                found: dict[str, Any] = json.loads(body)
            except ValueError as exc:
                raise WebHdfsError(f"WebHDFS {op} {path}: the answer is not JSON") from exc
            return found

        return self._retrying(f"{op} {path}", attempt)

    def _open(self, url: str) -> http.client.HTTPResponse:
        """GET `url`, following the NameNode's redirect to a DataNode (one hop)."""
        for _hop in range(2):
            request = urllib.request.Request(url, headers=self._auth.headers(url))  # noqa: S310 - http(s) only
            try:
                reply: http.client.HTTPResponse = self._opener.open(request, timeout=self._timeout)
                return reply
            except urllib.error.HTTPError as exc:
                location = exc.headers.get("Location")
                if exc.code in (301, 302, 303, 307, 308) and location and _hop == 0:
                    exc.close()
                    url = urllib.parse.urljoin(url, location)
                    continue
                raise _remote_error(exc) from exc
        raise WebHdfsError("WebHDFS: redirected more than once")

    def _retrying(self, what: str, attempt: Callable[[], T]) -> T:
        for n in range(self._retries + 1):
            try:
                return attempt()
            except WebHdfsError as exc:
                if not exc.retryable or n == self._retries:
                    raise
                reason = str(exc)
            except _TRANSIENT as exc:
                if n == self._retries:
                    raise WebHdfsError(f"WebHDFS {what}: {exc}") from exc
                reason = f"{exc.__class__.__name__}: {exc}"
            delay = self._delay(n)
            log.warning(
                "WebHDFS %s failed (%s); retry %d/%d in %.1fs", what, reason, n + 1, self._retries, delay
            )
            self._sleep(delay)
        raise AssertionError("unreachable")

    def _delay(self, attempt: int) -> float:
        return float(min(self._backoff * 2**attempt, 30.0))


def _remote_error(exc: urllib.error.HTTPError) -> WebHdfsError:
    """WebHDFS reports failures as {"RemoteException": {"exception", "message"}}."""
    exception = message = None
    try:
        remote = json.loads(exc.read()).get("RemoteException", {})
        exception, message = remote.get("exception"), remote.get("message")
    except (ValueError, AttributeError, OSError, http.client.HTTPException):
        pass
    finally:
        exc.close()
    text = f"WebHDFS answered {exc.code}" + (f" {exception}: {message}" if exception else f" {exc.reason}")
    kind = HdfsNotFoundError if exc.code == 404 or exception == "FileNotFoundException" else WebHdfsError
    return kind(text, status=exc.code, exception=exception)


# ---- HDFS's file checksum, computed locally -------------------------------------------------
#
# A DataNode keeps, beside each block, the CRC of every `bytesPerCRC` chunk of it (the last chunk
# may be short), each as 4 big-endian bytes. GETFILECHECKSUM (combine mode MD5MD5CRC, the default)
# is then MD5( MD5(CRCs of block 1) || MD5(CRCs of block 2) || … ), serialized as
# bytesPerCRC (int32) || crcPerBlock (int64) || MD5 (16 bytes), and named
# "MD5-of-<crcPerBlock>MD5-of-<bytesPerCRC><CRC32|CRC32C>". crcPerBlock is 0 for a one-block file.
#
# One quirk, checked against Hadoop 3.4.2: the client digests the *whole backing array* of the
# buffer holding the block MD5s (DataOutputBuffer.getData()), not just the bytes written. That
# array starts at 32 bytes and doubles as it fills, so the block MD5s are followed by zero
# bytes up to that capacity: one block is MD5(blockMD5 || 16 zero bytes).


@dataclass(frozen=True)
class Md5Md5Crc:
    """A parsed MD5MD5CRC checksum: the parameters to recompute it and the MD5 to match."""

    crc_type: str  # CRC32 (zlib's) or CRC32C (Castagnoli, HDFS's default)
    bytes_per_crc: int
    crc_per_block: int
    md5: bytes


_MD5MD5CRC = re.compile(r"MD5-of-(\d+)MD5-of-(\d+)(CRC32C?)")


def parse_checksum(checksum: FileChecksum) -> Md5Md5Crc | None:
    """The checksum's parameters, or None for an algorithm this module cannot recompute."""
    match = _MD5MD5CRC.fullmatch(checksum.algorithm)
    raw = bytes.fromhex(checksum.bytes) if re.fullmatch(r"[0-9a-f]*", checksum.bytes) else b""
    # The NameNode hex-encodes its whole buffer: only the first `length` bytes are the checksum
    # (seen on Hadoop 3.4.2: 32 bytes for a 28-byte checksum, the rest zero).
    raw = raw[: checksum.length] if checksum.length else raw
    if not match or len(raw) != 28:
        return None
    crc_per_block, bytes_per_crc, crc_type = int(match[1]), int(match[2]), match[3]
    if int.from_bytes(raw[:4], "big") != bytes_per_crc or int.from_bytes(raw[4:12], "big") != crc_per_block:
        return None
    return Md5Md5Crc(
        crc_type=crc_type, bytes_per_crc=bytes_per_crc, crc_per_block=crc_per_block, md5=raw[12:]
    )


_CRC32C_POLY = 0x82F63B78  # Castagnoli, reflected


def _crc32c_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _bit in range(8):
            crc = (crc >> 1) ^ _CRC32C_POLY if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC32C_TABLE = _crc32c_table()


def crc32c(data: bytes, crc: int = 0) -> int:
    """CRC-32C of `data` (continuing from `crc`), a byte at a time: simple, about 10 MB/s."""
    crc ^= 0xFFFFFFFF
    table = _CRC32C_TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


@functools.lru_cache(maxsize=4)
def _crc32c_position_tables(chunk: int) -> tuple[tuple[bytes, ...], int]:
    """For each byte position p of a `chunk`-byte message and each output byte q (big-endian):
    a 256-byte translation table giving byte q of the CRC contribution of the byte at p.

    CRC-32C without its initial value and final XOR is linear over GF(2), so the CRC of a chunk is
    the XOR of the contributions of its bytes, plus a constant for the chunk's length (the CRC of
    `chunk` zero bytes). The contribution of byte b at p is the raw CRC of b followed by
    chunk-1-p zero bytes. Tables are flat: index 4*p + q.
    """
    raw = list(_CRC32C_TABLE)  # contribution at the last position: the raw CRC of b
    tables: list[tuple[bytes, ...]] = [()] * chunk
    for position in range(chunk - 1, -1, -1):
        tables[position] = tuple(bytes((c >> (24 - 8 * q)) & 0xFF for c in raw) for q in range(4))
        raw = [(c >> 8) ^ _CRC32C_TABLE[c & 0xFF] for c in raw]  # one more zero byte after b
    return tuple(t for position in tables for t in position), crc32c(bytes(chunk))


def _crc32c_chunks(data: bytes, chunk: int) -> bytes:
    """Big-endian CRC-32C of each `chunk`-byte piece of `data` (a whole number of chunks).

    Bit-sliced across chunks: column p (byte p of every chunk, one strided slice) goes through
    bytes.translate once per output byte, and the columns are XORed together as big integers.
    The Python loop runs `chunk` times per call however many chunks there are, so the work is
    done by C routines over long byte strings: ~10x the byte-at-a-time loop.
    """
    count = len(data) // chunk
    tables, constant = _crc32c_position_tables(chunk)
    acc = [0, 0, 0, 0]
    for position in range(chunk):
        column = data[position::chunk]
        for q in range(4):
            acc[q] ^= int.from_bytes(column.translate(tables[4 * position + q]), "big")
    out = bytearray(4 * count)
    for q in range(4):
        fill = (constant >> (24 - 8 * q)) & 0xFF
        out[q::4] = (acc[q] ^ int.from_bytes(bytes((fill,)) * count, "big")).to_bytes(count, "big")
    return bytes(out)


def chunk_crcs(data: bytes, bytes_per_crc: int, crc_type: str) -> bytes:
    """The 4-byte big-endian CRC of each `bytes_per_crc` chunk of `data` (the last may be short):
    what a DataNode stores for these bytes in the block's .meta file."""
    if crc_type == "CRC32":  # zlib's CRC-32, in C
        view = memoryview(data)
        return b"".join(
            zlib.crc32(view[i : i + bytes_per_crc]).to_bytes(4, "big")
            for i in range(0, len(data), bytes_per_crc)
        )
    if crc_type != "CRC32C":
        raise ValueError(f"unknown CRC type {crc_type!r}")
    whole = len(data) - len(data) % bytes_per_crc
    crcs = _crc32c_chunks(data[:whole], bytes_per_crc) if whole else b""
    if whole < len(data):
        crcs += crc32c(data[whole:]).to_bytes(4, "big")
    return crcs


class Md5Md5CrcHasher:
    """HDFS's MD5-of-MD5-of-CRC over a byte stream fed in pieces of any size.

    `block_size` is the file's HDFS block size (GETFILESTATUS blockSize); it must be a multiple
    of `bytes_per_crc`, as HDFS itself requires.
    """

    SEGMENT = 1 << 20  # bytes checksummed per call: the bit-sliced CRC is fastest around 1 MiB

    def __init__(self, crc_type: str, bytes_per_crc: int, block_size: int) -> None:
        if bytes_per_crc > 0 and (block_size <= 0 or block_size % bytes_per_crc):
            raise ValueError(f"block size {block_size} is not a multiple of {bytes_per_crc} bytes per CRC")
        self._crc_type = crc_type
        self._bytes_per_crc = bytes_per_crc
        self._block_size = block_size
        self._segment = max(1, self.SEGMENT // max(bytes_per_crc, 1)) * max(bytes_per_crc, 1)
        self._block_md5s = bytearray()
        self._block = hashlib.md5(usedforsecurity=False)  # HDFS's checksum format (and FIPS-safe)
        self._in_block = 0
        self._pending = bytearray()

    def update(self, data: bytes) -> None:
        if data and self._bytes_per_crc <= 0:
            raise ValueError("a checksum with 0 bytes per CRC covers no data")
        self._pending += data
        while len(self._pending) >= self._segment:
            self._consume(self._segment)

    def digest(self) -> bytes:
        while self._pending:
            self._consume(len(self._pending))
        if self._in_block:
            self._end_block()
        return hashlib.md5(_as_hdfs_buffer(bytes(self._block_md5s)), usedforsecurity=False).digest()

    def _consume(self, most: int) -> None:
        """Checksum up to `most` pending bytes, never across a block boundary."""
        take = min(most, len(self._pending), self._block_size - self._in_block)
        piece = bytes(self._pending[:take])
        del self._pending[:take]
        self._block.update(chunk_crcs(piece, self._bytes_per_crc, self._crc_type))
        self._in_block += take
        if self._in_block == self._block_size:
            self._end_block()

    def _end_block(self) -> None:
        self._block_md5s += self._block.digest()
        self._block = hashlib.md5(usedforsecurity=False)
        self._in_block = 0


def _as_hdfs_buffer(written: bytes) -> bytes:
    """`written` zero-padded to the capacity of the Java buffer that held it (32, doubling)."""
    capacity = 32
    while capacity < len(written):
        capacity *= 2
    return written.ljust(capacity, b"\0")


def checksum_block_size(checksum: Md5Md5Crc, status: FileStatus) -> int:
    """The block size HDFS summed over: fixed by crcPerBlock when HDFS gives it (files of more
    than one block), else the file's block size."""
    return checksum.crc_per_block * checksum.bytes_per_crc or status.block_size


def hasher_for(checksum: Md5Md5Crc, status: FileStatus) -> Md5Md5CrcHasher:
    """The hasher that recomputes `checksum` for the file `status` describes."""
    return Md5Md5CrcHasher(checksum.crc_type, checksum.bytes_per_crc, checksum_block_size(checksum, status))


def file_md5md5crc(path: str, crc_type: str, bytes_per_crc: int, block_size: int) -> bytes:
    """The MD5 of HDFS's MD5-of-MD5-of-CRC checksum of a local file (plain arguments, so that a
    process pool can run it)."""
    hasher = Md5Md5CrcHasher(crc_type, bytes_per_crc, block_size)
    with open(path, "rb") as local:
        while piece := local.read(Md5Md5CrcHasher.SEGMENT):
            hasher.update(piece)
    return hasher.digest()
