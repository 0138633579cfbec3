"""Which Runtime API commands make a backend's slots serve the wanted instances. Pure functions.

HAProxy cannot add servers to a running backend from its configuration, so the backend holds
fixed placeholder slots (``triton-1..N``) and the sync points them at instances:

* a slot that already points at a wanted instance keeps it (made READY again if it was drained
  or in maintenance: the instance came back);
* a new instance takes a free slot (one in maintenance): its address, then READY;
* a slot whose instance is gone is drained first (no new requests, running ones finish), and
  put in maintenance once it holds no session; only then is it free again;
* with more instances than free slots, the ones that do not fit are reported as overflow.

Nothing changed means an empty plan: the sync may run this every second without churn.
"""

from __future__ import annotations

import enum
import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


class AdminState(enum.Enum):
    """A server's administrative state, as ``set server … state`` names it."""

    READY = "ready"
    DRAIN = "drain"
    MAINT = "maint"


@dataclass(frozen=True, order=True)
class Endpoint:
    """One Triton instance's HTTP address: an IP (``set server … addr`` takes no host names)."""

    ip: str
    port: int

    def __str__(self) -> str:
        return f"[{self.ip}]:{self.port}" if ":" in self.ip else f"{self.ip}:{self.port}"


@dataclass(frozen=True)
class Slot:
    """One placeholder server of the backend, as HAProxy reports it now."""

    name: str
    endpoint: Endpoint
    admin: AdminState
    sessions: int = 0


@dataclass(frozen=True)
class SetAddress:
    server: str
    endpoint: Endpoint
    reason: str


@dataclass(frozen=True)
class SetState:
    server: str
    state: AdminState
    reason: str


Command = SetAddress | SetState


@dataclass(frozen=True)
class Plan:
    commands: tuple[Command, ...] = ()
    overflow: tuple[Endpoint, ...] = ()  # wanted instances no free slot could take


def parse_endpoint(text: str) -> Endpoint:
    """``ip:port`` or ``[ipv6]:port`` as an Endpoint; ValueError when it is not one."""
    host, sep, port = text.strip().rpartition(":")
    if not sep:
        raise ValueError(f"{text!r} is not ip:port")
    return endpoint(host.removeprefix("[").removesuffix("]"), port)


def endpoint(ip: object, port: object) -> Endpoint:
    """An Endpoint from untrusted values (a znode, an HTTP reply); ValueError when they are not valid."""
    address = ipaddress.ip_address(str(ip))
    number = int(str(port))
    if not 0 < number < 65536:
        raise ValueError(f"port {number} is not between 1 and 65535")
    return Endpoint(str(address), number)


# A backend keeps the slot that disturbs least: one serving already, then draining, then idle.
_CLAIM_ORDER = {AdminState.READY: 0, AdminState.DRAIN: 1, AdminState.MAINT: 2}


def claimed_slots(slots: Sequence[Slot], wanted: frozenset[Endpoint]) -> dict[str, Endpoint]:
    """Slot name -> wanted instance, for the slots that already point at one (one slot each)."""
    claims: dict[str, Endpoint] = {}
    taken: set[Endpoint] = set()
    ranked = sorted(enumerate(slots), key=lambda pair: (_CLAIM_ORDER[pair[1].admin], pair[0]))
    for _index, slot in ranked:
        if slot.endpoint in wanted and slot.endpoint not in taken:
            claims[slot.name] = slot.endpoint
            taken.add(slot.endpoint)
    return claims


def keep(slot: Slot) -> list[Command]:
    """A slot that points at a wanted instance: make sure it takes requests."""
    if slot.admin is AdminState.READY:
        return []
    return [SetState(slot.name, AdminState.READY, f"instance {slot.endpoint} is wanted again")]


def release(slot: Slot) -> list[Command]:
    """A slot whose instance is not wanted: drain it, then put it in maintenance once idle."""
    if slot.admin is AdminState.READY:
        return [SetState(slot.name, AdminState.DRAIN, f"instance {slot.endpoint} is gone")]
    if slot.admin is AdminState.DRAIN and slot.sessions == 0:
        return [SetState(slot.name, AdminState.MAINT, f"instance {slot.endpoint} is drained")]
    return []


def fill(slot: Slot, wanted: Endpoint) -> list[Command]:
    """A free slot takes a new instance."""
    return [
        SetAddress(slot.name, wanted, f"new instance {wanted}"),
        SetState(slot.name, AdminState.READY, f"new instance {wanted}"),
    ]


def plan(slots: Sequence[Slot], wanted: Iterable[Endpoint]) -> Plan:
    """The commands that make ``slots`` serve ``wanted``; an empty plan when they already do."""
    wanted_set = frozenset(wanted)
    claims = claimed_slots(slots, wanted_set)
    commands: list[Command] = []
    for slot in slots:
        commands += keep(slot) if slot.name in claims else release(slot)
    free = [s for s in slots if s.name not in claims and s.admin is AdminState.MAINT]
    missing = sorted(wanted_set - set(claims.values()))
    for slot, new in zip(free, missing, strict=False):
        commands += fill(slot, new)
    return Plan(tuple(commands), tuple(missing[len(free) :]))
