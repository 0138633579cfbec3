"""The activator's /metrics (tarn.activator.metrics), as its admin listener serves it, read back with
prometheus_client's parser: the declared families, types and labels, the figures, no _created."""

from __future__ import annotations

import asyncio
import http.client
import socket
import threading
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tarn.activator import metrics
from tarn.activator.command import serve
from tarn.activator.hold import OUTCOMES, Activator
from tarn.haproxy.plan import Endpoint
from tarn.haproxy.sources import Instance
from tests.support.exposition import departures


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def admin() -> Iterator[tuple[Activator, int]]:
    """An activator serving, with one ready instance listed; its admin port."""
    activator = Activator(lambda: frozenset({Instance(Endpoint("127.0.0.1", 1))}), lambda held, oldest: None)
    listen, port = free_port(), free_port()
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    served = loop.create_task(serve(activator, ("127.0.0.1", listen), ("127.0.0.1", port), stop))
    thread = threading.Thread(target=loop.run_until_complete, args=(served,), daemon=True)
    thread.start()
    try:
        yield activator, port
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(5)
        loop.close()


def scrape(port: int) -> tuple[int, str, str]:
    for _attempt in range(100):  # the listener may not be up yet
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/metrics")
            reply = conn.getresponse()
            return reply.status, reply.getheader("Content-Type", ""), reply.read().decode()
        except ConnectionRefusedError:
            threading.Event().wait(0.05)
    raise AssertionError(f"no admin listener on {port}")


def test_the_admin_listeners_metrics_are_the_declared_families(admin: tuple[Activator, int]) -> None:
    activator, port = admin
    activator.stats.outcomes["after_hold"] += 2
    activator.stats.wakes += 1
    activator.stats.held_for(0.3)
    activator.stats.held_for(3.0)
    status, content_type, text = scrape(port)
    assert (status, content_type) == (200, "text/plain; version=0.0.4; charset=utf-8")
    assert departures(text, metrics.FAMILIES) == []
    assert "_created" not in text
    got = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    assert got[("tarn_activator_ready_instances", ())] == 1
    assert got[("tarn_activator_requests_held", ())] == 0
    assert {labels[0][1] for name, labels in got if name == "tarn_activator_requests_total"} == set(OUTCOMES)
    assert got[("tarn_activator_requests_total", (("outcome", "after_hold"),))] == 2
    assert got[("tarn_activator_wakes_total", ())] == 1
    assert got[("tarn_activator_hold_seconds_bucket", (("le", "0.5"),))] == 1
    assert got[("tarn_activator_hold_seconds_bucket", (("le", "5"),))] == 2
    assert got[("tarn_activator_hold_seconds_bucket", (("le", "+Inf"),))] == 2
    assert got[("tarn_activator_hold_seconds_count", ())] == 2
    assert got[("tarn_activator_hold_seconds_sum", ())] == pytest.approx(3.3)
