"""Loopback WebHDFS NameNode + DataNode pairs for the clients' tests.

``FakeHdfs`` serves the read side the launcher's staging uses (LISTSTATUS, GETFILESTATUS,
GETFILECHECKSUM and OPEN, the last two redirected with a 307 to a second "DataNode" port, as HDFS
does), with knobs for faults. Its checksums come from an independent, deliberately naive
implementation of HDFS's MD5-of-MD5-of-CRC (bit-by-bit CRC), so the launcher's fast CRC is
checked, not echoed. ``Hdfs`` keeps files in memory for the client's writes (two-step CREATE,
APPEND, MKDIRS, DELETE), as the Ranger audit log makes them.
"""

from __future__ import annotations

import hashlib
import itertools
import socket
import struct
import threading
import time
import urllib.parse
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.loopback import QuietHandler, reply_json, serve

# ---- an independent HDFS checksum: slow and obviously right ------------------------------------


def crc32c_bitwise(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _bit in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


_INODES = itertools.count(16386)


@dataclass
class HdfsFile:
    data: bytes
    mtime: int = 1_700_000_000_000
    block_size: int = 4096
    bytes_per_crc: int = 512
    crc_type: str = "CRC32C"
    file_id: int = field(default_factory=lambda: next(_INODES))  # a new file: a new inode


def naive_hdfs_checksum(f: HdfsFile) -> dict[str, Any]:
    """GETFILECHECKSUM's FileChecksum for `f`, straight from the definition."""
    crc = crc32c_bitwise if f.crc_type == "CRC32C" else zlib.crc32
    bpc = f.bytes_per_crc
    blocks = [f.data[i : i + f.block_size] for i in range(0, len(f.data), f.block_size)]
    block_md5s = b""
    for block in blocks:
        crcs = b"".join(struct.pack(">I", crc(block[i : i + bpc])) for i in range(0, len(block), bpc))
        block_md5s += hashlib.md5(crcs, usedforsecurity=False).digest()
    crc_per_block = f.block_size // bpc if len(blocks) > 1 else 0
    # HDFS digests its buffer's whole backing array: 32 bytes, doubled until the MD5s fit.
    capacity = 32
    while capacity < len(block_md5s):
        capacity *= 2
    padded = block_md5s + bytes(capacity - len(block_md5s))
    raw = struct.pack(">iq", bpc, crc_per_block) + hashlib.md5(padded, usedforsecurity=False).digest()
    return {"algorithm": f"MD5-of-{crc_per_block}MD5-of-{bpc}{f.crc_type}", "bytes": raw.hex(), "length": 28}


# ---- reads: the fake NameNode + DataNode ---------------------------------------------------------


@dataclass
class FakeHdfs:
    """A loopback WebHDFS. Knobs: `corrupt` (paths served with a flipped byte), `cut_once` (paths
    whose first OPEN stops half-way), `short` (paths served one byte short, Content-Length
    agreeing), `fail_next` (NameNode 503s to give), `delay` (per OPEN)."""

    files: dict[str, HdfsFile]
    checksum: Callable[[HdfsFile], dict[str, Any]] = naive_hdfs_checksum
    delay: float = 0.0
    corrupt: set[str] = field(default_factory=set)
    cut_once: set[str] = field(default_factory=set)
    short: set[str] = field(default_factory=set)
    fail_next: int = 0
    file_ids: bool = True  # list fileId, as HDFS does (HttpFS and others may not)
    opens: list[tuple[str, int]] = field(default_factory=list)
    checksums_asked: int = 0
    users: set[str] = field(default_factory=set)
    active: int = 0
    peak: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self.datanode = _serve(self._datanode)
        self.namenode = _serve(self._namenode)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.namenode.server_address[1]}"

    def close(self) -> None:
        for server in (self.namenode, self.datanode):
            server.shutdown()
            server.server_close()

    # ---- the NameNode: metadata, and redirects for data
    def _namenode(self, handler: BaseHTTPRequestHandler, path: str, query: dict[str, str]) -> None:
        self.users.add(query.get("user.name", ""))
        with self._lock:
            failing, self.fail_next = self.fail_next > 0, max(0, self.fail_next - 1)
        if failing:
            return reply_json(
                handler, 503, {"RemoteException": {"exception": "RetriableException", "message": "busy"}}
            )
        op = query.get("op")
        if op in ("OPEN", "GETFILECHECKSUM"):
            port = self.datanode.server_address[1]
            location = f"http://127.0.0.1:{port}/webhdfs/v1{urllib.parse.quote(path)}?{urllib.parse.urlencode(query)}"
            return reply_json(handler, 307, {}, {"Location": location})
        if op == "GETFILESTATUS" and (entry := self._status(path)):
            return reply_json(handler, 200, {"FileStatus": entry})
        if op == "LISTSTATUS" and (entries := self._list(path)) is not None:
            return reply_json(handler, 200, {"FileStatuses": {"FileStatus": entries}})
        if op not in ("GETFILESTATUS", "LISTSTATUS"):
            return reply_json(handler, 400, {"RemoteException": {"exception": "IllegalArgumentException"}})
        missing = {"exception": "FileNotFoundException", "message": f"File does not exist: {path}"}
        return reply_json(handler, 404, {"RemoteException": missing})

    def _status(self, path: str, suffix: str = "") -> dict[str, Any] | None:
        if path in self.files:
            f = self.files[path]
            return {"pathSuffix": suffix, "type": "FILE", "length": len(f.data), "blockSize": f.block_size}
        if any(p.startswith(path.rstrip("/") + "/") for p in self.files):
            return {"pathSuffix": suffix, "type": "DIRECTORY", "length": 0, "blockSize": 0}
        return None

    def _list(self, path: str) -> list[dict[str, Any]] | None:
        if path in self.files:
            return [self._file_entry(path, "")]
        prefix = path.rstrip("/") + "/"
        names = sorted({p[len(prefix) :].split("/")[0] for p in self.files if p.startswith(prefix)})
        if not names:
            return None
        return [self._file_entry(prefix + n, n) for n in names]

    def _file_entry(self, path: str, suffix: str) -> dict[str, Any]:
        entry = self._status(path, suffix)
        assert entry is not None
        mtime = self.files[path].mtime if path in self.files else 1_600_000_000_000
        entry = {**entry, "modificationTime": mtime, "replication": 3, "permission": "644"}
        if self.file_ids and path in self.files:
            entry["fileId"] = self.files[path].file_id
        return entry

    # ---- the DataNode: bytes and checksums
    def _datanode(self, handler: BaseHTTPRequestHandler, path: str, query: dict[str, str]) -> None:
        f = self.files.get(path)
        if f is None:
            return reply_json(handler, 404, {"RemoteException": {"exception": "FileNotFoundException"}})
        if query.get("op") == "GETFILECHECKSUM":
            with self._lock:
                self.checksums_asked += 1
            return reply_json(handler, 200, {"FileChecksum": self.checksum(f)})
        offset = int(query.get("offset", "0"))
        with self._lock:
            self.opens.append((path, offset))
            self.active += 1
            self.peak = max(self.peak, self.active)
            cut = path in self.cut_once
            self.cut_once.discard(path)
        try:
            time.sleep(self.delay)
            data = f.data[offset:]
            if "length" in query:
                data = data[: int(query["length"])]
            if path in self.short and data:  # the file shrank under the reader
                data = data[:-1]
            if path in self.corrupt and data:
                data = bytes([data[0] ^ 0x01]) + data[1:]
            handler.send_response(200)
            handler.send_header("Content-Type", "application/octet-stream")
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data[: len(data) // 2] if cut else data)
            if cut:
                handler.wfile.flush()
                handler.connection.shutdown(socket.SHUT_RDWR)
                handler.close_connection = True
        finally:
            with self._lock:
                self.active -= 1


def _serve(route: Callable[[BaseHTTPRequestHandler, str, dict[str, str]], None]) -> ThreadingHTTPServer:
    class Handler(QuietHandler):
        def do_GET(self) -> None:
            parts = urllib.parse.urlsplit(self.path)
            assert parts.path.startswith("/webhdfs/v1/")
            path = urllib.parse.unquote(parts.path[len("/webhdfs/v1") :])
            route(self, path, dict(urllib.parse.parse_qsl(parts.query)))

    return serve(Handler)


# ---- test data ---------------------------------------------------------------------------------


def noise(size: int, seed: int) -> bytes:
    """Deterministic incompressible bytes."""
    return hashlib.shake_256(seed.to_bytes(8, "big")).digest(size)


# ---- writes: files in memory -------------------------------------------------------------------


class Hdfs:
    """Files in memory; CREATE redirects to /datanode, which takes the bytes (201)."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.dirs: set[str] = {"/"}
        self.seen: list[tuple[str, str, str, int]] = []  # method, where, op, body length
        self.fail_next = 0  # answer 503 RetriableException this many times
        self.server = self._serve()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        parts = urllib.parse.urlsplit(handler.path)
        query = dict(urllib.parse.parse_qsl(parts.query))
        body = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        datanode = parts.path.startswith("/datanode")
        path = urllib.parse.unquote(parts.path.removeprefix("/datanode").removeprefix("/webhdfs/v1"))
        self.seen.append((method, "datanode" if datanode else "namenode", query.get("op", ""), len(body)))
        if query.get("user.name") != "tarn":
            return reply_json(handler, 401, {"RemoteException": {"exception": "SecurityException"}})
        if self.fail_next:
            self.fail_next -= 1
            return reply_json(handler, 503, {"RemoteException": {"exception": "RetriableException"}})
        op = query["op"]
        if datanode and op == "APPEND":
            self.files[path] += body
            return reply_json(handler, 200, {})
        if datanode:
            self.files[path] = body
            return reply_json(handler, 201, {})
        if op == "APPEND" and path in self.files:
            location = f"{self.url}/datanode{parts.path.removeprefix('/webhdfs/v1')}?{parts.query}"
            return reply_json(handler, 307, {}, {"Location": location})
        if op == "CREATE":
            if query.get("overwrite") == "false" and path in self.files:
                exists = {"exception": "FileAlreadyExistsException"}
                return reply_json(handler, 403, {"RemoteException": exists})
            location = f"{self.url}/datanode{parts.path.removeprefix('/webhdfs/v1')}?{parts.query}"
            return reply_json(handler, 307, {}, {"Location": location})
        if op == "MKDIRS":
            self.dirs.add(path)
            return reply_json(handler, 200, {"boolean": True})
        if op == "DELETE":
            gone = [p for p in self.files if p == path or p.startswith(path + "/")]
            for name in gone:
                del self.files[name]
            return reply_json(handler, 200, {"boolean": bool(gone)})
        if op == "GETFILESTATUS" and path in self.files:
            status = {"type": "FILE", "length": len(self.files[path]), "owner": "tarn", "permission": "644"}
            return reply_json(handler, 200, {"FileStatus": status})
        return reply_json(handler, 404, {"RemoteException": {"exception": "FileNotFoundException"}})

    def _serve(self) -> ThreadingHTTPServer:
        hdfs = self

        class Handler(QuietHandler):
            def do_PUT(self) -> None:
                hdfs.handle(self, "PUT")

            def do_GET(self) -> None:
                hdfs.handle(self, "GET")

            def do_DELETE(self) -> None:
                hdfs.handle(self, "DELETE")

            def do_POST(self) -> None:
                hdfs.handle(self, "POST")

        return serve(Handler)
