"""Scaling decisions: pure functions of the observed load, the policy and the time.

- Thresholds: the mean signal of the serving instances above the up threshold asks for more, below
  the down one for fewer. The signal is ``--scale-on``'s: the load (against ``--scale-up`` and
  ``--scale-down``), or Triton's pending requests or the OpenAI fronts' streams in flight per ready
  instance (against ``--scale-up-at`` and ``--scale-down-at``); the caller gives one figure per
  instance (tarn.controller.tick.scaling_figure), this module does not care which.
- Steps are proportional to the excess: the new count is the one that brings the mean load to
  the middle of the band (total load / midpoint), not merely ±1.
- No flapping: a breach must last ``up_ticks`` (or ``down_ticks``: slower, scaling down is the
  riskier move) consecutive ticks; after any change nothing moves for ``--cooldown``; the
  midpoint target means a step never lands next to the opposite threshold.
- Bounds: ``--min-instances`` ≤ target ≤ ``--max-instances``, enforced at once.
- Missing metrics: instances without a figure (metrics or front not read this tick) are left out
  of the mean; with no figure at all the target holds.
- Scale to zero (``--min-instances 0`` with ``--scale-to-zero-after``): load alone never removes
  the last instance; no request for the grace period does. Requests held by the activator bring
  the service back from zero at once, with no breach length and no cooldown (someone is waiting).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal

from tarn.spec import instance_number
from tarn.stdlib.config import TarnConfig, default_of
from tarn.stdlib.config.declaration import ScaleSignal

Direction = Literal["up", "down", "hold"]


@dataclass(frozen=True)
class Policy:
    """The scaling options (defaults: the declared ones) and the breach lengths (controller only).
    ``scale_up``/``scale_down``: the thresholds in the unit of ``signal``."""

    scale_up: float = default_of("scale_up")
    scale_down: float = default_of("scale_down")
    min_instances: int = default_of("min_instances")
    max_instances: int = default_of("max_instances")
    cooldown_s: float = default_of("cooldown_ms") / 1000
    scale_to_zero_after_s: float = default_of("scale_to_zero_after_s")
    up_ticks: int = 2
    down_ticks: int = 5
    signal: ScaleSignal = default_of("scale_on")  # noqa: RUF009 - a str, as immutable as the others

    @classmethod
    def from_config(cls, config: TarnConfig) -> Policy:
        up, down = config.scale_thresholds
        return cls(
            scale_up=up,
            scale_down=down,
            min_instances=config.min_instances,
            max_instances=config.max_instances,
            cooldown_s=config.cooldown_ms / 1000,
            scale_to_zero_after_s=config.scale_to_zero_after_s,
            signal=config.scale_on,
        )

    @property
    def midpoint(self) -> float:
        return (self.scale_up + self.scale_down) / 2

    @property
    def load_floor(self) -> int:
        """The fewest instances load-based scaling leaves: zero is for idleness alone."""
        return max(self.min_instances, 1)


@dataclass(frozen=True)
class ScalerState:
    """What the decision remembers between ticks (rebuilt as 'just acted' after a restart)."""

    last_change_at: float
    above: int = 0  # consecutive ticks above the up threshold
    below: int = 0  # consecutive ticks below the down threshold


@dataclass(frozen=True)
class Observation:
    target: int  # the component's number_of_containers at the RM
    ready: int  # instances that answer ready (draining ones included)
    loads: tuple[float | None, ...]  # the signal's figure per ready instance; None: none this tick
    held: int = 0  # requests the activator holds (a fresh report), waiting for an instance
    idle_s: float = 0.0  # seconds since the last request any instance served (or a wake)


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

    if seen.target == 0:
        if seen.held:
            target = policy.load_floor
            reason = f"{seen.held} request(s) held by the activator: 0 -> {target}"
            return Decision(target, "up", reason, None), ScalerState(last_change_at=now)
        return _hold(seen, "scaled to zero; a request wakes it", None), replace(state, above=0, below=0)
    if policy.scale_to_zero_after_s and not seen.held and seen.idle_s >= policy.scale_to_zero_after_s:
        reason = (
            f"no request for {seen.idle_s:.0f} s (--scale-to-zero-after {policy.scale_to_zero_after_s:g}): "
            f"{seen.target} -> 0"
        )
        return Decision(0, "down", reason, mean), ScalerState(last_change_at=now)

    signal = policy.signal
    if mean is None:
        return _hold(seen, f"no {signal} figure from any instance", None), replace(state, above=0, below=0)

    if mean > policy.scale_up:
        state = replace(state, above=state.above + 1, below=0)
    elif mean < policy.scale_down:
        state = replace(state, above=0, below=state.below + 1)
    else:
        return _hold(seen, f"{signal} within the band", mean), replace(state, above=0, below=0)

    cooling = policy.cooldown_s - (now - state.last_change_at)
    if cooling > 0:
        return _hold(seen, f"cooldown, {cooling:.0f} s left", mean), state

    total = mean * len(seen.loads)
    wanted = math.ceil(round(total / policy.midpoint, 6))
    if state.above:
        if state.above < policy.up_ticks:
            return _hold(
                seen, f"{signal} {mean:.2f} above {policy.scale_up:g} for {state.above} tick(s)", mean
            ), state
        if seen.ready < seen.target:
            return _hold(seen, f"waiting for {seen.target - seen.ready} instance(s) to be ready", mean), state
        target = min(policy.max_instances, max(seen.target + 1, wanted))
        if target == seen.target:
            return _hold(seen, f"{signal} {mean:.2f} but already at --max-instances", mean), state
        reason = f"{signal} {mean:.2f} > {policy.scale_up:g}: {seen.target} -> {target}"
        return Decision(target, "up", reason, mean), ScalerState(last_change_at=now)

    if state.below < policy.down_ticks:
        return _hold(
            seen, f"{signal} {mean:.2f} below {policy.scale_down:g} for {state.below} tick(s)", mean
        ), state
    target = max(policy.load_floor, min(seen.target - 1, wanted))
    if target >= seen.target:
        floor = "--min-instances" if policy.min_instances else "1 (zero comes from idleness)"
        return _hold(seen, f"{signal} {mean:.2f} but already at {floor}", mean), state
    reason = f"{signal} {mean:.2f} < {policy.scale_down:g}: {seen.target} -> {target}"
    return Decision(target, "down", reason, mean), ScalerState(last_change_at=now)


def _hold(seen: Observation, reason: str, mean: float | None) -> Decision:
    return Decision(seen.target, "hold", reason, mean)


@dataclass(frozen=True)
class Candidate:
    instance: str  # component instance name, e.g. triton-3
    ready: bool
    load: float | None


def pick_victims(candidates: list[Candidate], count: int) -> list[str]:
    """Which instances to remove: not ready first (they serve nobody), then the least loaded (by
    the signal scaled on: the fewest streams drain soonest), then the newest (highest instance number)."""

    def order(c: Candidate) -> tuple[bool, float, int]:
        return (c.ready, c.load if c.load is not None else 0.0, -instance_number(c.instance))

    return [c.instance for c in sorted(candidates, key=order)[: max(count, 0)]]
