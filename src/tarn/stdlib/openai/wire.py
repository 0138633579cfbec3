"""HTTP/1.1 as the OpenAI front speaks it: requests read whole (they are small JSON), answers that
close the connection, streamed answers in chunked encoding (so a stream cut short is an incomplete
message to the client, never one that looks complete), and Triton's answers read back, chunked or
not, with their server-sent events decoded as they arrive.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from http import HTTPStatus

from tarn.stdlib.http_fields import content_length

MAX_HEAD = 64 * 1024


class BadRequest(Exception):
    """Not an HTTP request the front can read; the message goes into a 400."""


class TooLarge(Exception):
    """A request body over the front's limit (413)."""


class UpstreamBroken(Exception):
    """Triton's answer stopped or went wrong before its end."""


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: Mapping[str, str]  # names in lower case
    body: bytes


def parse_head(head: bytes) -> tuple[str, str, dict[str, str]]:
    """Method, path (query dropped) and headers of a request head, without its blank line."""
    request_line, *lines = head.decode("latin-1").split("\r\n")
    parts = request_line.split(" ")
    if len(parts) != 3 or not parts[0].isalpha() or not parts[2].startswith("HTTP/1."):
        raise BadRequest("malformed request line")
    headers: dict[str, str] = {}
    for line in lines:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise BadRequest("malformed header line")
        headers[name.lower()] = value.strip()
    return parts[0], parts[1].split("?", 1)[0], headers


async def read_request(
    reader: asyncio.StreamReader, max_body: int, writer: asyncio.StreamWriter | None = None
) -> Request | None:
    """The request on a fresh connection; None when the client sent nothing. A client that waits
    for ``100 Continue`` before its body (curl does beyond 1 KiB) is told to go on, on ``writer``."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial.strip():
            return None
        raise BadRequest("the connection closed inside the request head") from exc
    except asyncio.LimitOverrunError as exc:
        raise BadRequest(f"request head over {MAX_HEAD} bytes") from exc
    method, path, headers = parse_head(head[:-4])
    if "chunked" in headers.get("transfer-encoding", "").lower():
        raise BadRequest("a chunked request body is not accepted; send Content-Length")
    length = content_length(headers.get("content-length", "0"))
    if length is None:
        raise BadRequest("bad Content-Length")
    if length > max_body:
        raise TooLarge(f"request body of {length} bytes, over {max_body}")
    if writer is not None and length and headers.get("expect", "").lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    try:
        body = await reader.readexactly(length)
    except asyncio.IncompleteReadError as exc:
        raise BadRequest("the connection closed inside the request body") from exc
    return Request(method, path, headers, body)


def _head(status: int, headers: Mapping[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def answer(
    status: int, body: bytes, content_type: str = "application/json", extra: Mapping[str, str] | None = None
) -> bytes:
    """A whole answer, closing the connection."""
    headers = {"Content-Type": content_type, "Content-Length": str(len(body)), "Connection": "close"}
    return _head(status, {**headers, **(extra or {})}) + body


async def linger(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, seconds: float, limit: int
) -> None:
    """After an error answer (the request maybe not read whole: a 413, a 400): the sending side
    closed, then what the client still sends read and dropped (at most ``limit`` bytes,
    ``seconds``) until it closes.
    A connection closed with unread data is reset by the kernel, and the client, still sending (a
    5 MB body over the limit), sees a broken pipe instead of the answer (issue 48, row 14)."""
    with contextlib.suppress(ConnectionError, OSError, RuntimeError):
        writer.write_eof()

    async def drop() -> None:
        left = limit
        while left > 0 and (piece := await reader.read(min(64 * 1024, left))):
            left -= len(piece)

    with contextlib.suppress(asyncio.TimeoutError, ConnectionError, OSError):
        await asyncio.wait_for(drop(), seconds)


def stream_head() -> bytes:
    """The head of a streamed answer: events, chunked, not cached nor buffered by a proxy."""
    return _head(
        200,
        {
            "Content-Type": "text/event-stream; charset=utf-8",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
            "Transfer-Encoding": "chunked",
            "Connection": "close",
        },
    )


def chunk(data: bytes) -> bytes:
    """One chunk of a chunked body (never empty: an empty chunk would end the body)."""
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


LAST_CHUNK = b"0\r\n\r\n"


def request_bytes(method: str, path: str, host: str, body: bytes, accept: str = "application/json") -> bytes:
    """A request to Triton: one per connection, closed after the answer."""
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nAccept: {accept}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode("latin-1") + body


@dataclass(frozen=True)
class ResponseHead:
    status: int
    headers: Mapping[str, str]  # names in lower case


async def read_response_head(reader: asyncio.StreamReader) -> ResponseHead:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError) as exc:
        raise UpstreamBroken(f"no answer: {exc!r}") from exc
    status_line, *lines = head[:-4].decode("latin-1").split("\r\n")
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise UpstreamBroken(f"malformed status line {status_line[:100]!r}")
    headers = {}
    for line in lines:
        name, _colon, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return ResponseHead(int(parts[1]), headers)


async def body_pieces(reader: asyncio.StreamReader, head: ResponseHead) -> AsyncIterator[bytes]:
    """The answer's body as it arrives, de-chunked. UpstreamBroken if it ends before its end."""
    try:
        if "chunked" in head.headers.get("transfer-encoding", "").lower():
            while True:
                size_line = await reader.readuntil(b"\r\n")
                try:
                    size = int(size_line.split(b";")[0].strip(), 16)
                except ValueError as exc:
                    raise UpstreamBroken("bad chunk size") from exc
                if size == 0:
                    return  # trailers, if any, are not read: the connection is closed after
                data = await reader.readexactly(size)
                if await reader.readexactly(2) != b"\r\n":
                    raise UpstreamBroken("chunk not followed by CRLF")
                yield data
        elif "content-length" in head.headers:
            left = int(head.headers["content-length"])
            while left > 0:
                data = await reader.read(min(left, 64 * 1024))
                if not data:
                    raise UpstreamBroken(f"the body ended {left} bytes short")
                left -= len(data)
                yield data
        else:
            while data := await reader.read(64 * 1024):
                yield data
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError) as exc:
        raise UpstreamBroken(f"the answer broke off: {exc!r}") from exc


async def read_body(reader: asyncio.StreamReader, head: ResponseHead, limit: int = 1024 * 1024) -> bytes:
    parts, size = [], 0
    async for piece in body_pieces(reader, head):
        parts.append(piece)
        size += len(piece)
        if size > limit:
            break
    return b"".join(parts)


class EventDecoder:
    """Server-sent events, fed bytes as they come: the ``data`` of each complete event."""

    def __init__(self) -> None:
        self.buffer = b""
        self.data: list[str] = []

    def feed(self, piece: bytes) -> list[str]:
        self.buffer += piece
        events: list[str] = []
        while True:
            end = self.buffer.find(b"\n")
            if end < 0:
                return events
            line = self.buffer[:end].rstrip(b"\r").decode("utf-8", errors="replace")
            self.buffer = self.buffer[end + 1 :]
            if not line:
                if self.data:
                    events.append("\n".join(self.data))
                    self.data = []
            elif line.startswith("data:"):
                value = line[len("data:") :]
                self.data.append(value[1:] if value.startswith(" ") else value)
            # comments (':…') and other fields (event, id, retry) carry nothing the front uses
