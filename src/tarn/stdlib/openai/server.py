"""The OpenAI front's server: asyncio, one task per connection, one Triton connection per generation.

Every generation is one ``POST /v2/models/<m>/generate_stream`` to the local Triton. A streaming
request gets each event as a chunk the moment Triton sends it (written and drained, nothing held
but what might begin a ``stop`` sequence); a request without ``stream`` gets the gathered stream.
While a generation runs, the client's side of the connection is watched: when the client goes
away, the Triton connection is closed at once, which Triton turns into ``request.is_cancelled()``
for the model. The answers' shapes, the validation and the token counts are
:mod:`tarn.stdlib.openai.mapping`'s; the figures, :mod:`tarn.stdlib.openai.counters`'.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import quote, unquote

from tarn.stdlib.api_token import TOKEN_HEADER, Secret, presented
from tarn.stdlib.http1 import MAX_HEAD, Bounds, ClientError, Request, answer, linger, read_request
from tarn.stdlib.openai import mapping
from tarn.stdlib.openai.admission import Admission, Limits, Refused, Ticket
from tarn.stdlib.openai.counters import Counters, prometheus_text
from tarn.stdlib.openai.mapping import Event, Generation, Identity, OpenAIError, StopScanner, Tally
from tarn.stdlib.openai.tenancy import TenancyFile
from tarn.stdlib.openai.trust import PROOF_HEADER, USER_HEADER, counted_user
from tarn.stdlib.openai.wire import (
    LAST_CHUNK,
    EventDecoder,
    ResponseHead,
    UpstreamBroken,
    body_pieces,
    chunk,
    read_body,
    read_response_head,
    request_bytes,
    stream_head,
)

log = logging.getLogger("tarn.openai")
PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"
MAX_BODY = 4 * 1024 * 1024
# A streamed answer silent this long (a long prefill, a reasoning model thinking) gets an SSE
# comment: well under the idle timeouts of proxies in front of the entries (nginx's and cloud load
# balancers' are often 60 s), and HAProxy sees a client gone only when it next writes to it, so a
# client that leaves during the silence is seen within about two of these, not at the first token.
HEARTBEAT_S = 5.0
# A client has this long to send its whole request (head and body), then gets a 408: connections
# that hold half a request must not pile up (issue 48, row 4: 225 held for good, the front's memory
# 22 -> 148 MiB, in the container's limit it shares with Triton).
REQUEST_READ_S = 15.0
# Connections at once (streams included; HAProxy's maxconn per server is usually well under it);
# beyond, a 503 with Retry-After at once.
MAX_CONNECTIONS = 1024
HEARTBEAT = chunk(b": keep-alive\n\n")  # a comment line: SSE clients skip it
# A model's parameter in its config.pbtxt: how many generations it runs at once (its batch slots).
SLOTS_PARAMETER = "max_concurrent_generations"


@dataclass(frozen=True)
class Triton:
    """The local Triton's HTTP endpoint."""

    host: str = "127.0.0.1"
    port: int = 8000
    connect_timeout_s: float = 2.0
    lookup_timeout_s: float = 10.0  # a model listing or metadata call

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


class ClientGone(Exception):
    """Writing to the client failed: it went away."""


@dataclass
class Reply:
    """The client's side of the answer: whether anything was sent yet, and each write drained."""

    writer: asyncio.StreamWriter
    started: bool = False

    async def send(self, data: bytes) -> None:
        self.started = True
        try:
            self.writer.write(data)
            await self.writer.drain()
        except (ConnectionError, OSError) as exc:
            raise ClientGone(str(exc)) from exc


def sse_chunk(payload: dict[str, Any]) -> bytes:
    """One server-sent event, as one chunk of the chunked body."""
    return chunk(mapping.sse(payload))


def stream_opening(generation: Generation, identity: Identity) -> bytes:
    """A streamed answer's head, and a chat's first chunk (the assistant's role)."""
    opening = stream_head()
    if generation.kind == "chat":
        opening += sse_chunk(mapping.stream_chunk(generation, identity, role=True))
    return opening


def json_bytes(payload: Any) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()


def error_answer(error: OpenAIError) -> bytes:
    return answer(error.status, json_bytes(error.body()), extra=error.headers)


BUSY = answer(
    503,
    json_bytes(
        OpenAIError(503, "Too many connections to this front; retry", kind="server_error", code="busy").body()
    ),
    extra={"Retry-After": "1"},
)


async def with_heartbeats(
    events: AsyncGenerator[Event, None], every_s: float
) -> AsyncGenerator[Event | None, None]:
    """Each of ``events`` as it comes, and None each time ``every_s`` passes without one: the
    caller's cue to send a heartbeat, so that the entries and proxies before the client see bytes
    during a long silence, and HAProxy, writing them, notices a client that has gone.

    The next event is awaited in a task that a heartbeat does not disturb: cancelling ``__anext__``
    would end the generator. On the way out the task is cancelled and awaited before ``events`` is
    closed, since an async generator cannot be closed while its ``__anext__`` runs."""
    pending: asyncio.Future[Event | None] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(events, None))
            done, _pending = await asyncio.wait({pending}, timeout=every_s)
            if not done:
                yield None
                continue
            item, pending = pending.result(), None
            if item is None:
                return
            yield item
    finally:
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await pending
        await events.aclose()


async def client_gone(reader: asyncio.StreamReader) -> None:
    """Returns when the client closes its side of the connection (the request was read whole, so
    anything more it sends is not waited for)."""
    with contextlib.suppress(ConnectionError, OSError):
        while await reader.read(64 * 1024):
            pass


@dataclass
class Front:
    triton: Triton
    counters: Counters = field(default_factory=Counters)
    max_body: int = MAX_BODY
    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time
    new_id: Callable[[], str] = lambda: uuid.uuid4().hex
    started_at: int = 0
    heartbeat_s: float = HEARTBEAT_S  # a stream's silence before an SSE comment is sent
    read_s: float = REQUEST_READ_S
    max_connections: int = MAX_CONNECTIONS
    # The service's API token: /metrics needs it, and it keys the proof of X-TARN-User (trust.py).
    # None: /metrics is open and every request counts as anonymous.
    token: Secret | None = None
    # Admission (tarn.stdlib.openai.admission): its limits for each model, ``slots`` 0 for the
    # model's own SLOTS_PARAMETER (none declared: no admission); who is who, from the tenancy file.
    admission: Limits = field(default_factory=lambda: Limits(slots=0))
    tenancy: TenancyFile = field(default_factory=lambda: TenancyFile(None))
    connections: int = field(default=0, init=False)  # open now
    _admissions: dict[str, Admission | None] = field(default_factory=dict, init=False)  # by served model
    _starts: dict[Ticket, asyncio.Future[None]] = field(default_factory=dict, init=False)  # the waiting

    def __post_init__(self) -> None:
        self.started_at = self.started_at or int(self.wall())

    # ---- one connection, one request
    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.connections >= self.max_connections:
            with contextlib.suppress(ClientGone):
                await Reply(writer).send(BUSY)
                await linger(reader, writer, 1.0, MAX_HEAD)
            writer.close()
            return
        self.connections += 1
        try:
            await self._serve(reader, writer)
        finally:
            self.connections -= 1

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        reply = Reply(writer)
        try:
            try:
                request = await read_request(reader, writer, Bounds(self.max_body, self.read_s))
            except ClientError as exc:
                raise mapping.unreadable(exc.status, str(exc)) from exc
            if request is not None:
                await self._route(request, reader, reply)
        except OpenAIError as exc:
            if not reply.started:
                with contextlib.suppress(ClientGone):
                    await reply.send(error_answer(exc))
                    await linger(reader, writer, self.read_s)
        except ClientGone:
            pass
        except Exception:
            log.exception("unexpected failure")
            if not reply.started:
                error = OpenAIError(500, "The OpenAI front failed; see its log", kind="server_error")
                with contextlib.suppress(ClientGone):
                    await reply.send(error_answer(error))
        finally:
            writer.close()

    async def _route(self, request: Request, reader: asyncio.StreamReader, reply: Reply) -> None:
        path = request.path
        if path in ("/v1/chat/completions", "/v1/completions"):
            _only(request, "POST")
            parse = (
                mapping.chat_generation if path == "/v1/chat/completions" else mapping.completion_generation
            )
            await self._generate(parse(_json_body(request)), request, reader, reply)
        elif path == "/v1/models":
            _only(request, "GET")
            await reply.send(
                answer(200, json_bytes(mapping.model_list(await self._models(), self.started_at)))
            )
        elif path.startswith("/v1/models/"):
            _only(request, "GET")
            model = unquote(path[len("/v1/models/") :])
            if not mapping.generates_text(await self._metadata(model)):
                raise mapping.model_not_found(model)
            await reply.send(answer(200, json_bytes(mapping.model_entry(model, self.started_at))))
        elif path == "/metrics":
            _only(request, "GET")
            self._check_token(request)
            await reply.send(answer(200, prometheus_text(self.counters).encode(), PROMETHEUS_TEXT))
        elif path == "/health":
            _only(request, "GET")
            await reply.send(await self._health())
        else:
            raise OpenAIError(404, f"Unknown request URL: {request.method} {path}", code="unknown_url")

    def _check_token(self, request: Request) -> None:
        """/metrics shows every user's usage: only to whoever holds the service's token."""
        given = presented(
            request.header(TOKEN_HEADER.lower()) or None, request.header("authorization") or None
        )
        if self.token is not None and (given is None or not self.token.matches(given)):
            raise OpenAIError(
                401, f"/metrics needs the service's token ({TOKEN_HEADER} or Bearer)", code="unauthorized"
            )

    # ---- a generation
    async def _generate(
        self, generation: Generation, request: Request, reader: asyncio.StreamReader, reply: Reply
    ) -> None:
        """Runs the generation while watching the client; the first to end ends the other."""
        user = counted_user(
            request.header(USER_HEADER), request.header(PROOF_HEADER), self.token, self.wall()
        )
        work = asyncio.ensure_future(self._run(generation, user, reply))
        gone = asyncio.ensure_future(client_gone(reader))
        try:
            await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            work.cancel()  # no-op when it is done; else the client left: stop the generation
            await asyncio.gather(work, gone, return_exceptions=True)
        if not work.cancelled():
            work.result()  # its OpenAIError is the client's answer

    async def _run(self, generation: Generation, user: str, reply: Reply) -> None:
        model = generation.model
        identity = Identity(mapping.id_prefix(generation.kind) + self.new_id(), int(self.wall()))
        began = self.clock()
        if model not in self.counters.served and await self._metadata(model) is not None:
            self.counters.has_model(model)  # once per model: what it does counts from the first request
        async with self._slot(generation, identity, user, reply):
            await self._generate_in_slot(generation, identity, user, reply, began)

    async def _generate_in_slot(
        self, generation: Generation, identity: Identity, user: str, reply: Reply, began: float
    ) -> None:
        model = generation.model
        upstream_reader, upstream = await self._connect()
        tally = Tally(generation.prompt)
        outcome, accepted = "failed", False
        self.counters.stream_started(model)
        try:
            path = f"/v2/models/{quote(model, safe='')}/generate_stream"
            body = json_bytes(mapping.triton_request(generation))
            await _send_upstream(
                upstream, request_bytes("POST", path, self.triton.address, body, "text/event-stream")
            )
            head = await self._triton_head(upstream_reader, generation, identity, reply)
            if head.status != 200:
                error = mapping.triton_error(head.status, await read_body(upstream_reader, head), model)
                if not reply.started:
                    raise error
                await reply.send(sse_chunk(error.body()) + LAST_CHUNK)  # the stream was opened early
                return
            accepted = True
            self.counters.has_model(model)
            events = self._events(upstream_reader, head, tally, model, began)
            if generation.stream:
                outcome = await self._stream(generation, identity, events, tally, reply)
            else:
                outcome = await self._gather(generation, identity, events, tally, reply)
        except (asyncio.CancelledError, ClientGone):
            outcome = "cancelled"
            raise
        except UpstreamBroken as exc:
            message = f"Triton's answer broke off: {exc}"
            if reply.started:  # a stream opened before Triton answered: its own error event
                failure = OpenAIError(502, message, "server_error", code="triton_broken")
                await reply.send(sse_chunk(failure.body()) + LAST_CHUNK)
                return
            # Nothing reached the client (a stream's breaks are its own error event): a 503 that
            # HAProxy's retry-on sends to another instance, as a Triton that died under /v2 is.
            raise OpenAIError(503, message, kind="server_error", code="triton_broken") from exc
        finally:
            upstream.close()  # Triton sees the connection go: a generation still running is cancelled
            if model in self.counters.served:  # else a name Triton never served: no series
                self.counters.stream_ended(model)
                prompt = tally.prompt_tokens if accepted else 0
                self.counters.ended(user, model, outcome, prompt, tally.completion_tokens)
                log.info(
                    "%s %s: %s, %d prompt + %d completion tokens in %.3f s",
                    user, model, outcome, prompt, tally.completion_tokens, self.clock() - began,
                )  # fmt: skip
            else:
                self.counters.forget_stream(model)

    async def _triton_head(
        self, reader: asyncio.StreamReader, generation: Generation, identity: Identity, reply: Reply
    ) -> ResponseHead:
        """Triton's response head. Triton sends a stream's head with its first event, so during a
        long prefill the client and the entries would see no byte at all: the wait beats (below).
        A quick refusal (an unknown model, a bad input) still gets its own status."""
        reading = asyncio.ensure_future(read_response_head(reader))
        try:
            await self._beating(reading, generation, identity, reply)
            return await reading
        finally:
            if not reading.done():
                reading.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await reading

    async def _beating(
        self, waited: asyncio.Future[Any], generation: Generation, identity: Identity, reply: Reply
    ) -> None:
        """Waits for ``waited`` (a slot, Triton's head); a streamed answer silent past
        ``heartbeat_s`` opens (200, and a chat's role chunk) and beats until it is done."""
        done, _pending = await asyncio.wait({waited}, timeout=self.heartbeat_s)
        if done or not generation.stream:
            await waited
            return
        await reply.send(HEARTBEAT if reply.started else stream_opening(generation, identity) + HEARTBEAT)
        while not (await asyncio.wait({waited}, timeout=self.heartbeat_s))[0]:
            await reply.send(HEARTBEAT)

    # ---- admission
    @contextlib.asynccontextmanager
    async def _slot(
        self, generation: Generation, identity: Identity, user: str, reply: Reply
    ) -> AsyncIterator[None]:
        """Holds one of the model's slots while the generation runs, waiting for it first (a
        cancel while waiting costs nothing); a request that cannot wait gets 429 or 503."""
        model = generation.model
        admission = await self._admission(model)
        if admission is None:
            yield
            return
        try:
            ticket = admission.arrive(self.tenancy.current().tenant(user))
        except Refused as exc:
            code = "rate_limit_exceeded" if exc.status == 429 else "busy"
            kind = "requests" if exc.status == 429 else "server_error"
            retry = {"Retry-After": str(exc.retry_after_s)}
            raise OpenAIError(exc.status, exc.message, kind, code=code, headers=retry) from exc
        arrived = self.clock()
        self.counters.queued(user, model, 1)
        try:
            if not ticket.admitted:
                started = self._starts[ticket] = asyncio.get_running_loop().create_future()
                await self._beating(started, generation, identity, reply)
        except BaseException:
            # Gone while waiting: its place goes, its tenant is not charged; or admitted in the
            # same moment it went (the cancel wins the wake-up): its slot goes back.
            admission.leave(ticket)
            raise
        finally:
            self.counters.queued(user, model, -1)
            self._starts.pop(ticket, None)
        self.counters.waited(user, model, self.clock() - arrived)
        try:
            yield
        finally:
            admission.leave(ticket)

    def _started(self, ticket: Ticket) -> None:
        started = self._starts.get(ticket)
        if started is not None and not started.done():
            started.set_result(None)

    async def _admission(self, model: str) -> Admission | None:
        """The model's admission on this front: made the first time a served model is asked for."""
        if model not in self.counters.served:  # a name Triton does not have: no state for it
            return None
        if model not in self._admissions:
            slots = self.admission.slots or await self._declared_slots(model)
            if slots is None:
                return None  # not known now (Triton did not answer): asked again next time
            limits = replace(self.admission, slots=slots)
            made = Admission(limits, self.clock, self._started) if slots else None
            self._admissions.setdefault(model, made)  # a request beside this one may have made it
        return self._admissions[model]

    async def _declared_slots(self, model: str) -> int | None:
        """The model's SLOTS_PARAMETER from its config (0: none declared, or no config); None when
        Triton did not answer (asked again next time)."""
        try:
            status, config = await self._call("GET", f"/v2/models/{quote(model, safe='')}/config")
        except OpenAIError:
            return None
        try:
            return max(0, int(config["parameters"][SLOTS_PARAMETER]["string_value"])) if status == 200 else 0
        except (KeyError, TypeError, ValueError):
            return 0

    async def _events(
        self,
        reader: asyncio.StreamReader,
        head: ResponseHead,
        tally: Tally,
        model: str,
        began: float,
    ) -> AsyncGenerator[Event, None]:
        """Triton's events as they arrive, counted and timed."""
        decoder = EventDecoder()
        last: float | None = None
        async for piece in body_pieces(reader, head):
            for data in decoder.feed(piece):
                event = mapping.parse_event(data)
                if event.text:
                    now = self.clock()
                    if last is None:
                        self.counters.first_token_after(model, now - began)
                    else:
                        self.counters.between_tokens_took(model, now - last)
                    last = now
                tally.add(event)
                yield event

    async def _stream(
        self,
        generation: Generation,
        identity: Identity,
        events: AsyncGenerator[Event, None],
        tally: Tally,
        reply: Reply,
    ) -> str:
        if not reply.started:  # else _triton_head opened it
            await reply.send(stream_opening(generation, identity))
        scanner = StopScanner(generation.stop)
        try:
            async with contextlib.aclosing(with_heartbeats(events, self.heartbeat_s)) as beating:
                async for item in beating:
                    if item is None:
                        await reply.send(HEARTBEAT)
                        continue
                    if item.error is not None:
                        failure = OpenAIError(500, f"The model failed: {item.error}", "server_error")
                        await reply.send(sse_chunk(failure.body()) + LAST_CHUNK)
                        return "failed"
                    text = scanner.feed(item.text)
                    if text:
                        await reply.send(sse_chunk(mapping.stream_chunk(generation, identity, text=text)))
                    if scanner.stopped:
                        break
        except UpstreamBroken as exc:
            failure = OpenAIError(
                502, f"Triton's stream broke off: {exc}", "server_error", code="triton_broken"
            )
            await reply.send(sse_chunk(failure.body()) + LAST_CHUNK)
            return "failed"
        ending = b""
        rest = scanner.flush()
        if rest:
            ending += sse_chunk(mapping.stream_chunk(generation, identity, text=rest))
        finish = mapping.finish_reason(generation, tally.completion_tokens, scanner.stopped)
        ending += sse_chunk(mapping.stream_chunk(generation, identity, finish=finish))
        if generation.include_usage:
            ending += sse_chunk(mapping.usage_chunk(generation, identity, tally.usage()))
        await reply.send(ending + chunk(mapping.DONE) + LAST_CHUNK)
        return "completed"

    async def _gather(
        self,
        generation: Generation,
        identity: Identity,
        events: AsyncGenerator[Event, None],
        tally: Tally,
        reply: Reply,
    ) -> str:
        scanner = StopScanner(generation.stop)
        parts = []
        async with contextlib.aclosing(events):
            async for item in events:
                if item.error is not None:
                    raise OpenAIError(500, f"The model failed: {item.error}", "server_error")
                parts.append(scanner.feed(item.text))
                if scanner.stopped:
                    break
        parts.append(scanner.flush())
        finish = mapping.finish_reason(generation, tally.completion_tokens, scanner.stopped)
        whole = mapping.whole_response(generation, identity, "".join(parts), finish, tally.usage())
        await reply.send(answer(200, json_bytes(whole)))
        return "completed"

    # ---- Triton
    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        triton = self.triton
        try:
            return await asyncio.wait_for(
                asyncio.open_connection(triton.host, triton.port), triton.connect_timeout_s
            )
        except (OSError, asyncio.TimeoutError) as exc:
            raise OpenAIError(
                503,
                f"Triton is not reachable at {triton.address}: {exc or type(exc).__name__}",
                kind="server_error",
                code="triton_unreachable",
            ) from exc

    async def _call(self, method: str, path: str, body: bytes = b"") -> tuple[int, Any]:
        """One JSON call to Triton: its status and its parsed body (None if not JSON)."""
        reader, writer = await self._connect()
        try:
            await _send_upstream(writer, request_bytes(method, path, self.triton.address, body))
            head = await asyncio.wait_for(read_response_head(reader), self.triton.lookup_timeout_s)
            raw = await asyncio.wait_for(read_body(reader, head), self.triton.lookup_timeout_s)
        except (UpstreamBroken, asyncio.TimeoutError) as exc:
            raise OpenAIError(
                503, f"Triton's answer to {path} failed: {exc!r}", kind="server_error", code="triton_broken"
            ) from exc
        finally:
            writer.close()
        try:
            return head.status, json.loads(raw)
        except ValueError:
            return head.status, None

    async def _health(self) -> bytes:
        """200 while this front's Triton answers ready: the entries' health check, so that a front
        whose Triton died (the front outlives it for a moment) takes no new request."""
        try:
            status, _body = await self._call("GET", "/v2/health/ready")
        except OpenAIError as exc:
            return answer(503, json_bytes({"status": "triton unreachable", "detail": exc.message}))
        if status != 200:
            return answer(503, json_bytes({"status": f"triton not ready ({status})"}))
        return answer(200, b'{"status":"ok"}')

    async def _metadata(self, model: str) -> Any:
        status, metadata = await self._call("GET", f"/v2/models/{quote(model, safe='')}")
        return metadata if status == 200 else None

    async def _models(self) -> list[str]:
        """The ready models that take text_input: what /v1 can serve."""
        status, index = await self._call("POST", "/v2/repository/index", b'{"ready":true}')
        if status != 200 or not isinstance(index, list):
            raise OpenAIError(502, f"Triton's model index failed ({status})", kind="server_error")
        names = sorted(
            {m["name"] for m in index if isinstance(m, dict) and m.get("state") == "READY" and "name" in m}
        )
        metadata = await asyncio.gather(*(self._metadata(name) for name in names))
        return [name for name, meta in zip(names, metadata, strict=True) if mapping.generates_text(meta)]


async def _send_upstream(writer: asyncio.StreamWriter, data: bytes) -> None:
    try:
        writer.write(data)
        await writer.drain()
    except (ConnectionError, OSError) as exc:
        raise UpstreamBroken(f"sending the request failed: {exc!r}") from exc


def _only(request: Request, method: str) -> None:
    if request.method != method:
        raise OpenAIError(
            405, f"{request.method} is not allowed on {request.path}; use {method}", code="method_not_allowed"
        )


def _json_body(request: Request) -> Any:
    try:
        return json.loads(request.body)
    except ValueError as exc:
        raise OpenAIError(400, f"We could not parse the JSON body of your request: {exc}") from exc
    except RecursionError as exc:  # brackets nested deeper than the parser goes (issue 48, row 10)
        raise OpenAIError(400, "We could not parse the JSON body of your request: nested too deep") from exc


async def serve(front: Front, host: str, port: int, stop: asyncio.Event) -> None:
    """Serve until ``stop`` is set. Port 0 picks a free one (logged)."""
    server = await asyncio.start_server(front.handle, host, port, limit=MAX_HEAD, backlog=1024)
    bound = server.sockets[0].getsockname()
    log.info("OpenAI front on %s:%d, Triton at %s", bound[0], bound[1], front.triton.address)
    async with server:
        await stop.wait()
