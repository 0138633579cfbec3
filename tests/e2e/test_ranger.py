"""Ranger on the lab: the stand-in Ranger Admin (lab/ranger_admin.py; no real Ranger Admin can run
here) on the edge node, the triton service def, the service triton_prod and the acceptance policies
registered by the collection's ranger_triton role (a second run changes nothing), and a TARN service
submitted with ``--ranger-service triton_prod --ranger-audit`` whose controller runs in YARN.

Checked: every /authorize answer (every user, model of the repository and action) equals Ranger's own
engine (the Java harness) over what Admin serves; the audit events land on the lab's HDFS at
Ranger's path, one per decision Ranger audits and none for the others; /instances and the dashboard
in headless Chromium show each user only the models they may list (Chromium goes through a
loopback proxy that adds the token and X-TARN-User, as Knox would); a policy change is enforced
within one poll interval (measured); Admin stopped keeps the last good policies and says so.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import product

import pytest
import requests

from lab import lab_client
from tarn.clients.resourcemanager import ResourceManager
from tarn.stdlib.webhdfs import WebHdfsClient
from tests.support import ROOT
from tests.support.chromium import ARTIFACTS, CHROMIUM
from tests.support.lab import LAB_USER, podman_exec, wait_for
from tests.support.lab_edge import ADMIN_NODE, ADMIN_URL, LabAdmin, fresh_lab_admin, register_with_the_role
from tests.support.lab_service import CLUSTER, Service, tarn
from tests.support.ranger_admin import policy
from tests.support.ranger_audit import audit_events, audit_events_since, settled, write_audit_xml
from tests.support.ranger_documents import write_xml
from tests.support.ranger_harness import ACTIONS, USERS, harness_jar, ranger_decisions

SERVICE = "tarn-e2e-ranger"
RANGER_SERVICE = "triton_prod"
POLL_S = 1.0
BASE_PORT, AM_PORT = 8300, 8891
MODELS_ON_HDFS = f"/user/{LAB_USER}/e2e-ranger-models"
AUDIT_DIR = f"/user/{LAB_USER}/ranger/audit"
MODELS = ("add_one", "env_probe", "linear_onnx")  # examples/model_repository
POLICIES = [
    # alice (ml-team) may infer, list and read the metadata of add_*
    policy("ml-team-add", ["add_*"], allow=[((), ["ml-team"], ["infer", "list", "metadata"])]),
    # bob may list linear_onnx, and that is all he may list
    {**policy("bob-linear", ["linear_onnx"], allow=[(["bob"], (), ["list"])]), "isAuditEnabled": False},
    # analysts may list and read add_one; bob is denied, except the metadata
    policy(
        "analysts-add-one", ["add_one"], allow=[((), ["analysts"], ["list", "metadata"])],
        deny=[(["bob"], (), ["list", "metadata", "infer"])], deny_exceptions=[(["bob"], (), ["metadata"])],
    ),
    # nobody lets carol infer, but an OVERRIDE policy does on env_probe (and lets her list it)
    # (these two are not audited: decisions on linear_onnx, under no other policy, are not either)
    {**policy("no-infer-for-carol", ["*"], deny=[(["carol"], (), ["infer"])]), "isAuditEnabled": False},
    policy("override", ["env_probe"], allow=[(["carol"], (), ["infer", "list"])], override=True),
]  # fmt: skip


@pytest.fixture(scope="module")
def admin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabAdmin]:
    here = tmp_path_factory.mktemp("ranger-admin")
    lab_admin = fresh_lab_admin(here)
    first, second = (register_with_the_role(here, RANGER_SERVICE, POLICIES) for _run in range(2))
    assert (first, second) == (1, 0), "the role registers, then changes nothing"
    print(f"\n[ranger] the ranger_triton role registered {RANGER_SERVICE}; a second run changed nothing")
    yield lab_admin
    podman_exec(ADMIN_NODE, "pkill", "-f", "ranger_admin.py")


@pytest.fixture(scope="module")
def service(
    admin: LabAdmin, rm: ResourceManager, hdfs: WebHdfsClient, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Service]:
    conf = tmp_path_factory.mktemp("ranger-conf")
    write_xml(conf, {
        "ranger.plugin.triton.service.name": RANGER_SERVICE,
        "ranger.plugin.triton.policy.rest.url": ADMIN_URL,
        "ranger.plugin.triton.policy.pollIntervalMs": str(int(POLL_S * 1000)),
    })  # fmt: skip
    write_audit_xml(conf, AUDIT_DIR, **{"xasecure.audit.destination.log4j": "true"})
    token = secrets.token_urlsafe(16)
    tarn("destroy", "--service-name", SERVICE, "--user", LAB_USER, *CLUSTER)
    hdfs.delete(AUDIT_DIR, recursive=True)
    hdfs.upload_tree(ROOT / "examples" / "model_repository", MODELS_ON_HDFS)
    submitted = tarn(
        "submit", "--service-name", SERVICE, "--user", LAB_USER, *lab_client.runtime_args(),
        "--model-repository", f"hdfs://{MODELS_ON_HDFS}", f"--token={token}",
        "--port", str(BASE_PORT), "--grpc-port", str(BASE_PORT + 1), "--metrics-port", str(BASE_PORT + 2),
        "--am-port", str(AM_PORT), "--min-instances", "1", "--max-instances", "1", "--tick-seconds", "1",
        "--gpus-per-instance", "0", "--memory-mb", "768", "--vcores", "1", "--controller-memory-mb", "512",
        "-rs", RANGER_SERVICE, "--ranger-conf-dir", str(conf), "--ranger-audit", *CLUSTER,
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    running = Service(rm, token, SERVICE)
    try:
        wait_for(lambda: _serving(running), 300, "the controller with a serving instance and its policies")
        yield running
    finally:
        done = tarn("destroy", "--service-name", SERVICE, "--user", LAB_USER, *CLUSTER)
        assert done.returncode == 0, done.stderr
        hdfs.delete(MODELS_ON_HDFS, recursive=True)


def _serving(service: Service) -> bool:
    try:
        instances = service.get("/instances", "alice").json()["instances"]
        return any(i["state"] == "READY" and i["models"] for i in instances) and bool(
            service.metric("tarn_ranger_policies_loaded")
        )
    except (requests.RequestException, ValueError, KeyError, AssertionError):
        return False


def test_authorize_matches_ranger_and_each_audited_decision_is_on_hdfs_once(
    admin: LabAdmin, service: Service, hdfs: WebHdfsClient
) -> None:
    written_before = settled(service)
    seen_before = {e["id"] for e in audit_events(hdfs, AUDIT_DIR)}
    keys = list(product(USERS, MODELS, ACTIONS))
    answers = {key: service.authorize(*key) for key in keys}
    ranger = ranger_decisions(harness_jar(), admin, MODELS)
    assert answers == {key: verdict["allowed"] for key, verdict in ranger.items()}
    audited = {key for key, verdict in ranger.items() if verdict["audited"]}
    assert 0 < len(audited) < len(ranger), "some decisions are audited, some are not"
    wait_for(lambda: settled(service) >= written_before + len(audited), 30, "the sweep's audit events")
    new = audit_events_since(hdfs, AUDIT_DIR, seen_before)
    logged = [(e["reqUser"], e["resource"], e["action"]) for e in new]
    assert sorted(logged) == sorted(audited), "one event per decision Ranger audits, none for the others"
    for e in new:
        key = (e["reqUser"], e["resource"], e["action"])
        assert (e["repo"], e["resType"], e["agent"], e["logType"]) == (
            RANGER_SERVICE,
            "model",
            "tarn",
            "RangerAudit",
        )
        assert (e["result"], e["policy"]) == (int(ranger[key]["allowed"]), ranger[key]["policy_id"])
    print(
        f"\n[ranger] {len(answers)} /authorize answers equal Ranger's ({sum(answers.values())} allowed); "
        f"{len(new)} audit events on HDFS under {AUDIT_DIR}/tarn/, Ranger audits {len(audited)}"
    )


class UserProxy:
    """A loopback HTTP proxy for Chromium that adds the token and X-TARN-User, as Knox does."""

    def __init__(self, token: str, target: str) -> None:
        self.user = ""
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if not self.path.startswith(f"{target}/"):  # Chromium's own calls home: never out
                    self.send_error(403)
                    return
                reply = requests.get(
                    self.path,
                    headers={"X-TARN-Token": token, "X-TARN-User": proxy.user},
                    timeout=10,
                    proxies={"http": "", "https": ""},
                )
                try:
                    self.send_response(reply.status_code)
                    self.send_header("Content-Type", reply.headers.get("Content-Type", "text/plain"))
                    self.send_header("Content-Length", str(len(reply.content)))
                    self.end_headers()
                    self.wfile.write(reply.content)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # Chromium closed the connection: it had what it wanted

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.address = f"127.0.0.1:{self.server.server_address[1]}"


def test_each_user_sees_only_the_models_they_may_list(admin: LabAdmin, service: Service) -> None:
    ranger = ranger_decisions(harness_jar(), admin, MODELS)
    proxy = UserProxy(service.token, service.url)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    chromium = [*CHROMIUM, f"--proxy-server=http://{proxy.address}"]
    env = {**os.environ, "HOME": str(ARTIFACTS)}
    try:
        for user in USERS:
            may_list = {m for m in MODELS if ranger[(user, m, "list")]["allowed"]}
            listed = {m for i in service.get("/instances", user).json()["instances"] for m in i["models"]}
            assert listed == may_list, user
            proxy.user = user
            url = f"{service.url}/dashboard"
            dom = subprocess.run(
                [*chromium, "--dump-dom", url],
                capture_output=True,
                text=True,
                timeout=120,
                check=True,
                env=env,
            ).stdout
            shot = ARTIFACTS / f"dashboard-ranger-{user}.png"
            subprocess.run([*chromium, f"--screenshot={shot}", "--window-size=1400,900", url],
                           capture_output=True, timeout=120, check=True, env=env)  # fmt: skip
            assert f"models shown for {user}" in dom
            shown = {m for m in MODELS if m in dom}
            assert shown == may_list, f"{user}'s dashboard shows {shown}, Ranger lets them list {may_list}"
            assert service.token not in dom
            print(
                f"\n[ranger] {user}: /instances and the dashboard list {sorted(may_list)}; screenshot {shot}"
            )
    finally:
        proxy.server.shutdown()


def test_a_policy_change_is_enforced_within_one_poll_interval_on_the_lab(
    admin: LabAdmin, service: Service
) -> None:
    client = admin.client()
    latencies = []
    for granted in (True, False):
        models = ["linear_onnx", "env_probe"] if granted else ["linear_onnx"]
        assert service.authorize("bob", "env_probe", "list") is not granted
        changed_policy = policy("bob-linear", models, allow=[(["bob"], (), ["list"])])
        client.update_policy(RANGER_SERVICE, "bob-linear", {**changed_policy, "isAuditEnabled": False})
        changed = time.monotonic()
        while service.authorize("bob", "env_probe", "list") is not granted:
            assert time.monotonic() - changed < 10 * POLL_S, "not enforced"
            time.sleep(0.02)
        latencies.append(time.monotonic() - changed)
    shown = ", ".join(f"{t:.2f}" for t in latencies)
    print(f"\n[ranger] on the lab, policy changes enforced after {shown} s (poll interval {POLL_S} s)")
    assert max(latencies) <= POLL_S + 1.0, (
        f"{shown} s: more than one poll interval (+1 s for the round trips)"
    )


def test_admin_down_keeps_the_last_good_policies_and_says_so(admin: LabAdmin, service: Service) -> None:
    keys = list(product(USERS, MODELS, ACTIONS))
    before = {key: service.authorize(*key) for key in keys}
    admin.stop()
    try:
        wait_for(lambda: service.metric("tarn_ranger_policies_stale") == 1, 15, "the policies marked stale")
        assert {key: service.authorize(*key) for key in keys} == before
        assert "are stale" in service.get("/dashboard", "alice").text
    finally:
        admin.start()
    wait_for(lambda: service.metric("tarn_ranger_policies_stale") == 0, 15, "the policies current again")
