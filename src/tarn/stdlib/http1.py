"""HTTP/1.1 for TARN's own listeners (the OpenAI front, the activator), on h11: one request per
connection, read whole within bounds (head bytes, body bytes, seconds), and the small answers the
listeners make themselves, each closing the connection.

Whatever a client sends that is not a request TARN can take is a ``ClientError`` carrying its 4xx:
h11 judges the framing (request line, header syntax, Content-Length, chunks), this module the
bounds. h11 is pure Python and travels in the launcher's zipapp (tarn.payload).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus

import h11

MAX_HEAD = 64 * 1024  # a request's head (request line and headers)
READ_BYTES = 64 * 1024  # the most read from the socket at once
# Pieces of one body (h11 events: a chunk, or its part in one read). Each costs the parser some
# 10 us: a megabyte sent in 1-byte chunks cost 10 s of CPU and stalled the loop (the fuzzing found
# it). Clients chunk by kilobytes (http.client by 8 KiB): 16,384 pieces is 128 MiB of those.
MAX_BODY_PIECES = 16_384
YIELD_EVERY = 256  # pieces parsed from one read before the loop may serve others
# Read and dropped after an error answer (a 413's body), so that the client reads the answer.
LINGER_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Bounds:
    """What one request may take: body bytes (413 beyond) and seconds for head and body (408)."""

    body_bytes: int
    read_s: float
    head_bytes: int = MAX_HEAD


class ClientError(Exception):
    """A request the listener will not take; ``status`` is the 4xx to answer, the message says why;
    ``target`` the request's, when its head was read (an answer's shape may follow the path)."""

    def __init__(self, status: int, message: str, target: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.target = target


@dataclass(frozen=True)
class Request:
    method: str
    target: str  # as sent: path and query
    headers: tuple[tuple[str, str], ...]  # names in lower case, values as sent (latin-1)
    body: bytes

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]

    def header(self, name: str, default: str = "") -> str:
        """The first value of header ``name``, ``default`` when absent."""
        wanted = name.lower()
        return next((value for key, value in self.headers if key == wanted), default)


# Told each body piece's size before it is kept; raises to refuse the rest, and read_request lets
# its exception through (the activator charges the room it shares among every request it holds).
Charge = Callable[[int], None]


async def read_request(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter | None,
    bounds: Bounds,
    charge: Charge | None = None,
) -> Request | None:
    """The request on a fresh connection, read whole; None when the client closed without sending
    one. A client that waits for ``100 Continue`` before its body (curl does beyond 1 KiB) is told
    to go on, on ``writer``, once the body's declared length is within bounds."""
    # The bound cancels this task at its end, as asyncio.timeout (3.11) would: wait_for would run
    # the read in a task of its own, a cost paid on every request (Triton's images run 3.10 too).
    task = asyncio.current_task()
    expired = False

    def expire() -> None:
        nonlocal expired
        expired = True
        if task is not None:
            task.cancel()

    timer = asyncio.get_running_loop().call_later(bounds.read_s, expire)
    target: list[str] = []  # the request's, once its head is read
    try:
        return await _read(reader, writer, bounds, charge, target)
    except asyncio.CancelledError:
        if not expired:
            raise
        if task is not None and hasattr(task, "uncancel"):
            task.uncancel()  # ours, not the caller's: the task goes on to answer the 408
        message = f"request not received whole within {bounds.read_s:g} s"
        raise ClientError(408, message, next(iter(target), None)) from None
    except ClientError as exc:
        exc.target = next(iter(target), None)
        raise
    finally:
        timer.cancel()


async def _read(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter | None,
    bounds: Bounds,
    charge: Charge | None,
    target: list[str],
) -> Request | None:
    connection = h11.Connection(h11.SERVER, max_incomplete_event_size=bounds.head_bytes)
    head: Request | None = None
    parts: list[bytes] = []
    size = received = 0
    while True:
        try:
            event = connection.next_event()
        except h11.RemoteProtocolError as exc:
            raise ClientError(client_status(exc.error_status_hint), str(exc)) from exc
        if event is h11.NEED_DATA:
            if writer is not None and connection.they_are_waiting_for_100_continue:
                go_on = h11.InformationalResponse(status_code=100, headers=[], reason=b"Continue")
                writer.write(connection.send(go_on) or b"")
            data = await reader.read(READ_BYTES)
            received += len(data)
            connection.receive_data(data)
        elif isinstance(event, h11.Request):
            target.append(event.target.decode("ascii", "replace"))
            # h11 bounds only a head still incomplete: one that came whole in a later read passed
            if received - len(connection.trailing_data[0]) > bounds.head_bytes:
                raise ClientError(431, f"request head over {bounds.head_bytes} bytes")
            head = _checked(event, bounds)
        elif isinstance(event, h11.Data):
            if len(parts) >= MAX_BODY_PIECES:
                raise ClientError(400, f"request body in over {MAX_BODY_PIECES} pieces: send larger chunks")
            if len(parts) % YIELD_EVERY == YIELD_EVERY - 1:
                await asyncio.sleep(0)
            size += len(event.data)
            if size > bounds.body_bytes:
                raise ClientError(413, f"request body over {bounds.body_bytes} bytes")
            if charge is not None:
                charge(len(event.data))
            parts.append(bytes(event.data))
        elif isinstance(event, h11.EndOfMessage) and head is not None:
            return Request(head.method, head.target, head.headers, b"".join(parts))
        elif isinstance(event, h11.ConnectionClosed):
            return None  # h11 raises instead when the connection closes inside a request


def _checked(event: h11.Request, bounds: Bounds) -> Request:
    """The request's head, refused when its body cannot be taken."""
    headers = tuple((name.decode("latin-1"), value.decode("latin-1")) for name, value in event.headers)
    names = {name for name, _value in headers}
    if {"content-length", "transfer-encoding"} <= names:
        # RFC 9112 lets Transfer-Encoding win; a proxy behind that reads the other way is smuggled to.
        raise ClientError(400, "both Content-Length and Transfer-Encoding")
    declared = next((int(value) for name, value in headers if name == "content-length"), 0)
    if declared > bounds.body_bytes:
        raise ClientError(413, f"request body of {declared} bytes, over {bounds.body_bytes}")
    return Request(event.method.decode("ascii"), event.target.decode("ascii"), headers, b"")


def client_status(hint: int) -> int:
    """The 4xx for h11's refusal: its hint when it is one (431 for a head too large), else 400 (h11
    hints 501 for a Transfer-Encoding other than chunked: still the client's mistake here)."""
    return hint if 400 <= hint < 500 else 400


def head(status: int, headers: Mapping[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def answer(
    status: int, body: bytes, content_type: str = "application/json", extra: Mapping[str, str] | None = None
) -> bytes:
    """A whole answer, closing the connection."""
    headers = {"Content-Type": content_type, "Content-Length": str(len(body))}
    return head(status, {**headers, **(extra or {}), "Connection": "close"}) + body


async def linger(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, seconds: float, limit: int = LINGER_BYTES
) -> None:
    """After an error answer (the request maybe not read whole: a 413, a 400): the sending side
    closed, then what the client still sends read and dropped (at most ``limit`` bytes, ``seconds``)
    until it closes.
    A connection closed with unread data is reset by the kernel, and the client, still sending (a
    5 MB body over the limit), sees a broken pipe instead of the answer (issue 48, row 14)."""
    with contextlib.suppress(ConnectionError, OSError, RuntimeError):
        writer.write_eof()

    async def drop() -> None:
        left = limit
        while left > 0 and (piece := await reader.read(min(READ_BYTES, left))):
            left -= len(piece)

    with contextlib.suppress(asyncio.TimeoutError, ConnectionError, OSError):
        await asyncio.wait_for(drop(), seconds)
