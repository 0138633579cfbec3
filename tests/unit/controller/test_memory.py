"""A controller restart keeps the scaling history and finishes the drains in progress: both are
written to ZooKeeper (here the registry stand-in of tests/support/controller.py; a real ZooKeeper in
tests/integration/test_registry_takeover.py) and read back by the next controller."""

from __future__ import annotations

from tarn.controller.drain import Drain
from tarn.controller.loop import ControlLoop
from tarn.controller.memory import Memory, ScalingEvent, decode, encode, memory_path
from tests.support.controller import Lab, Registry, make


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
    for data in (None, b"", b"{", b"[]", b'{"version": 99}', b'{"version": 1, "history": [{"x": 1}]}'):
        assert decode(data, 0.0, 0.0) == Memory()


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
