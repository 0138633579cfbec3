"""The token ledger's decisions as tables: reservations across budgets and windows, settling,
windows that roll over, fronts that go away, limits that change; and the budgets of the tenancy file."""

from __future__ import annotations

from typing import Any

import pytest

from tarn.stdlib.openai.budget import BudgetKey, Grant, Ledger, Limit, window_start
from tarn.stdlib.openai.tenancy import parse

BOB: BudgetKey = ("user", "bob")
BATCH: BudgetKey = ("group", "batch")
T0 = 1_800_000_000.0  # a minute's start (divisible by 60), 8 h into a UTC day


def test_windows_start_on_the_minute_and_the_utc_day() -> None:
    assert window_start(T0 + 59.9, "minute") == T0
    assert window_start(T0 + 60, "minute") == T0 + 60
    assert window_start(T0, "day") == T0 - 8 * 3600


@pytest.mark.parametrize(
    ("limits", "reservations", "granted"),
    [
        # per minute: 1,000 tokens; reservations of 400 fit twice, not three times
        ({BOB: Limit(per_minute=1000)}, [400, 400, 400], [True, True, False]),
        # what is refused holds nothing: a smaller one still fits
        ({BOB: Limit(per_minute=1000)}, [400, 700, 600], [True, False, True]),
        # the day's limit binds before the minute's
        ({BOB: Limit(per_minute=1000, per_day=500)}, [400, 200], [True, False]),
        # no limit declared: everything goes
        ({}, [10**9, 10**9], [True, True]),
        # a reservation larger than the whole budget never fits
        ({BOB: Limit(per_minute=100)}, [101], [False]),
        ({BOB: Limit(per_minute=100)}, [100], [True]),
    ],
)
def test_reservations_fit_what_is_left(
    limits: dict[BudgetKey, Limit], reservations: list[int], granted: list[bool]
) -> None:
    ledger = Ledger(limits)
    assert [ledger.reserve("front-a", [BOB], n, T0).granted for n in reservations] == granted


def test_a_users_and_its_groups_budgets_are_reserved_together_or_not_at_all() -> None:
    ledger = Ledger({BOB: Limit(per_minute=1000), BATCH: Limit(per_minute=500)})
    assert ledger.reserve("front-a", [BOB, BATCH], 400, T0).granted
    refused = ledger.reserve("front-a", [BOB, BATCH], 400, T0)  # bob has 600 left, batch 100
    assert refused == Grant(False, limit=500, remaining=100, reset_s=60.0)
    assert ledger.state([BOB], T0) == Grant(True, limit=1000, remaining=600, reset_s=60.0)  # untouched


def test_two_fronts_share_one_budget() -> None:
    ledger = Ledger({BOB: Limit(per_minute=1000)})
    assert ledger.reserve("front-a", [BOB], 600, T0).granted
    assert not ledger.reserve("front-b", [BOB], 600, T0 + 1).granted
    ledger.settle("front-a", [BOB], reserved=600, used=150, now=T0 + 2)  # 450 not generated come back
    grant = ledger.reserve("front-b", [BOB], 600, T0 + 3)
    assert grant == Grant(True, limit=1000, remaining=250, reset_s=57.0)


@pytest.mark.parametrize(
    ("ended", "asked", "tokens", "granted"),
    [
        (T0 + 10, T0 + 10, 1000, False),  # the same minute: 600 spent
        (T0 + 10, T0 + 10, 400, True),
        (T0 + 10, T0 + 60, 1000, True),  # the next minute: nothing spent in it
        (T0 + 61, T0 + 61, 1000, False),  # ended in the next minute: its 600 are spent there
    ],
)
def test_a_request_is_spent_in_the_window_it_ends_in(
    ended: float, asked: float, tokens: int, granted: bool
) -> None:
    ledger = Ledger({BOB: Limit(per_minute=1000)})
    assert ledger.reserve("front-a", [BOB], 600, T0).granted
    ledger.settle("front-a", [BOB], reserved=600, used=600, now=ended)
    assert ledger.reserve("front-b", [BOB], tokens, asked).granted is granted


def test_what_is_held_carries_into_the_next_window() -> None:
    ledger = Ledger({BOB: Limit(per_minute=1000)})
    assert ledger.reserve("front-a", [BOB], 600, T0 + 50).granted
    assert ledger.reserve("front-b", [BOB], 400, T0 + 60).granted  # the 600 still held: 400 free
    assert not ledger.reserve("front-b", [BOB], 1, T0 + 60).granted


def test_a_front_gone_without_settling_leaves_its_holds_spent() -> None:
    ledger = Ledger({BOB: Limit(per_minute=1000, per_day=5000)})
    assert ledger.reserve("front-a", [BOB], 700, T0).granted
    ledger.drop_holder("front-a")
    assert ledger.state([BOB], T0 + 5) == Grant(True, limit=1000, remaining=300, reset_s=55.0)
    assert ledger.state([BOB], T0 + 60).remaining == 1000  # the day's 4,300 left binds less


def test_a_changed_limit_applies_to_the_next_reservation_and_keeps_what_was_spent() -> None:
    ledger = Ledger({BOB: Limit(per_minute=1000)})
    assert ledger.reserve("front-a", [BOB], 300, T0).granted
    ledger.settle("front-a", [BOB], reserved=300, used=300, now=T0)
    ledger.configure({BOB: Limit(per_minute=400)})
    assert not ledger.reserve("front-a", [BOB], 200, T0 + 1).granted
    assert ledger.reserve("front-a", [BOB], 100, T0 + 1).granted
    ledger.configure({})  # no budget any more: nothing is kept for it
    assert ledger.reserve("front-a", [BOB], 10**6, T0 + 2) == Grant(True)


def test_a_refusal_says_when_to_come_back() -> None:
    ledger = Ledger({BOB: Limit(per_minute=100)})
    refused = ledger.reserve("front-a", [BOB], 200, T0 + 59.2)
    assert (refused.granted, refused.retry_after_s) == (False, 1)
    assert Ledger({BOB: Limit(per_day=10)}).reserve("f", [BOB], 20, T0).retry_after_s == 16 * 3600


# ---- budgets in the tenancy file
TENANCY = {
    "groups": {
        "batch": {"members": ["etl", "bob"], "tokens_per_day": 2_000_000},
        "interactive": {"members": ["alice"], "band": 1},
    },
    "users": {"bob": {"tokens_per_minute": 1000, "tokens_per_day": 50_000}},
}


@pytest.mark.parametrize(
    ("user", "keys"),
    [
        ("bob", [("user", "bob"), ("group", "batch")]),
        ("etl", [("group", "batch")]),
        ("alice", []),  # a group without a budget limits nobody
        ("anonymous", []),
    ],
)
def test_a_request_spends_from_its_users_budget_and_its_groups(user: str, keys: list[BudgetKey]) -> None:
    assert parse(TENANCY).budget_keys(user) == keys


def test_the_ledger_gets_every_declared_budget() -> None:
    assert parse(TENANCY).budgets() == {
        ("user", "bob"): Limit(per_minute=1000, per_day=50_000),
        ("group", "batch"): Limit(per_day=2_000_000),
    }


@pytest.mark.parametrize(
    ("document", "names"),
    [
        ({"users": []}, "users"),
        ({"users": {"bob": {"tokens_per_hour": 5}}}, "users.bob"),
        ({"users": {"bob": {"tokens_per_minute": 0}}}, "users.bob.tokens_per_minute"),
        ({"users": {"bob": {"tokens_per_day": 1.5}}}, "users.bob.tokens_per_day"),
        ({"users": {"bob": {"tokens_per_day": True}}}, "users.bob.tokens_per_day"),
        ({"groups": {"g": {"tokens_per_minute": "100"}}}, "groups.g.tokens_per_minute"),
    ],
)
def test_a_bad_budget_names_the_field(document: Any, names: str) -> None:
    with pytest.raises(ValueError, match=names.replace(".", r"\.")):
        parse(document)
