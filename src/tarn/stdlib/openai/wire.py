"""HTTP/1.1 as the OpenAI front streams it: answers in chunked encoding (so a stream cut short is
an incomplete message to the client, never one that looks complete), and Triton's answers read
back, chunked or not, with their server-sent events decoded as they arrive. Requests are read, and
whole answers made, by tarn.stdlib.http1 (h11), like the activator's.

Triton's answers are read here, not with h11: Triton is the front's own local peer, not a client,
and every token is one chunk, so the reader's cost is paid per token. h11 took about 20 us more per
chunk, and the front streamed 0.88x as fast (bench/front_http.py); this reader is what the front
had before the new layer, unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass

from tarn.stdlib import http1


class UpstreamBroken(Exception):
    """Triton's answer stopped or went wrong before its end."""


def stream_head() -> bytes:
    """The head of a streamed answer: events, chunked, not cached nor buffered by a proxy."""
    return http1.head(
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
            length = head.headers["content-length"]
            if not (length.isascii() and length.isdigit() and len(length) <= 15):
                raise UpstreamBroken(f"bad Content-Length {length[:20]!r}")
            left = int(length)
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
