"""Model staging through WebHDFS, against a loopback NameNode + DataNode pair.

The fake (FakeHdfs, tests/support/webhdfs.py) serves the WebHDFS subset the launcher uses
(LISTSTATUS, GETFILESTATUS, GETFILECHECKSUM and OPEN, the last two redirected with a 307 to a
second "DataNode" port, as HDFS does). Its checksums come from an independent, deliberately naive
implementation of HDFS's MD5-of-MD5-of-CRC (bit-by-bit CRC), so the launcher's fast CRC is
checked, not echoed."""

from __future__ import annotations

import concurrent.futures
import errno
import fcntl
import json
import logging
import os
import shutil
import socket
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tarn.stdlib import webhdfs
from tarn.stdlib.launcher import staging
from tarn.stdlib.launcher.cache import PIECE_BYTES
from tarn.stdlib.launcher.staging import (
    MARKER,
    RemoteFile,
    StagingError,
    direct_write,
    plan,
    progress_line,
    ranges,
    resolve_repository,
    stage_repository,
)
from tarn.stdlib.webhdfs import (
    FileChecksum,
    FileStatus,
    SimpleAuth,
    WebHdfsClient,
    WebHdfsError,
)
from tests.support.webhdfs import FakeHdfs, HdfsFile, naive_hdfs_checksum, noise

# ---- fixtures ---------------------------------------------------------------------------------


def repository() -> dict[str, HdfsFile]:
    return {
        "/models/simple/config.pbtxt": HdfsFile(b'name: "simple"\nbackend: "python"\n'),
        "/models/simple/1/model.py": HdfsFile(b"import numpy as np\n" * 40),
        "/models/onnx/config.pbtxt": HdfsFile(b'name: "onnx"\nbackend: "onnxruntime"\n', crc_type="CRC32"),
        # three and a half blocks, a short last chunk
        "/models/onnx/1/model.onnx": HdfsFile(noise(3 * 4096 + 1000, 7)),
        "/models/empty/1/.keep": HdfsFile(b""),
    }


@pytest.fixture
def hdfs() -> Iterator[FakeHdfs]:
    fake = FakeHdfs(repository())
    yield fake
    fake.close()


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def client(hdfs: FakeHdfs, sleeps: list[float]) -> WebHdfsClient:
    return WebHdfsClient(hdfs.url, SimpleAuth("tarn"), timeout=5, retries=2, backoff=0.5, sleep=sleeps.append)


def test_a_walk_lists_each_level_at_once_and_finds_what_a_sequential_walk_finds(
    client: WebHdfsClient,
) -> None:
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        parallel = client.walk("/models", pool=pool)
        assert client.walk("/nothing", missing_ok=True, pool=pool) == []
    assert parallel == client.walk("/models")
    assert [f.path for f in parallel] == sorted(repository())


def stage(client: WebHdfsClient, tmp_path: Path, **kwargs: Any):
    return stage_repository(
        "hdfs://nn:8020/models", tmp_path / "models", tmp_path / "cache", client, **kwargs
    )


def tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and p.name != MARKER
    }


def expected_tree(files: dict[str, HdfsFile]) -> dict[str, bytes]:
    return {path.removeprefix("/models/"): f.data for path, f in files.items()}


# ---- decisions --------------------------------------------------------------------------------


def remote(name: str, checksum: str | None, length: int = 10) -> RemoteFile:
    status = FileStatus(f"/m/{name}", "FILE", length, 4096, 1)
    return RemoteFile(
        name, status, FileChecksum("MD5-of-0MD5-of-512CRC32C", checksum, 28) if checksum else None
    )


def test_plan_reuses_what_the_cache_holds_by_content() -> None:
    a, b, c = remote("a", "aa"), remote("b", "bb"), remote("c", None)
    moved = remote("moved/a", "aa")  # same content elsewhere: same object
    twin = remote("twin/b", "bb")  # identical files to download: fetched once, placed twice
    download, reuse = plan([a, b, c, moved, twin], {a.key})
    assert [[r.relpath for r in group] for group in download.values()] == [["b", "twin/b"], ["c"]]
    assert [r.relpath for r in reuse] == ["a", "moved/a"]
    assert remote("a", "aa", length=11).key != a.key


# ---- staging against the fake -------------------------------------------------------------------


def meta_of(cache: Path, source: str) -> dict[str, Any]:
    """The cache's meta of the object fetched from HDFS path `source`."""
    metas = [json.loads(m.read_text()) for m in (cache / "meta").iterdir()]
    found: dict[str, Any] = next(m for m in metas if m["source"] == source)
    return found


def test_first_stage_downloads_everything(hdfs: FakeHdfs, client: WebHdfsClient, tmp_path: Path) -> None:
    report = stage(client, tmp_path)
    assert tree(tmp_path / "models") == expected_tree(hdfs.files)
    assert (report.downloaded, report.reused, report.verify) == (5, 0, "hdfs")
    assert report.bytes_downloaded == sum(len(f.data) for f in hdfs.files.values())
    assert hdfs.users == {"tarn"}
    assert hdfs.checksums_asked == 0  # keys from the listing: path, inode, time, length
    onnx = meta_of(tmp_path / "cache", "/models/onnx/1/model.onnx")
    data = hdfs.files["/models/onnx/1/model.onnx"].data
    assert (onnx["length"], onnx["verified"], onnx["crc32"], onnx["algorithm"]) == (
        13288,
        "hdfs",
        [zlib.crc32(data)],
        None,
    )
    assert not any((tmp_path / "cache" / "partial").iterdir())


def test_without_inode_ids_the_cache_is_keyed_by_hdfs_checksum(
    hdfs: FakeHdfs, client: WebHdfsClient, tmp_path: Path
) -> None:
    hdfs.file_ids = False
    stage(client, tmp_path)
    assert hdfs.checksums_asked == 5
    onnx = hdfs.files["/models/onnx/1/model.onnx"].data
    meta = meta_of(tmp_path / "cache", "/models/onnx/1/model.onnx")
    assert meta["algorithm"] == "MD5-of-8MD5-of-512CRC32C"
    assert meta["checksum"] == naive_hdfs_checksum(hdfs.files["/models/onnx/1/model.onnx"])["bytes"]
    hdfs.opens.clear()
    hdfs.files["/models/copy/model.onnx"] = HdfsFile(onnx)  # same bytes elsewhere: the same object
    report = stage(client, tmp_path)
    assert (report.downloaded, hdfs.opens) == (0, [])
    assert ("/models/empty/1/.keep", 0) not in hdfs.opens  # nothing to read in an empty file


def test_restart_downloads_nothing_unchanged(hdfs: FakeHdfs, client: WebHdfsClient, tmp_path: Path) -> None:
    stage(client, tmp_path)
    hdfs.opens.clear()
    report = stage(client, tmp_path)
    assert (report.downloaded, report.reused, report.bytes_downloaded) == (0, 5, 0)
    assert hdfs.opens == []
    assert tree(tmp_path / "models") == expected_tree(hdfs.files)


def test_another_service_on_the_node_downloads_nothing(
    hdfs: FakeHdfs, client: WebHdfsClient, tmp_path: Path
) -> None:
    stage(client, tmp_path)
    hdfs.opens.clear()
    other = stage_repository("hdfs://nn:8020/models", tmp_path / "other", tmp_path / "cache", client)
    assert (other.downloaded, other.bytes_downloaded, hdfs.opens) == (0, 0, [])
    assert tree(tmp_path / "other") == expected_tree(hdfs.files)


def test_a_changed_file_is_downloaded_alone(hdfs: FakeHdfs, client: WebHdfsClient, tmp_path: Path) -> None:
    stage(client, tmp_path)
    hdfs.opens.clear()
    hdfs.files["/models/simple/1/model.py"] = HdfsFile(b"import numpy\n# v2\n", mtime=1_800_000_000_000)
    report = stage(client, tmp_path)
    assert (report.downloaded, report.reused) == (1, 4)
    assert hdfs.opens == [("/models/simple/1/model.py", 0)]
    assert tree(tmp_path / "models") == expected_tree(hdfs.files)


def test_a_rewritten_file_is_fetched_even_with_the_same_time_and_length(
    hdfs: FakeHdfs, client: WebHdfsClient, tmp_path: Path
) -> None:
    stage(client, tmp_path)
    hdfs.opens.clear()
    old = hdfs.files["/models/simple/config.pbtxt"]
    hdfs.files["/models/simple/config.pbtxt"] = HdfsFile(
        old.data.replace(b"python", b"pytorc"), mtime=old.mtime
    )
    report = stage(client, tmp_path)
    assert (report.downloaded, hdfs.opens) == (1, [("/models/simple/config.pbtxt", 0)])
    assert tree(tmp_path / "models") == expected_tree(hdfs.files)


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_a_cache_file_changed_on_the_node_is_fetched_again(
    hdfs: FakeHdfs, client: WebHdfsClient, tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    stage(client, tmp_path)
    shutil.rmtree(tmp_path / "models")  # the instance is gone; its cache files stay
    hdfs.opens.clear()
    onnx = next(p for p in (tmp_path / "cache" / "objects").iterdir() if p.stat().st_size == 13288)
    onnx.chmod(0o644)
    data = bytearray(onnx.read_bytes())
    if damage == "flip":
        data[5000] ^= 0x10
    else:
        del data[-1:]
    onnx.write_bytes(bytes(data))
    caplog.set_level(logging.WARNING)
    report = stage(client, tmp_path)
    assert (report.downloaded, report.refetched, report.reused) == (1, 1, 4)
    assert hdfs.opens == [("/models/onnx/1/model.onnx", 0)]
    assert tree(tmp_path / "models") == expected_tree(hdfs.files)
    assert "onnx/1/model.onnx: the node cache's copy changed" in caplog.text


def test_corrupt_bytes_are_caught_by_recomputing_and_leave_nothing(
    hdfs: FakeHdfs, client: WebHdfsClient, tmp_path: Path
) -> None:
    hdfs.corrupt.add("/models/onnx/1/model.onnx")
    with pytest.raises(
        StagingError, match=r"model\.onnx: content does not match HDFS's MD5-of-8MD5-of-512CRC32C"
    ):
        stage(client, tmp_path, workers=1, verify="recompute")
    assert not (tmp_path / "models").exists()
    # one more try, then give up
    assert [p for p, _offset in hdfs.opens].count("/models/onnx/1/model.onnx") == 2
    objects = list((tmp_path / "cache" / "objects").iterdir())
    metas = [json.loads(m.read_text()) for m in (tmp_path / "cache" / "meta").iterdir()]
    assert len(objects) == len(metas)  # only what was verified, each with its meta
    assert all(meta["verified"] == "recomputed" for meta in metas)
    assert all(o.stat().st_size != 13288 for o in objects)
    assert not any((tmp_path / "cache" / "partial").iterdir())


def test_a_short_read_fails_on_its_length(hdfs: FakeHdfs, client: WebHdfsClient, tmp_path: Path) -> None:
    hdfs.short.add("/models/simple/1/model.py")
    with pytest.raises(StagingError, match=r"model\.py: downloaded 759 bytes, HDFS says 760"):
        stage(client, tmp_path)
    assert not (tmp_path / "models").exists()


def test_a_stream_cut_mid_way_resumes_at_its_offset(
    hdfs: FakeHdfs, client: WebHdfsClient, tmp_path: Path
) -> None:
    hdfs.cut_once.add("/models/onnx/1/model.onnx")
    stage(client, tmp_path)
    assert [o for p, o in hdfs.opens if p == "/models/onnx/1/model.onnx"] == [0, 13288 // 2]
    assert tree(tmp_path / "models") == expected_tree(hdfs.files)


def test_downloads_run_in_parallel_within_the_bound(tmp_path: Path) -> None:
    fake = FakeHdfs({f"/models/m{i}/1/model.py": HdfsFile(b"x" * (100 + i)) for i in range(8)}, delay=0.1)
    try:
        client = WebHdfsClient(fake.url, SimpleAuth("tarn"))
        report = stage(client, tmp_path, workers=3)
    finally:
        fake.close()
    assert report.downloaded == 8
    assert fake.peak == 3


def test_two_instances_staging_at_once_download_each_file_once(tmp_path: Path) -> None:
    files = {f"/models/m{i}/1/model.bin": HdfsFile(noise(3000 + i, i)) for i in range(6)}
    fake = FakeHdfs(files, delay=0.1)
    reports = []
    try:
        client = WebHdfsClient(fake.url, SimpleAuth("tarn"))

        def instance(name: str) -> None:
            reports.append(
                stage_repository("hdfs://nn:8020/models", tmp_path / name, tmp_path / "cache", client, 2)
            )

        threads = [threading.Thread(target=instance, args=(name,)) for name in ("a", "b")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        fake.close()
    assert sorted(p for p, _offset in fake.opens) == sorted(files)  # one read per file, in all
    assert sum(r.downloaded for r in reports) == 6
    assert sum(r.waited for r in reports) == 6  # the other instance linked what the first fetched
    for name in ("a", "b"):
        assert tree(tmp_path / name) == expected_tree(files)


def test_big_files_are_read_in_parallel_ranges(
    hdfs: FakeHdfs, client: WebHdfsClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(staging, "PIECE_BYTES", 4096)
    monkeypatch.setattr(staging, "RANGE_MIN_BYTES", 8192)  # only model.onnx (13288 bytes)
    stage(client, tmp_path, workers=4)
    assert sorted(o for p, o in hdfs.opens if p == "/models/onnx/1/model.onnx") == [0, 4096, 8192, 12288]
    assert tree(tmp_path / "models") == expected_tree(hdfs.files)
    onnx = hdfs.files["/models/onnx/1/model.onnx"].data
    meta = meta_of(tmp_path / "cache", "/models/onnx/1/model.onnx")
    assert meta["crc32"] == [zlib.crc32(onnx[i : i + 4096]) for i in range(0, len(onnx), 4096)]
    # and the start-up check reads them back piece by piece
    shutil.rmtree(tmp_path / "models")
    assert stage(client, tmp_path, workers=4).reused == 5


ONNX_BYTES = 13288  # model.onnx: three aligned 4 KiB chunks and a 1000-byte tail


@pytest.fixture
def onnx_writes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[bool, int, int]]:
    """model.onnx's writes while staging, as (through O_DIRECT?, position, bytes), with 4 KiB
    pieces and read buffers, and model.onnx (only) a big file."""
    monkeypatch.setattr(staging, "PIECE_BYTES", 4096)
    monkeypatch.setattr(staging, "RANGE_MIN_BYTES", 8192)
    monkeypatch.setattr(staging, "READ_BUFFER_BYTES", 4096)
    seen: list[tuple[bool, int, int]] = []
    pwrite = os.pwrite

    def spy(fd: int, data: Any, position: int) -> int:
        if os.fstat(fd).st_size == ONNX_BYTES:  # its partial, sized up front
            seen.append((bool(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT), position, len(data)))
        return pwrite(fd, data, position)

    monkeypatch.setattr(os, "pwrite", spy)
    return seen


def test_a_big_files_aligned_chunks_bypass_the_page_cache(
    hdfs: FakeHdfs, client: WebHdfsClient, tmp_path: Path, onnx_writes: list[tuple[bool, int, int]]
) -> None:
    stage(client, tmp_path, workers=1)
    assert onnx_writes == [(True, 0, 4096), (True, 4096, 4096), (True, 8192, 4096), (False, 12288, 1000)]
    assert tree(tmp_path / "models") == expected_tree(hdfs.files)
    shutil.rmtree(tmp_path / "models")
    assert stage(client, tmp_path).reused == 5  # and the start-up check reads them back


def test_a_resumed_stream_writes_its_unaligned_chunks_through_the_page_cache(
    hdfs: FakeHdfs, client: WebHdfsClient, tmp_path: Path, onnx_writes: list[tuple[bool, int, int]]
) -> None:
    hdfs.cut_once.add("/models/onnx/1/model.onnx")  # half the file (6644 bytes), then a drop
    stage(client, tmp_path, workers=1)
    assert onnx_writes == [(True, 0, 4096), (False, 4096, 2548), (False, 6644, 4096), (False, 10740, 2548)]
    assert tree(tmp_path / "models") == expected_tree(hdfs.files)


@pytest.mark.parametrize("refused_at", ["open", "write"])
def test_where_o_direct_is_refused_everything_goes_through_the_page_cache(
    hdfs: FakeHdfs,
    client: WebHdfsClient,
    tmp_path: Path,
    onnx_writes: list[tuple[bool, int, int]],
    monkeypatch: pytest.MonkeyPatch,
    refused_at: str,
) -> None:
    """As on a file system without O_DIRECT: it fails the open, or (some FUSE and network file
    systems) takes the flag and fails the write with EINVAL."""
    real_open, real_pwrite = os.open, os.pwrite
    refused: list[str] = []

    def refusing_open(path: Any, flags: int, *args: Any) -> int:
        if flags & os.O_DIRECT and refused_at == "open":
            refused.append("open")
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(path, flags, *args)

    def refusing_pwrite(fd: int, data: Any, position: int) -> int:
        if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT:
            refused.append("write")
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_pwrite(fd, data, position)

    monkeypatch.setattr(os, "open", refusing_open)
    monkeypatch.setattr(os, "pwrite", refusing_pwrite)
    stage(client, tmp_path, workers=1)
    assert refused == [refused_at]  # once: the rest of the file went through the page cache
    assert onnx_writes == [(False, 0, 4096), (False, 4096, 4096), (False, 8192, 4096), (False, 12288, 1000)]
    assert tree(tmp_path / "models") == expected_tree(hdfs.files)


def test_only_aligned_chunks_are_written_direct() -> None:
    assert direct_write(0, 4096)
    assert direct_write(8192, 1 << 20)
    assert not direct_write(0, 1000)  # a file's tail
    assert not direct_write(6644, 4096)  # after a stream resumed mid-block
    assert not direct_write(4096, 0)


def test_the_cache_stays_within_its_bound_and_keeps_files_in_use(
    hdfs: FakeHdfs, client: WebHdfsClient, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    stage(client, tmp_path)  # repository 1, served from tmp_path/models: in use
    others = {f"/other/f{i}": HdfsFile(noise(10_000, 100 + i)) for i in range(3)}
    hdfs.files.update(others)
    second = stage_repository("hdfs://nn:8020/other", tmp_path / "other", cache, client, max_cache_bytes=1)
    assert second.evicted == 0  # everything cached is in use by one repository or the other
    assert tree(tmp_path / "models") == expected_tree(
        {k: v for k, v in hdfs.files.items() if k.startswith("/models/")}
    )
    shutil.rmtree(tmp_path / "models")  # that instance stopped: its files may go now
    bound = 30_000 + 13288
    third = stage_repository("hdfs://nn:8020/other", tmp_path / "other", cache, client, max_cache_bytes=bound)
    assert third.evicted >= 1
    assert third.downloaded == 0
    assert sum(p.stat().st_size for p in (cache / "objects").iterdir()) <= bound
    assert tree(tmp_path / "other") == {k.removeprefix("/other/"): v.data for k, v in others.items()}


def test_a_foreign_directory_is_not_replaced(client: WebHdfsClient, tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "precious").write_text("mine")
    with pytest.raises(StagingError, match="not staged by TARN"):
        stage(client, tmp_path)
    assert (tmp_path / "models" / "precious").read_text() == "mine"


def test_a_missing_repository_is_a_staging_error(client: WebHdfsClient, tmp_path: Path) -> None:
    with pytest.raises(StagingError, match="FileNotFoundException"):
        stage_repository("hdfs://nn:8020/nothing", tmp_path / "m", tmp_path / "c", client)


def test_cache_objects_are_read_only_links(hdfs: FakeHdfs, client: WebHdfsClient, tmp_path: Path) -> None:
    stage(client, tmp_path)
    staged = tmp_path / "models" / "simple" / "config.pbtxt"
    assert staged.stat().st_nlink == 2
    assert staged.stat().st_mode & 0o222 == 0


def test_progress_is_logged(
    hdfs: FakeHdfs, client: WebHdfsClient, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    stage(client, tmp_path, progress_interval_s=0.0)
    assert "staging: 0.00 of 0.00 GiB (100 %), 5 of 5 files" in caplog.text


# ---- decisions of the ranges ----------------------------------------------------------------------


def test_ranges_split_big_files_on_piece_boundaries() -> None:
    piece = PIECE_BYTES
    assert ranges(1000, 4) == [(0, 1000)]
    assert ranges(10 * piece, 1) == [(0, 10 * piece)]
    assert ranges(10 * piece + 5, 4) == [
        (0, 3 * piece),
        (3 * piece, 3 * piece),
        (6 * piece, 3 * piece),
        (9 * piece, piece + 5),
    ]
    assert sum(n for _o, n in ranges(512 << 20, 4)) == 512 << 20
    assert ranges(staging.RANGE_MIN_BYTES - 1, 4) == [(0, staging.RANGE_MIN_BYTES - 1)]
    assert len(ranges(staging.RANGE_MIN_BYTES, 4)) == 2  # a big file: 2 pieces, 2 parts
    assert not staging.big(staging.RANGE_MIN_BYTES - 1)
    assert staging.big(staging.RANGE_MIN_BYTES)


def test_progress_line() -> None:
    line = progress_line(1 << 30, 4 << 30, 3, 10, 4.0)
    assert line == "staging: 1.00 of 4.00 GiB (25 %), 3 of 10 files, 256 MiB/s, about 12 s left"


# ---- the client's retries -----------------------------------------------------------------------


def test_5xx_answers_are_retried_with_backoff(
    hdfs: FakeHdfs, client: WebHdfsClient, sleeps: list[float]
) -> None:
    hdfs.fail_next = 2
    status = client.status("/models/simple/config.pbtxt")
    assert status is not None
    assert status.type == "FILE"
    assert sleeps == [0.5, 1.0]


def test_retries_run_out(hdfs: FakeHdfs, client: WebHdfsClient, sleeps: list[float]) -> None:
    hdfs.fail_next = 10
    with pytest.raises(WebHdfsError, match="503 RetriableException") as failure:
        client.status("/models")
    assert failure.value.status == 503
    assert sleeps == [0.5, 1.0]


def test_connection_errors_are_retried(sleeps: list[float]) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = WebHdfsClient(f"http://127.0.0.1:{port}", SimpleAuth("tarn"), retries=3, sleep=sleeps.append)
    with pytest.raises(WebHdfsError, match="GETFILESTATUS /models"):
        client.status("/models")
    assert sleeps == [0.5, 1.0, 2.0]


def test_4xx_answers_are_not_retried(client: WebHdfsClient, sleeps: list[float]) -> None:
    with pytest.raises(webhdfs.HdfsNotFoundError):
        client.list_dir("/nothing")
    assert sleeps == []


# ---- local repositories ----------------------------------------------------------------------


def test_a_local_path_is_used_in_place(tmp_path: Path) -> None:
    assert resolve_repository(str(tmp_path)) == tmp_path
    assert resolve_repository(f"file://{tmp_path}") == tmp_path


@pytest.mark.parametrize(
    "source", ["relative/models", "/does/not/exist", "s3://bucket/models", "hdfs:///models"]
)
def test_unusable_repositories_are_refused(source: str) -> None:
    with pytest.raises(StagingError):
        resolve_repository(source)


def test_resolve_stages_hdfs(hdfs: FakeHdfs, client: WebHdfsClient, tmp_path: Path) -> None:
    target = resolve_repository(
        "hdfs://nn:8020/models", target_dir=tmp_path / "t", cache_dir=tmp_path / "c", client=client, workers=2
    )
    assert target == tmp_path / "t"
    assert tree(target) == expected_tree(hdfs.files)
    assert os.listdir(tmp_path / "c" / "partial") == []
