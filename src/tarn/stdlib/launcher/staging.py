"""Stage Triton's model repository: an hdfs:// repository is copied to a container-local
directory; a local path (an HDFS NFS gateway mount) is used in place. Standard library only.

The copy goes through a node-local cache, so a restarted instance re-downloads nothing unchanged:

    cache_dir/
      manifest.json     per source file: length, modificationTime, HDFS checksum (algorithm and
                        bytes), the cache object holding it, and how it was verified
      objects/<key>     verified, read-only file contents; the key is derived from HDFS's checksum
                        and length, so identical files share one object
      partial/          downloads in progress (a crash leaves them here, never in objects/)

A download streams into partial/, is checked (length, then content against HDFS's checksum,
recomputed locally: see webhdfs.py), fsynced and renamed into objects/ atomically, and only then
recorded in the manifest. Files are then hard-linked (or copied, across file systems) into the
target directory. Content checks are skipped, with a warning and a mark in the report, only where
they cannot be made (no checksum, an algorithm not recomputable, erasure coding) or for files
above `verify_limit` bytes when one is set.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import fcntl
import hashlib
import json
import logging
import multiprocessing
import os
import posixpath
import shutil
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from tarn.stdlib.hdfs_checksum import (
    Md5Md5Crc,
    checksum_block_size,
    file_md5md5crc,
    hasher_for,
    parse_checksum,
)
from tarn.stdlib.webhdfs import FileChecksum, FileStatus, WebHdfsClient, WebHdfsError

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
MARKER = ".tarn-staged"  # marks a target directory as TARN's to empty and refill
PARTIAL_MAX_AGE_S = 24 * 3600  # partial downloads older than this are leftovers of a crash
# Files at least this big are verified in worker processes: the CRC is CPU-bound pure Python and
# threads share one interpreter lock. Smaller ones are checked in the download stream.
OFFLOAD_MIN_BYTES = 8 << 20

#: Recomputes HDFS's checksum of a finished download: (local file, expected, block size) -> MD5.
Verifier = Callable[[str, Md5Md5Crc, int], bytes]


class StagingError(Exception):
    """The repository could not be staged; the message names the file and the reason."""


@dataclass(frozen=True)
class RemoteFile:
    """One file of the repository as HDFS describes it."""

    relpath: str  # POSIX path under the repository root
    status: FileStatus
    checksum: FileChecksum | None

    @property
    def key(self) -> str:
        """The cache object's name: HDFS's checksum and the length identify the content."""
        if self.checksum:
            material = f"{self.checksum.algorithm}\n{self.checksum.bytes}\n{self.status.length}"
        else:  # no checksum: only this path at this length and modification time
            material = f"path\n{self.status.path}\n{self.status.length}\n{self.status.modification_time}"
        return hashlib.sha256(material.encode()).hexdigest()


@dataclass(frozen=True)
class CacheEntry:
    """The manifest's record of one source file."""

    length: int
    modification_time: int
    algorithm: str | None
    checksum: str | None
    object: str
    verified: str  # "content" or "length"


@dataclass(frozen=True)
class StageReport:
    source: str
    target: Path
    downloaded: int
    reused: int
    bytes_downloaded: int
    bytes_reused: int
    seconds: float
    unverified: tuple[str, ...] = ()  # files whose content could not be or was not checked

    def summary(self) -> str:
        mib = self.bytes_downloaded / 2**20
        rate = mib / self.seconds if self.seconds > 0 else 0.0
        text = (
            f"staged {self.source} into {self.target}: {self.downloaded} downloaded ({mib:.1f} MiB, "
            f"{rate:.1f} MiB/s), {self.reused} reused from the cache, {self.seconds:.2f} s"
        )
        return text + (f"; {len(self.unverified)} not content-verified" if self.unverified else "")


# ---- decisions (pure) ------------------------------------------------------------------------


def plan(files: Iterable[RemoteFile], cached: set[str]) -> tuple[list[RemoteFile], list[RemoteFile]]:
    """(to download, to reuse): a file is reused when the cache holds an object for its key."""
    download: list[RemoteFile] = []
    reuse: list[RemoteFile] = []
    for remote in files:
        (reuse if remote.key in cached else download).append(remote)
    return download, reuse


def content_check(remote: RemoteFile, verify_limit: int | None) -> tuple[Md5Md5Crc | None, str | None]:
    """(the checksum to recompute, None) or (None, why the content cannot or will not be checked)."""
    if remote.checksum is None:
        return None, "HDFS gave no checksum"
    if remote.status.erasure_coded:
        return None, "erasure-coded file: its MD5-of-MD5 checksum is not over the plain CRCs"
    parsed = parse_checksum(remote.checksum)
    if parsed is None:
        return None, f"checksum algorithm {remote.checksum.algorithm} is not recomputed here"
    if verify_limit is not None and remote.status.length > verify_limit:
        return None, f"{remote.status.length} bytes is above the verification limit of {verify_limit}"
    return parsed, None


def check_download(
    remote: RemoteFile, size: int, md5: bytes | None, expected: Md5Md5Crc | None
) -> str | None:
    """What is wrong with a finished download, or None."""
    if size != remote.status.length:
        return f"downloaded {size} bytes, HDFS says {remote.status.length} (changed while staging?)"
    if expected is not None and md5 != expected.md5:
        algorithm = remote.checksum.algorithm if remote.checksum else "?"
        return f"content does not match HDFS's {algorithm} checksum"
    return None


def usable_objects(manifest: dict[str, CacheEntry], sizes: dict[str, int]) -> set[str]:
    """Objects the manifest records and the cache holds at the recorded length."""
    return {entry.object for entry in manifest.values() if sizes.get(entry.object) == entry.length}


def safe_relpath(root: str, path: str) -> str:
    """`path` relative to `root`, refusing anything that would land outside the target."""
    relpath = posixpath.relpath(path, root)
    if relpath == "." or relpath.startswith("../") or relpath == ".." or posixpath.isabs(relpath):
        raise StagingError(f"{path} is not inside the repository {root}")
    return relpath


# ---- the node-local cache (thin I/O) ---------------------------------------------------------


class Cache:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.objects = root / "objects"
        self.partial = root / "partial"
        self.objects.mkdir(parents=True, exist_ok=True)
        self.partial.mkdir(parents=True, exist_ok=True)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """The manifest is shared by every stager on the node: one writer at a time."""
        with open(self.root / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def manifest(self) -> dict[str, CacheEntry]:
        try:
            data = json.loads((self.root / MANIFEST).read_text())
            return {source: CacheEntry(**entry) for source, entry in data["files"].items()}
        except FileNotFoundError:
            return {}
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("cache manifest %s is unreadable (%s): starting afresh", self.root / MANIFEST, exc)
            return {}

    def record(self, source: str, entry: CacheEntry) -> None:
        with self._locked():
            entries = self.manifest()
            entries[source] = entry
            payload = {"version": 1, "files": {s: asdict(e) for s, e in sorted(entries.items())}}
            _write_atomically(self.root / MANIFEST, json.dumps(payload, indent=1).encode())

    def object_sizes(self) -> dict[str, int]:
        return {p.name: p.stat().st_size for p in self.objects.iterdir() if p.is_file()}

    def sweep_partials(self, now: float) -> None:
        for leftover in self.partial.iterdir():
            with contextlib.suppress(OSError):
                if now - leftover.stat().st_mtime > PARTIAL_MAX_AGE_S:
                    leftover.unlink()


def _write_atomically(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _download(
    client: WebHdfsClient,
    cache: Cache,
    remote: RemoteFile,
    verify_limit: int | None,
    offload: Verifier | None,
) -> CacheEntry:
    """Fetch one file into the cache, verified; one more try if the bytes do not check out."""
    expected, skipped = content_check(remote, verify_limit)
    if skipped:
        log.warning("%s: content not verified, length only: %s", remote.relpath, skipped)
    for attempt in (1, 2):
        problem = _fetch_object(client, cache, remote, expected, offload)
        if problem is None:
            checksum = remote.checksum
            return CacheEntry(
                length=remote.status.length,
                modification_time=remote.status.modification_time,
                algorithm=checksum.algorithm if checksum else None,
                checksum=checksum.bytes if checksum else None,
                object=remote.key,
                verified="content" if expected else "length",
            )
        log.warning("%s: %s (attempt %d of 2)", remote.relpath, problem, attempt)
    raise StagingError(f"{remote.status.path}: {problem}")


def _fetch_object(
    client: WebHdfsClient,
    cache: Cache,
    remote: RemoteFile,
    expected: Md5Md5Crc | None,
    offload: Verifier | None,
) -> str | None:
    """Stream into partial/, check, rename into objects/; returns what was wrong, if anything."""
    offloaded = expected is not None and offload is not None and remote.status.length >= OFFLOAD_MIN_BYTES
    hasher = hasher_for(expected, remote.status) if expected and not offloaded else None
    fd, tmp = tempfile.mkstemp(dir=cache.partial, prefix=f"{remote.key[:16]}.")
    try:
        size = 0
        with os.fdopen(fd, "wb") as out:
            for chunk in client.read(remote.status.path):
                out.write(chunk)
                size += len(chunk)
                if hasher:
                    hasher.update(chunk)
            out.flush()
            os.fsync(out.fileno())
        md5 = hasher.digest() if hasher else None
        if offloaded and offload and expected and size == remote.status.length:
            md5 = offload(tmp, expected, checksum_block_size(expected, remote.status))
        problem = check_download(remote, size, md5, expected)
        if problem is None:
            os.chmod(tmp, 0o444)  # a hard link into the target must not let anyone edit the cache
            os.replace(tmp, cache.objects / remote.key)
            return None
        return problem
    finally:
        Path(tmp).unlink(missing_ok=True)


def _place(cache: Cache, remote: RemoteFile, target_dir: Path) -> None:
    """Hard-link the cached object into the target; copy where a link cannot be made."""
    dest = target_dir.joinpath(*remote.relpath.split("/"))
    dest.parent.mkdir(parents=True, exist_ok=True)
    source = cache.objects / remote.key
    try:
        os.link(source, dest)
    except OSError:
        shutil.copyfile(source, dest)


def _prepare_target(target_dir: Path, source: str) -> None:
    """An empty or absent directory, or one TARN staged before (emptied): anything else is refused."""
    if target_dir.exists():
        if (target_dir / MARKER).is_file():
            shutil.rmtree(target_dir)
        elif any(target_dir.iterdir()):
            raise StagingError(
                f"{target_dir} is not empty and was not staged by TARN: refusing to replace it"
            )
    target_dir.mkdir(parents=True, exist_ok=True)
    (target_dir / MARKER).write_text(json.dumps({"source": source}) + "\n")


# ---- the entry points ------------------------------------------------------------------------


def stage_repository(
    source: str,
    target_dir: Path,
    cache_dir: Path,
    client: WebHdfsClient,
    workers: int = 4,
    *,
    verify_limit: int | None = None,
    verify_processes: int | None = None,
) -> StageReport:
    """Copy the hdfs:// repository `source` into `target_dir` through the cache in `cache_dir`.

    `workers` downloads run at once; files of OFFLOAD_MIN_BYTES or more are verified in up to
    `verify_processes` worker processes (default: as many as `workers`, at most one per CPU;
    0 verifies everything in the download threads). On failure the target directory is removed
    (Triton must not serve half a repository); what was verified and cached stays cached.
    """
    started = time.monotonic()
    root = urllib.parse.unquote(urllib.parse.urlsplit(source).path).rstrip("/") or "/"
    base = source.rstrip("/")
    cache = Cache(cache_dir)
    cache.sweep_partials(time.time())
    try:
        with contextlib.ExitStack() as stack:
            pool = stack.enter_context(concurrent.futures.ThreadPoolExecutor(max_workers=max(1, workers)))
            listed = client.walk(root)
            if not listed:
                raise StagingError(f"{source}: no files to stage")
            relpaths = [safe_relpath(root, f.path) for f in listed]
            checksums = list(pool.map(lambda f: client.checksum(f.path), listed))
            files = [RemoteFile(r, f, c) for r, f, c in zip(relpaths, listed, checksums, strict=True)]
            download, reuse = plan(files, usable_objects(cache.manifest(), cache.object_sizes()))
            _prepare_target(target_dir, source)
            offload = _verifier(stack, download, workers, verify_limit, verify_processes)

            def fetch(remote: RemoteFile) -> None:
                entry = _download(client, cache, remote, verify_limit, offload)
                cache.record(f"{base}/{remote.relpath}", entry)
                _place(cache, remote, target_dir)

            for remote in reuse:
                _place(cache, remote, target_dir)
            _wait_all([pool.submit(fetch, remote) for remote in download])
    except BaseException as exc:
        if target_dir.is_dir() and (target_dir / MARKER).is_file():
            shutil.rmtree(target_dir, ignore_errors=True)
        if isinstance(exc, WebHdfsError):
            raise StagingError(f"staging {source}: {exc}") from exc
        raise
    unverified = [remote.relpath for remote in download if content_check(remote, verify_limit)[1]]
    return StageReport(
        source=source,
        target=target_dir,
        downloaded=len(download),
        reused=len(reuse),
        bytes_downloaded=sum(r.status.length for r in download),
        bytes_reused=sum(r.status.length for r in reuse),
        seconds=time.monotonic() - started,
        unverified=tuple(unverified),
    )


def _verifier(
    stack: contextlib.ExitStack,
    download: list[RemoteFile],
    workers: int,
    verify_limit: int | None,
    processes: int | None,
) -> Verifier | None:
    """A process pool for the big files' checksums, when there are any and processes are allowed."""
    big = [r for r in download if r.status.length >= OFFLOAD_MIN_BYTES and content_check(r, verify_limit)[0]]
    count = min(len(big), processes if processes is not None else min(workers, os.cpu_count() or 1))
    if count < 1:
        return None
    # spawn, not fork: this process runs threads, and fork copies their locks mid-flight
    context = multiprocessing.get_context("spawn")
    procs = stack.enter_context(concurrent.futures.ProcessPoolExecutor(max_workers=count, mp_context=context))

    def verify(path: str, expected: Md5Md5Crc, block_size: int) -> bytes:
        future = procs.submit(file_md5md5crc, path, expected.crc_type, expected.bytes_per_crc, block_size)
        return future.result()

    return verify


def _wait_all(futures: list[concurrent.futures.Future[None]]) -> None:
    """Wait for every download; on the first failure cancel those not started, then raise it."""
    done, pending = concurrent.futures.wait(futures, return_when=concurrent.futures.FIRST_EXCEPTION)
    failed = [f for f in done if f.exception() is not None]
    if failed:
        for future in pending:
            future.cancel()
        concurrent.futures.wait(pending)
        error = failed[0].exception()
        assert error is not None
        raise error


def resolve_repository(
    source: str,
    *,
    target_dir: Path | None = None,
    cache_dir: Path | None = None,
    client: WebHdfsClient | None = None,
    workers: int = 4,
    verify_limit: int | None = None,
    verify_processes: int | None = None,
) -> Path:
    """The directory Triton serves: a local path (``/…`` or ``file:///…``, e.g. an NFS gateway
    mount) as it is, an hdfs:// repository staged into `target_dir`."""
    parts = urllib.parse.urlsplit(source)
    if parts.scheme in ("", "file"):
        local = Path(urllib.parse.unquote(parts.path))
        if not local.is_absolute():
            raise StagingError(f"model repository {source!r}: a local path must be absolute")
        if not local.is_dir():
            raise StagingError(f"model repository {local} is not a directory (is the NFS gateway mounted?)")
        return local
    if parts.scheme != "hdfs":
        raise StagingError(f"model repository {source!r}: only hdfs:// and local paths are supported")
    if target_dir is None or cache_dir is None or client is None:
        raise StagingError(
            f"model repository {source!r}: staging needs a target, a cache and a WebHDFS client"
        )
    report = stage_repository(
        source,
        target_dir,
        cache_dir,
        client,
        workers,
        verify_limit=verify_limit,
        verify_processes=verify_processes,
    )
    log.info("%s", report.summary())
    return target_dir
