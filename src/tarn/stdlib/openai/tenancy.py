"""Who is who for admission and budgets: the service's tenancy file, users to groups, groups to a
priority band and a weight (docs/openai.md, "Fair share of the batch slots"), and the token budgets
of groups and users (tarn.stdlib.openai.budget).

    {"groups": {"interactive": {"members": ["alice", "carol"], "band": 1, "weight": 2},
                "batch": {"members": ["etl"], "weight": 0.5, "tokens_per_day": 2000000}},
     "users": {"bob": {"tokens_per_minute": 1000, "tokens_per_day": 50000}}}

A user in no group is a tenant of band 0 and weight 1 (``anonymous`` too: every request HAProxy
sends without a proven user). A user in several groups takes the highest band and the largest
weight among them. A request spends from its user's budget and from each of its groups' (shared
by their members); a user with none of these is not limited. The file is read again when it
changes (its mtime), so a change needs no restart; a file that does not parse keeps the last good
one and logs why.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tarn.stdlib.openai.admission import Tenant
from tarn.stdlib.openai.budget import BudgetKey, Limit

log = logging.getLogger("tarn.openai")
MAX_BAND = 9


@dataclass(frozen=True)
class Group:
    members: frozenset[str]
    band: int = 0
    weight: float = 1.0
    budget: Limit = field(default_factory=Limit)


@dataclass(frozen=True)
class Tenancy:
    groups: Mapping[str, Group] = field(default_factory=dict)
    users: Mapping[str, Limit] = field(default_factory=dict)  # each user's own budget

    def tenant(self, user: str) -> Tenant:
        mine = [group for group in self.groups.values() if user in group.members]
        if not mine:
            return Tenant(user)
        return Tenant(user, max(g.band for g in mine), max(g.weight for g in mine))

    def budgets(self) -> dict[BudgetKey, Limit]:
        """Every declared budget: the ledger's limits."""
        limited: dict[BudgetKey, Limit] = {
            ("user", name): limit for name, limit in self.users.items() if limit.limited
        }
        limited.update({("group", name): g.budget for name, g in self.groups.items() if g.budget.limited})
        return limited

    def budget_keys(self, user: str) -> list[BudgetKey]:
        """The budgets a request of ``user`` spends from: its own, then its groups' (by name)."""
        own: list[BudgetKey] = [("user", user)] if self.users.get(user, Limit()).limited else []
        return own + [
            ("group", name)
            for name, g in sorted(self.groups.items())
            if user in g.members and g.budget.limited
        ]


def parse(document: Any) -> Tenancy:
    """The tenancy file's JSON, checked: ValueError names the field and what it takes."""
    if not isinstance(document, dict) or set(document) - {"groups", "users"}:
        raise ValueError(
            'the tenancy file is {"groups": {NAME: {"members": [...], "band": N, "weight": W, '
            '"tokens_per_minute": N, "tokens_per_day": N}}, "users": {NAME: {"tokens_per_minute": N, ...}}}'
        )
    groups, users = document.get("groups", {}), document.get("users", {})
    if not isinstance(groups, dict):
        raise ValueError("groups: an object of group names")
    if not isinstance(users, dict):
        raise ValueError("users: an object of user names")
    return Tenancy(
        {str(name): _group(f"groups.{name}", spec) for name, spec in groups.items()},
        {str(name): _user(f"users.{name}", spec) for name, spec in users.items()},
    )


BUDGET_FIELDS = ("tokens_per_minute", "tokens_per_day")


def _budget(where: str, spec: dict[str, Any]) -> Limit:
    for name in BUDGET_FIELDS:
        tokens = spec.get(name)
        if tokens is not None and (not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 1):
            raise ValueError(f"{where}.{name}: a whole number of tokens, at least 1 (leave it out: no limit)")
    return Limit(spec.get("tokens_per_minute"), spec.get("tokens_per_day"))


def _user(where: str, spec: Any) -> Limit:
    if not isinstance(spec, dict) or set(spec) - set(BUDGET_FIELDS):
        raise ValueError(f"{where}: an object of {' and '.join(BUDGET_FIELDS)}")
    return _budget(where, spec)


def _group(where: str, spec: Any) -> Group:
    if not isinstance(spec, dict) or set(spec) - {"members", "band", "weight", *BUDGET_FIELDS}:
        raise ValueError(f"{where}: an object of members, band, weight, {' and '.join(BUDGET_FIELDS)}")
    members = spec.get("members", [])
    if not isinstance(members, list) or not all(isinstance(m, str) and m for m in members):
        raise ValueError(f"{where}.members: a list of user names")
    band = spec.get("band", 0)
    if not isinstance(band, int) or isinstance(band, bool) or not 0 <= band <= MAX_BAND:
        raise ValueError(f"{where}.band: an integer from 0 to {MAX_BAND} (higher goes first)")
    weight = spec.get("weight", 1)
    if not isinstance(weight, int | float) or isinstance(weight, bool) or not (0 < weight <= 1000):
        raise ValueError(f"{where}.weight: a number above 0, at most 1000")
    if not math.isfinite(weight):
        raise ValueError(f"{where}.weight: a finite number")
    return Group(frozenset(members), band, float(weight), _budget(where, spec))


class TenancyFile:
    """The tenancy file, read again when its mtime changes; None: everyone band 0, weight 1."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._mtime: int | None = None
        self._tenancy = Tenancy()
        if path is not None:
            self._tenancy = read(path)  # a bad file at start is an error: the front does not start
            self._mtime = os.stat(path).st_mtime_ns

    def current(self) -> Tenancy:
        if self.path is None:
            return self._tenancy
        try:
            mtime = os.stat(self.path).st_mtime_ns
            if mtime != self._mtime:
                self._mtime = mtime
                self._tenancy = read(self.path)
                log.info("tenancy: %s read again (%d groups)", self.path, len(self._tenancy.groups))
        except (OSError, ValueError) as exc:
            log.warning("tenancy: %s kept as it was: %s", self.path, exc)
        return self._tenancy


def read(path: str) -> Tenancy:
    with open(path, encoding="utf-8") as file:
        try:
            document = json.load(file)
        except ValueError as exc:
            raise ValueError(f"{path}: not JSON: {exc}") from exc
    try:
        return parse(document)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from exc
