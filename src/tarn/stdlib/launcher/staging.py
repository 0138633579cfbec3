"""Stage Triton's model repository: an hdfs:// repository is copied to a container-local
directory; a local path (an HDFS NFS gateway mount) is used in place. Standard library only.

The copy goes through the node's model cache (:mod:`tarn.stdlib.launcher.cache`), shared by every
instance and service on the NodeManager: an unchanged file is never fetched twice, a changed one
(a new key: see RemoteFile.key) is fetched alone, and two instances staging the same file at once
fetch it once (the second waits for the first's claim, then links its copy).

How the bytes are known to be HDFS's (``verify="hdfs"``, the default): a WebHDFS OPEN is served by
the DataNode through HDFS's own client with checksum verification on, so every 512-byte chunk is
checked against the block's stored CRC as it is read (a corrupt replica fails the read and HDFS
reports it); TARN checks that every range arrived whole (lengths) and keeps a CRC-32 of each piece
of what it wrote, computed in the stream at C speed. ``verify="recompute"`` also recomputes HDFS's
MD5-of-MD5-of-CRC32C here and matches GETFILECHECKSUM (catches a fault between the DataNode and
this disk; pure Python, 66-150 MB/s per core on the lab: the slowest part of a staging then).

Each start checks every reused file against its CRC-32s (length and content: a truncated or
edited cache file is fetched again before Triton starts); on the lab 0.21-0.23 s per GiB from the
page cache, 0.71 s per GiB from disk (a big file just staged: written with O_DIRECT).

Files of RANGE_MIN_BYTES or more are fetched as parallel range reads (OPEN offset/length), the rest
several files at a time; progress (bytes, files, rate, time left) is logged every few seconds.
Those big files are written with O_DIRECT where the cache's file system takes it (see PartialFile).
"""

from __future__ import annotations

import concurrent.futures
import errno
import hashlib
import json
import logging
import mmap
import os
import posixpath
import shutil
import threading
import time
import urllib.parse
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tarn.stdlib.hdfs_checksum import Md5Md5Crc, checksum_block_size, file_md5md5crc, parse_checksum
from tarn.stdlib.launcher.cache import PIECE_BYTES, Claim, NodeCache, ObjectMeta, pieces
from tarn.stdlib.webhdfs import FileChecksum, FileStatus, WebHdfsClient, WebHdfsError

log = logging.getLogger(__name__)

MARKER = ".tarn-staged"  # marks a target directory as TARN's to empty and refill
RANGE_MIN_BYTES = 2 * PIECE_BYTES  # files this big are fetched in parallel ranges
PROGRESS_INTERVAL_S = 5.0
READ_BUFFER_BYTES = 1 << 20  # per range read, reused for every chunk
DIRECT_ALIGN = 4096  # O_DIRECT wants offsets, lengths and memory on the device's block size
Verify = Literal["hdfs", "recompute"]  # tarn.stdlib.config.MODEL_VERIFY_MODES, as a type


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
        """The cache object's name. With HDFS's checksum (asked for with ``--model-verify
        recompute``): the checksum and the length, so identical files share one object. Else this
        version of the file: its path, inode id, modification time and length, all from the
        listing. A rewritten file has a new inode, an appended or truncated one a new time and
        length: a changed file gets a new key, an unchanged one keeps its key, and no DataNode
        is asked per file (GETFILECHECKSUM costs about what reading a small file does)."""
        status = self.status
        if self.checksum:
            material = f"{self.checksum.algorithm}\n{self.checksum.bytes}\n{status.length}"
        else:
            material = f"path\n{status.path}\n{status.file_id}\n{status.length}\n{status.modification_time}"
        return hashlib.sha256(material.encode()).hexdigest()


@dataclass(frozen=True)
class StageReport:
    source: str
    target: Path
    downloaded: int  # files fetched from HDFS by this stager
    reused: int  # files linked from the cache
    bytes_downloaded: int
    bytes_reused: int
    seconds: float
    waited: int = 0  # of the reused: fetched meanwhile by another stager on this node
    refetched: int = 0  # of the downloaded: cached, but changed on this node since
    evicted: int = 0  # objects removed to keep the cache within its bound
    verify: Verify = "hdfs"

    def summary(self) -> str:
        mib = self.bytes_downloaded / 2**20
        rate = mib / self.seconds if self.seconds > 0 else 0.0
        text = (
            f"staged {self.source} into {self.target}: {self.downloaded} downloaded ({mib:.1f} MiB, "
            f"{rate:.1f} MiB/s), {self.reused} reused from the node cache "
            f"({self.bytes_reused / 2**20:.1f} MiB), {self.seconds:.2f} s"
        )
        extras = [
            f"{self.waited} fetched meanwhile by another instance" if self.waited else "",
            f"{self.refetched} changed in the cache and fetched again" if self.refetched else "",
            f"{self.evicted} old cache files evicted" if self.evicted else "",
        ]
        return "; ".join([text, *filter(None, extras)]) + f" [verified: {self.verify}]"


# ---- decisions (pure) ------------------------------------------------------------------------


def plan(
    files: Iterable[RemoteFile], cached: set[str]
) -> tuple[dict[str, list[RemoteFile]], list[RemoteFile]]:
    """(to download, by key: identical files are fetched once; to reuse from the cache)."""
    download: dict[str, list[RemoteFile]] = {}
    reuse: list[RemoteFile] = []
    for remote in files:
        if remote.key in cached:
            reuse.append(remote)
        else:
            download.setdefault(remote.key, []).append(remote)
    return download, reuse


def big(length: int) -> bool:
    """Whether a file is read in parallel ranges (given two workers or more) and written with
    O_DIRECT; smaller files are fetched whole, several at a time, through the page cache."""
    return length >= RANGE_MIN_BYTES


def ranges(length: int, workers: int) -> list[tuple[int, int]]:
    """(offset, length) of the range reads of one file: one for a small file, else up to `workers`
    parts on piece boundaries (each part's CRCs are then whole pieces)."""
    if not big(length) or workers < 2:
        return [(0, length)]
    per_part = -(-length // workers)
    part = -(-per_part // PIECE_BYTES) * PIECE_BYTES
    return [(start, min(part, length - start)) for start in range(0, length, part)]


def direct_write(position: int, size: int) -> bool:
    """Whether a chunk can go through O_DIRECT: it starts and ends on DIRECT_ALIGN (the buffer
    itself is page-aligned). A file's unaligned tail, or a chunk cut short by a broken stream,
    is written through the page cache."""
    return size > 0 and position % DIRECT_ALIGN == 0 and size % DIRECT_ALIGN == 0


def usable(meta: ObjectMeta | None, verify: Verify) -> bool:
    """A cached object can stand in for the file when it was verified at least as asked."""
    return meta is not None and (verify == "hdfs" or meta.verified == "recomputed")


def recompute_target(remote: RemoteFile) -> tuple[Md5Md5Crc | None, str | None]:
    """(the checksum to recompute, None) or (None, why HDFS's checksum cannot be recomputed)."""
    if remote.checksum is None:
        return None, "HDFS gave no checksum"
    if remote.status.erasure_coded:
        return None, "erasure-coded file: its MD5-of-MD5 checksum is not over the plain CRCs"
    parsed = parse_checksum(remote.checksum)
    if parsed is None:
        return None, f"checksum algorithm {remote.checksum.algorithm} is not recomputed here"
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


def safe_relpath(root: str, path: str) -> str:
    """`path` relative to `root`, refusing anything that would land outside the target."""
    relpath = posixpath.relpath(path, root)
    if relpath == "." or relpath.startswith("../") or relpath == ".." or posixpath.isabs(relpath):
        raise StagingError(f"{path} is not inside the repository {root}")
    return relpath


def progress_line(done: int, total: int, files_done: int, files: int, elapsed: float) -> str:
    """One progress line: bytes, files, rate and the time left at that rate."""
    rate = done / elapsed if elapsed > 0 else 0.0
    left = f"about {(total - done) / rate:.0f} s left" if rate > 0 else "time left unknown"
    share = 100 * done / total if total else 100.0
    return (
        f"staging: {done / 2**30:.2f} of {total / 2**30:.2f} GiB ({share:.0f} %), {files_done} of {files} "
        f"files, {rate / 2**20:.0f} MiB/s, {left}"
    )


# ---- progress ----------------------------------------------------------------------------------


class Progress:
    """Counts bytes and files as they land; logs a line every `interval` seconds."""

    def __init__(self, total: int, files: int, interval: float = PROGRESS_INTERVAL_S) -> None:
        self._total, self._files, self._interval = total, files, interval
        self._done = self._files_done = 0
        self._started = self._logged = time.monotonic()
        self._lock = threading.Lock()

    def add(self, count: int) -> None:
        with self._lock:
            self._done += count
            self._maybe_log()

    def file_done(self) -> None:
        with self._lock:
            self._files_done += 1
            self._maybe_log()

    def _maybe_log(self) -> None:
        now = time.monotonic()
        if now - self._logged >= self._interval:
            self._logged = now
            log.info(
                "%s",
                progress_line(self._done, self._total, self._files_done, self._files, now - self._started),
            )


# ---- the steps (I/O) -----------------------------------------------------------------------------


class PartialFile:
    """A download in progress, written at offsets from several threads.

    A big file's aligned chunks go through a second descriptor opened with O_DIRECT: the device
    takes them from the reader's buffer, so staging does not copy gigabytes into the page cache
    (kernel time that competes with the DataNodes for the node's cores: on the lab's VM a fresh
    page costs about 10 us, 1.4 s of CPU for 512 MiB against 0.02 s direct) nor push Triton's or
    other services' pages out of it. Where the file system refuses O_DIRECT (at open or at the
    first write), everything goes through the page cache."""

    def __init__(self, fd: int, path: str, direct: bool) -> None:
        self.fd = fd
        self.direct_fd: int | None = None  # kept open to the end, even once refused
        if direct and hasattr(os, "O_DIRECT"):
            try:
                self.direct_fd = os.open(path, os.O_WRONLY | os.O_DIRECT)
            except OSError as exc:
                log.debug("O_DIRECT refused for %s (%s): writing through the page cache", path, exc)
        self._use_direct = self.direct_fd is not None

    def buffer(self, size: int) -> bytearray | mmap.mmap:
        """A read buffer: page-aligned anonymous memory for O_DIRECT, else a bytearray."""
        return mmap.mmap(-1, size) if self.direct_fd is not None else bytearray(size)

    def write(self, chunk: memoryview, position: int) -> None:
        if self._use_direct and self.direct_fd is not None and direct_write(position, len(chunk)):
            try:
                os.pwrite(self.direct_fd, chunk, position)
                return
            except OSError as exc:
                if exc.errno != errno.EINVAL:
                    raise
                log.debug("O_DIRECT write refused (%s): writing through the page cache", exc)
                self._use_direct = False
        os.pwrite(self.fd, chunk, position)

    def close(self) -> None:
        os.close(self.fd)
        if self.direct_fd is not None:
            os.close(self.direct_fd)


def _place(cache: NodeCache, remote: RemoteFile, target_dir: Path) -> None:
    """Hard-link the cached object into the target (copy where a link cannot be made: another
    file system, or another mount point, as in a Docker container); mark it used."""
    dest = target_dir.joinpath(*remote.relpath.split("/"))
    dest.parent.mkdir(parents=True, exist_ok=True)
    source = cache.object_path(remote.key)
    try:
        os.link(source, dest)
    except OSError:
        shutil.copyfile(source, dest)
    cache.touch(remote.key)


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


@dataclass
class _Stager:
    client: WebHdfsClient
    cache: NodeCache
    target_dir: Path
    pool: concurrent.futures.ThreadPoolExecutor
    workers: int
    verify: Verify
    progress: Progress

    def check_cached(self, metas: dict[str, ObjectMeta]) -> dict[str, str]:
        """Each cached object's pieces against their CRC-32s, in parallel: {key: problem}."""
        jobs = [
            (k, piece)
            for k, meta in metas.items()
            for piece in range(len(pieces(meta.length, meta.piece_bytes)))
        ]
        results = self.pool.map(lambda job: (job[0], *self.cache.check(job[0], metas[job[0]], job[1])), jobs)
        problems: dict[str, str] = {}
        for key, _piece, problem in results:
            if problem and key not in problems:
                problems[key] = problem
        return problems

    def read_part(
        self, remote: RemoteFile, writer: PartialFile, offset: int, length: int
    ) -> tuple[list[int], int]:
        """One range of the file into `writer` at its offset: (CRC-32 of each piece, bytes received)."""
        crcs: list[int] = []
        crc, in_piece, position = 0, 0, offset
        buffer = writer.buffer(min(READ_BUFFER_BYTES, max(length, 1)))
        for chunk in self.client.read_into(remote.status.path, buffer, offset=offset, length=length):
            writer.write(chunk, position)
            position += len(chunk)
            view = chunk
            while view:  # split the chunk at piece boundaries
                take = min(len(view), PIECE_BYTES - in_piece)
                crc = zlib.crc32(view[:take], crc)
                in_piece += take
                view = view[take:]
                if in_piece == PIECE_BYTES:
                    crcs.append(crc)
                    crc, in_piece = 0, 0
            self.progress.add(len(chunk))
        if in_piece or not crcs:
            crcs.append(crc)
        return crcs, position - offset

    def fetch(self, key: str, files: list[RemoteFile], claim: Claim) -> None:
        """Download one object (one more try if its bytes do not check out), publish it, place
        every file that has it. Parts of a big file run in the pool: call from outside it."""
        remote = files[0]
        length = remote.status.length
        try:
            problem: str | None = "not fetched"
            parts = ranges(length, self.workers)
            for attempt in (1, 2):
                fd, partial = self.cache.new_partial(key)
                writer = PartialFile(fd, partial, direct=big(length))
                try:
                    os.ftruncate(fd, length)
                    if len(parts) == 1:
                        results = [self.read_part(remote, writer, *parts[0])]
                    else:
                        futures = [self.pool.submit(self.read_part, remote, writer, *part) for part in parts]
                        wait_all(futures)
                        results = [f.result() for f in futures]
                    # No fsync: a copy torn by a crash fails the next start's CRC check and is
                    # fetched again, so the page cache may write it back when it likes.
                    received = sum(got for _crcs, got in results)
                    problem = self._problem(remote, partial, received)
                    if problem is None:
                        crcs = tuple(crc for crcs, _got in results for crc in crcs)
                        with self.cache.locked():
                            self.cache.publish(key, partial, self._meta(remote, crcs))
                            for each in files:
                                _place(self.cache, each, self.target_dir)
                        for _each in files:
                            self.progress.file_done()
                        return
                finally:
                    writer.close()
                    Path(partial).unlink(missing_ok=True)
                log.warning("%s: %s (attempt %d of 2)", remote.relpath, problem, attempt)
            raise StagingError(f"{remote.status.path}: {problem}")
        finally:
            claim.release()

    def _problem(self, remote: RemoteFile, partial: str, received: int) -> str | None:
        expected = None
        if self.verify == "recompute" and received == remote.status.length:
            expected, why_not = recompute_target(remote)
            if why_not:
                log.warning("%s: HDFS's checksum not recomputed: %s", remote.relpath, why_not)
        md5 = None
        if expected is not None:
            block_size = checksum_block_size(expected, remote.status)
            md5 = file_md5md5crc(partial, expected.crc_type, expected.bytes_per_crc, block_size)
        return check_download(remote, received, md5, expected)

    def _meta(self, remote: RemoteFile, crcs: tuple[int, ...]) -> ObjectMeta:
        checksum = remote.checksum
        recomputed = self.verify == "recompute" and recompute_target(remote)[0] is not None
        return ObjectMeta(
            length=remote.status.length,
            source=remote.status.path,
            algorithm=checksum.algorithm if checksum else None,
            checksum=checksum.bytes if checksum else None,
            verified="recomputed" if recomputed else "hdfs",
            piece_bytes=PIECE_BYTES,
            crc32=crcs,
        )


def wait_all(futures: Sequence[concurrent.futures.Future[Any]]) -> None:
    """Wait for every job; on the first failure cancel those not started, then raise it."""
    done, pending = concurrent.futures.wait(futures, return_when=concurrent.futures.FIRST_EXCEPTION)
    failed = [f for f in done if f.exception() is not None]
    if failed:
        for future in pending:
            future.cancel()
        concurrent.futures.wait(pending)
        error = failed[0].exception()
        assert error is not None
        raise error


# ---- the entry points ------------------------------------------------------------------------


def stage_repository(
    source: str,
    target_dir: Path,
    cache_dir: Path,
    client: WebHdfsClient,
    workers: int = 4,
    *,
    verify: Verify = "hdfs",
    max_cache_bytes: int | None = None,
    progress_interval_s: float = PROGRESS_INTERVAL_S,
) -> StageReport:
    """Copy the hdfs:// repository `source` into `target_dir` through the node cache in `cache_dir`.

    `workers` reads run at once (files, or ranges of a big file). With `max_cache_bytes`, the
    cache is kept within that bound, least recently used first, never evicting a file in use.
    On failure the target directory is removed (Triton must not serve half a repository); what
    was fetched and checked stays cached.
    """
    started = time.monotonic()
    root = urllib.parse.unquote(urllib.parse.urlsplit(source).path).rstrip("/") or "/"
    cache = NodeCache(cache_dir)
    cache.sweep_partials()
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            listed = client.walk(root, pool=pool)
            if not listed:
                raise StagingError(f"{source}: no files to stage")
            relpaths = [safe_relpath(root, f.path) for f in listed]
            asked = [verify == "recompute" or f.file_id is None for f in listed]  # see RemoteFile.key
            checksums = list(pool.map(lambda f, ask: client.checksum(f.path) if ask else None, listed, asked))
            files = [RemoteFile(r, f, c) for r, f, c in zip(relpaths, listed, checksums, strict=True)]
            keys = {f.key for f in files}
            stager = _Stager(client, cache, target_dir, pool, max(1, workers), verify, Progress(0, 0))
            cached, changed = _check_cached(stager, files)
            download, reuse = plan(files, cached)
            _prepare_target(target_dir, source)
            evicted, gone = _place_reused(stager, reuse, keys, max_cache_bytes, download)
            for remote in gone:  # evicted by another stager meanwhile: fetch it after all
                download.setdefault(remote.key, []).append(remote)
            reuse = [r for r in reuse if r not in gone]
            need = sum(group[0].status.length for group in download.values())
            stager.progress = Progress(need, sum(map(len, download.values())), progress_interval_s)
            waited = _download(stager, download)
            if max_cache_bytes is not None:
                with cache.locked():
                    evicted += cache.evict(max_cache_bytes, keep=keys)
    except BaseException as exc:
        if target_dir.is_dir() and (target_dir / MARKER).is_file():
            shutil.rmtree(target_dir, ignore_errors=True)
        if isinstance(exc, WebHdfsError):
            raise StagingError(f"staging {source}: {exc}") from exc
        raise
    fetched = [group for key, group in download.items() if key not in waited]
    return StageReport(
        source=source,
        target=target_dir,
        downloaded=sum(map(len, fetched)),
        reused=len(reuse) + sum(len(download[key]) for key in waited),
        bytes_downloaded=sum(group[0].status.length for group in fetched),
        bytes_reused=sum(r.status.length for r in reuse) + sum(download[k][0].status.length for k in waited),
        seconds=time.monotonic() - started,
        waited=sum(len(download[key]) for key in waited),
        refetched=sum(1 for f in files if f.key in changed),
        evicted=len(evicted),
        verify=verify,
    )


def _check_cached(stager: _Stager, files: list[RemoteFile]) -> tuple[set[str], set[str]]:
    """Check the cached copies of `files` (CRC-32 of every piece) and remove those changed on this
    node, so that they are fetched again. Returns (the keys to reuse, the keys removed)."""
    cache = stager.cache
    found = {key: cache.meta(key) for key in {f.key for f in files}}
    metas = {key: meta for key, meta in found.items() if meta is not None and usable(meta, stager.verify)}
    changed = stager.check_cached(metas)
    for key, problem in changed.items():
        names = ", ".join(f.relpath for f in files if f.key == key)
        log.warning("%s: the node cache's copy changed (%s): fetching it again", names, problem)
        with cache.locked():
            cache.remove(key)
    return set(metas) - set(changed), set(changed)


def _place_reused(
    stager: _Stager,
    reuse: list[RemoteFile],
    keys: set[str],
    max_cache_bytes: int | None,
    download: dict[str, list[RemoteFile]],
) -> tuple[list[str], list[RemoteFile]]:
    """Make room for the downloads, then link the cached files, under the cache's lock.
    Returns (the objects evicted, the reused files whose object is gone since it was checked)."""
    cache = stager.cache
    need = sum(group[0].status.length for group in download.values())
    with cache.locked():
        evicted = (
            cache.evict(max(0, max_cache_bytes - need), keep=keys) if max_cache_bytes is not None else []
        )
        gone = [r for r in reuse if not cache.object_path(r.key).is_file()]
        for remote in reuse:
            if remote not in gone:
                _place(cache, remote, stager.target_dir)
    return evicted, gone


def _download(stager: _Stager, download: dict[str, list[RemoteFile]]) -> set[str]:
    """Fetch every object this stager can claim (claimed as each fetch starts, so at most one lock
    per worker is held); then, for each one another stager on the node had claimed, wait for its
    claim and link its copy (or fetch it, if that stager failed). Returns the keys another stager
    fetched."""

    def claim_and_fetch(key: str) -> str | None:
        """None when fetched here, else the key (another stager has it)."""
        claim = stager.cache.try_claim(key)
        if claim is not None and stager.cache.meta(key):  # published by another since we looked
            claim.release()
            claim = None
        if claim is None:
            return key
        stager.fetch(key, download[key], claim)
        return None

    # one range: fetched whole in the pool; more (a big file): its ranges spread over the pool
    small = [
        key for key, files in download.items() if len(ranges(files[0].status.length, stager.workers)) == 1
    ]
    futures = [stager.pool.submit(claim_and_fetch, key) for key in small]
    busy = [key for key in download if key not in small and claim_and_fetch(key)]  # big: one at a time
    wait_all(futures)
    busy += [key for future in futures if (key := future.result())]
    waited: set[str] = set()
    for key in busy:
        claim = stager.cache.wait_claim(key)
        if stager.cache.meta(key):
            with stager.cache.locked():
                for remote in download[key]:
                    _place(stager.cache, remote, stager.target_dir)
            claim.release()
            waited.add(key)
        else:
            stager.fetch(key, download[key], claim)
    return waited


def resolve_repository(
    source: str,
    *,
    target_dir: Path | None = None,
    cache_dir: Path | None = None,
    client: WebHdfsClient | None = None,
    workers: int = 4,
    verify: Verify = "hdfs",
    max_cache_bytes: int | None = None,
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
        verify=verify,
        max_cache_bytes=max_cache_bytes,
    )
    log.info("%s", report.summary())
    return target_dir
