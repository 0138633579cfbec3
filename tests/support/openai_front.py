"""The OpenAI front on loopback before a stand-in of Triton's generate extension: a small asyncio
server on 127.0.0.1 that streams server-sent events the way Triton 2.51 does (chunked, one ``data:``
per response, errors as events or as a 400 with an event body), notes what it was asked, and when
the front closed the connection. Used by the front's unit tests, its admission tests and its fuzzing.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tarn.stdlib.api_token import Secret
from tarn.stdlib.http1 import MAX_HEAD
from tarn.stdlib.openai.server import Front, Triton
from tarn.stdlib.openai.trust import proof
from tests.support.loopback import stop_loop

TOKEN = Secret("the-services-token")  # the front's --token-file, as the controller's


def as_user(name: str) -> dict[str, str]:
    """The headers Knox sends for its user ``name``: the name and its proof (tarn.stdlib.openai.trust)."""
    return {"X-TARN-User": name, "X-TARN-User-Proof": proof(TOKEN, int(time.time()), name)}


TEXT_MODELS = ("tiny", "plain", "endless", "failing", "dying", "rejecting", "stop")
STOP_TOKENS = (" one", " two", " ST", "OP", " three")


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def event(payload: dict[str, Any]) -> bytes:
    return chunk(b"data: " + json.dumps(payload).encode() + b"\n\n")


def plain_answer(status: str, body: bytes) -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\nTransfer-Encoding: chunked\r\n\r\n"
)


@dataclass
class StandIn:
    """Triton as far as the front uses it."""

    asked: list[dict[str, Any]] = field(default_factory=list)  # generate_stream bodies
    closed_at: list[float] = field(default_factory=list)  # when an endless or silent stream's client went
    ready: bool = True  # /v2/health/ready's answer
    slots: dict[str, int] = field(default_factory=dict)  # a model's max_concurrent_generations parameter

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode()
            method, path, _version = head.split(" ", 2)
            length = next(
                (
                    int(line.split(":")[1])
                    for line in head.split("\r\n")
                    if line.lower().startswith("content-length")
                ),
                0,
            )
            body = await reader.readexactly(length)
            if path == "/v2/health/ready" and method == "GET":
                writer.write(plain_answer("200 OK" if self.ready else "503 Service Unavailable", b""))
            elif path == "/v2/repository/index" and method == "POST":
                index = [{"name": n, "version": "1", "state": "READY"} for n in (*TEXT_MODELS, "add_one")]
                index.append({"name": "loading", "version": "1", "state": "UNAVAILABLE"})
                writer.write(plain_answer("200 OK", json.dumps(index).encode()))
            elif path.startswith("/v2/models/") and path.endswith("/config") and method == "GET":
                name = path.split("/")[3]
                declared = {"max_concurrent_generations": {"string_value": str(self.slots.get(name, 0))}}
                config = {"name": name, "parameters": declared if name in self.slots else {}}
                writer.write(plain_answer("200 OK", json.dumps(config).encode()))
            elif path.startswith("/v2/models/") and method == "GET":
                name = path.rsplit("/", 1)[1]
                inputs = {"add_one": "INPUT0", "loading": "text_input"}.get(name, "text_input")
                if name in (*TEXT_MODELS, "add_one", "loading"):
                    metadata = {"name": name, "inputs": [{"name": inputs, "datatype": "BYTES", "shape": [1]}]}
                    writer.write(plain_answer("200 OK", json.dumps(metadata).encode()))
                else:
                    writer.write(plain_answer("404 Not Found", b'{"error":"unknown model"}'))
            elif path.endswith("/generate_stream") and method == "POST":
                await self.generate(path.split("/")[3], json.loads(body), reader, writer)
            else:
                writer.write(plain_answer("400 Bad Request", b'{"error":"not served by the stand-in"}'))
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def generate(
        self, model: str, body: dict[str, Any], reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.asked.append(body)
        # A prefill: no byte for so long. Triton 2.51 sends a stream's head with its first event,
        # so nothing at all comes before (a refusal's head included).
        silence = float(body.get("parameters", {}).get("silence", 0))
        if silence:
            gone = asyncio.ensure_future(reader.read())
            await asyncio.wait({gone}, timeout=silence)
            if gone.done():
                self.closed_at.append(time.monotonic())
                return
            gone.cancel()
        if model not in TEXT_MODELS:  # as Triton; some versions answer 400
            status = "400 Bad Request" if model.startswith("refused-400") else "404 Not Found"
            writer.write(plain_answer(status, f'{{"error":"Request for unknown model: {model!r}"}}'.encode()))
            return
        if model == "rejecting":
            message = chunk(b'data: {"error":"max_tokens too big"}\n\n') + b"0\r\n\r\n"
            writer.write(b"HTTP/1.1 400 Bad Request\r\nTransfer-Encoding: chunked\r\n\r\n" + message)
            return
        writer.write(STREAM_HEAD)
        delay = float(body.get("parameters", {}).get("delay", 0))
        if model == "endless":
            gone = asyncio.ensure_future(reader.read())
            count = 0
            while not gone.done():
                count += 1
                writer.write(event({"text_output": f" t{count}", "completion_tokens": count}))
                await asyncio.wait({gone}, timeout=0.05)
            self.closed_at.append(time.monotonic())
            return
        if model == "tiny":
            tokens = [f" t{n}" for n in range(1, body.get("max_tokens", 4) + 1)]
            events = [
                {"text_output": t, "prompt_tokens": 11, "completion_tokens": n + 1}
                for n, t in enumerate(tokens)
            ]
        elif model == "stop":
            events = [{"text_output": t} for t in STOP_TOKENS]
        else:
            events = [{"text_output": t} for t in (" a", " b", " c")]
        if model in ("failing", "dying"):
            events = events[:2]
        for payload in events:
            writer.write(event({"model_name": model, "model_version": "1", **payload}))
            await writer.drain()
            await asyncio.sleep(delay)
        if model == "failing":
            writer.write(event({"error": "boom"}))
        if model == "dying":
            await writer.drain()
            writer.transport.abort()  # Triton killed: no last chunk
            return
        writer.write(b"0\r\n\r\n")


@dataclass
class Running:
    front: Front
    port: int
    standin: StandIn

    def call(
        self, method: str, path: str, payload: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], Any]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        body = payload if isinstance(payload, bytes) or payload is None else json.dumps(payload).encode()
        if path == "/metrics" and headers is None:  # as the controller scrapes it
            headers = {"X-TARN-Token": TOKEN.reveal()}
        conn.request(method, path, body=body, headers=headers or {})
        reply = conn.getresponse()
        raw = reply.read()
        conn.close()
        kind = reply.getheader("Content-Type", "")
        return reply.status, dict(reply.getheaders()), json.loads(raw) if "json" in kind else raw.decode()

    def stream(
        self, path: str, payload: Any, headers: dict[str, str] | None = None
    ) -> list[tuple[float, str]]:
        """Each event's data with its arrival time; the body read whole (a cut one raises)."""
        lines = self.stream_lines(path, payload, headers)
        return [(at, line[len("data: ") :]) for at, line in lines if line.startswith("data: ")]

    def stream_lines(
        self, path: str, payload: Any, headers: dict[str, str] | None = None
    ) -> list[tuple[float, str]]:
        """Each line of the stream but the blank ones (events and comments) with its arrival time."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        conn.request("POST", path, body=json.dumps(payload).encode(), headers=headers or {})
        reply = conn.getresponse()
        assert reply.status == 200, reply.read()
        assert reply.getheader("Content-Type") == "text/event-stream; charset=utf-8"
        lines = []
        while line := reply.readline():
            if line.strip():
                lines.append((time.monotonic(), line.decode().rstrip("\n")))
        conn.close()
        return lines

    def open_stream(self, path: str, payload: Any) -> socket.socket:
        """A raw connection with the request sent: a client that can go away whenever it likes."""
        body = json.dumps(payload).encode()
        client = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        client.sendall(head + body)
        return client


@contextlib.contextmanager
def run_front(
    max_body: int = 1 << 20, triton_port: int | None = None, backlog: int = 100, **options: Any
) -> Iterator[Running]:
    """The front before the stand-in Triton on loopback (``backlog``: serve()'s is larger)."""
    loop = asyncio.new_event_loop()
    standin = StandIn()
    standin_server = loop.run_until_complete(asyncio.start_server(standin.handle, "127.0.0.1", 0))
    port = triton_port or standin_server.sockets[0].getsockname()[1]
    options.setdefault("token", TOKEN)
    front = Front(
        Triton("127.0.0.1", port, connect_timeout_s=1), max_body=max_body, new_id=lambda: "1", **options
    )
    listening = asyncio.start_server(front.handle, "127.0.0.1", 0, limit=MAX_HEAD, backlog=backlog)
    server = loop.run_until_complete(listening)
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield Running(front, server.sockets[0].getsockname()[1], standin)
    finally:
        stop_loop(loop, thread)
