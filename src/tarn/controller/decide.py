"""Scaling decisions: pure functions of the observed load, the policy and the time.

- Thresholds: the mean load of the serving instances above ``--scale-up`` asks for more, below
  ``--scale-down`` for fewer.
- Steps are proportional to the excess: the new count is the one that brings the mean load to
  the middle of the band (total load / midpoint), not merely ±1.
- No flapping: a breach must last ``up_ticks`` (or ``down_ticks``: slower, scaling down is the
  riskier move) consecutive ticks; after any change nothing moves for ``--cooldown``; the
  midpoint target means a step never lands next to the opposite threshold.
- Bounds: ``--min-instances`` ≤ target ≤ ``--max-instances``, enforced at once.
- Missing metrics: instances without a load figure are left out of the mean; with no figure
  at all the target holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal

from tarn.spec import instance_number
from tarn.stdlib.config import TarnConfig, default_of

Direction = Literal["up", "down", "hold"]


@dataclass(frozen=True)
class Policy:
    """The scaling options (defaults: the declared ones) and the breach lengths (controller only)."""

    scale_up: float = default_of("scale_up")
    scale_down: float = default_of("scale_down")
    min_instances: int = default_of("min_instances")
    max_instances: int = default_of("max_instances")
    cooldown_s: float = default_of("cooldown_ms") / 1000
    up_ticks: int = 2
    down_ticks: int = 5

    @classmethod
    def from_config(cls, config: TarnConfig) -> Policy:
        return cls(
            scale_up=config.scale_up,
            scale_down=config.scale_down,
            min_instances=config.min_instances,
            max_instances=config.max_instances,
            cooldown_s=config.cooldown_ms / 1000,
        )

    @property
    def midpoint(self) -> float:
        return (self.scale_up + self.scale_down) / 2


@dataclass(frozen=True)
class ScalerState:
    """What the decision remembers between ticks (rebuilt as 'just acted' after a restart)."""

    last_change_at: float
    above: int = 0  # consecutive ticks above --scale-up
    below: int = 0  # consecutive ticks below --scale-down


@dataclass(frozen=True)
class Observation:
    target: int  # the component's number_of_containers at the RM
    ready: int  # instances that answer ready (draining ones included)
    loads: tuple[float | None, ...]  # one per serving instance; None: no figure this tick


@dataclass(frozen=True)
class Decision:
    target: int
    direction: Direction
    reason: str
    mean_load: float | None


def decide(state: ScalerState, seen: Observation, now: float, policy: Policy) -> tuple[Decision, ScalerState]:
    """The target for this tick and the state for the next one."""
    known = [load for load in seen.loads if load is not None]
    mean = sum(known) / len(known) if known else None

    bounded = min(max(seen.target, policy.min_instances), policy.max_instances)
    if bounded != seen.target:
        direction: Direction = "up" if bounded > seen.target else "down"
        reason = f"target {seen.target} outside [{policy.min_instances}, {policy.max_instances}]"
        return Decision(bounded, direction, reason, mean), ScalerState(last_change_at=now)

    if mean is None:
        return _hold(seen, "no load figure from any instance", None), replace(state, above=0, below=0)

    if mean > policy.scale_up:
        state = replace(state, above=state.above + 1, below=0)
    elif mean < policy.scale_down:
        state = replace(state, above=0, below=state.below + 1)
    else:
        return _hold(seen, "load within the band", mean), replace(state, above=0, below=0)

    cooling = policy.cooldown_s - (now - state.last_change_at)
    if cooling > 0:
        return _hold(seen, f"cooldown, {cooling:.0f} s left", mean), state

    total = mean * len(seen.loads)
    wanted = math.ceil(round(total / policy.midpoint, 6))
    if state.above:
        if state.above < policy.up_ticks:
            return _hold(
                seen, f"load {mean:.2f} above {policy.scale_up} for {state.above} tick(s)", mean
            ), state
        if seen.ready < seen.target:
            return _hold(seen, f"waiting for {seen.target - seen.ready} instance(s) to be ready", mean), state
        target = min(policy.max_instances, max(seen.target + 1, wanted))
        if target == seen.target:
            return _hold(seen, f"load {mean:.2f} but already at --max-instances", mean), state
        reason = f"load {mean:.2f} > {policy.scale_up}: {seen.target} -> {target}"
        return Decision(target, "up", reason, mean), ScalerState(last_change_at=now)

    if state.below < policy.down_ticks:
        return _hold(
            seen, f"load {mean:.2f} below {policy.scale_down} for {state.below} tick(s)", mean
        ), state
    target = max(policy.min_instances, min(seen.target - 1, wanted))
    if target >= seen.target:
        return _hold(seen, f"load {mean:.2f} but already at --min-instances", mean), state
    reason = f"load {mean:.2f} < {policy.scale_down}: {seen.target} -> {target}"
    return Decision(target, "down", reason, mean), ScalerState(last_change_at=now)


def _hold(seen: Observation, reason: str, mean: float | None) -> Decision:
    return Decision(seen.target, "hold", reason, mean)


@dataclass(frozen=True)
class Candidate:
    instance: str  # component instance name, e.g. triton-3
    ready: bool
    load: float | None


def pick_victims(candidates: list[Candidate], count: int) -> list[str]:
    """Which instances to remove: not ready first (they serve nobody), then the least loaded,
    then the newest (highest instance number)."""

    def order(c: Candidate) -> tuple[bool, float, int]:
        return (c.ready, c.load if c.load is not None else 0.0, -instance_number(c.instance))

    return [c.instance for c in sorted(candidates, key=order)[: max(count, 0)]]
