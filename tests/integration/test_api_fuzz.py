"""The controller's API under random input (issue 11): random methods, paths, query strings,
headers and bodies, malformed request lines, oversized headers and bodies, with and without the
token, against the real HTTP server on loopback with a running control loop (the RM behind it is
the scripted one of the unit tests). Never a 5xx, never a hang, never a change without the token.

Seeded (TARN_FUZZ_SEED, default 11) so that a failure can be replayed; TARN_FUZZ_REQUESTS sets
how many (default 10,000)."""

from __future__ import annotations

import contextlib
import os
import random
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from tarn.controller.server import IDLE_TIMEOUT_S, Api, serve
from tarn.stdlib.api_token import Secret
from tests.support.controller import TOKEN, Lab, make

SEED = int(os.environ.get("TARN_FUZZ_SEED", "11"))
REQUESTS = int(os.environ.get("TARN_FUZZ_REQUESTS", "10000"))
METHODS = ["GET", "POST", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS", "TRACE", "CONNECT", "get", "FOO", ""]
PATHS = [
    "/", "/health", "/instances", "/metrics", "/dashboard", "/config", "/instances/triton-0/drain",
    "/instances/triton-1/drain", "/instances/triton-9/drain", "/instances//drain",
    "/instances/../config", "/%00", "/instances/%2e%2e/drain", "//", "/metrics/", "/dashboard?token=",
    "*", "http://x/health", "/authorize",
]  # fmt: skip
QUERIES = [
    "", "?", "?format=text", "?format=json", "?format=xml", "?token=" + TOKEN, "?token=wrong",
    "?wait=false", "?wait=maybe", "?%zz", "?a=1&a=2", "?format=text&format=json", "?" + "x=" * 5000,
    "?=&=&", "?model=add_one&action=list&user=bob", "?model=%00&action=infer",
]  # fmt: skip
HEADERS = [
    {}, {"Accept": "text/plain"}, {"Authorization": "Bearer wrong"},
    {"Authorization": "Basic Zm9vOmJhcg=="}, {"X-TARN-Token": "wrong"}, {"X-TARN-Token": ""},
    {"Content-Length": "-1"}, {"Content-Length": "999999999"}, {"Content-Length": "abc"},
    {"Transfer-Encoding": "chunked"}, {"X-Big": "y" * 70000}, {"Accept": "\x01\x02"},
    {"X-TARN-User": "alice"}, {"X-TARN-User": "\x7f" * 300},
]  # fmt: skip
MALFORMED = [
    b"GARBAGE\r\n\r\n", b"GET\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n", b"\x16\x03\x01\x00\xa5\x01",
    b"GET /health HTTP/1.1\r\nBad Header\r\n\r\n", b"GET " + b"/a" * 40000 + b" HTTP/1.1\r\n\r\n",
]  # fmt: skip
BODIES = [b"", b"{}", b"not json", b"\x00\xff" * 100, b"z" * 200_000]


@pytest.fixture
def served() -> Iterator[tuple[Lab, int]]:
    lab = make(instances=2, cooldown_ms=600_000, tick_seconds=0.2)
    lab.ticks(2)
    stop = threading.Event()
    loop = threading.Thread(target=lab.controller.run, args=(stop,), daemon=True)
    server = serve(Api(lab.controller, Secret(TOKEN)), "127.0.0.1", 0)
    loop.start()
    yield lab, int(server.server_address[1])
    stop.set()
    server.shutdown()
    loop.join(5)


def request_bytes(rng: random.Random, with_token: bool) -> bytes:
    method = rng.choice(METHODS)
    path = rng.choice(PATHS) + rng.choice(QUERIES)
    if with_token and method == "POST" and "drain" in path:
        path = path.split("?")[0] + "?wait=false"  # a drain with wait=true waits for the drain, by design
    headers = dict(rng.choice(HEADERS))
    if with_token:
        headers[rng.choice(["X-TARN-Token", "Authorization"])] = (
            TOKEN if rng.random() < 0.5 else f"Bearer {TOKEN}"
        )
    body = rng.choice(BODIES)
    if "Content-Length" not in headers and body:
        headers["Content-Length"] = str(len(body))
    if rng.random() < 0.03:  # a malformed request line or header block
        return rng.choice(MALFORMED)
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return head.encode("latin-1", "replace") + b"\r\n" + body


def status_of(port: int, raw: bytes) -> int | None:
    """The status code answered (None: the server closed without one, which is not a 5xx)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        with contextlib.suppress(OSError):  # it may close early on an oversized request
            sock.sendall(raw)
            sock.shutdown(socket.SHUT_WR)  # all sent: a partial request ends here
        sock.settimeout(5)  # a hang fails the test here
        reply = b""
        while b"\r\n" not in reply:
            try:
                chunk = sock.recv(4096)
            except ConnectionResetError:
                break
            if not chunk:
                break
            reply += chunk
    if not reply.startswith(b"HTTP/"):
        return None
    return int(reply.split(b" ", 2)[1])


def test_fuzz_never_5xx_never_hangs_never_changes_state_without_the_token(served: tuple[Lab, int]) -> None:
    lab, port = served
    rng = random.Random(SEED)  # noqa: S311 - reproducible test input, not a secret
    codes: Counter[int | None] = Counter()
    untokened = REQUESTS * 3 // 4  # first without the token (the state must not move), then with it
    state = lab.controller.snapshot.drains, list(lab.rm.calls)
    started = time.monotonic()
    for n in range(REQUESTS):
        with_token = n >= untokened
        if n == untokened:
            assert (lab.controller.snapshot.drains, lab.controller._inbox.pending(), lab.rm.calls) == (
                {},
                (),
                [],
            )
            assert (lab.controller.snapshot.drains, lab.rm.calls) == state
        raw = request_bytes(rng, with_token)
        try:
            code = status_of(port, raw)
        except TimeoutError:
            pytest.fail(f"request {n} (seed {SEED}) hung: {raw[:200]!r}")
        codes[code] += 1
        assert code is None or code < 500, f"request {n} (seed {SEED}) answered {code}"
    took = time.monotonic() - started
    answers = dict(sorted(codes.items(), key=str))
    print(f"\n[api fuzz] {REQUESTS} requests in {took:.1f} s, seed {SEED}: {answers}")
    for expected in (200, 400, 401, 404, 405):  # the fuzz reached every kind of answer
        assert codes[expected] > 0, expected


def test_a_half_sent_request_is_dropped_after_the_idle_timeout(served: tuple[Lab, int]) -> None:
    port = served[1]
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x")  # and then nothing
        started = time.monotonic()
        assert sock.recv(100) == b""  # the server closes the connection
        waited = time.monotonic() - started
    assert IDLE_TIMEOUT_S - 1 < waited < IDLE_TIMEOUT_S + 5
