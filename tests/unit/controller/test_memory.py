"""A controller restart keeps the scaling history and finishes the drains in progress: both are
written to ZooKeeper (here the registry stand-in of tests/support/controller.py; a real ZooKeeper in
tests/integration/test_registry_takeover.py) and read back by the next controller of the same YARN
application, not by one of the service destroyed or stopped and then submitted or started again."""

from __future__ import annotations

import json

import pytest

from tarn.controller.drain import Drain
from tarn.controller.loop import ControlLoop
from tarn.controller.memory import Memory, ScalingEvent, application_of, decode, encode, foreign, memory_path
from tests.support.controller import STUB, FakeRm, Lab, Registry, make

FIRST, AGAIN = "application_1795785000000_0001", "application_1795785000000_0002"  # the same service's


def test_memory_path_is_beside_the_instances() -> None:
    assert memory_path("/services/triton/instances", "svc") == "/services/triton/controller.svc"
    assert memory_path("/instances/", "svc") == "/controller.svc"


def test_round_trip_maps_drains_onto_the_new_clock() -> None:
    memory = Memory(
        history=(ScalingEvent(1.7e9, "down", 2, 1, "idle"),),
        drains={"triton-1": Drain(started=100.0, remove=True, saw_unready=True)},
    )
    data = encode(memory, clock_now=110.0, wall_now=5000.0)  # began 10 s ago
    back = decode(data, clock_now=7.0, wall_now=5003.0)  # a new process, 3 s later
    assert back.history == memory.history
    assert back.drains == {"triton-1": Drain(started=-6.0, remove=True, saw_unready=True)}  # 13 s ago


def test_nothing_or_garbage_decodes_to_an_empty_memory() -> None:
    for data in (
        None,
        b"",
        b"{",
        b"[]",
        b'{"version": 99}',
        b'{"version": 1, "history": [{"x": 1}]}',
        b'{"version": 1, "history": [], "drains": {}, "application": 7}',
    ):
        assert decode(data, 0.0, 0.0) == Memory()


def test_the_application_travels_with_the_memory() -> None:
    event = ScalingEvent(1.7e9, "up", 1, 2, "load")
    data = encode(Memory((event,), {}, FIRST), 0.0, 0.0)
    assert json.loads(data)["application"] == FIRST
    assert decode(data, 0.0, 0.0) == Memory((event,), {}, FIRST)


def test_an_older_controllers_memory_decodes_without_an_application() -> None:
    older = b'{"version":1,"history":[],"drains":{"triton-1":{"started":1.0,"remove":true}}}'
    assert decode(older, 10.0, 10.0) == Memory((), {"triton-1": Drain(started=1.0, remove=True)}, None)
    assert b"application" not in encode(Memory(), 0.0, 0.0)  # and none is written without one


@pytest.mark.parametrize(
    ("written_by", "application", "expected"),
    [
        (FIRST, FIRST, False),  # a restart of the controller, an AM restart, an upgrade
        (FIRST, AGAIN, True),  # destroyed and submitted again, stopped and started
        (None, AGAIN, False),  # an older controller's: kept across an upgrade
        (FIRST, None, False),  # the RM's answer has no id: no way to tell
        (None, None, False),
    ],
)
def test_foreign(written_by: str | None, application: str | None, expected: bool) -> None:
    assert foreign(Memory(application=written_by), application) is expected


def test_application_of_the_rms_answer() -> None:
    assert application_of(STUB) == "application_1_0001"
    assert application_of({"name": "svc", "state": "STOPPED"}) is None  # never submitted


def restarted(lab: Lab, registry: Registry) -> Lab:
    """A new controller on the same RM, ZooKeeper and clock (the old one was killed)."""
    clock = lab.clock
    fresh = ControlLoop(
        lab.controller.config,
        lab.rm,
        registry,
        lab.scraper,
        clock=lambda: clock[0],
        wall=lambda: 1.7e9 + clock[0],
    )
    return Lab(fresh, lab.rm, lab.scraper, clock)


def test_a_restart_keeps_the_history_and_finishes_the_drain() -> None:
    lab = make(instances=2, cooldown_ms=0)
    registry = Registry()
    lab.controller._registry = registry  # the loop's registry seam
    lab.ticks(7)  # idle: 2 -> 1, triton-1 drains (not yet done)
    history = lab.controller.snapshot.history
    assert [e.direction for e in history] == ["down"]
    assert lab.controller.snapshot.drains["triton-1"].remove
    assert lab.rm.calls == []

    lab = restarted(lab, registry)
    lab.ticks(1)
    assert lab.controller.snapshot.history == history  # the dashboard does not go blank
    assert lab.controller.snapshot.drains["triton-1"].remove  # not forgotten, not re-registered
    assert not next(i for i in lab.controller.snapshot.instances if i.instance == "triton-1").registered
    lab.ticks(3)
    assert lab.rm.calls == [("decommission", ["triton-1"])]  # finished by the new controller
    assert "triton-1" not in decode(registry.memory, lab.clock[0], 1.7e9 + lab.clock[0]).drains


def test_an_operator_drain_survives_a_restart() -> None:
    lab = make(instances=2, cooldown_ms=600_000)
    registry = Registry()
    lab.controller._registry = registry
    lab.ticks(1)
    lab.controller.drain("triton-0")
    lab.ticks(3)
    assert lab.controller.drained("triton-0")
    lab = restarted(lab, registry)
    lab.ticks(1)
    assert lab.controller.drained("triton-0")
    assert not lab.controller.snapshot.instances[0].registered
    assert "c-triton-0" not in registry.znodes


def test_a_service_submitted_again_under_its_name_forgets_the_old_drains() -> None:
    """The lab's fault: a new application recalled a destroyed one's history, and its drain of
    triton-1 would have taken the new service's own triton-1 out and decommissioned it."""
    lab = make(instances=2, cooldown_ms=0)
    lab.rm.application = FIRST
    registry = Registry()
    lab.controller._registry = registry
    lab.ticks(7)  # idle: 2 -> 1, triton-1 drains (not yet done)
    assert lab.controller.snapshot.drains["triton-1"].remove
    assert json.loads(registry.memory or b"")["application"] == FIRST

    lab.rm = FakeRm(2)  # destroyed, submitted again: new containers, the same names
    lab.rm.application = AGAIN
    lab = restarted(lab, registry)
    lab.ticks(1)
    assert lab.controller.snapshot.history == ()
    assert lab.controller.snapshot.drains == {}
    assert all(i.registered for i in lab.controller.snapshot.instances)  # triton-1 serves
    assert decode(registry.memory, lab.clock[0], 1.7e9) == Memory(application=AGAIN)  # replaced
    lab.ticks(3)
    assert lab.rm.calls == []  # nothing decommissioned


def test_an_upgrade_from_a_controller_without_the_application_keeps_the_drain() -> None:
    lab = make(instances=2, cooldown_ms=0)
    registry = Registry()
    lab.controller._registry = registry
    lab.ticks(7)  # triton-1 drains
    document = json.loads(registry.memory or b"")
    del document["application"]  # as an older controller wrote it
    registry.memory = json.dumps(document).encode()

    lab = restarted(lab, registry)
    lab.ticks(1)
    assert lab.controller.snapshot.drains["triton-1"].remove
    assert json.loads(registry.memory or b"")["application"] == STUB["id"]  # stamped from now on
    lab.ticks(3)
    assert lab.rm.calls == [("decommission", ["triton-1"])]


def test_a_controller_that_outlived_its_service_leaves_the_new_one_alone() -> None:
    """The old controller still ticks (its node was lost to the RM) while the service is destroyed
    and submitted again: it must neither flex nor register, nor overwrite the new one's memory."""
    lab = make(instances=2, cooldown_ms=0)
    lab.rm.application = FIRST
    registry = Registry()
    old = ControlLoop(lab.controller.config, lab.rm, registry, lab.scraper, clock=lambda: lab.clock[0],
                      wall=lambda: 1.7e9 + lab.clock[0], application=FIRST)  # fmt: skip
    lab = Lab(old, lab.rm, lab.scraper, lab.clock)
    lab.ticks(2)
    assert all(i.registered for i in old.snapshot.instances)

    lab.rm = FakeRm(2)  # destroyed, submitted again under the name
    lab.rm.application = AGAIN
    old._rm = lab.rm
    registry.memory, registry.znodes = None, {}  # as the new controller would find them
    lab.ticks(7)  # idle for long enough to scale down, were it acting
    assert (lab.rm.calls, registry.znodes, registry.memory) == ([], {}, None)
    assert any("outlived its service" in problem for problem in old.snapshot.problems)
