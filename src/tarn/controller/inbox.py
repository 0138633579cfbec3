"""What the API threads hand to the loop between ticks: operator drain and undrain requests and
the activators' demand reports. The next tick takes them (tarn.controller.tick plans with them)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from tarn.activator.demand import Report
from tarn.controller.drain import Request, operator_drained
from tarn.controller.snapshot import Snapshot


class Inbox:
    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._requests: list[Request] = []
        self._demand: tuple[Report | None, float] = (None, -1e9)  # the last report, when received
        self.wake = threading.Event()  # set: tick now (a demand, a stop)

    def drain(self, instance: str, published: Snapshot) -> bool:
        """Queue an operator's drain; False when no such instance runs."""
        with self._lock:
            if instance not in published.names():
                return False
            self._requests.append(Request(instance, self._clock()))
            return True

    def undrain(self, instance: str, published: Snapshot) -> bool:
        """Queue an undrain; False when the instance is not (about to be) under an operator's drain."""
        with self._lock:
            if instance not in operator_drained(published.drains, self._requests, published.names()):
                return False
            self._requests.append(Request(instance, self._clock(), drain=False))
            return True

    def note_demand(self, report: Report | None) -> None:
        """An activator's report; one holding requests wakes the loop at once."""
        with self._lock:
            self._demand = (report, self._clock())
        if report is not None and report.held:
            self.wake.set()

    def take_requests(self) -> tuple[Request, ...]:
        with self._lock:
            requests, self._requests = tuple(self._requests), []
        return requests

    def pending(self) -> tuple[Request, ...]:
        """The requests the next tick will take (a copy)."""
        with self._lock:
            return tuple(self._requests)

    @property
    def demand(self) -> tuple[Report | None, float]:
        """The last report and when it was received (-1e9: none yet)."""
        with self._lock:
            return self._demand
