"""One tick's decisions, pure: (state, what was observed, the operator's requests, now, policy)
→ (actions, next state). The loop (tarn.controller.loop) observes, asks these functions, acts
and publishes; it decides nothing itself.

A tick, in the order the loop calls them:
- ``recall``: once, what an earlier controller of this YARN application left in ZooKeeper
  (history, drains);
- ``plan_watch``: which containers to scrape (the RM's list, plus serving instances the RM's
  answer lacks, within a grace) and which to ask for their models;
- ``plan_tick``: loads, drains (operator requests, called off while requests are held, their
  end), the instance views, the registrations, the replacement of an instance unready past
  --replace-unready-after, the scaling decision with its holds, and the RM action: a flex, or the
  decommission of drained victims or of the instance replaced;
- ``settle``: the decision once the RM accepted or refused that decommission;
- ``to_remember`` and ``published``: what to save in ZooKeeper, and the snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from tarn.activator.demand import Report, held_now
from tarn.controller.decide import Candidate, Decision, Observation, Policy, ScalerState, decide, pick_victims
from tarn.controller.drain import (
    Drain,
    DrainPolicy,
    Request,
    Seen,
    begin_removal,
    cancel_removals,
    removed,
    removing,
    step,
)
from tarn.controller.fronts import NOTHING_COUNTED, FrontSample, Series, front_deltas
from tarn.controller.memory import Memory, ScalingEvent, decode, foreign
from tarn.controller.observe import (
    UNREPORTED,
    UNREPORTED_GRACE_S,
    Container,
    Scrape,
    unreported,
    with_known_addresses,
)
from tarn.controller.registry import znode_data
from tarn.controller.signals import (
    Load,
    ModelDelta,
    ModelView,
    TritonSample,
    instance_load,
    model_deltas,
    model_views,
)
from tarn.controller.snapshot import InstanceView, Snapshot, TickEvents, placed
from tarn.spec import yarn_checks_triton
from tarn.stdlib.config import TarnConfig, cli_flag
from tarn.stdlib.config.declaration import ScaleSignal

MODELS_REFRESH_S = 30.0  # a serving instance's model list is read again this often
HISTORY_SIZE = 50  # scaling events kept (the dashboard's and ZooKeeper's memory)
NO_SCRAPE = Scrape(False, None, None, "no address")


@dataclass(frozen=True)
class Tracked:
    """What the controller remembers per container between ticks."""

    sample: TritonSample | None = None
    last_activity: float = 0.0
    models: tuple[str, ...] = ()
    models_at: float = -1e9
    was_ready: bool = False
    unready_since: float | None = None  # first seen, or seen to stop answering ready; None: ready
    front: FrontSample | None = None  # the OpenAI front's last counters read
    # First seen before it answered ready: all its Triton and front counted happened in this
    # controller's time, so their first reads count whole (an instance adopted ready is a baseline).
    seen_starting: bool = False
    first_seen: float = 0.0

    @property
    def models_known(self) -> bool:
        return self.models_at > Tracked.models_at


@dataclass(frozen=True)
class TickState:
    scaler: ScalerState
    tracked: Mapping[str, Tracked] = field(default_factory=dict)  # by container id
    addresses: Mapping[str, Container] = field(default_factory=dict)  # by id: the last address the RM gave
    serving: Mapping[str, Container] = field(default_factory=dict)  # by id: READY at the last trusted tick
    unlisted_since: Mapping[str, float] = field(default_factory=dict)  # by id: serving, missing from the RM
    drains: Mapping[str, Drain] = field(default_factory=dict)  # by instance name
    history: tuple[ScalingEvent, ...] = ()  # newest first
    remembered: Memory | None = None  # what ZooKeeper holds; None until read back
    application: str | None = None  # the YARN application whose memory this is, from the recall
    refill_to: int | None = None  # after a replacement's decommission: flex back to this target
    unplaced_since: float | None = None  # since when YARN owes Triton containers (fewer than the target)
    reasked_at: float | None = None  # when the owed containers were last asked for again (reask)

    @classmethod
    def starting(cls, now: float) -> TickState:
        """A (re)started controller waits a cooldown: it may be a restart, acting on nothing it saw."""
        return cls(ScalerState(last_change_at=now))


@dataclass(frozen=True)
class TickPolicy:
    service: str
    scaling: Policy
    drain: DrainPolicy
    concurrency: float  # --concurrency-per-instance: the in-flight requests that make load 1.0
    replace_unready_after_s: float = 0.0  # 0: never
    yarn_checks_triton: bool = True  # YARN's READY means Triton answered (no --port-stride)

    @classmethod
    def from_config(cls, config: TarnConfig) -> TickPolicy:
        return cls(
            service=config.service_name,
            scaling=Policy.from_config(config),
            drain=DrainPolicy.from_config(config),
            concurrency=config.concurrency_per_instance,
            replace_unready_after_s=float(config.replace_unready_after_s),
            yarn_checks_triton=yarn_checks_triton(config),
        )


# ---- memory
def recall(
    state: TickState, data: bytes | None, application: str | None, clock_now: float, wall_now: float
) -> tuple[TickState, str | None]:
    """What an earlier controller of ``application`` remembered, merged into this one's state; a
    log line if any. Another application's memory is ignored: its drains name instances of a
    service that is gone, and this service's instances have the same names."""
    found = decode(data, clock_now, wall_now)
    ignored = foreign(found, application)
    memory = Memory() if ignored else found
    drains = {**memory.drains, **state.drains}
    history = (*memory.history, *state.history)[:HISTORY_SIZE]
    state = replace(state, remembered=found, application=application, history=history, drains=drains)
    if not data:
        return state, None
    if ignored:
        return state, (
            f"ignored the memory of application {found.application} ({len(found.history)} scaling events,"
            f" drains: {sorted(found.drains) or 'none'}): this is application {application}"
            " (the service was destroyed or stopped, and submitted or started again)"
        )
    return state, f"recalled {len(memory.history)} scaling events, drains: {sorted(drains) or 'none'}"


def to_remember(state: TickState) -> Memory | None:
    """The memory to write to ZooKeeper: None while unchanged (or not read back yet). Also once
    right after the recall where ZooKeeper holds no memory of this application by its id (none,
    another application's, an older controller's without one): it is replaced by this one's."""
    memory = Memory(state.history, dict(state.drains), state.application)
    return None if state.remembered is None or memory == state.remembered else memory


# ---- what to observe
@dataclass(frozen=True)
class Watch:
    containers: tuple[Container, ...]
    want_models: frozenset[str]  # container ids to ask for their model list
    warnings: tuple[str, ...]


def plan_watch(state: TickState, listed: Sequence[Container], now: float) -> tuple[Watch, TickState]:
    """The RM's containers (with addresses it stopped reporting), plus those that served at the
    last tick and are missing from its answer, kept for observe.UNREPORTED_GRACE_S."""
    known = with_known_addresses(list(listed), dict(state.addresses))
    missing = unreported(dict(state.serving), known)
    since = {c.container_id: state.unlisted_since.get(c.container_id, now) for c in missing}
    kept = [c for c in missing if now - since[c.container_id] <= UNREPORTED_GRACE_S]
    warnings = []
    for c in missing:
        if c.container_id not in state.unlisted_since:
            warnings.append(
                f"the ResourceManager's answer lacks {c.instance} ({c.container_id}): kept while it serves"
            )
        elif c not in kept:
            warnings.append(f"{c.instance} unlisted for over {UNREPORTED_GRACE_S:.0f} s: withdrawn")
    containers = (*known, *kept)
    unseen = Tracked()
    want = frozenset(
        c.container_id
        for c in containers
        if not (seen := state.tracked.get(c.container_id, unseen)).was_ready
        or now - seen.models_at >= MODELS_REFRESH_S
    )
    state = replace(
        state,
        addresses={c.container_id: c for c in containers if c.ip},
        unlisted_since={c.container_id: since[c.container_id] for c in kept},
    )
    return Watch(containers, want, tuple(warnings)), state


# ---- the tick
@dataclass(frozen=True)
class Observed:
    at: float  # wall clock
    service_state: str
    target: int  # the Triton component's number_of_containers at the RM
    containers: tuple[Container, ...]
    scrapes: Mapping[str, Scrape]  # by container id
    demand: Report | None = None  # the activators' last report
    demand_received: float = -1e9  # when it was received (the controller's clock)


@dataclass(frozen=True)
class TickPlan:
    state: TickState  # for the next tick; a decommission is applied by settle()
    target: int  # the RM's, before any action
    service_state: str
    views: tuple[InstanceView, ...]  # 'registered' is known once ZooKeeper answered (published())
    registrations: dict[str, bytes]  # znode data by container id: the ready instances
    flex: int | None  # ask YARN for this many instances
    decommission: tuple[str, ...]  # ask YARN to remove these drained instances
    decision: Decision | None  # None while a decommission waits for the RM's answer
    held: int
    held_oldest_s: float
    models: tuple[ModelView, ...]  # per model, over this tick
    events: TickEvents
    problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # for the log
    replacing: ScalingEvent | None = None  # the history entry of the replacement decommissioned
    flex_through: int | None = None  # flex to this first, then to ``flex`` (a reask)


def plan_tick(
    state: TickState, seen: Observed, requests: Sequence[Request], now: float, policy: TickPolicy
) -> TickPlan:
    containers = seen.containers
    scrapes = {c.container_id: seen.scrapes.get(c.container_id, NO_SCRAPE) for c in containers}
    held = held_now(seen.demand, seen.demand_received, now)
    tracked, loads, deltas, fronts = _track(state.tracked, containers, scrapes, now, policy.concurrency)

    notes: list[str] = []
    drains = dict(state.drains)
    if held:  # someone waits for an instance: none that can still serve may go
        drains, called_off = cancel_removals(drains)
        if called_off:
            notes.append(f"requests held: the drain of {', '.join(called_off)} called off")
    activity = {
        c.instance: Seen(scrapes[c.container_id].ready, tracked[c.container_id].last_activity)
        for c in containers
    }
    drained = step(drains, activity, requests, now, policy.drain)
    notes.extend(drained.events)
    views = tuple(
        _view(
            c,
            scrapes[c.container_id],
            loads.get(c.container_id),
            tracked[c.container_id],
            drained.drains,
            now,
        )
        for c in containers
    )
    tracked = {k: replace(t, was_ready=scrapes[k].ready) for k, t in tracked.items()}
    serving = [v for v in views if v.state in ("READY", "DRAINING")]
    samples = [tracked[v.container_id].sample for v in serving]
    models = model_views(deltas, [v.models for v in serving], [dict(s.models) for s in samples if s])
    registrations = {
        v.container_id: znode_data(v.record(policy.service)) for v in views if v.state == "READY"
    }
    unplaced = seen.target - placed(c.yarn_state for c in containers)
    since = owed_since(state.unplaced_since, unplaced, now)
    state = replace(
        state,
        tracked=tracked,
        drains=drained.drains,
        serving={c.container_id: c for c, v in zip(containers, views, strict=True) if v.state == "READY"},
        unplaced_since=since,
    )
    unplaced_problem = unplaced_for_long(unplaced, since, now)
    plan = TickPlan(
        state=state,
        target=seen.target,
        service_state=seen.service_state,
        views=views,
        registrations=registrations,
        flex=None,
        decommission=drained.decommission,
        decision=None,
        held=held,
        held_oldest_s=seen.demand.oldest_s if seen.demand is not None and held else 0.0,
        models=models,
        events=TickEvents(
            drains_started=drained.started, model_deltas=tuple(deltas), front_deltas=tuple(fronts)
        ),
        problems=(unplaced_problem,) if unplaced_problem else (),
        notes=tuple(notes),
    )
    if drained.decommission:
        return plan
    plan = _refill(plan)
    if plan.flex is not None:
        return plan
    return (
        _reask(plan, unplaced, seen, now)
        or _replace_unready(plan, seen, policy)
        or _scale(plan, now, seen, policy)
    )


# A container is placed within seconds where a node has room; past this, the operator must know.
UNPLACED_GRACE_S = 120.0


def owed_since(since: float | None, unplaced: int, now: float) -> float | None:
    """Since when YARN has owed Triton containers: kept while it owes any, None once it owes none."""
    if unplaced <= 0:
        return None
    return now if since is None else since


def unplaced_for_long(unplaced: int, since: float | None, now: float) -> str | None:
    """The problem line once YARN has owed containers for UNPLACED_GRACE_S (issue 47: an AM that
    cannot allocate used to show nowhere)."""
    if since is None or now - since < UNPLACED_GRACE_S:
        return None
    return (
        f"YARN has not placed {unplaced} Triton container(s) for {now - since:.0f} s: the service AM "
        "cannot allocate (its log, serviceam.log, names the cause; docs/recovery.md) or no NodeManager "
        "has the resources"
    )


REASK_AFTER_S = 60.0


def reask_due(since: float | None, reasked_at: float | None, now: float) -> bool:
    """Whether to ask YARN again for the containers it owes: owed for REASK_AFTER_S, and not
    asked again within the last REASK_AFTER_S."""
    if since is None or now - since < REASK_AFTER_S:
        return False
    return reasked_at is None or now - reasked_at >= REASK_AFTER_S


def _reask(plan: TickPlan, unplaced: int, seen: Observed, now: float) -> TickPlan | None:
    """Containers YARN has owed for a minute are asked for again: a flex up by as many, then back
    (issue 47). With a placement policy (the seeds' anti-affinity) Hadoop 3.4.2's service AM asks
    for a relaunch with one SchedulingRequest that replaces the one pending, so two instances
    that fail in one AM heartbeat get one container, and the other waits for ever. The flex up
    asks for them all again; the AM hands each container to its oldest waiting instance, and the
    flex back removes the newest instances, the ones the flex up made (the AM orders them by
    their number). Where YARN cannot place them (no room), it asks for what it already asked.
    In the history as a "reask". None: nothing to ask this tick."""
    state = plan.state
    if (
        seen.service_state in UPGRADING
        or removing(state.drains)
        or not reask_due(state.unplaced_since, state.reasked_at, now)
    ):
        return None
    owed_s = now - state.unplaced_since if state.unplaced_since is not None else 0.0
    reason = (
        f"YARN has owed {unplaced} Triton container(s) for {owed_s:.0f} s: asked again "
        f"(flexed to {plan.target + unplaced}, then back to {plan.target}; docs/recovery.md)"
    )
    event = ScalingEvent(seen.at, "reask", plan.target, plan.target, reason)
    history = (event, *state.history)[:HISTORY_SIZE]
    return replace(
        plan,
        state=replace(state, reasked_at=now, history=history),
        flex=plan.target,
        flex_through=plan.target + unplaced,
        decision=Decision(plan.target, "hold", reason, None),
        notes=(*plan.notes, reason),
    )


# A container a rolling upgrade is restarting (the upgrade's own business), or one the RM's answer
# lacks: never replaced; nor one YARN finds READY where YARN's readiness check asks Triton.
LEFT_ALONE_AT_YARN = frozenset({"UPGRADING", "NEEDS_UPGRADE", UNREPORTED})
UPGRADING = ("UPGRADING", "UPGRADING_AUTO_FINALIZE", "CANCEL_UPGRADING")


def overdue_unready(
    views: Sequence[InstanceView], bound_s: float, yarn_checks_triton: bool = True
) -> tuple[InstanceView, ...]:
    """Instances to replace, longest unready first: unready for ``bound_s`` or more to the
    controller (Triton does not answer ready) and, where YARN's readiness check asks Triton, to
    YARN too; so never one that still serves. Not draining (a drain ends in its own
    decommission). A new instance's clock starts when it is first seen, so one still within its
    start-up budget is never among them."""
    if bound_s <= 0:
        return ()
    left_alone = LEFT_ALONE_AT_YARN | ({"READY"} if yarn_checks_triton else set())
    unready = [v for v in views if v.state in ("STARTING", "UNREACHABLE")]
    overdue = [v for v in unready if v.yarn_state not in left_alone and v.unready_s >= bound_s]
    return tuple(sorted(overdue, key=lambda v: -v.unready_s))


def _replace_unready(plan: TickPlan, seen: Observed, policy: TickPolicy) -> TickPlan | None:
    """One instance unready past the bound is decommissioned; once YARN accepts (settle), the
    target is flexed back, so YARN starts another. None: nothing to replace this tick."""
    if seen.service_state in UPGRADING or removing(plan.state.drains):
        return None  # a rolling upgrade restarts instances itself; a removal is under way
    overdue = overdue_unready(plan.views, policy.replace_unready_after_s, policy.yarn_checks_triton)
    if not overdue:
        return None
    victim = overdue[0]
    flag = cli_flag("replace_unready_after_s")
    reason = (
        f"{victim.instance} unready for {victim.unready_s:.0f} s ({flag} {policy.replace_unready_after_s:g}, "
        f"YARN: {victim.yarn_state}): replaced"
    )
    return replace(
        plan,
        decommission=(victim.instance,),
        replacing=ScalingEvent(seen.at, "replace", plan.target, plan.target, reason),
        decision=Decision(plan.target, "hold", f"replacing {victim.instance}", None),
        notes=(*plan.notes, f"replacing {reason.removesuffix(': replaced')}"),
    )


def _refill(plan: TickPlan) -> TickPlan:
    """After a replacement's decommission, the target flexed back (again each tick until the RM
    has it); then forgotten."""
    want = plan.state.refill_to
    if want is None:
        return plan
    if plan.target >= want:
        return replace(plan, state=replace(plan.state, refill_to=None))
    reason = f"a replaced instance's successor: {plan.target} -> {want}"
    return replace(plan, flex=want, decision=Decision(want, "hold", reason, None))


def _scale(plan: TickPlan, now: float, seen: Observed, policy: TickPolicy) -> TickPlan:
    """The scaling decision, and its holds: while a removal drains, while the RM's answer lacks a
    serving instance (its count and list disagree with what serves: no flex or drain on that)."""
    state, views, target = plan.state, plan.views, plan.target
    pending = removing(state.drains)
    if pending:
        return replace(plan, decision=Decision(target, "hold", f"draining {', '.join(pending)}", None))
    missing = [v.instance for v in views if v.yarn_state == UNREPORTED and v.state == "READY"]
    if missing:
        reason = f"the ResourceManager's answer lacks {', '.join(missing)}, still serving"
        return replace(
            plan, decision=Decision(target, "hold", reason, None), problems=(*plan.problems, reason)
        )

    figures = {
        v.container_id: scaling_figure(
            policy.scaling.signal, seen.scrapes.get(v.container_id, NO_SCRAPE), v.load
        )
        for v in views
    }
    served = (t.last_activity for t in state.tracked.values())
    observation = Observation(
        target=target,
        ready=sum(1 for v in views if v.state in ("READY", "DRAINING")),
        loads=tuple(figures[v.container_id] for v in views if v.state == "READY"),
        held=plan.held,
        idle_s=now - max(seen.demand_received, state.scaler.last_change_at, *served),
    )
    decision, scaler = decide(state.scaler, observation, now, policy.scaling)
    state = replace(state, scaler=scaler)
    if decision.target == target:
        return replace(plan, state=state, decision=decision)
    event = ScalingEvent(seen.at, decision.direction, target, decision.target, decision.reason)
    state = replace(state, history=(event, *state.history)[:HISTORY_SIZE])
    events = replace(plan.events, scaled=decision.direction)
    notes = list(plan.notes)
    flex = None
    if decision.target > target:
        flex = decision.target
    else:
        candidates = [Candidate(v.instance, v.state == "READY", figures[v.container_id]) for v in views]
        victims = pick_victims(candidates, target - decision.target)
        state = replace(state, drains=begin_removal(state.drains, victims, now))
        events = replace(events, drains_started=events.drains_started + len(victims))
        notes.append(f"draining {', '.join(victims)} before scaling down: {decision.reason}")
    notes.append(f"scaling {decision.direction}: {decision.reason}")
    return replace(plan, state=state, decision=decision, flex=flex, events=events, notes=tuple(notes))


def scaling_figure(signal: ScaleSignal, scrape: Scrape, load: Load | None) -> float | None:
    """One instance's figure for the autoscaler (--scale-on): its load; or, from this tick's scrape,
    the requests queued (Triton's pending ones, and those its front holds for a generation slot)
    or its front's streams in flight. None: not read this tick (a front that did not answer counts
    as unknown, never as 0 streams)."""
    if signal == "queue":
        if scrape.sample is None:
            return None
        return scrape.sample.pending + (scrape.front.queued_total if scrape.front is not None else 0.0)
    if signal == "streams":
        return sum(scrape.front.streams.values()) if scrape.front is not None else None
    return load.value if load is not None else None


def settle(plan: TickPlan, refused: bool) -> TickPlan:
    """The plan once the RM answered its decommission: accepted, the drains end and the target
    drops; refused, the removal drains stay and the scaler holds (tried again next tick)."""
    done, target = plan.decommission, plan.target
    if not done:
        return plan
    if plan.replacing is not None:
        return _settle_replacement(plan, plan.replacing, refused)
    if refused:
        pending = ", ".join(removing(plan.state.drains))
        return replace(plan, decision=Decision(target, "hold", f"draining {pending}", None))
    after = target - len(done)
    return replace(
        plan,
        state=replace(plan.state, drains=removed(plan.state.drains, done)),
        decision=Decision(after, "down", f"decommissioned {len(done)} drained instance(s)", None),
        events=replace(plan.events, decommissioned=len(done)),
        notes=(*plan.notes, f"decommissioned {', '.join(done)} (target {target} -> {after})"),
    )


def _settle_replacement(plan: TickPlan, event: ScalingEvent, refused: bool) -> TickPlan:
    victim = plan.decommission[0]
    if refused:
        reason = f"replacing {victim}: the ResourceManager refused; again next tick"
        return replace(plan, decision=Decision(plan.target, "hold", reason, None))
    history = (event, *plan.state.history)[:HISTORY_SIZE]
    return replace(
        plan,
        state=replace(plan.state, history=history, refill_to=plan.target),
        events=replace(plan.events, replaced=1),
        notes=(*plan.notes, f"decommissioned {victim}; YARN starts another: {event.reason}"),
    )


def published(
    plan: TickPlan,
    registered: set[str] | None,
    zookeeper: str,
    problems: Sequence[str],
    at: float,
    tick_seconds: float,
    policy: TickPolicy,
) -> Snapshot:
    """The snapshot of a trusted tick. Discovery lists the ready instances, and with ZooKeeper
    only those in it (``registered``: container ids, read once the sync is done)."""
    views = tuple(
        replace(v, registered=v.state == "READY" and (registered is None or v.container_id in registered))
        for v in plan.views
    )
    return Snapshot(
        service=policy.service,
        at=at,
        state=plan.service_state,
        target=plan.decision.target if plan.decision else plan.target,
        instances=views,
        decision=plan.decision,
        history=plan.state.history,
        zookeeper=zookeeper,
        problems=tuple(problems),
        tick_seconds=tick_seconds,
        held=plan.held,
        held_oldest_s=plan.held_oldest_s,
        scale_to_zero=policy.scaling.scale_to_zero_after_s > 0,
        models=plan.models,
        drains=dict(plan.state.drains),
        events=plan.events,
    )


def untrusted(previous: Snapshot, state: TickState, doubt: str, at: float, tick_seconds: float) -> Snapshot:
    """A view that cannot be trusted changes nothing: discovery, drains, the target and the
    instances stay as last seen (the API and HAProxy keep serving them); only the state says so."""
    return replace(
        previous,
        at=at,
        state="UNKNOWN",
        decision=None,
        history=state.history,
        problems=(f"{doubt}; nothing changed until the view can be trusted",),
        tick_seconds=tick_seconds,
        drains=dict(state.drains),
        events=None,
    )


def _track(
    before: Mapping[str, Tracked],
    containers: Sequence[Container],
    scrapes: Mapping[str, Scrape],
    now: float,
    concurrency: float,
) -> tuple[
    dict[str, Tracked], dict[str, Load | None], list[dict[str, ModelDelta]], list[dict[Series, float]]
]:
    """Each container's scrape remembered: (tracked, load since the previous scrape, per-model
    deltas of every instance with a sample, the increases of every OpenAI front read). Containers
    that are gone are forgotten."""
    tracked: dict[str, Tracked] = {}
    loads: dict[str, Load | None] = {}
    deltas: list[dict[str, ModelDelta]] = []
    fronts: list[dict[Series, float]] = []
    for c in containers:
        scrape = scrapes[c.container_id]
        known = before.get(c.container_id)
        if known is None:
            known = Tracked(last_activity=now, seen_starting=not scrape.ready, first_seen=now)
        if scrape.sample is not None:
            loads[c.container_id] = instance_load(known.sample, scrape.sample, concurrency)
            deltas.append(model_deltas(_counted_sample(known), scrape.sample))
            active = _active(known.sample, scrape.sample)
            known = replace(known, sample=scrape.sample, last_activity=now if active else known.last_activity)
        if scrape.models is not None:
            known = replace(known, models=scrape.models, models_at=now)
        if scrape.front is not None:
            fronts.append(front_deltas(_counted_front(known), scrape.front))
            known = replace(known, front=scrape.front)
        since = None if scrape.ready else known.unready_since if known.unready_since is not None else now
        tracked[c.container_id] = replace(known, unready_since=since)
    return tracked, loads, deltas, fronts


def _counted_sample(known: Tracked) -> TritonSample | None:
    """What the models' next counters are counted from, as for the front (below): nothing counted,
    as of the first sight, for an instance this controller saw start (the requests the activator
    held reach it before the first scrape that answers); None (a baseline) for one adopted."""
    if known.sample is None and known.seen_starting:
        return TritonSample(at=known.first_seen)
    return known.sample


def _counted_front(known: Tracked) -> FrontSample | None:
    """What the front's next read is counted from: its last read. Before the first read answers:
    nothing counted for an instance this controller saw start (the activator's held requests may
    reach it first), and None (the first read is the baseline) for one adopted already serving."""
    if known.front is None and known.seen_starting:
        return NOTHING_COUNTED
    return known.front


def _view(
    c: Container, scrape: Scrape, load: Load | None, tracked: Tracked, drains: Mapping[str, Drain], now: float
) -> InstanceView:
    """``tracked``: after this scrape, but ``was_ready`` still the previous tick's."""
    state = "DRAINING" if c.instance in drains else _state(scrape.ready, tracked)
    sample = tracked.sample
    return InstanceView(
        instance=c.instance,
        container_id=c.container_id,
        host=c.host,
        ip=c.ip,
        http_port=c.http_port,
        grpc_port=c.grpc_port,
        metrics_port=c.metrics_port,
        yarn_state=c.yarn_state,
        state=state,
        registered=False,
        load=load,
        gpus=scrape.sample.gpus if scrape.sample else (),
        models=tracked.models,
        requests_ok=sample.requests_ok if sample else 0.0,
        requests_failed=sample.requests_failed if sample else 0.0,
        unready_s=0.0 if tracked.unready_since is None else now - tracked.unready_since,
        openai_port=c.openai_port,
        openai_streams=tuple(sorted(scrape.front.streams.items())) if scrape.front else (),
        openai_queued=tuple(sorted(scrape.front.queued.items())) if scrape.front else (),
    )


def _active(previous: TritonSample | None, current: TritonSample) -> bool:
    if current.pending > 0:
        return True
    if previous is None:
        return False
    return (current.requests_ok, current.requests_failed) != (previous.requests_ok, previous.requests_failed)


def _state(ready: bool, tracked: Tracked) -> str:
    """READY waits for the model list to be read once: a znode must not announce an instance
    whose models nobody knows (its index may not have answered under load)."""
    if ready:
        return "READY" if tracked.models_known else "STARTING"
    return _not_ready(tracked)


def _not_ready(tracked: Tracked) -> str:
    """Not answering ready: it was serving (UNREACHABLE) or has not yet (STARTING)."""
    return "UNREACHABLE" if tracked.was_ready else "STARTING"
