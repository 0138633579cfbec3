"""Drains as a table: operator requests, idleness, restarts, removals, instances that vanish."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tarn.controller.drain import (
    Drain,
    DrainPolicy,
    Request,
    Seen,
    begin_removal,
    drain_finished,
    operator_drained,
    removed,
    removing,
    step,
)

POLICY = DrainPolicy(grace_s=2.0, timeout_s=30.0)
BUSY, IDLE = Seen(ready=True, last_activity=9.0), Seen(ready=True, last_activity=0.0)
DOWN = Seen(ready=False, last_activity=0.0)
OP, RM = Drain(started=5.0, remove=False), Drain(started=5.0, remove=True)  # operator / removal
OP_DONE, RM_DONE = Drain(5.0, False, done=True), Drain(5.0, True, done=True)
OP_DOWN, RM_DOWN = Drain(5.0, False, saw_unready=True), Drain(5.0, True, saw_unready=True)


def undrain(instance: str, at: float) -> Request:
    return Request(instance, at, drain=False)


@pytest.mark.parametrize(
    ("started", "last_activity", "now", "finished"),
    [
        (0.0, 0.0, 1.0, False),  # within the grace period
        (0.0, 0.0, 2.5, True),  # idle since the drain began, grace over
        (0.0, 2.0, 3.0, False),  # a request completed 1 s ago
        (0.0, 2.0, 4.5, True),
        (0.0, 29.9, 30.0, True),  # busy, but the bound is reached
    ],
)
def test_drain_finished(started: float, last_activity: float, now: float, finished: bool) -> None:
    drain = Drain(started=started, remove=True)
    assert drain_finished(drain, now, last_activity, grace_s=2.0, timeout_s=30.0) is finished


def drain(instance: str, at: float) -> Request:
    return Request(instance, at)


def case(
    name: str,
    before: dict[str, Drain],
    seen: dict[str, Seen],
    requests: list[Request],
    now: float,
    after: dict[str, Drain],
    **actions: object,
) -> object:
    """One row: the drains after ``step`` and its actions (``decommission``, ``started``)."""
    expected = (after, actions.get("decommission", ()), actions.get("started", 0))
    return pytest.param(before, seen, requests, now, expected, id=name)


CASES = [
    case("nothing to do", {}, {"a": IDLE}, [], 10.0, {}),
    case("operator drain starts when asked", {}, {"a": IDLE}, [drain("a", 5.0)], 6.0, {"a": OP}, started=1),
    case("asked twice: one drain", {"a": OP}, {"a": BUSY}, [drain("a", 6.0)], 7.0, {"a": OP}),
    case("asked for a gone instance", {}, {"a": IDLE}, [drain("b", 5.0)], 6.0, {}),
    case("undrain ends an operator drain", {"a": OP}, {"a": IDLE}, [undrain("a", 6.0)], 7.0, {}),
    case("undrain never cancels a removal", {"a": RM}, {"a": BUSY}, [undrain("a", 6.0)], 7.0, {"a": RM}),
    case("drain, undrain in one tick", {}, {"a": IDLE}, [drain("a", 5), undrain("a", 5.5)], 6, {}, started=1),
    case("busy within grace stays", {"a": OP}, {"a": BUSY}, [], 10.0, {"a": OP}),
    case("idle past grace is done", {"a": OP}, {"a": IDLE}, [], 7.5, {"a": OP_DONE}),
    case("busy until the bound: done", {"a": OP}, {"a": Seen(True, 35.0)}, [], 35.0, {"a": OP_DONE}),
    case("idle removal: decommission", {"a": RM}, {"a": IDLE}, [], 7.5, {"a": RM_DONE}, decommission=("a",)),
    case(
        "done removal kept until removed",
        {"a": RM_DONE},
        {"a": IDLE},
        [],
        20,
        {"a": RM_DONE},
        decommission=("a",),
    ),
    case("not ready is remembered", {"a": OP}, {"a": DOWN}, [], 6.0, {"a": OP_DOWN}),
    case("ready after a restart: undrained", {"a": OP_DOWN}, {"a": IDLE}, [], 7.0, {}),
    case(
        "a restart does not end a removal",
        {"a": RM_DOWN},
        {"a": IDLE},
        [],
        8.0,
        {"a": replace(RM_DOWN, done=True)},
        decommission=("a",),
    ),
    case("vanished instances are forgotten", {"a": OP, "b": RM}, {"a": BUSY}, [], 6.0, {"a": OP}),
    case(
        "decommissions in name order",
        {"b": RM, "a": RM},
        {"a": IDLE, "b": IDLE},
        [],
        8.0,
        {"a": RM_DONE, "b": RM_DONE},
        decommission=("a", "b"),
    ),
]


@pytest.mark.parametrize(("before", "seen", "requests", "now", "expected"), CASES)
def test_step(
    before: dict[str, Drain],
    seen: dict[str, Seen],
    requests: list[Request],
    now: float,
    expected: tuple[dict[str, Drain], tuple[str, ...], int],
) -> None:
    result = step(before, seen, requests, now, POLICY)
    assert (result.drains, result.decommission, result.started) == expected


def test_step_does_not_change_its_input() -> None:
    before = {"a": OP}
    step(before, {"a": DOWN}, [undrain("a", 6.0)], 7.0, POLICY)
    assert before == {"a": OP}


def test_removals() -> None:
    drains = begin_removal({"a": OP}, ["b", "c"], 9.0)
    assert drains == {"a": OP, "b": Drain(9.0, True), "c": Drain(9.0, True)}
    assert removing(drains) == ["b", "c"]
    assert removed(drains, ["b"]) == {"a": OP, "c": Drain(9.0, True)}


@pytest.mark.parametrize(
    ("drains", "pending", "expected"),
    [
        ({}, [], set()),
        ({"a": OP}, [], {"a"}),
        ({"a": RM}, [], set()),  # a removal is not the operator's to undrain
        ({}, [drain("a", 1.0)], {"a"}),
        ({"a": OP}, [undrain("a", 1.0)], set()),
        ({}, [drain("z", 1.0)], set()),  # not running
    ],
)
def test_operator_drained(drains: dict[str, Drain], pending: list[Request], expected: set[str]) -> None:
    assert operator_drained(drains, pending, {"a", "b"}) == expected
