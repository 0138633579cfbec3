"""tarn_ranger: options in, tarn.ranger.registration over a fake Ranger Admin, results out (the
reconcile itself: tests/unit/ranger/test_registration.py; against the stand-in Admin:
tests/integration/test_ranger_role.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.tarn.yarn.plugins.modules import tarn_ranger

from tests.support.ranger_fake_admin import FakeAdmin

ROOT = Path(__file__).resolve().parents[4]
PASSWORD = "admin-s3cret"  # noqa: S105 - a test value
ARGS = {"url": "http://ranger:6080", "admin_password": PASSWORD}
POLICY = {
    "name": "alice-add",
    "resources": {"model": ["add_*"]},
    "policyItems": [{"users": ["alice"], "accesses": ["list"]}],
}


@pytest.fixture
def ranger_module(monkeypatch: pytest.MonkeyPatch, call_main: Any):
    """ranger_module(args, admin, check_mode=False, diff=False) -> the module's result."""

    def run(
        args: dict[str, Any], admin: FakeAdmin, check_mode: bool = False, diff: bool = False
    ) -> dict[str, Any]:
        monkeypatch.setattr(tarn_ranger, "ranger_admin", lambda module: admin)
        result: dict[str, Any] = call_main(tarn_ranger, {**ARGS, **args}, check_mode, diff)
        assert PASSWORD not in json.dumps(result), "the admin password is never returned"
        return result

    return run


def test_registers_then_changes_nothing(ranger_module) -> None:
    admin = FakeAdmin()
    first = ranger_module({"policies": [POLICY], "service_configs": {"password": "x"}}, admin, diff=True)
    assert first["changed"] is True
    assert first["actions"] == [
        "create service def triton",
        "create service triton_prod",
        "create policy alice-add",
    ]
    assert first["service_def"] == {"id": 1, "name": "triton", "version": 1}
    assert first["service"] == {"id": 2, "name": "triton_prod", "type": "triton", "policyVersion": 1}
    assert first["policies"] == [{"id": 3, "version": 1, "name": "alice-add", "action": "create"}]
    assert first["diff"]["before"] == {"service_def": {}, "service": {}, "policies": {}}
    assert first["diff"]["after"]["service"]["configs"] == {"password": "*****"}

    second = ranger_module({"policies": [POLICY]}, admin)
    assert (second["changed"], second["actions"], "diff" in second) == (False, [], False)


def test_check_mode_writes_nothing(ranger_module) -> None:
    admin = FakeAdmin()
    result = ranger_module({"policies": [POLICY], "service": "triton_dev"}, admin, check_mode=True)
    assert result["changed"] is True
    assert result["actions"] == [
        "create service def triton",
        "create service triton_dev",
        "create policy alice-add",
    ]
    assert admin.writes == []


def test_a_failure_reports_what_was_done_before_it(ranger_module) -> None:
    mallory = {**POLICY, "name": "mallory", "policyItems": [{"users": ["mallory"], "accesses": ["list"]}]}
    result = ranger_module({"policies": [POLICY, mallory]}, FakeAdmin())
    assert result["failed"] is True
    assert "policy 'mallory' names the user 'mallory'" in result["msg"]
    assert result["changed"] is True
    assert result["actions"][-1] == "create policy alice-add"


def test_a_bad_option_fails_before_anything_is_sent(ranger_module) -> None:
    admin = FakeAdmin()
    result = ranger_module({"policies": [{"name": "p"}]}, admin)
    assert result["failed"] is True
    assert result["msg"].startswith("policies: policy 'p': resources are needed")
    assert (result["changed"], result["actions"], admin.calls) == (False, [], [])


def test_ansible_doc_renders_the_module() -> None:
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(ROOT / "build" / "collections")}
    done = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-doc"), "tarn.yarn.tarn_ranger"],
        capture_output=True, text=True, timeout=120, check=False, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    for section in ("OPTIONS", "EXAMPLES", "RETURN VALUES", "admin_password"):
        assert section in done.stdout
