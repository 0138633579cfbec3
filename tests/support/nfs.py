"""A userspace NFSv3 client for the e2e tests: Debian's libnfs (the library of libnfs-utils'
nfs-ls / nfs-cat) through ctypes, as this machine's kernel has no NFS client to mount with.

libnfs's command-line tools take a URL whose directory part is mounted as the export, but
Hadoop's gateway exports one directory only ("/"), so a nested file cannot be read with them:
this mounts "/" once and walks and reads paths below it.

It acts as uid 65534 (nobody) by default. libnfs 4 opens a file only when the server's ACCESS
answer is exactly the access asked for (read), and Hadoop's gateway answers with everything the
user may do: for a file the user may also write (its owner's, or root's as HDFS superuser), that
is more than read and the open fails. A user who may only read gets exactly read.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from types import TracebackType

NF3REG, NF3DIR = 1, 2  # libnfs-raw-nfs.h: ftype3
CHUNK = 1 << 20  # the gateway's default nfs.rtmax
NOBODY = 65534


class NfsDirent(ctypes.Structure):
    """The leading fields of libnfs 4's struct nfsdirent (libnfs.h), which are all this reads."""

    _fields_ = [
        ("next", ctypes.c_void_p),
        ("name", ctypes.c_char_p),
        ("inode", ctypes.c_uint64),
        ("type", ctypes.c_uint32),
        ("mode", ctypes.c_uint32),
        ("size", ctypes.c_uint64),
    ]


class NfsError(OSError):
    pass


def _library() -> ctypes.CDLL:
    name = ctypes.util.find_library("nfs") or "libnfs.so.13"
    lib = ctypes.CDLL(name, use_errno=True)
    lib.nfs_init_context.restype = ctypes.c_void_p
    lib.nfs_destroy_context.argtypes = [ctypes.c_void_p]
    lib.nfs_get_error.restype = ctypes.c_char_p
    lib.nfs_get_error.argtypes = [ctypes.c_void_p]
    lib.nfs_set_version.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.nfs_set_uid.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.nfs_set_gid.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.nfs_mount.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]
    lib.nfs_umount.argtypes = [ctypes.c_void_p]
    lib.nfs_opendir.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.nfs_readdir.restype = ctypes.POINTER(NfsDirent)
    lib.nfs_readdir.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.nfs_closedir.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.nfs_open.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)]
    lib.nfs_pread.argtypes = [
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_uint64,
        ctypes.c_uint64,
        ctypes.c_void_p,
    ]
    lib.nfs_close.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    return lib


@dataclass(frozen=True)
class Entry:
    path: str  # below the export, starting with /
    is_dir: bool
    size: int


class Nfs3Mount:
    """``with Nfs3Mount("master", "/") as nfs: nfs.walk("/user/tarn"); nfs.read(path)``"""

    def __init__(self, server: str, export: str = "/", uid: int = NOBODY, gid: int = NOBODY) -> None:
        self._lib = _library()
        self._nfs = self._lib.nfs_init_context()
        if not self._nfs:
            raise NfsError("nfs_init_context failed")
        self._lib.nfs_set_version(self._nfs, 3)
        self._lib.nfs_set_uid(self._nfs, uid)
        self._lib.nfs_set_gid(self._nfs, gid)
        self._check(
            self._lib.nfs_mount(self._nfs, server.encode(), export.encode()), f"mount {server}:{export}"
        )

    def __enter__(self) -> Nfs3Mount:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._lib.nfs_umount(self._nfs)
        self._lib.nfs_destroy_context(self._nfs)

    def _check(self, rc: int, what: str) -> int:
        if rc < 0:
            message = (self._lib.nfs_get_error(self._nfs) or b"").decode(errors="replace")
            raise NfsError(-rc, f"NFS {what}: {message or os.strerror(-rc)}")
        return rc

    def list_dir(self, path: str) -> list[Entry]:
        handle = ctypes.c_void_p()
        self._check(self._lib.nfs_opendir(self._nfs, path.encode(), ctypes.byref(handle)), f"opendir {path}")
        entries = []
        try:
            while dirent := self._lib.nfs_readdir(self._nfs, handle):
                name = dirent.contents.name.decode()
                if name in (".", ".."):
                    continue
                kind = dirent.contents.type
                is_dir = kind == NF3DIR or (kind != NF3REG and stat.S_ISDIR(dirent.contents.mode))
                entries.append(Entry(f"{path.rstrip('/')}/{name}", is_dir, int(dirent.contents.size)))
        finally:
            self._lib.nfs_closedir(self._nfs, handle)
        return entries

    def walk(self, path: str) -> Iterator[Entry]:
        """Every file below ``path``, depth first."""
        for entry in self.list_dir(path):
            if entry.is_dir:
                yield from self.walk(entry.path)
            else:
                yield entry

    def read(self, path: str) -> bytes:
        handle = ctypes.c_void_p()
        self._check(
            self._lib.nfs_open(self._nfs, path.encode(), os.O_RDONLY, ctypes.byref(handle)), f"open {path}"
        )
        chunks, offset = [], 0
        buffer = ctypes.create_string_buffer(CHUNK)
        try:
            while got := self._check(
                self._lib.nfs_pread(self._nfs, handle, offset, CHUNK, buffer), f"read {path}"
            ):
                chunks.append(buffer.raw[:got])
                offset += got
        finally:
            self._lib.nfs_close(self._nfs, handle)
        return b"".join(chunks)
