"""Admission in front of a model's batch slots (issue 49, item 1): which waiting request starts next.

An LLM server generates at most a fixed number of sequences at once (vLLM's ``max_num_seqs``,
tiny_lm's ``max_concurrent_generations``). Left to the server, those slots go first come, first
served, and one tenant's burst queues everyone else behind it. So each front admits at most
``slots`` generations of a model at once and keeps the rest here, in three rules:

1. **Priority bands**: a request of a higher band starts before any of a lower one.
2. **Fair share of the slots**: each tenant *active* (running, waiting, or seen within
   ``active_window_s``) is owed ``slots * weight / total weight`` of them, at least one (its
   *guarantee*). A tenant at or past its guarantee may take a free slot only while one more stays
   free for each other active tenant below its own: a quiet client finds a slot free at once
   instead of waiting for one of the flooder's generations to end. Slots nobody active is owed
   are used by whoever waits (work-conserving otherwise).
3. **Weighted fair queuing** among those that may start: the lowest virtual start tag first
   (start-time fair queuing: a tenant's tag is the later of the system's virtual time and the
   finish of its last admitted request; each request costs ``1 / weight``), so a tenant back from
   idle does not cash in credit for the time it sent nothing.

Bounds: ``max_waiting`` requests in all (beyond: a 503, the front is full) and
``max_waiting_per_tenant`` per tenant (beyond: a 429, that tenant sends too much); tenants idle
past the window are forgotten, so the state is bounded by what runs and waits. A request
cancelled while it waits leaves without a trace: tags are given at admission.

Everything here is pure and synchronous; the server (tarn.stdlib.openai.server) awaits each
ticket's admission (``on_start``) and calls :meth:`Admission.leave` when a request ends.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

Policy = Literal["fair", "fifo"]
POLICIES: tuple[Policy, ...] = ("fair", "fifo")


@dataclass(frozen=True)
class Tenant:
    """Who a request is charged to: a user (Knox's authenticated one; HAProxy's are one tenant,
    anonymous), its priority band (higher first) and its weight within the band."""

    name: str
    band: int = 0
    weight: float = 1.0


@dataclass(frozen=True)
class Limits:
    slots: int  # generations of one model at once on this front
    max_waiting: int = 256
    max_waiting_per_tenant: int = 64
    active_window_s: float = 10.0
    policy: Policy = "fair"  # "fifo": first come, first served (the bench's baseline)


class Refused(Exception):
    """No room to wait: ``status`` 429 (this tenant's queue is full) or 503 (the front's is)."""

    def __init__(self, status: int, message: str, retry_after_s: int = 1) -> None:
        super().__init__(message)
        self.status, self.message, self.retry_after_s = status, message, retry_after_s


@dataclass(eq=False)
class Ticket:
    """One request's place: waiting until ``admitted``; then it holds a slot until done."""

    tenant: Tenant
    arrived: float
    order: int  # arrival order, the last tie-break
    admitted: bool = False


@dataclass
class TenantState:
    tenant: Tenant
    last_seen: float
    running: int = 0
    waiting: deque[Ticket] = field(default_factory=deque)
    finish: float = 0.0  # the virtual finish tag of its last admitted request


# ---- the decisions (pure functions of the tenants' state)
def guarantees(active: Mapping[str, float], slots: int) -> dict[str, int]:
    """Each active tenant's guaranteed slots from its weight: its share, rounded down, at least 1."""
    total = sum(active.values())
    return {name: max(1, math.floor(slots * weight / total + 1e-9)) for name, weight in active.items()}


def reserved_for_others(name: str, running: Mapping[str, int], owed: Mapping[str, int]) -> int:
    """Free slots kept for the other active tenants still below their guarantee: one each."""
    return sum(1 for other, guarantee in owed.items() if other != name and running.get(other, 0) < guarantee)


def may_start(name: str, free: int, running: Mapping[str, int], owed: Mapping[str, int]) -> bool:
    """Whether ``name``'s next request may take one of ``free`` slots now."""
    if free <= 0:
        return False
    if running.get(name, 0) < owed.get(name, 1):
        return True
    return free > reserved_for_others(name, running, owed)


def start_tag(system_virtual: float, last_finish: float) -> float:
    """Start-time fair queuing: a tenant back from idle starts at the system's virtual time."""
    return max(system_virtual, last_finish)


class Admission:
    """One model's slots on one front, and who waits for them."""

    def __init__(
        self, limits: Limits, clock: Callable[[], float], on_start: Callable[[Ticket], None] = lambda _t: None
    ) -> None:
        """``on_start`` is told of each ticket as it is admitted (the server wakes its request)."""
        if limits.slots < 1:
            raise ValueError("admission needs at least one slot")
        self.limits, self._clock, self._on_start = limits, clock, on_start
        self._tenants: dict[str, TenantState] = {}
        self._order = itertools.count()
        self._virtual = 0.0
        self.running = 0
        self.waiting = 0

    # ---- events
    def arrive(self, tenant: Tenant) -> Ticket:
        """A request: admitted at once when it may start, else queued; Refused when no room."""
        now = self._clock()
        self._forget_idle(now)
        state = self._tenants.get(tenant.name)
        if state is None:
            state = self._tenants[tenant.name] = TenantState(tenant, now)
        state.tenant, state.last_seen = tenant, now  # the mapping may have changed its band or weight
        if len(state.waiting) >= self.limits.max_waiting_per_tenant:
            raise Refused(
                429, f"{tenant.name} has {len(state.waiting)} requests waiting for this model already"
            )
        if self.waiting >= self.limits.max_waiting:
            raise Refused(503, f"{self.waiting} requests are waiting for this model on this instance")
        ticket = Ticket(tenant, now, next(self._order))
        state.waiting.append(ticket)
        self.waiting += 1
        self._admit()
        return ticket

    def leave(self, ticket: Ticket) -> list[Ticket]:
        """The request is over: it frees its slot (admitted) or its place (waiting: a cancel before
        it started, which costs its tenant nothing). Returns the tickets admitted in its stead."""
        now = self._clock()
        state = self._tenants.get(ticket.tenant.name)
        if state is None:
            return []
        state.last_seen = now
        if ticket.admitted:
            ticket.admitted = False
            state.running -= 1
            self.running -= 1
        elif ticket in state.waiting:
            state.waiting.remove(ticket)
            self.waiting -= 1
        self._forget_idle(now)
        return self._admit()

    # ---- what the metrics show
    def waiting_by_tenant(self) -> dict[str, int]:
        return {name: len(state.waiting) for name, state in self._tenants.items() if state.waiting}

    # ---- inside
    def _admit(self) -> list[Ticket]:
        admitted = []
        while (ticket := self._next()) is not None:
            state = self._tenants[ticket.tenant.name]
            state.waiting.popleft()
            tag = start_tag(self._virtual, state.finish)
            state.finish = tag + 1.0 / max(ticket.tenant.weight, 1e-6)
            self._virtual = tag
            state.running += 1
            self.running += 1
            self.waiting -= 1
            ticket.admitted = True
            admitted.append(ticket)
            self._on_start(ticket)
        return admitted

    def _next(self) -> Ticket | None:
        free = self.limits.slots - self.running
        heads = [state for state in self._tenants.values() if state.waiting]
        if free <= 0 or not heads:
            return None
        if self.limits.policy == "fifo":
            return min((state.waiting[0] for state in heads), key=lambda t: t.order)
        running = {name: state.running for name, state in self._tenants.items()}
        owed = guarantees({name: s.tenant.weight for name, s in self._tenants.items()}, self.limits.slots)
        return pick(
            ((s.waiting[0], s.finish) for s in heads if may_start(s.tenant.name, free, running, owed)),
            self._virtual,
        )

    def _forget_idle(self, now: float) -> None:
        """Tenants with nothing running or waiting, unseen for the window, are no longer active."""
        window = self.limits.active_window_s
        for name in [n for n, s in self._tenants.items() if not s.running and not s.waiting]:
            if now - self._tenants[name].last_seen > window:
                del self._tenants[name]


def pick(candidates: Iterable[tuple[Ticket, float]], system_virtual: float) -> Ticket | None:
    """The next to start among each eligible tenant's first waiting ticket (with its tenant's last
    finish tag): highest band, then lowest start tag, then first arrived."""
    best: tuple[float, float, int] | None = None
    chosen = None
    for ticket, finish in candidates:
        key = (-ticket.tenant.band, start_tag(system_virtual, finish), ticket.order)
        if best is None or key < best:
            best, chosen = key, ticket
    return chosen
