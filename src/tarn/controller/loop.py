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

from tarn.controller.decide import (
    Candidate,
    Decision,
    Observation,
    Policy,
    ScalerState,
    decide,
    pick_victims,
)
from tarn.controller.observe import Container, Scrape, containers_of
from tarn.controller.registry import RegistryPlan, znode_data
from tarn.controller.signals import Gpu, Load, TritonSample, instance_load
from tarn.errors import TarnError
from tarn.spec import TRITON, triton_count
from tarn.stdlib.config import TarnConfig

log = logging.getLogger("tarn.controller")

JSON = dict[str, Any]
MODELS_REFRESH_S = 30.0


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
class ScalingEvent:
    at: float  # wall clock
    direction: str
    target_from: int
    target_to: int
    reason: str


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

    @property
    def running(self) -> int:
        return len(self.instances)

    def serving(self) -> list[InstanceView]:
        return [i for i in self.instances if i.registered]


@dataclass
class Drain:
    """An instance taken out of discovery. ``remove``: decommission it once idle (scale-down);
    otherwise (an operator's drain, e.g. for an upgrade) it stays out until undrained or restarted."""

    started: float
    remove: bool
    idle_since: float | None = None
    saw_unready: bool = False
    done: bool = False


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


def drain_finished(drain: Drain, now: float, last_activity: float, grace_s: float, timeout_s: float) -> bool:
    """Idle long enough: no request completed or queued since the grace period began (clients and
    load balancers need that long to notice the deregistration), or the bound is reached."""
    if now - drain.started >= timeout_s:
        return True
    return now - drain.started >= grace_s and now - max(last_activity, drain.started) >= grace_s


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
        self._drain_timeout_s = float(config.drain_timeout_s)
        # Clients and load balancers need a moment to see a deregistration before idle means idle.
        self._drain_grace_s = max(2 * self.tick_s, 2.0)
        self._concurrency = config.concurrency_per_instance
        self._clock = clock
        self._wall = wall
        self.policy = Policy.from_config(config)
        self._scaler = ScalerState(last_change_at=clock())  # a (re)started controller waits a cooldown
        self._tracked: dict[str, Tracked] = {}
        self._drains: dict[str, Drain] = {}  # by instance name
        self._history: deque[ScalingEvent] = deque(maxlen=50)
        self.counters = Counters()
        self._lock = threading.Lock()
        self._snapshot = Snapshot(service=config.service_name)

    # ---- what the API reads
    @property
    def snapshot(self) -> Snapshot:
        with self._lock:
            return self._snapshot

    def drain(self, instance: str) -> bool:
        """An operator's drain; False when no such instance runs."""
        with self._lock:
            if instance not in {i.instance for i in self._snapshot.instances}:
                return False
            if instance not in self._drains:
                self._drains[instance] = Drain(started=self._clock(), remove=False)
                self.counters.drains += 1
            return True

    def drained(self, instance: str) -> bool:
        with self._lock:
            found = self._drains.get(instance)
            return bool(found and found.done)

    def undrain(self, instance: str) -> bool:
        with self._lock:
            found = self._drains.get(instance)
            if found is None or found.remove:
                return False
            del self._drains[instance]
            return True

    # ---- the loop
    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            began = self._clock()
            try:
                self.tick()
            except Exception:  # the loop must outlive any one bad tick
                log.exception("tick failed")
            stop.wait(max(0.0, self.tick_s - (self._clock() - began)))

    def tick(self) -> Snapshot:
        began = self._clock()
        problems: list[str] = []
        try:
            service = self._rm.service(self.config.service_name)
        except TarnError as exc:
            service = None
            problems.append(f"ResourceManager: {exc}")
        if service is None:
            snapshot = Snapshot(
                service=self.config.service_name,
                at=self._wall(),
                state="UNKNOWN" if problems else "NOT FOUND",
                history=tuple(self._history),
                problems=tuple(problems) or ("the service is not known to the ResourceManager",),
            )
            return self._publish(snapshot)

        containers = containers_of(service, self.config)
        now = self._clock()
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
        )
        self.counters.ticks += 1
        return self._publish(snapshot)

    def _publish(self, snapshot: Snapshot) -> Snapshot:
        with self._lock:
            self._snapshot = snapshot
        return snapshot

    # ---- observe: from containers and scrapes to views
    def _views(
        self, containers: list[Container], scrapes: dict[str, Scrape], now: float
    ) -> list[InstanceView]:
        live = {c.container_id for c in containers}
        self._tracked = {k: v for k, v in self._tracked.items() if k in live}
        names = {c.instance for c in containers}
        with self._lock:
            self._drains = {k: v for k, v in self._drains.items() if k in names}
        views = []
        for c in containers:
            scrape = scrapes.get(c.container_id, Scrape(False, None, None, "no address"))
            views.append(self._view(c, scrape, now))
        return views

    def _view(self, c: Container, scrape: Scrape, now: float) -> InstanceView:
        tracked = self._tracked.setdefault(c.container_id, Tracked(last_activity=now))
        load = None
        if scrape.sample is not None:
            load = instance_load(tracked.sample, scrape.sample, self._concurrency)
            if _active(tracked.sample, scrape.sample):
                tracked.last_activity = now
            tracked.sample = scrape.sample
        if scrape.models is not None:
            tracked.models, tracked.models_at = scrape.models, now
        self._follow_drain(c.instance, scrape.ready, tracked, now)
        with self._lock:
            draining = c.instance in self._drains
        state = "DRAINING" if draining else "READY" if scrape.ready else _not_ready(tracked)
        tracked.was_ready = scrape.ready
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

    def _follow_drain(self, instance: str, ready: bool, tracked: Tracked, now: float) -> None:
        with self._lock:
            drain = self._drains.get(instance)
            if drain is None:
                return
            if not ready:
                drain.saw_unready = True
            elif drain.saw_unready and not drain.remove:
                del self._drains[instance]  # restarted (an upgrade): serving again
                log.info("%s restarted after its drain: serving again", instance)
                return
            if not drain.done and drain_finished(
                drain, now, tracked.last_activity, self._drain_grace_s, self._drain_timeout_s
            ):
                drain.done = True
                log.info("%s drained in %.1f s", instance, now - drain.started)

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
        removing = self._finish_drains(target, problems)
        if removing:
            return Decision(target - removing, "down", f"decommissioned {removing} drained instance(s)", None)
        with self._lock:
            pending_drains = [name for name, d in self._drains.items() if d.remove]
        if pending_drains:
            return Decision(target, "hold", f"draining {', '.join(sorted(pending_drains))}", None)

        serving = [v for v in views if v.state == "READY"]
        seen = Observation(
            target=target,
            ready=sum(1 for v in views if v.state in ("READY", "DRAINING")),
            loads=tuple(v.load.value if v.load else None for v in serving),
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
            with self._lock:
                for name in victims:
                    self._drains[name] = Drain(started=now, remove=True)
                    self.counters.drains += 1
            log.info("draining %s before scaling down: %s", ", ".join(victims), decision.reason)
            self._remember(decision, target)
        return decision

    def _finish_drains(self, target: int, problems: list[str]) -> int:
        with self._lock:
            done = sorted(name for name, d in self._drains.items() if d.remove and d.done)
        if not done:
            return 0
        name = self.config.service_name
        if self._act(lambda: self._rm.decommission(name, TRITON, done), problems):
            with self._lock:
                for instance in done:
                    self._drains.pop(instance, None)
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
