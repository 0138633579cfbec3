"""HTTP/1.1 as the OpenAI front streams it: answers in chunked encoding (so a stream cut short is
an incomplete message to the client, never one that looks complete), and Triton's answers read
back, chunked or not, with their server-sent events decoded as they arrive. Requests are read, and
whole answers made, by tarn.stdlib.http1 (h11), like the activator's.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass

import h11

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


@dataclass(frozen=True)
class ResponseHead:
    status: int
    headers: Mapping[str, str]  # names in lower case


class Exchange:
    """One request to Triton and its answer, on a connection of its own closed after it (h11
    judges the answer's framing: chunked, Content-Length, or up to the connection's end)."""

    def __init__(
        self, method: str, path: str, host: str, body: bytes, accept: str = "application/json"
    ) -> None:
        self._h11 = h11.Connection(h11.CLIENT)
        headers = [
            ("Host", host),
            ("Accept", accept),
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(body))),
            ("Connection", "close"),
        ]
        self.request = b"".join(
            self._h11.send(event) or b""
            for event in (
                h11.Request(method=method, target=path, headers=headers),
                h11.Data(data=body),
                h11.EndOfMessage(),
            )
        )

    async def _next(self, reader: asyncio.StreamReader) -> h11.Event:
        try:
            while True:
                event = self._h11.next_event()
                if isinstance(event, h11.Event):
                    return event
                if event is not h11.NEED_DATA:  # PAUSED: more after the answer's end
                    raise UpstreamBroken("bytes after the answer's end")
                self._h11.receive_data(await reader.read(http1.READ_BYTES))
        except (h11.RemoteProtocolError, OSError) as exc:
            raise UpstreamBroken(f"the answer broke off: {exc!r}") from exc

    async def head(self, reader: asyncio.StreamReader) -> ResponseHead:
        event = await self._next(reader)
        while isinstance(event, h11.InformationalResponse):  # a 100 Continue Triton may send
            event = await self._next(reader)
        if not isinstance(event, h11.Response):
            raise UpstreamBroken(f"no answer: {event!r}")
        headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in event.headers}
        return ResponseHead(event.status_code, headers)

    async def pieces(self, reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
        """The answer's body as it arrives, de-chunked. UpstreamBroken if it ends before its end."""
        while isinstance(event := await self._next(reader), h11.Data):
            yield bytes(event.data)
        if not isinstance(event, h11.EndOfMessage):
            raise UpstreamBroken(f"the answer broke off: {event!r}")

    async def body(self, reader: asyncio.StreamReader, limit: int = 1024 * 1024) -> bytes:
        """The answer's body whole, or its first ``limit`` bytes and a little more."""
        parts, size = [], 0
        async for piece in self.pieces(reader):
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
