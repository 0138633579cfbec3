"""tarn.stdlib.http1: requests read whole within their bounds, fed bytes through asyncio's own
StreamReader; each refusal is the 4xx it names (issue 48, item 1)."""

from __future__ import annotations

import asyncio

import pytest

from tarn.stdlib import http1
from tarn.stdlib.http1 import Bounds, ClientError

BOUNDS = Bounds(body_bytes=1024, read_s=5.0)


class Writer:
    """What a listener writes before it has read the request (a 100 Continue)."""

    def __init__(self) -> None:
        self.written: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.written.append(data)


def request_of(
    raw: bytes,
    bounds: Bounds = BOUNDS,
    eof: bool = True,
    writer: Writer | None = None,
    charge: http1.Charge | None = None,
) -> http1.Request | None:
    async def read() -> http1.Request | None:  # a StreamReader belongs to a running loop
        reader = asyncio.StreamReader()
        reader.feed_data(raw)
        if eof:
            reader.feed_eof()
        return await http1.read_request(reader, writer, bounds, charge)  # type: ignore[arg-type]

    return asyncio.run(read())


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nX-TARN-User: alice\r\n\r\n{}",
            ("POST", "/v1/completions", "/v1/completions", "alice", b"{}"),
        ),
        (
            b"GET /v1/models?limit=3 HTTP/1.1\r\nHost: x\r\n\r\n",
            ("GET", "/v1/models?limit=3", "/v1/models", "", b""),
        ),
        (b"GET /health HTTP/1.0\r\n\r\n", ("GET", "/health", "/health", "", b"")),  # HAProxy's check
        (  # a chunked body, read whole (the front used to refuse it)
            b"POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"2\r\n{}\r\n3;ext=1\r\nabc\r\n0\r\nTrailer: t\r\n\r\n",
            ("POST", "/v2/models/m/infer", "/v2/models/m/infer", "", b"{}abc"),
        ),
    ],
)
def test_requests(raw: bytes, expected: tuple[str, str, str, str, bytes]) -> None:
    request = request_of(raw)
    assert request is not None
    assert (
        request.method,
        request.target,
        request.path,
        request.header("X-TARN-User"),
        request.body,
    ) == expected


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"BROKEN\r\n\r\n", 400),
        (b"GET / HTTP/2\r\nHost: a\r\n\r\n", 400),
        (b"G@T / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: a\r\nBad Header: x\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: x\r\nno colon\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\n\r\n", 400),  # HTTP/1.1 without Host (RFC 9112 3.2)
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: x\r\n\r\n", 400),
        ("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: \u00b2\r\n\r\n".encode(), 400),  # row 10
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: " + b"9" * 5000 + b"\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 400),
        (
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            400,
        ),
        (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 400),  # h11 hints 501
        (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nshort", 400),  # closed inside the body
        (b"GET / HTTP/1.1\r\nHost:", 400),  # closed inside the head
        (b"GET /\xff HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2000\r\n\r\n", 413),  # declared
        (
            b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n7d0\r\n"
            + b"x" * 2000
            + b"\r\n0\r\n\r\n",
            413,
        ),
        (b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70_000, 431),  # a head over 64 KiB
        (b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n", 431),  # whole in a later read
    ],
)
def test_bad_requests_are_the_clients_mistake(raw: bytes, status: int) -> None:
    with pytest.raises(ClientError) as refused:
        request_of(raw)
    assert refused.value.status == status


def test_a_body_in_tiny_chunks_is_refused_past_the_bound_on_pieces() -> None:
    # 1-byte chunks cost the parser 10 s of CPU a megabyte, the loop stalled (the fuzzing found it)
    chunked = b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    with pytest.raises(ClientError) as refused:
        request_of(chunked + b"1\r\nx\r\n" * 20_000 + b"0\r\n\r\n", Bounds(1 << 20, 5.0))
    assert refused.value.status == 400
    request = request_of(chunked + b"2000\r\n" + b"x" * 8192 + b"\r\n0\r\n\r\n", Bounds(1 << 20, 5.0))
    assert request is not None
    assert len(request.body) == 8192


def test_half_a_request_is_a_408_at_the_read_bound() -> None:
    with pytest.raises(ClientError) as refused:
        request_of(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{", Bounds(1024, 0.2), eof=False)
    assert refused.value.status == 408


def test_a_client_waiting_for_100_continue_is_told_to_go_on() -> None:
    written: list[bytes] = []

    async def read() -> http1.Request | None:
        reader = asyncio.StreamReader()

        class GoOn:  # a client that sends its body once told to (curl, beyond 1 KiB)
            def write(self, data: bytes) -> None:
                written.append(data)
                reader.feed_data(b"{}")
                reader.feed_eof()

        reader.feed_data(b"POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n")
        return await http1.read_request(reader, GoOn(), BOUNDS)  # type: ignore[arg-type]

    request = asyncio.run(read())
    assert request is not None
    assert request.body == b"{}"
    assert written == [b"HTTP/1.1 100 Continue\r\n\r\n"]


def test_a_body_over_the_bound_is_refused_before_100_continue() -> None:
    writer = Writer()
    with pytest.raises(ClientError) as refused:
        request_of(
            b"POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5000\r\n\r\n",
            writer=writer,
        )
    assert (refused.value.status, writer.written) == (413, [])


def test_each_body_piece_is_charged_and_a_charge_may_refuse() -> None:
    charged: list[int] = []

    def charge(size: int) -> None:
        if sum(charged) + size > 3:
            raise ClientError(503, "no room")
        charged.append(size)

    chunked = b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n"
    request = request_of(chunked + b"1\r\nc\r\n0\r\n\r\n", charge=charge)
    assert request is not None
    assert request.body == b"abc"
    assert charged == [2, 1]
    charged.clear()
    with pytest.raises(ClientError) as refused:
        request_of(chunked + b"2\r\ncd\r\n0\r\n\r\n", charge=charge)
    assert refused.value.status == 503


def test_nothing_sent_is_no_request() -> None:
    assert request_of(b"") is None


@pytest.mark.parametrize(("hint", "status"), [(400, 400), (431, 431), (501, 400), (500, 400)])
def test_h11s_hints_become_4xx(hint: int, status: int) -> None:
    assert http1.client_status(hint) == status


def test_answers_close_the_connection() -> None:
    assert http1.answer(404, b"{}") == (
        b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
        b"Connection: close\r\n\r\n{}"
    )
    assert http1.answer(503, b"x", "text/plain", {"Retry-After": "1", "Connection": "keep-alive"}) == (
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 1\r\n"
        b"Retry-After: 1\r\nConnection: close\r\n\r\nx"
    )
