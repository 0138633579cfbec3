"""The controller's stop: YARN's SIGTERM ends the process with 143 within STOP_BUDGET_S, whatever it
waits on (a tick on a dying AM, a ZooKeeper reconnect, an HDFS audit write, a Ranger poll, a KDC).

YARN stops a container with SIGTERM and sends SIGKILL ``yarn.nodemanager.sleep-delay-before-sigkill.ms``
later (the roles' 10 s). Three things stood between the signal and the process's end:

- under Docker the controller is its container's PID 1, and the kernel drops every signal a PID 1
  has no handler for: a SIGTERM during the start (kazoo connecting, SASL, Ranger's cache) was lost.
  The handler is installed first, and a signal before the loop runs ends the process at once:
  nothing is registered yet, nothing is handed over;
- the stop's own steps (the API, the scraper, the Ranger poll, the audit's last write) each waited
  for a thread without a common bound: they now share one budget, each in a thread of its own,
  and what outlives the budget is left behind (and logged);
- the interpreter's exit joins the threads it still knows (the scraper's pool among them): the
  process ends with ``os._exit`` once the stop is done (``end_process``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import NoReturn

from tarn.stdlib.launcher.supervise import exit_status

log = logging.getLogger("tarn.controller")

STOP_BUDGET_S = 5.0  # from YARN's SIGTERM to the process's end: half the roles' SIGKILL delay
STOP_GRACE_S = 2.0  # of that budget, the most the tick under way gets (a tick takes well under 1 s)


@dataclass(frozen=True)
class Step:
    """One part of the stop; ``run`` gets the seconds left of the budget and returns False when it
    gave up waiting with its work still under way (a join that timed out): that step is late, however
    close to the deadline it returned."""

    name: str
    run: Callable[[float], object]


def run_within(
    steps: Sequence[Step], budget_s: float, clock: Callable[[], float] = time.monotonic
) -> list[str]:
    """Each step in turn, each in a daemon thread given the time left of ``budget_s`` (every step
    starts, a late one with 0 s); the names of the steps still running when the budget ran out.
    A step that raises is logged and counts as done."""
    deadline = clock() + budget_s
    late = []
    for step in steps:
        left = max(0.0, deadline - clock())
        gave_up = threading.Event()
        thread = threading.Thread(
            target=_logged, args=(step, left, gave_up), name=f"stop: {step.name}", daemon=True
        )
        thread.start()
        thread.join(max(0.0, deadline - clock()))
        # A step that waits out exactly what it was given ends at the deadline too: whether its
        # thread is seen alive is a race (CI13, a loaded machine), what it returned is not.
        if thread.is_alive() or gave_up.is_set():
            late.append(step.name)
    return late


def _logged(step: Step, left: float, gave_up: threading.Event) -> None:
    try:
        if step.run(left) is False:
            gave_up.set()
    except Exception:
        log.exception("stopping %s failed", step.name)


class StopSignal:
    """SIGTERM and SIGINT. Before ``running`` a signal ends the process at once with 128+N; after
    it, a signal sets ``event`` and wakes the loop for a stop within the budget. ``status`` is
    128+N of the first signal (as the launcher reports a stop), 0 without one."""

    def __init__(self, exit_now: Callable[[int], object] | None = None) -> None:
        self.event = threading.Event()
        self.signum: int | None = None
        self._wake: Callable[[], None] | None = None
        self._exit_now = end_process if exit_now is None else exit_now

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self.on_signal)
        signal.signal(signal.SIGINT, self.on_signal)

    def running(self, wake: Callable[[], None]) -> None:
        """The loop runs: from now on a signal asks for a stop within the budget."""
        self._wake = wake

    @property
    def status(self) -> int:
        return 0 if self.signum is None else exit_status(-self.signum)

    def on_signal(self, signum: int, frame: FrameType | None = None) -> None:
        if self.signum is None:
            self.signum = signum
        if self._wake is None:
            log.info("signal %d while starting: stopped (nothing registered yet)", signum)
            self._exit_now(self.status)
        else:
            self.event.set()
            self._wake()


def end_process(status: int) -> NoReturn:
    """End now with ``status``: the interpreter's own exit would join threads that wait on the
    cluster. What the stop wanted written is written; the rest is abandoned, as SIGKILL would."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed or broken stdout: nothing to save
            stream.flush()
    os._exit(status)


# ---- a loop that hangs ends the process, so YARN relaunches the controller (issue 47)
STALLED_MIN_CHECKS = 120  # the watchdog's checks, one a second: at least two minutes
STALLED_TICKS = 30  # and at least this many ticks


@dataclass
class Watchdog:
    """Counts its checks (one a second, from the main thread) since the loop last published. A tick
    waits on nothing longer than its clients' timeouts (seconds), so a loop quiet for
    ``limit`` checks is hung (a deadlock, a call without a timeout): the process ends and YARN
    relaunches it (the instances stay discoverable meanwhile: their znodes outlive it). Checks, not
    the clock: a paused process (SIGSTOP, a VM paused) pauses the watchdog too, and its loop ticks
    again once it runs."""

    limit: int
    seen: int = -1  # the publications counted at the last check
    quiet: int = 0  # checks since that count last changed

    @classmethod
    def for_tick(cls, tick_s: float) -> Watchdog:
        return cls(max(STALLED_MIN_CHECKS, round(STALLED_TICKS * tick_s)))

    def stalled(self, published: int) -> bool:
        if published != self.seen:
            self.seen, self.quiet = published, 0
        else:
            self.quiet += 1
        return self.quiet >= self.limit
