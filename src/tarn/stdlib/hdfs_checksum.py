"""HDFS's file checksum (``MD5-of-<n>MD5-of-<bytesPerCRC>CRC32C``), computed locally, so that a
downloaded copy can be checked against what GETFILECHECKSUM says. Standard library only.

A DataNode keeps, beside each block, the CRC of every `bytesPerCRC` chunk of it (the last chunk
may be short), each as 4 big-endian bytes. GETFILECHECKSUM (combine mode MD5MD5CRC, the default)
is then MD5( MD5(CRCs of block 1) || MD5(CRCs of block 2) || … ), serialized as
bytesPerCRC (int32) || crcPerBlock (int64) || MD5 (16 bytes), and named
"MD5-of-<crcPerBlock>MD5-of-<bytesPerCRC><CRC32|CRC32C>". crcPerBlock is 0 for a one-block file.

One quirk, checked against Hadoop 3.4.2: the client digests the *whole backing array* of the
buffer holding the block MD5s (DataOutputBuffer.getData()), not just the bytes written. That
array starts at 32 bytes and doubles as it fills, so the block MD5s are followed by zero
bytes up to that capacity: one block is MD5(blockMD5 || 16 zero bytes).
"""

from __future__ import annotations

import functools
import hashlib
import re
import zlib
from dataclasses import dataclass

from tarn.stdlib.webhdfs import FileChecksum, FileStatus


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
