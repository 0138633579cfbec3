"""The controller acts only on a view it can trust (issue 11): an RM that restarts, fails over or
has not heard from the AM yet answers a stub, an error or nothing; none of these may deregister
a serving instance, flex, decommission or drop a drain. The stub's shape is YARN's own
(ServiceClient.getStatus without a live AM: name, id, a state from the application report)."""

from __future__ import annotations

from typing import Any

import pytest

from tarn.controller.observe import UNREPORTED_GRACE_S, Container, distrust, with_known_addresses
from tarn.controller.registry import RegistryPlan
from tarn.errors import ClusterError

from .test_controller_loop import Lab, make

STUB = {"name": "svc", "id": "application_1_0001", "state": "STARTED"}  # no components: no AM yet


@pytest.mark.parametrize(
    ("service", "trusted"),
    [
        (None, False),
        (STUB, False),
        ({**STUB, "state": "ACCEPTED"}, False),
        ({"name": "svc", "state": "STOPPED"}, False),
        (
            {
                "name": "svc",
                "state": "STABLE",
                "components": [{"name": "controller", "number_of_containers": 1}],
            },
            False,
        ),
        ({"name": "svc", "state": "STABLE", "components": [{"name": "triton"}]}, False),
        (
            {"name": "svc", "state": "STABLE", "components": [{"name": "triton", "number_of_containers": 0}]},
            True,
        ),
        (
            {"name": "svc", "state": "FLEX", "components": [{"name": "triton", "number_of_containers": 2}]},
            True,
        ),
        (
            {
                "name": "svc",
                "state": "UPGRADING",
                "components": [{"name": "triton", "number_of_containers": 2}],
            },
            True,
        ),
    ],
)
def test_distrust(service: dict[str, Any] | None, trusted: bool) -> None:
    assert (distrust(service) is None) is trusted


class Registry:
    """What the loop needs of ZooKeeper: a connected registry that records each sync."""

    def __init__(self) -> None:
        self.znodes: dict[str, bytes] = {}
        self.syncs = 0
        self.memory: bytes | None = None

    @property
    def connected(self) -> bool:
        return True

    def sync(self, wanted: dict[str, bytes]) -> RegistryPlan:
        self.syncs += 1
        self.znodes = dict(wanted)
        return RegistryPlan()

    def registered(self) -> set[str]:
        return set(self.znodes)

    def load_memory(self) -> bytes | None:
        return self.memory

    def save_memory(self, data: bytes) -> None:
        self.memory = data


def with_registry(instances: int, **overrides: Any) -> tuple[Lab, Registry]:
    lab = make(instances=instances, **overrides)
    registry = Registry()
    lab.controller._registry = registry  # the loop's registry seam (a real ZooKeeper: tests/e2e)
    return lab, registry


def answer(lab: Lab, reply: Any) -> None:
    """From now on the RM answers ``reply`` (a service JSON, None, or an exception to raise)."""

    def service(name: str) -> Any:
        if isinstance(reply, Exception):
            raise reply
        return reply

    lab.rm.service = service  # type: ignore[method-assign]


@pytest.mark.parametrize(
    "reply", [STUB, None, ClusterError("connection refused")], ids=["stub", "not found", "error"]
)
def test_an_untrusted_view_changes_nothing(reply: Any) -> None:
    lab, registry = with_registry(instances=2, cooldown_ms=0)
    lab.ticks(2)
    before = lab.controller.snapshot
    assert sorted(registry.znodes) == ["c-triton-0", "c-triton-1"]
    real = lab.rm.service
    answer(lab, reply)
    lab.ticks(10)  # idle: a trusted view would have drained one and decommissioned it by now
    snap = lab.controller.snapshot
    assert snap.state == "UNKNOWN"
    assert "nothing changed" in snap.problems[0]
    assert snap.instances == before.instances  # discovery and the API keep serving what was seen
    assert sorted(registry.znodes) == ["c-triton-0", "c-triton-1"]
    assert lab.rm.calls == []  # no flex, no decommission
    lab.rm.service = real  # type: ignore[method-assign]
    lab.ticks(1)
    assert lab.controller.snapshot.state == "STABLE"
    assert all(i.registered for i in lab.controller.snapshot.instances)


def test_a_drain_waits_out_an_untrusted_view() -> None:
    lab = with_registry(instances=2, cooldown_ms=0)[0]
    lab.ticks(7)  # idle: 2 -> 1, triton-1 drains
    assert lab.controller.snapshot.drains["triton-1"].remove
    real = lab.rm.service
    answer(lab, STUB)
    lab.ticks(5)
    assert lab.rm.calls == []
    assert "triton-1" in lab.controller.snapshot.drains  # not forgotten
    lab.rm.service = real  # type: ignore[method-assign]
    lab.ticks(2)
    assert lab.rm.calls == [("decommission", ["triton-1"])]


def test_an_operator_drain_asked_during_an_untrusted_view_applies_after() -> None:
    lab, registry = with_registry(instances=2, cooldown_ms=600_000)
    lab.ticks(1)
    real = lab.rm.service
    answer(lab, STUB)
    lab.ticks(1)
    assert lab.controller.drain("triton-0")
    lab.ticks(2)
    assert "c-triton-0" in registry.znodes
    lab.rm.service = real  # type: ignore[method-assign]
    lab.ticks(1)
    assert "c-triton-0" not in registry.znodes
    assert lab.controller.snapshot.drains["triton-0"].remove is False


def test_an_instance_keeps_its_address_while_the_rm_omits_it() -> None:
    lab, registry = with_registry(instances=2)
    lab.ticks(2)
    lab.rm.no_ip = {"triton-1"}  # e.g. a relaunched AM reporting recovered containers
    lab.ticks(3)
    views = {i.instance: (i.ip, i.registered) for i in lab.controller.snapshot.instances}
    assert views == {"triton-0": ("127.0.0.1", True), "triton-1": ("127.0.0.1", True)}
    assert sorted(registry.znodes) == ["c-triton-0", "c-triton-1"]


def test_with_known_addresses() -> None:
    known = Container("triton-0", "c0", "w1", "10.0.0.1", "READY", 8000, 8001, 8002)
    bare = Container("triton-0", "c0", "", "", "READY", 8000, 8001, 8002)
    other = Container("triton-1", "c1", "", "", "READY", 8010, 8011, 8012)
    assert with_known_addresses([bare, other], {"c0": known}) == [known, other]


def test_an_instance_the_rm_leaves_out_stays_while_it_serves_and_nothing_scales() -> None:
    """A relaunched AM lists its recovered containers one by one (issue 11: killing the AM
    withdrew both instances for ~2 s)."""
    lab, registry = with_registry(instances=2, cooldown_ms=0)
    lab.ticks(2)
    lab.rm.unlisted = {"triton-0", "triton-1"}
    lab.ticks(10)  # idle: a full view would have drained one and decommissioned it by now
    views = {i.instance: (i.yarn_state, i.registered) for i in lab.controller.snapshot.instances}
    assert views == {"triton-0": ("UNREPORTED", True), "triton-1": ("UNREPORTED", True)}
    assert sorted(registry.znodes) == ["c-triton-0", "c-triton-1"]
    assert lab.rm.calls == []
    assert "lacks triton-0, triton-1, still serving" in lab.controller.snapshot.problems[0]
    lab.rm.unlisted = set()
    lab.ticks(8)
    assert lab.rm.calls == [("decommission", ["triton-1"])]  # a full view again: idle scales down


def test_an_unlisted_instance_that_stops_answering_is_withdrawn() -> None:
    lab, registry = with_registry(instances=2)
    lab.ticks(2)
    lab.rm.unlisted = {"triton-1"}
    lab.ticks(1)
    assert "c-triton-1" in registry.znodes
    lab.scraper.down = {"triton-1"}  # its container ended: YARN dropped it, Triton is gone
    lab.ticks(1)
    assert sorted(registry.znodes) == ["c-triton-0"]
    lab.scraper.down = set()
    lab.ticks(2)
    assert sorted(registry.znodes) == ["c-triton-0"]  # not listed, not remembered: gone for good


def test_an_instance_unlisted_past_the_grace_is_withdrawn() -> None:
    lab, registry = with_registry(instances=2)
    lab.ticks(2)
    lab.rm.unlisted = {"triton-1"}
    lab.ticks(int(UNREPORTED_GRACE_S / 2))  # two seconds a tick
    assert "c-triton-1" in registry.znodes
    lab.ticks(2)
    assert sorted(registry.znodes) == ["c-triton-0"]


def test_a_decommissioned_instance_is_not_kept_while_its_triton_stops() -> None:
    lab, registry = with_registry(instances=2, cooldown_ms=0)
    lab.ticks(8)  # idle: triton-1 drained and decommissioned; the fake RM drops it at once
    assert lab.rm.calls == [("decommission", ["triton-1"])]
    lab.ticks(2)  # its Triton would still answer here: it must not come back
    assert sorted(registry.znodes) == ["c-triton-0"]
    assert [i.instance for i in lab.controller.snapshot.instances] == ["triton-0"]
