"""The control loop: observe → plan → act → publish, once per tick.

Every decision is made by tarn.controller.tick's pure functions; this class reads the RM, the
instances and ZooKeeper, carries out what the plan asks, and publishes one immutable
``Snapshot`` (tarn.controller.snapshot), the only thing the API reads. The loop is stateless
across restarts: the target lives at the RM, the instances in YARN, the registrations and the
memory in ZooKeeper; a new controller rebuilds all of it on its first tick and starts in
cooldown, so it changes nothing it did not see.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

from tarn.activator.demand import Report
from tarn.controller.inbox import Inbox
from tarn.controller.memory import application_of, encode
from tarn.controller.observe import Container, Scrape, containers_of, distrust
from tarn.controller.publication import Counters, Publication
from tarn.controller.registry import RegistryPlan
from tarn.controller.snapshot import Snapshot
from tarn.controller.tick import (
    Observed,
    TickPlan,
    TickPolicy,
    TickState,
    plan_tick,
    plan_watch,
    published,
    recall,
    settle,
    to_remember,
    untrusted,
)
from tarn.controller.timeline import Timeline
from tarn.errors import TarnError
from tarn.spec import TRITON, triton_count
from tarn.stdlib.config import TarnConfig

log = logging.getLogger("tarn.controller")

JSON = dict[str, Any]


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


class ControlLoop:
    def __init__(
        self,
        config: TarnConfig,
        rm: ServiceApi,
        registry: RegistryApi | None,
        scraper: ScrapeApi,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        application: str | None = None,
    ) -> None:
        """``application``: the YARN application this controller's container belongs to (None
        outside YARN); it never acts on a service of another."""
        self.config = config
        self.tick_s = config.tick_seconds
        self.policy = TickPolicy.from_config(config)
        self._rm = rm
        self._registry = registry
        self._scraper = scraper
        self._clock = clock
        self._wall = wall
        self._application = application
        self._state = TickState.starting(clock())  # the loop thread's alone
        self._inbox = Inbox(clock)  # what the API threads hand over
        self._publication = Publication(Snapshot(service=config.service_name))

    # ---- what the API reads and asks (tarn.controller.snapshot.Controller)
    @property
    def snapshot(self) -> Snapshot:
        return self._publication.latest

    @property
    def counters(self) -> Counters:
        return self._publication.counters_now

    @property
    def published(self) -> int:
        """Snapshots published so far: the loop's sign of life for the watchdog."""
        return self._publication.published

    @property
    def timeline(self) -> Timeline:
        return self._publication.timeline

    def drain(self, instance: str) -> bool:
        return self._inbox.drain(instance, self.snapshot)

    def drained(self, instance: str) -> bool:
        return self.snapshot.drained(instance)

    def undrain(self, instance: str) -> bool:
        return self._inbox.undrain(instance, self.snapshot)

    def note_demand(self, report: Report | None) -> None:
        """An activator's report (tarn.activator.demand); one holding requests wakes the loop at once."""
        self._publication.count_demand_report()
        self._inbox.note_demand(report)

    def wake(self) -> None:
        """Tick now instead of at the end of the period (a demand, a stop)."""
        self._inbox.wake.set()

    def wait_for(self, done: Callable[[Snapshot], bool], timeout: float) -> bool:
        return self._publication.wait_for(done, timeout)

    # ---- the loop
    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            began = self._clock()
            try:
                self.tick()
            except Exception:  # the loop must outlive any one bad tick
                log.exception("tick failed")
            self._inbox.wake.wait(max(0.0, self.tick_s - (self._clock() - began)))
            self._inbox.wake.clear()

    def tick(self) -> Snapshot:
        began = self._clock()
        problems: list[str] = []
        try:
            service = self._rm.service(self.config.service_name)
            doubt = distrust(service, self._application)
        except TarnError as exc:
            service, doubt = None, f"ResourceManager: {exc}"
        if service is None or doubt is not None:
            doubt = doubt or "no answer"
            log.warning("not acting this tick: %s", doubt)
            snap = untrusted(self.snapshot, self._state, doubt, self._wall(), self._clock() - began)
            return self._publication.publish(snap)
        self._recall(application_of(service), problems)

        watch, state = plan_watch(self._state, containers_of(service, self.config), self._clock())
        for warning in watch.warnings:
            log.warning("%s", warning)
        scrapes = self._scraper.scrape_all(list(watch.containers), set(watch.want_models))
        report, received = self._inbox.demand
        state_at_rm, target = str(service.get("state", "UNKNOWN")), triton_count(service)
        seen = Observed(self._wall(), state_at_rm, target, watch.containers, scrapes, report, received)
        plan = plan_tick(state, seen, self._inbox.take_requests(), self._clock(), self.policy)

        zookeeper, registered = self._register(plan.registrations, problems)
        problems.extend(plan.problems)
        plan = settle(plan, refused=not self._ask_yarn(plan, problems))
        for note in plan.notes:
            log.info("%s", note)
        self._state = self._remember(plan.state, problems)
        snap = published(plan, registered, zookeeper, problems, seen.at, self._clock() - began, self.policy)
        return self._publication.publish(snap)

    # ---- act
    def _register(self, wanted: dict[str, bytes], problems: list[str]) -> tuple[str, set[str] | None]:
        """ZooKeeper made equal to ``wanted``: (its state for the snapshot, the ids it holds)."""
        if self._registry is None:
            return "off", None
        if not self._registry.connected:
            problems.append("ZooKeeper: not connected; registrations kept as they were")
            return "disconnected", self._registry.registered()
        try:
            self._registry.sync(wanted)
        except Exception as exc:  # kazoo's errors: retried next tick
            problems.append(f"ZooKeeper: {exc.__class__.__name__}")
            return "error", self._registry.registered()
        return "connected", self._registry.registered()

    def _ask_yarn(self, plan: TickPlan, problems: list[str]) -> bool:
        """The plan's flex or decommission; False when the RM refused it."""
        name = self.config.service_name
        try:
            if plan.flex_through is not None:
                self._rm.flex(name, TRITON, plan.flex_through)
            if plan.flex is not None:
                self._rm.flex(name, TRITON, plan.flex)
            elif plan.decommission:
                self._rm.decommission(name, TRITON, list(plan.decommission))
        except TarnError as exc:
            problems.append(f"ResourceManager: {exc}")
            log.warning("ResourceManager refused: %s", exc)
            return False
        return True

    # ---- memory: the history and the drains, across restarts (tarn.controller.memory)
    def _recall(self, application: str | None, problems: list[str]) -> None:
        """Once, before the first trusted tick acts: what an earlier controller of this YARN
        application (the RM's service ``id``) remembered."""
        if self._state.remembered is not None or self._registry is None or not self._registry.connected:
            return
        try:
            data = self._registry.load_memory()
        except Exception as exc:  # kazoo's errors: tried again next tick
            problems.append(f"ZooKeeper: the controller's memory is unreadable ({exc.__class__.__name__})")
            return
        self._state, note = recall(self._state, data, application, self._clock(), self._wall())
        if note:
            log.info("%s", note)

    def _remember(self, state: TickState, problems: list[str]) -> TickState:
        memory = to_remember(state)
        if memory is None or self._registry is None:
            return state
        try:
            self._registry.save_memory(encode(memory, self._clock(), self._wall()))
        except Exception as exc:  # kazoo's errors: written next tick
            problems.append(f"ZooKeeper: the controller's memory was not saved ({exc.__class__.__name__})")
            return state
        return replace(state, remembered=memory)
