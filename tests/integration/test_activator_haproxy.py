"""The activator (from the zipapp the haproxy role installs) as the backup server of the real
HAProxy, with the role's haproxy.cfg, the sync and a real ZooKeeper, in a network namespace of
its own (the harness of tests/support/haproxy.py, as test_haproxy_sync.py uses it; the Triton
instances are stand-ins that answer with their address).

* From zero: a burst through HAProxy is held, the demand reaches ZooKeeper, and every request is
  answered once an instance registers; afterwards the activator carries nothing.
* The only instance killed under load: HAProxy marks it down on the first refused connection,
  the retry goes to the activator, which waits for the replacement: no request fails.
"""

from __future__ import annotations

import http.client
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support.haproxy import (
    INSTANCES,
    Bench,
    Haproxy,
    ZooKeeper,
    activator_metrics,
    demand,
    enter_netns,
    start_zookeeper,
    wait_until,
    znode,
)

pytestmark = pytest.mark.usefixtures("haproxy_tools")

Stack = tuple[Bench, ZooKeeper, ThreadPoolExecutor, Haproxy]


@pytest.fixture
def stack(request: pytest.FixtureRequest) -> Iterator[Stack]:
    lab: Bench = request.getfixturevalue("bench")
    cfg: Path = request.getfixturevalue("role_cfg")
    zk = start_zookeeper(lab)
    proxy = lab.haproxy(cfg)
    lab.sync("--zk-ensemble", zk.ensemble, "--zk-path", zk.path)
    lab.ns.popen(
        [sys.executable, "-I", str(lab.zipapp), "activator", "--hold-timeout", "20",
         "--zk-ensemble", zk.ensemble, "--zk-path", zk.path],
        "activator.log",
    )  # fmt: skip
    clients = ThreadPoolExecutor(64, initializer=enter_netns, initargs=(lab.ns.holder.pid,))
    try:
        wait_until(lambda: clients.submit(activator_metrics).result() is not None, "the activator runs", 20)
        yield lab, zk, clients, proxy
    finally:
        clients.shutdown(wait=False, cancel_futures=True)
        log = lab.tmp / "activator.log"
        if log.exists():
            print(f"---- activator.log\n{log.read_text()[-4000:]}")


def get(path: str = "/v2/models", timeout: float = 30.0) -> tuple[int, str, float]:
    """GET through HAProxy's frontend (in the namespace): status, body, seconds."""
    began = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", 80, timeout=timeout)
    try:
        conn.request("GET", path)
        reply = conn.getresponse()
        return reply.status, reply.read().decode(), time.monotonic() - began
    except OSError as exc:
        return 0, repr(exc), time.monotonic() - began
    finally:
        conn.close()


def test_a_burst_from_zero_is_held_then_answered(stack: Stack) -> None:
    lab, zk, clients, proxy = stack
    burst = [clients.submit(get) for count in range(50)]

    def held() -> float:
        figures = clients.submit(activator_metrics).result()
        return figures["tarn_activator_requests_held"] if figures else -1

    wait_until(lambda: held() == 50, "50 requests held", 15)
    # what the controller reads (the reporter rewrites it every second while requests are held)
    # (10 s: under the hold timeout, 20 s; a znode read can wait on a ZooKeeper reconnect, CI28)
    wait_until(lambda: demand(zk)["held"] == 50, "the demand znode says 50 held", 10)

    registered = time.monotonic()
    zk.tell(f"put container_1 {znode(INSTANCES[0], 0)}")  # what the controller does once it is ready
    replies = [f.result() for f in burst]
    answered = time.monotonic() - registered
    assert [r[0] for r in replies] == [200] * 50
    assert {r[1] for r in replies} == {INSTANCES[0]}
    print(f"\n[activator] 50 held requests answered {answered:.2f} s after the instance registered")
    wait_until(lambda: demand(zk)["held"] == 0, "the demand znode says none held", 10)

    # Once HAProxy's check has the slot up, the activator is out of the path.
    wait_until(lambda: lab.ns.get("/v2/models")[0] == 200, "HAProxy serves", 10)
    wait_until(lambda: proxy.serving() == {INSTANCES[0]}, "the slot's health check passed", 10)
    before = clients.submit(activator_metrics).result()
    after_burst = [f.result() for f in [clients.submit(get) for count in range(200)]]
    after = clients.submit(activator_metrics).result()
    assert [r[0] for r in after_burst] == [200] * 200
    assert before is not None
    assert after is not None
    carried = sum(after[k] - before[k] for k in after if k.startswith("tarn_activator_requests_total"))
    print(f"[activator] with the instance up: 200 requests, {carried:.0f} through the activator")
    assert carried == 0


def test_the_only_instance_killed_under_load_fails_no_request(
    stack: Stack,
) -> None:
    lab, zk, clients, proxy = stack
    zk.tell(f"put container_1 {znode(INSTANCES[0], 0)}")
    wait_until(lambda: lab.ns.get("/v2/models")[0] == 200, "served by the first instance", 15)
    wait_until(lambda: proxy.serving() == {INSTANCES[0]}, "the slot's health check passed", 10)

    results: list[tuple[int, str, float]] = []
    stop = threading.Event()

    def load() -> None:
        while not stop.is_set():
            results.append(get())

    workers = [clients.submit(load) for count in range(4)]
    time.sleep(1.0)
    first = lab.ns.servers[0]  # the stand-in at INSTANCES[0]
    killed = time.monotonic()
    first.shutdown()
    first.server_close()  # connections refused from now on, as from a killed Triton
    time.sleep(1.0)
    zk.tell("del container_1")  # the controller sees it unready and deregisters it
    time.sleep(2.0)
    zk.tell(f"put container_2 {znode(INSTANCES[1], 1)}")  # YARN's relaunch is ready
    wait_until(lambda: any(r[1] == INSTANCES[1] for r in results[-5:]), "served by the replacement", 15)
    recovered = time.monotonic() - killed
    time.sleep(1.0)
    stop.set()
    for worker in workers:
        worker.result()

    failed = [r for r in results if r[0] != 200]
    longest = max(r[2] for r in results)
    figures = clients.submit(activator_metrics).result() or {}
    print(
        f"\n[activator] only instance killed under load: {len(results)} requests, {len(failed)} failed, "
        f"longest wait {longest:.2f} s, serving again {recovered:.2f} s after the kill; "
        f"held by the activator: {figures.get('tarn_activator_requests_total:after_hold', 0):.0f}"
    )
    assert failed == []
    assert figures.get("tarn_activator_requests_total:after_hold", 0) > 0
