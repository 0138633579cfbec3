"""A service outlives its delegation tokens (issue 33): on the secure lab, whose HDFS and RM tokens
live minutes (2 between renewals, 5 at most: inventories/lab), a service submitted when the e2e suite
starts is used when it ends, at least two maximum lifetimes later.

Its AM then launches instances again (scaled from zero: an instance that stages a new model version
from HDFS), before and after the AM is killed, and its controller writes Ranger's audit to HDFS.
YARN's service AM kept the submission's HDFS token and failed every launch once the RM had
replaced it, a new attempt too (docs/kerberos.md), until TARN gave the AM a configuration that
leaves that token unused (tarn.service.am_conf). The test prints when the RM renewed each of the
service's tokens and when it obtained new ones.

``test_a_long_lived_service_is_submitted`` runs first in the suite (marker ``suite_start``), the rest
just before the chaos suite; alone, the file waits out the two lifetimes (about 11 minutes).
"""

from __future__ import annotations

import re
import secrets
import time
from pathlib import Path
from typing import Any

import pytest
import requests

from lab import lab_client
from tarn.clients.resourcemanager import ResourceManager
from tarn.service.wait import containers
from tarn.spec import TRITON, container_host, triton_count
from tarn.stdlib.hadoop_site import parse_properties
from tarn.stdlib.webhdfs import WebHdfsClient
from tests.support import ROOT
from tests.support.lab import LAB_MASTER, LAB_USER, podman_exec, wait_for
from tests.support.lab_edge import ADMIN_NODE, ADMIN_URL, fresh_lab_admin, register_with_the_role
from tests.support.lab_service import CLUSTER, Service, tarn
from tests.support.ranger_admin import policy
from tests.support.ranger_audit import audit_events, write_audit_xml
from tests.support.ranger_documents import write_xml

pytestmark = pytest.mark.skipif(not lab_client.secure(), reason="tokens exist on the secure lab only")

SERVICE = "tarn-e2e-tokens"
PORT, AM_PORT = 8760, 8895
MODELS_ON_HDFS = f"/user/{LAB_USER}/e2e-tokens-models"
ZK_PATH = "/tarn-e2e-tokens"  # not the edge's: test_scale_to_zero wants its service alone there
RANGER_SERVICE = "triton_tokens"  # its own, in the edge's stand-in Admin (test_ranger resets it later:
# the controller keeps the policies it holds while Admin fails it, docs/ranger.md)
POLICIES = [
    {
        **policy("alice-infers-add-one", ["add_one"], allow=[(["alice"], (), ["infer"])]),
        "service": RANGER_SERVICE,
    }
]
AUDIT_DIR = f"/user/{LAB_USER}/e2e-tokens-audit"
TOKEN = secrets.token_urlsafe(16)
SUBMITTED_AT: dict[str, float] = {}  # the suite's start test leaves its time here for the end tests


def max_lifetime_s() -> float:
    """The NameNode's dfs.namenode.delegation.token.max-lifetime, in seconds."""
    site = podman_exec(LAB_MASTER, "cat", "/etc/hadoop/conf.namenode/hdfs-site.xml", check=True).stdout
    return int(parse_properties(site.encode())["dfs.namenode.delegation.token.max-lifetime"]) / 1000


def am_attempt(rm: ResourceManager) -> dict[str, Any]:
    """The service AM's current attempt ({} before the RM knows the service's application)."""
    service = rm.service(SERVICE) or {}
    attempts = rm.app_attempts(str(service["id"])) if service.get("id") else []
    return attempts[-1] if attempts else {}


@pytest.mark.suite_start
def test_a_long_lived_service_is_submitted(rm: ResourceManager, hdfs: WebHdfsClient, tmp_path: Path) -> None:
    tarn("destroy", "--service-name", SERVICE, "--user", LAB_USER, *CLUSTER, timeout=600)
    hdfs.delete(MODELS_ON_HDFS, recursive=True)
    hdfs.delete(AUDIT_DIR, recursive=True)
    fresh_lab_admin(tmp_path)
    assert register_with_the_role(tmp_path, RANGER_SERVICE, POLICIES) == 1
    write_xml(tmp_path, {
        "ranger.plugin.triton.service.name": RANGER_SERVICE,
        "ranger.plugin.triton.policy.rest.url": ADMIN_URL,
        "ranger.plugin.triton.policy.pollIntervalMs": "5000",
    })  # fmt: skip
    write_audit_xml(tmp_path, AUDIT_DIR)
    hdfs.upload_tree(ROOT / "examples" / "model_repository" / "add_one", f"{MODELS_ON_HDFS}/add_one")
    # At zero between the two ends (the AM and the controller only), so that it takes nothing the
    # suite's other services need; idle for two hours before the controller would remove anything.
    submitted = tarn(
        "submit", "--service-name", SERVICE, "--user", LAB_USER, *lab_client.runtime_args(),
        "--model-repository", f"hdfs://{MODELS_ON_HDFS}", "--port", str(PORT), "--grpc-port", str(PORT + 1),
        "--metrics-port", str(PORT + 2), "--am-port", str(AM_PORT), "--min-instances", "0",
        "--max-instances", "1", "--scale-to-zero-after", "7200", "--tick-seconds", "2",
        "--gpus-per-instance", "0", "--memory-mb", "768", "--vcores", "1", "--controller-memory-mb", "512",
        "--zk-ensemble", f"{LAB_MASTER}:2181", "--zk-path", ZK_PATH, "-rs", RANGER_SERVICE,
        "--ranger-conf-dir", str(tmp_path), "--ranger-audit", *CLUSTER, token=TOKEN, timeout=600,
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    SUBMITTED_AT["t"] = time.time()
    service = Service(rm, TOKEN, SERVICE)
    wait_for(lambda: _policies_loaded(service), 300, "the controller with its Ranger policies")


@pytest.fixture(scope="module")
def lived(rm: ResourceManager) -> float:
    """Seconds the service has lived once two maximum token lifetimes (and a renewal) have passed."""
    if "t" not in SUBMITTED_AT:
        pytest.fail("test_a_long_lived_service_is_submitted did not submit the service")
    wanted = 2 * max_lifetime_s() + 30
    left = SUBMITTED_AT["t"] + wanted - time.time()
    if left > 0:
        print(f"\n[tokens] waiting {left:.0f} s more: the service must outlive two token lifetimes")
        time.sleep(left)
    return time.time() - SUBMITTED_AT["t"]


def version_2() -> bytes:
    """add_one's version 2: adds two (its version 1 adds one)."""
    source = (ROOT / "examples" / "model_repository" / "add_one" / "1" / "model.py").read_text()
    assert "np.float32(1)" in source
    return source.replace("np.float32(1)", "np.float32(2)").encode()


def scale_to(rm: ResourceManager, count: int) -> list[dict[str, Any]]:
    """``tarn scale`` (drained with the token), then the READY containers once there are ``count``."""
    done = tarn("scale", "--service-name", SERVICE, "--user", LAB_USER, str(count), *CLUSTER, token=TOKEN)
    assert done.returncode == 0, done.stderr

    def settled() -> bool:
        service = rm.service(SERVICE) or {}
        triton = containers(service, TRITON)
        ready = [c for c in triton if c.get("state") == "READY"]
        return triton_count(service) == len(triton) == len(ready) == count

    wait_for(settled, 300, f"{count} READY instance(s) of {SERVICE}, and no other")
    return containers(rm.service(SERVICE) or {}, TRITON)


def infer_version_2(container: dict[str, Any]) -> list[float]:
    body = {"inputs": [{"name": "INPUT0", "shape": [2], "datatype": "FP32", "data": [1.0, 2.0]}]}
    url = f"http://{container_host(container)}:{PORT}/v2/models/add_one/versions/2/infer"
    reply = requests.post(url, json=body, timeout=30)
    assert reply.status_code == 200, reply.text
    data: list[float] = reply.json()["outputs"][0]["data"]
    return data


@pytest.mark.before_chaos
def test_after_two_token_lifetimes_the_am_launches_instances_with_a_new_model_version(
    rm: ResourceManager, hdfs: WebHdfsClient, lived: float
) -> None:
    hdfs.write(f"{MODELS_ON_HDFS}/add_one/2/model.py", version_2())
    print(f"\n[tokens] {SERVICE} has lived {lived:.0f} s; add_one version 2 is on HDFS")
    (instance,) = scale_to(rm, 1)
    assert infer_version_2(instance) == [3.0, 4.0], "version 2, staged from HDFS, adds two"
    print(f"[tokens] scaled 0 -> 1 at {lived:.0f} s: {instance['component_instance_name']} serves version 2")
    service = Service(rm, TOKEN, SERVICE)
    written = service.metric("tarn_ranger_audit_events_written_total")
    assert service.authorize("alice", "add_one", "infer"), "the policies downloaded at the start still hold"
    wait_for(
        lambda: service.metric("tarn_ranger_audit_events_written_total") > written,
        60,
        "the audit event's write",
    )
    audited = {(e["reqUser"], e["resource"], e["action"]) for e in audit_events(hdfs, AUDIT_DIR)}
    assert ("alice", "add_one", "infer") in audited, f"alice's decision in the audit under {AUDIT_DIR}"
    print(f"[tokens] Ranger's audit of alice's decision on HDFS at {time.time() - SUBMITTED_AT['t']:.0f} s")
    scale_to(rm, 0)


@pytest.mark.before_chaos
def test_a_new_am_attempt_after_the_tokens_lapsed_launches_instances(rm: ResourceManager) -> None:
    before = am_attempt(rm)
    worker = str(before["nodeId"]).split(":", maxsplit=1)[0]
    podman_exec(worker, "pkill", "-KILL", "-f", f"ServiceMaster.*{SERVICE}", check=True)

    def next_attempt() -> bool:
        now = am_attempt(rm)
        return now.get("id") != before["id"] and now.get("appAttemptState") == "RUNNING"

    wait_for(next_attempt, 300, "a new attempt of the service AM")
    wait_for(lambda: (rm.service(SERVICE) or {}).get("state") == "STABLE", 300, "the service STABLE again")
    (instance,) = scale_to(rm, 1)
    attempt = am_attempt(rm)["appAttemptId"]
    print(f"[tokens] AM killed on {worker}; {attempt} launched {instance['component_instance_name']}")
    scale_to(rm, 0)
    _print_token_events(str((rm.service(SERVICE) or {})["id"]))
    done = tarn("destroy", "--service-name", SERVICE, "--user", LAB_USER, *CLUSTER, timeout=600)
    assert done.returncode == 0, done.stderr
    podman_exec(ADMIN_NODE, "pkill", "-f", "ranger_admin.py")  # when test_ranger did not run since


def _policies_loaded(service: Service) -> bool:
    try:
        return bool(service.metric("tarn_ranger_policies_loaded"))
    except (requests.RequestException, ValueError, KeyError, AssertionError):
        return False


def _print_token_events(app_id: str) -> None:
    """When the RM renewed each of the application's tokens, and when it obtained new ones (its log)."""
    logs = "cat /var/log/hadoop/resourcemanager/*.log"
    log = podman_exec(LAB_MASTER, "bash", "-c", logs, timeout=60).stdout
    events = []
    for line in log.splitlines():
        if app_id not in line:
            continue
        if "Received new tokens" in line:
            events.append(f"  {line[11:19]} new tokens obtained for the application")
        elif (renewed := RENEWED.search(line)) is not None:
            max_date, sequence, expires = renewed.groups()
            events.append(
                f"  {line[11:19]} token {sequence} renewed: valid to {_clock(expires)}, "
                f"at most to {_clock(max_date)}"
            )
    print(f"[tokens] the RM's token events for {app_id} ({len(events)}):")
    print("\n".join(events) or "  none")


RENEWED = re.compile(r"Renewed delegation-token.*maxDate=(\d+), sequenceNumber=(\d+).*;exp=(\d+)")


def _clock(epoch_ms: str) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(int(epoch_ms) / 1000))
