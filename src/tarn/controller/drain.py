"""Drains as pure steps: (drains, what each instance did, operator requests, time) → new drains
and what the loop must do.

A drain takes an instance out of discovery. A *removal* drain (the autoscaler's scale-down) ends
in a decommission once the instance is idle; an *operator* drain (``POST /instances/<name>/drain``,
e.g. before an upgrade) keeps it out until it is undrained or restarts. Idle means: no request
completed or queued for ``grace_s`` since the drain began (clients and load balancers need that
long to notice the deregistration), or ``timeout_s`` reached.

The loop owns the only copy of the drains and publishes it in its snapshot; the API threads
read that snapshot and queue ``Request``s, which the next tick applies here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from tarn.stdlib.config import TarnConfig

Drains = Mapping[str, "Drain"]  # by instance name


@dataclass(frozen=True)
class Drain:
    started: float
    remove: bool  # decommission once idle (scale-down); else an operator's drain
    saw_unready: bool = False
    done: bool = False


@dataclass(frozen=True)
class Request:
    """An operator's drain (``drain=True``) or undrain, stamped when the API received it."""

    instance: str
    at: float
    drain: bool = True


@dataclass(frozen=True)
class Seen:
    """An instance this tick: whether it answers ready and when it last did any work."""

    ready: bool
    last_activity: float


@dataclass(frozen=True)
class DrainPolicy:
    grace_s: float
    timeout_s: float

    @classmethod
    def from_config(cls, config: TarnConfig) -> DrainPolicy:
        return cls(grace_s=max(2 * config.tick_seconds, 2.0), timeout_s=float(config.drain_timeout_s))


@dataclass(frozen=True)
class Step:
    drains: dict[str, Drain]
    decommission: tuple[str, ...]  # removal drains that are idle: the loop asks YARN to remove them
    started: int  # operator drains begun (the tarn_drains counter)
    events: tuple[str, ...]  # what happened, for the log


def drain_finished(drain: Drain, now: float, last_activity: float, grace_s: float, timeout_s: float) -> bool:
    """Idle long enough (no work since the grace period began), or the bound is reached."""
    if now - drain.started >= timeout_s:
        return True
    return now - drain.started >= grace_s and now - max(last_activity, drain.started) >= grace_s


def apply_requests(
    drains: Drains, requests: Iterable[Request], live: Iterable[str]
) -> tuple[dict[str, Drain], int]:
    """The operator's requests in order: (drains, operator drains begun). Requests for an instance
    that is gone are dropped; an undrain never cancels a removal drain."""
    names = set(live)
    result, started = dict(drains), 0
    for request in requests:
        if request.instance not in names:
            continue
        current = result.get(request.instance)
        if request.drain and current is None:
            result[request.instance] = Drain(started=request.at, remove=False)
            started += 1
        elif not request.drain and current is not None and not current.remove:
            del result[request.instance]
    return result, started


def step(
    drains: Drains, seen: Mapping[str, Seen], requests: Sequence[Request], now: float, policy: DrainPolicy
) -> Step:
    """One tick: forget instances that are gone, apply the requests, follow each drain."""
    kept, started = apply_requests({k: v for k, v in drains.items() if k in seen}, requests, seen)
    result: dict[str, Drain] = {}
    events: list[str] = []
    for name, drain in kept.items():
        instance = seen[name]
        if not instance.ready:
            drain = replace(drain, saw_unready=True)
        elif drain.saw_unready and not drain.remove:
            events.append(f"{name} restarted after its drain: serving again")  # an upgrade
            continue
        if not drain.done and drain_finished(
            drain, now, instance.last_activity, policy.grace_s, policy.timeout_s
        ):
            drain = replace(drain, done=True)
            events.append(f"{name} drained in {now - drain.started:.1f} s")
        result[name] = drain
    decommission = tuple(sorted(name for name, d in result.items() if d.remove and d.done))
    return Step(result, decommission, started, tuple(events))


def begin_removal(drains: Drains, victims: Iterable[str], now: float) -> dict[str, Drain]:
    """The autoscaler chose ``victims``: drain them, then remove them."""
    return {**drains, **{name: Drain(started=now, remove=True) for name in victims}}


def removed(drains: Drains, instances: Iterable[str]) -> dict[str, Drain]:
    """YARN accepted the decommission of ``instances``."""
    gone = set(instances)
    return {k: v for k, v in drains.items() if k not in gone}


def cancel_removals(drains: Drains) -> tuple[dict[str, Drain], list[str]]:
    """Requests wait for an instance (an activator holds them): the removal drains not yet done
    are called off, their instances serve again. Returns the drains left and those called off."""
    called_off = sorted(name for name, d in drains.items() if d.remove and not d.done)
    return {k: v for k, v in drains.items() if k not in called_off}, called_off


def removing(drains: Drains) -> list[str]:
    """Removal drains still in progress: the autoscaler holds until they end."""
    return sorted(name for name, d in drains.items() if d.remove)


def operator_drained(drains: Drains, pending: Iterable[Request], live: Iterable[str]) -> set[str]:
    """Instances under an operator's drain once ``pending`` requests apply (what the API answers)."""
    after = apply_requests(drains, pending, live)[0]
    return {name for name, d in after.items() if not d.remove}
