"""Apache Ranger's real Java plugin against lab/ranger_admin.py, the stand-in for Ranger Admin.

tarn.lab.ranger.PluginProbe (lab/ranger-harness, built by ``make integration`` into
build/ranger-harness/) is ``new RangerBasePlugin("triton", appId)`` from ranger-plugins-common
2.8.0, configured the way every Ranger plugin is: a ``ranger-triton-security.xml`` on its
classpath. Its ``init()`` starts Ranger's PolicyRefresher, RangerRolesProvider and (with
``use.rangerGroups``) the user store enricher, which download through RangerAdminRESTClient
(Jersey 1) from the stand-in and poll it; the probe answers JSON lines about what the plugin holds
and decides. The stand-in gets its service def, service, policies and roles through the
``apache-ranger`` client, as TARN's Ansible role sends them.
"""

from __future__ import annotations

import json
import queue
import re
import subprocess
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from apache_ranger.client.ranger_client import RangerClient

from tests.support.ranger_admin import PASSWORD, SERVICE, Standin, service_def, start, stop
from tests.support.ranger_harness import harness_jar

Json = dict[str, Any]
APP_ID = "tarn-it"
POLL_MS = 500  # the plugin's policy, role and user store poll interval here
ANSWER_S = 30.0  # the longest a probe may take to answer a command (its start included)
Launch = Callable[..., "Probe"]  # plugins(url, service=SERVICE) -> a started probe


def security_xml(url: str, cache_dir: Path, service: str = SERVICE) -> str:
    """ranger-triton-security.xml as a Ranger plugin's installer writes it (the plain-HTTP subset)."""
    prefix = "ranger.plugin.triton"
    properties = {
        f"{prefix}.service.name": service,
        f"{prefix}.policy.source.impl": "org.apache.ranger.admin.client.RangerAdminRESTClient",
        f"{prefix}.policy.rest.url": url,
        f"{prefix}.policy.pollIntervalMs": str(POLL_MS),
        f"{prefix}.policy.cache.dir": str(cache_dir),
        f"{prefix}.policy.rest.client.connection.timeoutMs": "2000",
        f"{prefix}.policy.rest.client.read.timeoutMs": "5000",
        f"{prefix}.policy.rest.client.max.retry.attempts": "1",
        f"{prefix}.policy.rest.client.retry.interval.ms": "100",
        # the groups of the user store (Ranger's usersync) are added to a request's groups: this
        # also gives every policy set a RangerUserStoreEnricher (RangerBasePlugin.setPolicies) ...
        f"{prefix}.use.rangerGroups": "true",
        # ... whose poll interval setPolicies reads under this bare name
        "userStoreRefresherPollingInterval": str(POLL_MS),
    }
    rows = "".join(
        f"  <property><name>{name}</name><value>{value}</value></property>\n"
        for name, value in properties.items()
    )
    return f'<?xml version="1.0"?>\n<configuration>\n{rows}</configuration>\n'


class Probe:
    """One PluginProbe JVM: a command line in, one JSON line out."""

    def __init__(self, jar: Path, conf_dir: Path, stderr: Path) -> None:
        self.stderr = stderr
        with stderr.open("w") as err:
            self.process = subprocess.Popen(
                ["java", "-cp", f"{conf_dir}:{jar}", "tarn.lab.ranger.PluginProbe", APP_ID],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.ready = self._next()
        assert self.ready.get("ready") is True, self.ready

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put("")  # end of output: the JVM exited

    def _next(self) -> Json:
        try:
            line = self.lines.get(timeout=ANSWER_S)
        except queue.Empty:
            pytest.fail(f"the plugin probe did not answer in {ANSWER_S}s; its stderr:\n{self.log()[-4000:]}")
        if not line:
            self.process.wait(timeout=10)
            pytest.fail(
                f"the plugin probe exited {self.process.returncode}; its stderr:\n{self.log()[-4000:]}"
            )
        answer: Json = json.loads(line)
        return answer

    def ask(self, cmd: str, **fields: Any) -> Json:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"cmd": cmd, **fields}) + "\n")
        self.process.stdin.flush()
        answer = self._next()
        assert "error" not in answer, answer
        return answer

    def check(self, user: str, model: str, groups: tuple[str, ...] = (), access: str = "infer") -> Json:
        verdict = self.ask("check", user=user, groups=list(groups), model=model, access=access)
        return {k: verdict[k] for k in ("allowed", "policy_id")}

    def wait_version(self, at_least: int, of: str = "policies", timeout_ms: int = 4 * POLL_MS + 2000) -> Json:
        return self.ask("wait_version", of=of, at_least=at_least, timeout_ms=timeout_ms)

    def log(self) -> str:
        return self.stderr.read_text()

    def log_line(self, text: str) -> str:
        """The first line of the plugin's log with text in it, once it is there (a few seconds at most)."""
        deadline = time.monotonic() + 5
        while not (lines := [line for line in self.log().splitlines() if text in line]):
            if time.monotonic() > deadline:
                pytest.fail(f"no {text!r} in the plugin's log:\n{self.log()[-4000:]}")
            time.sleep(0.05)
        return lines[0]

    def stop(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            try:
                self.process.stdin.write('{"cmd": "stop"}\n')
                self.process.stdin.close()
                self.process.wait(timeout=20)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait(timeout=10)


@pytest.fixture(scope="module")
def probe_jar() -> Path:
    jar = harness_jar()
    with zipfile.ZipFile(jar) as archive:
        if "tarn/lab/ranger/PluginProbe.class" not in archive.namelist():
            pytest.fail(
                f"{jar} predates tarn.lab.ranger.PluginProbe: rebuild it with "
                "`lab/ranger-harness/build.sh build/ranger-harness` (make integration does)"
            )
    return jar


@pytest.fixture
def admin(tmp_path: Path) -> Iterator[Standin]:
    """The stand-in with the triton service def and the service triton_prod."""
    standin = start(tmp_path, tmp_path / "state.json")
    client = standin.client()
    client.create_service_def(service_def())
    client.create_service({"name": SERVICE, "type": "triton", "configs": {}})
    yield standin
    if standin.process.poll() is None:
        stop(standin)


@pytest.fixture
def plugins(probe_jar: Path, tmp_path: Path) -> Iterator[Launch]:
    """Starts probes (each with its own conf dir, all sharing one policy cache dir); stops them."""
    started: list[Probe] = []

    def launch(url: str, service: str = SERVICE) -> Probe:
        conf = tmp_path / f"conf{len(started)}"
        conf.mkdir()
        (conf / "ranger-triton-security.xml").write_text(
            security_xml(url, tmp_path / "policy-cache", service)
        )
        probe = Probe(probe_jar, conf, tmp_path / f"probe{len(started)}.stderr")
        started.append(probe)
        return probe

    yield launch
    for probe in started:
        probe.stop()


def policy(name: str, models: list[str], allow: Json, deny: Json | None = None) -> Json:
    """A policy on models: allow (and deny) items for infer, principals as {"users": [...], ...}."""
    body: Json = {
        "service": SERVICE,
        "name": name,
        "resources": {"model": {"values": models}},
        "policyItems": [{"accesses": [{"type": "infer"}], **allow}],
    }
    if deny:
        body["denyPolicyItems"] = [{"accesses": [{"type": "infer"}], **deny}]
    return body


def policy_version(client: RangerClient) -> int:
    version: int = client.get_service(SERVICE).policyVersion
    return version


def admin_versions(admin: Standin) -> tuple[int, int]:
    """(role version, user store version) as the stand-in's downloads say them."""
    roles = admin.get(f"/service/roles/download/{SERVICE}", lastKnownRoleVersion="-1").json()
    store = admin.get(f"/service/xusers/download/{SERVICE}", lastKnownUserStoreVersion="-1").json()
    return roles["roleVersion"], store["userStoreVersion"]


def plugin_requests(admin: Standin, endpoint: str, last_known: int, status: int) -> int:
    """How many of the plugin's downloads the stand-in logged: its request log is its stderr, which
    start() writes to ranger_admin.log beside the state file."""
    log = (admin.state.parent / "ranger_admin.log").read_text()
    pattern = rf'"GET /service/{endpoint}/{SERVICE}\?(?=[^"]*pluginId={APP_ID}@)'
    pattern += rf'(?=[^"]*lastKnown\w*Version={last_known}[& ])[^"]*" {status} '
    return len(re.findall(pattern, log))


def next_poll(admin: Standin, endpoint: str, last_known: int, status: int) -> int:
    """plugin_requests once the plugin has made one more such request (a few poll intervals at most)."""
    before = plugin_requests(admin, endpoint, last_known, status)
    deadline = time.monotonic() + 4 * POLL_MS / 1000 + 2
    count = before
    while count == before and time.monotonic() < deadline:
        time.sleep(0.05)
        count = plugin_requests(admin, endpoint, last_known, status)
    return count - before


def errors(probe: Probe) -> list[str]:
    """Ranger's ERROR log lines (slf4j-simple: "[thread] ERROR logger - message")."""
    return [line for line in probe.log().splitlines() if " ERROR " in line]


# --- policies -----------------------------------------------------------------------------------


def test_the_plugin_downloads_the_policies_polls_with_304_and_follows_an_update(
    admin: Standin, plugins: Launch
) -> None:
    client = admin.client()
    created = client.create_policy(policy("add", ["add_*"], {"users": ["alice"]}, deny={"users": ["bob"]}))
    version = policy_version(client)

    plugin = plugins(admin.url)
    assert (plugin.ready["service_name"], plugin.ready["rest_url"]) == (SERVICE, admin.url)
    assert plugin.ready["policy_version"] == version, "init() downloads before it returns"
    assert plugin.check("alice", "add_sub") == {"allowed": True, "policy_id": created.id}
    assert plugin.check("bob", "add_sub") == {"allowed": False, "policy_id": created.id}, "a deny item"
    assert plugin.check("alice", "mul_sub") == {"allowed": False, "policy_id": -1}, "no policy: denied"

    time.sleep(4 * POLL_MS / 1000)  # several polls, nothing changed
    assert plugin.ask("versions")["policy_version"] == version
    unchanged = plugin_requests(admin, "plugins/policies/download", version, 304)
    assert unchanged >= 2, "each poll of an unchanged version is a 304"
    assert plugin_requests(admin, "plugins/policies/download", version, 200) == 0
    assert plugin_requests(admin, "plugins/policies/download", -1, 200) == 1, "one full download at init()"
    assert not errors(plugin), errors(plugin)

    # The sleep above was a whole number of poll intervals, so the update lands just after a poll:
    # this measures about the longest wait, one interval plus the download and the engine build
    # (which, with a new engine, includes its user store enricher's first download).
    client.update_policy_by_id(created.id, policy("add", ["add_*"], {"users": ["bob"]}))
    updated_at = time.monotonic()
    assert policy_version(client) == version + 1
    seen = plugin.wait_version(version + 1)
    latency_ms = (time.monotonic() - updated_at) * 1000
    print(f"the Java plugin held the update after {latency_ms:.0f} ms (polling every {POLL_MS} ms)")
    assert seen["reached"], seen
    assert latency_ms < POLL_MS + 1500, "at most one poll interval, plus a download and an engine build"
    assert plugin.check("alice", "add_sub") == {"allowed": False, "policy_id": -1}
    assert plugin.check("bob", "add_sub") == {"allowed": True, "policy_id": created.id}
    assert plugin_requests(admin, "plugins/policies/download", version, 200) == 1

    client.delete_policy_by_id(created.id)  # no policy left: the download has no "policies" at all
    assert plugin.wait_version(version + 2)["reached"]
    assert plugin.check("bob", "add_sub") == {"allowed": False, "policy_id": -1}, "an empty engine"
    assert not errors(plugin), errors(plugin)


def test_a_plugin_for_an_unknown_service_ignores_the_404_and_holds_no_policies(
    admin: Standin, plugins: Launch
) -> None:
    plugin = plugins(admin.url, service="triton_dev")
    assert plugin.ready["policy_version"] == -1
    assert plugin.check("alice", "add_sub") == {"allowed": False, "policy_id": -1}
    assert "Received 404 error code with body" in plugin.log(), "RangerAdminRESTClient's 'Ignoring' branch"
    assert "RangerServiceNotFoundException" not in plugin.log()


def test_a_disabled_service_is_a_400_the_plugin_logs_and_keeps_its_policies(
    admin: Standin, plugins: Launch
) -> None:
    client = admin.client()
    add = client.create_policy(policy("add", ["add_*"], {"users": ["alice"]}))
    version = policy_version(client)
    plugin = plugins(admin.url)
    disabled = client.update_service(SERVICE, {"name": SERVICE, "type": "triton", "isEnabled": False})
    assert disabled.policyVersion == version + 1
    assert next_poll(admin, "plugins/policies/download", version, 400) == 1
    assert plugin.ask("versions")["policy_version"] == version
    assert plugin.check("alice", "add_sub") == {"allowed": True, "policy_id": add.id}
    # RESTResponse.fromClientResponse read the stand-in's body: its fields are in the warning
    warning = plugin.log_line(
        "WARN org.apache.ranger.admin.client.RangerAdminRESTClient - Error getting policies."
    )
    assert '"httpStatusCode":400,"statusCode":400,"msgDesc":"VXResponse=' in warning
    assert "msgDesc={Unauthorized access.}" in warning


# --- roles -----------------------------------------------------------------------------------------


def test_roles_created_through_the_api_reach_the_plugin(admin: Standin, plugins: Launch) -> None:
    client = admin.client()
    client.create_policy(policy("add", ["add_*"], {"users": ["alice"]}))
    plugin = plugins(admin.url)
    role_version, _store = admin_versions(admin)
    assert plugin.ask("roles") == {"roles": {}, "role_version": role_version}

    client.create_role(
        SERVICE, {"name": "ml-ops", "users": [{"name": "carol"}], "groups": [{"name": "analysts"}]}
    )
    new_role_version, _store = admin_versions(admin)
    assert new_role_version == role_version + 1
    assert plugin.wait_version(new_role_version, of="roles")["reached"]
    held = plugin.ask("roles")
    assert held == {
        "roles": {"ml-ops": {"users": ["carol"], "groups": ["analysts"]}},
        "role_version": new_role_version,
    }
    assert plugin_requests(admin, "roles/download", role_version, 200) == 1
    assert next_poll(admin, "roles/download", new_role_version, 304) == 1, "and it polls on with 304s"

    # the engine resolves a policy's role through the downloaded roles
    version = policy_version(client)
    llama = client.create_policy(policy("llama", ["llama*"], {"roles": ["ml-ops"]}))
    assert plugin.wait_version(version + 1)["reached"]
    assert plugin.check("carol", "llama-7b") == {"allowed": True, "policy_id": llama.id}
    assert plugin.check("dave", "llama-7b", groups=("analysts",)) == {"allowed": True, "policy_id": llama.id}
    assert plugin.check("alice", "llama-7b") == {"allowed": False, "policy_id": -1}

    # RangerAdminRESTClient.getRolesIfUpdated, called directly: the roles, then null for a 304
    fresh = plugin.ask("admin", call="roles", last_known=-1)
    assert fresh["updated"] is True
    assert (fresh["version"], sorted(fresh["roles"])) == (new_role_version, ["ml-ops"])
    assert plugin.ask("admin", call="roles", last_known=new_role_version)["updated"] is False
    assert not errors(plugin), errors(plugin)


# --- the user store ---------------------------------------------------------------------------------


def test_the_user_store_reaches_the_plugin_and_gives_requests_groups(admin: Standin, plugins: Launch) -> None:
    client = admin.client()
    ml = client.create_policy(policy("ml", ["ml_*"], {"groups": ["ml-team"]}))
    plugin = plugins(admin.url)
    _roles, store_version = admin_versions(admin)
    assert plugin.ready["userstore_version"] == store_version
    held = plugin.ask("user_store")
    assert (held["enricher"], held["version"]) == (True, store_version)
    assert held["user_groups"] == {"alice": ["ml-team"], "bob": ["analysts"]}
    assert {"alice", "bob", "carol", "admin"} <= set(held["users"])

    # alice asks with no groups: the user store's ml-team lets her in; bob's analysts does not
    assert plugin.check("alice", "ml_ranker") == {"allowed": True, "policy_id": ml.id}
    assert plugin.check("bob", "ml_ranker") == {"allowed": False, "policy_id": -1}
    assert plugin.check("bob", "ml_ranker", groups=("ml-team",)) == {"allowed": True, "policy_id": ml.id}

    # a principal created by a policy bumps the user store version; the enricher polls it in
    answer = requests.post(
        f"{admin.url}/service/public/v2/api/policy",
        params={"createPrincipalsIfAbsent": "true"},
        json=policy("dave", ["dave_*"], {"users": ["dave"]}),
        auth=("admin", PASSWORD),
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    _roles, new_store_version = admin_versions(admin)
    assert new_store_version == store_version + 1
    assert plugin.wait_version(new_store_version, of="userstore")["reached"]
    assert "dave" in plugin.ask("user_store")["users"]
    assert plugin_requests(admin, "xusers/download", store_version, 200) == 1
    assert next_poll(admin, "xusers/download", new_store_version, 304) == 1, "and it polls on with 304s"

    # RangerAdminRESTClient.getUserStoreIfUpdated, called directly
    fresh = plugin.ask("admin", call="user_store", last_known=-1)
    assert (fresh["updated"], fresh["version"]) == (True, new_store_version)
    assert fresh["user_groups"]["alice"] == ["ml-team"]
    assert plugin.ask("admin", call="user_store", last_known=new_store_version)["updated"] is False
    assert not errors(plugin), errors(plugin)


# --- Ranger Admin down --------------------------------------------------------------------------------


def test_with_admin_down_the_plugin_keeps_its_policies_and_a_new_one_starts_from_the_cache(
    admin: Standin, plugins: Launch, tmp_path: Path
) -> None:
    client = admin.client()
    client.create_role(SERVICE, {"name": "ml-ops", "users": [{"name": "carol"}]})
    add = client.create_policy(policy("add", ["add_*"], {"users": ["alice"]}, deny={"users": ["bob"]}))
    ml = client.create_policy(policy("ml", ["ml_*"], {"groups": ["ml-team"]}))
    llama = client.create_policy(policy("llama", ["llama*"], {"roles": ["ml-ops"]}))
    version = policy_version(client)
    role_version, store_version = admin_versions(admin)
    cases = [
        ("alice", "add_sub"),
        ("bob", "add_sub"),
        ("alice", "ml_ranker"),
        ("carol", "llama-7b"),
        ("bob", "x"),
    ]
    expected = [
        {"allowed": True, "policy_id": add.id},
        {"allowed": False, "policy_id": add.id},
        {"allowed": True, "policy_id": ml.id},  # alice's group from the user store
        {"allowed": True, "policy_id": llama.id},  # carol's role from the roles download
        {"allowed": False, "policy_id": -1},
    ]
    first = plugins(admin.url)
    assert [first.check(user, model) for user, model in cases] == expected
    held = {"policy_version": version, "role_version": role_version, "userstore_version": store_version}
    assert first.ask("versions") == held

    cache = tmp_path / "policy-cache"
    cached = json.loads((cache / f"{APP_ID}_{SERVICE}.json").read_text())
    assert (cached["serviceName"], cached["policyVersion"]) == (SERVICE, version)
    assert sorted(p["name"] for p in cached["policies"]) == ["add", "llama", "ml"]
    assert json.loads((cache / f"{APP_ID}_{SERVICE}_roles.json").read_text())["roleVersion"] == role_version
    cached_store = json.loads((cache / f"{APP_ID}_{SERVICE}_userstore.json").read_text())
    assert cached_store["userStoreVersion"] == store_version

    stop(admin)
    time.sleep(4 * POLL_MS / 1000)  # polls that fail
    first.log_line(
        f"failed to refresh policies. Will continue to use last known version of policies ({version})"
    )
    assert first.ask("versions") == held
    assert [first.check(user, model) for user, model in cases] == expected

    # a plugin starting while Admin is down: PolicyRefresher, RangerRolesProvider and the user
    # store refresher fall back to the files the first one wrote
    second = plugins(admin.url)
    assert {k: second.ready[k] for k in held} == held
    assert [second.check(user, model) for user, model in cases] == expected
