"""The controller's Ranger plugin at run time: the Admin client against a loopback server, and the
refresher with a scripted Admin and a real cache directory (against the stand-in Ranger Admin,
tests/support/ranger_admin.py: tests/integration/test_ranger_controller.py)."""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tarn.ranger.admin import AdminUnreachable, RangerAdmin, RangerAdminError
from tarn.ranger.cache import CacheError, PolicyCache
from tarn.ranger.refresher import Refresher
from tarn.ranger.settings import PluginSettings
from tarn.ranger.state import Documents, verdict
from tests.support import loopback
from tests.support.ranger_documents import BASIC, SERVICE, USERS, allow, policies, roles

JSON = dict[str, Any]
SETTINGS = PluginSettings(service=SERVICE, app_id="tarn", rest_urls=("http://unused",), poll_interval_s=0.1)


# ---- the client, against a loopback "Admin"


class Seen:
    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.answers: dict[str, tuple[int, Any]] = {}


def admin_server(seen: Seen) -> ThreadingHTTPServer:
    class Handler(loopback.QuietHandler):
        def do_GET(self) -> None:
            url = urlsplit(self.path)
            seen.requests.append((url.path, {k: v[0] for k, v in parse_qs(url.query).items()}))
            # every plugin path ends in /download/<service>
            status, body = seen.answers.get(url.path.rsplit("/", 2)[-2], (500, {"msgDesc": "no answer"}))
            if status == 304:
                self.send_response(304)
                self.end_headers()
            elif isinstance(body, str):
                payload = body.encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            else:
                loopback.reply_json(self, status, body)

    return loopback.serve(Handler)


@pytest.fixture
def seen() -> Iterator[tuple[Seen, str]]:
    state = Seen()
    server = admin_server(state)
    yield state, loopback.url(server)
    server.shutdown()


def client(*urls: str) -> RangerAdmin:
    return RangerAdmin(urls, SERVICE, "tarn@host-triton_prod", "prod", timeout=(1.0, 2.0))


def test_downloads_send_what_ranger_s_client_sends(seen: tuple[Seen, str]) -> None:
    state, url = seen
    state.answers = {"download": (200, BASIC)}
    admin = client(url)
    assert admin.policies(2, 1_700_000_000_000) == BASIC
    path, query = state.requests[-1]
    assert path == f"/service/plugins/policies/download/{SERVICE}"
    assert query == {
        "lastKnownVersion": "2",
        "lastActivationTime": "1700000000000",
        "pluginId": "tarn@host-triton_prod",
        "clusterName": "prod",
        "supportsPolicyDeltas": "false",
    }
    state.answers = {"download": (304, None)}
    assert admin.policies(3, 0) is None
    assert admin.roles(7, 0) is None
    assert state.requests[-1] == (
        f"/service/roles/download/{SERVICE}",
        {"lastKnownRoleVersion": "7", "lastActivationTime": "0", "pluginId": "tarn@host-triton_prod",
         "clusterName": "prod"},
    )  # fmt: skip
    assert admin.user_store(-1, 0) is None
    assert state.requests[-1][0] == f"/service/xusers/download/{SERVICE}"
    assert state.requests[-1][1]["lastKnownUserStoreVersion"] == "-1"


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        ((404, {"statusCode": 404, "msgDesc": '"RANGER_ERROR_SERVICE_NOT_FOUND: ServiceName=triton_prod"'}),
         "Ranger Admin has no service 'triton_prod' (404); create it, or fix --ranger-service"),
        ((400, {"statusCode": 1, "msgDesc": "Unauthorized access."}), "answered 400: Unauthorized access."),
        ((200, "<html>not json</html>"), "the answer is not JSON"),
        ((200, [1, 2]), "the answer is not a JSON object"),
    ],
)  # fmt: skip
def test_refusals_are_one_line_errors(seen: tuple[Seen, str], answer: tuple[int, Any], words: str) -> None:
    state, url = seen
    state.answers = {"download": answer}
    with pytest.raises(RangerAdminError) as raised:
        client(url).policies(-1, 0)
    assert words in str(raised.value)
    assert not isinstance(raised.value, AdminUnreachable)


def test_failover_to_the_next_admin_and_remember_it(seen: tuple[Seen, str]) -> None:
    state, url = seen
    state.answers = {"download": (200, BASIC)}
    dead = "http://127.0.0.1:9"  # discard: nothing listens
    admin = client(dead, url)
    assert admin.policies(-1, 0) == BASIC
    assert admin.policies(-1, 0) == BASIC
    assert admin._urls == [url, dead]
    with pytest.raises(
        AdminUnreachable, match=r"^no Ranger Admin answered \(http://127.0.0.1:9: ConnectionError\)$"
    ):
        client(dead).policies(-1, 0)
    state.answers = {}  # every answer a 500: the next URL, then unreachable
    with pytest.raises(AdminUnreachable, match=": 500"):
        client(url).policies(-1, 0)


# ---- the refresher, with a scripted Admin


class ScriptedAdmin:
    """Answers each download with its document (BASIC, the roles given, USERS) unless the version
    asked is the document's (None: unchanged); ``down`` refuses all."""

    def __init__(self, roles: JSON | None = None) -> None:
        self.documents: dict[str, JSON | None] = {"policies": BASIC, "roles": roles, "user store": USERS}
        self.down = False
        self.calls: list[tuple[str, int, int]] = []

    def _answer(self, name: str, version: int, activated: int, key: str) -> JSON | None:
        self.calls.append((name, version, activated))
        if self.down:
            raise AdminUnreachable("no Ranger Admin answered (http://ranger:6080: ConnectionError)")
        document = self.documents[name]
        return None if document is None or document.get(key) == version else document

    def policies(self, last_known_version: int, last_activation_ms: int) -> JSON | None:
        return self._answer("policies", last_known_version, last_activation_ms, "policyVersion")

    def roles(self, last_known_version: int, last_activation_ms: int) -> JSON | None:
        return self._answer("roles", last_known_version, last_activation_ms, "roleVersion")

    def user_store(self, last_known_version: int, last_activation_ms: int) -> JSON | None:
        return self._answer("user store", last_known_version, last_activation_ms, "userStoreVersion")


def clock() -> list[float]:
    return [1_750_000_000.0]


def test_fail_closed_then_load_then_keep_the_last_good_policies() -> None:
    admin, now = ScriptedAdmin(), clock()
    refresher = Refresher(SETTINGS, admin, wall=lambda: now[0])
    admin.down = True
    state = refresher.refresh()
    assert not verdict(state, "alice", "add_one", "list").allowed
    assert admin.calls == [("policies", -1, 0)], "an unreachable Admin is not asked twice in one poll"

    admin.down = False
    now[0] += 1
    state = refresher.refresh()
    assert verdict(state, "alice", "add_one", "list").allowed
    assert (state.source, state.error, state.failures) == ("admin", None, 1)

    admin.calls.clear()
    now[0] += 1
    refresher.refresh()
    activated = int((now[0] - 1) * 1000)
    assert admin.calls == [("policies", 3, activated), ("roles", -1, activated), ("user store", 1, activated)]

    admin.down = True
    state = refresher.refresh()
    assert verdict(state, "alice", "add_one", "list").allowed, "Admin down: the last good policies stay"
    assert (state.failures, state.error) == (
        2,
        "no Ranger Admin answered (http://ranger:6080: ConnectionError)",
    )


def test_a_download_that_fails_alone_does_not_stop_the_others() -> None:
    class NoUserStore(ScriptedAdmin):
        def user_store(self, last_known_version: int, last_activation_ms: int) -> JSON | None:
            raise RangerAdminError("/service/xusers/download/triton_prod answered 404: Not found")

    state = Refresher(SETTINGS, NoUserStore()).refresh()
    assert state.loaded
    assert state.error == "user store: /service/xusers/download/triton_prod answered 404: Not found"
    assert not verdict(state, "alice", "add_one", "list").allowed, "no user store: alice is in no group"
    assert verdict(state, "bob", "linear_onnx", "list").allowed


def test_the_cache_is_written_in_ranger_s_files_and_read_when_admin_is_down(tmp_path: Path) -> None:
    cache = PolicyCache(tmp_path / "policycache", "tarn", SERVICE)
    first = Refresher(SETTINGS, ScriptedAdmin(roles=roles(2)), cache)
    first.refresh()
    names = sorted(p.name for p in (tmp_path / "policycache").iterdir())
    assert names == [
        "tarn_triton_prod.json",
        "tarn_triton_prod_roles.json",
        "tarn_triton_prod_userstore.json",
    ]
    assert json.loads(cache.policies_file.read_text()) == BASIC
    assert stat.S_IMODE(cache.policies_file.stat().st_mode) == 0o600

    down = ScriptedAdmin()
    down.down = True
    second = Refresher(SETTINGS, down, cache)
    state = second.load_cache()
    assert (state.source, state.documents) == ("cache", Documents(BASIC, roles(2), USERS))
    assert verdict(state, "alice", "add_one", "list").allowed
    assert second.refresh().loaded, "a failed poll keeps the cache's policies"
    assert down.calls[0] == ("policies", 3, down.calls[0][2]), "the cache's versions are asked for"


def test_a_cache_for_another_service_or_garbage_is_not_used(tmp_path: Path) -> None:
    cache = PolicyCache(tmp_path, "tarn", SERVICE)
    cache.policies_file.write_text(json.dumps(policies(1, service="triton_dev")))
    with pytest.raises(CacheError, match="holds service 'triton_dev', not 'triton_prod'"):
        cache.load()
    state = Refresher(SETTINGS, ScriptedAdmin(), cache).load_cache()
    assert (state.loaded, state.cache_problem is not None) == (False, True)
    cache.policies_file.write_text("{not json")
    with pytest.raises(CacheError, match="is unreadable"):
        cache.load()


def test_a_cache_that_cannot_be_written_is_reported_not_fatal(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    refresher = Refresher(
        SETTINGS, ScriptedAdmin(), PolicyCache(tmp_path / "file" / "cache", "tarn", SERVICE)
    )
    state = refresher.refresh()
    assert state.loaded
    assert state.cache_problem is not None
    assert state.cache_problem.startswith("cache not written: ")


def test_the_thread_polls_at_the_interval_and_stops() -> None:
    admin = ScriptedAdmin()
    refresher = Refresher(SETTINGS, admin)
    refresher.start()
    try:
        newer = policies(4, allow(1, ["*"], ["list"], users=["carol"]))
        admin.documents["policies"] = newer
        for _attempt in range(100):
            if refresher.state.documents.policy_version == 4:
                break
            refresher._stop.wait(0.05)
        assert verdict(refresher.state, "carol", "anything", "list").allowed
    finally:
        refresher.stop()
    assert refresher._thread is not None
    assert not refresher._thread.is_alive()
