"""The control loop: observe → register → scale → publish, once per tick.

Everything the API shows comes from one immutable ``Snapshot`` the loop publishes at the end
of each tick. The loop is stateless across restarts: the target lives at the RM, the instances
in YARN, the registrations in ZooKeeper; a new controller rebuilds all of it on its first tick
and starts in cooldown, so it changes nothing it did not see.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from tarn.activator.demand import Report, held_now
from tarn.controller.decide import (
    Candidate,
    Decision,
    Observation,
    Policy,
    ScalerState,
    decide,
    pick_victims,
)
from tarn.controller.drain import (
    Drain,
    DrainPolicy,
    Request,
    Seen,
    begin_removal,
    cancel_removals,
    operator_drained,
    removed,
    removing,
    step,
)
from tarn.controller.memory import Memory, ScalingEvent, decode, encode
from tarn.controller.observe import (
    UNREPORTED,
    UNREPORTED_GRACE_S,
    Container,
    Scrape,
    containers_of,
    distrust,
    unreported,
    with_known_addresses,
)
from tarn.controller.registry import RegistryPlan, znode_data
from tarn.controller.signals import (
    Gpu,
    Load,
    ModelDelta,
    ModelTotals,
    ModelView,
    TritonSample,
    instance_load,
    model_deltas,
    model_views,
)
from tarn.controller.timeline import Timeline
from tarn.errors import TarnError
from tarn.spec import TRITON, triton_count
from tarn.stdlib.config import TarnConfig

log = logging.getLogger("tarn.controller")

JSON = dict[str, Any]
MODELS_REFRESH_S = 30.0
NO_SCRAPE = Scrape(False, None, None, "no address")


class ServiceApi(Protocol):
    """What the loop needs from the RM (tarn.clients.resourcemanager.ResourceManager)."""

    def service(self, name: str) -> JSON | None: ...
    def flex(self, name: str, component: str, count: int) -> JSON: ...
    def decommission(self, name: str, component: str, instances: list[str]) -> JSON: ...


class ScrapeApi(Protocol):
    """What the loop needs to read the instances (tarn.controller.observe.Scraper)."""

    def scrape_all(self, containers: list[Container], want_models: set[str]) -> dict[str, Scrape]: ...


class RegistryApi(Protocol):
    @property
    def connected(self) -> bool: ...
    def sync(self, wanted: dict[str, bytes]) -> RegistryPlan: ...
    def registered(self) -> set[str]: ...
    def load_memory(self) -> bytes | None: ...
    def save_memory(self, data: bytes) -> None: ...


@dataclass(frozen=True)
class InstanceView:
    instance: str
    container_id: str
    host: str
    ip: str
    http_port: int
    grpc_port: int
    metrics_port: int
    yarn_state: str
    state: str  # STARTING | READY | DRAINING | UNREACHABLE
    registered: bool
    load: Load | None
    gpus: tuple[Gpu, ...]
    models: tuple[str, ...]
    requests_ok: float
    requests_failed: float

    def record(self, service: str) -> JSON:
        """The discovery record: the znode's JSON (docs/discovery.md)."""
        return {
            "service": service,
            "instance": self.instance,
            "container_id": self.container_id,
            "host": self.host,
            "ip": self.ip,
            "http_port": self.http_port,
            "grpc_port": self.grpc_port,
            "metrics_port": self.metrics_port,
            "url": f"http://{self.ip}:{self.http_port}",
            "models": list(self.models),
        }


@dataclass(frozen=True)
class Snapshot:
    service: str
    at: float = 0.0  # wall clock of the tick; 0: no tick yet
    state: str = "UNKNOWN"
    target: int = 0
    instances: tuple[InstanceView, ...] = ()
    decision: Decision | None = None
    history: tuple[ScalingEvent, ...] = ()
    zookeeper: str = "off"
    problems: tuple[str, ...] = ()
    tick_seconds: float = 0.0
    held: int = 0  # requests an activator holds, as it last reported
    held_oldest_s: float = 0.0  # how long the oldest of them had waited then
    scale_to_zero: bool = False  # --scale-to-zero-after is on
    models: tuple[ModelView, ...] = ()  # per model, over the last tick
    drains: dict[str, Drain] = field(default_factory=dict)  # the loop's own, never changed after publishing

    @property
    def running(self) -> int:
        return len(self.instances)

    def names(self) -> set[str]:
        return {i.instance for i in self.instances}

    def drained(self, instance: str) -> bool:
        found = self.drains.get(instance)
        return bool(found and found.done)

    def serving(self) -> list[InstanceView]:
        return [i for i in self.instances if i.registered]


@dataclass
class Tracked:
    """What the loop remembers per container between ticks."""

    sample: TritonSample | None = None
    last_activity: float = 0.0
    models: tuple[str, ...] = ()
    models_at: float = -1e9
    was_ready: bool = False


@dataclass
class Counters:
    scaling: dict[str, int] = field(default_factory=lambda: {"up": 0, "down": 0})
    drains: int = 0
    decommissioned: int = 0
    ticks: int = 0
    demand_reports: int = 0
    models: dict[str, ModelTotals] = field(default_factory=dict)  # per model, since the start


class ControlLoop:
    def __init__(
        self,
        config: TarnConfig,
        rm: ServiceApi,
        registry: RegistryApi | None,
        scraper: ScrapeApi,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self._rm = rm
        self._registry = registry
        self._scraper = scraper
        self.tick_s = config.tick_seconds
        self._drain_policy = DrainPolicy.from_config(config)
        self._concurrency = config.concurrency_per_instance
        self._clock = clock
        self._wall = wall
        self.policy = Policy.from_config(config)
        self._scaler = ScalerState(last_change_at=clock())  # a (re)started controller waits a cooldown
        self._tracked: dict[str, Tracked] = {}
        self._addresses: dict[str, Container] = {}  # by container id: the last address the RM gave
        self._serving: dict[str, Container] = {}  # by container id: READY at the last trusted tick
        self._unlisted_since: dict[str, float] = {}  # by container id: serving, missing from the RM
        self._drains: dict[str, Drain] = {}  # by instance name; the loop thread's alone
        self._idle_removals: tuple[str, ...] = ()  # this tick's drained victims, to decommission
        self._model_deltas: list[dict[str, ModelDelta]] = []  # this tick's, one dict per instance
        self._history: deque[ScalingEvent] = deque(maxlen=50)
        self.counters = Counters()
        self.timeline = Timeline()  # the dashboard's charts
        # The API threads share two things with the loop: the published snapshot and the queue of
        # operator requests the next tick applies.
        self._lock = threading.Lock()
        self._published = threading.Condition(self._lock)
        self._requests: list[Request] = []
        self._wake = threading.Event()  # set: tick now (demand, stop)
        self._demand: tuple[Report | None, float] = (None, -1e9)  # the last report, when received
        self._snapshot = Snapshot(service=config.service_name)
        self._memory: Memory | None = None  # what ZooKeeper holds; None until read back

    # ---- what the API reads
    @property
    def snapshot(self) -> Snapshot:
        with self._lock:
            return self._snapshot

    def drain(self, instance: str) -> bool:
        """Queue an operator's drain; False when no such instance runs."""
        with self._lock:
            if instance not in self._snapshot.names():
                return False
            self._requests.append(Request(instance, self._clock()))
            return True

    def drained(self, instance: str) -> bool:
        return self.snapshot.drained(instance)

    def undrain(self, instance: str) -> bool:
        """Queue an undrain; False when the instance is not (about to be) under an operator's drain."""
        with self._lock:
            snap = self._snapshot
            if instance not in operator_drained(snap.drains, self._requests, snap.names()):
                return False
            self._requests.append(Request(instance, self._clock(), drain=False))
            return True

    def note_demand(self, report: Report | None) -> None:
        """An activator's report (tarn.activator.demand); one holding requests wakes the loop at once."""
        with self._lock:
            self._demand = (report, self._clock())
            self.counters.demand_reports += 1
        if report is not None and report.held:
            self._wake.set()

    def wake(self) -> None:
        """Tick now instead of at the end of the period (a demand, a stop)."""
        self._wake.set()

    def wait_for(self, done: Callable[[Snapshot], bool], timeout: float) -> bool:
        """Block until a published snapshot satisfies ``done`` (or ``timeout`` seconds pass)."""
        with self._published:
            return self._published.wait_for(lambda: done(self._snapshot), timeout)

    # ---- the loop
    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            began = self._clock()
            try:
                self.tick()
            except Exception:  # the loop must outlive any one bad tick
                log.exception("tick failed")
            self._wake.wait(max(0.0, self.tick_s - (self._clock() - began)))
            self._wake.clear()

    def tick(self) -> Snapshot:
        began = self._clock()
        problems: list[str] = []
        try:
            service = self._rm.service(self.config.service_name)
            doubt = distrust(service)
        except TarnError as exc:
            service, doubt = None, f"ResourceManager: {exc}"
        if service is None or doubt is not None:
            return self._publish(self._unknown(doubt or "no answer", began))
        self._recall(problems)

        listed = with_known_addresses(containers_of(service, self.config), self._addresses)
        now = self._clock()
        containers = listed + self._unlisted(unreported(self._serving, listed), now)
        self._addresses = {c.container_id: c for c in containers if c.ip}
        unseen = Tracked()
        want_models = {
            c.container_id
            for c in containers
            if not (known := self._tracked.get(c.container_id, unseen)).was_ready
            or now - known.models_at >= MODELS_REFRESH_S
        }
        scrapes = self._scraper.scrape_all(containers, want_models)
        now = self._clock()
        views = self._views(containers, scrapes, now)

        zookeeper = self._register(views, problems)
        views = self._with_registration(views)
        self._serving = {
            c.container_id: c for c, v in zip(containers, views, strict=True) if v.state == "READY"
        }
        target = triton_count(service)
        decision = self._scale(views, target, now, problems)
        snapshot = Snapshot(
            service=self.config.service_name,
            at=self._wall(),
            state=str(service.get("state", "UNKNOWN")),
            target=decision.target if decision else target,
            instances=tuple(views),
            decision=decision,
            history=tuple(self._history),
            zookeeper=zookeeper,
            problems=tuple(problems),
            tick_seconds=self._clock() - began,
            held=self._held(now),
            held_oldest_s=self._held_oldest(now),
            scale_to_zero=self.policy.scale_to_zero_after_s > 0,
            models=self._model_views(views),
            drains=dict(self._drains),
        )
        self._remember_all(problems)
        self.counters.ticks += 1
        return self._publish(snapshot)

    # ---- memory: the history and the drains, across restarts (tarn.controller.memory)
    def _recall(self, problems: list[str]) -> None:
        """Once, before the first trusted tick acts: what an earlier controller remembered."""
        if self._memory is not None or self._registry is None or not self._registry.connected:
            return
        try:
            data = self._registry.load_memory()
        except Exception as exc:  # kazoo's errors: tried again next tick
            problems.append(f"ZooKeeper: the controller's memory is unreadable ({exc.__class__.__name__})")
            return
        self._memory = decode(data, self._clock(), self._wall())
        self._history.extendleft(reversed(self._memory.history))
        self._drains = {**self._memory.drains, **self._drains}
        if data:
            log.info(
                "recalled %d scaling events, drains: %s",
                len(self._memory.history),
                sorted(self._drains) or "none",
            )

    def _remember_all(self, problems: list[str]) -> None:
        memory = Memory(tuple(self._history), dict(self._drains))
        if self._registry is None or self._memory is None or memory == self._memory:
            return
        try:
            self._registry.save_memory(encode(memory, self._clock(), self._wall()))
        except Exception as exc:  # kazoo's errors: written next tick
            problems.append(f"ZooKeeper: the controller's memory was not saved ({exc.__class__.__name__})")
            return
        self._memory = memory

    def _unknown(self, doubt: str, began: float) -> Snapshot:
        """A view that cannot be trusted changes nothing: discovery, drains, the target and the
        instances stay as last seen (the API and HAProxy keep serving them); only the state says so."""
        log.warning("not acting this tick: %s", doubt)
        return replace(
            self._snapshot,
            at=self._wall(),
            state="UNKNOWN",
            decision=None,
            history=tuple(self._history),
            problems=(f"{doubt}; nothing changed until the view can be trusted",),
            tick_seconds=self._clock() - began,
            drains=dict(self._drains),
        )

    def _publish(self, snapshot: Snapshot) -> Snapshot:
        with self._published:
            self._snapshot = snapshot
            self.timeline.add(snapshot)
            self._published.notify_all()
        return snapshot

    # ---- observe: from containers and scrapes to views
    def _unlisted(self, missing: list[Container], now: float) -> list[Container]:
        """The missing instances still within their grace (observe.UNREPORTED_GRACE_S)."""
        since = {c.container_id: self._unlisted_since.get(c.container_id, now) for c in missing}
        kept = [c for c in missing if now - since[c.container_id] <= UNREPORTED_GRACE_S]
        for c in missing:
            if c.container_id not in self._unlisted_since:
                log.warning(
                    "the ResourceManager's answer lacks %s (%s): kept while it serves",
                    c.instance,
                    c.container_id,
                )
            elif c not in kept:
                log.warning("%s unlisted for over %.0f s: withdrawn", c.instance, UNREPORTED_GRACE_S)
        self._unlisted_since = {c.container_id: since[c.container_id] for c in kept}
        return kept

    def _views(
        self, containers: list[Container], scrapes: dict[str, Scrape], now: float
    ) -> list[InstanceView]:
        live = {c.container_id for c in containers}
        self._tracked = {k: v for k, v in self._tracked.items() if k in live}
        scrapes = {c.container_id: scrapes.get(c.container_id, NO_SCRAPE) for c in containers}
        self._model_deltas = []
        loads = {c.container_id: self._track(c, scrapes[c.container_id], now) for c in containers}
        self._follow_drains(containers, scrapes, now)
        views = [self._view(c, scrapes[c.container_id], loads[c.container_id]) for c in containers]
        for c in containers:
            self._tracked[c.container_id].was_ready = scrapes[c.container_id].ready
        return views

    def _model_views(self, views: list[InstanceView]) -> tuple[ModelView, ...]:
        """This tick's per-model figures, from the instances that serve."""
        serving = [v for v in views if v.state in ("READY", "DRAINING")]
        samples = [self._tracked[v.container_id].sample for v in serving]
        latest = [dict(sample.models) for sample in samples if sample is not None]
        return model_views(self._model_deltas, [v.models for v in serving], latest)

    def _track(self, c: Container, scrape: Scrape, now: float) -> Load | None:
        """Remember this scrape; the load since the previous one."""
        tracked = self._tracked.setdefault(c.container_id, Tracked(last_activity=now))
        load = None
        if scrape.sample is not None:
            load = instance_load(tracked.sample, scrape.sample, self._concurrency)
            deltas = model_deltas(tracked.sample, scrape.sample)
            self._model_deltas.append(deltas)
            for name, delta in deltas.items():
                self.counters.models[name] = self.counters.models.get(name, ModelTotals()).plus(delta)
            if _active(tracked.sample, scrape.sample):
                tracked.last_activity = now
            tracked.sample = scrape.sample
        if scrape.models is not None:
            tracked.models, tracked.models_at = scrape.models, now
        return load

    def _follow_drains(self, containers: list[Container], scrapes: dict[str, Scrape], now: float) -> None:
        with self._lock:
            requests, self._requests = self._requests, []
        seen = {
            c.instance: Seen(scrapes[c.container_id].ready, self._tracked[c.container_id].last_activity)
            for c in containers
        }
        if self._held(now):  # someone waits for an instance: none that can still serve may go
            self._drains, called_off = cancel_removals(self._drains)
            if called_off:
                log.info("requests held: the drain of %s called off", ", ".join(called_off))
        result = step(self._drains, seen, requests, now, self._drain_policy)
        self._drains, self._idle_removals = result.drains, result.decommission
        self.counters.drains += result.started
        for event in result.events:
            log.info("%s", event)

    def _view(self, c: Container, scrape: Scrape, load: Load | None) -> InstanceView:
        tracked = self._tracked[c.container_id]
        state = "DRAINING" if c.instance in self._drains else "READY" if scrape.ready else _not_ready(tracked)
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
        )

    # ---- register
    def _register(self, views: list[InstanceView], problems: list[str]) -> str:
        if self._registry is None:
            return "off"
        wanted = {
            v.container_id: znode_data(v.record(self.config.service_name))
            for v in views
            if v.state == "READY"
        }
        if not self._registry.connected:
            problems.append("ZooKeeper: not connected; registrations kept as they were")
            return "disconnected"
        try:
            self._registry.sync(wanted)
        except Exception as exc:  # kazoo's errors: retried next tick
            problems.append(f"ZooKeeper: {exc.__class__.__name__}")
            return "error"
        return "connected"

    def _with_registration(self, views: list[InstanceView]) -> list[InstanceView]:
        """Mark the views discovery lists: ready ones, and with ZooKeeper only those in it."""
        in_zookeeper = None if self._registry is None else self._registry.registered()  # once a tick
        return [
            replace(
                v, registered=v.state == "READY" and (in_zookeeper is None or v.container_id in in_zookeeper)
            )
            for v in views
        ]

    # ---- scale
    def _scale(
        self, views: list[InstanceView], target: int, now: float, problems: list[str]
    ) -> Decision | None:
        finished = self._finish_drains(target, problems)
        if finished:
            return Decision(target - finished, "down", f"decommissioned {finished} drained instance(s)", None)
        pending = removing(self._drains)
        if pending:
            return Decision(target, "hold", f"draining {', '.join(pending)}", None)
        missing = [v.instance for v in views if v.yarn_state == UNREPORTED and v.state == "READY"]
        if missing:  # the RM's count and list disagree with what serves: no flex or drain on it
            reason = f"the ResourceManager's answer lacks {', '.join(missing)}, still serving"
            problems.append(reason)
            return Decision(target, "hold", reason, None)

        serving = [v for v in views if v.state == "READY"]
        seen = Observation(
            target=target,
            ready=sum(1 for v in views if v.state in ("READY", "DRAINING")),
            loads=tuple(v.load.value if v.load else None for v in serving),
            held=self._held(now),
            idle_s=now - self._last_activity(),
        )
        decision, self._scaler = decide(self._scaler, seen, now, self.policy)
        if decision.target > target:
            self._act(lambda: self._rm.flex(self.config.service_name, TRITON, decision.target), problems)
            self._remember(decision, target)
        elif decision.target < target:
            candidates = [
                Candidate(v.instance, v.state == "READY", v.load.value if v.load else None) for v in views
            ]
            victims = pick_victims(candidates, target - decision.target)
            self._drains = begin_removal(self._drains, victims, now)
            self.counters.drains += len(victims)
            log.info("draining %s before scaling down: %s", ", ".join(victims), decision.reason)
            self._remember(decision, target)
        return decision

    def _held(self, now: float) -> int:
        with self._lock:
            report, received = self._demand
        return held_now(report, received, now)

    def _held_oldest(self, now: float) -> float:
        with self._lock:
            report, received = self._demand
        return report.oldest_s if report is not None and held_now(report, received, now) else 0.0

    def _last_activity(self) -> float:
        """The latest of: a request served, a demand report, a scaling action (each resets the idle clock)."""
        with self._lock:
            demand_at = self._demand[1]
        served = (t.last_activity for t in self._tracked.values())
        return max(demand_at, self._scaler.last_change_at, *served)

    def _finish_drains(self, target: int, problems: list[str]) -> int:
        done = list(self._idle_removals)
        if not done:
            return 0
        name = self.config.service_name
        if self._act(lambda: self._rm.decommission(name, TRITON, done), problems):
            self._drains = removed(self._drains, done)
            self.counters.decommissioned += len(done)
            log.info("decommissioned %s (target %d -> %d)", ", ".join(done), target, target - len(done))
            return len(done)
        return 0

    def _act(self, action: Callable[[], JSON], problems: list[str]) -> bool:
        try:
            action()
        except TarnError as exc:
            problems.append(f"ResourceManager: {exc}")
            log.warning("ResourceManager refused: %s", exc)
            return False
        return True

    def _remember(self, decision: Decision, before: int) -> None:
        self.counters.scaling[decision.direction] += 1
        self._history.appendleft(
            ScalingEvent(self._wall(), decision.direction, before, decision.target, decision.reason)
        )
        log.info("scaling %s: %s", decision.direction, decision.reason)


def _active(previous: TritonSample | None, current: TritonSample) -> bool:
    if current.pending > 0:
        return True
    if previous is None:
        return False
    return (current.requests_ok, current.requests_failed) != (previous.requests_ok, previous.requests_failed)


def _not_ready(tracked: Tracked) -> str:
    """Not answering ready: it was serving (UNREACHABLE) or has not yet (STARTING)."""
    return "UNREACHABLE" if tracked.was_ready else "STARTING"
