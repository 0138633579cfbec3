"""Who is who for admission (issue 49): the service's tenancy file, users to groups, groups to a
priority band and a weight (docs/openai.md, "Fair share of the batch slots").

    {"groups": {"interactive": {"members": ["alice", "carol"], "band": 1, "weight": 2},
                "batch": {"members": ["etl"], "weight": 0.5}}}

A user in no group is a tenant of band 0 and weight 1 (``anonymous`` too: every request HAProxy
sends without a proven user). A user in several groups takes the highest band and the largest
weight among them. The file is read again when it changes (its mtime), so a change needs no
restart; a file that does not parse keeps the last good one and logs why.
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

log = logging.getLogger("tarn.openai")
MAX_BAND = 9


@dataclass(frozen=True)
class Group:
    members: frozenset[str]
    band: int = 0
    weight: float = 1.0


@dataclass(frozen=True)
class Tenancy:
    groups: Mapping[str, Group] = field(default_factory=dict)

    def tenant(self, user: str) -> Tenant:
        mine = [group for group in self.groups.values() if user in group.members]
        if not mine:
            return Tenant(user)
        return Tenant(user, max(g.band for g in mine), max(g.weight for g in mine))


def parse(document: Any) -> Tenancy:
    """The tenancy file's JSON, checked: ValueError names the field and what it takes."""
    if not isinstance(document, dict) or set(document) - {"groups"}:
        raise ValueError('the tenancy file is {"groups": {NAME: {"members": [...], "band": N, "weight": W}}}')
    groups = document.get("groups", {})
    if not isinstance(groups, dict):
        raise ValueError("groups: an object of group names")
    return Tenancy({str(name): _group(f"groups.{name}", spec) for name, spec in groups.items()})


def _group(where: str, spec: Any) -> Group:
    if not isinstance(spec, dict) or set(spec) - {"members", "band", "weight"}:
        raise ValueError(f"{where}: an object of members, band and weight")
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
    return Group(frozenset(members), band, float(weight))


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
