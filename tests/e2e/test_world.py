"""A tensor-parallel instance on the lab: a CPU world of 2 Triton ranks under Open MPI's mpirun.

The world becomes READY only with both ranks running and infers through rank 0's ports; killing
rank 1 stops the whole world, YARN starts the instance again, and no process of the old world is
left on the node, nor once the service is destroyed. A world larger than any node's GPUs is
refused before anything is submitted.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from typing import Any

from lab import lab_client
from tarn.clients.resourcemanager import ResourceManager
from tarn.stdlib.webhdfs import WebHdfsClient
from tests.support import ROOT
from tests.support.lab import LAB_USER, podman_exec, wait_for
from tests.support.lab_service import CLUSTER, MODELS, ready_instances, tarn

PORTS = ["--port", "8100", "--grpc-port", "8101", "--metrics-port", "8102"]  # beside the lab's own service
# Staged from HDFS into the node cache: a Docker lab's containers mount no other local path.
WORLD_MODELS = f"/user/{LAB_USER}/e2e-world-models"
CACHE = "/var/lib/tarn/model-cache"


def on(worker: str, *command: str) -> str:
    return podman_exec(worker, *command).stdout


def world_pids(worker: str, container_id: str) -> dict[str, set[int]]:
    """Every process of a container's world on the node, by kind: the shm prefix names it."""
    tag = f"tarn_{container_id}_r"
    kinds: dict[str, set[int]] = {"mpirun": set(), "wrapper": set(), "tritonserver": set(), "stub": set()}
    for line in on(worker, "pgrep", "-af", tag).splitlines():
        pid, command = line.split(" ", 1)
        argv0 = command.split(" ", 1)[0]
        if argv0.endswith("mpirun"):
            kind = "mpirun"
        elif argv0.endswith("bin/tritonserver") and " rank " not in command:
            kind = "tritonserver"
        elif "triton_python_backend_stub" in argv0:
            kind = "stub"
        else:
            kind = "wrapper"
        kinds[kind].add(int(pid))
    return kinds


def rank_pid(worker: str, container_id: str, rank: int) -> int | None:
    found = on(worker, "pgrep", "-f", rf"^\S*bin/tritonserver .*tarn_{container_id}_r{rank}_").split()
    return int(found[0]) if found else None


def infers(host: str) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "client.py"), "--url", f"{host}:8100", "--wait", "60"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"{host}: {done.stdout}{done.stderr}"


def one_ready(rm: ResourceManager, name: str) -> dict[str, Any] | None:
    rows = ready_instances(rm, name, 1)
    return rows[0] if rows else None


def test_a_two_rank_cpu_world_serves_and_stops_whole_when_a_rank_dies(
    rm: ResourceManager, hdfs: WebHdfsClient
) -> None:
    hdfs.upload_tree(MODELS, WORLD_MODELS)
    name = f"e2e-world-{uuid.uuid4().hex[:6]}"
    try:
        done = tarn(
            "submit", "--service-name", name, "--user", LAB_USER, *lab_client.runtime_args(),
            "--model-repository", f"hdfs://{WORLD_MODELS}", "--model-cache-dir", CACHE,
            "--tp", "2", "--gpus-per-instance", "0", *PORTS,
            "--min-instances", "1", "--max-instances", "1", "--memory-mb", "1536", "--vcores", "1",
            "--controller-memory-mb", "512", *CLUSTER,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        row = wait_for(lambda: one_ready(rm, name), timeout=300, what="the 2-rank instance READY", every=2)
        host, container = str(row["host"]), str(row["container"])
        pids = world_pids(host, container)
        print(f"world of {container} on {host}: { {k: sorted(v) for k, v in pids.items()} }")
        # READY means both ranks run: rank 0 starts Triton only once rank 1 is up.
        assert len(pids["mpirun"]) == 1
        assert len(pids["tritonserver"]) == 2, pids
        assert rank_pid(host, container, 0)
        assert rank_pid(host, container, 1)
        infers(host)

        killed_at = time.monotonic()
        on(host, "kill", "-9", str(rank_pid(host, container, 1)))
        # The whole world goes: every process of the old one ends (mpirun stops rank 0, the
        # wrappers take their Triton and its Python stubs along).
        old = set().union(*pids.values())

        def old_world_gone() -> bool:
            alive = {int(p) for p in on(host, "sh", "-c", "ls /proc | grep -E '^[0-9]+$'").split()}
            return not (old & alive)

        wait_for(old_world_gone, timeout=60, what="every process of the old world to end", every=0.5)
        gone_after = time.monotonic() - killed_at

        def restarted() -> dict[str, Any] | None:
            again = one_ready(rm, name)
            if again is None:
                return None
            fresh = world_pids(str(again["host"]), str(again["container"]))
            return again if len(fresh["tritonserver"]) == 2 and not (old & fresh["tritonserver"]) else None

        again = wait_for(restarted, timeout=300, what="YARN to start the instance again", every=2)
        ready_after = time.monotonic() - killed_at
        infers(str(again["host"]))
        for worker in ("worker1", "worker2"):  # no orphan of the old world anywhere
            stray = world_pids(worker, container) if str(again["container"]) != container else {}
            assert not any(stray.values()), stray
        print(f"rank 1 killed: old world gone in {gone_after:.1f} s, READY again in {ready_after:.1f} s")

        # Stopped by YARN (SIGTERM, then SIGKILL to mpirun's group): still nothing left behind.
        last_host, last = str(again["host"]), str(again["container"])
        stopped = tarn("destroy", "--service-name", name, "--user", LAB_USER, *CLUSTER)
        assert stopped.returncode == 0, stopped.stderr
        wait_for(
            lambda: not any(world_pids(last_host, last).values()),
            timeout=60, what="no process of the world left once the service is destroyed", every=1,
        )  # fmt: skip
    finally:
        tarn("destroy", "--service-name", name, "--user", LAB_USER, *CLUSTER)
        hdfs.delete(WORLD_MODELS, recursive=True)


def test_a_world_larger_than_every_node_is_refused_before_submit(
    rm: ResourceManager, hdfs: WebHdfsClient
) -> None:
    name = f"e2e-bigworld-{uuid.uuid4().hex[:6]}"
    done = tarn(
        "submit", "--service-name", name, "--user", LAB_USER, *lab_client.runtime_args(),
        "--model-repository", f"hdfs://{WORLD_MODELS}", "--tp", "2", "--pp", "2", *PORTS, *CLUSTER,
    )  # fmt: skip
    assert done.returncode != 0
    assert "--tp 2 --pp 2: an instance needs 4 yarn.io/gpu on one node" in done.stderr, done.stderr
    assert "offer at most 2" in done.stderr  # the lab's NodeManagers have 2 (virtual) GPUs each
    assert rm.service(name) is None
    assert hdfs.status(f"/user/{LAB_USER}/.tarn/{name}") is None  # nothing uploaded
