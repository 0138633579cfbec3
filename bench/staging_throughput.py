"""Model staging throughput: the launcher's parallel, checksum-verified staging against a plain
sequential WebHDFS read of the same files, in the same run.

    python bench/staging_throughput.py --webhdfs-url http://master:9870 --user tarn /tarn/models
    python bench/staging_throughput.py --self-test          # a loopback fake NameNode/DataNode

Each round reads everything sequentially (OPEN, bytes discarded, nothing checked), then stages
it cold (fresh cache: listing, GETFILECHECKSUM, parallel downloads, CRC verification, links), then
warm (same cache: nothing should be downloaded). Rounds alternate so neither side alone gets the
DataNodes' page cache; the best of the rounds is reported. Also prints the pure-Python CRC-32C
throughput (byte-at-a-time and the bit-sliced path used for verification).
"""

from __future__ import annotations

import argparse
import os
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tarn.stdlib.hdfs_checksum import Md5Md5CrcHasher, chunk_crcs, crc32c
from tarn.stdlib.launcher.staging import StageReport, stage_repository
from tarn.stdlib.webhdfs import SimpleAuth, WebHdfsClient

if TYPE_CHECKING:
    from tests.unit.test_staging import HdfsFile

ROOT = Path(__file__).resolve().parents[1]
MB = 1e6


@dataclass
class Round:
    sequential_s: float
    cold: StageReport
    warm: StageReport


def sequential_read(client: WebHdfsClient, path: str) -> tuple[int, int, float]:
    """(files, bytes, seconds) of reading every file once, one after the other."""
    started = time.monotonic()
    files = client.walk(path)
    total = 0
    for status in files:
        for chunk in client.read(status.path):
            total += len(chunk)
    return len(files), total, time.monotonic() - started


def one_round(args: argparse.Namespace, client: WebHdfsClient, source: str, path: str) -> Round:
    _files, _total, sequential_s = sequential_read(client, path)
    options = {"verify_limit": args.verify_limit, "verify_processes": args.verify_processes}
    with tempfile.TemporaryDirectory(prefix="tarn-bench-") as scratch:
        target, cache = Path(scratch) / "models", Path(scratch) / "cache"
        cold = stage_repository(source, target, cache, client, args.workers, **options)
        warm = stage_repository(source, target, cache, client, args.workers, **options)
    return Round(sequential_s, cold, warm)


def crc_throughput() -> tuple[float, float]:
    """MB/s of CRC-32C byte at a time, and per 512-byte chunk (bit-sliced), on 4 MiB."""
    data = os.urandom(4 << 20)
    started = time.perf_counter()
    crc32c(data[: 1 << 20])
    bytewise = (1 << 20) / (time.perf_counter() - started) / MB
    chunk_crcs(data[:512], 512, "CRC32C")  # build the tables outside the timing
    started = time.perf_counter()
    for i in range(0, len(data), 1 << 20):
        chunk_crcs(data[i : i + (1 << 20)], 512, "CRC32C")
    sliced = len(data) / (time.perf_counter() - started) / MB
    return bytewise, sliced


def report(args: argparse.Namespace, client: WebHdfsClient, source: str, path: str) -> None:
    files, total, _seconds = sequential_read(client, path)  # also a warm-up of both ends
    rounds = [one_round(args, client, source, path) for _round in range(args.rounds)]
    sequential_s = min(r.sequential_s for r in rounds)
    cold = min((r.cold for r in rounds), key=lambda r: r.seconds)
    warm = min((r.warm for r in rounds), key=lambda r: r.seconds)
    bytewise, sliced = crc_throughput()
    sequential_mbps, staged_mbps = total / sequential_s / MB, total / cold.seconds / MB
    print(
        f"repository            {source}: {files} files, {total / MB:.1f} MB (best of {args.rounds} rounds)"
    )
    print(f"sequential plain read {sequential_s:8.2f} s  {sequential_mbps:8.1f} MB/s  (no checks)")
    print(
        f"parallel staging      {cold.seconds:8.2f} s  {staged_mbps:8.1f} MB/s  ({args.workers} workers, "
        f"{cold.downloaded} downloaded, {len(cold.unverified)} not content-verified)"
    )
    print(f"ratio staged/plain    {staged_mbps / sequential_mbps:8.2f} x")
    print(
        f"warm restage          {warm.seconds:8.2f} s  ({warm.downloaded} downloaded, {warm.reused} reused)"
    )
    print(
        f"CRC-32C pure Python   {bytewise:8.1f} MB/s byte at a time, "
        f"{sliced:.1f} MB/s bit-sliced per 512-byte chunk (the verification path)"
    )


# ---- --self-test: a fake WebHDFS in a child process, so it does not share this one's GIL


def serve_fake(files: int, size_mib: int, latency_ms: float) -> None:
    sys.path.insert(0, str(ROOT))
    from tests.unit.test_staging import FakeHdfs, HdfsFile

    block = 128 << 20
    repo = {
        f"/bench/models/m{i}/1/model.bin": HdfsFile(os.urandom((size_mib << 20) // files), block_size=block)
        for i in range(files)
    }
    repo["/bench/models/m0/config.pbtxt"] = HdfsFile(b'name: "m0"\n', block_size=block)
    sums = {id(f): fast_checksum(f) for f in repo.values()}
    fake = FakeHdfs(repo, checksum=lambda f: sums[id(f)], delay=latency_ms / 1000)
    print(fake.url, flush=True)
    sys.stdin.read()  # serve until the parent closes our stdin
    fake.close()


def fast_checksum(f: HdfsFile) -> dict[str, Any]:
    """GETFILECHECKSUM's answer for the fake, from the launcher's own (tested) hasher."""
    data, block, bpc, crc_type = f.data, f.block_size, f.bytes_per_crc, f.crc_type
    hasher = Md5Md5CrcHasher(crc_type, bpc, block)
    hasher.update(data)
    crc_per_block = block // bpc if len(data) > block else 0
    raw = struct.pack(">iq", bpc, crc_per_block) + hasher.digest()
    return {"algorithm": f"MD5-of-{crc_per_block}MD5-of-{bpc}{crc_type}", "bytes": raw.hex(), "length": 28}


def self_test(args: argparse.Namespace) -> None:
    command = [sys.executable, __file__, "--serve-fake", "--files", str(args.files)]
    command += ["--size-mib", str(args.size_mib), "--latency-ms", str(args.latency_ms)]
    with subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as server:
        assert server.stdout is not None
        assert server.stdin is not None
        url = server.stdout.readline().strip()
        if not url:
            sys.exit("the fake WebHDFS did not start")
        print(
            f"self-test: fake WebHDFS at {url}: {args.files} files, {args.size_mib} MiB, "
            f"{args.latency_ms} ms per OPEN"
        )
        try:
            report(
                args, WebHdfsClient(url, SimpleAuth(args.user)), "hdfs://fake/bench/models", "/bench/models"
            )
        finally:
            server.stdin.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("path", nargs="?", help="HDFS path of the model repository, e.g. /tarn/models")
    parser.add_argument("--webhdfs-url", help="the NameNode's HTTP address, e.g. http://master:9870")
    parser.add_argument("--user", default=os.environ.get("USER", "tarn"), help="user.name for simple auth")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--verify-limit", type=int, help="skip content checks above this many bytes")
    parser.add_argument(
        "--verify-processes", type=int, help="processes checking big files (default: workers, at most CPUs)"
    )
    parser.add_argument("--self-test", action="store_true", help="run against a loopback fake WebHDFS")
    parser.add_argument("--files", type=int, default=8, help="self-test: number of model files")
    parser.add_argument("--size-mib", type=int, default=64, help="self-test: repository size")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="self-test: DataNode delay per OPEN")
    parser.add_argument("--serve-fake", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_fake:
        serve_fake(args.files, args.size_mib, args.latency_ms)
    elif args.self_test:
        self_test(args)
    elif args.webhdfs_url and args.path:
        host = args.webhdfs_url.split("://", 1)[-1].split(":")[0].split("/")[0]
        client = WebHdfsClient(args.webhdfs_url, SimpleAuth(args.user))
        report(args, client, f"hdfs://{host}{args.path}", args.path)
    else:
        parser.error("give --webhdfs-url and an HDFS path, or --self-test")


if __name__ == "__main__":
    main()
