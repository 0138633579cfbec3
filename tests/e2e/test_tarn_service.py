"""`tarn submit` on the lab: Triton serves the example models from HDFS and from a local path,
JCEKS secrets reach Triton's environment without their values showing anywhere, and a
restarted instance re-downloads nothing unchanged.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lab import lab_client
from tarn.clients.resourcemanager import ResourceManager
from tarn.clients.triton import Triton
from tarn.stdlib.webhdfs import WebHdfsClient
from tests.support import ROOT
from tests.support.lab import LAB_USER, WORKERS, container_log, podman_exec, wait_for
from tests.support.lab_service import CLUSTER, MODELS, models_on_every_worker, ready_instances, tarn

STORE_PASSWORD = "lab-store-pw"  # noqa: S105 - a throwaway keystore made by this test


def make_jceks(tmp: Path, entries: dict[str, str]) -> Path:
    store = tmp / "secrets.jceks"
    for alias, value in entries.items():
        subprocess.run(
            ["keytool", "-importpass", "-storetype", "jceks", "-keystore", str(store),
             "-storepass", STORE_PASSWORD, "-keypass", STORE_PASSWORD, "-alias", alias, "-noprompt"],
            input=f"{value}\n{value}\n", text=True, check=True, capture_output=True,
        )  # fmt: skip
    return store


def infer_everywhere(rows: list[dict[str, Any]], *expect_env: str) -> None:
    for row in rows:
        for protocol, port in (("http", 8000), ("grpc", 8001)):
            flags = [f"--expect-env={e}" for e in expect_env]
            done = subprocess.run(
                [sys.executable, str(ROOT / "examples" / "client.py"), "--url", f"{row['host']}:{port}",
                 "--protocol", protocol, "--wait", "60", *flags],
                capture_output=True, text=True, timeout=120, check=False,
            )  # fmt: skip
            assert done.returncode == 0, f"{row['host']} {protocol}: {done.stdout}{done.stderr}"


def container_logs(container_id: str) -> str:
    """Everything YARN and the NodeManagers logged, on both workers, for this test's application."""
    # container_[e<epoch>_]<ts>_<app>_<attempt>_<n>: the epoch appears once the RM has restarted
    app = "application_" + "_".join(container_id.removeprefix("container_").split("_")[-4:-2])
    text = []
    for worker in WORKERS:
        logs = f"cat /var/log/hadoop/yarn-containers/{app}/*/* /var/log/hadoop/nodemanager/*.log 2>/dev/null"
        text.append(podman_exec(worker, "sh", "-c", logs).stdout)
    return "\n".join(text)


def restarted(rows: list[dict[str, Any]] | None, pid: str, old_pid: str) -> list[dict[str, Any]] | None:
    return rows if rows and pid and pid != old_pid else None


def triton_pid(worker: str) -> str:
    return podman_exec(worker, "pgrep", "-f", "bin/tritonserver").stdout.strip()


def kill_triton(worker: str) -> None:
    podman_exec(worker, "pkill", "-f", "bin/tritonserver", check=True)


@pytest.fixture(scope="module")
def hdfs_models(hdfs: WebHdfsClient) -> Iterator[str]:
    remote = f"/user/{LAB_USER}/e2e-models-{uuid.uuid4().hex[:8]}"
    hdfs.upload_tree(MODELS, remote)
    yield remote
    hdfs.delete(remote, recursive=True)


def test_models_from_hdfs_with_secrets(
    rm: ResourceManager, hdfs: WebHdfsClient, hdfs_models: str, tmp_path: Path
) -> None:
    token_value = "hf_" + secrets.token_hex(16)
    foo_value = "foo-" + secrets.token_hex(16)
    api_token = "api-" + secrets.token_hex(16)
    store = make_jceks(tmp_path, {"huggingface.token": token_value, "tarn.env.FOO": foo_value})
    remote_store = f"/user/{LAB_USER}/e2e-{uuid.uuid4().hex[:8]}.jceks"
    hdfs.write(remote_store, store.read_bytes(), permission="600")
    name = f"e2e-hdfs-{uuid.uuid4().hex[:6]}"
    submit = [
        "submit", "--service-name", name, "--user", LAB_USER, *lab_client.runtime_args(),
        "--model-repository", f"hdfs://{hdfs_models}", "--secrets", f"hdfs://{remote_store}",
        "--token", api_token, "--min-instances", "2", "--max-instances", "2",
        "--memory-mb", "1024", "--vcores", "1", "--controller-memory-mb", "512", *CLUSTER,
    ]  # fmt: skip
    outputs = []
    try:
        done = tarn(*submit, env={"HADOOP_CREDSTORE_PASSWORD": STORE_PASSWORD})
        outputs.append(done.stdout + done.stderr)
        assert done.returncode == 0, done.stderr
        rows = wait_for(
            lambda: ready_instances(rm, name, 2), timeout=300, what="2 READY Triton instances", every=3
        )
        assert sorted(r["host"] for r in rows) == ["worker1", "worker2"]
        infer_everywhere(rows, "HUGGING_FACE_HUB_TOKEN=set", "FOO=set", "TARN_NOT_SET=unset")
        for row in rows:  # TARN's own Triton client (model commands), and the metrics it exposes
            triton = Triton(str(row["host"]))
            assert triton.ready()
            index = {m["name"]: m["state"] for m in triton.repository_index()}
            assert index == {"add_one": "READY", "linear_onnx": "READY", "env_probe": "READY"}
            assert triton.model_metadata("add_one")["inputs"][0]["name"] == "INPUT0"
            assert "nv_inference_request_success" in triton.metrics()

        for command in ("status", "instances"):
            shown = tarn(command, "--service-name", name, "--user", LAB_USER, *CLUSTER)
            assert shown.returncode == 0, shown.stderr
            outputs.append(shown.stdout + shown.stderr)
        outputs.append(json.dumps(rm.service(name)))  # the service JSON the RM serves
        outputs.append(tarn(*submit, "--dry-run").stdout)
        outputs.append(container_logs(rows[0]["container"]))
        everything = "\n".join(outputs)
        for value in (token_value, foo_value, api_token, STORE_PASSWORD):
            assert value not in everything
        assert "Started GRPCInferenceService" in everything  # the container logs were really read
        staged = container_log(
            "tarn-lab-worker2", next(r for r in rows if r["host"] == "worker2")["container"]
        )
        assert "downloaded" in staged
        assert "[verified: hdfs]" in staged  # lengths, and the DataNode's checksum-verified read

        # A restarted instance finds every file in the node's cache: nothing is downloaded again.
        # YARN relaunches it in its container or starts a new one: either way a new tritonserver.
        before = triton_pid("tarn-lab-worker1")
        kill_triton("tarn-lab-worker1")
        rows = wait_for(
            lambda: restarted(ready_instances(rm, name, 2), triton_pid("tarn-lab-worker1"), before),
            timeout=300,
            what="the killed instance to be READY again with a new tritonserver",
            every=3,
        )
        again = next(r for r in rows if r["host"] == "worker1")
        log = container_log("tarn-lab-worker1", again["container"])
        assert " 0 downloaded" in log, log[-2000:]
        assert "reused from the node cache" in log
        infer_everywhere([again], "FOO=set")
    finally:
        tarn("destroy", "--service-name", name, "--user", LAB_USER, *CLUSTER)
        hdfs.delete(remote_store)


def test_models_from_a_local_path(rm: ResourceManager) -> None:
    # Stands in for the HDFS NFS gateway mounted on every NodeManager at the same path: files under
    # its mount point (this kernel has no NFS client), which the NodeManagers allow Docker to mount.
    local = "/mnt/hdfs/tarn-models"
    models_on_every_worker(local)
    name = f"e2e-local-{uuid.uuid4().hex[:6]}"
    try:
        done = tarn(
            "submit", "--service-name", name, "--user", LAB_USER, *lab_client.runtime_args(),
            "--model-repository", local, "--min-instances", "2", "--max-instances", "2",
            "--memory-mb", "1024", "--vcores", "1", "--controller-memory-mb", "512", *CLUSTER,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        rows = wait_for(
            lambda: ready_instances(rm, name, 2), timeout=300, what="2 READY Triton instances", every=3
        )
        infer_everywhere(rows)
        log = container_log("tarn-lab-worker1", next(r for r in rows if r["host"] == "worker1")["container"])
        assert "staged" not in log  # served in place, nothing copied
    finally:
        tarn("destroy", "--service-name", name, "--user", LAB_USER, *CLUSTER)
