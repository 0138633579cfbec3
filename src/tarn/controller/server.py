"""The controller's HTTP API on --address:--am-port.

| path | method | token | answers |
|---|---|---|---|
| /health | GET | no | 200 while the API runs (YARN's readiness check) |
| /instances | GET | yes | JSON, or text/plain `ip:port` lines (Accept or ?format=text) |
| /instances/<name>/drain | POST, DELETE | yes | drain an instance (waits until idle) / undrain it |
| /metrics | GET | yes, ?token= too | Prometheus text |
| /dashboard | GET | yes, ?token= too | HTML |
| /config | GET | yes | the configuration, secrets redacted |
| /authorize | GET | yes | ``true`` / ``false`` (text/plain): may ``user`` do ``action`` on ``model`` |
| /wake | POST | yes | an activator's report (``?held=N&oldest_s=S``): held requests wake a service at zero |

``/authorize?model=&action=infer|metadata|list&user=``: ``user`` defaults to the requester (the
X-TARN-User header). With ``--ranger-service`` the models /instances and /dashboard show are
those the requester may ``list`` (none without the header), and /authorize answers from Ranger's
policies, failing closed. Without it nothing is filtered and /authorize answers ``true``: TARN
authorizes nothing itself. The header is asserted by whoever holds the token (a gateway such as
Knox, for its authenticated user).

The token is compared in constant time; ``?token=`` is accepted only where a header cannot be
set (Grafana's data source URL, a browser), and is weaker: URLs end up in histories and logs.
Request lines are never logged for that reason.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tarn.activator.demand import Report
from tarn.controller.dashboard import render_dashboard, scaling_note
from tarn.controller.dashboard_script import DASHBOARD_JS
from tarn.controller.llm import LlmView
from tarn.controller.llm import view as llm_view
from tarn.controller.metrics import metrics_registry, render
from tarn.controller.publication import Controller
from tarn.controller.snapshot import Snapshot
from tarn.ranger.authorizer import ACCESS_TYPES, Authorizer
from tarn.stdlib.api_token import TOKEN_HEADER, Secret, presented

SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
}
QUERY_TOKEN_PATHS = ("/metrics", "/dashboard", "/dashboard/data")
SCRIPT = DASHBOARD_JS.encode()
# The dashboard runs /dashboard.js (from here only) and fetches from here only.
DASHBOARD_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; script-src 'self'; "
    "connect-src 'self'; frame-ancestors 'none'"
}
PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"
IDLE_TIMEOUT_S = 10.0  # the whole request head, not each read: a byte every few seconds is cut too
USER_HEADER = "X-TARN-User"
MAX_NAME = 256  # characters of a user or model name


class BadRequest(Exception):
    pass


def token_matches(expected: Secret | None, given: str | None) -> bool:
    """No token configured: open. Otherwise a constant-time comparison."""
    if expected is None:
        return True
    return given is not None and expected.matches(given)


def presented_token(headers: Any, query: dict[str, str], path: str) -> str | None:
    header = presented(headers.get(TOKEN_HEADER), headers.get("Authorization"))
    if header is not None:
        return header
    if path in QUERY_TOKEN_PATHS:
        return query.get("token")
    return None


def parse_query(raw: str, allowed: set[str]) -> dict[str, str]:
    """One value per key, only known keys: anything else is a 400."""
    try:
        parsed = parse_qs(raw, keep_blank_values=True, strict_parsing=bool(raw))
    except ValueError as exc:
        raise BadRequest(f"malformed query string: {exc}") from exc
    unknown = sorted(set(parsed) - allowed)
    if unknown:
        raise BadRequest(f"unknown parameter {unknown[0]!r}; allowed: {', '.join(sorted(allowed)) or 'none'}")
    repeated = sorted(k for k, v in parsed.items() if len(v) > 1)
    if repeated:
        raise BadRequest(f"parameter {repeated[0]!r} given more than once")
    return {k: v[0] for k, v in parsed.items()}


def checked_name(value: str | None, field: str) -> str | None:
    """A user or model name from a header or parameter; None when absent or empty."""
    if value is None or value == "":
        return None
    if len(value) > MAX_NAME or not value.isprintable() or value.strip() != value:
        raise BadRequest(
            f"{field}: not a name; give printable text without surrounding spaces, at most {MAX_NAME}"
        )
    return value


def requester(headers: Any) -> str | None:
    """Who asks: the X-TARN-User header, asserted by the token holder (e.g. Knox for its user)."""
    raw = headers.get(USER_HEADER)
    return checked_name(None if raw is None else str(raw), USER_HEADER)


def with_visible_models(snap: Snapshot, may_list: Callable[[str], bool]) -> Snapshot:
    """The snapshot with each instance's models, and the per-model figures, cut to those
    ``may_list`` lets the user see."""
    seen: dict[str, bool] = {}

    def visible(model: str) -> bool:
        if model not in seen:
            seen[model] = may_list(model)
        return seen[model]

    instances = tuple(replace(i, models=tuple(m for m in i.models if visible(m))) for i in snap.instances)
    return replace(snap, instances=instances, models=tuple(m for m in snap.models if visible(m.model)))


def instances_body(snap: Snapshot, as_text: bool) -> tuple[str, bytes]:
    if as_text:
        lines = sorted(f"{i.ip}:{i.http_port}" for i in snap.serving())
        return "text/plain; charset=utf-8", "".join(f"{line}\n" for line in lines).encode()
    rows = []
    for i in snap.instances:
        row = i.record(snap.service)
        row.update(state=i.state, registered=i.registered, load=i.load.value if i.load else None)
        rows.append(row)
    body = {"service": snap.service, "target": snap.target, "instances": rows}
    return "application/json", json.dumps(body).encode()


UNKNOWN_PATH = "other"  # tarn_api_requests' path label of every path the API does not serve


class Api:
    """Routing and accounting, shared by every handler thread."""

    def __init__(
        self, controller: Controller, token: Secret | None, authorizer: Authorizer | None = None
    ) -> None:
        self.controller = controller
        self.token = token
        self.authorizer = authorizer  # None: no --ranger-service, nothing is filtered
        self._counts: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()
        self.registry = metrics_registry(controller, self.counts, authorizer)

    def may_list(self, headers: Any, client_ip: str | None = None) -> Callable[[str], bool] | None:
        """Which models the requester may see: with Ranger, those they may ``list`` (none without
        a requester), each asked once; None without Ranger (all)."""
        if self.authorizer is None:
            return None
        user, authorizer, seen = requester(headers), self.authorizer, dict[str, bool]()

        def visible(model: str) -> bool:
            if model not in seen:
                seen[model] = user is not None and authorizer.allowed(user, model, "list", client_ip)
            return seen[model]

        return visible

    def snapshot_for(self, headers: Any, client_ip: str | None = None) -> Snapshot:
        """The published snapshot as the requester may see it (``may_list``)."""
        snap, may_list = self.controller.snapshot, self.may_list(headers, client_ip)
        return snap if may_list is None else with_visible_models(snap, may_list)

    def dashboard_for(self, headers: Any, client_ip: str | None = None) -> tuple[Snapshot, LlmView]:
        """The snapshot and the OpenAI fronts' figures (their totals since the controller started,
        the snapshot's streams) as the requester may see them, Ranger asked once per model."""
        snap, may_list = self.controller.snapshot, self.may_list(headers, client_ip)
        llm = llm_view(self.controller.counters.openai, snap.instances)
        if may_list is None:
            return snap, llm
        return with_visible_models(snap, may_list), llm.visible(may_list)

    def counts(self) -> dict[tuple[str, str], int]:
        with self._lock:
            return dict(self._counts)

    def count(self, path: str, code: int) -> None:
        with self._lock:
            key = (path, str(code))
            self._counts[key] = self._counts.get(key, 0) + 1


def make_handler(api: Api) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "tarn-controller"
        sys_version = ""
        timeout = IDLE_TIMEOUT_S  # a client that sends half a request must not hold a thread forever
        _version = "HTTP/1.0"

        def setup(self) -> None:
            super().setup()
            self.rfile = ReadBy(self.connection, time.monotonic() + IDLE_TIMEOUT_S)  # type: ignore[assignment]

        def parse_request(self) -> bool:
            read = super().parse_request()
            # The answer's writes get their own timeout: the head's deadline is spent.
            self.connection.settimeout(IDLE_TIMEOUT_S)
            return read

        def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
            """http.server's own refusals (a malformed line, 414, 431) answered like the API's others:
            JSON, the security headers. An HTTP major version it does not speak (HTTP/2.0, /9.9) gets
            RFC 9110's 505 there, a 5xx; it is the client's mistake, so a 400 here (issue 48)."""
            if code == HTTPStatus.HTTP_VERSION_NOT_SUPPORTED:
                code, message = HTTPStatus.BAD_REQUEST, "HTTP version not supported: send HTTP/1.1"
            self.close_connection = True
            body = json.dumps({"error": message or HTTPStatus(code).phrase}).encode()
            self._send(code, "application/json", body, UNKNOWN_PATH)

        @property
        def request_version(self) -> str:
            return self._version

        @request_version.setter
        def request_version(self, version: str) -> None:
            # HTTP/0.9's answers ("GET /x", "GET /x HTTP/0.9") have no status line and no headers,
            # the security ones neither: every answer is HTTP/1.0's at least (issue 48, item 6).
            self._version = "HTTP/1.0" if version == "HTTP/0.9" else version

        def do_GET(self) -> None:
            self._dispatch("GET")

        def do_POST(self) -> None:
            self._dispatch("POST")

        def do_DELETE(self) -> None:
            self._dispatch("DELETE")

        def __getattr__(self, name: str) -> Callable[[], None]:
            """Any other method (PUT, HEAD, FOO...) is routed too: 405 or 404, never http.server's 501."""
            if name.startswith("do_"):
                return lambda: self._dispatch(name.removeprefix("do_"))
            raise AttributeError(name)

        def _dispatch(self, method: str) -> None:
            try:
                url = urlsplit(self.path)
            except ValueError:  # "http://[::1/x": a bracket left open (issue 48, item 6)
                self._send(400, "application/json", b'{"error": "malformed request target"}', UNKNOWN_PATH)
                return
            path = url.path.rstrip("/") or "/"
            label = "/instances/drain" if path.startswith("/instances/") else path
            try:
                route = self._route(method, path)
                if route is None:  # counted under one label: paths come from clients (issue 48, row 5)
                    self._send(404, "application/json", b'{"error": "not found"}', UNKNOWN_PATH)
                    return
                allowed, needs_token, action = route
                query = parse_query(url.query, allowed | ({"token"} if path in QUERY_TOKEN_PATHS else set()))
                if needs_token and not token_matches(api.token, presented_token(self.headers, query, path)):
                    self._send(
                        401,
                        "application/json",
                        b'{"error": "token required"}',
                        label,
                        extra={"WWW-Authenticate": 'Bearer realm="tarn"'},
                    )
                    return
                code, content_type, body = action(query)
            except BadRequest as exc:
                code, content_type, body = 400, "application/json", json.dumps({"error": str(exc)}).encode()
            self._send(code, content_type, body, label, DASHBOARD_HEADERS if path == "/dashboard" else None)

        def _route(
            self, method: str, path: str
        ) -> tuple[set[str], bool, Callable[[dict[str, str]], Any]] | None:
            if path.startswith("/instances/") and path.endswith("/drain"):
                name = path.removeprefix("/instances/").removesuffix("/drain")
                if method == "POST":
                    return {"wait"}, True, lambda q: _drain(api.controller, name, q)
                if method == "DELETE":
                    return set(), True, lambda q: _undrain(api.controller, name)
                return set(), False, lambda q: _method_not_allowed()
            if path == "/wake":
                if method == "POST":
                    return {"held", "oldest_s"}, True, lambda q: _wake(api.controller, q)
                return set(), False, lambda q: _method_not_allowed()
            client = str(self.client_address[0])  # Ranger's audit cliIP
            routes: dict[str, tuple[set[str], bool, Callable[[dict[str, str]], Any]]] = {
                "/health": (set(), False, lambda q: _health(api.controller)),
                "/instances": ({"format"}, True, lambda q: _instances(api, q, self.headers, client)),
                "/metrics": (set(), True, lambda q: (200, PROMETHEUS_TEXT, render(api.registry))),
                "/dashboard": (set(), True, lambda q: _dashboard(api, self.headers, client)),
                "/dashboard/data": (set(), True, lambda q: _dashboard_data(api)),
                "/dashboard.js": (set(), False, lambda q: (200, "text/javascript; charset=utf-8", SCRIPT)),
                "/config": (set(), True, lambda q: _json(200, api.controller.config.redacted())),
                "/authorize": (
                    {"model", "action", "user"},
                    True,
                    lambda q: _authorize(api, q, self.headers, client),
                ),
            }
            if path not in routes:
                return None
            if method != "GET":
                return set(), False, lambda q: _method_not_allowed()
            return routes[path]

        def _send(
            self, code: int, content_type: str, body: bytes, label: str, extra: dict[str, str] | None = None
        ) -> None:
            api.count(label, code)
            self.send_response(code)
            for key, value in {**SECURITY_HEADERS, **(extra or {})}.items():
                self.send_header(key, value)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # request lines may carry ?token=: never log them

    return Handler


def _json(code: int, body: object) -> tuple[int, str, bytes]:
    return code, "application/json", json.dumps(body).encode()


def _method_not_allowed() -> tuple[int, str, bytes]:
    return _json(405, {"error": "method not allowed"})


def _health(controller: Controller) -> tuple[int, str, bytes]:
    snap = controller.snapshot
    age = round(time.time() - snap.at, 1) if snap.at else None
    return _json(200, {"status": "ok", "last_tick_age_s": age})


def _instances(api: Api, query: dict[str, str], headers: Any, client_ip: str) -> tuple[int, str, bytes]:
    wanted = query.get("format")
    if wanted not in (None, "json", "text"):
        raise BadRequest(f"format={wanted!r}: use json or text")
    as_text = wanted == "text" or (wanted is None and "text/plain" in str(headers.get("Accept", "")))
    content_type, body = instances_body(api.snapshot_for(headers, client_ip), as_text)
    return 200, content_type, body


def _dashboard(api: Api, headers: Any, client_ip: str) -> tuple[int, str, bytes]:
    ranger = None if api.authorizer is None else api.authorizer.health()
    snap, llm = api.dashboard_for(headers, client_ip)
    scaling = scaling_note(api.controller.config)
    page = render_dashboard(snap, ranger=ranger, user=requester(headers), llm=llm, scaling=scaling)
    return 200, "text/html; charset=utf-8", page.encode()


def _dashboard_data(api: Api) -> tuple[int, str, bytes]:
    """The charts' points (the OpenAI fronts' too, every user and model together) and the scaling
    events: no model or user names, the same for every viewer."""
    snap, config = api.controller.snapshot, api.controller.config
    return _json(
        200,
        {
            "points": api.controller.timeline.points(),
            "events": [asdict(event) for event in snap.history],
            # the signal the autoscaler watches; scale_up and scale_down are the load's thresholds,
            # in force (and drawn on the load chart) only when scale_on is "load"
            "scale_on": config.scale_on,
            "scale_up": config.scale_up,
            "scale_down": config.scale_down,
            "max_instances": config.max_instances,
        },
    )


def _authorize(api: Api, query: dict[str, str], headers: Any, client_ip: str) -> tuple[int, str, bytes]:
    """``true`` or ``false``; without --ranger-service always ``true`` (TARN authorizes nothing itself)."""
    model = checked_name(query.get("model"), "model")
    if model is None:
        raise BadRequest("model: missing; give ?model=NAME")
    action = query.get("action")
    if action not in ACCESS_TYPES:
        raise BadRequest(f"action: {action!r} is not an access type; give one of {', '.join(ACCESS_TYPES)}")
    user = checked_name(query.get("user"), "user") or requester(headers)
    if api.authorizer is None:
        return 200, "text/plain; charset=utf-8", b"true"
    if user is None:
        raise BadRequest(f"user: none given and no {USER_HEADER} header; give ?user=NAME or the header")
    allowed = api.authorizer.allowed(user, model, action, client_ip)
    return 200, "text/plain; charset=utf-8", b"true" if allowed else b"false"


def _drain(controller: Controller, name: str, query: dict[str, str]) -> tuple[int, str, bytes]:
    wait = query.get("wait", "true")
    if wait not in ("true", "false"):
        raise BadRequest(f"wait={wait!r}: use true or false")
    if not controller.drain(name):
        return _json(404, {"error": f"no instance {name}"})
    if wait == "true":  # the loop publishes the drain's end; bounded by its timeout and a few ticks
        bound = controller.config.drain_timeout_s + 4 * controller.tick_s
        controller.wait_for(lambda snap: snap.drained(name), bound)
    return _json(200, {"instance": name, "drained": controller.drained(name)})


def _wake(controller: Controller, query: dict[str, str]) -> tuple[int, str, bytes]:
    try:
        held, oldest = int(query.get("held", "1")), float(query.get("oldest_s", "0"))
    except ValueError as exc:
        raise BadRequest("held and oldest_s: give a count and seconds, e.g. ?held=3&oldest_s=0.5") from exc
    if held < 0 or not 0 <= oldest < 1e9:
        raise BadRequest("held and oldest_s: give 0 or more")
    controller.note_demand(Report(held, oldest, time.time()))
    return _json(202, {"held": held, "target": controller.snapshot.target})


def _undrain(controller: Controller, name: str) -> tuple[int, str, bytes]:
    if not controller.undrain(name):
        return _json(404, {"error": f"{name} is not drained by an operator"})
    return _json(200, {"instance": name, "drained": False})


class ReadBy:
    """A connection's reader with one deadline for the whole request: each recv waits only for the
    time left. A socket's timeout is per read, and a buffered readline reads many times, so a
    client sending a byte a second held its thread for good. Past it, TimeoutError: http.server
    closes the connection."""

    PIECE = 65536

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self._sock, self._deadline, self._buffer = sock, deadline, bytearray()

    def _fill(self) -> bool:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request was not read within its deadline")
        self._sock.settimeout(left)
        piece = self._sock.recv(self.PIECE)
        self._buffer += piece
        return bool(piece)

    def _take(self, size: int) -> bytes:
        taken = bytes(self._buffer[:size])
        del self._buffer[:size]
        return taken

    def readline(self, limit: int = -1) -> bytes:
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                size = end + 1
            elif 0 <= limit <= len(self._buffer) or not self._fill():
                size = len(self._buffer)
            else:
                continue
            return self._take(size if limit < 0 else min(size, limit))

    def read(self, size: int = -1) -> bytes:
        while (size < 0 or len(self._buffer) < size) and self._fill():
            pass
        return self._take(len(self._buffer) if size < 0 else size)

    def close(self) -> None:
        self._buffer.clear()


# A thread per connection, at most MAX_CONNECTIONS at once (a client that sends half a request
# holds one for IDLE_TIMEOUT_S at most, one deadline for its whole head); beyond, a 503 with
# Retry-After at once. The kernel's queue holds BACKLOG connections not yet accepted (the default,
# 5, reset them: issue 48, row 11).
MAX_CONNECTIONS = 256
BACKLOG = 512
_BUSY_BODY = b'{"error": "too many clients"}'
BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: application/json\r\n"
    b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(_BUSY_BODY), _BUSY_BODY)
)


class BoundedServer(ThreadingHTTPServer):
    request_queue_size = BACKLOG
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            try:
                request.settimeout(1.0)  # the accepting thread never waits on a slow reader
                request.sendall(BUSY)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


def serve(api: Api, address: str, port: int) -> ThreadingHTTPServer:
    server = BoundedServer((address, port), make_handler(api))
    threading.Thread(target=server.serve_forever, args=(0.1,), name="api", daemon=True).start()
    return server
