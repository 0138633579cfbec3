"""The sync loop: observe HAProxy's slots, decide (tarn.haproxy.plan), act on the Runtime API.

One source feeds every backend the sync keeps: the Triton backend follows each instance's Triton
(``triton_endpoints``), the OpenAI backend, when there is one, each instance's front
(``front_endpoints``). It runs at every change the source reports and at least every
``repair_interval`` seconds (default 1 s): that tick finishes drains (DRAIN -> MAINT once idle)
and repairs HAProxy after a reload or restart, which resets every server to the configuration
(all slots in maintenance). HAProxy being away (socket missing or refusing) is logged once and
retried at every tick.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from tarn.haproxy.plan import Command, Endpoint, Plan, SetAddress, plan
from tarn.haproxy.runtime import HaproxyUnavailable, RuntimeApi, RuntimeApiError
from tarn.haproxy.sources import Instances, describe, triton_endpoints

LOG = logging.getLogger("tarn.haproxy")


def describe_command(command: Command) -> str:
    if isinstance(command, SetAddress):
        return f"{command.server}: address {command.endpoint} ({command.reason})"
    return f"{command.server}: {command.state.value} ({command.reason})"


@dataclass
class Reporter:
    """Logs a topic's message only when it differs from the last one for that topic."""

    last: dict[str, str] = field(default_factory=dict)

    def report(self, topic: str, message: str, level: int = logging.WARNING) -> None:
        if self.last.get(topic) != message:
            self.last[topic] = message
            if message:
                LOG.log(level, "%s", message)

    def clear(self, topic: str, message: str = "") -> None:
        """The topic's condition ended; log ``message`` if it had been reported."""
        if self.last.pop(topic, "") and message:
            LOG.info("%s", message)


Select = Callable[[Instances], frozenset[Endpoint]]


@dataclass
class BackendSync:
    """Makes one HAProxy backend's slots serve a set of endpoints: ``select``'s of the instances."""

    api: RuntimeApi
    backend: str
    select: Select = triton_endpoints
    reporter: Reporter = field(default_factory=Reporter)

    def follow(self, instances: Instances) -> Plan | None:
        """One round for the instances the source knows (see :meth:`reconcile`)."""
        return self.reconcile(self.select(instances))

    def reconcile(self, wanted: frozenset[Endpoint]) -> Plan | None:
        """One observe-decide-act round; None when HAProxy could not be read or refused a command."""
        try:
            result = plan(self.api.slots(self.backend), wanted)
            for command in result.commands:
                self.api.apply(self.backend, command)
                LOG.info("%s/%s", self.backend, describe_command(command))
        except HaproxyUnavailable as exc:
            self.reporter.report("haproxy", f"{exc}; retrying")
            return None
        except RuntimeApiError as exc:
            self.reporter.clear("haproxy", f"HAProxy answers again on {self.api.socket_path}")
            self.reporter.report("refused", str(exc), logging.ERROR)
            return None
        self.reporter.clear("haproxy", f"HAProxy answers again on {self.api.socket_path}")
        self.reporter.clear("refused")
        self._report_overflow(result)
        return result

    def _report_overflow(self, result: Plan) -> None:
        if result.overflow:
            self.reporter.report(
                "overflow",
                f"{len(result.overflow)} instances have no free slot in backend {self.backend}: "
                f"{describe(result.overflow)}; configure more slots (haproxy_slots)",
            )
        else:
            self.reporter.clear("overflow", f"every instance has a slot in backend {self.backend}")


class Source(Protocol):
    """What the loop needs from a source: the known set (None: unknown) and a change signal."""

    changed: threading.Event

    def current(self) -> Instances | None: ...


def run(
    source: Source,
    syncs: Sequence[BackendSync],
    stop: threading.Event,
    repair_interval: float = 1.0,
    on_round: Callable[[Plan | None], None] | None = None,
) -> None:
    """Reconcile every backend at each change and every ``repair_interval`` seconds until ``stop``
    is set. ``on_round``: each backend's result, in order."""
    while not stop.is_set():
        source.changed.clear()
        wanted = source.current()
        for sync in syncs:
            result = sync.follow(wanted) if wanted is not None else None
            if on_round is not None:
                on_round(result)
        source.changed.wait(repair_interval)
