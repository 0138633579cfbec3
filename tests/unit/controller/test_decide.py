"""The scaling decision as a table: thresholds, proportional steps, cooldown, bounds, missing
metrics, and noisy input that must not flap."""

from __future__ import annotations

import pytest

from tarn.controller.decide import (
    Candidate,
    Observation,
    Policy,
    ScalerState,
    decide,
    pick_victims,
)
from tarn.spec import instance_number
from tests.support.config import parse

POLICY = Policy(
    scale_up=0.8, scale_down=0.2, min_instances=1, max_instances=6, cooldown_s=60, up_ticks=2, down_ticks=3
)
LONG_AGO = -1000.0  # the last change: far outside the cooldown
NOW = 0.0


def seen(target: int, *loads: float | None, ready: int | None = None) -> Observation:
    return Observation(target=target, ready=target if ready is None else ready, loads=tuple(loads))


CASES = [
    # id, state (last change, above, below), observation, expected target, direction
    ("within band holds", ScalerState(LONG_AGO), seen(2, 0.5, 0.6), 2, "hold"),
    ("first tick above waits", ScalerState(LONG_AGO), seen(2, 0.9, 0.9), 2, "hold"),
    ("second tick above scales up", ScalerState(LONG_AGO, above=1), seen(2, 0.9, 0.9), 4, "up"),
    ("step proportional to excess", ScalerState(LONG_AGO, above=1), seen(1, 2.0), 4, "up"),
    ("small excess, +1", ScalerState(LONG_AGO, above=1), seen(1, 0.81), 2, "up"),
    ("up capped at max", ScalerState(LONG_AGO, above=1), seen(3, 3.0, 3.0, 3.0), 6, "up"),
    ("at max holds", ScalerState(LONG_AGO, above=5), seen(6, *[1.0] * 6), 6, "hold"),
    ("cooldown blocks up", ScalerState(-30.0, above=5), seen(2, 0.95, 0.95), 2, "hold"),
    ("cooldown over allows up", ScalerState(-61.0, above=5), seen(2, 0.95, 0.95), 4, "up"),
    ("down needs down_ticks", ScalerState(LONG_AGO, below=1), seen(3, 0.1, 0.1, 0.1), 3, "hold"),
    ("down after down_ticks", ScalerState(LONG_AGO, below=2), seen(3, 0.1, 0.1, 0.1), 1, "down"),
    ("idle goes to min", ScalerState(LONG_AGO, below=2), seen(5, 0, 0, 0, 0, 0), 1, "down"),
    ("partial down keeps enough", ScalerState(LONG_AGO, below=2), seen(6, *[0.19] * 6), 3, "down"),
    ("at min holds", ScalerState(LONG_AGO, below=9), seen(1, 0.0), 1, "hold"),
    ("cooldown blocks down", ScalerState(-10.0, below=9), seen(3, 0.0, 0.0, 0.0), 3, "hold"),
    ("below min is raised at once", ScalerState(-1.0), seen(0), 1, "up"),
    ("above max is lowered at once", ScalerState(-1.0), seen(9, 0.5), 6, "down"),
    ("no metrics at all holds", ScalerState(LONG_AGO, above=4), seen(2, None, None), 2, "hold"),
    ("missing metrics are left out", ScalerState(LONG_AGO, above=1), seen(2, 0.9, None), 4, "up"),
    ("no instances serving holds", ScalerState(LONG_AGO, below=9), seen(2, ready=0), 2, "hold"),
    ("up waits for pending instances", ScalerState(LONG_AGO, above=3), seen(3, 0.9, 0.9, ready=2), 3, "hold"),
    (
        "down allowed while one is pending",
        ScalerState(LONG_AGO, below=2),
        seen(3, 0.0, 0.0, ready=2),
        1,
        "down",
    ),
    ("exactly at scale-up is not above", ScalerState(LONG_AGO, above=3), seen(2, 0.8, 0.8), 2, "hold"),
    ("exactly at scale-down is not below", ScalerState(LONG_AGO, below=3), seen(2, 0.2, 0.2), 2, "hold"),
    ("mean, not max, decides", ScalerState(LONG_AGO, above=3), seen(2, 1.5, 0.0), 2, "hold"),
]


@pytest.mark.parametrize(
    ("state", "observation", "target", "direction"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_decision_table(state: ScalerState, observation: Observation, target: int, direction: str) -> None:
    decision, after = decide(state, observation, NOW, POLICY)
    assert (decision.target, decision.direction) == (target, direction), decision.reason
    if direction != "hold":
        assert after == ScalerState(last_change_at=NOW)  # a change starts the cooldown and resets streaks


def test_a_step_lands_in_the_middle_of_the_band() -> None:
    """After scaling, the same total load spread over the new count sits between the thresholds."""
    for target, load in [(1, 2.0), (2, 0.9), (3, 1.7), (6, 0.05), (4, 0.15)]:
        state = ScalerState(LONG_AGO, above=5, below=5)
        decision = decide(
            state, seen(target, *[load] * target), NOW, Policy(max_instances=100, cooldown_s=0)
        )[0]
        spread = load * target / decision.target
        assert 0.2 <= spread <= 0.8 or decision.target in (1, 100), (target, load, decision)


def test_noise_around_the_thresholds_does_not_flap() -> None:
    """Load that crosses a threshold for single ticks never changes the target."""
    state = ScalerState(LONG_AGO)
    noisy = [0.85, 0.5, 0.9, 0.3, 0.82, 0.15, 0.6, 0.1, 0.7, 0.95, 0.4, 0.18, 0.5] * 4
    targets = set()
    for tick, load in enumerate(noisy):
        decision, state = decide(state, seen(2, load, load), float(tick * 2), POLICY)
        targets.add(decision.target)
    assert targets == {2}


def test_sustained_load_then_idle_goes_up_then_down_with_cooldowns() -> None:
    state, target, now, path = ScalerState(LONG_AGO), 1, 0.0, []
    for load in [2.0] * 40 + [0.0] * 80:
        decision, state = decide(state, seen(target, *[load * 1 / target] * target), now, POLICY)
        if decision.target != target:
            path.append((now, target, decision.target))
            target = decision.target
        now += 2.0
    assert [p[1:] for p in path] == [(1, 4), (4, 1)]
    assert path[1][0] - path[0][0] >= POLICY.cooldown_s


def test_after_a_restart_the_target_is_kept_for_a_cooldown() -> None:
    state = ScalerState(last_change_at=NOW)  # what a (re)started controller begins with
    decision = decide(state, seen(3, 0.0, 0.0, 0.0), NOW + 10, Policy(cooldown_s=60, down_ticks=1))[0]
    assert decision.target == 3


# --scale-on streams --scale-up-at 8 --scale-down-at 2 (queue is the same rule in its own unit)
STREAMS = Policy(
    scale_up=8, scale_down=2, min_instances=1, max_instances=6, cooldown_s=60, up_ticks=2, down_ticks=3,
    signal="streams",
)  # fmt: skip

STREAM_CASES = [
    # id, state, observation (streams in flight per ready instance), expected target, direction, reason
    ("streams above the target add", ScalerState(LONG_AGO, above=1), seen(2, 10, 10), 4, "up",
     "streams 10.00 > 8: 2 -> 4"),
    ("the step lands mid-band", ScalerState(LONG_AGO, above=1), seen(2, 9, 8), 4, "up",
     "streams 8.50 > 8: 2 -> 4"),
    ("first tick above waits", ScalerState(LONG_AGO), seen(2, 12, 12), 2, "hold",
     "streams 12.00 above 8 for 1"),
    ("within the band holds", ScalerState(LONG_AGO, above=3), seen(2, 5, 6), 2, "hold",
     "streams within the band"),
    ("below removes after down_ticks", ScalerState(LONG_AGO, below=2), seen(3, 1, 0, 1), 1, "down",
     "streams 0.67 < 2: 3 -> 1"),
    ("below waits for down_ticks", ScalerState(LONG_AGO, below=1), seen(3, 1, 0, 1), 3, "hold",
     "streams 0.67 below 2 for 2"),
    ("below within the cooldown holds", ScalerState(-30.0, below=9), seen(3, 0, 0, 0), 3, "hold", "cooldown"),
    ("below after the cooldown removes", ScalerState(-61.0, below=9), seen(3, 0, 0, 0), 1, "down",
     "streams 0.00 < 2"),
    ("no instance ready holds", ScalerState(LONG_AGO, above=5), seen(2, ready=0), 2, "hold",
     "no streams figure from any instance"),
    ("no front read this tick holds", ScalerState(LONG_AGO, above=5), seen(2, None, None), 2, "hold",
     "no streams figure from any instance"),
    ("a front not read is left out", ScalerState(LONG_AGO, above=1), seen(2, 12, None), 5, "up",
     "streams 12.00 > 8: 2 -> 5"),
    ("exactly at the threshold is not above", ScalerState(LONG_AGO, above=3), seen(2, 8, 8), 2, "hold",
     "within"),
    ("up waits for starting instances", ScalerState(LONG_AGO, above=3), seen(3, 20, 20, ready=2), 3, "hold",
     "waiting for 1 instance(s)"),
    ("up capped at max", ScalerState(LONG_AGO, above=3), seen(3, 40, 40, 40), 6, "up",
     "streams 40.00 > 8: 3 -> 6"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("state", "observation", "target", "direction", "reason"),
    [c[1:] for c in STREAM_CASES],
    ids=[c[0] for c in STREAM_CASES],
)
def test_streams_table(
    state: ScalerState, observation: Observation, target: int, direction: str, reason: str
) -> None:
    decision, after = decide(state, observation, NOW, STREAMS)
    assert (decision.target, decision.direction) == (target, direction), decision.reason
    assert reason in decision.reason
    if direction != "hold":
        assert after == ScalerState(last_change_at=NOW)


def test_queue_scales_in_its_own_unit() -> None:
    queue = Policy(scale_up=4, scale_down=0, max_instances=6, cooldown_s=0, up_ticks=1, signal="queue")
    up = decide(ScalerState(LONG_AGO), seen(2, 6, 4), NOW, queue)[0]
    assert (up.target, up.reason) == (5, "queue 5.00 > 4: 2 -> 5")  # 10 pending over the midpoint, 2
    # --scale-down-at 0: an empty queue is within the band, never below it
    idle_queue = decide(ScalerState(LONG_AGO, below=9), seen(3, 0, 0, 0), NOW, queue)[0]
    assert (idle_queue.target, idle_queue.reason) == (3, "queue within the band")


ZERO = Policy(
    scale_up=0.8, scale_down=0.2, min_instances=0, max_instances=6, cooldown_s=60, up_ticks=2, down_ticks=3,
    scale_to_zero_after_s=300,
)  # fmt: skip


def idle(target: int, idle_s: float, *loads: float | None, held: int = 0) -> Observation:
    return Observation(target=target, ready=target, loads=tuple(loads), held=held, idle_s=idle_s)


ZERO_CASES = [
    # id, state, observation, expected target, direction
    ("idle for the grace goes to zero", ScalerState(LONG_AGO), idle(1, 300, 0.0), 0, "down"),
    ("idle several go to zero together", ScalerState(LONG_AGO), idle(3, 301, 0.0, 0.0, 0.0), 0, "down"),
    ("idle but not long enough holds", ScalerState(LONG_AGO, below=9), idle(1, 299, 0.0), 1, "hold"),
    ("low load never reaches zero", ScalerState(LONG_AGO, below=9), idle(3, 10, 0.0, 0.0, 0.0), 1, "down"),
    ("at one, low load holds", ScalerState(LONG_AGO, below=9), idle(1, 10, 0.0), 1, "hold"),
    ("idle with held requests stays", ScalerState(LONG_AGO), idle(1, 999, None, held=3), 1, "hold"),
    ("idle goes even in cooldown", ScalerState(-5.0), idle(2, 400, 0.0, 0.0), 0, "down"),
    ("at zero without demand holds", ScalerState(LONG_AGO), idle(0, 999), 0, "hold"),
    ("held requests wake at once", ScalerState(LONG_AGO), idle(0, 999, held=1), 1, "up"),
    ("a wake ignores the cooldown", ScalerState(-1.0), idle(0, 0, held=50), 1, "up"),
]


@pytest.mark.parametrize(
    ("state", "observation", "target", "direction"),
    [c[1:] for c in ZERO_CASES],
    ids=[c[0] for c in ZERO_CASES],
)
def test_scale_to_zero_table(
    state: ScalerState, observation: Observation, target: int, direction: str
) -> None:
    decision, after = decide(state, observation, NOW, ZERO)
    assert (decision.target, decision.direction) == (target, direction), decision.reason
    if direction != "hold":
        assert after == ScalerState(last_change_at=NOW)


def test_without_a_grace_idleness_changes_nothing() -> None:
    decision = decide(ScalerState(LONG_AGO), idle(1, 10_000, 0.0), NOW, POLICY)[0]
    assert decision.target == 1


@pytest.mark.parametrize(
    ("candidates", "count", "victims"),
    [
        ([Candidate("triton-0", True, 0.5), Candidate("triton-1", True, 0.1)], 1, ["triton-1"]),
        ([Candidate("triton-0", True, 0.1), Candidate("triton-1", False, None)], 1, ["triton-1"]),
        ([Candidate("triton-2", True, 0.0), Candidate("triton-10", True, 0.0)], 1, ["triton-10"]),
        ([Candidate("triton-0", True, None), Candidate("triton-1", True, 0.3)], 1, ["triton-0"]),
        (
            [
                Candidate("triton-0", True, 0.2),
                Candidate("triton-1", True, 0.1),
                Candidate("triton-2", True, 0.3),
            ],
            2,
            ["triton-1", "triton-0"],
        ),
        ([Candidate("triton-0", True, 0.2)], 0, []),
    ],
)
def test_pick_victims(candidates: list[Candidate], count: int, victims: list[str]) -> None:
    assert pick_victims(candidates, count) == victims


@pytest.mark.parametrize(("name", "number"), [("triton-0", 0), ("triton-12", 12), ("odd", 0), ("a-b-3", 3)])
def test_instance_number(name: str, number: int) -> None:
    assert instance_number(name) == number


def test_the_policy_takes_the_thresholds_of_its_signal() -> None:
    load = Policy.from_config(parse())
    assert (load.signal, load.scale_up, load.scale_down) == ("load", 0.8, 0.2)
    streams = Policy.from_config(
        parse("--scale-on", "streams", "--openai-port", "9100", "--scale-up-at", "8", "--scale-down-at", "2")
    )
    assert (streams.signal, streams.scale_up, streams.scale_down, streams.midpoint) == ("streams", 8, 2, 5)
