"""The published snapshot and what is fed from it: the counters (/metrics) and the timeline
(the dashboard's charts). The loop's thread publishes; the API's threads read and wait, through
the ``Controller`` protocol: all they may see of the controller."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

from tarn.activator.demand import Report
from tarn.controller import fronts
from tarn.controller.fronts import Series
from tarn.controller.signals import ModelTotals
from tarn.controller.snapshot import Snapshot
from tarn.controller.timeline import Timeline
from tarn.stdlib.config import TarnConfig


@dataclass
class Counters:
    """Totals since the controller started, each the sum of the published ticks' events."""

    scaling: dict[str, int] = field(default_factory=lambda: {"up": 0, "down": 0})
    drains: int = 0
    decommissioned: int = 0
    replaced: int = 0
    ticks: int = 0
    demand_reports: int = 0  # counted as the reports arrive (tarn.controller.inbox)
    models: dict[str, ModelTotals] = field(default_factory=dict)  # per model, since the start
    openai: dict[Series, float] = field(default_factory=dict)  # the OpenAI fronts', since the start

    def copy(self) -> Counters:
        """A copy whose maps the loop's next publish leaves alone (the API's threads iterate them)."""
        return replace(self, scaling=dict(self.scaling), models=dict(self.models), openai=dict(self.openai))

    def count(self, snap: Snapshot) -> None:
        events = snap.events
        if events is None:  # an untrusted tick did nothing
            return
        self.ticks += 1
        if events.scaled is not None:
            self.scaling[events.scaled] += 1
        self.drains += events.drains_started
        self.decommissioned += events.decommissioned
        self.replaced += events.replaced
        for deltas in events.model_deltas:
            for name, delta in deltas.items():
                self.models[name] = self.models.get(name, ModelTotals()).plus(delta)
        for increases in events.front_deltas:
            fronts.add(self.openai, increases)


class Publication:
    def __init__(self, first: Snapshot) -> None:
        self._published = threading.Condition()
        self._latest = first
        self.published = 0  # snapshots published, trusted or not (the watchdog's sign of life)
        self.counters = Counters()
        self.timeline = Timeline()

    @property
    def counters_now(self) -> Counters:
        """The counters as of the last publish, for another thread (issue 48, row 6: /metrics
        iterated the maps while the loop added series, and failed)."""
        with self._published:
            return self.counters.copy()

    @property
    def latest(self) -> Snapshot:
        with self._published:
            return self._latest

    def publish(self, snap: Snapshot) -> Snapshot:
        with self._published:
            self._latest = snap
            self.published += 1
            self.counters.count(snap)
            self.timeline.add(snap)
            self._published.notify_all()
        return snap

    def wait_for(self, done: Callable[[Snapshot], bool], timeout: float) -> bool:
        """Block until a published snapshot satisfies ``done`` (or ``timeout`` seconds pass)."""
        with self._published:
            return self._published.wait_for(lambda: done(self._latest), timeout)

    def count_demand_report(self) -> None:
        with self._published:
            self.counters.demand_reports += 1


class Controller(Protocol):
    """What the API threads may read and ask (tarn.controller.loop.ControlLoop is the one)."""

    @property
    def config(self) -> TarnConfig: ...
    @property
    def tick_s(self) -> float: ...
    @property
    def snapshot(self) -> Snapshot: ...
    @property
    def counters(self) -> Counters: ...
    @property
    def timeline(self) -> Timeline: ...
    def drain(self, instance: str) -> bool: ...
    def undrain(self, instance: str) -> bool: ...
    def drained(self, instance: str) -> bool: ...
    def note_demand(self, report: Report | None) -> None: ...
    def wait_for(self, done: Callable[[Snapshot], bool], timeout: float) -> bool: ...
