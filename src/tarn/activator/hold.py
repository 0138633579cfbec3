"""The activator's request path: hold a request until an instance is ready, then pass it on.

HAProxy sends requests here only when every slot of a backend is down (the activator is the
``backup`` server of Triton's backend and of the OpenAI fronts' backend), so in steady state this
carries nothing. Where a request goes is :mod:`tarn.activator.route`'s: ``/v1/`` to an instance's
OpenAI front, anything else to its Triton. A request that arrives:

* with a ready instance known (a slot that HAProxy has not marked up yet): passed on at once;
* with none: held, and the demand reporter told (it wakes the controller); passed on as soon as
  the source lists an instance, or answered 504 with ``Retry-After`` at the hold timeout (not
  503: HAProxy's ``retry-on 503`` would hold it again, up to ``retries`` times). It counts as
  held until an instance begins its answer;
* beyond the limits (held requests, held bytes): 503 with ``Retry-After`` at once, body unread;
* ``/v1/`` while the instances listed run no OpenAI front: 404 in OpenAI's error shape at once.
  The activator's own answers to ``/v1/`` are in that shape; to anything else, plain text.

An instance that refuses the connection, or closes it without a byte of answer, is skipped for a
moment and the request tried on another (or held again): the same retries HAProxy makes
(``retry-on conn-failure empty-response``). After that the answer is the client's, whatever it
is, and it is relayed as it comes: each read passed on at once (a stream's events, for as long as
the stream lasts; the hold timeout bounds only the wait for an instance). A client that goes away
(while held, or while its answer streams) closes the instance's connection at once, which the
OpenAI front takes as a cancel. One asyncio task per connection: thousands held cost no thread each.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import itertools
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tarn.activator.messages import answer, forwarded, with_close
from tarn.activator.route import Route, is_openai, route, too_busy, waited_too_long
from tarn.haproxy.plan import Endpoint
from tarn.haproxy.sources import Instances
from tarn.stdlib.http1 import Bounds, ClientError, Request, linger, read_request
from tarn.stdlib.openai.mapping import OpenAIError, unreadable
from tarn.stdlib.openai.server import client_gone

log = logging.getLogger("tarn.activator")

HOLD_BUCKETS = (0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 120.0)
OUTCOMES = ("direct", "after_hold", "timeout", "overflow", "failed", "bad_request", "not_served", "gone")
POLL_S = 0.05  # how often a held request looks for a ready instance
SKIP_S = 1.0  # how long an instance that refused a connection is skipped
RELAY_BYTES = 64 * 1024  # the most passed on per read; a read returns whatever has arrived


@dataclass(frozen=True)
class Limits:
    max_held: int = 1024
    max_held_bytes: int = 256 * 1024 * 1024  # every request's body, held or being read (503 beyond)
    max_body_bytes: int = 64 * 1024 * 1024  # one request's (413 beyond)
    # A client has this long to send its whole request (408 after): half-sent requests must not
    # pile up (issue 48, row 4); HAProxy sends a request it has whole at once.
    read_s: float = 60.0
    max_connections: int = 4096  # at once, held ones included (503 with Retry-After beyond)
    hold_timeout_s: float = 45.0  # below HAProxy's `timeout server`, so the 504 is the activator's
    retry_after_s: int = 5
    connect_timeout_s: float = 2.0
    # The first byte of an instance's answer, once it has the request. A safety net only: HAProxy's
    # `timeout server` (50 s for /v2, 10 min for /v1) closes the client's side first, which ends it.
    answer_timeout_s: float = 3600.0


@dataclass
class Stats:
    outcomes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    hold_buckets: list[int] = field(default_factory=lambda: [0] * len(HOLD_BUCKETS))
    hold_count: int = 0
    hold_sum_s: float = 0.0
    wakes: int = 0  # times the held count rose from zero

    def held_for(self, seconds: float) -> None:
        self.hold_count += 1
        self.hold_sum_s += seconds
        for index, bound in enumerate(HOLD_BUCKETS):
            if seconds <= bound:
                self.hold_buckets[index] += 1


class RoomFull(Exception):
    """The bodies held and being read would take more than ``max_held_bytes``."""


async def _refuse(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, refusal: bytes) -> None:
    """An answer to a request not read whole, which the client can read (it may still be sending:
    a connection closed with unread data is reset, and the client would see that, not the answer)."""
    writer.write(refusal)
    await writer.drain()
    await linger(reader, writer, 1.0)


class Tried(enum.Enum):
    """How one try to pass a request on ended."""

    ANSWERED = "answered"  # the instance's answer was relayed (to its end, or until the client left)
    AGAIN = "again"  # no instance took it (none ready, refused, closed without a byte): wait, retry
    NOT_SERVED = "not_served"  # answered here: no listed instance can serve it
    FAILED = "failed"  # the instance had the request and answered nothing usable: answered here
    GONE = "gone"  # the client went away before an instance began to answer


Source = Callable[[], Instances | None]  # the instances listed now; None: not read yet
OnDemand = Callable[[int, float], None]  # (held now, seconds the oldest has waited)


class Activator:
    def __init__(
        self,
        instances: Source,
        on_demand: OnDemand,
        limits: Limits = Limits(),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._instances = instances
        self._on_demand = on_demand
        self.limits = limits
        self._clock = clock
        self._held: dict[int, tuple[float, int]] = {}  # ticket -> (since, body bytes)
        self._tickets = itertools.count()
        self._turn = itertools.count()
        self._skipped: dict[Endpoint, float] = {}  # endpoint -> until
        self._reading_bytes = 0  # bodies of requests being read
        self.connections = 0  # open now
        self.stats = Stats()

    # ---- what /metrics and the demand reporter read
    @property
    def held(self) -> int:
        return len(self._held)

    @property
    def held_bytes(self) -> int:
        return sum(size for _since, size in self._held.values())

    def oldest_s(self) -> float:
        return max((self._clock() - since for since, _size in self._held.values()), default=0.0)

    def ready_instances(self) -> int:
        return len(self._instances() or ())

    def route(self, target: str) -> Route:
        """Where ``target`` may go now: the source's instances, less the ones that just refused."""
        now = self._clock()
        self._skipped = {e: until for e, until in self._skipped.items() if until > now}
        return route(target, self._instances(), self._skipped.keys())

    # ---- one connection
    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.connections >= self.limits.max_connections:
            self.stats.outcomes["overflow"] += 1
            with contextlib.suppress(ConnectionError):
                await _refuse(reader, writer, self._busy(None, f"{self.connections} connections are open"))
            writer.close()
            return
        self.connections += 1
        try:
            outcome = await self._exchange(reader, writer)
            self.stats.outcomes[outcome] += 1
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away; nothing to answer
        finally:
            self.connections -= 1
            writer.close()

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> str:
        taken = 0

        def charge(size: int) -> None:  # the room is shared by every body held or being read
            nonlocal taken
            if self.held_bytes + self._reading_bytes + size > self.limits.max_held_bytes:
                raise RoomFull(f"{self.limits.max_held_bytes} bytes of held requests")
            self._reading_bytes += size
            taken += size

        try:
            bounds = Bounds(self.limits.max_body_bytes, self.limits.read_s)
            request = await read_request(reader, writer, bounds, charge)
        except RoomFull as exc:
            await _refuse(reader, writer, self._busy(None, f"the room for held requests is full ({exc})"))
            return "overflow"
        except ClientError as exc:
            if exc.target is not None and is_openai(exc.target):  # an OpenAI client reads its shape
                refusal = self._here(unreadable(exc.status, str(exc)))
            else:
                refusal = answer(exc.status, f"activator: {exc}")
            await _refuse(reader, writer, refusal)
            return "bad_request"
        finally:
            self._reading_bytes -= taken
        if request is None:
            return "bad_request"
        # The request is read whole: from here the client's side ending means it went away.
        gone = asyncio.ensure_future(client_gone(reader))
        try:
            return await self._serve(request, writer, gone)
        finally:
            gone.cancel()

    async def _serve(self, request: Request, writer: asyncio.StreamWriter, gone: asyncio.Future[None]) -> str:
        tried = await self._try(request, writer, gone, _nothing)
        if tried is not Tried.AGAIN:
            return "direct" if tried is Tried.ANSWERED else tried.value
        if (
            self.held >= self.limits.max_held
            or self.held_bytes + len(request.body) > self.limits.max_held_bytes
        ):
            why = f"{self.held} requests are held already, the most allowed"
            writer.write(self._busy(request.target, why))
            return "overflow"
        return await self._hold(request, writer, gone)

    async def _hold(self, request: Request, writer: asyncio.StreamWriter, gone: asyncio.Future[None]) -> str:
        """Held from its arrival until an instance begins its answer: the demand the controller
        sees must not drop while an instance that just registered is tried, nor stay up for the
        minutes a stream lasts."""
        ticket, since = next(self._tickets), self._clock()
        self._held[ticket] = (since, len(request.body))
        if len(self._held) == 1:
            self.stats.wakes += 1
        self._report()

        def release() -> None:
            if self._held.pop(ticket, None) is not None:
                self.stats.held_for(self._clock() - since)
                self._report()

        try:
            deadline = since + self.limits.hold_timeout_s
            while not gone.done():
                tried = await self._try(request, writer, gone, release)
                if tried is not Tried.AGAIN:
                    return "after_hold" if tried is Tried.ANSWERED else tried.value
                left = deadline - self._clock()
                if left <= 0:
                    break
                await asyncio.wait({gone}, timeout=min(POLL_S, left))
            if gone.done():
                return "gone"
            limit = self.limits.hold_timeout_s
            if is_openai(request.target):
                writer.write(self._here(waited_too_long(limit), retry=True))
            else:
                why = f"no Triton instance became ready within {limit:g} s"
                writer.write(self._busy(None, why, 504))
            return "timeout"
        finally:
            release()

    def _report(self) -> None:
        self._on_demand(self.held, self.oldest_s())

    def _busy(self, target: str | None, why: str, status: int = 503) -> bytes:
        if target is not None and is_openai(target):
            return self._here(too_busy(why), retry=True)
        retry = str(self.limits.retry_after_s)
        return answer(status, f"activator: {why}; retry later", {"Retry-After": retry})

    def _here(self, error: OpenAIError, retry: bool = False) -> bytes:
        """An answer of the activator's own to an OpenAI client, in OpenAI's error shape."""
        extra = {"Retry-After": str(self.limits.retry_after_s)} if retry else {}
        body = json.dumps(error.body(), separators=(",", ":"))
        return answer(error.status, body, extra, "application/json")

    async def _try(
        self,
        request: Request,
        writer: asyncio.StreamWriter,
        gone: asyncio.Future[None],
        answered: Callable[[], None],
    ) -> Tried:
        """One try on the next instance that may take the request (``answered``: called at the
        first byte of its answer)."""
        found = self.route(request.target)
        if found.refusal is not None:
            writer.write(self._here(found.refusal))
            return Tried.NOT_SERVED
        if not found.endpoints:
            return Tried.AGAIN
        endpoint = found.endpoints[next(self._turn) % len(found.endpoints)]
        return await self._pass_on(endpoint, request, writer, gone, answered)

    async def _pass_on(
        self,
        endpoint: Endpoint,
        request: Request,
        writer: asyncio.StreamWriter,
        gone: asyncio.Future[None],
        answered: Callable[[], None],
    ) -> Tried:
        """Send the request to ``endpoint`` and relay its answer as it comes."""
        limits = self.limits
        try:
            upstream_reader, upstream = await asyncio.wait_for(
                asyncio.open_connection(endpoint.ip, endpoint.port), limits.connect_timeout_s
            )
        except (OSError, TimeoutError):
            self._skip(endpoint, "refused the connection")
            return Tried.AGAIN

        def cut(_gone: object) -> None:
            upstream.close()  # the instance sees its client go at once: a generation is cancelled

        gone.add_done_callback(cut)
        try:
            try:
                upstream.write(forwarded(request, f"{endpoint.ip}:{endpoint.port}"))
                await upstream.drain()
                head = await asyncio.wait_for(upstream_reader.readuntil(b"\r\n\r\n"), limits.answer_timeout_s)
            except TimeoutError:
                why = f"the instance did not answer within {limits.answer_timeout_s:g} s"
                writer.write(answer(504, f"activator: {why}"))
                return Tried.FAILED
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
                if gone.done():
                    return Tried.GONE
                if isinstance(exc, asyncio.LimitOverrunError) or exc.partial:
                    writer.write(answer(502, "activator: the instance's answer broke off"))
                    return Tried.FAILED
                self._skip(endpoint, "closed without an answer")
                return Tried.AGAIN
            except OSError:
                if gone.done():
                    return Tried.GONE
                self._skip(endpoint, "closed without an answer")
                return Tried.AGAIN
            answered()
            return await self._relay(head, upstream_reader, writer)
        finally:
            gone.remove_done_callback(cut)
            upstream.close()

    async def _relay(
        self, head: bytes, upstream: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> Tried:
        """The instance's answer to the client, each read passed on at once and drained: a
        stream's events arrive as they are sent, for as long as the stream lasts."""
        try:
            writer.write(with_close(head[:-4]))
            await writer.drain()
            while chunk := await upstream.read(RELAY_BYTES):
                writer.write(chunk)
                await writer.drain()
        except (ConnectionError, OSError):
            pass  # the client's side broke; the caller closes the instance's
        # Answered, even when the client left halfway: `gone` counts requests that left before
        # an instance began to answer (a client that read a whole answer may close first).
        return Tried.ANSWERED

    def _skip(self, endpoint: Endpoint, why: str) -> None:
        log.info("instance %s %s: skipped for %g s", endpoint, why, SKIP_S)
        self._skipped[endpoint] = self._clock() + SKIP_S


def _nothing() -> None:
    pass
