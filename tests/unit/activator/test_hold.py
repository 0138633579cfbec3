"""The activator on loopback: held requests, passed on byte for byte once an instance is ready,
503 with Retry-After at the limits, 504 with Retry-After at the timeout, instances that refuse
skipped, and the demand reports. The instance is a plain HTTP server here;
tests/integration/test_activator_haproxy.py puts the activator behind the real HAProxy as its
backup server, and the lab's e2e behind Triton."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import itertools
import json
import re
import select
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tarn.activator.hold import Activator, Limits
from tarn.activator.metrics import metrics_text
from tarn.haproxy.plan import Endpoint
from tarn.haproxy.sources import Instance
from tests.support.loopback import eventually, stop_loop


class Echo(BaseHTTPRequestHandler):
    """An instance: answers the request's body, its method and path in headers."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Type", self.headers.get("Content-Type", "application/octet-stream"))
        self.send_header("X-Path", self.path)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def instance() -> Iterator[Endpoint]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield Endpoint("127.0.0.1", server.server_address[1])
    server.shutdown()


@dataclass
class Running:
    activator: Activator
    port: int
    ready: set[Instance] = field(default_factory=set)
    reports: list[tuple[int, float]] = field(default_factory=list)

    def call(
        self, body: bytes = b"", path: str = "/v2/models/m/infer", headers: dict[str, str] | None = None
    ):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        conn.request("POST", path, body=body, headers=headers or {})
        reply = conn.getresponse()
        return reply.status, dict(reply.getheaders()), reply.read()


@contextlib.contextmanager
def run_activator(limits: Limits) -> Iterator[Running]:
    loop = asyncio.new_event_loop()
    holder: list[Running] = []

    def on_demand(held: int, oldest: float) -> None:
        holder[0].reports.append((held, oldest))

    activator = Activator(lambda: frozenset(holder[0].ready), on_demand, limits)
    server = loop.run_until_complete(asyncio.start_server(activator.handle, "127.0.0.1", 0))
    holder.append(Running(activator, server.sockets[0].getsockname()[1]))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield holder[0]
    finally:
        stop_loop(loop, thread)


@pytest.fixture
def running() -> Iterator[Running]:
    with run_activator(Limits(hold_timeout_s=10, max_held=200)) as running:
        yield running


def test_held_requests_are_answered_once_an_instance_is_ready(running: Running, instance: Endpoint) -> None:
    bodies = [b'{"inputs": [%d]}' % n if n % 2 else bytes(range(256)) * (n + 1) for n in range(50)]
    with ThreadPoolExecutor(50) as pool:
        futures = [pool.submit(running.call, body) for body in bodies]
        deadline = time.monotonic() + 5
        while running.activator.held < 50 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert running.activator.held == 50  # all waiting, none refused
        running.ready.add(Instance(instance))
        replies = [f.result() for f in futures]
    assert [r[0] for r in replies] == [200] * 50
    assert [r[2] for r in replies] == bodies  # JSON and binary, byte for byte
    assert all(r[1]["Connection"] == "close" for r in replies)
    assert eventually(lambda: running.activator.stats.outcomes["after_hold"] == 50)
    assert eventually(lambda: running.activator.held == 0)
    assert max(report[0] for report in running.reports) == 50
    assert eventually(lambda: running.reports[-1][0] == 0)
    assert running.activator.stats.wakes == 1


def test_a_ready_instance_takes_the_request_at_once(running: Running, instance: Endpoint) -> None:
    running.ready.add(Instance(instance))
    status, headers, body = running.call(b"x", path="/v2/health/ready?q=1")
    assert (status, body, headers["X-Path"]) == (200, b"x", "/v2/health/ready?q=1")
    assert eventually(lambda: running.activator.stats.outcomes["direct"] == 1)  # counted after the relay
    assert running.reports == []  # nothing held, no demand


def test_an_instance_that_refuses_is_skipped(running: Running, instance: Endpoint) -> None:
    with socket.socket() as probe:  # a port nobody listens on: the killed instance
        probe.bind(("127.0.0.1", 0))
        dead = Endpoint("127.0.0.1", probe.getsockname()[1])
    running.ready.add(Instance(dead))
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(running.call, b"payload")
        time.sleep(0.3)
        running.ready.add(Instance(instance))  # the replacement registers
        assert future.result()[0] == 200


def test_the_hold_ends_in_504_with_retry_after() -> None:
    with run_activator(Limits(hold_timeout_s=0.3, retry_after_s=7)) as running:
        began = time.monotonic()
        status, headers, body = running.call(b"{}")
        assert (status, headers["Retry-After"]) == (504, "7")  # 503 would be retried by HAProxy
        assert 0.3 <= time.monotonic() - began < 2
        assert b"within 0.3 s" in body
        assert eventually(lambda: running.activator.stats.outcomes["timeout"] == 1)


def test_over_the_limits_503_at_once() -> None:
    with run_activator(Limits(hold_timeout_s=1.5, max_held=5, max_held_bytes=1000)) as running:
        with ThreadPoolExecutor(10) as pool:
            futures = [pool.submit(running.call, b"{}") for count in range(5)]
            while running.activator.held < 5:
                time.sleep(0.02)
            began = time.monotonic()
            status, headers, body = running.call(b"{}")
            assert (status, headers["Retry-After"]) == (503, "5")
            # a body larger than the room left: refused before it is read
            status, headers, body = running.call(b"x" * 2000)
            assert status == 503
            assert b"room" in body
            assert time.monotonic() - began < 1
            assert all(f.result()[0] == 504 for f in futures)  # the held ones time out
        assert eventually(lambda: running.activator.stats.outcomes["overflow"] == 2)


def test_chunked_body_passes_through(running: Running, instance: Endpoint) -> None:
    running.ready.add(Instance(instance))
    conn = http.client.HTTPConnection("127.0.0.1", running.port, timeout=10)
    conn.request("POST", "/infer", body=iter([b"abc", b"", b"\x00\xff" * 100]), encode_chunked=True)
    reply = conn.getresponse()
    assert (reply.status, reply.read()) == (200, b"abc" + b"\x00\xff" * 100)


def test_a_malformed_request_gets_400(running: Running) -> None:
    with socket.create_connection(("127.0.0.1", running.port), timeout=5) as raw:
        raw.sendall(b"NOT A REQUEST\r\n\r\n")
        assert raw.recv(100).startswith(b"HTTP/1.1 400")


def test_half_a_request_is_answered_408_within_the_read_bound() -> None:
    # issue 48, row 4: the activator read a request for as long as its client took.
    with (
        run_activator(Limits(read_s=0.3)) as running,
        socket.create_connection(("127.0.0.1", running.port)) as raw,
    ):
        raw.settimeout(5)
        began = time.monotonic()
        raw.sendall(b"POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{")
        reply = raw.recv(65536)
        assert time.monotonic() - began < 2
    assert reply.startswith(b"HTTP/1.1 408 "), reply[:100]


def test_a_body_over_the_bound_gets_a_413_the_client_can_read() -> None:
    with run_activator(Limits(max_body_bytes=1 << 20)) as running:
        status, _headers, body = running.call(b"x" * (5 * 1024 * 1024))
    assert status == 413
    assert b"over 1048576" in body


def test_an_openai_request_it_cannot_read_gets_openais_error_shape() -> None:
    """Issue 48: the 413 and 408 of a /v1 request were plain text; the official client reads
    OpenAI's JSON. Other paths keep the plain answer."""
    with run_activator(Limits(max_body_bytes=1 << 20, read_s=0.3)) as running:
        status, headers, body = running.call(b"x" * (2 * 1024 * 1024), path="/v1/chat/completions")
        assert (status, headers["Content-Type"]) == (413, "application/json")
        assert json.loads(body)["error"]["code"] == "request_too_large"
        with socket.create_connection(("127.0.0.1", running.port), timeout=5) as raw:
            raw.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{")
            reply = raw.recv(65536)
        head, _sep, answer = reply.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408 "), reply[:100]
        assert json.loads(answer)["error"]["code"] == "request_timeout"


def test_bodies_being_read_share_the_room_of_held_ones() -> None:
    # issue 48, row 4: each slow upload could take up to the whole room (256 MiB) at once.
    with run_activator(Limits(max_held_bytes=1000, read_s=5)) as running:
        with socket.create_connection(("127.0.0.1", running.port), timeout=5) as slow:
            slow.sendall(
                b"POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 900\r\n\r\n" + b"x" * 600
            )
            assert eventually(lambda: running.activator._reading_bytes == 600)
            status, _headers, body = running.call(b"y" * 600)
        assert status == 503
        assert b"room" in body
        assert eventually(lambda: running.activator._reading_bytes == 0)


def test_connections_beyond_the_bound_get_a_503_with_retry_after() -> None:
    with run_activator(Limits(max_connections=2, retry_after_s=3)) as running:
        held = [socket.create_connection(("127.0.0.1", running.port)) for _n in range(2)]
        try:
            for client in held:
                client.sendall(b"POST /v2/models/m/infer HTTP/1.1\r\n")  # half a request each
            assert eventually(lambda: running.activator.connections == 2)
            status, headers, _body = running.call(b"{}")
        finally:
            for client in held:
                client.close()
        assert (status, headers["Retry-After"]) == (503, "3")
        assert eventually(lambda: running.activator.connections == 0)


def test_metrics_parse() -> None:
    activator = Activator(frozenset, lambda held, oldest: None)
    activator.stats.held_for(3.0)
    families = {f.name: f for f in text_string_to_metric_families(metrics_text(activator, 2))}
    assert set(families) >= {
        "tarn_activator_requests_held",
        "tarn_activator_requests",
        "tarn_activator_hold_seconds",
        "tarn_activator_ready_instances",
    }
    count = [s for s in families["tarn_activator_hold_seconds"].samples if s.name.endswith("_count")]
    assert count[0].value == 1


# ---- /v1: the OpenAI fronts, streams


class Front(BaseHTTPRequestHandler):
    """An OpenAI front as the activator sees it: POST /v1/… with {"n": events, "gap": seconds}
    streams events, chunked, each as it is made; it notes when its client (the activator) left."""

    protocol_version = "HTTP/1.1"
    left: list[float]  # set per server

    def do_POST(self) -> None:
        spec = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("X-Path", self.path)
        self.end_headers()
        self.wfile.flush()
        for index in range(spec["n"]):
            if self._client_left(spec["gap"]):
                self.left.append(time.monotonic())
                return
            self._chunk(f"data: {json.dumps({'i': index, 'sent': time.monotonic()})}\n\n")
        self._chunk("data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")

    def _client_left(self, wait: float) -> bool:
        readable, _w, _x = select.select([self.connection], [], [], wait)
        try:
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except ConnectionError:
            return True

    def _chunk(self, text: str) -> None:
        data = text.encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def log_message(self, format: str, *args: object) -> None:
        pass


@dataclass
class FrontServer:
    endpoint: Endpoint
    left: list[float]


@pytest.fixture
def front() -> Iterator[FrontServer]:
    left: list[float] = []
    handler = type("RecordingFront", (Front,), {"left": left})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield FrontServer(Endpoint("127.0.0.1", server.server_address[1]), left)
    server.shutdown()


def send_stream(port: int, n: int, gap: float, path: str = "/v1/chat/completions") -> socket.socket:
    body = json.dumps({"n": n, "gap": gap, "stream": True}).encode()
    client = socket.create_connection(("127.0.0.1", port), timeout=30)
    head = f"POST {path} HTTP/1.1\r\nHost: tarn\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    client.sendall(head + body)
    return client


def read_events(
    client: socket.socket, stop_after: int | None = None
) -> tuple[bytes, list[tuple[int, float]]]:
    """The answer's head, and each event's index with when it arrived (read as the bytes come);
    up to [DONE], or ``stop_after`` events."""
    buffer = b""
    events: list[tuple[int, float]] = []
    while True:
        data = client.recv(65536)
        if not data:
            raise AssertionError(f"cut after {len(events)} events: {buffer[-200:]!r}")
        arrived = time.monotonic()
        buffer += data
        for match in re.finditer(rb'data: \{"i": (\d+)', buffer):
            index = int(match[1])
            if index not in [i for i, _t in events]:
                events.append((index, arrived))
        if b"data: [DONE]" in buffer or (stop_after is not None and len(events) >= stop_after):
            return buffer.partition(b"\r\n\r\n")[0], events


def test_a_held_stream_goes_to_the_front_and_each_event_arrives_as_it_is_sent(front: FrontServer) -> None:
    with run_activator(Limits(hold_timeout_s=3, max_held=10)) as running:
        client = send_stream(running.port, n=12, gap=0.2)
        assert eventually(lambda: running.activator.held == 1)
        # the instance registers with its front: /v1 goes to openai_port, not http_port
        running.ready.add(Instance(Endpoint("127.0.0.1", 1), front.endpoint.port))
        head, events = read_events(client)
        client.close()
        assert eventually(lambda: running.activator.stats.outcomes["after_hold"] == 1)
    assert head.startswith(b"HTTP/1.1 200")
    assert b"X-Path: /v1/chat/completions" in head
    assert [i for i, _t in events] == list(range(12))
    gaps = [later - earlier for (_a, earlier), (_b, later) in itertools.pairwise(events)]
    assert min(gaps) > 0.1  # one by one as sent (0.2 s apart), none gathered at the end


def test_a_stream_outlives_the_hold_timeout_and_stops_counting_as_held(front: FrontServer) -> None:
    with run_activator(Limits(hold_timeout_s=0.3)) as running:
        running.ready.add(Instance(Endpoint("127.0.0.1", 1), front.endpoint.port))
        client = send_stream(running.port, n=8, gap=0.15)  # 1.2 s, four times the hold timeout
        read_events(client, stop_after=2)
        assert running.activator.held == 0  # answering: no longer demand
        _head, events = read_events(client)
        client.close()
    assert len(events) >= 6  # the rest arrived, [DONE] too


def test_demand_drops_once_the_front_answers(front: FrontServer) -> None:
    with run_activator(Limits(hold_timeout_s=5)) as running:
        client = send_stream(running.port, n=10, gap=0.2)
        assert eventually(lambda: running.activator.held == 1)
        running.ready.add(Instance(Endpoint("127.0.0.1", 1), front.endpoint.port))
        read_events(client, stop_after=1)
        assert running.activator.held == 0
        assert running.reports[-1][0] == 0  # the controller hears it while the stream goes on
        client.close()


def test_a_client_that_leaves_mid_stream_closes_the_fronts_connection_at_once(front: FrontServer) -> None:
    with run_activator(Limits(hold_timeout_s=5)) as running:
        client = send_stream(running.port, n=100, gap=0.1)
        assert eventually(lambda: running.activator.held == 1)
        running.ready.add(Instance(Endpoint("127.0.0.1", 1), front.endpoint.port))
        read_events(client, stop_after=3)
        client.close()
        closed = time.monotonic()
        assert eventually(lambda: bool(front.left), within=3)
        assert eventually(lambda: running.activator.stats.outcomes["after_hold"] == 1)  # it was answered
    # the front's next look (every 0.1 s here) sees it: the activator closed its side at once
    assert front.left[0] - closed < 0.5


def test_a_client_that_leaves_before_the_first_event_cancels_too(front: FrontServer) -> None:
    """A long prefill: nothing to write to the client, so only watching its side shows it left."""
    with run_activator(Limits(hold_timeout_s=5)) as running:
        running.ready.add(Instance(Endpoint("127.0.0.1", 1), front.endpoint.port))
        client = send_stream(running.port, n=2, gap=30)  # first event in 30 s
        time.sleep(0.3)
        client.close()
        closed = time.monotonic()
        assert eventually(lambda: bool(front.left), within=3)
    assert front.left[0] - closed < 0.5


def test_a_client_that_leaves_while_held_is_held_no_more() -> None:
    with run_activator(Limits(hold_timeout_s=10)) as running:
        client = send_stream(running.port, n=1, gap=0)
        assert eventually(lambda: running.activator.held == 1)
        client.close()
        assert eventually(lambda: running.activator.held == 0, within=1)
        assert eventually(lambda: running.activator.stats.outcomes["gone"] == 1)
        assert running.reports[-1][0] == 0


def test_v1_without_any_front_is_answered_at_once_in_openai_shape(instance: Endpoint) -> None:
    with run_activator(Limits(hold_timeout_s=10)) as running:
        running.ready.add(Instance(instance))  # an instance without --openai-port
        began = time.monotonic()
        status, headers, body = running.call(b"{}", path="/v1/chat/completions")
        assert time.monotonic() - began < 1
        assert running.call(b"x", path="/v2/models/m/infer")[0] == 200  # /v2 still served
    assert status == 404
    assert headers["Content-Type"] == "application/json"
    error = json.loads(body)["error"]
    assert error["code"] == "openai_not_served"
    assert "--openai-port" in error["message"]
    assert running.activator.stats.outcomes["not_served"] == 1


def test_v1_held_too_long_gets_504_in_openai_shape() -> None:
    with run_activator(Limits(hold_timeout_s=0.3, retry_after_s=7)) as running:
        status, headers, body = running.call(b"{}", path="/v1/chat/completions")
    assert (status, headers["Retry-After"], headers["Content-Type"]) == (504, "7", "application/json")
    error = json.loads(body)["error"]
    assert (error["type"], error["code"]) == ("server_error", "no_instance_ready")
    assert "0.3 s" in error["message"]
