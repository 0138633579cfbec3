"""HDFS's MD5-of-MD5-of-CRC (tarn.stdlib.hdfs_checksum) against an independent, deliberately naive
implementation (bit-by-bit CRC, tests/support/webhdfs.py) and against a real HDFS's known answers."""

from __future__ import annotations

import struct
import zlib

import pytest

from tarn.stdlib.hdfs_checksum import Md5Md5CrcHasher, chunk_crcs, crc32c, parse_checksum
from tarn.stdlib.webhdfs import FileChecksum
from tests.support.webhdfs import HdfsFile, crc32c_bitwise, naive_hdfs_checksum, noise


@pytest.mark.parametrize(
    ("data", "crc"),
    [(b"123456789", 0xE3069283), (b"\x00" * 32, 0x8A9136AA), (b"\xff" * 32, 0x62A8AB43), (b"", 0)],
)
def test_crc32c_known_answers(data: bytes, crc: int) -> None:
    assert crc32c_bitwise(data) == crc
    assert crc32c(data) == crc


@pytest.mark.parametrize("chunk", [512, 100, 1])
def test_bulk_chunk_crcs_match_the_naive_crc(chunk: int) -> None:
    data = noise(5 * chunk + chunk // 2, chunk)
    expected = b"".join(
        struct.pack(">I", crc32c_bitwise(data[i : i + chunk])) for i in range(0, len(data), chunk)
    )
    assert chunk_crcs(data, chunk, "CRC32C") == expected
    crc32s = b"".join(struct.pack(">I", zlib.crc32(data[i : i + chunk])) for i in range(0, len(data), chunk))
    assert chunk_crcs(data, chunk, "CRC32") == crc32s


@pytest.mark.parametrize("size", [0, 1, 511, 512, 513, 4096, 4097, 3 * 4096 + 100])
@pytest.mark.parametrize("crc_type", ["CRC32C", "CRC32"])
def test_local_checksum_matches_hdfs(size: int, crc_type: str) -> None:
    f = HdfsFile(noise(size, size), crc_type=crc_type)
    parsed = parse_checksum(FileChecksum.from_json(naive_hdfs_checksum(f)))
    assert parsed is not None
    hasher = Md5Md5CrcHasher(parsed.crc_type, parsed.bytes_per_crc, f.block_size)
    for i in range(0, size, 333):  # pieces that straddle chunks and blocks
        hasher.update(f.data[i : i + 333])
    assert hasher.digest() == parsed.md5


def test_a_checksum_as_hdfs_prints_it_parses() -> None:
    # `hdfs dfs -checksum` of a one-block file, as published (Cloudera community, HDFS-13056)
    found = FileChecksum(
        "MD5-of-0MD5-of-512CRC32C", "000002000000000000000000c16859d1d071c6b1ffc9c8557d4909f1", 28
    )
    parsed = parse_checksum(found)
    assert parsed is not None
    assert (parsed.crc_type, parsed.bytes_per_crc, parsed.crc_per_block) == ("CRC32C", 512, 0)
    assert parsed.md5.hex() == "c16859d1d071c6b1ffc9c8557d4909f1"
    assert parse_checksum(FileChecksum("COMPOSITE-CRC32C", "3799db55", 4)) is None


# Known answers from a real HDFS (the lab's Hadoop 3.4.2): GETFILECHECKSUM of these contents.
HADOOP_3_4_2_ANSWERS = [
    # one block: the block MD5 is followed by 16 zero bytes of buffer before the file MD5
    (bytes(range(256)) * 4096 + b"tail", 134217728, "MD5-of-0MD5-of-512CRC32C",
     "000002000000000000000000e59f8ff9911e60bd765761bd6a6ea34000000000", 28),
    # four blocks of 1 MiB (written with blocksize=1048576): 64 bytes of MD5s, no padding
    (bytes((i * 7) % 251 for i in range(3 * 1048576 + 1000)), 1048576, "MD5-of-2048MD5-of-512CRC32C",
     "000002000000000000000800f1398b9a92ef13a5082fb92213bb9ecb00000000", 28),
]  # fmt: skip


@pytest.mark.parametrize(("data", "block_size", "algorithm", "hex_bytes", "length"), HADOOP_3_4_2_ANSWERS)
def test_checksum_matches_a_real_hdfs(
    data: bytes, block_size: int, algorithm: str, hex_bytes: str, length: int
) -> None:
    expected = parse_checksum(FileChecksum(algorithm, hex_bytes, length))
    assert expected is not None
    hasher = Md5Md5CrcHasher(expected.crc_type, expected.bytes_per_crc, block_size)
    hasher.update(data)
    assert hasher.digest() == expected.md5
