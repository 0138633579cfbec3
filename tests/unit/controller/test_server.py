"""The controller's HTTP API on a loopback port (tarn.controller.server): the token and its
forms, malformed parameters, the security headers, /instances, /metrics, /dashboard, /config and
the drain; and with Ranger (--ranger-service): /authorize, the models /instances and /dashboard
show, the Ranger series of /metrics; without it, nothing filtered and /authorize ``true``. The
policies come from a PolicyState set by hand (the refresher has its own tests); the controller is
tests/support/controller.py's, driven by a scripted RM and scripted scrapes."""

from __future__ import annotations

import json
import select
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

import tarn.controller.server as server_module
from tarn.controller.dashboard import render_dashboard
from tarn.controller.server import SECURITY_HEADERS, Api, instances_body, serve, with_visible_models
from tarn.ranger.authorizer import Authorizer
from tarn.ranger.state import Documents, PolicyState, polled
from tarn.stdlib.api_token import Secret
from tests.support.controller import AUTH, MODELS, TOKEN, ModelScraper, make
from tests.support.ranger_documents import BASIC, USERS

NOW = 1_750_000_000.0
LOADED = polled(PolicyState(), Documents(BASIC, None, USERS), [], NOW)


@dataclass(frozen=True)
class Reply:
    code: int
    headers: dict[str, str]
    body: bytes


def call(url: str, headers: dict[str, str] | None = None, method: str = "GET") -> Reply:
    request = urllib.request.Request(url, headers=headers or {}, method=method)  # noqa: S310 - loopback
    try:
        with urllib.request.urlopen(request, timeout=5) as reply:  # noqa: S310 - loopback
            return Reply(reply.status, dict(reply.headers), reply.read())
    except urllib.error.HTTPError as error:
        return Reply(error.code, dict(error.headers), error.read())


# ---- the API


@pytest.fixture
def api_url() -> Iterator[str]:
    lab = make(instances=2)
    lab.scraper.inflight = {"triton-0": 1.0}
    lab.ticks(2)
    server = serve(Api(lab.controller, Secret(TOKEN)), "127.0.0.1", 0)
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.mark.parametrize(
    "path", ["/instances", "/metrics", "/dashboard", "/config", "/instances/triton-0/drain"]
)
@pytest.mark.parametrize(
    "headers",
    [{}, {"X-TARN-Token": "wrong"}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}],
)
def test_without_the_token_401(api_url: str, path: str, headers: dict[str, str]) -> None:
    reply = call(api_url + path, headers, "POST" if path.endswith("/drain") else "GET")
    assert reply.code == 401
    assert TOKEN not in reply.body.decode()
    assert reply.headers["WWW-Authenticate"].startswith("Bearer")


def test_token_forms(api_url: str) -> None:
    assert call(api_url + "/instances", AUTH).code == 200
    assert call(api_url + "/instances", {"Authorization": f"Bearer {TOKEN}"}).code == 200
    assert call(api_url + f"/metrics?token={TOKEN}").code == 200
    assert call(api_url + f"/dashboard?token={TOKEN}").code == 200
    assert call(api_url + f"/instances?token={TOKEN}").code == 400  # ?token= only where no header can be set
    assert call(api_url + "/health").code == 200  # YARN's readiness check carries no token


@pytest.mark.parametrize(
    "query",
    ["/instances?format=xml", "/instances?format=json&format=text", "/instances?limit=3", "/metrics?x=1",
     "/instances?%zz", "/instances/triton-0/drain?wait=maybe"],
)  # fmt: skip
def test_malformed_parameters_400(api_url: str, query: str) -> None:
    reply = call(api_url + query, AUTH, "POST" if "/drain" in query else "GET")
    assert reply.code == 400
    assert "error" in json.loads(reply.body)


def test_security_headers_on_every_answer(api_url: str) -> None:
    for path, headers in [("/health", {}), ("/instances", AUTH), ("/nope", AUTH), ("/instances", {})]:
        reply = call(api_url + path, headers)
        for key, value in SECURITY_HEADERS.items():
            assert reply.headers[key] == value, (path, key)
    assert call(api_url + "/nope", AUTH).code == 404
    assert call(api_url + "/metrics", AUTH, "POST").code == 405


@pytest.mark.parametrize(
    ("request_line", "status"),
    [
        # urlsplit raises on a bracket left open: the handler died, no answer (issue 48, item 6)
        (b"GET http://[::1/health HTTP/1.1", b"400"),
        # HTTP/0.9's form and version: answered without a status line or any header
        (b"GET /health", b"200"),
        (b"GET /health HTTP/0.9", b"200"),
        (b"GET  HTTP/1.1", b"404"),  # two spaces: "HTTP/1.1" is the path of a versionless line
        # a major version http.server does not speak: its 505 (a 5xx) for a client's mistake, the
        # integration fuzz's red run at stop 54; its HTML error page had no security header either
        (b"GET /health HTTP/2.0", b"400"),
        (b"GET /health HTTP/9.9", b"400"),
        (b"GET /health HTTP/1.1 x", b"400"),
    ],
)
def test_request_lines_the_fuzzing_found_get_a_status_line_and_the_security_headers(
    api_url: str, request_line: bytes, status: bytes
) -> None:
    port = int(api_url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
        client.sendall(request_line + b"\r\nHost: x\r\n\r\n")
        received = b""
        while piece := client.recv(65536):
            received += piece
    head = received.partition(b"\r\n\r\n")[0]
    assert head.startswith(b"HTTP/1.0 " + status + b" "), received[:200]
    for key, value in SECURITY_HEADERS.items():
        assert f"{key}: {value}".encode() in head.split(b"\r\n"), key


def test_instances_json_and_text(api_url: str) -> None:
    listing = json.loads(call(api_url + "/instances", AUTH).body)
    assert listing["target"] == 2
    assert [i["instance"] for i in listing["instances"]] == ["triton-0", "triton-1"]
    keys = {"ip", "http_port", "grpc_port", "metrics_port", "state", "registered", "load", "models", "url"}
    assert keys <= set(listing["instances"][0])
    assert "openai_port" not in listing["instances"][0]  # no front: no key
    text = call(api_url + "/instances", {**AUTH, "Accept": "text/plain"})
    assert text.headers["Content-Type"].startswith("text/plain")
    assert text.body == b"127.0.0.1:8000\n127.0.0.1:8000\n"
    assert call(api_url + "/instances?format=text", AUTH).body == text.body


def test_instances_json_carries_each_fronts_port_and_the_text_form_stays_http() -> None:
    lab = make(instances=2, openai_port=9000, anti_affinity=False, port_stride=10)
    lab.ticks(2)
    _type, body = instances_body(lab.controller.snapshot, as_text=False)
    rows = json.loads(body)["instances"]
    assert [(r["http_port"], r["openai_port"]) for r in rows] == [(8000, 9000), (8010, 9010)]
    _type, text = instances_body(lab.controller.snapshot, as_text=True)
    assert text == b"127.0.0.1:8000\n127.0.0.1:8010\n"  # the seeds' form: Triton's endpoints


def test_metrics_parse_and_carry_the_seeds_names(api_url: str) -> None:
    text = call(api_url + "/metrics", AUTH).body.decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for name in ["tarn_target_containers", "tarn_running_containers", "tarn_container_load"]:
        assert families[name].samples, name
    for name in [
        "tarn_gpu_utilization",
        "tarn_gpu_memory_used",
        "tarn_inference_requests",
        "tarn_scaling_decisions",
    ]:
        assert name in families, name
    load = {s.labels["instance"]: s.value for s in families["tarn_container_load"].samples}
    assert load == {"triton-0": 0.25, "triton-1": 0.0}


def test_dashboard_lists_the_instances(api_url: str) -> None:
    page = call(api_url + "/dashboard", AUTH)
    assert page.code == 200
    assert b"triton-0" in page.body
    assert b"triton-1" in page.body
    assert TOKEN.encode() not in page.body
    note = b"autoscaler: load per ready instance (mean, 0..1); more instances above 0.8, fewer below 0.2"
    assert b"<p>" + note + b"</p>" in page.body


def test_drain_over_http(api_url: str) -> None:
    assert call(api_url + "/instances/triton-9/drain", AUTH, "POST").code == 404
    reply = call(api_url + "/instances/triton-1/drain?wait=false", AUTH, "POST")
    assert json.loads(reply.body) == {"instance": "triton-1", "drained": False}
    reply = call(api_url + "/instances/triton-1/drain", AUTH, "DELETE")
    assert json.loads(reply.body) == {"instance": "triton-1", "drained": False}
    assert call(api_url + "/instances/triton-1/drain", AUTH, "DELETE").code == 404


def test_config_redacts_the_token() -> None:
    lab = make(instances=1, token=Secret(TOKEN))
    server = serve(Api(lab.controller, Secret(TOKEN)), "127.0.0.1", 0)
    try:
        reply = call(f"http://127.0.0.1:{server.server_address[1]}/config", AUTH)
    finally:
        server.shutdown()
    assert json.loads(reply.body)["token"] == "***"  # noqa: S105 - the redaction mark
    assert TOKEN not in reply.body.decode()


# ---- with Ranger, and without it


@dataclass
class Served:
    url: str
    policies: list[PolicyState]  # [0] is what the authorizer sees
    now: list[float]

    def get(self, path: str, user: str | None = None, **headers: str) -> tuple[int, str, bytes]:
        sent = {**AUTH, **headers, **({"X-TARN-User": user} if user is not None else {})}
        reply = call(self.url + path, sent)
        return reply.code, reply.headers.get("Content-Type", ""), reply.body


def start(ranger: bool) -> tuple[Served, Any]:
    lab = make(instances=2)
    lab.scraper = ModelScraper(lab.clock)
    lab.controller._scraper = lab.scraper
    lab.ticks(2)
    holder, now = [LOADED], [NOW + 5]
    authorizer = Authorizer(lambda: holder[0], wall=lambda: now[0]) if ranger else None
    server = serve(Api(lab.controller, Secret(TOKEN), authorizer), "127.0.0.1", 0)
    return Served(f"http://127.0.0.1:{server.server_address[1]}", holder, now), server


@pytest.fixture
def ranger() -> Iterator[Served]:
    served, server = start(ranger=True)
    yield served
    server.shutdown()


@pytest.fixture
def plain() -> Iterator[Served]:
    served, server = start(ranger=False)
    yield served
    server.shutdown()


# ---- /authorize


@pytest.mark.parametrize(
    ("query", "user", "answer"),
    [
        ("model=add_one&action=list", "alice", b"true"),
        ("model=add_one&action=infer", "alice", b"true"),
        ("model=add_one&action=metadata", "alice", b"false"),
        ("model=linear_onnx&action=list", "alice", b"false"),
        ("model=linear_onnx&action=list&user=bob", "alice", b"true"),  # user= wins over the header
        ("model=linear_onnx&action=list&user=bob", None, b"true"),
        ("model=ADD_ONE&action=list", "alice", b"true"),  # the service def's ignoreCase
        ("model=add_one&action=list", "carol", b"false"),
    ],
)
def test_authorize_answers_ranger_s_decision(
    ranger: Served, query: str, user: str | None, answer: bytes
) -> None:
    code, content_type, body = ranger.get(f"/authorize?{query}", user)
    assert (code, body) == (200, answer)
    assert content_type.startswith("text/plain")


@pytest.mark.parametrize(
    ("query", "user", "field"),
    [
        ("action=list", "alice", "model: missing"),
        ("model=&action=list", "alice", "model: missing"),
        ("model=add_one", "alice", "action: None is not an access type; give one of infer, metadata, list"),
        ("model=add_one&action=write", "alice", "action: 'write' is not an access type"),
        ("model=add_one&action=_any", "alice", "action: '_any'"),
        ("model=add_one&action=list", None, "user: none given and no X-TARN-User header"),
        ("model=add_one&action=list&user=%01bob", None, "user: not a name"),
        ("model=add_one&action=list&who=bob", "alice", "unknown parameter 'who'"),
        ("model=add_one&action=list&action=infer", "alice", "parameter 'action' given more than once"),
        ("model=" + "m" * 300 + "&action=list", "alice", "model: not a name"),
    ],
)
def test_authorize_bad_requests_name_the_field(
    ranger: Served, query: str, user: str | None, field: str
) -> None:
    code, _type, body = ranger.get(f"/authorize?{query}", user)
    assert code == 400
    assert field in json.loads(body)["error"]


def test_authorize_needs_the_token(ranger: Served) -> None:
    assert call(ranger.url + "/authorize?model=add_one&action=list&user=alice").code == 401
    assert call(ranger.url + f"/authorize?model=add_one&action=list&user=alice&token={TOKEN}").code == 400
    assert call(ranger.url + "/authorize", AUTH, "POST").code == 405


def test_without_policies_every_check_is_denied(ranger: Served) -> None:
    ranger.policies[0] = replace(PolicyState(), error="no Ranger Admin answered", failures=3)
    for user in ("alice", "bob", "admin"):
        for action in ("infer", "metadata", "list"):
            assert ranger.get(f"/authorize?model=add_one&action={action}", user)[2] == b"false"


def test_without_ranger_authorize_is_true_and_checks_its_input(plain: Served) -> None:
    assert plain.get("/authorize?model=anything&action=infer")[:3:2] == (200, b"true")
    assert plain.get("/authorize?model=anything&action=list", "carol")[2] == b"true"
    assert plain.get("/authorize?model=anything&action=write")[0] == 400


# ---- the lists


def listed(served: Served, user: str | None, path: str = "/instances") -> list[list[str]]:
    code, _type, body = served.get(path, user)
    assert code == 200
    return [i["models"] for i in json.loads(body)["instances"]]


def test_instances_show_the_models_the_user_may_list(ranger: Served) -> None:
    assert listed(ranger, "alice") == [["add_one", "add_sub"]] * 2
    assert listed(ranger, "bob") == [["linear_onnx"]] * 2
    assert listed(ranger, "carol") == [[], []]
    assert listed(ranger, None) == [[], []], "no X-TARN-User with Ranger on: no models"
    assert ranger.get("/instances?format=text", "carol")[2] == b"127.0.0.1:8000\n127.0.0.1:8000\n"
    assert ranger.get("/instances", "bad\x7fname")[0] == 400


def test_without_ranger_every_model_is_listed(plain: Served) -> None:
    assert listed(plain, None) == [list(MODELS)] * 2
    assert listed(plain, "carol") == [list(MODELS)] * 2


def test_the_dashboard_shows_the_user_s_models_and_the_policies_health(ranger: Served) -> None:
    page = ranger.get("/dashboard", "bob")[2].decode()
    assert "linear_onnx" in page
    assert "add_one" not in page
    assert "models shown for bob" in page
    assert "Ranger: policies version 3, confirmed 5 s ago" in page
    anonymous = ranger.get("/dashboard")[2].decode()
    assert "linear_onnx" not in anonymous
    assert "no X-TARN-User header: no models shown" in anonymous

    ranger.policies[0] = polled(LOADED, Documents(), ["no Ranger Admin answered"], NOW + 1)
    page = ranger.get("/dashboard", "bob")[2].decode()
    assert '<p class="problem">Ranger: policies version 3 are stale, confirmed 5 s ago; no Ranger' in page
    assert "linear_onnx" in page, "stale policies still decide"
    ranger.policies[0] = PolicyState(error="no Ranger Admin answered")
    page = ranger.get("/dashboard", "bob")[2].decode()
    assert "Ranger: no policies (no Ranger Admin answered); every model is denied" in page
    assert "linear_onnx" not in page


def test_the_dashboard_without_ranger_is_unchanged(plain: Served) -> None:
    page = plain.get("/dashboard")[2].decode()
    assert all(model in page for model in MODELS)
    assert "Ranger" not in page


def test_with_visible_models_asks_once_per_model() -> None:
    lab = make(instances=3)
    lab.scraper = ModelScraper(lab.clock)
    lab.controller._scraper = lab.scraper
    lab.ticks(1)
    asked: list[str] = []

    def may_list(model: str) -> bool:
        asked.append(model)
        return model == "add_sub"

    snap = with_visible_models(lab.controller.snapshot, may_list)
    assert [i.models for i in snap.instances] == [("add_sub",)] * 3
    assert sorted(asked) == sorted(MODELS)


def test_the_per_model_figures_are_cut_to_what_the_user_may_list() -> None:
    lab = make(instances=2)
    lab.ticks(3)
    full = lab.controller.snapshot
    assert [m.model for m in full.models] == ["add_one"]
    assert with_visible_models(full, lambda model: False).models == ()
    assert "add_one" not in render_dashboard(with_visible_models(full, lambda model: False))


# ---- /metrics


def families(served: Served) -> dict[str, Any]:
    text = served.get("/metrics")[2].decode()
    return {f.name: f for f in text_string_to_metric_families(text)}


def value(found: dict[str, Any], name: str) -> float:
    (sample,) = found[name].samples
    return float(sample.value)


def test_ranger_series(ranger: Served) -> None:
    ranger.get("/authorize?model=add_one&action=list", "alice")
    ranger.get("/authorize?model=add_one&action=infer", "carol")
    found = families(ranger)
    assert value(found, "tarn_ranger_policies_loaded") == 1.0
    assert value(found, "tarn_ranger_policies_stale") == 0.0
    assert value(found, "tarn_ranger_policy_version") == 3.0
    assert value(found, "tarn_ranger_policy_age_seconds") == 5.0
    assert value(found, "tarn_ranger_refresh_failures") == 0.0
    decisions = {
        (s.labels["access"], s.labels["decision"]): s.value
        for s in found["tarn_ranger_decisions"].samples
        if s.name == "tarn_ranger_decisions_total"
    }
    assert decisions == {("list", "allowed"): 1.0, ("infer", "denied"): 1.0}

    ranger.policies[0] = replace(PolicyState(), error="down", failures=4)
    found = families(ranger)
    assert (value(found, "tarn_ranger_policies_loaded"), value(found, "tarn_ranger_policy_version")) == (
        0.0,
        -1.0,
    )
    assert value(found, "tarn_ranger_refresh_failures") == 4.0
    assert "tarn_ranger_policy_age_seconds" not in found
    for name, family in found.items():  # a decision's figures never say who asked for which model
        for sample in family.samples:
            assert name.startswith("tarn_model_") or not {"user", "model"} & set(sample.labels), sample
            assert "user" not in sample.labels, sample


def test_no_ranger_series_without_ranger(plain: Served) -> None:
    assert not [name for name in families(plain) if name.startswith("tarn_ranger")]


def test_unknown_paths_are_one_label_of_the_api_counter(api_url: str) -> None:
    # issue 48, row 5: 2,000 unknown paths were 2,000 permanent tarn_api_requests series.
    for n in range(200):
        assert call(f"{api_url}/probe-{n}", {}).code == 404
    text = call(api_url + "/metrics", AUTH).body.decode()
    paths = {
        line.split('path="', 1)[1].split('"', 1)[0]
        for line in text.splitlines()
        if line.startswith("tarn_api_requests_total{")
    }
    assert not any(p.startswith("/probe-") for p in paths)
    assert 'tarn_api_requests_total{code="404",path="other"} 200.0' in text


def test_clients_beyond_the_bound_get_a_503_at_once_and_the_rest_are_served(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # issue 48, row 11: a thread per connection without a bound, and a backlog of 5.
    monkeypatch.setattr(server_module, "MAX_CONNECTIONS", 8)
    lab = make(instances=2)
    lab.ticks(2)
    server = serve(Api(lab.controller, Secret(TOKEN)), "127.0.0.1", 0)
    port = server.server_address[1]
    try:
        idle = [socket.create_connection(("127.0.0.1", port)) for _n in range(8)]  # half a request each
        for conn in idle:
            conn.sendall(b"GET /health HTTP/1.1\r\n")
        time.sleep(0.3)
        began = time.monotonic()
        busy = call(f"http://127.0.0.1:{port}/health", {})
        assert busy.code == 503
        assert busy.headers["Retry-After"] == "1"
        assert json.loads(busy.body) == {"error": "too many clients"}
        assert time.monotonic() - began < 1.0
        for conn in idle:
            conn.close()
        time.sleep(0.3)  # their threads end on the closed connections
        assert call(f"http://127.0.0.1:{port}/health", {}).code == 200
        assert server.request_queue_size >= 128
    finally:
        server.shutdown()


def test_a_client_trickling_its_head_is_cut_at_one_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 48, item 5: the socket's timeout is per read, so a byte every 0.2 s held a thread for
    good; the whole head now has IDLE_TIMEOUT_S."""
    monkeypatch.setattr(server_module, "IDLE_TIMEOUT_S", 1.0)
    lab = make(instances=2)
    lab.ticks(2)
    server = serve(Api(lab.controller, Secret(TOKEN)), "127.0.0.1", 0)
    try:
        with socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=5) as client:
            began = time.monotonic()
            for byte in b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100:
                if select.select([client], [], [], 0.2)[0]:  # closed (or answered): stop sending
                    break
                client.sendall(bytes([byte]))
            cut = time.monotonic() - began
            try:
                left = client.recv(1024)
            except ConnectionResetError:
                left = b""
            assert left == b"", left
        assert cut < 2.0, f"the trickling client was held {cut:.1f} s"
    finally:
        server.shutdown()
        server.server_close()
