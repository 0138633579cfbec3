"""The tarn.yarn modules against the lab's real ResourceManager and HDFS (services named mod-*).

create → a second run changes nothing → check mode reports a change without making it → diff
shows it → absent removes the service and its HDFS files. Then the model repository module
(idempotent by HDFS checksum) and an in-place model load under inference load.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tarn.clients.resourcemanager import ResourceManager
from tarn.service import controller_url as service_controller_url
from tarn.service import instances_of
from tarn.stdlib.webhdfs import WebHdfsClient
from tests.support import ROOT
from tests.support.lab import LAB_USER
from tests.support.lab_service import CONNECTION, MODELS, run_module

# Ports and sizes set aside for these tests on the shared lab.
SERVICE: dict[str, Any] = {
    "runtime": "process", "port": 8100, "grpc_port": 8101, "metrics_port": 8102, "am_port": 8898,
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
        assert not again["changed"], again

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
    finally:
        removed = run_module("tarn_deploy", {"service_name": name, "state": "absent"})
    assert removed["changed"]
    assert rm.service(name) is None
    assert hdfs.status(f"/user/{LAB_USER}/.tarn/{name}") is None  # no HDFS artifacts left
    assert not run_module("tarn_deploy", {"service_name": name, "state": "absent"})["changed"]


class Load:
    """Constant inference load on every registered instance (the controller's /instances, as a
    discovery client such as HAProxy sees them); counts successes and failures."""

    def __init__(self, controller: str, token: str) -> None:
        self.controller, self.token = controller, token
        self.ok = self.failed = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _targets(self) -> list[str]:
        reply = requests.get(
            f"{self.controller}/instances",
            params={"format": "text"},
            headers={"X-TARN-Token": self.token},
            timeout=5,
        )
        return [line.strip() for line in reply.text.splitlines() if line.strip()]

    def _run(self) -> None:
        body = {"inputs": [{"name": "INPUT0", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}
        targets: list[str] = []
        refreshed = 0.0
        while not self._stop.is_set():
            if time.monotonic() - refreshed > 0.5:
                targets, refreshed = self._targets() or targets, time.monotonic()
            for target in targets:
                try:
                    reply = requests.post(f"http://{target}/v2/models/add_one/infer", json=body, timeout=10)
                    if reply.status_code == 200:
                        self.ok += 1
                    else:
                        self.failed += 1
                        self.errors.append(f"{target}: {reply.status_code} {reply.text[:100]}")
                except requests.RequestException as exc:
                    self.failed += 1
                    self.errors.append(f"{target}: {exc.__class__.__name__}")

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def run_playbook(playbook: str, extra: dict[str, Any]) -> str:
    work = Path(tempfile.mkdtemp(prefix="tarn-play-"))
    (work / "vars.json").write_text(json.dumps(extra))
    done = subprocess.run(
        ["ansible-playbook", "-i", "localhost,", "-c", "local", "-e", f"@{work / 'vars.json'}",
         str(ROOT / "playbooks" / playbook)],
        capture_output=True, text=True, timeout=1800, check=False, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    return done.stdout


def test_upgrade_under_load(rm: ResourceManager, hdfs: WebHdfsClient, tmp_path: Path) -> None:
    """playbooks/upgrade.yml under constant inference load: a new model version (loaded in place)
    and a new "image" (the process runtime has none: a new environment variable stands in, the
    same rolling YARN service upgrade). Zero failed requests for each."""
    name = f"mod-up-{uuid.uuid4().hex[:6]}"
    remote = f"/user/{LAB_USER}/mod-models-{name}"
    options = {
        k: v for k, v in SERVICE.items() if k not in ("runtime", "token", "min_instances", "max_instances")
    }
    role_vars: dict[str, Any] = {
        "tarn_install": False, "tarn_python_interpreter": sys.executable,
        "tarn_rm_url": CONNECTION["rm_url"], "tarn_webhdfs_url": CONNECTION["webhdfs_url"],
        "tarn_user": LAB_USER,
        "tarn_service_name": name, "tarn_runtime": "process", "tarn_model_repository": f"hdfs://{remote}",
        "tarn_min_instances": 2, "tarn_max_instances": 2, "tarn_token": SERVICE["token"],
        "tarn_models_src": str(MODELS), "tarn_models_dest": remote, "tarn_service_options": options,
    }  # fmt: skip
    try:
        run_playbook("deploy.yml", role_vars)
        service = rm.service(name) or {}
        controller = str(service_controller_url(service))
        new_models = tmp_path / "models"
        subprocess.run(["cp", "-r", str(MODELS), str(new_models)], check=True)
        subprocess.run(
            ["cp", "-r", str(new_models / "add_one" / "1"), str(new_models / "add_one" / "2")], check=True
        )

        with Load(controller, str(SERVICE["token"])) as load:
            time.sleep(3)
            out = run_playbook(
                "upgrade.yml",
                {**role_vars, "tarn_models_src": str(new_models), "tarn_models_load": ["add_one"],
                 "tarn_upgrade_spec": False},
            )  # fmt: skip
            time.sleep(3)
        print(f"model upgrade under load: {load.ok} requests succeeded, {load.failed} failed")
        assert "loaded in place" in out
        assert load.ok > 0
        assert load.failed == 0, load.errors[:10]
        assert hdfs.status(f"{remote}/add_one/2/model.py") is not None  # restarted instances stage it
        for row in instances_of(rm.service(name) or {}):
            served = requests.get(f"http://{row['host']}:8100/v2/models/add_one", timeout=5).json()
            assert "2" in served["versions"], served

        with Load(controller, str(SERVICE["token"])) as load:
            time.sleep(3)
            image = {**role_vars, "tarn_service_options": {**options, "env": {"TARN_IMAGE_STANDIN": "v2"}}}
            run_playbook("upgrade.yml", {**image, "tarn_models_src": ""})
            time.sleep(3)
        print(f"image upgrade under load: {load.ok} requests succeeded, {load.failed} failed")
        assert load.ok > 0
        assert load.failed == 0, load.errors[:10]
        upgraded = rm.service(name) or {}
        assert "TARN_IMAGE_STANDIN" in json.dumps(upgraded)
        assert [r["state"] for r in instances_of(upgraded)] == ["READY", "READY"]
    finally:
        run_module("tarn_deploy", {"service_name": name, "state": "absent"})
        hdfs.delete(remote, recursive=True)
