"""Model staging throughput: the launcher's staging (node cache, parallel files and range reads,
lengths and CRC-32s checked) against a plain sequential WebHDFS read of the same files, in the
same run, for a repository of many small files and for one large file.

    python bench/staging_throughput.py --lab              # the lab's HDFS (uploads the two
                                                          # repositories under /user/tarn/bench once)
    python bench/staging_throughput.py --self-test        # a loopback fake NameNode/DataNode

Each round reads everything sequentially (OPEN, bytes discarded, nothing checked), then stages
it cold (a fresh cache), then warm (same cache, a new target: nothing is downloaded, every cached
file is checked against its CRC-32s: the per-start cost). Rounds alternate so neither side alone
gets the DataNodes' page cache; the best of the rounds is reported, with the CPU the stager used
(what limits it on a 2-core lab that also runs the DataNodes) and, for reference, the staging with
``--model-verify recompute`` (HDFS's checksum recomputed in pure Python) once. ``--json PATH``
also writes each repository's figures and every round's times.
"""

from __future__ import annotations

import argparse
import os
import resource
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tarn.stdlib.hdfs_checksum import Md5Md5CrcHasher, chunk_crcs
from tarn.stdlib.launcher.staging import StageReport, Verify, stage_repository
from tarn.stdlib.webhdfs import SimpleAuth, WebHdfsClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run alone: bench.result from the root
from bench.result import Figure, Result

if TYPE_CHECKING:
    from tests.support.webhdfs import HdfsFile

ROOT = Path(__file__).resolve().parents[1]
MB = 1e6
LAB_URL = "http://master:9870"
SMALL = ("/user/tarn/bench/small", 256, 256 << 10)  # path, files, bytes each: 64 MiB
LARGE = ("/user/tarn/bench/large", 1, 512 << 20)  # one 512 MiB file
GOAL_RATIO = 1.0  # staging at least as fast as the plain read (the lab's goal)
SLOW_CREATE_US = 100.0  # per file or directory made in the scratch: a local disk takes ~10


@dataclass
class Round:
    sequential_s: float
    sequential_busy: float  # the machine's cores busy during the plain read (2.0: both of 2)
    cold: StageReport
    cold_cpu_s: float
    cold_busy: float
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


def fresh_dir(args: argparse.Namespace, prefix: str) -> Path:
    """A new directory under this run's scratch, for one staging's cache and target. Nothing is
    deleted before the run ends: on an ext4 without a journal (the lab's VM) a file created after
    many were deleted costs a walk past every inode freed in the last 60-300 s (recently_deleted
    in fs/ext4/ialloc.c), a cost of the bench's clean-up that the next round would pay."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=args.run_dir))


def default_scratch() -> Path:
    """build/bench/scratch in this checkout: on disk, as the node cache is, never tmpfs."""
    return ROOT / "build" / "bench" / "scratch"


def create_cost_us(made: Path, models: int = 128) -> float:
    """Microseconds per directory or file made under `made`, in a model repository's layout (the
    model's directory, its version's, a file in it). A local disk's file system: about 10."""
    started = time.perf_counter()
    for i in range(models):
        version = made / f"m{i:04d}" / "1"
        version.mkdir(parents=True)
        (version / "model.bin").touch()
    return (time.perf_counter() - started) / (3 * models) * 1e6


def filesystem(path: Path) -> str:
    """The type of the file system `path` is on (the longest mount point over it, /proc/mounts)."""
    where, kind, inside = "", "?", str(path.resolve()) + "/"
    for line in Path("/proc/mounts").read_text().splitlines():
        _device, mount, fstype = line.split()[:3]
        if inside.startswith(mount.rstrip("/") + "/") and len(mount) > len(where):
            where, kind = mount, fstype
    return kind


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def stage(args: argparse.Namespace, client: WebHdfsClient, source: str, scratch: Path, name: str,
          verify: Verify = "hdfs") -> StageReport:  # fmt: skip
    return stage_repository(source, scratch / name, scratch / "cache", client, args.workers, verify=verify)


def machine_ticks() -> tuple[int, int]:
    """(busy, all) clock ticks of every core, from /proc/stat's cpu line (the lab shares them)."""
    user, nice, system, idle, iowait, irq, softirq, steal = map(
        int, Path("/proc/stat").read_text().split()[1:9]
    )
    busy = user + nice + system + irq + softirq + steal
    return busy, busy + idle + iowait


def busy_cores(before: tuple[int, int], after: tuple[int, int]) -> float:
    total = after[1] - before[1]
    return (after[0] - before[0]) / total * (os.cpu_count() or 1) if total else 0.0


def one_round(args: argparse.Namespace, client: WebHdfsClient, source: str, path: str) -> Round:
    ticks = machine_ticks()
    _files, _total, sequential_s = sequential_read(client, path)
    sequential_busy = busy_cores(ticks, machine_ticks())
    scratch = fresh_dir(args, "round-")
    cpu, ticks = cpu_seconds(), machine_ticks()
    cold = stage(args, client, source, scratch, "cold")
    cold_cpu, cold_busy = cpu_seconds() - cpu, busy_cores(ticks, machine_ticks())
    warm = stage(args, client, source, scratch, "warm")
    return Round(sequential_s, sequential_busy, cold, cold_cpu, cold_busy, warm)


def scratch_create_us(args: argparse.Namespace) -> float:
    """create_cost_us() in this run's scratch, printed (with a warning when it is slow)."""
    creating = create_cost_us(fresh_dir(args, "create-cost-"))
    warning = (
        f" (over {SLOW_CREATE_US:.0f}: slow, and staging pays it per file; many files deleted here "
        "in the last minutes on an ext4 without a journal?)"
        if creating > SLOW_CREATE_US
        else ""
    )
    print(
        f"staged under          {args.scratch} ({filesystem(args.scratch)}): "
        f"{creating:.0f} us per file or directory made{warning}"
    )
    return creating


def report(args: argparse.Namespace, client: WebHdfsClient, source: str, path: str) -> dict[str, Any]:
    """Print one repository's figures; returns them, staged/plain as "ratio", and every round's times."""
    files, total, _seconds = sequential_read(client, path)  # also a warm-up of both ends
    creating = scratch_create_us(args)
    rounds = [one_round(args, client, source, path) for _round in range(args.rounds)]
    plain = min(rounds, key=lambda r: r.sequential_s)
    sequential_s = plain.sequential_s
    best = min(rounds, key=lambda r: r.cold.seconds)
    cold, warm = best.cold, min((r.warm for r in rounds), key=lambda r: r.seconds)
    sequential_mbps, staged_mbps = total / sequential_s / MB, total / cold.seconds / MB
    ratio = staged_mbps / sequential_mbps
    print(
        f"repository            {source}: {files} files, {total / MB:.1f} MB (best of {args.rounds} rounds)"
    )
    cores = os.cpu_count() or 1
    print(
        f"sequential plain read {sequential_s:8.2f} s  {sequential_mbps:8.1f} MB/s  (no checks; machine "
        f"{plain.sequential_busy:.2f} of {cores} cores busy)"
    )
    print(
        f"staging (cold cache)  {cold.seconds:8.2f} s  {staged_mbps:8.1f} MB/s  ({args.workers} workers, "
        f"{cold.downloaded} downloaded; stager {best.cold_cpu_s / cold.seconds:.2f} cores, machine "
        f"{best.cold_busy:.2f} of {cores} busy)"
    )
    print(f"ratio staged/plain    {ratio:8.2f} x")
    per_gib = warm.seconds / (total / 2**30)
    print(
        f"warm start            {warm.seconds:8.2f} s  ({warm.downloaded} downloaded, {warm.reused} reused, "
        f"CRC-checked: {per_gib:.2f} s per GiB with listing and checksums)"
    )
    recompute_s: float | None = None
    if args.recompute:
        slow = stage(args, client, source, fresh_dir(args, "recompute-"), "recompute", verify="recompute")
        recompute_s = slow.seconds
        print(
            f"--model-verify recompute {slow.seconds:5.2f} s  {total / slow.seconds / MB:8.1f} MB/s  "
            "(HDFS's checksum recomputed in pure Python)"
        )
    return {
        "source": source, "files": files, "bytes": total, "workers": args.workers,
        "sequential_s": sequential_s, "sequential_mbps": sequential_mbps, "staged_s": cold.seconds,
        "staged_mbps": staged_mbps, "ratio": ratio, "warm_s": warm.seconds,
        "warm_downloaded": warm.downloaded, "warm_reused": warm.reused,
        "stager_cores": best.cold_cpu_s / cold.seconds,
        "recompute_s": recompute_s, "scratch_create_us": creating,
        "rounds": [{"sequential_s": r.sequential_s, "staged_s": r.cold.seconds, "warm_s": r.warm.seconds}
                   for r in rounds],
    }  # fmt: skip


def prepare(client: WebHdfsClient) -> None:
    """The two bench repositories on HDFS, written once (the same bytes every time)."""
    for path, count, size in (SMALL, LARGE):
        if sum(f.length for f in client.walk(path, missing_ok=True)) == count * size:
            continue
        print(f"writing {count} x {size / 2**20:.2f} MiB under {path} ...", flush=True)
        for i in range(count):
            client.write(f"{path}/m{i:04d}/1/model.bin", os.urandom(size))


def crc_throughput() -> float:
    """MB/s of the pure-Python CRC-32C (bit-sliced per 512-byte chunk) on 4 MiB."""
    data = os.urandom(4 << 20)
    chunk_crcs(data[:512], 512, "CRC32C")  # build the tables outside the timing
    started = time.perf_counter()
    for i in range(0, len(data), 1 << 20):
        chunk_crcs(data[i : i + (1 << 20)], 512, "CRC32C")
    return len(data) / (time.perf_counter() - started) / MB


def lab(args: argparse.Namespace) -> None:
    client = WebHdfsClient(args.webhdfs_url or LAB_URL, SimpleAuth(args.user))
    prepare(client)
    found = {
        name: report(args, client, f"hdfs://master{path}", path)
        for name, (path, _count, _size) in (("small", SMALL), ("large", LARGE))
    }
    ratios = [r["ratio"] for r in found.values()]
    print(f"goal: staging >= 1.0x the plain read for both: {' and '.join(f'{r:.2f}x' for r in ratios)} -> "
          f"{'met' if min(ratios) >= GOAL_RATIO else 'NOT met'}")  # fmt: skip
    crc = crc_throughput()
    print(f"CRC-32C pure Python   {crc:8.1f} MB/s per core (what --model-verify recompute costs)")
    write_result(args, "lab", found, GOAL_RATIO, {"crc32c_mbps": crc})


def write_result(
    args: argparse.Namespace, mode: str, found: dict[str, dict[str, Any]], goal: float | None,
    extra: dict[str, Any] | None = None,
) -> None:  # fmt: skip
    """With --json: per repository its figures; staged MB/s against the plain read (the baseline)."""
    if not args.json:
        return
    figures: list[Figure] = [
        {"name": f"staging MB/s, {name} ({r['files']} files, {r['bytes'] / MB:.0f} MB)",
         "value": r["staged_mbps"], "unit": "MB/s", "baseline": r["sequential_mbps"],
         "baseline_name": "sequential plain read", "goal": None if goal is None else f"ratio >= {goal:g}",
         "met": None if goal is None else r["ratio"] >= goal}
        for name, r in found.items()
    ]  # fmt: skip
    parameters = {"workers": args.workers, "rounds": args.rounds, "scratch": str(args.scratch)}
    samples = {"mode": mode, "repositories": found, **(extra or {})}
    Result("staging_throughput", figures, parameters, samples).write(args.json)


# ---- --self-test: a fake WebHDFS in a child process, so it does not share this one's GIL


def serve_fake(files: int, size_mib: int, latency_ms: float) -> None:
    sys.path.insert(0, str(ROOT))
    from tests.support.webhdfs import FakeHdfs, HdfsFile

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
            found = report(
                args, WebHdfsClient(url, SimpleAuth(args.user)), "hdfs://fake/bench/models", "/bench/models"
            )
        finally:
            server.stdin.close()
    write_result(args, "self-test", {"fake": found}, None, {"latency_ms": args.latency_ms})


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("path", nargs="?", help="HDFS path of the model repository, e.g. /tarn/models")
    parser.add_argument("--webhdfs-url", help="the NameNode's HTTP address, e.g. http://master:9870")
    parser.add_argument("--user", default=os.environ.get("USER", "tarn"), help="user.name for simple auth")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--lab", action="store_true", help="the lab's HDFS (bench repositories under /user/tarn/bench)"
    )
    parser.add_argument(
        "--recompute", action="store_true", help="also stage once with --model-verify recompute"
    )
    parser.add_argument("--self-test", action="store_true", help="run against a loopback fake WebHDFS")
    parser.add_argument("--files", type=int, default=8, help="self-test: number of model files")
    parser.add_argument("--size-mib", type=int, default=64, help="self-test: repository size")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="self-test: DataNode delay per OPEN")
    parser.add_argument("--json", type=Path, help="also write the figures and every round's times here")
    parser.add_argument(
        "--scratch", type=Path, default=default_scratch(),
        help="where each staging's cache and target are made (default: build/bench/scratch, on disk "
        "as the node cache is)",
    )  # fmt: skip
    parser.add_argument("--serve-fake", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tarn-bench-", dir=args.scratch) as run_dir:
        args.run_dir = Path(run_dir)  # every staging of this run, deleted at its end
        run(parser, args)


def run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.serve_fake:
        serve_fake(args.files, args.size_mib, args.latency_ms)
    elif args.self_test:
        self_test(args)
    elif args.lab:
        lab(args)
    elif args.webhdfs_url and args.path:
        host = args.webhdfs_url.split("://", 1)[-1].split(":")[0].split("/")[0]
        client = WebHdfsClient(args.webhdfs_url, SimpleAuth(args.user))
        write_result(
            args, "path", {args.path: report(args, client, f"hdfs://{host}{args.path}", args.path)}, None
        )
    else:
        parser.error("give --webhdfs-url and an HDFS path, or --self-test")


if __name__ == "__main__":
    main()
