"""The OpenAI front's streamed answers, its exchanges with Triton and server-sent-event decoding
(tarn.stdlib.openai.wire), fed bytes through asyncio's own StreamReader. Requests: test_http1."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest

from tarn.stdlib.openai import wire
from tarn.stdlib.openai.wire import EventDecoder, ResponseHead, UpstreamBroken


def reader_of(data: bytes, eof: bool = True) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    if eof:
        reader.feed_eof()
    return reader


T = TypeVar("T")


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coroutine)


@pytest.mark.parametrize(
    ("pieces", "events"),
    [
        ([b'data: {"a":1}\n\n'], ['{"a":1}']),
        ([b'data: {"a"', b":1}\n", b"\n"], ['{"a":1}']),  # an event across pieces
        ([b"data: one\r\n\r\ndata: two\r\n\r\n"], ["one", "two"]),  # CRLF lines
        ([b"data: a\ndata: b\n\n"], ["a\nb"]),  # several data lines make one event
        ([b": comment\nevent: x\nid: 3\ndata:tight\n\n"], ["tight"]),
        ([b"data: open"], []),  # no blank line yet: no event
        ([b"\n\n"], []),
    ],
)
def test_event_decoder(pieces: list[bytes], events: list[str]) -> None:
    decoder = EventDecoder()
    got = [event for piece in pieces for event in decoder.feed(piece)]
    assert got == events


def test_the_event_decoder_takes_bytes_one_at_a_time() -> None:
    data = 'data: {"text_output":"é"}\n\ndata: [2]\n\n'.encode()
    decoder = EventDecoder()
    got = [event for index in range(len(data)) for event in decoder.feed(data[index : index + 1])]
    assert got == ['{"text_output":"é"}', "[2]"]


def test_stream_framing() -> None:
    head = wire.stream_head()
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"Content-Type: text/event-stream; charset=utf-8\r\n" in head
    assert b"Transfer-Encoding: chunked\r\n" in head
    assert wire.chunk(b"data: x\n\n") == b"9\r\ndata: x\n\n\r\n"
    assert wire.LAST_CHUNK == b"0\r\n\r\n"


async def pieces_of(raw: bytes) -> tuple[ResponseHead, list[bytes]]:
    reader = reader_of(raw)
    head = await wire.read_response_head(reader)
    return head, [piece async for piece in wire.body_pieces(reader, head)]


@pytest.mark.parametrize(
    ("raw", "status", "body"),
    [
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n",
            200,
            [b"hello", b" world"],
        ),
        (b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\n{}", 404, [b"{}"]),
        (b"HTTP/1.1 200 OK\r\n\r\nuntil the end", 200, [b"until the end"]),  # no framing: up to EOF
    ],
)
def test_upstream_bodies(raw: bytes, status: int, body: list[bytes]) -> None:
    head, got = run(pieces_of(raw))
    assert head.status == status
    assert b"".join(got) == b"".join(body)


@pytest.mark.parametrize(
    "raw",
    [
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",  # no last chunk
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n9\r\nhel",  # inside a chunk
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
        "HTTP/1.1 200 OK\r\nContent-Length: \u00b2\r\n\r\nx".encode(),
        b"",  # no answer at all
        b"SMTP ready\r\n\r\n",
    ],
)
def test_upstream_answers_cut_short_are_broken(raw: bytes) -> None:
    with pytest.raises(UpstreamBroken):
        run(pieces_of(raw))


def test_requests_to_triton() -> None:
    data = wire.request_bytes(
        "POST", "/v2/models/m/generate_stream", "127.0.0.1:8000", b"{}", "text/event-stream"
    )
    assert data == (
        b"POST /v2/models/m/generate_stream HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nAccept: text/event-stream\r\n"
        b"Content-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
    )
