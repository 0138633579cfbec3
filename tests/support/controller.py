"""The control loop without a cluster: a scripted RM and scripted scrapes drive the real
ControlLoop tick by tick (make, Lab), and a registry stands in for ZooKeeper. The tests of
tarn.controller, of tarn.service's scaling, of the Grafana dashboard and of the controller's API
in tests/integration use them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from tarn.controller.fronts import parse_front_metrics
from tarn.controller.loop import ControlLoop
from tarn.controller.observe import Container, Scrape
from tarn.controller.registry import RegistryPlan
from tarn.controller.signals import ModelCounters, TritonSample
from tarn.stdlib.config import TarnConfig, validate
from tarn.stdlib.openai.counters import Counters, prometheus_text

TOKEN = "t0k3n-Secret"  # noqa: S105 - a test token
AUTH = {"X-TARN-Token": TOKEN}
MODELS = ("add_one", "add_sub", "linear_onnx")  # what a ModelScraper's instances serve
# YARN's answer without a live AM (ServiceClient.getStatus: name, id, a state from the
# application report): no components
STUB = {"name": "svc", "id": "application_1_0001", "state": "STARTED"}


class FakeRm:
    def __init__(self, instances: int) -> None:
        self.no_ip: set[str] = set()  # instances the RM reports without an address yet
        self.unlisted: set[str] = set()  # instances the RM leaves out (a relaunched AM recovering)
        self.unready: set[str] = set()  # instances YARN's readiness check fails (RUNNING_BUT_UNREADY)
        self.target = instances
        self.next_id = instances
        self.names = [f"triton-{n}" for n in range(instances)]
        self.calls: list[tuple[str, Any]] = []
        self.application: str | None = STUB["id"]  # the service's YARN application ("id"); None: left out

    def service(self, name: str) -> dict[str, Any]:
        containers = [
            {
                "component_instance_name": n,
                "id": f"c-{n}",
                "hostname": "w",
                "ip": None if n in self.no_ip else "127.0.0.1",
                "state": "RUNNING_BUT_UNREADY" if n in self.unready else "READY",
            }
            for n in self.names
            if n not in self.unlisted
        ]
        application = {"id": self.application} if self.application is not None else {}
        return {"name": name, **application, "state": "STABLE", "components": [
            {"name": "controller", "number_of_containers": 1, "containers": []},
            {"name": "triton", "number_of_containers": self.target, "containers": containers},
        ]}  # fmt: skip

    def flex(self, name: str, component: str, count: int) -> dict[str, Any]:
        self.calls.append(("flex", count))
        while len(self.names) < count:
            self.names.append(f"triton-{self.next_id}")
            self.next_id += 1
        del self.names[count:]  # a flex down removes the newest instances (YARN 3.4.2)
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


class ModelScraper(FakeScraper):
    """Every instance serves MODELS."""

    def scrape_all(self, containers: list[Container], want_models: set[str]) -> dict[str, Scrape]:
        return {
            k: replace(s, models=MODELS if s.models is not None else None)
            for k, s in super().scrape_all(containers, want_models).items()
        }


class FrontScraper(FakeScraper):
    """Triton as FakeScraper's, and each instance's OpenAI front answering from ``fronts``
    (instance name -> its counters now), read through the text the front serves on /metrics."""

    def __init__(self, clock: list[float]) -> None:
        super().__init__(clock)
        self.fronts: dict[str, Counters] = {}

    def scrape_all(self, containers: list[Container], want_models: set[str]) -> dict[str, Scrape]:
        scrapes = super().scrape_all(containers, want_models)
        for c in containers:
            if c.instance in self.fronts and c.container_id in scrapes:
                text = prometheus_text(self.fronts[c.instance])
                scrapes[c.container_id] = replace(scrapes[c.container_id], front=parse_front_metrics(text))
        return scrapes


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


def make(instances: int = 2, scraper_type: type[FakeScraper] = FakeScraper, **overrides: Any) -> Lab:
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
    rm, scraper = FakeRm(instances), scraper_type(clock)
    controller = ControlLoop(config, rm, None, scraper, clock=lambda: clock[0], wall=lambda: 1.7e9 + clock[0])
    return Lab(controller, rm, scraper, clock)


class Registry:
    """What the loop needs of ZooKeeper: a connected registry that records each sync."""

    def __init__(self) -> None:
        self.znodes: dict[str, bytes] = {}
        self.syncs = 0
        self.memory: bytes | None = None

    @property
    def connected(self) -> bool:
        return True

    def sync(self, wanted: dict[str, bytes]) -> RegistryPlan:
        self.syncs += 1
        self.znodes = dict(wanted)
        return RegistryPlan()

    def registered(self) -> set[str]:
        return set(self.znodes)

    def load_memory(self) -> bytes | None:
        return self.memory

    def save_memory(self, data: bytes) -> None:
        self.memory = data
