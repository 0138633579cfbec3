"""Token budgets (tenancy, item 2 of docs/openai.md's plan): how many tokens a user or a group may
spend per minute and per UTC day, kept once for a whole service so that its fronts together never
spend past a budget.

The ledger is the controller's: per budget and window, the tokens *spent* (requests that ended)
and the tokens *held* by fronts (requests under way, each holding what it reserved). A request
reserves, before it starts, its prompt's estimate plus its ``max_tokens`` from every budget that
applies to its user (its own and each of its groups'), all or none; when it ends the front settles
what it used and the rest is free again. A window that ends starts again from nothing spent; what
is still held carries into the new one, so no window is charged less than its requests could use.

The bound: at each reservation, spent + held <= limit in every window of every budget involved,
and a request cannot generate past its ``max_tokens``; so the only way past a budget is a prompt
that Triton counts longer than its estimate, by that difference (the front's estimate is an upper
bound for byte-level tokenizers: docs/openai.md). A front that goes away without settling leaves
its holds counted as spent (:meth:`Ledger.drop_holder`): it may have generated them.

Everything here is pure and synchronous, with the time passed in.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

Window = Literal["minute", "day"]
WINDOW_S: Mapping[Window, int] = {"minute": 60, "day": 86_400}
BudgetKey = tuple[Literal["user", "group"], str]


@dataclass(frozen=True)
class Limit:
    """Tokens (prompt and completion) per window; None: no limit in that window."""

    per_minute: int | None = None
    per_day: int | None = None

    def of(self, window: Window) -> int | None:
        return self.per_minute if window == "minute" else self.per_day

    @property
    def limited(self) -> bool:
        return self.per_minute is not None or self.per_day is not None


@dataclass(frozen=True)
class Grant:
    """A reservation's answer, with what OpenAI's ``x-ratelimit-*-tokens`` headers say: the limit,
    the remaining tokens and the time to reset of the tightest window involved (the one with the
    fewest remaining). Refused: ``retry_after_s`` is when that window starts again."""

    granted: bool
    limit: int | None = None  # None: no budget applies
    remaining: int | None = None
    reset_s: float = 0.0

    @property
    def retry_after_s(self) -> int:
        return max(1, math.ceil(self.reset_s))


@dataclass
class Account:
    start: float  # the window's start, epoch seconds
    spent: int = 0
    held: dict[str, int] = field(default_factory=dict)  # holder (a front) -> tokens reserved

    def free(self, limit: int) -> int:
        return limit - self.spent - sum(self.held.values())


def window_start(now: float, window: Window) -> float:
    """The start of the window ``now`` falls in: the minute, or the UTC day (epoch-aligned)."""
    length = WINDOW_S[window]
    return float(math.floor(now / length) * length)


Involved = tuple[Window, Account, int]  # a budget's window, its account, its limit


class Ledger:
    """The accounts of a service's budgets (the controller's); fronts are holders by name."""

    def __init__(self, limits: Mapping[BudgetKey, Limit] | None = None) -> None:
        self.limits: dict[BudgetKey, Limit] = dict(limits or {})
        self._accounts: dict[tuple[BudgetKey, Window], Account] = {}

    def configure(self, limits: Mapping[BudgetKey, Limit]) -> None:
        """New limits (a changed tenancy file) apply from the next reservation; what was spent and
        held stays; a budget no longer declared is forgotten."""
        self.limits = dict(limits)
        for key, window in list(self._accounts):
            if self.limits.get(key, Limit()).of(window) is None:
                del self._accounts[(key, window)]

    def reserve(self, holder: str, keys: Iterable[BudgetKey], tokens: int, now: float) -> Grant:
        """Hold ``tokens`` in every limited window of ``keys`` for ``holder``, or in none."""
        involved = self._involved(keys, now)
        if not involved:
            return Grant(True)
        window, account, limit = min(involved, key=lambda item: item[1].free(item[2]))
        reset_s = account.start + WINDOW_S[window] - now
        if any(acc.free(lim) < tokens for _window, acc, lim in involved):
            return Grant(False, limit, max(0, account.free(limit)), reset_s)
        if tokens > 0:
            for _window, acc, _limit in involved:
                acc.held[holder] = acc.held.get(holder, 0) + tokens
        return Grant(True, limit, max(0, account.free(limit)), reset_s)

    def settle(self, holder: str, keys: Iterable[BudgetKey], reserved: int, used: int, now: float) -> None:
        """A request ended: ``used`` of its ``reserved`` tokens are spent, the rest is free."""
        for _window, account, _limit in self._involved(keys, now):
            left = account.held.get(holder, 0) - reserved
            if left > 0:
                account.held[holder] = left
            else:
                account.held.pop(holder, None)
            account.spent += used

    def drop_holder(self, holder: str) -> None:
        """A front gone without settling: what it held counts as spent."""
        for account in self._accounts.values():
            account.spent += account.held.pop(holder, 0)

    def state(self, keys: Iterable[BudgetKey], now: float) -> Grant:
        """The headers' view without reserving: the tightest window's limit, remaining, reset."""
        return self.reserve("", keys, 0, now)

    def _involved(self, keys: Iterable[BudgetKey], now: float) -> list[Involved]:
        """The accounts of ``keys``' limited windows, each rolled to the window ``now`` is in."""
        involved: list[Involved] = []
        for key in dict.fromkeys(keys):
            for window in WINDOW_S:
                limit = self.limits.get(key, Limit()).of(window)
                if limit is None:
                    continue
                start = window_start(now, window)
                account = self._accounts.get((key, window))
                if account is None:
                    account = self._accounts[(key, window)] = Account(start)
                elif account.start < start:  # a new window: nothing spent yet; holds carry over
                    account.start, account.spent = start, 0
                involved.append((window, account, limit))
        return involved
