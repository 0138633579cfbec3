"""tarn_deploy against a fake RM: one table of states, existing services and changes."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from ansible_collections.tarn.yarn.plugins.modules import tarn_deploy

from tarn import service as tarn_service
from tarn.stdlib.config import parse_config

from ..conftest import FakeHdfs, FakeRM, running

BASE: dict[str, Any] = {
    "service_name": "mod-unit", "user": "tarn", "rm_url": ["http://rm:8088"], "webhdfs_url": "http://nn:9870",
    "runtime": "process", "model_repository": "hdfs:///user/tarn/models", "min_instances": 1,
    "max_instances": 2, "token": "unit-token-123",
}  # fmt: skip
ARGV = [
    "--service-name", "mod-unit", "--user", "tarn", "--runtime", "process",
    "--model-repository", "hdfs:///user/tarn/models", "--min-instances", "1", "--max-instances", "2",
    "--token", "unit-token-123",
]  # fmt: skip


def deployed(count: int = 1, state: str = "STABLE") -> dict[str, Any]:
    """The service BASE describes, as the RM shows it running with `count` Triton instances."""
    desired = tarn_service.desired_service(parse_config(ARGV, {}), "tarn", {}, FakeRM.configured_urls)
    service = running(desired.spec)
    service["state"] = state
    triton = service["components"][1]
    triton["number_of_containers"] = count
    triton["containers"] = [
        dict(triton["containers"][0], component_instance_name=f"triton-{i}") for i in range(count)
    ]
    return service


@pytest.fixture(autouse=True)
def no_drain(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    drained: list[str] = []

    class Controller:
        def __init__(self, url: str, token: Any = None) -> None:
            assert token is not None
            assert token.reveal() == BASE["token"]

        def drain(self, instance: str, timeout: float = 0) -> dict[str, Any]:
            drained.append(instance)
            return {"instance": instance, "drained": True}

        def undrain(self, instance: str) -> None:
            pass

        def instances(self) -> dict[str, Any]:
            return {"instances": [{"instance": f"triton-{n}", "registered": True} for n in range(4)]}

    monkeypatch.setattr(tarn_service.drain, "ControllerClient", Controller)
    return drained


CASES = [
    # id, existing service, extra args, check mode, changed, actions, RM calls (kinds)
    ("create", None, {}, False, True, ["create"], ["create"]),
    ("create-check", None, {}, True, True, ["create"], []),
    ("unchanged", deployed(), {}, False, False, [], []),
    ("unchanged-scaled-up-by-controller", deployed(2), {}, False, False, [], []),
    ("below-min-flexes", deployed(1), {"min_instances": 2}, False, True,
     ["upgrade controller", "flex triton to 2"], ["upgrade", "upgrade-instance", "flex"]),
    ("env-upgrades-triton", deployed(2), {"env": {"A": "b"}}, False, True, ["upgrade triton"],
     ["upgrade", "upgrade-instance", "upgrade-instance"]),
    ("env-check", deployed(2), {"env": {"A": "b"}}, True, True, ["upgrade triton"], []),
    ("start", deployed(1, "STOPPED"), {"state": "started"}, False, True, ["start"], ["state"]),
    ("present-leaves-stopped", deployed(1, "STOPPED"), {"state": "present"}, False, False, [], []),
    ("stop", deployed(), {"state": "stopped"}, False, True, ["stop"], ["state"]),
    ("stop-stopped", deployed(1, "STOPPED"), {"state": "stopped"}, False, False, [], []),
    ("stop-missing", None, {"state": "stopped"}, False, False, [], []),
    ("absent", deployed(), {"state": "absent"}, False, True, ["destroy"], ["destroy"]),
    ("absent-check", deployed(), {"state": "absent"}, True, True, ["destroy"], []),
    ("absent-missing", None, {"state": "absent"}, False, False, [], []),
]  # fmt: skip


@pytest.mark.parametrize(
    ("existing", "extra", "check", "changed", "actions", "calls"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_deploy(run_module, existing, extra, check, changed, actions, calls) -> None:
    rm = FakeRM(copy.deepcopy(existing))
    hdfs = FakeHdfs()
    result = run_module(tarn_deploy, {**BASE, **extra}, rm, hdfs, check_mode=check, diff=True)
    assert not result.get("failed"), result
    assert result["changed"] is changed
    assert result["actions"] == actions
    assert [call[0] for call in rm.calls] == calls
    assert BASE["token"] not in str(result)
    if check:
        assert hdfs.files == {}
    if changed:
        assert result["diff"]["before"] != result["diff"]["after"]


def test_upgrade_drains_each_triton_instance_first(run_module, no_drain: list[str]) -> None:
    rm = FakeRM(deployed(2))
    result = run_module(tarn_deploy, {**BASE, "env": {"TARN_IMAGE_STANDIN": "v2"}}, rm)
    assert no_drain == ["triton-0", "triton-1"]
    upgraded = [c for c in rm.calls if c[0] == "upgrade-instance"]
    assert upgraded == [("upgrade-instance", "triton-0"), ("upgrade-instance", "triton-1")]
    assert result["state"] == "STABLE"
    assert "TARN_IMAGE_STANDIN" in str(rm.service("mod-unit"))
    again = run_module(tarn_deploy, {**BASE, "env": {"TARN_IMAGE_STANDIN": "v2"}}, rm)
    assert not again["changed"]


def test_upgrade_drains_the_next_instance_only_once_the_last_is_registered_again(
    run_module, monkeypatch: pytest.MonkeyPatch
) -> None:
    """YARN's READY comes before the controller registers the instance: until it does, the next
    drain would leave discovery one instance short (seen through HAProxy: 8 s with none)."""
    events: list[str] = []

    class Controller:
        def __init__(self, url: str, token: Any = None) -> None:
            self.polls = 0

        def drain(self, instance: str, timeout: float = 0) -> dict[str, Any]:
            events.append(f"drain {instance}")
            return {"instance": instance, "drained": True}

        def undrain(self, instance: str) -> None:
            events.append(f"undrain {instance}")
            self.polls = 0

        def instances(self) -> dict[str, Any]:
            self.polls += 1  # registered from the third look on
            events.append(f"registered {self.polls >= 3}")
            return {
                "instances": [{"instance": f"triton-{n}", "registered": self.polls >= 3} for n in range(2)]
            }

    monkeypatch.setattr(tarn_service.drain, "ControllerClient", Controller)
    result = run_module(tarn_deploy, {**BASE, "env": {"TARN_IMAGE_STANDIN": "v2"}}, FakeRM(deployed(2)))
    assert not result.get("failed"), result.get("msg")
    assert events == [
        "drain triton-0", "undrain triton-0", "registered False", "registered False", "registered True",
        "drain triton-1", "undrain triton-1", "registered False", "registered False", "registered True",
    ]  # fmt: skip


def test_upgrade_waits_for_a_stable_service(run_module) -> None:
    """YARN refuses an upgrade while it replaces a container (STARTED): the deploy waits it out."""
    rm = FakeRM(deployed(2, "STARTED"), stable_after=3)
    result = run_module(tarn_deploy, {**BASE, "env": {"TARN_IMAGE_STANDIN": "v2"}}, rm)
    assert not result.get("failed"), result.get("msg")
    assert result["state"] == "STABLE"
    assert "TARN_IMAGE_STANDIN" in str(rm.service("mod-unit"))


def test_upgrade_of_a_service_never_stable_names_the_wait(run_module) -> None:
    rm = FakeRM(deployed(2, "STARTED"), stable_after=10**6)
    result = run_module(tarn_deploy, {**BASE, "env": {"A": "b"}, "wait_timeout": 1}, rm)
    assert result["failed"]
    assert "STABLE, as YARN upgrades only a stable service" in result["msg"]
    assert [c for c in rm.calls if c[0] == "upgrade"] == []


def test_an_instance_yarn_fails_to_upgrade_fails_the_deploy_at_once(run_module) -> None:
    rm = FakeRM(deployed(2), failing_upgrade="triton-0")
    result = run_module(tarn_deploy, {**BASE, "env": {"A": "b"}, "wait_timeout": 600}, rm)
    assert result["failed"]
    assert "YARN failed to upgrade triton-0 (FAILED_UPGRADE" in result["msg"]
    assert [c for c in rm.calls if c[0] == "upgrade-instance"] == [("upgrade-instance", "triton-0")]


def test_create_uploads_code_and_token(run_module) -> None:
    hdfs = FakeHdfs()
    run_module(tarn_deploy, BASE, FakeRM(), hdfs)
    base = "/user/tarn/.tarn/mod-unit"
    assert sorted(hdfs.files) == [f"{base}/tarn-launcher.pyz", f"{base}/tarn.pyz", f"{base}/token"]
    assert hdfs.files[f"{base}/token"] == b"unit-token-123"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"min_instances": 3}, "min_instances: 3 is above --max-instances"),
        ({"model_repository": "relative/path"}, "model_repository:"),
        ({"env": {"TARN_TOKEN": "x"}}, "env: TARN_TOKEN is set by TARN"),
        ({"state": "started", "model_repository": None}, "model_repository"),
    ],
)
def test_bad_options_name_the_option(run_module, extra, message) -> None:
    result = run_module(tarn_deploy, {**BASE, **extra}, FakeRM())
    assert result["failed"]
    assert message in result["msg"]


def test_spec_change_to_a_stopped_service_fails(run_module) -> None:
    rm = FakeRM(deployed(1, "STOPPED"))
    result = run_module(tarn_deploy, {**BASE, "state": "present", "env": {"A": "b"}}, rm)
    assert result["failed"]
    assert "start it first" in result["msg"]
