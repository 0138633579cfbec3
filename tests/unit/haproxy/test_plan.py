"""The slot plan: current slots + wanted instances -> Runtime API commands (pure, no HAProxy)."""

from __future__ import annotations

import pytest

from tarn.haproxy.plan import (
    AdminState,
    Endpoint,
    Plan,
    SetAddress,
    SetState,
    Slot,
    endpoint,
    parse_endpoint,
    plan,
)

READY, DRAIN, MAINT = AdminState.READY, AdminState.DRAIN, AdminState.MAINT
PLACEHOLDER = "0.0.0.0:8000"  # the configuration's address of every slot


def ep(text: str) -> Endpoint:
    return parse_endpoint(text)


def slot(name: str, address: str = PLACEHOLDER, admin: AdminState = MAINT, sessions: int = 0) -> Slot:
    return Slot(name, ep(address), admin, sessions)


def fresh(count: int) -> list[Slot]:
    """A backend just (re)started from its configuration: every slot disabled."""
    return [slot(f"triton-{i}") for i in range(1, count + 1)]


def fill_commands(server: str, address: str) -> list[tuple[str, str, str]]:
    return [(server, "addr", address), (server, "state", "ready")]


def compact(result: Plan) -> list[tuple[str, str, str]]:
    """Commands as (server, what, value) triples, reasons left out."""
    rows = []
    for command in result.commands:
        if isinstance(command, SetAddress):
            rows.append((command.server, "addr", str(command.endpoint)))
        else:
            rows.append((command.server, "state", command.state.value))
    return rows


A, B, C, D, E = "10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000", "10.0.0.4:8000", "10.0.0.5:8000"

CASES = [
    # (id, slots, wanted, commands, overflow)
    ("nothing wanted, fresh backend", fresh(4), [], [], []),
    ("no slots, nothing wanted", [], [], [], []),
    ("no slots, one wanted: overflow", [], [A], [], [A]),
    ("one new instance takes the first slot", fresh(4), [A], fill_commands("triton-1", A), []),
    (
        "new instances fill slots in order, sorted by address",
        fresh(4),
        [B, A],
        fill_commands("triton-1", A) + fill_commands("triton-2", B),
        [],
    ),
    ("stable: one instance served", [slot("triton-1", A, READY), *fresh(4)[1:]], [A], [], []),
    (
        "stable: four served, none free",
        [slot(f"triton-{i}", x, READY) for i, x in enumerate([A, B, C, D], 1)],
        [A, B, C, D],
        [],
        [],
    ),
    (
        "more instances than slots: fill what fits, report the rest",
        fresh(2),
        [A, B, C, D],
        fill_commands("triton-1", A) + fill_commands("triton-2", B),
        [C, D],
    ),
    (
        "full backend, one more: overflow only",
        [slot("triton-1", A, READY), slot("triton-2", B, READY)],
        [A, B, C],
        [],
        [C],
    ),
    (
        "instance gone: its slot drains",
        [slot("triton-1", A, READY), slot("triton-2", B, READY)],
        [B],
        [("triton-1", "state", "drain")],
        [],
    ),
    (
        "draining slot with sessions: wait",
        [slot("triton-1", A, DRAIN, sessions=3), slot("triton-2", B, READY)],
        [B],
        [],
        [],
    ),
    (
        "drained slot without sessions: maintenance",
        [slot("triton-1", A, DRAIN, sessions=0), slot("triton-2", B, READY)],
        [B],
        [("triton-1", "state", "maint")],
        [],
    ),
    (
        "every instance gone: every slot drains",
        [slot("triton-1", A, READY), slot("triton-2", B, READY), slot("triton-3")],
        [],
        [("triton-1", "state", "drain"), ("triton-2", "state", "drain")],
        [],
    ),
    ("stale address in maintenance stays as it is", [slot("triton-1", A, MAINT)], [], [], []),
    (
        "instance back while draining: ready again, same slot",
        [slot("triton-1", A, DRAIN, sessions=2)],
        [A],
        [("triton-1", "state", "ready")],
        [],
    ),
    (
        "instance back after maintenance: its old slot, no address change",
        [slot("triton-1"), slot("triton-2", B, MAINT)],
        [B],
        [("triton-2", "state", "ready")],
        [],
    ),
    (
        "replacement: old drains, new takes a free slot",
        [slot("triton-1", A, READY), slot("triton-2")],
        [B],
        [("triton-1", "state", "drain"), *fill_commands("triton-2", B)],
        [],
    ),
    (
        "a draining slot is not free: the new instance overflows",
        [slot("triton-1", A, DRAIN, sessions=1)],
        [B],
        [],
        [B],
    ),
    (
        "a slot drained this round is free only on the next round",
        [slot("triton-1", A, DRAIN, sessions=0)],
        [B],
        [("triton-1", "state", "maint")],
        [B],
    ),
    (
        "HAProxy restarted: every slot back to the configuration, refilled",
        fresh(4),
        [A, B, C],
        fill_commands("triton-1", A) + fill_commands("triton-2", B) + fill_commands("triton-3", C),
        [],
    ),
    (
        "two slots on one instance: the ready one keeps it, the other drains",
        [slot("triton-1", A, MAINT), slot("triton-2", A, READY)],
        [A],
        [],
        [],
    ),
    (
        "two ready slots on one instance: the first keeps it, the second drains",
        [slot("triton-1", A, READY), slot("triton-2", A, READY)],
        [A],
        [("triton-2", "state", "drain")],
        [],
    ),
    (
        "port change on the same host is a new instance",
        [slot("triton-1", A, READY), slot("triton-2")],
        ["10.0.0.1:8010"],
        [("triton-1", "state", "drain"), *fill_commands("triton-2", "10.0.0.1:8010")],
        [],
    ),
    (
        "mixed round: keep, drain, finish a drain, fill",
        [
            slot("triton-1", A, READY),
            slot("triton-2", B, READY),
            slot("triton-3", C, DRAIN, sessions=0),
            slot("triton-4"),
        ],
        [A, D, E],
        [("triton-2", "state", "drain"), ("triton-3", "state", "maint"), *fill_commands("triton-4", D)],
        [E],
    ),
    (
        "IPv6 instance",
        fresh(1),
        ["[fd00::11]:8000"],
        fill_commands("triton-1", "[fd00::11]:8000"),
        [],
    ),
]


@pytest.mark.parametrize(
    ("slots", "wanted", "commands", "overflow"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_plan(slots, wanted, commands, overflow) -> None:
    result = plan(slots, [ep(w) for w in wanted])
    assert compact(result) == commands
    assert [str(o) for o in result.overflow] == overflow


def apply(slots: list[Slot], result: Plan) -> list[Slot]:
    """What HAProxy does with a plan (sessions left as they were): for the convergence tests."""
    by_name = {s.name: s for s in slots}
    for command in result.commands:
        old = by_name[command.server]
        if isinstance(command, SetAddress):
            by_name[command.server] = Slot(old.name, command.endpoint, old.admin, old.sessions)
        else:
            by_name[command.server] = Slot(old.name, old.endpoint, command.state, old.sessions)
    return [by_name[s.name] for s in slots]


@pytest.mark.parametrize("wanted", [[], [A], [A, B, C, D], [A, B, C, D, E], [E, C]], ids=str)
@pytest.mark.parametrize(
    "start",
    [
        fresh(4),
        [slot("triton-1", A, READY), slot("triton-2", B, DRAIN), slot("triton-3", C), slot("triton-4")],
    ],
    ids=["fresh", "busy"],
)
def test_plan_converges_then_stays_empty(start: list[Slot], wanted: list[str]) -> None:
    slots, rounds = start, 0
    while (result := plan(slots, [ep(w) for w in wanted])).commands:
        slots, rounds = apply(slots, result), rounds + 1
        assert rounds < 4, f"no convergence: {compact(result)}"
    served = {str(s.endpoint) for s in slots if s.admin is READY}
    assert served == set(wanted) - {str(o) for o in result.overflow}
    assert len(result.overflow) == max(0, len(wanted) - len(slots))
    assert all(s.admin in (READY, MAINT) for s in slots)


def test_commands_carry_a_reason() -> None:
    result = plan([slot("triton-1", A, READY), slot("triton-2")], [ep(B)])
    assert [c.reason for c in result.commands] == [
        f"instance {A} is gone",
        f"new instance {B}",
        f"new instance {B}",
    ]
    assert isinstance(result.commands[0], SetState)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10.89.42.11:8000", Endpoint("10.89.42.11", 8000)),
        (" 127.0.0.2:18000\n", Endpoint("127.0.0.2", 18000)),
        ("[fd00::1]:8000", Endpoint("fd00::1", 8000)),
    ],
)
def test_parse_endpoint(text: str, expected: Endpoint) -> None:
    assert parse_endpoint(text) == expected


@pytest.mark.parametrize(
    "text", ["worker1:8000", "10.0.0.1", "10.0.0.1:0", "10.0.0.1:70000", "10.0.0.1:x", ""]
)
def test_parse_endpoint_rejects(text: str) -> None:
    with pytest.raises(ValueError, match=r"."):
        parse_endpoint(text)


def test_endpoint_normalises_the_address() -> None:
    assert endpoint("fd00:0::1", "8000") == Endpoint("fd00::1", 8000)
    assert str(endpoint("fd00::1", 8000)) == "[fd00::1]:8000"
