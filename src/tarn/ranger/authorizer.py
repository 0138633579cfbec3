"""The decision point the controller's API asks: may this user infer, read metadata of, or list
this model? Answered from the policies the refresher holds (tarn.ranger.state.verdict), failing
closed. Counts the decisions for /metrics (by access type and outcome: never users or models) and,
with --ranger-audit, queues an audit event for each decision Ranger would audit.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from tarn.ranger.audit import Request
from tarn.ranger.audit_log import AuditLog
from tarn.ranger.engine import Verdict
from tarn.ranger.state import NOTHING_LOADED, Health, PolicyState, health, service_type_id, verdict

log = logging.getLogger("tarn.ranger")

ACCESS_TYPES = ("infer", "metadata", "list")  # the triton service def's


class Authorizer:
    def __init__(
        self,
        state: Callable[[], PolicyState],
        wall: Callable[[], float] = time.time,
        audit: AuditLog | None = None,
    ) -> None:
        self._state = state
        self._wall = wall
        self.audit = audit
        self._lock = threading.Lock()
        self._decisions: dict[tuple[str, str], int] = {}

    def verdict(self, user: str | None, model: str, access: str, client_ip: str | None = None) -> Verdict:
        """Ranger's answer (allowed, audited, deciding policy) for ``user`` on ``model``."""
        state = self._state()
        try:
            found = verdict(state, user, model, access)
        except Exception:  # a bug or a policy the engine chokes on denies; it never opens
            log.exception("Ranger evaluation failed: denied")
            found = NOTHING_LOADED
        with self._lock:
            key = (access, "allowed" if found.allowed else "denied")
            self._decisions[key] = self._decisions.get(key, 0) + 1
        # Ranger's plugin audits only what its engine decided: no engine (nothing loaded) or no
        # user gives no result to audit.
        if self.audit is not None and found.audited and state.engine is not None and user:
            self.audit.log(Request(user, model, access, client_ip), found, service_type_id(state))
        return found

    def allowed(self, user: str | None, model: str, access: str, client_ip: str | None = None) -> bool:
        return self.verdict(user, model, access, client_ip).allowed

    def health(self) -> Health:
        return health(self._state(), self._wall())

    @property
    def state(self) -> PolicyState:
        return self._state()

    def decisions(self) -> dict[tuple[str, str], int]:
        """(access, allowed|denied) → count."""
        with self._lock:
            return dict(self._decisions)
