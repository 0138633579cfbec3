"""Module tests: the collection is importable as ansible_collections.tarn.yarn (make deps links
the checkout under build/collections); each module runs in-process with a fake cluster."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tarn.errors import ClusterError
from tests.support.memory_hdfs import MemoryHdfs

ROOT = Path(__file__).resolve().parents[3]
COLLECTIONS = ROOT / "build" / "collections"
if not (COLLECTIONS / "ansible_collections" / "tarn" / "yarn").exists():
    pytest.fail(f"{COLLECTIONS}/ansible_collections/tarn/yarn is missing: run make deps", pytrace=False)
sys.path.insert(0, str(COLLECTIONS))


FakeHdfs = MemoryHdfs  # the modules' tests import it from here


class Exit(Exception):
    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__(result)
        self.result = result


class FakeRM:
    """The RM's Services API over an in-memory service: records every call that changes something."""

    configured_urls = ("http://rm1:8088", "http://rm2:8088")

    def __init__(
        self, service: dict[str, Any] | None = None, stable_after: int = 0, failing_upgrade: str = ""
    ) -> None:
        self.services = {service["name"]: copy.deepcopy(service)} if service else {}
        self.calls: list[tuple[str, ...]] = []
        self.stable_after = stable_after  # reads before a STARTED service becomes STABLE
        self.failing_upgrade = failing_upgrade  # an instance YARN fails to upgrade

    def service(self, name: str) -> dict[str, Any] | None:
        found = self.services.get(name)
        if found and found["state"] == "STARTED":
            self.stable_after -= 1
            if self.stable_after < 0:
                found["state"] = "STABLE"
        return copy.deepcopy(found) if found else None

    def nodes(self) -> list[dict[str, Any]]:
        """One NodeManager with 8 GPUs, as /ws/v1/cluster/nodes shows it."""
        resources = [{"name": "memory-mb", "value": 65536}, {"name": "yarn.io/gpu", "value": 8}]
        return [
            {
                "state": "RUNNING",
                "totalResource": {"resourceInformations": {"resourceInformation": resources}},
            }
        ]

    def create_service(self, spec: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("create", spec["name"]))
        self.services[spec["name"]] = running(spec)
        return {"diagnostics": "ok"}

    def flex(self, name: str, component: str, count: int) -> dict[str, Any]:
        self.calls.append(("flex", component, str(count)))
        for item in self.services[name]["components"]:
            if item["name"] == component:
                item["number_of_containers"] = count
                item["containers"] = containers(component, count)
        return {"diagnostics": "ok"}

    def set_state(self, name: str, state: str) -> dict[str, Any]:
        self.calls.append(("state", state))
        self.services[name]["state"] = "STOPPED" if state == "STOPPED" else "STABLE"
        return {}

    def destroy(self, name: str) -> bool:
        self.calls.append(("destroy", name))
        return self.services.pop(name, None) is not None

    def initiate_upgrade(self, spec: dict[str, Any]) -> dict[str, Any]:
        """As YARN: the instances of the components that changed are NEEDS_UPGRADE; the new spec
        becomes the service's once each was upgraded (auto-finalize)."""
        self.calls.append(("upgrade", spec["version"]))
        current = self.services[spec["name"]]
        if current["state"] != "STABLE":  # YARN's ServiceClient answers 400 with these words
            raise ClusterError(
                f"PUT /app/v1/services/{spec['name']} answered 400: {spec['name']} is at "
                f"{current['state']} state and upgrade can only be initiated when service is STABLE."
            )
        old = {c["name"]: c for c in current["components"]}
        shown = {c["name"]: c for c in running(spec)["components"]}
        for item in spec["components"]:
            before = {k: v for k, v in old[item["name"]].items() if k in item and k != "number_of_containers"}
            if before != {k: v for k, v in shown[item["name"]].items() if k in before}:
                for container in old[item["name"]]["containers"]:
                    container["state"] = "NEEDS_UPGRADE"
        current["state"] = "UPGRADING_AUTO_FINALIZE"
        self.pending = spec
        return {}

    def upgrade_instance(self, name: str, component: str, instance: str) -> None:
        self.calls.append(("upgrade-instance", instance))
        current = self.services[name]
        for item in current["components"]:
            for container in item["containers"]:
                if container["component_instance_name"] == instance:
                    container["state"] = "FAILED_UPGRADE" if instance == self.failing_upgrade else "READY"
        if all(c["state"] == "READY" for item in current["components"] for c in item["containers"]):
            upgraded = running(self.pending)
            for item, before in zip(upgraded["components"], current["components"], strict=True):
                item["number_of_containers"] = before["number_of_containers"]
                item["containers"] = before["containers"]
            self.services[name] = upgraded


def containers(component: str, count: int) -> list[dict[str, Any]]:
    return [
        {"id": f"container_1_0001_01_{i:06d}", "component_instance_name": f"{component}-{i}",
         "hostname": f"worker{i + 1}", "ip": f"10.0.0.{i + 1}", "state": "READY"}
        for i in range(count)
    ]  # fmt: skip


def running(spec: dict[str, Any]) -> dict[str, Any]:
    """A spec as the RM shows it once running: runtime fields and the RM's own additions."""
    service = copy.deepcopy(spec)
    service.update(id="application_1_0001", state="STABLE", lifetime=-1, quicklinks={}, kerberos_principal={})
    for item in service["components"]:
        item.update(state="STABLE", dependencies=[], quicklinks=[], run_privileged_container=False)
        item["containers"] = containers(item["name"], item.get("number_of_containers", 0))
        item["resource"]["additional"] = {
            k: {**v, "attributes": {}, "tags": []} for k, v in item["resource"].get("additional", {}).items()
        }
        for file in item["configuration"]["files"]:
            file["properties"] = {}
    return service


@pytest.fixture
def call_main(monkeypatch: pytest.MonkeyPatch):
    """call_main(module, args, check_mode=False, diff=False) -> what the module's main() returned
    (exit_json or fail_json), checked to be JSON as a module's result must be."""
    from ansible.module_utils import basic
    from ansible.module_utils.testing import patch_module_args

    def exit_json(self: Any, **result: Any) -> None:
        raise Exit(result)

    def fail_json(self: Any, **result: Any) -> None:
        raise Exit({**result, "failed": True})

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)

    def call(
        module: Any, args: dict[str, Any], check_mode: bool = False, diff: bool = False
    ) -> dict[str, Any]:
        internal = {"_ansible_check_mode": check_mode, "_ansible_diff": diff}
        with patch_module_args({**args, **internal}), pytest.raises(Exit) as raised:
            module.main()
        result: dict[str, Any] = raised.value.result
        json.dumps(result)
        return result

    return call


@pytest.fixture
def run_module(monkeypatch: pytest.MonkeyPatch, call_main: Any):
    """run_module(module, args, rm, hdfs, check_mode=False, diff=False) -> the module's result."""
    from tarn.service import Cluster

    def run(module: Any, args: dict[str, Any], rm: FakeRM, hdfs: FakeHdfs | None = None,
            check_mode: bool = False, diff: bool = False) -> dict[str, Any]:  # fmt: skip
        cluster = Cluster(rm=rm, hdfs=hdfs or FakeHdfs(), user="tarn")  # type: ignore[arg-type]
        monkeypatch.setattr(module, "connect", lambda m: cluster)
        result: dict[str, Any] = call_main(module, args, check_mode, diff)
        return result

    return run


@pytest.fixture(autouse=True)
def no_controller(monkeypatch: pytest.MonkeyPatch) -> None:
    """Module tests talk to no server: the controller a fake service names (worker1:8888) is
    unreachable here, as it would be with the controller down. Tests that drain replace it."""
    from tarn import service as tarn_service

    class Unreachable:
        def __init__(self, url: str, *args: Any, **kwargs: Any) -> None:
            self.url = url

        def __getattr__(self, name: str) -> Any:
            raise ClusterError(f"controller {self.url}: not reachable from unit tests")

    monkeypatch.setattr(tarn_service.drain, "ControllerClient", Unreachable)
