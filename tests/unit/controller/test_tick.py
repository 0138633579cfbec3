"""The tick's decisions (tarn.controller.tick), one table each, with no loop, server or clock.

Every decision the loop took before the tick was pure lives here: what to scrape, the drains
(operator requests, called off by held requests, their end), the views, the registrations, the
holds, the scaling decision and its RM action, the decommission accepted or refused, the memory.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from tarn.activator.demand import Report
from tarn.controller.decide import Decision, Direction, Policy, ScalerState
from tarn.controller.drain import Drain, DrainPolicy, Request
from tarn.controller.fronts import FrontSample
from tarn.controller.memory import Memory, ScalingEvent, encode
from tarn.controller.observe import UNREPORTED, UNREPORTED_GRACE_S, Container, Scrape
from tarn.controller.signals import Load, ModelCounters, TritonSample
from tarn.controller.snapshot import Snapshot, placed
from tarn.controller.tick import (
    MODELS_REFRESH_S,
    REASK_AFTER_S,
    UNPLACED_GRACE_S,
    Observed,
    TickPlan,
    TickPolicy,
    TickState,
    Tracked,
    owed_since,
    plan_tick,
    plan_watch,
    published,
    reask_due,
    recall,
    scaling_figure,
    settle,
    to_remember,
    unplaced_for_long,
    untrusted,
)

POLICY = TickPolicy(
    service="svc",
    scaling=Policy(0.8, 0.2, min_instances=1, max_instances=4, cooldown_s=0.0, up_ticks=1, down_ticks=1),
    drain=DrainPolicy(grace_s=4.0, timeout_s=60.0),
    concurrency=4.0,
)  # fmt: skip
NOW = 1000.0


def container(n: int, yarn_state: str = "READY", ip: str = "127.0.0.1") -> Container:
    return Container(f"triton-{n}", f"c-{n}", "w", ip, yarn_state, 8000, 8001, 8002)


def sample(ok: float, busy_us: float = 0.0, at: float = NOW) -> TritonSample:
    return TritonSample(at, ok, 0.0, busy_us, 0.0)


def busy(inflight: float) -> tuple[TritonSample, TritonSample]:
    """Two samples 2 s apart with ``inflight`` requests in the server on average."""
    return sample(100.0, 0.0, NOW - 2), sample(110.0, 2e6 * inflight)


def settled(n: int, inflight: float | None = 1.6) -> tuple[Container, Tracked, Scrape]:
    """A READY instance seen before; ``inflight``: its load x concurrency (None: no metrics)."""
    before, after = busy(inflight or 0.0)
    tracked = Tracked(sample=before, last_activity=NOW - 1, models=("m",), models_at=NOW, was_ready=True)
    return container(n), tracked, Scrape(True, after if inflight is not None else None, None)


def world(
    *instances: tuple[Container, Tracked, Scrape], target: int | None = None, **state: Any
) -> tuple[TickState, Observed]:
    tracked = {c.container_id: t for c, t, _s in instances}
    scrapes = {c.container_id: s for c, _t, s in instances}
    containers = tuple(c for c, _t, _s in instances)
    start = TickState(ScalerState(last_change_at=0.0), tracked=tracked, **state)
    seen = Observed(1.7e9, "STABLE", len(instances) if target is None else target, containers, scrapes)
    return start, seen


# ---- plan_tick: the scaling decision, its holds and the RM action
REMOVING = {"drains": {"triton-1": Drain(NOW - 1, remove=True)}}
COOLING = {"scaler": ScalerState(last_change_at=NOW - 1)}
SCALING = [
    # name, in flight per instance (None: no metrics), state, direction, reason starts, flex, victims
    ("busy: up", [3.6, 3.6], {}, "up", "load 0.90 > 0.8: 2 -> 4", 4, ()),
    ("in the band: hold", [2.0, 2.0], {}, "hold", "load within the band", None, ()),
    ("idle: down", [0.2, 0.4], {}, "down", "load 0.08 < 0.2: 2 -> 1", None, ("triton-0",)),
    ("no metrics: hold", [None, None], {}, "hold", "no load figure", None, ()),
    ("out of bounds", [2.0] * 5, {}, "down", "target 5 outside [1, 4]", None, ("triton-4",)),
    ("a removal drains: hold", [3.6, 3.6], REMOVING, "hold", "draining triton-1", None, ()),
    ("cooldown: hold", [3.6, 3.6], COOLING, "hold", "cooldown", None, ()),
]


@pytest.mark.parametrize(("name", "loads", "extra", "direction", "reason", "flex", "victims"), SCALING)
def test_the_scaling_decision_and_its_action(
    name: str,
    loads: list[float | None],
    extra: dict[str, Any],
    direction: str,
    reason: str,
    flex: int | None,
    victims: tuple[str, ...],
) -> None:
    start, seen = world(*(settled(n, load) for n, load in enumerate(loads)))
    policy = (
        POLICY
        if "cooldown" not in name
        else replace(POLICY, scaling=replace(POLICY.scaling, cooldown_s=30.0))
    )
    start = replace(start, **extra)
    plan = plan_tick(start, seen, (), NOW, policy)
    assert plan.decision is not None
    assert (plan.decision.direction, plan.flex, plan.decommission) == (direction, flex, ())
    assert plan.decision.reason.startswith(reason), plan.decision.reason
    removal = tuple(sorted(n for n, d in plan.state.drains.items() if d.remove and n not in start.drains))
    assert removal == victims
    assert plan.events.scaled == (direction if direction != "hold" else None)
    assert plan.events.drains_started == len(victims)
    assert [e.direction for e in plan.state.history] == ([direction] if direction != "hold" else [])
    assert plan.state.scaler.last_change_at == (NOW if direction != "hold" else start.scaler.last_change_at)


def test_an_instance_the_rm_answer_lacks_holds_the_scaler_and_says_so() -> None:
    lost = settled(1, 3.6)
    start, seen = world(settled(0, 3.6), (container(1, UNREPORTED), lost[1], lost[2]))
    plan = plan_tick(start, seen, (), NOW, POLICY)
    assert plan.decision == Decision(
        2, "hold", "the ResourceManager's answer lacks triton-1, still serving", None
    )
    assert plan.problems == ("the ResourceManager's answer lacks triton-1, still serving",)
    assert plan.flex is None


def test_scaling_from_zero_when_requests_are_held() -> None:
    start, seen = world(target=0)
    seen = replace(seen, demand=Report(held=3, oldest_s=0.5), demand_received=NOW - 1)
    policy = replace(POLICY, scaling=replace(POLICY.scaling, min_instances=0, scale_to_zero_after_s=60.0))
    plan = plan_tick(start, seen, (), NOW, policy)
    assert (plan.flex, plan.held, plan.held_oldest_s) == (1, 3, 0.5)
    assert plan.decision is not None
    assert plan.decision.reason.startswith("3 request(s) held")


def test_idle_for_the_grace_drains_to_zero() -> None:
    start, seen = world(settled(0, 0.0))
    start = replace(start, tracked={"c-0": replace(start.tracked["c-0"], last_activity=NOW - 61)})
    policy = replace(POLICY, scaling=replace(POLICY.scaling, min_instances=0, scale_to_zero_after_s=60.0))
    seen = replace(seen, scrapes={"c-0": Scrape(True, sample(100.0), None)})  # nothing served since
    plan = plan_tick(start, seen, (), NOW, policy)
    assert plan.decision is not None
    assert (plan.decision.target, plan.decision.direction) == (0, "down")
    assert plan.state.drains["triton-0"].remove


# ---- plan_tick: an instance unready past --replace-unready-after is replaced
BOUND = 60.0
DRAINED = Drain(NOW - 1, remove=False)
REPLACING = replace(POLICY, replace_unready_after_s=BOUND)
UNREADY = [
    # name, triton-1: YARN state, was ready, unready since, the service's state, drains, replaced
    ("unready past the bound", "RUNNING_BUT_UNREADY", True, NOW - 61, "STABLE", {}, True),
    ("never ready, past the bound", "RUNNING_BUT_UNREADY", False, NOW - 61, "STABLE", {}, True),
    ("exactly the bound", "RUNNING_BUT_UNREADY", True, NOW - BOUND, "STABLE", {}, True),
    ("within its start-up budget", "RUNNING_BUT_UNREADY", False, NOW - 59, "STABLE", {}, False),
    ("first seen now", "RUNNING_BUT_UNREADY", False, None, "STABLE", {}, False),
    ("YARN's check of Triton finds it ready", "READY", True, NOW - 600, "STABLE", {}, False),
    ("a rolling upgrade restarts it", "UPGRADING", True, NOW - 600, "UPGRADING", {}, False),
    ("the service upgrades", "RUNNING_BUT_UNREADY", True, NOW - 600, "UPGRADING", {}, False),
    ("the RM's answer lacks it", UNREPORTED, True, NOW - 600, "STABLE", {}, False),
    ("an operator drains it", "RUNNING_BUT_UNREADY", True, NOW - 600, "STABLE", {"triton-1": DRAINED}, False),
    ("a removal is under way", "RUNNING_BUT_UNREADY", True, NOW - 600, "STABLE", REMOVING["drains"], False),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "yarn_state", "was_ready", "since", "service", "drains", "replaced"),
    UNREADY,
    ids=[c[0] for c in UNREADY],
)
def test_an_instance_unready_past_the_bound_is_replaced(
    name: str,
    yarn_state: str,
    was_ready: bool,
    since: float | None,
    service: str,
    drains: dict[str, Drain],
    replaced: bool,
) -> None:
    stuck = Tracked(was_ready=was_ready, unready_since=since)
    if since is None:  # not seen before: no entry at all
        start, seen = world(settled(0, 2.0), target=2, drains=drains)
        seen = replace(seen, containers=(*seen.containers, container(1, yarn_state)))
        seen = replace(seen, scrapes={**seen.scrapes, "c-1": Scrape(False, None, None)})
    else:
        start, seen = world(
            settled(0, 2.0), (container(1, yarn_state), stuck, Scrape(False, None, None)), drains=drains
        )
    seen = replace(seen, service_state=service)
    plan = plan_tick(start, seen, (), NOW, REPLACING)
    if not replaced:
        assert plan.replacing is None
        assert "triton-1" not in plan.decommission
        return
    assert plan.decommission == ("triton-1",)
    assert plan.flex is None  # the flex back comes once YARN has accepted the decommission
    assert plan.decision == Decision(2, "hold", "replacing triton-1", None)
    assert plan.replacing is not None
    assert plan.replacing.direction == "replace"
    assert (plan.replacing.target_from, plan.replacing.target_to) == (2, 2)
    assert plan.replacing.reason.startswith(f"triton-1 unready for {NOW - (since or NOW):.0f} s")
    assert "--replace-unready-after 60" in plan.replacing.reason
    assert any(note.startswith("replacing triton-1 unready") for note in plan.notes)
    assert plan.state.history == ()  # written when YARN accepts (settle)


def test_yarns_default_readiness_is_not_triton_answering() -> None:
    """With --port-stride, YARN's check is DEFAULT (READY once the container has an address):
    the controller's probe alone says whether Triton answers."""
    stuck = Tracked(was_ready=False, unready_since=NOW - 61)
    start, seen = world(settled(0, 2.0), (container(1, "READY"), stuck, Scrape(False, None, None)))
    strided = replace(REPLACING, yarn_checks_triton=False)
    assert plan_tick(start, seen, (), NOW, strided).decommission == ("triton-1",)
    assert plan_tick(start, seen, (), NOW, REPLACING).decommission == ()


def test_the_bound_zero_never_replaces() -> None:
    stuck = Tracked(was_ready=True, unready_since=NOW - 1e6)
    start, seen = world(
        settled(0, 2.0), (container(1, "RUNNING_BUT_UNREADY"), stuck, Scrape(False, None, None))
    )
    assert plan_tick(start, seen, (), NOW, POLICY).replacing is None


def test_the_longest_unready_goes_first_one_per_tick() -> None:
    a = (container(1, "RUNNING_BUT_UNREADY"), Tracked(unready_since=NOW - 70), Scrape(False, None, None))
    b = (container(2, "RUNNING_BUT_UNREADY"), Tracked(unready_since=NOW - 90), Scrape(False, None, None))
    start, seen = world(settled(0, 2.0), a, b)
    assert plan_tick(start, seen, (), NOW, REPLACING).decommission == ("triton-2",)


def test_the_unready_clock_starts_when_an_instance_stops_answering_and_stops_when_it_answers() -> None:
    was = (container(1), Tracked(was_ready=True), Scrape(False, None, None))
    start, seen = world(settled(0, 2.0), was)
    plan = plan_tick(start, seen, (), NOW, REPLACING)
    assert plan.state.tracked["c-1"].unready_since == NOW
    assert {v.instance: v.unready_s for v in plan.views} == {"triton-0": 0.0, "triton-1": 0.0}
    later = plan_tick(plan.state, seen, (), NOW + 30, REPLACING)
    assert later.state.tracked["c-1"].unready_since == NOW
    assert {v.instance: v.unready_s for v in later.views}["triton-1"] == 30.0
    back = replace(seen, scrapes={**seen.scrapes, "c-1": Scrape(True, None, None)})
    assert plan_tick(later.state, back, (), NOW + 31, REPLACING).state.tracked["c-1"].unready_since is None


def test_settling_a_replacement() -> None:
    stuck = Tracked(was_ready=True, unready_since=NOW - 61)
    start, seen = world(
        settled(0, 2.0), (container(1, "RUNNING_BUT_UNREADY"), stuck, Scrape(False, None, None))
    )
    plan = plan_tick(start, seen, (), NOW, REPLACING)
    refused = settle(plan, refused=True)
    assert refused.state.history == ()
    assert refused.state.refill_to is None
    assert refused.decision is not None
    assert "refused" in refused.decision.reason
    accepted = settle(plan, refused=False)
    assert [e.direction for e in accepted.state.history] == ["replace"]
    assert accepted.state.refill_to == 2
    assert accepted.events.replaced == 1
    assert accepted.decision == plan.decision  # the target stays: the instance is replaced, not removed
    assert any(note.startswith("decommissioned triton-1; YARN starts another") for note in accepted.notes)
    # The next tick: YARN's target dropped to 1; the flex back to 2 (again until the RM has it), then nothing.
    start, seen = world(settled(0, 2.0), target=1, refill_to=2)
    refill = plan_tick(start, seen, (), NOW + 1, REPLACING)
    assert (refill.flex, refill.decommission) == (2, ())
    assert refill.decision is not None
    assert refill.decision.target == 2
    start, seen = world(settled(0, 2.0), settled(1, 2.0), refill_to=2)
    done = plan_tick(start, seen, (), NOW + 2, REPLACING)
    assert (done.flex, done.state.refill_to) == (None, None)


# ---- plan_tick: drains, views and registrations
OPERATOR, REMOVAL = Drain(NOW - 1, remove=False), Drain(NOW - 1, remove=True)
UNDRAIN = Request("triton-1", NOW, drain=False)
IDLE_REMOVAL = replace(REMOVAL, started=NOW - 9)
DRAINS = [
    # name, triton-1's drain before, requests, held, ready, its state, its drain after, decommission
    (
        "an operator's drain begins",
        None,
        [Request("triton-1", NOW)],
        0,
        True,
        "DRAINING",
        Drain(NOW, False),
        (),
    ),
    ("an undrain ends it", OPERATOR, [UNDRAIN], 0, True, "READY", None, ()),
    ("an undrain leaves a removal", REMOVAL, [UNDRAIN], 0, True, "DRAINING", REMOVAL, ()),
    (
        "an idle removal ends",
        IDLE_REMOVAL,
        [],
        0,
        True,
        "DRAINING",
        replace(IDLE_REMOVAL, done=True),
        ("triton-1",),
    ),
    ("held requests call a removal off", REMOVAL, [], 5, True, "READY", None, ()),
    ("held requests leave an operator's drain", OPERATOR, [], 5, True, "DRAINING", OPERATOR, ()),
    (
        "a restart ends an operator's drain",
        replace(OPERATOR, saw_unready=True),
        [],
        0,
        True,
        "READY",
        None,
        (),
    ),
    (
        "an instance stops answering",
        OPERATOR,
        [],
        0,
        False,
        "DRAINING",
        replace(OPERATOR, saw_unready=True),
        (),
    ),
]


@pytest.mark.parametrize(
    ("name", "before", "requests", "held", "ready", "state", "after", "decommission"), DRAINS
)
def test_drains(
    name: str,
    before: Drain | None,
    requests: list[Request],
    held: int,
    ready: bool,
    state: str,
    after: Drain | None,
    decommission: tuple[str, ...],
) -> None:
    quiet = Tracked(
        sample(110.0, 0.0, NOW - 2), last_activity=NOW - 30, models_at=NOW - 2, was_ready=True
    )  # nothing since
    one = (container(1), quiet, Scrape(ready, sample(110.0), None))
    drains = {} if before is None else {"triton-1": before}
    start, seen = world(settled(0, 2.0), one, drains=drains)
    if held:
        seen = replace(seen, demand=Report(held=held), demand_received=NOW - 1)
    plan = plan_tick(start, seen, requests, NOW, POLICY)
    views = {v.instance: v.state for v in plan.views}
    assert views["triton-1"] == state
    assert plan.state.drains.get("triton-1") == after
    assert plan.decommission == decommission
    assert ("c-1" in plan.registrations) == (state == "READY")
    if decommission:
        assert plan.decision is None  # decided once the RM answers (settle)


VIEWS = [
    # name, scrape ready, was ready, ip, expected state, registered
    ("answers ready", True, False, "127.0.0.1", "READY", True),
    ("not yet ready", False, False, "127.0.0.1", "STARTING", False),
    ("ready before, not now", False, True, "127.0.0.1", "UNREACHABLE", False),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "ready", "was_ready", "ip", "state", "registered"), VIEWS, ids=[c[0] for c in VIEWS]
)
def test_views_and_registrations(
    name: str, ready: bool, was_ready: bool, ip: str, state: str, registered: bool
) -> None:
    tracked = Tracked(was_ready=was_ready)
    start, seen = world((container(0, ip=ip), tracked, Scrape(ready, None, ("m",))))
    plan = plan_tick(start, seen, (), NOW, POLICY)
    [view] = plan.views
    assert (view.state, "c-0" in plan.registrations) == (state, registered)
    assert plan.state.tracked["c-0"].was_ready is ready
    assert plan.state.tracked["c-0"].models == ("m",)
    assert ("c-0" in plan.state.serving) == (state == "READY")


def test_a_ready_instance_is_announced_once_its_model_list_was_read() -> None:
    """A Triton answering ready whose index did not answer (None) stays STARTING and is asked
    again the next tick; a znode never announces models nobody read."""
    start, seen = world((container(0), Tracked(), Scrape(True, None, None)))
    plan = plan_tick(start, seen, (), NOW, POLICY)
    assert (plan.views[0].state, plan.registrations) == ("STARTING", {})
    watch, _state = plan_watch(plan.state, [container(0)], NOW + 1)
    assert watch.want_models == {"c-0"}
    start, seen = world((container(0), plan.state.tracked["c-0"], Scrape(True, None, ("m",))))
    plan = plan_tick(start, seen, (), NOW + 1, POLICY)
    assert plan.views[0].state == "READY"
    assert json.loads(plan.registrations["c-0"])["models"] == ["m"]


@pytest.mark.parametrize(
    ("openai_port", "record"),
    [(None, {}), (9010, {"openai_port": 9010})],
    ids=["no front: no key", "the front's port"],
)
def test_the_znode_carries_the_openai_port_where_a_front_runs(
    openai_port: int | None, record: dict[str, int]
) -> None:
    front = replace(container(0), openai_port=openai_port)
    start, seen = world((front, Tracked(), Scrape(True, None, ("m",))))
    plan = plan_tick(start, seen, (), NOW, POLICY)
    data = json.loads(plan.registrations["c-0"])
    assert {key: data[key] for key in data if key.startswith("openai")} == record
    assert (data["ip"], data["http_port"]) == ("127.0.0.1", 8000)  # /v2's entry as before
    assert plan.views[0].openai_port == openai_port


QUEUED = TritonSample(NOW, 0.0, 0.0, 0.0, pending=5.0)
STREAMING = FrontSample(counters={}, streams={"a": 3.0, "b": 2.0})
LOADED = Load(0.5, 1.0, 2.0, 0.0, None)
HOLDING = FrontSample(counters={}, streams={}, queued={("alice", "a"): 2.0, ("bob", "b"): 1.0})


@pytest.mark.parametrize(
    ("signal", "scrape", "load", "figure"),
    [
        ("load", Scrape(True, QUEUED, None, front=STREAMING), LOADED, 0.5),
        ("load", Scrape(True, QUEUED, None), None, None),
        ("queue", Scrape(True, QUEUED, None, front=STREAMING), LOADED, 5.0),
        ("queue", Scrape(True, None, None), LOADED, None),  # metrics not read this tick
        # the front's admission queue counts beside Triton's pending requests (issue 49)
        ("queue", Scrape(True, QUEUED, None, front=HOLDING), LOADED, 8.0),
        ("streams", Scrape(True, QUEUED, None, front=STREAMING), LOADED, 5.0),  # every model together
        ("streams", Scrape(True, QUEUED, None, front=FrontSample({}, {})), LOADED, 0.0),  # read: none
        ("streams", Scrape(True, QUEUED, None), LOADED, None),  # front not read: unknown, not 0
    ],
)
def test_the_scaling_figure_of_each_signal(
    signal: Any, scrape: Scrape, load: Load | None, figure: float | None
) -> None:
    assert scaling_figure(signal, scrape, load) == figure


def streaming(n: int, streams: float | None) -> tuple[Container, Tracked, Scrape]:
    """A READY instance with a front; ``streams`` in flight (None: the front not read this tick)."""
    c, tracked, scrape = settled(n, 0.0)
    front = None if streams is None else FrontSample({}, {"m": streams})
    return replace(c, openai_port=9010), tracked, replace(scrape, front=front)


STREAMS_POLICY = replace(POLICY, scaling=replace(POLICY.scaling, scale_up=8, scale_down=2, signal="streams"))


@pytest.mark.parametrize(
    ("streams", "direction", "reason", "flex", "victims"),
    [
        ([12, 10], "up", "streams 11.00 > 8: 2 -> 4", 4, ()),
        ([5, 4], "hold", "streams within the band", None, ()),
        ([0, 1], "down", "streams 0.50 < 2: 2 -> 1", None, ("triton-0",)),  # the fewest streams drain first
        ([None, None], "hold", "no streams figure from any instance", None, ()),
        ([None, 12], "up", "streams 12.00 > 8: 2 -> 4", 4, ()),
    ],
)
def test_scaling_on_streams(
    streams: list[float | None], direction: str, reason: str, flex: int | None, victims: tuple[str, ...]
) -> None:
    """Triton's load is 0 throughout: only the fronts' streams move the target."""
    start, seen = world(*(streaming(n, s) for n, s in enumerate(streams)))
    plan = plan_tick(start, seen, (), NOW, STREAMS_POLICY)
    assert plan.decision is not None
    assert (plan.decision.direction, plan.flex) == (direction, flex), plan.decision.reason
    assert plan.decision.reason == reason
    assert tuple(name for name, d in plan.state.drains.items() if d.remove) == victims


def test_a_container_that_is_gone_is_forgotten() -> None:
    start, seen = world(settled(0), settled(1))
    seen = replace(seen, containers=seen.containers[:1])
    plan = plan_tick(start, seen, (), NOW, POLICY)
    assert set(plan.state.tracked) == {"c-0"}


def test_model_figures_count_every_instance_with_a_sample() -> None:
    start, seen = world(settled(0, 2.0), settled(1, None))
    plan = plan_tick(start, seen, (), NOW, POLICY)
    assert len(plan.events.model_deltas) == 1


# ---- settle: the RM's answer to a decommission
@pytest.mark.parametrize(("refused", "target", "direction", "reason", "left"), [
    (False, 1, "down", "decommissioned 1 drained instance(s)", set()),
    (True, 2, "hold", "draining triton-1", {"triton-1"}),
])  # fmt: skip
def test_settle(refused: bool, target: int, direction: Direction, reason: str, left: set[str]) -> None:
    start, seen = world(
        settled(0, 2.0), settled(1, 0.0), drains={"triton-1": Drain(NOW - 60, remove=True, done=True)}
    )
    plan = settle(plan_tick(start, seen, (), NOW, POLICY), refused=refused)
    assert plan.decision == Decision(target, direction, reason, None)
    assert set(plan.state.drains) == left
    assert plan.events.decommissioned == (0 if refused else 1)
    snap = published(plan, None, "off", (), seen.at, 0.1, POLICY)
    assert snap.target == target


def test_settle_changes_nothing_without_a_decommission() -> None:
    start, seen = world(settled(0, 3.6))
    plan = plan_tick(start, seen, (), NOW, POLICY)
    assert settle(plan, refused=True) == plan


# ---- plan_watch: what to scrape
def test_a_serving_instance_the_rm_leaves_out_is_kept_for_the_grace_then_withdrawn() -> None:
    zero, one = container(0), container(1)
    start = TickState(
        ScalerState(0.0),
        serving={"c-0": zero, "c-1": one},
        tracked={"c-1": Tracked(was_ready=True, models_at=NOW)},
    )
    watch, state = plan_watch(start, [zero], NOW)
    assert [c.instance for c in watch.containers] == ["triton-0", "triton-1"]
    assert watch.containers[1].yarn_state == UNREPORTED
    assert watch.warnings == ("the ResourceManager's answer lacks triton-1 (c-1): kept while it serves",)
    assert watch.want_models == {"c-0"}  # not ready before: asked for its models
    later, _state = plan_watch(state, [zero], NOW + UNREPORTED_GRACE_S + 1)
    assert [c.instance for c in later.containers] == ["triton-0"]
    assert later.warnings == (f"triton-1 unlisted for over {UNREPORTED_GRACE_S:.0f} s: withdrawn",)


def test_the_last_address_is_kept_and_models_are_read_again_after_a_while() -> None:
    start = TickState(
        ScalerState(0.0),
        addresses={"c-0": container(0)},
        tracked={"c-0": Tracked(was_ready=True, models_at=NOW)},
    )
    watch, state = plan_watch(start, [container(0, ip="")], NOW)
    assert watch.containers[0].ip == "127.0.0.1"
    assert watch.want_models == frozenset()
    watch, _state = plan_watch(state, [container(0)], NOW + MODELS_REFRESH_S)
    assert watch.want_models == {"c-0"}


# ---- memory and untrusted ticks
FIRST, AGAIN = "application_1795785000000_0001", "application_1795785000000_0002"  # the same service's


def test_recall_puts_the_earlier_history_and_drains_under_this_ones() -> None:
    old = ScalingEvent(1.0, "up", 1, 2, "earlier")
    mine = ScalingEvent(2.0, "down", 2, 1, "mine")
    data = encode(Memory((old,), {"triton-3": Drain(NOW - 5, remove=False)}, FIRST), NOW, 1.7e9)
    start = TickState(ScalerState(0.0), history=(mine,))
    state, note = recall(start, data, FIRST, NOW, 1.7e9)
    assert state.history == (old, mine)
    assert set(state.drains) == {"triton-3"}
    assert note == "recalled 1 scaling events, drains: ['triton-3']"
    assert to_remember(state) == Memory((old, mine), state.drains, FIRST)
    assert recall(start, None, FIRST, NOW, 1.7e9)[1] is None


def test_recall_ignores_the_memory_of_another_application() -> None:
    """Destroyed and submitted again, or stopped and started: the same name, a new application,
    fresh containers under the old instance names. Its triton-3 is not the drained one."""
    old = ScalingEvent(1.0, "up", 1, 2, "earlier")
    data = encode(Memory((old,), {"triton-3": Drain(NOW - 5, remove=True)}, FIRST), NOW, 1.7e9)
    state, note = recall(TickState(ScalerState(0.0)), data, AGAIN, NOW, 1.7e9)
    assert (state.history, dict(state.drains)) == ((), {})
    assert note == (
        f"ignored the memory of application {FIRST} (1 scaling events, drains: ['triton-3']):"
        f" this is application {AGAIN} (the service was destroyed or stopped, and submitted or started again)"
    )
    assert to_remember(state) == Memory((), {}, AGAIN)  # the other's replaced at once


@pytest.mark.parametrize(
    ("written_by", "application"),
    [(None, AGAIN), (FIRST, None), (None, None)],
    ids=["an older controller's memory", "an RM answer without id", "neither"],
)
def test_recall_keeps_a_memory_it_cannot_tell(written_by: str | None, application: str | None) -> None:
    """An older controller wrote no application id: a running service it upgrades keeps its drains."""
    old = ScalingEvent(1.0, "up", 1, 2, "earlier")
    data = encode(Memory((old,), {"triton-3": Drain(NOW - 5, remove=True)}, written_by), NOW, 1.7e9)
    state, note = recall(TickState(ScalerState(0.0)), data, application, NOW, 1.7e9)
    assert (state.history, set(state.drains)) == ((old,), {"triton-3"})
    assert note == "recalled 1 scaling events, drains: ['triton-3']"
    assert to_remember(state) == (
        None if written_by == application else Memory((old,), state.drains, application)
    )  # an older controller's memory is stamped with this application's id


def test_memory_is_written_only_when_it_changed_and_was_read_back() -> None:
    state = TickState(ScalerState(0.0))
    assert to_remember(state) is None  # not read back yet: nothing overwritten
    state = replace(state, remembered=Memory())
    assert to_remember(state) is None
    event = ScalingEvent(1.0, "up", 1, 2, "r")
    assert to_remember(replace(state, history=(event,))) == Memory((event,), {})


def test_an_untrusted_tick_keeps_what_was_published() -> None:
    start, seen = world(settled(0))
    before = published(plan_tick(start, seen, (), NOW, POLICY), None, "off", (), seen.at, 0.1, POLICY)
    after = untrusted(before, start, "no answer", 1.8e9, 0.2)
    assert (after.instances, after.target, after.state, after.events) == (
        before.instances,
        before.target,
        "UNKNOWN",
        None,
    )
    assert after.problems == ("no answer; nothing changed until the view can be trusted",)
    assert isinstance(after, Snapshot)


def test_published_marks_registered_only_what_zookeeper_holds() -> None:
    start, seen = world(settled(0), settled(1))
    plan: TickPlan = plan_tick(start, seen, (), NOW, POLICY)
    snap = published(plan, {"c-1"}, "connected", ("p",), seen.at, 0.1, POLICY)
    assert [i.registered for i in snap.instances] == [False, True]
    assert (snap.zookeeper, snap.problems, snap.service) == ("connected", ("p",), "svc")


TOKENS = ("tarn_openai_prompt_tokens_total", (("model", "m"), ("user", "anonymous")))


def front_reads(first_ready: bool, *reads: float | None) -> list[dict[Any, float]]:
    """The front increases of a tick per read (None: the front did not answer), one instance with a
    front, first seen ready (adopted) or starting."""
    c = replace(container(0), openai_port=9010)
    state = TickState(ScalerState(last_change_at=0.0))
    ticks = [] if first_ready else [Scrape(False, None, None)]
    ticks += [
        Scrape(True, None, ("m",), front=None if n is None else FrontSample({TOKENS: n}, {})) for n in reads
    ]
    increases: list[dict[Any, float]] = []
    for n, scrape in enumerate(ticks):
        plan = plan_tick(state, Observed(1.7e9, "STABLE", 1, (c,), {"c-0": scrape}), (), NOW + n, POLICY)
        state = plan.state
        increases += [dict(d) for d in plan.events.front_deltas] or [{}]
    return increases


def test_a_front_the_controller_saw_start_counts_from_zero_even_when_its_first_read_failed() -> None:
    # The activator's held requests reach a new instance as soon as it registers: 40 tokens went
    # out before the first read that answered; they are this controller's to count.
    assert front_reads(False, None, 40.0, 45.0) == [{}, {}, {TOKENS: 40.0}, {TOKENS: 5.0}]


def test_a_front_adopted_already_serving_is_a_baseline() -> None:
    # After a restart of the controller: what the front counted before is not counted again.
    assert front_reads(True, 1000.0, 1004.0) == [{}, {TOKENS: 4.0}]


def model_reads(first_ready: bool, *reads: float | None) -> list[dict[str, float]]:
    """Model m's requests counted per tick (None: Triton's metrics did not answer), one instance,
    first seen ready (adopted) or starting; each tick one second after the last."""
    c = container(0)
    state = TickState(ScalerState(last_change_at=0.0))
    ticks = [] if first_ready else [Scrape(False, None, None)]
    ticks += [
        Scrape(
            True,
            None if ok is None else TritonSample(NOW + len(ticks) + n, models=(("m", ModelCounters(ok)),)),
            ("m",),
        )
        for n, ok in enumerate(reads)
    ]
    counted: list[dict[str, float]] = []
    for n, scrape in enumerate(ticks):
        plan = plan_tick(state, Observed(1.7e9, "STABLE", 1, (c,), {"c-0": scrape}), (), NOW + n, POLICY)
        state = plan.state
        counted += [{m: d.ok for m, d in deltas.items()} for deltas in plan.events.model_deltas] or [{}]
    return counted


def test_an_instance_the_controller_saw_start_counts_its_models_from_zero() -> None:
    # A scale from zero: the held burst (30 requests) is served before the first scrape answers.
    assert model_reads(False, None, 30.0, 32.0) == [{}, {}, {"m": 30.0}, {"m": 2.0}]


def test_an_instance_adopted_already_serving_is_a_baseline_for_its_models() -> None:
    # After a restart of the controller: what Triton counted before is not counted again.
    assert model_reads(True, 1000.0, 1003.0) == [{}, {"m": 3.0}]


# ---- containers YARN owes (issue 47: an AM that cannot allocate showed nowhere)
@pytest.mark.parametrize(
    ("since", "unplaced", "now", "expected"),
    [
        (None, 0, NOW, None),  # nothing owed
        (None, 1, NOW, NOW),  # owed from now
        (NOW - 50, 2, NOW, NOW - 50),  # still owed: the clock runs on
        (NOW - 50, 0, NOW, None),  # placed: the clock stops
        (None, -1, NOW, None),  # more than the target (a drain's container still listed)
    ],
)
def test_owed_since(since: float | None, unplaced: int, now: float, expected: float | None) -> None:
    assert owed_since(since, unplaced, now) == expected


@pytest.mark.parametrize(
    ("since", "said"),
    [(None, False), (NOW - UNPLACED_GRACE_S + 1, False), (NOW - UNPLACED_GRACE_S, True), (NOW - 900, True)],
)
def test_containers_owed_past_the_grace_are_a_problem_naming_where_to_look(
    since: float | None, said: bool
) -> None:
    line = unplaced_for_long(1, since, NOW)
    assert (line is not None) == said
    if line is not None:
        assert "YARN has not placed 1 Triton container(s)" in line
        assert "serviceam.log" in line


def test_a_tick_says_when_yarn_has_owed_a_container_too_long() -> None:
    start, seen = world(settled(0, 2.0), settled(1, 2.0), target=3)
    first = plan_tick(start, seen, (), NOW, POLICY)
    assert first.state.unplaced_since == NOW
    assert not any("not placed" in p for p in first.problems)
    later = plan_tick(first.state, seen, (), NOW + UNPLACED_GRACE_S, POLICY)
    assert later.state.unplaced_since == NOW
    assert any("YARN has not placed 1 Triton container(s) for 120 s" in p for p in later.problems)
    placed, seen3 = world(settled(0, 2.0), settled(1, 2.0), settled(2, 2.0), target=3)
    done = plan_tick(replace(placed, unplaced_since=NOW), seen3, (), NOW + 200, POLICY)
    assert done.state.unplaced_since is None
    assert not any("not placed" in p for p in done.problems)


# ---- containers YARN owes, asked for again (issue 47: a relaunch request lost by the service AM)
@pytest.mark.parametrize(
    ("since", "reasked_at", "due"),
    [
        (None, None, False),  # nothing owed
        (NOW - REASK_AFTER_S + 1, None, False),  # owed, within the minute
        (NOW - REASK_AFTER_S, None, True),  # owed a minute: asked again
        (NOW - 500, NOW - 10, False),  # asked again 10 s ago: YARN's turn
        (NOW - 500, NOW - REASK_AFTER_S, True),  # asked again a minute ago, still owed: again
    ],
)
def test_reask_due(since: float | None, reasked_at: float | None, due: bool) -> None:
    assert reask_due(since, reasked_at, NOW) == due


def test_containers_owed_a_minute_are_asked_for_again_by_a_flex_up_and_back() -> None:
    # Two instances failed in one AM heartbeat; YARN relaunched one and owes the other.
    start, seen = world(settled(0, 2.0), target=2)
    first = plan_tick(start, seen, (), NOW, POLICY)
    assert (first.flex, first.flex_through) == (None, None)
    plan = plan_tick(first.state, seen, (), NOW + REASK_AFTER_S, POLICY)
    assert (plan.flex_through, plan.flex) == (3, 2)  # up by the one owed, then back
    assert plan.decision is not None
    assert plan.decision.direction == "hold"
    assert "YARN has owed 1 Triton container(s) for 60 s: asked again" in plan.decision.reason
    assert any("asked again" in note for note in plan.notes)
    assert plan.state.reasked_at == NOW + REASK_AFTER_S
    [event] = plan.state.history
    assert (event.direction, event.target_from, event.target_to) == ("reask", 2, 2)
    # YARN's turn: not asked again the next tick, and again a minute later if still owed.
    assert plan_tick(plan.state, seen, (), NOW + REASK_AFTER_S + 2, POLICY).flex_through is None
    again = plan_tick(plan.state, seen, (), NOW + 2 * REASK_AFTER_S, POLICY)
    assert (again.flex_through, again.flex) == (3, 2)


def test_two_containers_owed_are_both_asked_for() -> None:
    start, seen = world(settled(0, 2.0), target=3, unplaced_since=NOW - REASK_AFTER_S)
    plan = plan_tick(start, seen, (), NOW, POLICY)
    assert (plan.flex_through, plan.flex) == (5, 3)


@pytest.mark.parametrize(
    ("why", "service_state", "extra"),
    [
        ("a rolling upgrade restarts instances itself", "UPGRADING", {}),
        ("a removal drains", "STABLE", REMOVING),
    ],
)
def test_no_reask_while(why: str, service_state: str, extra: dict[str, Any]) -> None:
    start, seen = world(settled(0, 2.0), settled(1, 2.0), target=3, unplaced_since=NOW - 500, **extra)
    plan = plan_tick(start, replace(seen, service_state=service_state), (), NOW, POLICY)
    assert plan.flex_through is None, why


def test_nothing_owed_nothing_asked() -> None:
    start, seen = world(settled(0, 2.0), settled(1, 2.0), unplaced_since=None, reasked_at=NOW - 500)
    plan = plan_tick(start, seen, (), NOW, POLICY)
    assert plan.flex_through is None
    assert plan.state.unplaced_since is None


def test_an_instance_whose_container_yarn_lists_as_ended_is_owed_one() -> None:
    # CI8: the service AM lost the relaunch of triton-1; the RM still listed its old container as
    # FAILED, so nothing was seen as owed and nothing asked again for 10 minutes.
    ended = (container(1, yarn_state="FAILED"), Tracked(), Scrape(False, None, None, "refused"))
    start, seen = world(settled(0, 2.0), ended, target=2)
    first = plan_tick(start, seen, (), NOW, POLICY)
    assert first.state.unplaced_since == NOW
    plan = plan_tick(first.state, seen, (), NOW + REASK_AFTER_S, POLICY)
    assert (plan.flex_through, plan.flex) == (3, 2)
    # tarn_running_containers (and tarn_unplaced_containers from it) count the same way
    assert placed(["READY", "FAILED", "SUCCEEDED", "STOPPED", "RUNNING_BUT_UNREADY"]) == 2
