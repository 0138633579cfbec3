"""Loopback for the tests and benches: free ports, and HTTP servers (a handler class served on a
free port) for the clients' unit tests."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports free on 127.0.0.1 now, the kernel's picks (all bound at once, so
    none repeats; free until something else takes one): no fixed port that a test running beside
    this one or any other process could hold."""
    socks = [socket.socket() for _sock in range(count)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def free_port() -> int:
    """One TCP port free on 127.0.0.1 now (``free_ports``)."""
    return free_ports(1)[0]


class QuietHandler(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def serve(handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    """Serve ``handler`` on 127.0.0.1 (a free port) in a daemon thread."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server


def url(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def reply_json(
    handler: BaseHTTPRequestHandler, status: int, body: Any, headers: dict[str, str] | None = None
) -> None:
    _reply(handler, status, json.dumps(body).encode(), "application/json", headers)


def reply_text(
    handler: BaseHTTPRequestHandler, status: int, text: str, headers: dict[str, str] | None = None
) -> None:
    _reply(handler, status, text.encode(), "text/plain", headers)


def _reply(
    handler: BaseHTTPRequestHandler,
    status: int,
    payload: bytes,
    content_type: str,
    headers: dict[str, str] | None,
) -> None:
    handler.send_response(status)
    for key, value in (headers or {}).items():
        handler.send_header(key, value)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(payload)))
    handler.end_headers()
    handler.wfile.write(payload)


def stop_loop(loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    """The end of an asyncio server run in ``thread``: every task still in ``loop`` (connections
    being served) cancelled and awaited there, so none is left to the garbage collector, then the
    loop stopped, its thread joined and the loop closed."""
    asyncio.run_coroutine_threadsafe(_cancel_the_rest(), loop).result(5)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()


async def _cancel_the_rest() -> None:
    rest = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in rest:
        task.cancel()
    await asyncio.gather(*rest, return_exceptions=True)


def eventually(check: Callable[[], bool], within: float = 5.0, every: float = 0.01) -> bool:
    """Whether ``check`` holds within ``within`` seconds, asked every ``every``."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(every)
    return True
