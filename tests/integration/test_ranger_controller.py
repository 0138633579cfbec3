"""The controller's Ranger plugin against the stand-in Ranger Admin (lab/ranger_admin.py) on
127.0.0.1: the triton service def, the service triton_prod, users alice (ml-team), bob (analysts)
and carol, and policies with groups, a deny with an exception and an OVERRIDE policy. The plugin
is the controller's own: settings read from a ranger-triton-security.xml, the refresher polling
Admin with Ranger's plugin protocol, the API (/authorize, /instances, /dashboard, /metrics) on
loopback in front of a scripted control loop.

Checked: every /authorize answer equals Ranger's own engine's decision (ranger-plugins-common 2.8.0
through lab/ranger-harness) over what Admin serves; with --ranger-audit, one audit event per decision
Ranger audits and none for the others; a policy change is enforced within one poll interval (measured
and printed); Admin stopped keeps the last good policies and says so; a controller started with Admin
down uses the cache, and without a cache denies everything.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from itertools import product
from pathlib import Path
from typing import Any

import pytest
import requests

from tarn.controller.server import Api, serve
from tarn.ranger.audit import AuditSettings
from tarn.ranger.audit_log import AuditLog, Identity
from tarn.ranger.authorizer import Authorizer
from tarn.ranger.engine import Engine
from tarn.ranger.refresher import Refresher, connect
from tarn.ranger.settings import read_settings
from tarn.ranger.state import PolicyState
from tarn.stdlib.api_token import Secret
from tests.support.controller import AUTH, TOKEN, ModelScraper, make
from tests.support.loopback import free_port
from tests.support.ranger_admin import SERVICE, Standin, policy, served, service_def, start, stop
from tests.support.ranger_documents import write_xml
from tests.support.ranger_harness import ACTIONS, USERS, harness_jar, ranger_decisions

Json = dict[str, Any]
MODELS = ("add_one", "add_sub", "linear_onnx", "identity")
POLL_S = 0.5


POLICIES = [
    # alice, through her group ml-team, may infer, list and read the metadata of add_*
    policy("ml-team-add", ["add_*"], allow=[((), ["ml-team"], ["infer", "list", "metadata"])]),
    # bob may list linear_onnx, and that is all he may list
    policy("bob-linear", ["linear_onnx"], allow=[(["bob"], (), ["list"])]),
    # analysts may list and read add_one; bob is denied both, except the metadata
    policy(
        "analysts-add-one",
        ["add_one"],
        allow=[((), ["analysts"], ["list", "metadata"])],
        deny=[(["bob"], (), ["list", "metadata", "infer"])],
        deny_exceptions=[(["bob"], (), ["metadata"])],
    ),
    # nobody lets carol infer...
    policy("no-infer-for-carol", ["*"], deny=[(["carol"], (), ["infer"])]),
    # ...but this OVERRIDE policy does, on add_sub and identity, and takes inference on add_sub from alice
    policy(
        "override",
        ["add_sub", "identity"],
        allow=[(["carol"], (), ["infer", "list"])],
        deny=[(["alice"], (), ["infer"])],
        override=True,
    ),
]


@dataclass
class Controller:
    """The controller's API with the Ranger plugin ``tarn controller`` builds from its settings."""

    refresher: Refresher
    server: ThreadingHTTPServer
    url: str

    def authorize(self, user: str, model: str, action: str) -> bool:
        reply = requests.get(
            f"{self.url}/authorize",
            params={"model": model, "action": action},
            headers={**AUTH, "X-TARN-User": user},
            timeout=5,
        )
        assert reply.status_code == 200, reply.text
        assert reply.text in ("true", "false")
        return reply.text == "true"

    def answers(self) -> dict[tuple[str, str, str], bool]:
        return {key: self.authorize(*key) for key in product(USERS, MODELS, ACTIONS)}

    def get(self, path: str, user: str | None = None) -> str:
        headers = {**AUTH, **({"X-TARN-User": user} if user else {})}
        reply = requests.get(f"{self.url}{path}", headers=headers, timeout=5)
        assert reply.status_code == 200
        return reply.text

    def close(self) -> None:
        self.server.shutdown()
        self.refresher.stop()


def write_conf(directory: Path, admin_url: str, cache_dir: Path | None) -> Path:
    properties = {
        "ranger.plugin.triton.service.name": SERVICE,
        "ranger.plugin.triton.policy.rest.url": admin_url,
        "ranger.plugin.triton.policy.pollIntervalMs": str(int(POLL_S * 1000)),
        "ranger.plugin.triton.policy.rest.client.connection.timeoutMs": "1000",
        "ranger.plugin.triton.policy.rest.client.read.timeoutMs": "5000",
    }
    if cache_dir is not None:
        properties["ranger.plugin.triton.policy.cache.dir"] = str(cache_dir)
    directory.mkdir(parents=True, exist_ok=True)
    write_xml(directory, properties)
    return directory


def run_controller(conf_dir: Path, audit: AuditLog | None = None) -> Controller:
    refresher = connect(read_settings(conf_dir, SERVICE, "tarn"))
    refresher.start()
    lab = make(instances=2)
    lab.scraper = ModelScraper(lab.clock)
    lab.controller._scraper = lab.scraper
    lab.ticks(1)
    authorizer = Authorizer(lambda: refresher.state, audit=audit)
    server = serve(Api(lab.controller, Secret(TOKEN), authorizer), "127.0.0.1", 0)
    return Controller(refresher, server, f"http://127.0.0.1:{server.server_address[1]}")


def wait_until(done: Callable[[PolicyState], bool], refresher: Refresher, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not done(refresher.state):
        assert time.monotonic() < deadline, refresher.state
        time.sleep(0.02)


def engine_decisions(admin: Standin) -> dict[tuple[str, str, str], bool]:
    """What TARN's engine decides over the documents Admin serves (groups from its user store)."""
    policies, roles, groups = served(admin)
    engine = Engine.from_json(policies, roles)
    return {
        (user, model, action): engine.evaluate(user, frozenset(groups.get(user, ())), model, action).allowed
        for user, model, action in product(USERS, MODELS, ACTIONS)
    }


@pytest.fixture(scope="module")
def ranger_jar() -> Path:
    return harness_jar()


@pytest.fixture
def admin(tmp_path: Path) -> Iterator[Standin]:
    standin = start(tmp_path, tmp_path / "state.json")
    client = standin.client()
    client.create_service_def(service_def())
    client.create_service({"name": SERVICE, "type": "triton", "configs": {}})
    for p in POLICIES:
        client.create_policy(p)
    yield standin
    if standin.process.poll() is None:
        stop(standin)


@pytest.fixture
def controller(admin: Standin, tmp_path: Path) -> Iterator[Controller]:
    running = run_controller(write_conf(tmp_path / "conf", admin.url, tmp_path / "policycache"))
    wait_until(lambda s: s.loaded, running.refresher)
    yield running
    running.close()


def test_authorize_answers_as_ranger_s_engine_for_every_user_model_and_action(
    admin: Standin, controller: Controller, ranger_jar: Path
) -> None:
    answers = controller.answers()
    ranger = ranger_decisions(ranger_jar, admin, MODELS)
    assert answers == {key: verdict["allowed"] for key, verdict in ranger.items()}
    assert answers == engine_decisions(admin)
    allowed = {key for key, ok in answers.items() if ok}
    assert {m for u, m, a in allowed if u == "bob" and a == "list"} == {"linear_onnx"}, (
        "bob lists linear_onnx only"
    )
    assert ("bob", "add_one", "metadata") in allowed, "the deny's exception"
    assert ("bob", "add_one", "infer") not in allowed
    assert ("alice", "add_one", "infer") in allowed, "through her group, from the user store"
    assert ("alice", "add_sub", "infer") not in allowed, "the OVERRIDE deny beats the group's allow"
    assert {m for u, m, a in allowed if u == "carol" and a == "infer"} == {"add_sub", "identity"}, (
        "OVERRIDE allow"
    )
    print(f"\n[ranger] {len(answers)} decisions equal Ranger's engine's, {len(allowed)} allowed")

    listed = [i["models"] for i in json.loads(controller.get("/instances", "alice"))["instances"]]
    assert listed == [["add_one", "add_sub"]] * 2
    assert [i["models"] for i in json.loads(controller.get("/instances"))["instances"]] == [[], []]
    assert "Ranger: policies version" in controller.get("/dashboard", "bob")


class Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.events: list[Json] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.events.append(json.loads(record.getMessage()))


def test_one_audit_event_per_decision_ranger_audits(admin: Standin, tmp_path: Path, ranger_jar: Path) -> None:
    """Audit-disabled policies and a no-audit user make some decisions unaudited; the events are
    exactly Ranger's audited ones, with Ranger's deciding policy."""
    client = admin.client()
    for name in ("bob-linear", "no-infer-for-carol"):  # linear_onnx is then under unaudited policies only
        quiet = client.get_policy(SERVICE, name)
        quiet.isAuditEnabled = False
        client.update_policy(SERVICE, name, quiet)
    handler, logger = Captured(), logging.getLogger("xaaudit.test")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    audit = AuditLog(AuditSettings(logger="xaaudit.test"), Identity(SERVICE, "tarn", "controller-host"), None)
    running = run_controller(write_conf(tmp_path / "conf", admin.url, None), audit)
    try:
        wait_until(lambda s: s.loaded, running.refresher)
        answers = running.answers()
        audit.flush()
    finally:
        running.close()
        logger.removeHandler(handler)
    ranger = ranger_decisions(ranger_jar, admin, MODELS)
    audited = {key for key, verdict in ranger.items() if verdict["audited"]}
    assert answers == {key: verdict["allowed"] for key, verdict in ranger.items()}
    logged = [(e["reqUser"], e["resource"], e["action"]) for e in handler.events]
    assert len(logged) == len(set(logged)), "one event per decision"
    assert set(logged) == audited
    assert 0 < len(audited) < len(ranger), "some decisions are audited, some are not"
    policies, _roles, _groups = served(admin)
    for e in handler.events:
        key = (e["reqUser"], e["resource"], e["action"])
        assert (e["result"], e["policy"]) == (int(ranger[key]["allowed"]), ranger[key]["policy_id"])
        assert (e["repo"], e["repoType"], e["resType"], e["agent"]) == (
            SERVICE,
            policies["serviceDef"]["id"],
            "model",
            "tarn",
        )
        assert e["cliIP"] == "127.0.0.1"
    print(f"\n[ranger] {len(logged)} audit events for {len(ranger)} decisions; Ranger audits {len(audited)}")


def test_a_policy_change_is_enforced_within_one_poll_interval(admin: Standin, controller: Controller) -> None:
    """bob's list on identity granted and taken back four times, at different phases of the poll."""
    latencies = []
    for n, pause in enumerate((0.0, 0.15, 0.3, 0.45)):
        time.sleep(pause)
        granted = n % 2 == 0
        models = ["linear_onnx", "identity"] if granted else ["linear_onnx"]
        assert controller.authorize("bob", "identity", "list") is not granted
        admin.client().update_policy(
            SERVICE, "bob-linear", policy("bob-linear", models, allow=[(["bob"], (), ["list"])])
        )
        changed_at = time.monotonic()
        while controller.authorize("bob", "identity", "list") is not granted:
            assert time.monotonic() - changed_at < 10 * POLL_S, "not enforced"
            time.sleep(0.01)
        latencies.append(time.monotonic() - changed_at)
    shown = ", ".join(f"{t:.3f}" for t in latencies)
    print(f"\n[ranger] policy changes enforced after {shown} s (poll interval {POLL_S} s)")
    assert max(latencies) <= POLL_S + 0.5, f"{shown} s: more than one poll interval"
    assert controller.answers() == engine_decisions(admin)


def test_admin_down_keeps_the_last_good_policies_and_the_cache_serves_a_restart(
    admin: Standin, controller: Controller, tmp_path: Path
) -> None:
    before = controller.answers()
    version = controller.refresher.state.documents.policy_version
    cache = sorted(p.name for p in (tmp_path / "policycache").iterdir())
    assert cache == [
        "tarn_triton_prod.json",
        "tarn_triton_prod_roles.json",
        "tarn_triton_prod_userstore.json",
    ]
    stop(admin)
    wait_until(lambda s: s.error is not None, controller.refresher)
    assert controller.answers() == before, "the last good policies stay in force"
    page = controller.get("/dashboard", "bob")
    assert f"Ranger: policies version {version} are stale" in page
    assert "no Ranger Admin answered" in page
    metrics = controller.get("/metrics")
    assert "tarn_ranger_policies_stale 1.0" in metrics
    assert "tarn_ranger_policies_loaded 1.0" in metrics
    assert "tarn_ranger_refresh_failures_total 0.0" not in metrics

    # a controller restarted meanwhile (same cache directory, Admin still down) starts from the cache
    restarted = run_controller(write_conf(tmp_path / "conf2", admin.url, tmp_path / "policycache"))
    try:
        state = restarted.refresher.state
        assert (state.source, state.documents.policy_version) == ("cache", version)
        assert restarted.answers() == before
        wait_until(lambda s: s.attempted_at is not None, restarted.refresher)
        assert restarted.answers() == before, "a failed poll keeps the cache's policies"
        assert f"Ranger: policies version {version} are stale" in restarted.get("/dashboard")
    finally:
        restarted.close()


def test_started_with_admin_down_and_no_cache_everything_is_denied(admin: Standin, tmp_path: Path) -> None:
    stop(admin)
    running = run_controller(write_conf(tmp_path / "conf", admin.url, None))
    try:
        wait_until(lambda s: s.attempted_at is not None, running.refresher)
        answers = running.answers()
        assert not any(answers.values()), "fail closed"
        assert "every model is denied" in running.get("/dashboard", "alice")
        metrics = running.get("/metrics")
        assert "tarn_ranger_policies_loaded 0.0" in metrics
        assert "tarn_ranger_policy_version -1.0" in metrics
    finally:
        running.close()


def test_tarn_controller_runs_the_plugin_from_its_flags(admin: Standin, tmp_path: Path) -> None:
    """`tarn controller -rs triton_prod --ranger-conf-dir DIR`, as YARN launches it (the RM is absent:
    the loop's ticks fail, the API serves)."""
    conf = write_conf(tmp_path / "conf", admin.url, None)
    (tmp_path / "token").write_text(TOKEN)
    port = free_port()
    command = [sys.executable, "-m", "tarn", "controller", "--model-repository", "hdfs:///m",
               "--runtime", "process", "--address", "127.0.0.1", "--am-port", str(port),
               "--rm-url", "http://127.0.0.1:9", "--token-file", str(tmp_path / "token"),
               "-rs", SERVICE, "--ranger-conf-dir", str(conf)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        url, deadline, answer = f"http://127.0.0.1:{port}", time.monotonic() + 20, ""
        while answer != "true":
            assert time.monotonic() < deadline, "no answer from the controller"
            with contextlib.suppress(requests.ConnectionError):
                answer = requests.get(
                    f"{url}/authorize",
                    params={"model": "add_one", "action": "infer", "user": "alice"},
                    headers=AUTH,
                    timeout=2,
                ).text
            time.sleep(0.1)
        bob = {"model": "add_one", "action": "infer", "user": "bob"}
        assert requests.get(f"{url}/authorize", params=bob, headers=AUTH, timeout=2).text == "false"
        assert (
            "tarn_ranger_policies_loaded 1.0" in requests.get(f"{url}/metrics", headers=AUTH, timeout=2).text
        )
    finally:
        process.terminate()
        output = process.communicate(timeout=10)[0]
    assert f"Ranger service {SERVICE}: polling {admin.url} every {POLL_S} s" in output
    assert f"Ranger service {SERVICE}: policies version -1 -> " in output
    assert TOKEN not in output
