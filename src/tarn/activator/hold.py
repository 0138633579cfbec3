"""The activator's request path: hold a request until an instance is ready, then pass it on.

HAProxy sends requests here only when every Triton slot is down (the activator is the backend's
``backup`` server), so in steady state this carries nothing. A request that arrives:

* with a ready instance known (a slot that HAProxy has not marked up yet): passed on at once;
* with none: held, and the demand reporter told (it wakes the controller); passed on as soon as
  the source lists an instance, or answered 504 with ``Retry-After`` at the hold timeout (not
  503: HAProxy's ``retry-on 503`` would hold it again, up to ``retries`` times). It counts as
  held until it is answered;
* beyond the limits (held requests, held bytes): 503 with ``Retry-After`` at once, body unread.

An instance that refuses the connection, or closes it without a byte of answer, is skipped for a
moment and the request tried on another (or held again): the same retries HAProxy makes
(``retry-on conn-failure empty-response``). After the first byte of an answer, the answer is the
client's, whatever it is. One asyncio task per connection: thousands held cost no thread each.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tarn.activator.messages import BadRequest, Request, TooLarge, answer, read_request, with_close
from tarn.haproxy.plan import Endpoint

log = logging.getLogger("tarn.activator")

HOLD_BUCKETS = (0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 120.0)
OUTCOMES = ("direct", "after_hold", "timeout", "overflow", "failed", "bad_request")
POLL_S = 0.05  # how often a held request looks for a ready instance
SKIP_S = 1.0  # how long an instance that refused a connection is skipped


@dataclass(frozen=True)
class Limits:
    max_held: int = 1024
    max_held_bytes: int = 256 * 1024 * 1024
    hold_timeout_s: float = 45.0  # below HAProxy's `timeout server`, so the 504 is the activator's
    retry_after_s: int = 5
    connect_timeout_s: float = 2.0
    answer_timeout_s: float = 300.0  # first byte of an instance's answer


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


Endpoints = Callable[[], frozenset[Endpoint] | None]
OnDemand = Callable[[int, float], None]  # (held now, seconds the oldest has waited)


class Activator:
    def __init__(
        self,
        endpoints: Endpoints,
        on_demand: OnDemand,
        limits: Limits = Limits(),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._endpoints = endpoints
        self._on_demand = on_demand
        self.limits = limits
        self._clock = clock
        self._held: dict[int, tuple[float, int]] = {}  # ticket -> (since, body bytes)
        self._tickets = itertools.count()
        self._turn = itertools.count()
        self._skipped: dict[Endpoint, float] = {}  # endpoint -> until
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

    def ready(self) -> list[Endpoint]:
        """The instances to try now: the source's, less the ones that just refused."""
        now = self._clock()
        self._skipped = {e: until for e, until in self._skipped.items() if until > now}
        return sorted((self._endpoints() or frozenset()) - set(self._skipped))

    # ---- one connection
    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            outcome = await self._exchange(reader, writer)
            self.stats.outcomes[outcome] += 1
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away; nothing to answer
        finally:
            writer.close()

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> str:
        try:
            request = await read_request(reader, self.limits.max_held_bytes - self.held_bytes)
        except TooLarge as exc:
            writer.write(self._busy(f"the activator's room for held requests is full ({exc})"))
            return "overflow"
        except BadRequest as exc:
            writer.write(answer(400, "Bad Request", f"activator: {exc}"))
            return "bad_request"
        if request is None:
            return "bad_request"
        if self.ready() and await self._pass_on(request, writer):
            return "direct"
        if (
            self.held >= self.limits.max_held
            or self.held_bytes + len(request.body) > self.limits.max_held_bytes
        ):
            writer.write(self._busy(f"{self.held} requests are held already, the most allowed"))
            return "overflow"
        return await self._hold(request, writer)

    async def _hold(self, request: Request, writer: asyncio.StreamWriter) -> str:
        """Held from its arrival until it is answered, passing-on included: the demand the
        controller sees must not drop while an instance that just registered is tried."""
        ticket, since = next(self._tickets), self._clock()
        self._held[ticket] = (since, len(request.body))
        if len(self._held) == 1:
            self.stats.wakes += 1
        self._report()
        try:
            deadline = since + self.limits.hold_timeout_s
            while self._clock() < deadline:
                if self.ready() and await self._pass_on(request, writer):
                    return "after_hold"
                await asyncio.sleep(POLL_S)
            why = f"no Triton instance became ready within {self.limits.hold_timeout_s:g} s"
            writer.write(self._busy(why, 504, "Gateway Timeout"))
            return "timeout"
        finally:
            self._held.pop(ticket, None)
            self.stats.held_for(self._clock() - since)
            self._report()

    def _report(self) -> None:
        self._on_demand(self.held, self.oldest_s())

    def _busy(self, why: str, status: int = 503, reason: str = "Service Unavailable") -> bytes:
        retry = str(self.limits.retry_after_s)
        return answer(status, reason, f"activator: {why}; retry later", {"Retry-After": retry})

    async def _pass_on(self, request: Request, writer: asyncio.StreamWriter) -> bool:
        """Send the request to the next ready instance and relay its answer. False when the
        instance never answered (refused, or closed without a byte): the request may go elsewhere."""
        ready = self.ready()
        if not ready:
            return False
        endpoint = ready[next(self._turn) % len(ready)]
        limits = self.limits
        try:
            upstream_reader, upstream = await asyncio.wait_for(
                asyncio.open_connection(endpoint.ip, endpoint.port), limits.connect_timeout_s
            )
        except (OSError, TimeoutError):
            self._skip(endpoint, "refused the connection")
            return False
        try:
            upstream.write(request.encode())
            await upstream.drain()
            head = await asyncio.wait_for(upstream_reader.readuntil(b"\r\n\r\n"), limits.answer_timeout_s)
        except (OSError, TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            upstream.close()
            self._skip(endpoint, "closed without an answer")
            return False
        try:
            writer.write(with_close(head[:-4]))
            while chunk := await upstream_reader.read(64 * 1024):
                writer.write(chunk)
                await writer.drain()
        finally:
            upstream.close()
        return True

    def _skip(self, endpoint: Endpoint, why: str) -> None:
        log.info("instance %s %s: skipped for %g s", endpoint, why, SKIP_S)
        self._skipped[endpoint] = self._clock() + SKIP_S


def metrics_text(activator: Activator, instances: int) -> str:
    """Prometheus text (0.0.4) of the activator's figures."""
    stats = activator.stats
    lines = [
        "# HELP tarn_activator_requests_held Requests held now, waiting for a ready instance",
        "# TYPE tarn_activator_requests_held gauge",
        f"tarn_activator_requests_held {activator.held}",
        "# HELP tarn_activator_held_bytes Body bytes of the requests held now",
        "# TYPE tarn_activator_held_bytes gauge",
        f"tarn_activator_held_bytes {activator.held_bytes}",
        "# HELP tarn_activator_ready_instances Ready instances the activator knows of",
        "# TYPE tarn_activator_ready_instances gauge",
        f"tarn_activator_ready_instances {instances}",
        "# HELP tarn_activator_requests_total Requests the activator answered, by outcome",
        "# TYPE tarn_activator_requests_total counter",
        *(f'tarn_activator_requests_total{{outcome="{k}"}} {v}' for k, v in stats.outcomes.items()),
        "# HELP tarn_activator_wakes_total Times requests began to be held with none held before",
        "# TYPE tarn_activator_wakes_total counter",
        f"tarn_activator_wakes_total {stats.wakes}",
        "# HELP tarn_activator_hold_seconds How long requests were held",
        "# TYPE tarn_activator_hold_seconds histogram",
        *(
            f'tarn_activator_hold_seconds_bucket{{le="{bound:g}"}} {count}'
            for bound, count in zip(HOLD_BUCKETS, stats.hold_buckets, strict=True)
        ),
        f'tarn_activator_hold_seconds_bucket{{le="+Inf"}} {stats.hold_count}',
        f"tarn_activator_hold_seconds_sum {stats.hold_sum_s:.6f}",
        f"tarn_activator_hold_seconds_count {stats.hold_count}",
    ]
    return "\n".join(lines) + "\n"
