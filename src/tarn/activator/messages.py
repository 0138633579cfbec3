"""HTTP/1.1 as the activator passes it on, and the answers it makes itself.

A request is read whole (head and body, by tarn.stdlib.http1, within the activator's bounds) before
it is held, so it can be sent again to another instance when the first refuses the connection.
Bodies pass through byte for byte; a chunked body is forwarded de-chunked with its length (the same
bytes, another framing).
"""

from __future__ import annotations

from tarn.stdlib import http1
from tarn.stdlib.http1 import Request

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


def forwarded(request: Request, host: str) -> bytes:
    """The request for an instance: end-to-end headers as received, the body with its length. As
    HTTP/1.1 it needs a Host: the instance's (``host``) when an HTTP/1.0 client sent none."""
    lines = [f"{request.method} {request.target} HTTP/1.1"]
    lines += [] if any(name == "host" for name, _value in request.headers) else [f"host: {host}"]
    lines += [f"{k}: {v}" for k, v in request.headers if k not in HOP_BY_HOP | {"content-length"}]
    lines += [f"content-length: {len(request.body)}", "connection: close"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + request.body


def answer(
    status: int,
    text: str,
    extra: dict[str, str] | None = None,
    content_type: str = "text/plain; charset=utf-8",
) -> bytes:
    """A small answer the activator makes itself (always closing the connection)."""
    return http1.answer(status, (text + "\n").encode(), content_type, extra)


def with_close(head: bytes) -> bytes:
    """An instance's response head (without the blank line) with ``Connection: close``: the
    activator ends each connection after one exchange."""
    lines = head.split(b"\r\n")
    kept = [line for line in lines[1:] if not line.lower().startswith((b"connection:", b"keep-alive:"))]
    return b"\r\n".join([lines[0], *kept, b"Connection: close"]) + b"\r\n\r\n"
