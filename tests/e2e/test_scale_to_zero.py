"""Scale to zero on the lab (issue 15), through the edge's HAProxy and its activator.

A service with ``--min-instances 0 --scale-to-zero-after 10`` starts with no instance. Each
repetition sends a burst of 50 concurrent inferences while it is at zero: the activator holds
them, its demand report wakes the controller, YARN starts an instance, and every request must be
answered. Then the service is left idle until the controller drains it back to zero, and the
NodeManagers' yarn.io/gpu is free again: another YARN application takes every free GPU. Last,
a burst through Knox at zero (its TRITON URL manager falls back to the activator's URL).

Printed: per repetition the first answer's wait and its parts, from the clocks the parts keep
(the lab's containers share this machine's clock): the controller's decision (its scaling
history), YARN's allocation and launch (the container's launch time), the launcher (its log:
staging, and waiting for ports an instance stopped on the node still holds), Triton ready and
registered (the znode's creation), and the balancer (first answer).
"""

from __future__ import annotations

import json
import os
import re
import statistics
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests
import tritonclient.http as triton_http
from kazoo.client import KazooClient

from lab import lab_client
from tarn.clients.resourcemanager import ResourceManager, node_gpus
from tarn.controller.memory import memory_path
from tarn.errors import ClusterError
from tarn.service.wait import ready
from tarn.stdlib.webhdfs import WebHdfsClient
from tests.support import ROOT
from tests.support.lab import LAB_USER, container_log, wait_for, znodes
from tests.support.lab_edge import CERT, FRONTEND, PASSWORDS, ZK_PATH
from tests.support.lab_service import CLUSTER, tarn
from tests.support.load import EXPECTED, INPUT

SERVICE = "tarn-e2e-zero"
TAKER = "tarn-e2e-gpu-taker"
MODELS_ON_HDFS = f"/user/{LAB_USER}/e2e-zero-models"
GRACE_S = 10
REPETITIONS = int(os.environ.get("TARN_ZERO_REPETITIONS", "3"))  # the median of 3; more by hand
BURST = 50
KNOX_BURST = 20
# The controller answers Knox's /authorize where the lab's tarn-demo topology asks (port 8888, the
# lab's token): that topology reads /services/triton like HAProxy, and its TRITON URL manager falls
# back to the edge's activator (activator_url in inventories/lab). tarn-demo itself must be gone.
AM_PORT = 8888
KNOX_TOPOLOGY = "tarn-demo"
LAB_TOKEN = Path(os.environ.get("TARN_BUILD", ROOT / "build")) / "lab-secrets" / "tarn-api-token"


@dataclass
class Zero:
    rm: ResourceManager
    zk: KazooClient
    token: str


def triton_containers(rm: ResourceManager) -> list[dict[str, Any]]:
    service = rm.service(SERVICE) or {}
    component: dict[str, Any] = next((c for c in service.get("components", []) if c["name"] == "triton"), {})
    return list(component.get("containers") or [])


def target(rm: ResourceManager) -> int:
    service = rm.service(SERVICE) or {}
    return next(
        (int(c["number_of_containers"]) for c in service.get("components", []) if c["name"] == "triton"), -1
    )


def at_zero(rm: ResourceManager) -> bool:
    """No Triton instance, and the controller READY (a service long at zero, as clients meet it)."""
    service = rm.service(SERVICE)
    return service is not None and ready(0)(service) and target(rm) == 0 and not triton_containers(rm)


def used_gpus(rm: ResourceManager) -> int:
    return sum(node_gpus(n, "usedResource") for n in rm.nodes() if n.get("state") == "RUNNING")


def free_gpus(rm: ResourceManager) -> int:
    return sum(node_gpus(n) - node_gpus(n, "usedResource") for n in rm.nodes() if n.get("state") == "RUNNING")


def other_services(zk: KazooClient) -> set[str]:
    return {json.loads(data).get("service") for data, _stat in znodes(zk, ZK_PATH).values()} - {SERVICE}


@pytest.fixture(scope="module")
def zero(rm: ResourceManager, hdfs: WebHdfsClient, zk_hosts: str) -> Iterator[Zero]:
    token = LAB_TOKEN.read_text().strip()
    tarn("destroy", "--service-name", SERVICE, "--user", LAB_USER, *CLUSTER, timeout=600)
    hdfs.upload_tree(ROOT / "examples" / "model_repository", MODELS_ON_HDFS)
    submitted = tarn(
        "submit", "--service-name", SERVICE, "--user", LAB_USER, *lab_client.runtime_args(),
        "--model-repository", f"hdfs://{MODELS_ON_HDFS}", "--port", "8500", "--grpc-port", "8501",
        "--metrics-port", "8502", "--am-port", str(AM_PORT), "--min-instances", "0", "--max-instances", "1",
        "--scale-to-zero-after", str(GRACE_S), "--cooldown", "3600000", "--tick-seconds", "1",
        "--drain-timeout", "5", "--gpus-per-instance", "1", "--memory-mb", "768", "--vcores", "1",
        "--controller-memory-mb", "512", "--zk-ensemble", zk_hosts, "--zk-path", ZK_PATH, *CLUSTER,
        token=token, timeout=600,
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    zk = KazooClient(hosts=zk_hosts)
    zk.start(timeout=15)
    try:
        deadline = time.monotonic() + 30  # another service still being destroyed withdraws its znodes last
        while (others := other_services(zk)) and time.monotonic() < deadline:
            time.sleep(1)
        assert not others, (
            f"{', '.join(sorted(others))} also serve(s) through the edge's HAProxy ({ZK_PATH}), so a burst "
            "would not need this service: destroy them first (tarn destroy --service-name NAME), as in CI"
        )
        yield Zero(rm, zk, token)
    finally:
        zk.stop()
        zk.close()
        rm.destroy(TAKER)
        done = tarn("destroy", "--service-name", SERVICE, "--user", LAB_USER, *CLUSTER, timeout=600)
        assert done.returncode == 0, done.stderr
        hdfs.delete(MODELS_ON_HDFS, recursive=True)


def infer() -> tuple[float, str]:
    """One add_one inference through HAProxy: when it was answered (wall clock), or the error."""
    client = triton_http.InferenceServerClient(FRONTEND, network_timeout=60, connection_timeout=60)
    try:
        tensor = triton_http.InferInput("INPUT0", list(INPUT.shape), "FP32")
        tensor.set_data_from_numpy(INPUT)
        result = client.infer("add_one", [tensor]).as_numpy("OUTPUT0")
        if result is None or not np.array_equal(result, EXPECTED):
            return time.time(), f"wrong answer {result}"
        return time.time(), ""
    except Exception as exc:  # counted as a failure, never retried
        return time.time(), f"{type(exc).__name__}: {exc}"
    finally:
        client.close()


LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) tarn-launcher", re.MULTILINE)


def launcher_times(container_id: str) -> tuple[float, float] | None:
    """The launcher's first log line and its start of tritonserver (wall clock), from its log."""
    for worker in ("tarn-lab-worker1", "tarn-lab-worker2"):
        text = container_log(worker, container_id)
        stamps = LOG_TIME.findall(text)
        started = re.search(r"^(\S+ \S+) tarn-launcher INFO run ", text, re.MULTILINE)
        if stamps and started:
            return _stamp(stamps[0]), _stamp(started.group(1))
    return None


def _stamp(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=timezone.utc).timestamp()


def woke_at(zk: KazooClient) -> float:
    """The latest scale-up from zero in the controller's remembered history (wall clock)."""
    data, _stat = zk.get(memory_path(ZK_PATH, SERVICE))
    events = [e for e in json.loads(data)["history"] if e["target_from"] == 0 and e["direction"] == "up"]
    return float(max(e["at"] for e in events))


def registered_at(zk: KazooClient) -> float:
    records = {name: (json.loads(data), stat) for name, (data, stat) in znodes(zk, ZK_PATH).items()}
    return float(
        max(stat.ctime / 1000 for record, stat in records.values() if record.get("service") == SERVICE)
    )


# Both tests alone (conftest): the first has another application take every free GPU, and each
# wakes the service from zero into whatever room the lab has. Beside the cluster stream's services
# (CI12: test_model_cache's and test_tarn_service's two instances each) neither found room: the
# taker waited 180 s for containers, the wake through Knox ran out of the activator's hold (504),
# and those services in turn waited 300 s for their own instances behind the taker.
@pytest.mark.alone
def test_from_zero_bursts_are_answered_and_idle_gives_the_gpus_back(zero: Zero) -> None:
    rm, zk = zero.rm, zero.zk
    wait_for(lambda: at_zero(rm), 120, "the new service at zero instances")
    baseline = used_gpus(rm)
    rows = []
    for repetition in range(1, REPETITIONS + 1):
        sent = time.time()
        with ThreadPoolExecutor(BURST) as pool:
            answers = list(pool.map(lambda number: infer(), range(BURST)))
        failed = [error for _when, error in answers if error]
        assert failed == [], failed[:3]
        first = min(when for when, _error in answers)
        containers = triton_containers(rm)
        assert len(containers) == 1
        launched = containers[0]["launch_time"] / 1000
        launcher = launcher_times(containers[0]["id"])
        decided, ready = woke_at(zk), registered_at(zk)
        rows.append(
            {
                "first answer": first - sent,
                "last answer": max(when for when, _error in answers) - sent,
                "decision": decided - sent,
                "YARN allocation and launch": launched - decided,
                "launcher (staging, ports free)": (launcher[1] - launcher[0]) if launcher else float("nan"),
                "Triton ready, registered": ready - (launcher[1] if launcher else launched),
                "in the balancer": first - ready,
            }
        )
        assert used_gpus(rm) == baseline + 1  # the instance holds its GPU
        began_idle = time.time()
        wait_for(
            lambda: at_zero(rm), GRACE_S + 60, f"repetition {repetition}: back to zero when idle", every=0.5
        )
        idle_to_zero = time.time() - began_idle
        wait_for(lambda: used_gpus(rm) == baseline, 60, "the GPU free in the RM's node report", every=0.2)
        gpu_back = time.time() - began_idle
        print(f"\n[zero] repetition {repetition}: " + ", ".join(f"{k} {v:.2f} s" for k, v in rows[-1].items())
              + f"; idle -> zero {idle_to_zero:.1f} s, GPU free at the RM {gpu_back:.1f} s")  # fmt: skip

    waits = [row["first answer"] for row in rows]
    parts = {
        k: statistics.median(row[k] for row in rows)
        for k in rows[0]
        if k not in ("first answer", "last answer")
    }
    largest = max(parts, key=lambda k: parts[k])
    print(
        f"[zero] first answer from zero over {REPETITIONS} bursts of {BURST}: "
        f"p50 {statistics.median(waits):.2f} s, "
        f"max {max(waits):.2f} s; median parts: " + ", ".join(f"{k} {v:.2f} s" for k, v in parts.items())
        + f"; largest: {largest}"
    )  # fmt: skip
    assert statistics.median(waits) <= 30  # the target is 15 s; the lab's two cores vary

    # The GPU the idle service gave back can go to anyone: an application asks for every free one,
    # a node's worth per container (one vcore each: the lab's nodes have 8, its GPUs 2).
    nodes = [n for n in rm.nodes() if n.get("state") == "RUNNING"]
    free = free_gpus(rm)
    per_container = max(node_gpus(n) for n in nodes)
    containers_wanted = free // per_container
    assert containers_wanted * per_container == free, (
        f"{free} free GPUs are not whole nodes of {per_container}"
    )
    rm.destroy(TAKER)
    identity = {"kerberos_principal": lab_client.service_kerberos_principal()} if lab_client.secure() else {}
    rm.create_service(
        {
            "name": TAKER,
            "version": "1",
            **identity,
            "components": [
                {
                    "name": "sleeper",
                    "number_of_containers": containers_wanted,
                    "launch_command": "sleep 600",
                    "resource": {
                        "cpus": 1,
                        "memory": "128",
                        "additional": {"yarn.io/gpu": {"value": per_container}},
                    },
                }
            ],
        }
    )

    def all_running() -> bool:
        try:
            service = rm.service(TAKER) or {}
        except ClusterError:
            return False
        containers = [c for comp in service.get("components", []) for c in comp.get("containers") or []]
        return len(containers) == containers_wanted and all(
            c.get("state") in ("RUNNING_BUT_UNREADY", "READY") for c in containers
        )

    wait_for(all_running, 180, f"another application running on all {free} free GPUs", every=1)
    print(f"[zero] another application took all {free} free GPUs, the one given back included")
    rm.destroy(TAKER)


@pytest.mark.alone
def test_knox_holds_requests_at_zero_too(zero: Zero) -> None:
    """Knox's TRITON URL manager falls back to the topology's URL, the edge's activator, while
    ZooKeeper lists no instance: a burst through Knox at zero is held and answered."""
    rm = zero.rm
    wait_for(lambda: at_zero(rm), GRACE_S + 60, "the service at zero", every=0.5)
    body = {"inputs": [{"name": "INPUT0", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}
    url = f"https://127.0.0.1:18443/gateway/{KNOX_TOPOLOGY}/triton/v2/models/add_one/infer"

    def infer_through_knox(number: int) -> tuple[int, list[float], float]:
        reply = requests.post(
            url, json=body, auth=("alice", PASSWORDS["alice"]), verify=str(CERT), timeout=90
        )
        data = reply.json()["outputs"][0]["data"] if reply.status_code == 200 else []
        return reply.status_code, data, time.monotonic()

    sent = time.monotonic()
    with ThreadPoolExecutor(KNOX_BURST) as pool:
        answers = list(pool.map(infer_through_knox, range(KNOX_BURST)))
    assert [a[0] for a in answers] == [200] * KNOX_BURST, [a[0] for a in answers]
    assert all(a[1] == [2, 3, 4, 5] for a in answers)
    first = min(a[2] for a in answers) - sent
    print(
        f"\n[zero] through Knox from zero: {KNOX_BURST} of {KNOX_BURST} answered, "
        f"the first after {first:.1f} s"
    )
