"""The WebHDFS client, with the Python standard library only (the launcher runs in a stock Triton
image; the CLI, the modules and the controller use the same client).

The NameNode answers metadata calls itself and redirects (307) data calls (OPEN, CREATE and
GETFILECHECKSUM) to a DataNode; the client follows that one hop explicitly, so that a retry goes
back to the NameNode, which may pick another DataNode, and so that a CREATE sends its data to the
DataNode only. Connection errors, timeouts and 5xx answers are retried with exponential backoff;
an OPEN cut off mid-stream resumes at the offset it reached; a CREATE is retried whole.

Authentication is an `Authenticator`: `SimpleAuth` (``user.name``), `DelegationTokenAuth`, or
`tarn.stdlib.kerberos.SpnegoAuth` on a Kerberized cluster (SPNEGO through ctypes over MIT's
GSSAPI, standard library only). HDFS's file checksum, recomputed locally, is tarn.stdlib.hdfs_checksum.

Not here yet:
- NameNode HA: the hdfs:// authority is then a nameservice id; pass the active NameNode's HTTP
  address as the WebHDFS URL until the client learns to try each NameNode in turn.
"""

from __future__ import annotations

import concurrent.futures
import functools
import http.client
import json
import logging
import mmap
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from tarn.errors import ClusterError
from tarn.stdlib.hadoop_site import namenode_http_url, read_properties

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Hadoop 3's default NameNode HTTP port (dfs.namenode.http-address).
DEFAULT_NAMENODE_HTTP_PORT = 9870


class WebHdfsError(ClusterError):
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


def namenode_from_conf(source: str, conf_dir: Path, webhdfs_url: str | None = None) -> tuple[str, str]:
    """:func:`namenode_location` with what a Hadoop client configuration (``conf_dir``) says: the
    NameNode's HTTP address from hdfs-site.xml (HTTPS on a cluster that asks for it), fs.defaultFS
    from core-site.xml. The one way the CLI, the launcher and the controller find WebHDFS."""
    hdfs_site = read_properties(conf_dir / "hdfs-site.xml")
    default_fs = read_properties(conf_dir / "core-site.xml").get("fs.defaultFS")
    return namenode_location(source, webhdfs_url or namenode_http_url(hdfs_site), default_fs)


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
    owner: str = ""
    permission: str = ""  # octal, e.g. "644"
    file_id: int | None = None  # the NameNode's inode id: a rewritten file gets a new one

    @classmethod
    def from_json(cls, path: str, obj: dict[str, Any]) -> FileStatus:
        return cls(
            path=path,
            type=str(obj["type"]),
            length=int(obj.get("length", 0)),
            block_size=int(obj.get("blockSize", 0)),
            modification_time=int(obj.get("modificationTime", 0)),
            erasure_coded=bool(obj.get("ecBit") or obj.get("ecPolicy")),
            owner=str(obj.get("owner", "")),
            permission=str(obj.get("permission", "")),
            file_id=int(obj["fileId"]) if "fileId" in obj else None,
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


Chunk = TypeVar("Chunk", bytes, memoryview)
_TRANSIENT = (OSError, http.client.HTTPException)  # URLError, timeouts, resets, IncompleteRead


class WebHdfsClient:
    """WebHDFS reads and writes. `sleep` is injectable so tests need not wait out the backoff."""

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

    # ---- reads
    def status(self, path: str) -> FileStatus | None:
        """The file or directory at ``path``; None when there is none."""
        try:
            obj = self._json("GET", path, "GETFILESTATUS")["FileStatus"]
        except HdfsNotFoundError:
            return None
        return FileStatus.from_json(path, obj)

    def list_dir(self, path: str) -> list[FileStatus]:
        """The entries of a directory (a file lists as itself)."""
        entries = self._json("GET", path, "LISTSTATUS")["FileStatuses"]["FileStatus"]
        base = path.rstrip("/")
        return [
            FileStatus.from_json(f"{base}/{e['pathSuffix']}" if e.get("pathSuffix") else path, e)
            for e in entries
        ]

    def walk(
        self, path: str, missing_ok: bool = False, *, pool: concurrent.futures.Executor | None = None
    ) -> list[FileStatus]:
        """Every file under `path` (or `path` itself when it is a file), in path order; with
        ``missing_ok``, [] when `path` does not exist (else HdfsNotFoundError). With `pool`, the
        directories of each level are listed at once (one LISTSTATUS each: a model repository
        has two directories per model, the model's and its version's)."""

        def listing(directory: str) -> list[FileStatus]:
            try:
                return self.list_dir(directory)
            except HdfsNotFoundError:
                if missing_ok:
                    return []
                raise

        files: list[FileStatus] = []
        level = [path.rstrip("/") or "/"]
        while level:
            listings = pool.map(listing, level) if pool else map(listing, level)
            level = []
            for entry in (entry for entries in listings for entry in entries):
                if entry.type == "DIRECTORY":
                    level.append(entry.path)
                elif entry.type == "FILE":
                    files.append(entry)
                else:
                    log.warning("skipping %s: WebHDFS type %s is not a file", entry.path, entry.type)
        return sorted(files, key=lambda f: f.path)

    def checksum(self, path: str) -> FileChecksum | None:
        """HDFS's checksum of a file; None when the file system has none to give."""
        obj = self._json("GET", path, "GETFILECHECKSUM").get("FileChecksum")
        return FileChecksum.from_json(obj) if obj else None

    def read(
        self, path: str, chunk_size: int = 1 << 20, *, offset: int = 0, length: int | None = None
    ) -> Iterator[bytes]:
        """The file's bytes in chunks, from `offset` for `length` bytes (default: to the end); a
        stream cut off mid-way resumes where it stopped."""
        return self._stream(path, offset, length, lambda reply: reply.read(chunk_size))

    def read_into(
        self, path: str, buffer: bytearray | mmap.mmap, *, offset: int = 0, length: int | None = None
    ) -> Iterator[memoryview]:
        """As :meth:`read`, into `buffer` again and again (no allocation per chunk): each chunk is
        a view of `buffer`, valid until the next one is asked for."""
        view = memoryview(buffer)
        return self._stream(path, offset, length, lambda reply: view[: reply.readinto(view)])

    def _stream(
        self,
        path: str,
        offset: int,
        length: int | None,
        take: Callable[[http.client.HTTPResponse], Chunk],
    ) -> Iterator[Chunk]:
        failures = 0
        while length is None or length > 0:
            params = {"offset": str(offset)} | ({"length": str(length)} if length is not None else {})
            url = self._url(path, "OPEN", **params)
            reply = self._retrying(f"OPEN {path}", functools.partial(self._open, "GET", url))
            try:
                with reply:
                    declared, got = reply.headers.get("Content-Length"), 0
                    while chunk := take(reply):
                        offset += len(chunk)
                        got += len(chunk)
                        if length is not None:
                            length -= len(chunk)
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

    def read_bytes(self, path: str) -> bytes:
        return b"".join(self.read(path))

    # ---- writes
    def mkdirs(self, path: str, permission: str = "755") -> None:
        self._json("PUT", path, "MKDIRS", permission=permission)

    def write(self, path: str, data: bytes, overwrite: bool = True, permission: str = "644") -> None:
        """Create (or replace) the file ``path`` with ``data``, parent directories included."""
        url = self._url(path, "CREATE", overwrite=str(overwrite).lower(), permission=permission)

        def attempt() -> None:
            with self._open("PUT", url, data):
                pass

        self._retrying(f"CREATE {path}", attempt)

    def append(self, path: str, data: bytes) -> None:
        """Append ``data`` to the file ``path``. Not retried: an append whose answer was lost may
        have happened, and a retry would write it twice; the caller decides."""
        try:
            with self._open("POST", self._url(path, "APPEND"), data):
                pass
        except _TRANSIENT as exc:
            raise WebHdfsError(f"WebHDFS APPEND {path}: {exc}") from exc

    def delete(self, path: str, recursive: bool = False) -> bool:
        """Whether something was deleted (False: nothing was there)."""
        return bool(self._json("DELETE", path, "DELETE", recursive=str(recursive).lower())["boolean"])

    def upload_tree(self, local: Path, remote: str) -> int:
        """Copy every file under `local` to the same relative path under `remote`; the count copied."""
        files = [p for p in sorted(local.rglob("*")) if p.is_file() and "__pycache__" not in p.parts]
        for path in files:
            self.write(f"{remote}/{path.relative_to(local).as_posix()}", path.read_bytes())
        return len(files)

    # ---- transport
    def _url(self, path: str, op: str, **params: str) -> str:
        if not path.startswith("/"):
            raise ValueError(f"HDFS path must be absolute: {path!r}")
        query = urllib.parse.urlencode({"op": op, **params, **self._auth.query()})
        return f"{self._base}{urllib.parse.quote(path)}?{query}"

    def _json(self, method: str, path: str, op: str, **params: str) -> dict[str, Any]:
        def attempt() -> dict[str, Any]:
            with self._open(method, self._url(path, op, **params)) as reply:
                body = reply.read()
            try:
                found: dict[str, Any] = json.loads(body)
            except ValueError as exc:
                raise WebHdfsError(f"WebHDFS {op} {path}: the answer is not JSON") from exc
            return found

        return self._retrying(f"{op} {path}", attempt)

    def _open(self, method: str, url: str, data: bytes | None = None) -> http.client.HTTPResponse:
        """``method`` `url`, following the NameNode's redirect to a DataNode (one hop); ``data``
        goes to the DataNode only (WebHDFS's two-step CREATE)."""
        headers = {} if data is None else {"Content-Type": "application/octet-stream"}
        for _hop in range(2):
            # The NameNode gets an empty body and names the DataNode that takes the data.
            body = None if data is None else data if _hop else b""
            request = urllib.request.Request(  # noqa: S310 - http(s) only
                url, data=body, method=method, headers={**headers, **self._auth.headers(url)}
            )
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
