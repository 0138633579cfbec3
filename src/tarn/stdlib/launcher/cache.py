"""The node's model cache: copies of HDFS files shared by every TARN instance and service on the
NodeManager (``--model-cache-dir``; the yarn_nodemanager role creates it and lets Docker
containers mount it). Standard library only.

    <cache>/
      objects/<key>       file contents, read-only; the key names one version of an HDFS file
                          (staging.RemoteFile.key), so a changed file gets a new key
      meta/<key>.json     what the object is: length, HDFS checksum, source, how it was verified,
                          and the CRC-32 of each piece (16 MiB; the start-up check); written
                          before the object is published, so an object always has its meta
      partial/            downloads in progress (never read; a crash leaves them, swept later)
      locks/<key>         held (flock) by the one stager downloading that object
      .lock               held while objects are placed, published or evicted

An object's mtime is its last use (set when it is placed into a staged repository): eviction goes
least recently used first, down to the size bound, and never removes an object linked into a
staged repository (link count above 1): a running Triton's files stay.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import tempfile
import time
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from tarn.stdlib.files import write_atomically

log = logging.getLogger(__name__)

PIECE_BYTES = 16 << 20  # the unit of the start-up check, of range reads and of their CRCs
PARTIAL_MAX_AGE_S = 24 * 3600  # partial downloads older than this are leftovers of a crash
DIR_MODE = 0o2770  # shared by the services' users through the directory's group (the role's)
READ_BYTES = 4 << 20


@dataclass(frozen=True)
class ObjectMeta:
    """What the cache knows of one object (meta/<key>.json)."""

    length: int
    source: str  # the HDFS path it was first fetched from (for people reading the cache)
    algorithm: str | None  # HDFS's checksum of the file (GETFILECHECKSUM), when it was asked
    checksum: str | None
    verified: str  # "hdfs": read through the DataNode's checksum-verifying client, lengths
    # checked; "recomputed": HDFS's file checksum recomputed here and matched
    piece_bytes: int
    crc32: tuple[int, ...]  # of each piece_bytes piece, in order


@dataclass(frozen=True)
class StoredObject:
    """An object as eviction sees it."""

    key: str
    size: int
    last_used: float
    links: int


# ---- decisions (pure) ------------------------------------------------------------------------


def pieces(length: int, piece: int) -> list[tuple[int, int]]:
    """(offset, length) of each piece of a file: all `piece` bytes but the last."""
    return [(start, min(piece, length - start)) for start in range(0, length, piece)] or [(0, 0)]


def to_evict(objects: Iterable[StoredObject], keep: set[str], bound: int) -> list[str]:
    """Objects to remove, least recently used first, until the cache holds at most `bound` bytes.
    Objects in `keep` (the repository being staged) or linked elsewhere (in use) are never chosen."""
    stored = sorted(objects, key=lambda o: (o.last_used, o.key))
    total = sum(o.size for o in stored)
    chosen: list[str] = []
    for candidate in stored:
        if total <= bound:
            break
        if candidate.key in keep or candidate.links > 1:
            continue
        chosen.append(candidate.key)
        total -= candidate.size
    return chosen


def crc_problem(meta: ObjectMeta, size: int, crcs: list[int]) -> str | None:
    """What is wrong with a cached object of `size` bytes whose pieces have `crcs`, or None."""
    if size != meta.length:
        return f"{size} bytes on this node, {meta.length} when fetched"
    if tuple(crcs) != meta.crc32:
        bad = next(i for i, (a, b) in enumerate(zip(crcs, meta.crc32, strict=False)) if a != b)
        return f"piece {bad} (from byte {bad * meta.piece_bytes}) changed since it was fetched"
    return None


# ---- the cache directory (thin I/O) ------------------------------------------------------------


class Claim:
    """The right to download one object: an exclusive flock on locks/<key>, across processes."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def release(self) -> None:
        with contextlib.suppress(OSError):
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)


def _open_lock(path: Path) -> int:
    """A descriptor to flock: read-only, so the lock files of another service's user (same group)
    can be locked too; created if missing."""
    return os.open(path, os.O_RDONLY | os.O_CREAT, 0o444)


class NodeCache:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.objects = root / "objects"
        self.meta_dir = root / "meta"
        self.partial = root / "partial"
        self.locks = root / "locks"
        for directory in (root, self.objects, self.meta_dir, self.partial, self.locks):
            if not directory.is_dir():
                directory.mkdir(parents=True, exist_ok=True)
                with contextlib.suppress(OSError):  # not ours to change (made by the role)
                    os.chmod(directory, DIR_MODE)

    # ---- reading
    def object_path(self, key: str) -> Path:
        return self.objects / key

    def meta(self, key: str) -> ObjectMeta | None:
        """The object's meta when both it and the object are here."""
        try:
            data = json.loads((self.meta_dir / f"{key}.json").read_text())
            meta = ObjectMeta(**{**data, "crc32": tuple(data["crc32"])})
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("cache meta of %s is unreadable (%s): fetching the file again", key, exc)
            return None
        return meta if self.object_path(key).is_file() else None

    def check(self, key: str, meta: ObjectMeta, piece: int) -> tuple[int, str | None]:
        """(piece, problem): the CRC-32 of one piece of the object against its meta."""
        offset, length = pieces(meta.length, meta.piece_bytes)[piece]
        path = self.object_path(key)
        try:
            with open(path, "rb", buffering=0) as stored:
                size = os.fstat(stored.fileno()).st_size
                if size != meta.length:
                    return piece, crc_problem(meta, size, [])
                crc = 0
                while length > 0:
                    data = os.pread(stored.fileno(), min(READ_BYTES, length), offset)
                    if not data:
                        break
                    crc = zlib.crc32(data, crc)
                    offset += len(data)
                    length -= len(data)
        except FileNotFoundError:
            return piece, "the object is gone (evicted meanwhile?)"
        if crc != meta.crc32[piece]:
            crcs = list(meta.crc32)
            crcs[piece] = crc
            return piece, crc_problem(meta, size, crcs)
        return piece, None

    # ---- claims: one download of an object on the node at a time
    def try_claim(self, key: str) -> Claim | None:
        fd = _open_lock(self.locks / key)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        return Claim(fd)

    def wait_claim(self, key: str) -> Claim:
        fd = _open_lock(self.locks / key)
        fcntl.flock(fd, fcntl.LOCK_EX)
        return Claim(fd)

    # ---- writing
    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Placing, publishing and evicting exclude each other: nothing placed is evicted midway."""
        fd = _open_lock(self.root / ".lock")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    def new_partial(self, key: str) -> tuple[int, str]:
        return tempfile.mkstemp(dir=self.partial, prefix=f"{key[:16]}.")

    def publish(self, key: str, partial: str, meta: ObjectMeta) -> None:
        """The meta, then the object (read-only, so a hard link into a repository cannot edit it).
        Call with the cache locked."""
        write_atomically(self.meta_dir / f"{key}.json", json.dumps(asdict(meta)).encode(), 0o444)
        os.chmod(partial, 0o444)
        os.replace(partial, self.object_path(key))

    def touch(self, key: str) -> None:
        """Mark the object used now (its mtime is the eviction order)."""
        with contextlib.suppress(OSError):
            os.utime(self.object_path(key))

    def remove(self, key: str) -> None:
        self.object_path(key).unlink(missing_ok=True)
        (self.meta_dir / f"{key}.json").unlink(missing_ok=True)

    def stored(self) -> list[StoredObject]:
        found = []
        for entry in os.scandir(self.objects):
            with contextlib.suppress(OSError):
                st = entry.stat(follow_symlinks=False)
                found.append(StoredObject(entry.name, st.st_size, st.st_mtime, st.st_nlink))
        return found

    def evict(self, bound: int, keep: set[str]) -> list[str]:
        """Remove least recently used objects until the cache holds at most `bound` bytes. Call
        with the cache locked. Returns the keys removed."""
        stored = self.stored()
        chosen = to_evict(stored, keep, bound)
        for key in chosen:
            self.remove(key)
            claim = self.try_claim(key)
            if claim:  # nobody is downloading it: its lock file can go too
                (self.locks / key).unlink(missing_ok=True)
                claim.release()
        held = sum(o.size for o in stored if o.key not in chosen)
        if held > bound:
            log.warning(
                "model cache %s holds %.1f MiB, above its bound of %.1f MiB, in files in use",
                self.root, held / 2**20, bound / 2**20,
            )  # fmt: skip
        return chosen

    def sweep_partials(self, now: float | None = None) -> None:
        now = time.time() if now is None else now
        for leftover in self.partial.iterdir():
            with contextlib.suppress(OSError):
                if now - leftover.stat().st_mtime > PARTIAL_MAX_AGE_S:
                    leftover.unlink()
