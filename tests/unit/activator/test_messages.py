"""The activator's HTTP/1.1 parsing (tarn.activator.messages): malformed heads refused, one body
length, every answer closing its connection."""

from __future__ import annotations

import pytest

from tarn.activator.messages import BadRequest, body_length, parse_head, with_close


@pytest.mark.parametrize(
    "head",
    [b"GET / HTTP/1.1\r\nBad Header: x", b"GET /\r\n", b"GET / HTTP/2\r\nHost: a", b"G@T / HTTP/1.1"],
)
def test_bad_heads(head: bytes) -> None:
    with pytest.raises(BadRequest):
        parse_head(head)


def test_content_length_and_chunked_together_are_refused() -> None:
    with pytest.raises(BadRequest):
        body_length((("Content-Length", "3"), ("Transfer-Encoding", "chunked")))
    assert body_length((("content-length", "12"),)) == 12
    assert body_length(()) == 0


def test_answers_close_the_connection() -> None:
    head = b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\nContent-Length: 2"
    assert with_close(head) == b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n"


@pytest.mark.parametrize("length", ["\u00b2", "1\u00b9", "9" * 5000, "-1", "", "0x10"])
def test_a_content_length_that_is_no_ascii_number_is_a_bad_request(length: str) -> None:
    # issue 48, row 10: '²'.isdigit() is true and int('²') raised a ValueError (a 500).
    with pytest.raises(BadRequest):
        body_length((("Content-Length", length),))
