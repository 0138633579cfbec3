"""What the activator passes on (tarn.activator.messages): end-to-end headers, the body with its
length, every exchange closing its connection. Reading requests: tests/unit/stdlib/test_http1.py."""

from __future__ import annotations

from tarn.activator.messages import answer, forwarded, with_close
from tarn.stdlib.http1 import Request


def test_a_request_is_passed_on_with_its_end_to_end_headers_and_its_length() -> None:
    request = Request(
        "POST",
        "/v2/models/m/infer?x=1",
        (("host", "a"), ("transfer-encoding", "chunked"), ("expect", "100-continue"), ("x-tarn-user", "bob")),
        b"{}",
    )
    assert forwarded(request, "10.0.0.1:8000") == (
        b"POST /v2/models/m/infer?x=1 HTTP/1.1\r\nhost: a\r\nx-tarn-user: bob\r\n"
        b"content-length: 2\r\nconnection: close\r\n\r\n{}"
    )


def test_a_request_without_host_is_passed_on_with_the_instances() -> None:
    # HTTP/1.0 lets a client leave Host out; HTTP/1.1, which the instance gets, does not (found by
    # the fuzzing).
    request = Request("POST", "/v2/models/m/infer", (("content-length", "2"),), b"{}")
    assert forwarded(request, "10.0.0.1:8000") == (
        b"POST /v2/models/m/infer HTTP/1.1\r\nhost: 10.0.0.1:8000\r\ncontent-length: 2\r\n"
        b"connection: close\r\n\r\n{}"
    )


def test_answers_close_the_connection() -> None:
    head = b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\nContent-Length: 2"
    assert with_close(head) == b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n"
    assert answer(504, "activator: late", {"Retry-After": "5"}) == (
        b"HTTP/1.1 504 Gateway Timeout\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 16\r\n"
        b"Retry-After: 5\r\nConnection: close\r\n\r\nactivator: late\n"
    )
