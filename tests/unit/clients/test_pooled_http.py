"""The scrape's HTTP client against a real loopback server: connections are kept and reused, one
the server closed while idle is replaced without an error, and no answer is an OSError."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tarn.clients.pooled_http import PooledHttp


class Server(ThreadingHTTPServer):
    daemon_threads = True
    connections = 0
    handlers: list[BaseHTTPRequestHandler]


@pytest.fixture
def server() -> Iterator[Server]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            self.server.connections += 1  # type: ignore[attr-defined]
            self.server.handlers.append(self)  # type: ignore[attr-defined]

        def do_GET(self) -> None:
            body = self.path.encode()
            self.send_response(200 if self.path != "/missing" else 404)
            self.send_header("Content-Length", str(len(body)))
            if self.path == "/bye":
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    httpd = Server(("127.0.0.1", 0), Handler)
    httpd.handlers = []
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def test_requests_reuse_one_kept_alive_connection(server: Server) -> None:
    http = PooledHttp()
    port = server.server_address[1]
    for n in range(20):
        assert http.request("GET", "127.0.0.1", port, f"/metrics/{n}") == (200, f"/metrics/{n}".encode())
    assert http.request("POST", "127.0.0.1", port, "/v2/repository/index", b"{}") == (200, b"{}")
    assert http.request("GET", "127.0.0.1", port, "/missing") == (404, b"/missing")
    assert server.connections == 1
    http.close()


def test_a_connection_the_server_closed_while_idle_is_replaced(server: Server) -> None:
    http = PooledHttp()
    port = server.server_address[1]
    assert http.request("GET", "127.0.0.1", port, "/a")[0] == 200
    for handler in server.handlers:  # the server drops its idle connections (Triton restarted)
        handler.connection.shutdown(socket.SHUT_RDWR)
    assert http.request("GET", "127.0.0.1", port, "/b") == (200, b"/b")
    assert server.connections == 2
    http.close()


def test_connection_close_is_honoured(server: Server) -> None:
    http = PooledHttp()
    port = server.server_address[1]
    assert http.request("GET", "127.0.0.1", port, "/bye")[0] == 200
    assert http.request("GET", "127.0.0.1", port, "/again")[0] == 200
    assert server.connections == 2


def test_no_server_is_an_os_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, never listening: refused
        with pytest.raises(ConnectionRefusedError):
            PooledHttp().request("GET", "127.0.0.1", port, "/v2/health/ready")


def test_a_silent_server_times_out() -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()  # accepts (the kernel does), never answers
        with pytest.raises(TimeoutError):
            PooledHttp(read_timeout=0.2).request("GET", "127.0.0.1", silent.getsockname()[1], "/metrics")
