"""The controller's stop (tarn.controller.shutdown): one budget for every step, the exit status of
each signal, and a signal during the start that ends the process at once."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from tarn.controller.shutdown import STALLED_MIN_CHECKS, Step, StopSignal, Watchdog, run_within
from tests.support.controller import make


def sleeper(seconds: float, log: list[str], name: str) -> Step:
    def run(left: float) -> None:
        log.append(f"{name} started with {left:.1f}")
        time.sleep(seconds)
        log.append(f"{name} done")

    return Step(name, run)


@pytest.mark.parametrize(
    ("durations", "budget", "late"),
    [
        ({"a": 0.0, "b": 0.0}, 1.0, []),  # quick steps: none late
        ({"a": 0.0, "b": 5.0, "c": 0.2}, 0.5, ["b", "c"]),  # b holds the budget: c starts with 0 s, late
        ({"a": 5.0}, 0.3, ["a"]),  # a hung step (an HDFS write, a Ranger poll) is left behind
    ],
)
def test_every_step_shares_one_budget(durations: dict[str, float], budget: float, late: list[str]) -> None:
    log: list[str] = []
    began = time.monotonic()
    assert run_within([sleeper(s, log, name) for name, s in durations.items()], budget) == late
    assert time.monotonic() - began < budget + 0.2  # whatever the steps wait on
    # each one started (a late one in its own thread, which may log a moment after the return)
    deadline = time.monotonic() + 1.0
    while len([line for line in log if "started" in line]) < len(durations) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [line.split()[0] for line in log if "started" in line] == list(durations)


def test_a_late_step_is_given_what_is_left_and_a_failing_one_does_not_stop_the_next() -> None:
    given: list[float] = []

    def fails(left: float) -> None:
        raise OSError("the NameNode refused the write")

    steps = [Step("slow", lambda left: time.sleep(0.3)), Step("fails", fails), Step("last", given.append)]
    assert run_within(steps, 1.0) == []
    assert 0.5 < given[0] < 0.75


def test_a_step_that_gives_up_at_the_deadline_is_late_however_the_threads_are_scheduled() -> None:
    """The audit's last write waits out what it is given and says it is still writing: late, though
    it returns at the very deadline the outer join waits for (seen alive or not, a race: CI13)."""

    def waits_out(left: float) -> bool:
        time.sleep(left)
        return False

    tries = [run_within([Step("audit", waits_out)], 0.02) for attempt in range(20)]
    assert tries == [["audit"]] * 20
    assert run_within([Step("done in time", lambda left: True)], 0.5) == []


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_while_starting_ends_the_process_at_once_with_128_plus_n(signum: int, status: int) -> None:
    ended: list[int] = []
    stop = StopSignal(exit_now=ended.append)
    stop.on_signal(signum)
    assert ended == [status]
    assert not stop.event.is_set()


def test_a_signal_while_running_asks_the_loop_to_stop_and_the_first_signal_names_the_status() -> None:
    ended: list[int] = []
    woken = threading.Event()
    stop = StopSignal(exit_now=ended.append)
    assert stop.status == 0
    stop.running(woken.set)
    stop.on_signal(signal.SIGTERM)
    stop.on_signal(signal.SIGINT)  # an impatient second signal does not change what YARN is told
    assert ended == []
    assert stop.event.is_set()
    assert woken.is_set()
    assert stop.status == 143


# ---- the watchdog (issue 47: a controller whose loop hangs was never replaced)
@pytest.mark.parametrize(
    ("tick_s", "limit"), [(2.0, STALLED_MIN_CHECKS), (10.0, 300), (0.5, STALLED_MIN_CHECKS)]
)
def test_the_watchdog_waits_two_minutes_and_thirty_ticks(tick_s: float, limit: int) -> None:
    assert Watchdog.for_tick(tick_s).limit == limit


def test_a_loop_that_publishes_nothing_for_the_limit_is_hung() -> None:
    watchdog = Watchdog(limit=3)
    assert [watchdog.stalled(p) for p in (0, 1, 1, 1)] == [False, False, False, False]
    assert watchdog.stalled(1)  # the third check in a row without a publication
    assert not watchdog.stalled(2)  # it published again: the count starts over


def test_a_paused_process_is_not_hung() -> None:
    # SIGSTOP pauses the checks too: however long the pause, the check after it is one check.
    watchdog = Watchdog(limit=3)
    watchdog.stalled(5)
    watchdog.stalled(5)
    assert not watchdog.stalled(6)  # after the pause the loop ticked before the next check


def test_every_tick_published_is_a_sign_of_life() -> None:
    lab = make(instances=2)
    before = lab.controller.published
    lab.ticks(3)
    assert lab.controller.published == before + 3
