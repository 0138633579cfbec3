"""Observe: the service's containers from the RM, then every Triton instance scraped at once
(with its OpenAI front's /metrics, where it runs one).

Each scrape has its own timeouts and the whole round has a deadline, so a dead or slow
instance costs at most that deadline and never stalls the loop.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from typing import Any

from tarn.clients.pooled_http import NO_ANSWER, PooledHttp
from tarn.clients.triton import DEFAULT_SERVER_ID, INDEX_PATH, METRICS_PATH, READY_PATH, SERVER_PATH
from tarn.controller.fronts import FrontSample, parse_front_metrics
from tarn.controller.memory import application_of
from tarn.controller.signals import TritonSample, parse_triton_metrics
from tarn.errors import TarnError
from tarn.spec import TRITON, component_of, container_host, instance_number
from tarn.stdlib.api_token import TOKEN_HEADER, Secret
from tarn.stdlib.config import TarnConfig

JSON = dict[str, Any]


@dataclass(frozen=True)
class Container:
    """A Triton container as the RM reports it, with the ports its launcher listens on."""

    instance: str  # component instance name: triton-0
    container_id: str
    host: str
    ip: str  # "" until the RM reports it; discovery publishes addresses only
    yarn_state: str
    http_port: int
    grpc_port: int
    metrics_port: int
    openai_port: int | None = None  # the OpenAI front's (--openai-port), None without one


@dataclass(frozen=True)
class Scrape:
    ready: bool
    sample: TritonSample | None  # None: metrics unreadable this tick
    models: tuple[str, ...] | None  # None: not asked this tick (or unreadable)
    error: str | None = None
    front: FrontSample | None = None  # the OpenAI front's counters; None: no front, or unreadable


# The states of a service the application master reports itself. Without a live AM (an RM that
# restarts, fails over or has not yet heard from a relaunched AM) YARN's ServiceClient answers a
# stub: the name, a state derived from the application report (ACCEPTED, STARTED, ...) and no
# components. Acting on that would read "zero instances".
AM_STATES = frozenset(
    {
        "STABLE",
        "STARTED",
        "FLEX",
        "UPGRADING",
        "UPGRADING_AUTO_FINALIZE",
        "EXPRESS_UPGRADING",
        "CANCEL_UPGRADING",
    }
)


def application_of_container(container_id: str) -> str | None:
    """The YARN application of a container id (``$CONTAINER_ID``): container_[e<epoch>_]<cluster
    timestamp>_<app>_<attempt>_<n> belongs to application_<cluster timestamp>_<app>. None when
    ``container_id`` is not one (a controller run outside YARN)."""
    parts = container_id.split("_")
    if parts[0] != "container" or len(parts) not in (5, 6):
        return None
    if len(parts) == 6 and not parts[1].startswith("e"):
        return None
    timestamp, app = parts[-4], parts[-3]
    return f"application_{timestamp}_{app}" if timestamp.isdigit() and app.isdigit() else None


def distrust(service: JSON | None, own_application: str | None = None) -> str | None:
    """Why the RM's answer cannot be acted on, or None when it is the AM's own view of the service.

    ``own_application``: the controller's own YARN application. A controller left running after
    its service was destroyed or stopped (its node lost to the RM, say) would otherwise flex and
    register the instances of a new service submitted under the same name."""
    if service is None:
        return "the ResourceManager does not know the service (restarting or failing over?)"
    current = application_of(service)
    if own_application is not None and current is not None and current != own_application:
        return (
            f"the service is now {current} and this controller belongs to {own_application}: "
            "it outlived its service and must not act on a new one"
        )
    state = str(service.get("state", ""))
    if state not in AM_STATES:
        return f"the ResourceManager reports the service {state or 'without a state'}"
    triton = component_of(service, TRITON)
    if triton is None or "number_of_containers" not in triton:
        return "the ResourceManager answered without the Triton component (the AM has not reported yet)"
    return None


def containers_of(service: JSON, config: TarnConfig) -> list[Container]:
    """The Triton containers of the RM's service JSON, in instance order."""
    component = component_of(service, TRITON) or {}
    found = []
    for c in component.get("containers", []):
        name = str(c.get("component_instance_name", ""))
        ports = config.instance_ports(instance_number(name))
        found.append(
            Container(
                instance=name,
                container_id=str(c.get("id", "")),
                host=container_host(c),
                ip=str(c.get("ip") or ""),  # the RM fills it in shortly after the launch
                yarn_state=str(c.get("state", "")),
                http_port=ports.http,
                grpc_port=ports.grpc,
                metrics_port=ports.metrics,
                openai_port=ports.openai,
            )
        )
    return sorted(found, key=lambda c: instance_number(c.instance))


def with_known_addresses(containers: list[Container], known: dict[str, Container]) -> list[Container]:
    """A container keeps the address the RM gave it while a later answer lacks one (a relaunched
    AM recovering its containers reports them before their addresses)."""
    return [
        replace(c, host=known[c.container_id].host, ip=known[c.container_id].ip)
        if not c.ip and c.container_id in known and known[c.container_id].ip
        else c
        for c in containers
    ]


# The YARN state shown for an instance the RM's answer left out while it still serves.
UNREPORTED = "UNREPORTED"
# How long such an instance may stay unlisted: a relaunched AM lists its recovered containers
# within seconds; an instance YARN has forgotten for longer is withdrawn, serving or not.
UNREPORTED_GRACE_S = 120.0


def unreported(serving: dict[str, Container], listed: list[Container]) -> list[Container]:
    """The instances that were serving last tick and are missing from the RM's answer, marked
    UNREPORTED. A relaunched AM lists the containers it recovers one by one; YARN removes a
    container that ended from the list too, but its Triton then stops answering readiness, so a
    missing instance keeps serving (is scraped and stays registered) only while it answers."""
    present = {c.container_id for c in listed}
    return [replace(c, yarn_state=UNREPORTED) for key, c in serving.items() if key not in present]


def answered_by(container_id: str, status: int, body: bytes) -> bool:
    """Whether Triton's server metadata comes from ``container_id``'s own tritonserver. On a fixed
    port, an instance stopped on the same node a moment ago may still answer ready (until the
    NodeManager's SIGKILL) while the new one waits for the port: its --id is another container's.
    Metadata without an id of a container (Triton's default, an unreadable answer) is trusted."""
    if status != 200:
        return True
    try:
        name = json.loads(body).get("name")
    except (ValueError, AttributeError):
        return True
    return (
        not isinstance(name, str)
        or name in (container_id, DEFAULT_SERVER_ID)
        or not name.startswith("container_")
    )


class Scraper:
    """Concurrent readiness + metrics (+ repository index when asked) of many instances."""

    def __init__(
        self,
        workers: int = 32,
        timeout: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        token: Secret | None = None,
    ) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="scrape")
        # Straight to the instances (no proxy), on kept-alive connections, without requests'
        # per-call overhead: at 1,000 instances that overhead was most of a tick.
        self._http = PooledHttp(connect_timeout=timeout / 2, read_timeout=timeout)
        self._timeout = timeout
        self._clock = clock
        self._confirmed: set[str] = set()  # containers whose port is their own Triton's
        # The OpenAI fronts' /metrics need the service's token (every user's usage is on it).
        self._front_headers = {} if token is None else {TOKEN_HEADER: token.reveal()}

    def scrape_all(self, containers: list[Container], want_models: set[str]) -> dict[str, Scrape]:
        """Scrape every container; ``want_models``: container ids whose model list to read."""
        futures = {
            c.container_id: self._pool.submit(self._scrape, c, c.container_id in want_models)
            for c in containers
            if c.ip  # no address yet: not registrable, so not worth a probe
        }
        self._confirmed &= set(futures)
        wait(futures.values(), timeout=self._timeout * 2.5)
        results: dict[str, Scrape] = {}
        for container_id, future in futures.items():
            if future.done() and future.exception() is None:
                results[container_id] = future.result()
            else:
                future.cancel()
                results[container_id] = Scrape(False, None, None, "no answer within the tick's deadline")
        return results

    def _scrape(self, container: Container, with_models: bool) -> Scrape:
        if not self._ready(container):
            return Scrape(False, None, None, "not ready")
        return replace(self._triton(container, with_models), front=self._front(container))

    def _front(self, container: Container) -> FrontSample | None:
        """The OpenAI front's counters; None without a front or an answer (the next one counts)."""
        if container.openai_port is None:
            return None
        try:
            status, text = self._http.request(
                "GET", container.ip, container.openai_port, METRICS_PATH, headers=self._front_headers
            )
            return parse_front_metrics(text.decode()) if status == 200 else None
        except (*NO_ANSWER, ValueError):
            return None

    def _triton(self, container: Container, with_models: bool) -> Scrape:
        """A ready Triton's metrics, and its models when asked."""
        try:
            status, text = self._http.request("GET", container.ip, container.metrics_port, METRICS_PATH)
            if status != 200:
                return Scrape(True, None, None, f"metrics: answered {status}")
            sample = parse_triton_metrics(text.decode(), self._clock())
        except NO_ANSWER as exc:
            return Scrape(True, None, None, f"metrics: {exc.__class__.__name__}")
        except (TarnError, ValueError) as exc:
            return Scrape(True, None, None, f"metrics: {exc}")
        models = None
        if with_models:
            try:
                status, body = self._http.request(
                    "POST", container.ip, container.http_port, INDEX_PATH, b"{}"
                )
                if status == 200:
                    index = json.loads(body)
                    models = tuple(sorted(m["name"] for m in index if m.get("state") == "READY"))
            except (*NO_ANSWER, ValueError, KeyError, TypeError, AttributeError):
                models = None
        return Scrape(True, sample, models)

    def _ready(self, container: Container) -> bool:
        """/v2/health/ready answers 200: a refused or slow connection is simply not ready. Until
        it has been seen once, the Triton answering must also be this container's own."""
        try:
            status = self._http.request("GET", container.ip, container.http_port, READY_PATH)[0]
            if status != 200:
                return False
            if container.container_id not in self._confirmed:
                reply, body = self._http.request("GET", container.ip, container.http_port, SERVER_PATH)
                if not answered_by(container.container_id, reply, body):
                    return False
                self._confirmed.add(container.container_id)
        except NO_ANSWER:
            return False
        return True

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._http.close()
