"""The WebHDFS client's writes (two-step CREATE, MKDIRS, DELETE, retries) against a loopback
NameNode/DataNode pair that answers as Hadoop 3 does, and the SPNEGO authenticator's header.

The same calls against a real HDFS: tests/e2e/test_lab_cluster.py (Molecule's lab scenario)."""

from __future__ import annotations

import base64
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tarn.stdlib.webhdfs import SimpleAuth, WebHdfsClient, WebHdfsError
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


# ---- SPNEGO: the header a Kerberized NameNode expects (no KDC here: the GSSAPI is a stand-in)


class FakeGssapi(types.ModuleType):
    """What SpnegoAuth uses of python-gssapi: Name, NameType, OID, SecurityContext."""

    def __init__(self) -> None:
        super().__init__("gssapi")
        self.contexts: list[dict[str, Any]] = []
        outer = self

        class Context:
            def __init__(self, **kwargs: Any) -> None:
                outer.contexts.append(kwargs)

            def step(self) -> bytes:
                return b"negotiation-token"

        self.Name = lambda name, kind: (name, kind)
        self.NameType = types.SimpleNamespace(hostbased_service="hostbased")
        self.OID = types.SimpleNamespace(from_int_seq=lambda oid: f"oid:{oid}")
        self.SecurityContext = Context


def test_spnego_asks_for_the_http_service_of_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    from tarn.clients.spnego import SpnegoAuth

    fake = FakeGssapi()
    monkeypatch.setitem(sys.modules, "gssapi", fake)
    auth = SpnegoAuth()
    header = auth.headers("http://nn1.example:9870/webhdfs/v1/x?op=GETFILESTATUS")
    assert header == {"Authorization": "Negotiate " + base64.b64encode(b"negotiation-token").decode()}
    assert fake.contexts == [
        {"name": ("HTTP@nn1.example", "hostbased"), "mech": "oid:1.3.6.1.5.5.2", "usage": "initiate"}
    ]
    assert auth.query() == {}
    # The DataNode a NameNode redirects to is authorized by the delegation token in the URL.
    assert auth.headers("http://dn1.example:9864/webhdfs/v1/x?op=OPEN&delegation=abc") == {}


def test_spnego_without_gssapi_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    from tarn.clients.spnego import SpnegoAuth
    from tarn.errors import ConfigError

    monkeypatch.setitem(sys.modules, "gssapi", None)  # as if not installed
    with pytest.raises(ConfigError, match="requests-gssapi"):
        SpnegoAuth()
