"""HTTP/1.1 requests as the activator reads them, and the answers it makes itself.

A request is read whole (head and body) before it is held, so it can be sent again to another
instance when the first refuses the connection. Bodies pass through byte for byte; a chunked body
is forwarded de-chunked with its length (the same bytes, another framing). Limits keep a bad or
huge request from taking the activator's memory: the head's size, and the body's, which is checked
against the bytes still free before it is read.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from tarn.stdlib.http_fields import content_length

MAX_HEAD = 64 * 1024
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "expect",
    }
)


class BadRequest(Exception):
    """Not a request the activator can pass on; the message goes into a 400."""


class TooLarge(Exception):
    """A body larger than the room left for held requests."""


@dataclass(frozen=True)
class Request:
    method: str
    target: str
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def header(self, name: str) -> str | None:
        wanted = name.lower()
        return next((value for key, value in self.headers if key.lower() == wanted), None)

    def encode(self) -> bytes:
        """The request for an instance: end-to-end headers as received, the body with its length."""
        lines = [f"{self.method} {self.target} HTTP/1.1"]
        lines += [f"{k}: {v}" for k, v in self.headers if k.lower() not in HOP_BY_HOP | {"content-length"}]
        lines += [f"Content-Length: {len(self.body)}", "Connection: close"]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + self.body


def parse_head(head: bytes) -> tuple[str, str, tuple[tuple[str, str], ...]]:
    """Method, target and headers of a request head (without the blank line). BadRequest if malformed."""
    try:
        text = head.decode("latin-1")
    except UnicodeDecodeError as exc:  # latin-1 decodes any byte; kept for the type checker's sake
        raise BadRequest("undecodable head") from exc
    request_line, *header_lines = text.split("\r\n")
    parts = request_line.split(" ")
    if len(parts) != 3 or not parts[0].isalpha() or not parts[2].startswith("HTTP/1."):
        raise BadRequest("malformed request line")
    headers = []
    for line in header_lines:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip() or any(c in name for c in " \t"):
            raise BadRequest("malformed header line")
        headers.append((name, value.strip()))
    return parts[0], parts[1], tuple(headers)


def body_length(headers: tuple[tuple[str, str], ...]) -> int | None:
    """The Content-Length, None for a chunked body; BadRequest when they are missing-yet-needed or odd."""
    lengths = {v for k, v in headers if k.lower() == "content-length"}
    chunked = any(k.lower() == "transfer-encoding" and "chunked" in v.lower() for k, v in headers)
    if chunked:
        if lengths:
            raise BadRequest("both Content-Length and chunked")  # a request smuggling shape
        return None
    if not lengths:
        return 0
    length = content_length(next(iter(lengths))) if len(lengths) == 1 else None
    if length is None:
        raise BadRequest("bad Content-Length")
    return length


async def read_request(reader: asyncio.StreamReader, room: int) -> Request | None:
    """The next request on a connection (None at a clean end); ``room``: the most body bytes allowed."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial.strip():
            return None
        raise BadRequest("connection closed inside the head") from exc
    except asyncio.LimitOverrunError as exc:
        raise BadRequest(f"head over {MAX_HEAD} bytes") from exc
    method, target, headers = parse_head(head[:-4])
    length = body_length(headers)
    if length is None:
        body = await _read_chunked(reader, room)
    elif length > room:
        raise TooLarge(f"body of {length} bytes")
    else:
        body = await _read_exactly(reader, length)
    return Request(method, target, headers, body)


async def _read_exactly(reader: asyncio.StreamReader, count: int) -> bytes:
    try:
        return await reader.readexactly(count)
    except asyncio.IncompleteReadError as exc:
        raise BadRequest("connection closed inside the body") from exc


async def _read_chunked(reader: asyncio.StreamReader, room: int) -> bytes:
    parts: list[bytes] = []
    size = 0
    while True:
        line = await _read_line(reader)
        try:
            chunk = int(line.split(b";")[0].strip(), 16)
        except ValueError as exc:
            raise BadRequest("bad chunk size") from exc
        if chunk == 0:
            while await _read_line(reader):  # trailers, dropped
                pass
            return b"".join(parts)
        size += chunk
        if size > room:
            raise TooLarge(f"chunked body over {room} bytes")
        parts.append(await _read_exactly(reader, chunk))
        if await _read_exactly(reader, 2) != b"\r\n":
            raise BadRequest("chunk not followed by CRLF")


async def _read_line(reader: asyncio.StreamReader) -> bytes:
    try:
        return (await reader.readuntil(b"\r\n"))[:-2]
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
        raise BadRequest("bad chunked framing") from exc


def answer(
    status: int,
    reason: str,
    text: str,
    extra: dict[str, str] | None = None,
    content_type: str = "text/plain; charset=utf-8",
) -> bytes:
    """A small answer the activator makes itself (always closing the connection)."""
    body = (text + "\n").encode()
    headers = {"Content-Type": content_type, "Content-Length": str(len(body))}
    headers |= extra or {}
    headers["Connection"] = "close"
    head = f"HTTP/1.1 {status} {reason}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return head.encode("latin-1") + b"\r\n" + body


def with_close(head: bytes) -> bytes:
    """An instance's response head (without the blank line) with ``Connection: close``: the
    activator ends each connection after one exchange."""
    lines = head.split(b"\r\n")
    kept = [line for line in lines[1:] if not line.lower().startswith((b"connection:", b"keep-alive:"))]
    return b"\r\n".join([lines[0], *kept, b"Connection: close"]) + b"\r\n\r\n"
