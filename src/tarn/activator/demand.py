"""Demand: how an activator tells the controller that requests are waiting (docs/scale-to-zero.md).

With ZooKeeper, one persistent znode beside the instances' (``<--zk-path>.demand``: readers of
--zk-path see instances only) holds the activator's last report as JSON; the controller watches
it and ticks at once when it changes. Without ZooKeeper the activator POSTs the same report to
the controller's ``/wake``. A report is fresh for ``FRESH_S``: an activator that dies while holding
stops waking the service soon after (the age is the reader's: hosts' clocks may differ).
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

log = logging.getLogger("tarn.activator")

FRESH_S = 10.0  # the activator reports every second while it holds requests


@dataclass(frozen=True)
class Report:
    held: int  # requests held now
    oldest_s: float = 0.0  # how long the oldest of them has waited
    at: float = 0.0  # wall clock of the report

    def encode(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":")).encode()


def demand_path(zk_path: str) -> str:
    return zk_path.rstrip("/") + ".demand"


def parse_report(data: bytes | None) -> Report | None:
    """A report from a znode or a request body; None when absent or not one (never raises)."""
    if not data:
        return None
    try:
        document = json.loads(data)
        held, oldest, at = document["held"], document.get("oldest_s", 0.0), document.get("at", 0.0)
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return None  # not JSON (RecursionError: a deep nest of brackets), or not an object of these
    numbers = (held, oldest, at)
    if not all(_finite(n) for n in numbers) or held < 0:
        return None
    return Report(int(held), float(oldest), float(at))


def _finite(value: object) -> bool:
    """A JSON number that converts: Python's json reads Infinity and NaN, which int() refuses."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def held_now(report: Report | None, received_at: float, now: float) -> int:
    """Requests held according to a report received at ``received_at`` (the reader's own clock:
    hosts' clocks may differ), or 0 once it is older than FRESH_S."""
    if report is None or now - received_at > FRESH_S:
        return 0
    return report.held


class Reporter:
    """Sends the activator's report from its own thread (a slow ZooKeeper or controller never
    stalls the request path): at once when requests begin to be held, every ``interval`` while
    they are, and once more when none are left."""

    def __init__(self, send: Callable[[Report], None], interval: float = 1.0) -> None:
        self._send = send
        self._interval = interval
        self._lock = threading.Lock()
        self._state = (0, 0.0)
        self._due = threading.Event()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tarn-demand", daemon=True)
        self.sent = 0
        self.failures = 0

    def update(self, held: int, oldest_s: float) -> None:
        """From the request path: cheap, never blocks."""
        with self._lock:
            was = self._state[0]
            self._state = (held, oldest_s)
        if (held > 0) != (was > 0):
            self._due.set()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._due.set()

    def _run(self) -> None:
        last_sent = 0
        while not self._stopped.is_set():
            with self._lock:
                held, oldest = self._state
            if held or last_sent:
                try:
                    self._send(Report(held, round(oldest, 3), time.time()))
                    self.sent += 1
                    last_sent = held
                except Exception as exc:  # kazoo's or requests' errors: tried again next interval
                    self.failures += 1
                    log.warning("demand report not sent (%s); retrying", type(exc).__name__)
            self._due.wait(self._interval if held else 3600)
            self._due.clear()
