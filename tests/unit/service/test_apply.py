"""Carrying a plan out: an instance's ranks share one node (a world larger than every NodeManager's
GPUs is refused); create uploads, then submits, and a refused submission leaves nothing behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from tarn.errors import ClusterError
from tarn.service.apply import create, gpu_shortfall
from tarn.service.artifacts import Desired
from tarn.service.cluster import Cluster
from tarn.service.options import Options
from tarn.stdlib.config import TarnConfig, parse_config
from tarn.stdlib.hadoop_site import properties_xml
from tarn.stdlib.kerberos import KerberosIdentity
from tests.support.memory_hdfs import MemoryHdfs


def config(*argv: str) -> TarnConfig:
    return parse_config(["--model-repository", "hdfs:///models", "--runtime", "process", *argv], {})


@pytest.mark.parametrize(
    ("argv", "capacities", "problem"),
    [
        ((), [1, 0], None),
        (("--tp", "2"), [2, 1], None),
        (("--tp", "4", "--pp", "2"), [8], None),
        (("--tp", "2", "--gpus-per-instance", "0"), [0, 0], None),  # a CPU world
        (("--tp", "2"), [], None),  # no NodeManager registered yet: YARN will wait, not refuse
        (("--tp", "2", "--pp", "2"), [2, 2],
         "--tp 2 --pp 2: an instance needs 4 yarn.io/gpu on one node, and the NodeManagers offer at most 2"),
        (("--tp", "4", "--pp", "2"), [4, 4, 4], "--tp 4 --pp 2: an instance needs 8"),
        (("--tp", "1"), [0], "--tp 1 --pp 1: an instance needs 1 yarn.io/gpu"),
        (("--gpus-per-instance", "3"), [2], "--gpus-per-instance: an instance needs 3"),
    ],
)  # fmt: skip
def test_gpu_shortfall(argv: tuple[str, ...], capacities: list[int], problem: str | None) -> None:
    found = gpu_shortfall(config(*argv), capacities)
    if problem is None:
        assert found is None
    else:
        assert found is not None
        assert found.startswith(problem), found
        assert "lower" in found
        assert found.endswith("or add GPUs to a node")


# ---- create: the files first, then the submission; a refused one leaves nothing behind


class RecordingRM:
    """The RM calls create() makes, with /conf as a secure RM's (a resource type, a base path)."""

    def __init__(self, refuse: bool = False, conf: dict[str, str] | None = None) -> None:
        self.refuse = refuse
        self.conf = conf or {}
        self.created: list[str] = []
        self.conf_reads = 0

    def service(self, name: str) -> None:
        return None

    def nodes(self) -> list[dict[str, object]]:
        return []

    def configuration(self) -> dict[str, str]:
        self.conf_reads += 1
        return {"yarn.resource-types": "yarn.io/gpu", "yarn.service.base.path": "/apps/ys", **self.conf}

    def create_service(self, spec: dict[str, object]) -> dict[str, object]:
        if self.refuse:
            raise ClusterError("POST /app/v1/services answered 400: refused")
        self.created.append(str(spec["name"]))
        return {}


def desired() -> Desired:
    cfg = config("--service-name", "demo")
    return Desired(config=cfg, user="tarn", spec={"name": "demo"}, uploads={"/user/tarn/.tarn/demo/x": b"x"})


AM_CONF = "/apps/ys/services/demo/conf/resource-types.xml"


def test_a_secure_service_gets_the_ams_configuration_before_it_is_submitted() -> None:
    rm, hdfs = RecordingRM(), MemoryHdfs()
    cluster = Cluster(rm=rm, hdfs=hdfs, user="tarn", identity=KerberosIdentity("tarn@TARN.LAB"))  # type: ignore[arg-type]
    create(cluster, desired(), Options())
    assert rm.created == ["demo"]
    assert set(hdfs.files) == {"/user/tarn/.tarn/demo/x", AM_CONF}
    assert b"<name>hadoop.security.token.service.use_ip</name>" in hdfs.files[AM_CONF]


def test_a_refused_secure_submission_removes_the_ams_configuration_too() -> None:
    rm, hdfs = RecordingRM(refuse=True), MemoryHdfs()
    cluster = Cluster(rm=rm, hdfs=hdfs, user="tarn", identity=KerberosIdentity("tarn@TARN.LAB"))  # type: ignore[arg-type]
    with pytest.raises(ClusterError, match="refused"):
        create(cluster, desired(), Options())
    assert hdfs.files == {}


def test_simple_authentication_writes_no_am_configuration() -> None:
    rm, hdfs = RecordingRM(), MemoryHdfs()
    create(Cluster(rm=rm, hdfs=hdfs, user="tarn"), desired(), Options())  # type: ignore[arg-type]
    assert rm.conf_reads == 0
    assert set(hdfs.files) == {"/user/tarn/.tarn/demo/x"}


def secure(rm: RecordingRM, hdfs: MemoryHdfs, conf_dir: Path) -> Cluster:
    identity = KerberosIdentity("tarn@TARN.LAB")
    return Cluster(rm=rm, hdfs=hdfs, user="tarn", identity=identity, conf_dir=conf_dir)  # type: ignore[arg-type]


HA = {"fs.defaultFS": "hdfs://prod", "dfs.nameservices": "prod"}


@pytest.mark.parametrize(("rm_conf", "client_hdfs_site"), [(HA, ""), ({}, "dfs.nameservices=prod")])
def test_a_secure_submission_to_hdfs_ha_warns_of_the_ams_token_and_still_submits(
    rm_conf: dict[str, str], client_hdfs_site: str, tmp_path: Path
) -> None:
    """The RM's /conf or the client's own hdfs-site.xml may be the one that says HA."""
    (tmp_path / "core-site.xml").write_bytes(properties_xml({"fs.defaultFS": "hdfs://prod"}))
    if client_hdfs_site:
        key, value = client_hdfs_site.split("=")
        (tmp_path / "hdfs-site.xml").write_bytes(properties_xml({key: value}))
    rm, hdfs, warned = RecordingRM(conf=rm_conf), MemoryHdfs(), list[str]()
    create(secure(rm, hdfs, tmp_path), desired(), Options(warn=warned.append))
    assert rm.created == ["demo"]
    assert len(warned) == 1
    assert "nameservice prod" in warned[0]
    assert "7 days after this submission" in warned[0]


def test_one_namenode_gives_no_warning(tmp_path: Path) -> None:
    rm, warned = RecordingRM(conf={"fs.defaultFS": "hdfs://nn.example:8020"}), list[str]()
    create(secure(rm, MemoryHdfs(), tmp_path), desired(), Options(warn=warned.append))
    assert warned == []
