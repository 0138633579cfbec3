"""The WebHDFS client's writes (two-step CREATE, MKDIRS, DELETE, retries) against a loopback
NameNode/DataNode pair that answers as Hadoop 3 does, and where an hdfs:// source's NameNode is.
Its reads and their retries: tests/unit/stdlib/launcher/test_staging.py, over FakeHdfs.

The same calls against a real HDFS: tests/e2e/test_lab_cluster.py (Molecule's lab scenario)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tarn.stdlib.webhdfs import SimpleAuth, WebHdfsClient, WebHdfsError, namenode_location
from tests.support.webhdfs import Hdfs


@pytest.fixture
def hdfs() -> Iterator[Hdfs]:
    fake = Hdfs()
    yield fake
    fake.server.shutdown()


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def client(hdfs: Hdfs, sleeps: list[float]) -> WebHdfsClient:
    return WebHdfsClient(hdfs.url, SimpleAuth("tarn"), timeout=5, retries=2, sleep=sleeps.append)


def test_create_sends_the_data_to_the_datanode_only(hdfs: Hdfs, client: WebHdfsClient) -> None:
    client.write("/user/tarn/a b.txt", b"hello")
    assert hdfs.files == {"/user/tarn/a b.txt": b"hello"}
    assert hdfs.seen == [("PUT", "namenode", "CREATE", 0), ("PUT", "datanode", "CREATE", 5)]


def test_a_failed_create_is_retried_whole(hdfs: Hdfs, client: WebHdfsClient, sleeps: list[float]) -> None:
    hdfs.fail_next = 2
    client.write("/f", b"x")
    assert hdfs.files == {"/f": b"x"}
    assert sleeps == [0.5, 1.0]


def test_create_without_overwrite_is_refused_and_not_retried(
    hdfs: Hdfs, client: WebHdfsClient, sleeps: list[float]
) -> None:
    client.write("/f", b"x")
    with pytest.raises(WebHdfsError, match="FileAlreadyExistsException") as refused:
        client.write("/f", b"y", overwrite=False)
    assert (refused.value.status, hdfs.files["/f"], sleeps) == (403, b"x", [])


def test_append_goes_to_the_datanode_and_is_not_retried(
    hdfs: Hdfs, client: WebHdfsClient, sleeps: list[float]
) -> None:
    client.write("/audit.log", b"a\n")
    client.append("/audit.log", b"b\n")
    assert hdfs.files == {"/audit.log": b"a\nb\n"}
    assert hdfs.seen[-2:] == [("POST", "namenode", "APPEND", 0), ("POST", "datanode", "APPEND", 2)]
    hdfs.fail_next = 1
    with pytest.raises(WebHdfsError, match="RetriableException"):
        client.append("/audit.log", b"c\n")
    assert (hdfs.files["/audit.log"], sleeps) == (b"a\nb\n", [])
    with pytest.raises(WebHdfsError, match="FileNotFoundException"):
        client.append("/missing.log", b"x")


def test_status_mkdirs_delete_and_upload(hdfs: Hdfs, client: WebHdfsClient, tmp_path: Path) -> None:
    (tmp_path / "m" / "1").mkdir(parents=True)
    (tmp_path / "m" / "config.pbtxt").write_text("name: 'm'")
    (tmp_path / "m" / "1" / "model.py").write_text("pass")
    (tmp_path / "m" / "__pycache__").mkdir()
    (tmp_path / "m" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    client.mkdirs("/r", permission="700")
    assert client.upload_tree(tmp_path, "/r") == 2
    assert sorted(hdfs.files) == ["/r/m/1/model.py", "/r/m/config.pbtxt"]
    status = client.status("/r/m/config.pbtxt")
    assert status is not None
    assert (status.length, status.owner, status.permission) == (9, "tarn", "644")
    assert client.delete("/r", recursive=True)
    assert not client.delete("/r", recursive=True)
    assert client.status("/r/m/config.pbtxt") is None
    assert ("PUT", "namenode", "MKDIRS", 0) in hdfs.seen


def test_walk_of_a_missing_directory(client: WebHdfsClient) -> None:
    assert client.walk("/nothing", missing_ok=True) == []


@pytest.mark.parametrize(
    ("source", "url", "default_fs", "expected"),
    [
        ("hdfs://nn:8020/models", "http://nn:9870/", None, ("http://nn:9870", "/models")),
        ("hdfs://nn:8020/models", None, None, ("http://nn:9870", "/models")),
        ("hdfs:///models/a%20b", None, "hdfs://master:8020", ("http://master:9870", "/models/a b")),
    ],
)
def test_namenode_location(
    source: str, url: str | None, default_fs: str | None, expected: tuple[str, str]
) -> None:
    assert namenode_location(source, url, default_fs) == expected


@pytest.mark.parametrize(("source", "default_fs"), [("hdfs:///models", None), ("s3://b/models", None)])
def test_namenode_location_refuses(source: str, default_fs: str | None) -> None:
    with pytest.raises(ValueError, match=r"hdfs|NameNode"):
        namenode_location(source, None, default_fs)
