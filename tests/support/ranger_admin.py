"""The stand-in Ranger Admin (lab/ranger_admin.py) on 127.0.0.1, as the integration tests start
it: the lab's users, an admin password, a state file; and what a test sends it and reads back
(policies through the Admin API, the plugin downloads).

Its own tests: tests/integration/test_ranger_admin_standin.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import requests
from apache_ranger.client.ranger_client import RangerClient

from tests.support import ROOT

STANDIN = ROOT / "lab" / "ranger_admin.py"
SERVICE_DEF_FILE = ROOT / "src" / "tarn" / "ranger" / "triton-service-def.json"
PASSWORD = "it-admin-3c9e"  # noqa: S105 - the stand-in's, for the tests only
SERVICE = "triton_prod"
USERS = {
    "users": {"alice": {"groups": ["ml-team"]}, "bob": {"groups": ["analysts"]}, "carol": {}},
    "groups": {"analysts": {"attributes": {"dept": "bi"}}},
}
# What RangerAdminRESTClient.getServicePoliciesIfUpdated sends besides lastKnownVersion.
PLUGIN_PARAMS = {
    "lastActivationTime": "0",
    "pluginId": "triton@host-triton_prod",
    "clusterName": "",
    "supportsPolicyDeltas": "false",
    "pluginCapabilities": "7ffff",
}
Json = dict[str, Any]


def service_def() -> Json:
    """The triton service def as the user wrote it, with the "itemId"s Ranger requires (1, 2, ...,
    in order, as Ranger's own defs number them) wherever the file has none."""
    sdef: Json = json.loads(SERVICE_DEF_FILE.read_text())
    for key in ("resources", "accessTypes"):
        for number, item in enumerate(sdef[key], start=1):
            item.setdefault("itemId", number)
    return sdef


@dataclass
class Standin:
    url: str
    process: subprocess.Popen[str]
    state: Path

    def client(self) -> RangerClient:
        return RangerClient(self.url, ("admin", PASSWORD))

    def get(self, path: str, **params: str) -> requests.Response:
        return requests.get(f"{self.url}{path}", params=params, timeout=10)

    def admin_get(self, path: str) -> Json:
        """The JSON as sent: the client's model classes drop fields they do not know."""
        answer = requests.get(f"{self.url}/service/public/v2/api{path}", auth=("admin", PASSWORD), timeout=10)
        answer.raise_for_status()
        body: Json = answer.json()
        return body

    def download(self, last_known: int, service: str = SERVICE, **params: str) -> requests.Response:
        query = {**PLUGIN_PARAMS, "lastKnownVersion": str(last_known), **params}
        return self.get(f"/service/plugins/policies/download/{service}", **query)


def start(tmp_path: Path, state: Path) -> Standin:
    users = tmp_path / "users.json"
    users.write_text(json.dumps(USERS))
    command = [sys.executable, str(STANDIN), "--host", "127.0.0.1", "--port", "0", "--users", str(users)]
    command += ["--admin-password", PASSWORD, "--state", str(state)]
    log = (tmp_path / "ranger_admin.log").open("a")
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.startswith("ranger_admin: listening on 127.0.0.1:"), (
        line,
        (tmp_path / "ranger_admin.log").read_text(),
    )
    return Standin(f"http://127.0.0.1:{line.rsplit(':', 1)[1].strip()}", process, state)


def stop(standin: Standin) -> None:
    standin.process.terminate()
    standin.process.wait(timeout=10)


# ---- what the tests send and read back

Item = tuple[Sequence[str], Sequence[str], Sequence[str]]  # users, groups, accesses


def policy(
    name: str,
    models: list[str],
    allow: Sequence[Item] = (),
    deny: Sequence[Item] = (),
    deny_exceptions: Sequence[Item] = (),
    override: bool = False,
) -> Json:
    def items(given: Sequence[Item]) -> list[Json]:
        return [
            {"users": list(u), "groups": list(g), "accesses": [{"type": a} for a in a_]} for u, g, a_ in given
        ]

    return {
        "service": SERVICE,
        "name": name,
        "policyPriority": 1 if override else 0,
        "resources": {"model": {"values": models}},
        "policyItems": items(allow),
        "denyPolicyItems": items(deny),
        "denyExceptions": items(deny_exceptions),
    }


class PluginDownloads(Protocol):
    """A Ranger Admin's plugin downloads: the stand-in on loopback (tests/integration) or on a lab node."""

    def get(self, path: str, **params: str) -> requests.Response: ...


def served(admin: PluginDownloads) -> tuple[Json, Json, dict[str, list[str]]]:
    """The policies, roles and user → groups Admin serves its plugins."""
    get: Callable[[str, str], Json] = lambda path, version: admin.get(path, **{version: "-1"}).json()  # noqa: E731
    policies = get(f"/service/plugins/policies/download/{SERVICE}", "lastKnownVersion")
    roles = get(f"/service/roles/download/{SERVICE}", "lastKnownRoleVersion")
    groups = get(f"/service/xusers/download/{SERVICE}", "lastKnownUserStoreVersion")["userGroupMapping"]
    return policies, roles, groups
