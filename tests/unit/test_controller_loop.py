"""The control loop and its API, driven tick by tick with a scripted RM and scripted scrapes.

The real RM, ZooKeeper and Triton are exercised by tests/e2e/test_controller.py on the lab.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tarn.activator.demand import Report
from tarn.controller.dashboard import render_dashboard
from tarn.controller.loop import ControlLoop
from tarn.controller.metrics import metrics_registry, render
from tarn.controller.observe import Container, Scrape
from tarn.controller.server import SECURITY_HEADERS, Api, serve
from tarn.controller.signals import ModelCounters, TritonSample
from tarn.stdlib.api_token import Secret
from tarn.stdlib.config import TarnConfig, validate

TOKEN = "t0k3n-Secret"  # noqa: S105 - a test token


class FakeRm:
    def __init__(self, instances: int) -> None:
        self.no_ip: set[str] = set()  # instances the RM reports without an address yet
        self.unlisted: set[str] = set()  # instances the RM leaves out (a relaunched AM recovering)
        self.target = instances
        self.next_id = instances
        self.names = [f"triton-{n}" for n in range(instances)]
        self.calls: list[tuple[str, Any]] = []

    def service(self, name: str) -> dict[str, Any]:
        containers = [
            {
                "component_instance_name": n,
                "id": f"c-{n}",
                "hostname": "w",
                "ip": None if n in self.no_ip else "127.0.0.1",
                "state": "READY",
            }
            for n in self.names
            if n not in self.unlisted
        ]
        return {"name": name, "state": "STABLE", "components": [
            {"name": "controller", "number_of_containers": 1, "containers": []},
            {"name": "triton", "number_of_containers": self.target, "containers": containers},
        ]}  # fmt: skip

    def flex(self, name: str, component: str, count: int) -> dict[str, Any]:
        self.calls.append(("flex", count))
        while len(self.names) < count:
            self.names.append(f"triton-{self.next_id}")
            self.next_id += 1
        self.target = count
        return {}

    def decommission(self, name: str, component: str, instances: list[str]) -> dict[str, Any]:
        self.calls.append(("decommission", instances))
        self.names = [n for n in self.names if n not in instances]
        self.target -= len(instances)
        return {}


class FakeScraper:
    """Each instance completes ``rate`` requests per second with ``inflight`` in the server."""

    def __init__(self, clock: list[float]) -> None:
        self.clock = clock
        self.inflight: dict[str, float] = {}
        self.totals: dict[str, tuple[float, float]] = {}
        self.down: set[str] = set()

    def scrape_all(self, containers: list[Container], want_models: set[str]) -> dict[str, Scrape]:
        results = {}
        for c in containers:
            if not c.ip:  # as the real scraper: nothing to probe without an address
                continue
            if c.instance in self.down:
                results[c.container_id] = Scrape(False, None, None, "refused")
                continue
            ok, busy = self.totals.get(c.instance, (0.0, 0.0))
            inflight = self.inflight.get(c.instance, 0.0)
            ok, busy = ok + 10 * inflight, busy + 2e6 * inflight  # two seconds per tick
            self.totals[c.instance] = (ok, busy)
            # every request is add_one's, a tenth of its time in the queue
            quantiles = {"p50_us": 150_000.0, "p99_us": 400_000.0, "queue_p99_us": 50_000.0} if ok else {}
            models = (("add_one", ModelCounters(ok, 0.0, busy, busy / 10, **quantiles)),)
            sample = TritonSample(self.clock[0], ok, 0.0, busy, 0.0, models=models)
            results[c.container_id] = Scrape(
                True, sample, ("add_one",) if c.container_id in want_models else None
            )
        return results


@dataclass
class Lab:
    controller: ControlLoop
    rm: FakeRm
    scraper: FakeScraper
    clock: list[float]

    def ticks(self, count: int) -> None:
        for step in range(1, count + 1):
            self.clock[0] += 2.0
            assert self.controller.tick().at, f"tick {step} published nothing"


def make(instances: int = 2, **overrides: Any) -> Lab:
    settings: dict[str, Any] = {
        "model_repository": "hdfs:///models",
        "runtime": "process",
        "service_name": "svc",
        "min_instances": 1,
        "max_instances": 4,
        "cooldown_ms": 10_000,
        "tick_seconds": 2.0,
        "concurrency_per_instance": 4.0,
    }
    config = validate(TarnConfig(**{**settings, **overrides}))
    clock = [0.0]
    rm, scraper = FakeRm(instances), FakeScraper(clock)
    controller = ControlLoop(config, rm, None, scraper, clock=lambda: clock[0], wall=lambda: 1.7e9 + clock[0])
    return Lab(controller, rm, scraper, clock)


def test_load_scales_up_after_the_cooldown_then_idle_drains_and_decommissions() -> None:
    lab = make(instances=2)
    lab.scraper.inflight = {"triton-0": 6.0, "triton-1": 6.0}  # load 1.5 each
    lab.ticks(3)
    assert lab.rm.calls == []  # a new controller first waits a cooldown (it may be a restart)
    lab.ticks(4)
    assert lab.rm.calls == [("flex", 4)]  # 2 x 1.5 = 3.0 instance-loads -> 6 at mid-band, capped at 4
    lab.scraper.inflight = {"triton-0": 0.0, "triton-1": 0.0, "triton-2": 0.0, "triton-3": 3.0}
    lab.ticks(10)
    # mean 0.19 < 0.2: 0.75 instance-loads need 2 at mid-band; the busy one and the oldest stay
    assert lab.rm.calls[1] == ("decommission", ["triton-1", "triton-2"])
    assert lab.controller.snapshot.target == 2
    assert lab.rm.target == 2
    assert [e.direction for e in lab.controller.snapshot.history] == ["down", "up"]


def test_idle_for_the_grace_drains_to_zero_and_held_requests_wake_it_at_once() -> None:
    lab = make(instances=1, min_instances=0, scale_to_zero_after_s=20)
    lab.scraper.inflight = {"triton-0": 1.0}  # serving: the idle clock does not run
    lab.ticks(15)
    assert lab.rm.calls == []
    lab.scraper.inflight = {}
    lab.ticks(14)  # 20 s without a request, then the drain
    assert lab.rm.calls == [("decommission", ["triton-0"])]
    snap = lab.controller.snapshot
    assert (snap.target, snap.running, snap.history[0].target_to) == (0, 0, 0)
    lab.ticks(30)
    assert lab.rm.calls == [("decommission", ["triton-0"])]  # no request, no wake
    assert "scaled to zero<b>yes</b>" in render_dashboard(lab.controller.snapshot)
    lab.controller.note_demand(Report(held=50, oldest_s=0.1, at=0.0))
    lab.ticks(1)  # one tick after the report, no cooldown
    assert lab.rm.calls[-1] == ("flex", 1)
    assert lab.controller.snapshot.held == 50
    text = render(metrics_registry(lab.controller, dict)).decode()
    figures = {s.name: s.value for family in text_string_to_metric_families(text) for s in family.samples}
    assert figures["tarn_requests_held"] == 50
    assert figures["tarn_requests_held_oldest_seconds"] == 0.1
    assert figures["tarn_scaled_to_zero"] == 0  # the flex to 1 is under way
    assert figures["tarn_demand_reports_total"] == 1
    assert "requests held<b>50</b>" in render_dashboard(lab.controller.snapshot)
    assert lab.controller.snapshot.history[0].reason.startswith("50 request(s) held")


def test_held_requests_call_off_a_drain_to_zero() -> None:
    lab = make(instances=1, min_instances=0, scale_to_zero_after_s=20)
    for _tick in range(15):  # idle for the grace: the drain to zero begins
        lab.ticks(1)
        if lab.controller.snapshot.instances[0].state == "DRAINING":
            break
    assert lab.controller.snapshot.instances[0].state == "DRAINING"
    lab.controller.note_demand(Report(held=3))  # a request came while it drained
    lab.ticks(1)
    snap = lab.controller.snapshot
    assert (snap.instances[0].state, snap.instances[0].registered) == ("READY", True)  # serving again
    lab.ticks(3)
    assert lab.rm.calls == []  # nothing removed


def test_a_stale_demand_report_wakes_nothing() -> None:
    lab = make(instances=0, min_instances=0, scale_to_zero_after_s=20)
    lab.controller.note_demand(Report(held=5))
    lab.clock[0] += 11.0  # older than FRESH_S: its activator stopped reporting
    lab.ticks(1)
    assert lab.rm.calls == []
    assert lab.controller.snapshot.held == 0


def test_a_drained_instance_leaves_discovery_before_it_is_removed() -> None:
    lab = make(instances=2, cooldown_ms=0)
    lab.ticks(7)  # idle: 2 -> 1, the victim drains first
    states = {i.instance: (i.state, i.registered) for i in lab.controller.snapshot.instances}
    assert states == {"triton-0": ("READY", True), "triton-1": ("DRAINING", False)}
    assert lab.rm.calls == []
    lab.ticks(3)
    assert lab.rm.calls == [("decommission", ["triton-1"])]


def test_an_unready_instance_is_not_registered() -> None:
    lab = make(instances=2)
    lab.scraper.down = {"triton-1"}
    lab.ticks(2)
    views = {i.instance: (i.state, i.registered) for i in lab.controller.snapshot.instances}
    assert views == {"triton-0": ("READY", True), "triton-1": ("STARTING", False)}


def test_no_registration_before_the_rm_reports_an_address() -> None:
    lab = make(instances=2)
    lab.rm.no_ip = {"triton-1"}
    lab.ticks(2)
    views = {i.instance: (i.ip, i.registered) for i in lab.controller.snapshot.instances}
    assert views == {"triton-0": ("127.0.0.1", True), "triton-1": ("", False)}
    lab.rm.no_ip = set()
    lab.ticks(1)
    assert all(i.registered for i in lab.controller.snapshot.instances)


def test_operator_drain_and_undrain() -> None:
    lab = make(instances=2, cooldown_ms=600_000)
    lab.ticks(1)
    assert lab.controller.drain("triton-0")
    assert not lab.controller.drain("triton-9")
    lab.ticks(3)
    assert lab.controller.drained("triton-0")
    assert [i.registered for i in lab.controller.snapshot.instances] == [False, True]
    assert lab.controller.undrain("triton-0")
    lab.ticks(1)
    assert [i.registered for i in lab.controller.snapshot.instances] == [True, True]
    assert lab.rm.calls == []


def test_an_operator_drain_ends_when_the_instance_restarts() -> None:
    lab = make(instances=1, cooldown_ms=600_000)
    lab.ticks(1)
    lab.controller.drain("triton-0")
    lab.scraper.down = {"triton-0"}
    lab.ticks(1)
    lab.scraper.down = set()
    lab.ticks(1)
    assert lab.controller.snapshot.instances[0].registered


# ---- the HTTP API on a loopback port


@pytest.fixture
def api_url() -> Iterator[str]:
    lab = make(instances=2)
    lab.scraper.inflight = {"triton-0": 1.0}
    lab.ticks(2)
    server = serve(Api(lab.controller, Secret(TOKEN)), "127.0.0.1", 0)
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


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


AUTH = {"X-TARN-Token": TOKEN}


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


def test_instances_json_and_text(api_url: str) -> None:
    listing = json.loads(call(api_url + "/instances", AUTH).body)
    assert listing["target"] == 2
    assert [i["instance"] for i in listing["instances"]] == ["triton-0", "triton-1"]
    keys = {"ip", "http_port", "grpc_port", "metrics_port", "state", "registered", "load", "models", "url"}
    assert keys <= set(listing["instances"][0])
    text = call(api_url + "/instances", {**AUTH, "Accept": "text/plain"})
    assert text.headers["Content-Type"].startswith("text/plain")
    assert text.body == b"127.0.0.1:8000\n127.0.0.1:8000\n"
    assert call(api_url + "/instances?format=text", AUTH).body == text.body


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


def test_each_models_rate_latency_and_totals() -> None:
    lab = make(instances=2)
    lab.scraper.inflight = {"triton-0": 1.0, "triton-1": 3.0}  # 5 and 15 requests/s, 0.2 s each
    lab.ticks(3)
    [model] = lab.controller.snapshot.models
    assert (model.model, model.instances) == ("add_one", 2)
    assert model.requests_per_s == pytest.approx(20.0)
    assert model.latency_s == pytest.approx(0.2)
    assert model.queue_s == pytest.approx(0.02)
    assert lab.controller.counters.models["add_one"].ok == pytest.approx(80.0)  # 2 intervals x 40
    text = render(metrics_registry(lab.controller, dict)).decode()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert samples[("tarn_model_requests_total", (("model", "add_one"), ("outcome", "success")))] == 80.0
    assert samples[("tarn_model_request_duration_seconds_count", (("model", "add_one"),))] == 80.0
    assert samples[("tarn_model_request_duration_seconds_sum", (("model", "add_one"),))] == pytest.approx(
        16.0
    )
    assert samples[("tarn_model_queue_duration_seconds_sum", (("model", "add_one"),))] == pytest.approx(1.6)
    assert samples[("tarn_model_instances", (("model", "add_one"),))] == 2.0
    quantile = ("tarn_model_request_duration_seconds", (("model", "add_one"), ("quantile", "0.99")))
    assert samples[quantile] == 0.4
    assert ("tarn_model_queue_duration_seconds", (("model", "add_one"), ("quantile", "0.5"))) not in samples


def test_the_dashboard_shows_each_models_figures() -> None:
    lab = make(instances=2)
    lab.scraper.inflight = {"triton-0": 1.0, "triton-1": 3.0}
    lab.ticks(3)
    page = render_dashboard(lab.controller.snapshot)
    models = page[page.index("<h2>Models</h2>") :]
    row = models[models.index("<td>add_one</td>") :].split("</tr>", 1)[0]
    cells = "<td>add_one</td><td>triton-0, triton-1</td><td>20.0</td><td>0.0</td>"
    latency = "<td>150.0 ms</td><td>400.0 ms</td><td>200.0 ms</td><td>50.0 ms</td><td>20.0 ms</td>"
    assert row == cells + latency
