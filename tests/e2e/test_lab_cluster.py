"""The lab is a real cluster: NodeManagers with GPUs, HDFS, ZooKeeper, the YARN services API."""

from __future__ import annotations

import os
import uuid
from typing import Any

import pytest
from kazoo.client import KazooClient

from lab import lab_client
from tarn.clients.resourcemanager import ResourceManager, node_gpus
from tarn.stdlib.webhdfs import WebHdfsClient
from tests.support.lab import podman_exec, wait_for

WORKERS = {"worker1", "worker2"}
GPUS_PER_WORKER = 2  # inventories/lab: yarn_nodemanager_virtual_gpus


def test_two_nodemanagers_run_and_offer_gpus(rm: ResourceManager) -> None:
    nodes = wait_for(
        lambda: [n for n in rm.nodes() if n["state"] == "RUNNING"] if len(rm.nodes()) >= 2 else None,
        timeout=120,
        what="2 RUNNING NodeManagers",
    )
    assert {n["nodeHostName"] for n in nodes} == WORKERS
    assert [node_gpus(n) for n in nodes] == [GPUS_PER_WORKER] * 2


def test_resourcemanager_is_active(rm: ResourceManager) -> None:
    info = rm.cluster_info()
    assert info["state"] == "STARTED"
    assert info["haState"] == "ACTIVE"


def test_file_round_trips_through_webhdfs(hdfs: WebHdfsClient) -> None:
    path = f"/user/tarn/e2e-{uuid.uuid4().hex}.bin"
    payload = os.urandom(256 * 1024)
    hdfs.write(path, payload)
    try:
        assert hdfs.read_bytes(path) == payload
        status = hdfs.status(path)
        assert status is not None
        assert status.length == len(payload)
        assert status.owner == "tarn"
    finally:
        assert hdfs.delete(path)
    assert hdfs.status(path) is None


def test_zookeeper_answers(zk_hosts: str) -> None:
    zk = KazooClient(hosts=zk_hosts, timeout=10)
    zk.start(timeout=30)
    try:
        assert zk.command(b"ruok") == "imok"
        node = zk.create("/tarn-e2e-", b"hello", ephemeral=True, sequence=True)
        assert zk.get(node)[0] == b"hello"
    finally:
        zk.stop()
        zk.close()


def sleep_service(name: str, count: int) -> dict[str, Any]:
    # a secure cluster's YARN refuses a service without a principal and keytab of its own
    identity = {"kerberos_principal": lab_client.service_kerberos_principal()} if lab_client.secure() else {}
    return {
        "name": name,
        "version": "1.0",
        **identity,
        "components": [
            {
                "name": "sleep",
                "number_of_containers": count,
                "launch_command": "sleep 3600",
                "resource": {"cpus": 1, "memory": "256", "additional": {"yarn.io/gpu": {"value": 1}}},
                "placement_policy": {
                    "constraints": [{"type": "ANTI_AFFINITY", "scope": "NODE", "target_tags": ["sleep"]}]
                },
            }
        ],
    }


def containers(service: dict[str, Any] | None) -> list[dict[str, Any]]:
    if not service:
        return []
    return [c for comp in service.get("components", []) for c in comp.get("containers", [])]


def ready_hosts(rm: ResourceManager, name: str) -> list[str]:
    return sorted(c["hostname"] for c in containers(rm.service(name)) if c["state"] == "READY")


def ended(app: dict[str, Any]) -> dict[str, Any] | None:
    return app if app["state"] in ("FINISHED", "KILLED", "FAILED") else None


@pytest.fixture
def service_name(rm: ResourceManager) -> Any:
    name = f"e2e-sleep-{uuid.uuid4().hex[:8]}"
    yield name
    rm.destroy(name)  # whatever the test did, leave nothing behind


def test_service_spreads_by_anti_affinity_and_flexes(rm: ResourceManager, service_name: str) -> None:
    rm.create_service(sleep_service(service_name, 2))
    hosts = wait_for(
        lambda: ready_hosts(rm, service_name) if len(ready_hosts(rm, service_name)) == 2 else None,
        timeout=180,
        what="2 READY sleep containers",
        every=2,
    )
    assert hosts == sorted(WORKERS), "anti-affinity puts one container on each worker"
    assert {n["nodeHostName"]: node_gpus(n, "usedResource") for n in rm.nodes()} == dict.fromkeys(WORKERS, 1)

    rm.flex(service_name, "sleep", 3)
    service = wait_for(
        lambda: (s := rm.service(service_name)) and s["components"][0]["number_of_containers"] == 3 and s,
        timeout=30,
        what="the flex to 3 to be accepted",
    )
    app_id = service["id"]
    # Two nodes, anti-affinity: the third container must stay a pending request, never placed.
    pending = wait_for(
        lambda: sum(r["numContainers"] for r in rm.app(app_id).get("resourceRequests", [])) or None,
        timeout=60,
        what="a pending container request",
    )
    assert pending == 1
    assert len(containers(rm.service(service_name))) == 2
    # the AM logs (yarnservice-log4j.properties, the hadoop role): its view of the flex is readable
    am_log = "".join(
        podman_exec(
            w, "sh", "-c", f"cat /var/log/hadoop/yarn-containers/{app_id}/*/serviceam.log 2>/dev/null"
        ).stdout
        for w in WORKERS
    )
    assert "ServiceMaster" in am_log, am_log[-2000:]
    assert "Flexing component sleep" in am_log, am_log[-2000:]

    assert rm.destroy(service_name)
    wait_for(lambda: rm.service(service_name) is None, timeout=60, what="the service to be gone")
    final = wait_for(lambda: ended(rm.app(app_id)), timeout=60, what="the service's application to end")
    assert final["state"] == "FINISHED"
    assert final["runningContainers"] in (0, -1)
