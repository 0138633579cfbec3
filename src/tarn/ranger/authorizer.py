"""The decision point the controller's API asks: may this user infer, read metadata of, or list
this model? Answered from the policies the refresher holds (tarn.ranger.state.verdict), failing
closed. Counts the decisions for /metrics (by access type and outcome: never users or models).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from tarn.ranger.engine import Verdict
from tarn.ranger.state import NOTHING_LOADED, Health, PolicyState, health, verdict

log = logging.getLogger("tarn.ranger")

ACCESS_TYPES = ("infer", "metadata", "list")  # the triton service def's


class Authorizer:
    def __init__(self, state: Callable[[], PolicyState], wall: Callable[[], float] = time.time) -> None:
        self._state = state
        self._wall = wall
        self._lock = threading.Lock()
        self._decisions: dict[tuple[str, str], int] = {}

    def verdict(self, user: str | None, model: str, access: str) -> Verdict:
        """Ranger's answer (allowed, audited, deciding policy) for ``user`` on ``model``."""
        try:
            found = verdict(self._state(), user, model, access)
        except Exception:  # a bug or a policy the engine chokes on denies; it never opens
            log.exception("Ranger evaluation failed: denied")
            found = NOTHING_LOADED
        with self._lock:
            key = (access, "allowed" if found.allowed else "denied")
            self._decisions[key] = self._decisions.get(key, 0) + 1
        return found

    def allowed(self, user: str | None, model: str, access: str) -> bool:
        return self.verdict(user, model, access).allowed

    def health(self) -> Health:
        return health(self._state(), self._wall())

    @property
    def state(self) -> PolicyState:
        return self._state()

    def decisions(self) -> dict[tuple[str, str], int]:
        """(access, allowed|denied) → count."""
        with self._lock:
            return dict(self._decisions)
