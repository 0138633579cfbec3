"""tarn_deploy with the Docker runtime: the spec is checked against the NodeManagers'
container-executor.cfg (option container_executor_cfg) before anything is uploaded or submitted;
a refusal names the module option and leaves the fake RM and HDFS untouched, also on an upgrade."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.tarn.yarn.plugins.modules import tarn_deploy

from tarn import service as tarn_service
from tarn.stdlib.config import parse_config
from tests.support.roles import container_executor_cfg

from ..conftest import FakeHdfs, FakeRM, running

IMAGE = "nvcr.io/nvidia/tritonserver:24.08-py3"
BASE: dict[str, Any] = {
    "service_name": "mod-docker", "user": "tarn", "rm_url": ["http://rm:8088"], "webhdfs_url": "http://nn:9870",
    "runtime": "docker", "image": IMAGE, "model_repository": "hdfs:///user/tarn/models",
    "model_cache_dir": "/var/lib/tarn/model-cache", "min_instances": 1, "max_instances": 2,
}  # fmt: skip


@pytest.fixture
def cfg(tmp_path: Path) -> str:
    path = tmp_path / "container-executor.cfg"
    path.write_text(
        container_executor_cfg(yarn_nodemanager_runtime="docker", groups={"hdfs_nfs_mount": ["worker1"]})
    )
    return str(path)


def test_an_allowed_spec_is_created(run_module, cfg: str) -> None:
    rm, hdfs = FakeRM(), FakeHdfs()
    result = run_module(tarn_deploy, {**BASE, "container_executor_cfg": cfg}, rm, hdfs)
    assert not result.get("failed"), result.get("msg")
    assert [call[0] for call in rm.calls] == ["create"]
    assert cfg not in str(rm.services)  # the submitter's file stays out of the service


REFUSED: list[tuple[dict[str, Any], str]] = [
    ({"image": "registry.lab:5000/tarn/triton:1"}, "image: 'registry.lab:5000/tarn/triton:1'"),
    ({"docker_network": "overlay"}, "docker_network: overlay is not in docker.allowed.networks"),
    ({"docker_mounts": ["/data:/data:rw"]}, "docker_mounts: the read-write mount of /data"),
    ({"model_cache_dir": "/srv/cache"}, "model_cache_dir: the read-write mount of /srv/cache"),
    ({"docker_privileged": True}, "docker_privileged: docker.privileged-containers.enabled is not true"),
    (
        {"container_executor_cfg": "/nonexistent/container-executor.cfg"},
        "container_executor_cfg: /nonexistent",
    ),
]


@pytest.mark.parametrize("check_mode", [False, True], ids=["run", "check"])
@pytest.mark.parametrize(("extra", "message"), REFUSED, ids=[next(iter(r[0])) for r in REFUSED])
def test_a_refused_spec_fails_naming_the_option_and_nothing_is_submitted(
    run_module, cfg: str, extra: dict[str, Any], message: str, check_mode: bool
) -> None:
    rm, hdfs = FakeRM(), FakeHdfs()
    result = run_module(
        tarn_deploy, {**BASE, "container_executor_cfg": cfg, **extra}, rm, hdfs, check_mode=check_mode
    )
    assert result["failed"]
    assert result["msg"].startswith(message), result["msg"]
    assert rm.calls == []
    assert hdfs.files == {}


def test_docker_without_a_cfg_fails_naming_the_option(run_module, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TARN_CONTAINER_EXECUTOR_CFG", raising=False)
    rm, hdfs = FakeRM(), FakeHdfs()
    result = run_module(tarn_deploy, BASE, rm, hdfs)  # the fake cluster has no configuration directory
    assert result["failed"]
    assert result["msg"].startswith("container_executor_cfg: no Hadoop client configuration to look in")
    assert (rm.calls, hdfs.files) == ([], {})


def test_the_cfg_from_the_environment_is_used(run_module, cfg: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TARN_CONTAINER_EXECUTOR_CFG", cfg)
    result = run_module(tarn_deploy, {**BASE, "docker_network": "overlay"}, FakeRM(), FakeHdfs())
    assert result["msg"].startswith("docker_network: overlay")


def test_an_upgrade_to_a_refused_spec_changes_nothing(run_module, cfg: str) -> None:
    argv = ["--service-name", "mod-docker", "--user", "tarn", "--image", IMAGE,
            "--model-repository", "hdfs:///user/tarn/models",
            "--model-cache-dir", "/var/lib/tarn/model-cache", "--min-instances", "1", "--max-instances", "2",
            "--container-executor-cfg", cfg]  # fmt: skip
    desired = tarn_service.desired_service(parse_config(argv, {}), "tarn", {}, FakeRM.configured_urls)
    rm, hdfs = FakeRM(copy.deepcopy(running(desired.spec))), FakeHdfs()
    result = run_module(
        tarn_deploy,
        {**BASE, "container_executor_cfg": cfg, "image": "registry.lab:5000/tarn/triton:2"},
        rm,
        hdfs,
    )
    assert result["failed"]
    assert result["msg"].startswith("image: ")
    assert rm.calls == []
    assert hdfs.files == {}
