"""The tarn.yarn modules against the lab's real ResourceManager and HDFS (services named mod-*).

create → a second run changes nothing → check mode reports a change without making it → diff
shows it → stopped → `tarn start` (a new application, its controller acting) → absent removes the
service and its HDFS files. Then the model repository module
(idempotent by HDFS checksum). playbooks/deploy.yml and upgrade.yml under load: test_chaos.py.
"""

from __future__ import annotations

import difflib
import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lab import lab_client
from tarn.clients.resourcemanager import ResourceManager
from tarn.stdlib.webhdfs import WebHdfsClient
from tests.support.lab import LAB_USER, wait_for
from tests.support.lab_service import CLUSTER, MODELS, run_module, tarn

# Ports and sizes set aside for these tests on the shared lab.
SERVICE: dict[str, Any] = {
    **lab_client.runtime_options(), "port": 8100, "grpc_port": 8101, "metrics_port": 8102, "am_port": 8898,
    "memory_mb": 512, "vcores": 1, "controller_memory_mb": 512, "min_instances": 1,
    "max_instances": 2, "token": "mod-e2e-token",
}  # fmt: skip


@pytest.fixture(scope="module")
def models_on_hdfs(hdfs: WebHdfsClient) -> Iterator[str]:
    remote = f"/user/{LAB_USER}/mod-models-{uuid.uuid4().hex[:6]}"
    result = run_module("tarn_model_repository", {"src": str(MODELS), "dest": remote})
    assert result["changed"]
    assert result["uploaded"] == len([p for p in MODELS.rglob("*") if p.is_file()])
    yield remote
    hdfs.delete(remote, recursive=True)


def test_repository_upload_is_idempotent(hdfs: WebHdfsClient, models_on_hdfs: str, tmp_path: Path) -> None:
    again = run_module("tarn_model_repository", {"src": str(MODELS), "dest": models_on_hdfs})
    assert not again["changed"], again
    assert {f["action"] for f in again["files"]} == {"unchanged"}
    assert all("HDFS checksum" in f["reason"] for f in again["files"])
    # A same-size edit is found by the checksum, reported in check mode and left alone.
    copy = tmp_path / "repo"
    subprocess.run(["cp", "-r", str(MODELS), str(copy)], check=True)
    target = copy / "add_one" / "config.pbtxt"
    text = target.read_text()
    target.write_text(text.replace("add_one", "add_onf", 1))
    checked = run_module(
        "tarn_model_repository", {"src": str(copy), "dest": models_on_hdfs}, "--check", "--diff"
    )
    changed = [f for f in checked["files"] if f["action"] != "unchanged"]
    assert [f["path"] for f in changed] == ["add_one/config.pbtxt"], checked
    assert changed[0]["reason"] == "content differs (HDFS checksum)"
    assert "add_one/config.pbtxt" in checked["diff"]["after"]
    assert hdfs.read_bytes(f"{models_on_hdfs}/add_one/config.pbtxt").decode() == text  # untouched


def what_differs(args: dict[str, Any]) -> str:
    """The check-mode diff of a rerun, for a failed idempotence assertion: the parts of the spec that
    differ from what the RM reports. A checkout edited between the two runs fails here too: the
    zipapps' digests (the code) are part of the spec's version."""
    checked = run_module("tarn_deploy", args, "--check", "--diff")
    before, after = (
        json.dumps(checked.get("diff", {}).get(k), indent=1, sort_keys=True) for k in ("before", "after")
    )
    return "\n".join(
        difflib.unified_diff(before.splitlines(), after.splitlines(), "RM", "desired", lineterm="")
    )


def controller_lists_ready(name: str) -> bool:
    info = run_module("tarn_info", {"service_name": name, "token": SERVICE["token"]})
    return any(i.get("state") == "READY" for i in info.get("controller_instances", []))


def test_deploy_lifecycle(rm: ResourceManager, hdfs: WebHdfsClient, models_on_hdfs: str) -> None:
    name = f"mod-e2e-{uuid.uuid4().hex[:6]}"
    args = {"service_name": name, "model_repository": f"hdfs://{models_on_hdfs}", **SERVICE}
    try:
        created = run_module("tarn_deploy", args)
        assert created["actions"] == ["create"], created
        assert [i["state"] for i in created["instances"]] == ["READY"]
        assert created["controller_url"].endswith(":8898")
        assert SERVICE["token"] not in json.dumps(created)

        again = run_module("tarn_deploy", args)
        assert not again["changed"], (again, what_differs(args))

        # check mode: the change is reported (with its diff) and not made
        changed = {**args, "env": {"TARN_IMAGE_STANDIN": "v2"}}
        checked = run_module("tarn_deploy", changed, "--check", "--diff")
        assert checked["actions"] == ["upgrade triton"], checked
        before, after = checked["diff"]["before"], checked["diff"]["after"]
        assert "TARN_IMAGE_STANDIN" not in before["components"]["triton"]["configuration"]["env"]
        assert after["components"]["triton"]["configuration"]["env"]["TARN_IMAGE_STANDIN"] == "v2"
        service = rm.service(name) or {}
        assert "TARN_IMAGE_STANDIN" not in json.dumps(service)
        assert service["version"] == created["version"]

        # a bounds change the controller can live with changes nothing; one it cannot, flexes
        flexed = run_module("tarn_deploy", {**args, "min_instances": 2}, "--check")
        assert "flex triton to 2" in flexed["actions"]

        info = run_module("tarn_info", {"service_name": name, "token": SERVICE["token"]})
        assert info["exists"]
        assert info["state"] in ("STABLE", "STARTED")
        assert SERVICE["token"] not in json.dumps(info)

        stopped = run_module("tarn_deploy", {"service_name": name, "state": "stopped"})
        assert stopped["changed"]
        assert not run_module("tarn_deploy", {"service_name": name, "state": "stopped"})["changed"]

        # `tarn start`: a new YARN application from the kept definition, whose controller acts (a
        # controller never acts on another application's service) and lists the instance READY
        first = str(info["service"]["id"])
        started = tarn("start", "--service-name", name, "--user", LAB_USER, *CLUSTER)
        assert started.returncode == 0, started.stderr
        twice = tarn("start", "--service-name", name, "--user", LAB_USER, *CLUSTER)
        assert "nothing to start" in twice.stdout, twice.stdout
        wait_for(lambda: controller_lists_ready(name), 180, "the started service's controller", every=3)
        assert (rm.service(name) or {}).get("id") not in (None, first)
    finally:
        removed = run_module("tarn_deploy", {"service_name": name, "state": "absent"})
    assert removed["changed"]
    assert rm.service(name) is None
    assert hdfs.status(f"/user/{LAB_USER}/.tarn/{name}") is None  # no HDFS artifacts left
    assert not run_module("tarn_deploy", {"service_name": name, "state": "absent"})["changed"]
