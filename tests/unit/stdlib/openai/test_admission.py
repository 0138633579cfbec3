"""The admission decisions (tarn.stdlib.openai.admission) as tables, then the queue as a whole."""

from __future__ import annotations

import pytest

from tarn.stdlib.openai.admission import (
    Admission,
    Limits,
    Refused,
    Tenant,
    Ticket,
    guarantees,
    may_start,
    pick,
    reserved_for_others,
    start_tag,
)


@pytest.mark.parametrize(
    ("active", "slots", "expected"),
    [
        ({"a": 1.0}, 4, {"a": 4}),
        ({"a": 1.0, "b": 1.0}, 4, {"a": 2, "b": 2}),
        ({"a": 3.0, "b": 1.0}, 4, {"a": 3, "b": 1}),
        ({"a": 1.0, "b": 1.0, "c": 1.0}, 4, {"a": 1, "b": 1, "c": 1}),  # 4/3 each, rounded down
        ({"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0, "e": 1.0}, 4, dict.fromkeys("abcde", 1)),  # at least 1
        ({"a": 1.0, "b": 1.0}, 1, {"a": 1, "b": 1}),
    ],
)
def test_guarantees(active: dict[str, float], slots: int, expected: dict[str, int]) -> None:
    assert guarantees(active, slots) == expected


@pytest.mark.parametrize(
    ("name", "free", "running", "owed", "expected"),
    [
        # no free slot: nobody
        ("a", 0, {"a": 0}, {"a": 4}, False),
        # below its guarantee: any free slot
        ("a", 1, {"a": 1, "b": 2}, {"a": 2, "b": 2}, True),
        # at its guarantee, the other below its own: one slot stays free for it
        ("a", 1, {"a": 2, "b": 1}, {"a": 2, "b": 2}, False),
        ("a", 2, {"a": 2, "b": 0}, {"a": 2, "b": 2}, True),
        # at its guarantee, the other at its own too: work-conserving
        ("a", 1, {"a": 2, "b": 2}, {"a": 2, "b": 2}, True),
        # the flooder alone (the quiet one idle but active): keeps one slot for it
        ("flood", 1, {"flood": 3, "quiet": 0}, {"flood": 2, "quiet": 2}, False),
        ("flood", 2, {"flood": 2, "quiet": 0}, {"flood": 2, "quiet": 2}, True),
        # one slot kept for each of two others below their guarantee
        ("a", 2, {"a": 1, "b": 0, "c": 0}, {"a": 1, "b": 1, "c": 1}, False),
        ("a", 3, {"a": 1, "b": 0, "c": 0}, {"a": 1, "b": 1, "c": 1}, True),
    ],
)
def test_may_start(
    name: str, free: int, running: dict[str, int], owed: dict[str, int], expected: bool
) -> None:
    assert may_start(name, free, running, owed) is expected


def test_reserved_for_others_counts_each_other_tenant_below_its_guarantee_once() -> None:
    assert reserved_for_others("a", {"a": 0, "b": 0, "c": 3}, {"a": 1, "b": 2, "c": 2}) == 1
    assert reserved_for_others("b", {"a": 0, "b": 0, "c": 3}, {"a": 1, "b": 2, "c": 2}) == 1
    assert reserved_for_others("c", {"a": 0, "b": 0, "c": 3}, {"a": 1, "b": 2, "c": 2}) == 2


@pytest.mark.parametrize(
    ("virtual", "finish", "expected"), [(0.0, 0.0, 0.0), (5.0, 2.0, 5.0), (5.0, 7.0, 7.0)]
)
def test_start_tag(virtual: float, finish: float, expected: float) -> None:
    assert start_tag(virtual, finish) == expected


def ticket(name: str, order: int, band: int = 0) -> Ticket:
    return Ticket(Tenant(name, band), 0.0, order)


@pytest.mark.parametrize(
    ("candidates", "virtual", "expected"),
    [
        ([], 0.0, None),
        ([(ticket("a", 0), 3.0), (ticket("b", 1), 1.0)], 0.0, "b"),  # lower tag
        ([(ticket("a", 0), 3.0), (ticket("b", 1), 1.0)], 4.0, "a"),  # both at the virtual time: arrival
        ([(ticket("a", 0), 0.0), (ticket("b", 1, band=1), 9.0)], 0.0, "b"),  # a higher band first
    ],
)
def test_pick(candidates: list[tuple[Ticket, float]], virtual: float, expected: str | None) -> None:
    chosen = pick(candidates, virtual)
    assert (chosen.tenant.name if chosen else None) == expected


# ---- the queue as a whole
class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def names(tickets: list[Ticket]) -> list[str]:
    return [t.tenant.name for t in tickets]


def test_a_quiet_tenant_finds_a_slot_while_a_flooder_waits() -> None:
    """The bench's case: 4 slots, a flooder with 40 requests, a quiet client with one at a time."""
    clock = Clock()
    queue = Admission(Limits(slots=4), clock)
    quiet, flood = Tenant("quiet"), Tenant("flood")
    first = queue.arrive(quiet)
    queue.leave(first)  # the quiet one was seen: active for the window
    floods = [queue.arrive(flood) for _n in range(40)]
    assert sum(t.admitted for t in floods) == 3  # one slot kept for the quiet one
    asked = queue.arrive(quiet)
    assert asked.admitted  # at once, not behind 37 others
    ended = queue.leave(floods[0])
    assert not ended  # the flooder is at its guarantee of 2 + 1 borrowed; the quiet one is at 1 of 2
    queue.leave(asked)
    assert names(queue.leave(floods[1])) == ["flood"]  # the quiet one idle: the flooder is back to 3


def test_first_come_first_served_keeps_the_quiet_tenant_behind_the_flood() -> None:
    clock = Clock()
    queue = Admission(Limits(slots=4, policy="fifo"), clock)
    floods = [queue.arrive(Tenant("flood")) for _n in range(40)]
    asked = queue.arrive(Tenant("quiet"))
    assert (sum(t.admitted for t in floods), asked.admitted) == (4, False)


def test_weighted_fair_queuing_alternates_by_weight() -> None:
    clock = Clock()
    queue = Admission(Limits(slots=1), clock)
    running = queue.arrive(Tenant("x"))
    for _n in range(6):
        queue.arrive(Tenant("a", weight=2.0))
        queue.arrive(Tenant("b", weight=1.0))
    order = []
    current = running
    for _n in range(9):
        (current,) = queue.leave(current)
        order.append(current.tenant.name)
    assert (order.count("a"), order.count("b")) == (6, 3), order


def test_a_higher_band_starts_first_and_a_tenant_back_from_idle_has_no_credit() -> None:
    clock = Clock()
    queue = Admission(Limits(slots=1), clock)
    current = queue.arrive(Tenant("a"))
    for _n in range(5):
        queue.arrive(Tenant("a"))
    vip = queue.arrive(Tenant("vip", band=1))
    (current,) = queue.leave(current)
    assert current is vip
    # b arrives once a has run four: it alternates with a from then on, no run of four to catch up
    clock.now = 1.0
    for _n in range(3):
        (current,) = queue.leave(current)
    for _n in range(3):
        queue.arrive(Tenant("b"))
    seen = []
    for _n in range(4):
        (current,) = queue.leave(current)
        seen.append(current.tenant.name)
    assert seen == ["b", "a", "b", "a"]


def test_a_cancel_while_waiting_costs_nothing_and_frees_its_place() -> None:
    clock = Clock()
    queue = Admission(Limits(slots=1, max_waiting=2), clock)
    running = queue.arrive(Tenant("a"))
    waiting = queue.arrive(Tenant("b"))
    queue.arrive(Tenant("c"))
    with pytest.raises(Refused) as refused:
        queue.arrive(Tenant("d"))
    assert refused.value.status == 503
    assert queue.leave(waiting) == []  # nothing started in its stead: the slot is still taken
    assert queue.waiting_by_tenant() == {"c": 1}
    queue.arrive(Tenant("d"))  # its place is free
    (started,) = queue.leave(running)
    assert started.tenant.name in ("c", "d")


def test_a_tenant_past_its_own_bound_gets_a_429_the_others_still_queue() -> None:
    clock = Clock()
    queue = Admission(Limits(slots=1, max_waiting_per_tenant=2), clock)
    queue.arrive(Tenant("a"))
    queue.arrive(Tenant("a"))
    queue.arrive(Tenant("a"))
    with pytest.raises(Refused) as refused:
        queue.arrive(Tenant("a"))
    assert refused.value.status == 429
    assert not queue.arrive(Tenant("b")).admitted


def test_idle_tenants_are_forgotten_after_the_window() -> None:
    clock = Clock()
    queue = Admission(Limits(slots=4, active_window_s=10.0), clock)
    for n in range(100):
        queue.leave(queue.arrive(Tenant(f"user{n}")))
    clock.now = 11.0
    floods = [queue.arrive(Tenant("flood")) for _n in range(8)]
    assert sum(t.admitted for t in floods) == 4  # nobody else active: every slot
    assert len(queue._tenants) == 1


def test_at_least_one_slot() -> None:
    with pytest.raises(ValueError, match="at least one slot"):
        Admission(Limits(slots=0), Clock())
