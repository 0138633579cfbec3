"""The activator's /metrics (``--admin``, docs/scale-to-zero.md): its families, declared once, and
their text through prometheus_client (tarn.stdlib.exposition, as the front's and the controller's).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from tarn.activator.hold import HOLD_BUCKETS, Activator
from tarn.stdlib.exposition import Family, buckets, render

REQUESTS_HELD = Family(
    "tarn_activator_requests_held", "gauge", "Requests held now, waiting for a ready instance"
)
HELD_BYTES = Family("tarn_activator_held_bytes", "gauge", "Body bytes of the requests held now")
READY_INSTANCES = Family("tarn_activator_ready_instances", "gauge", "Ready instances the activator knows of")
REQUESTS = Family(
    "tarn_activator_requests", "counter", "Requests the activator answered, by outcome", ("outcome",)
)
WAKES = Family("tarn_activator_wakes", "counter", "Times requests began to be held with none held before")
HOLD_SECONDS = Family("tarn_activator_hold_seconds", "histogram", "How long requests were held")

# In the order of the text.
FAMILIES = (REQUESTS_HELD, HELD_BYTES, READY_INSTANCES, REQUESTS, WAKES, HOLD_SECONDS)


class ActivatorCollector(Collector):
    """The activator's figures at each scrape (``instances``: the ready ones it knows of)."""

    def __init__(self, activator: Activator, instances: int) -> None:
        self._activator = activator
        self._instances = instances

    def collect(self) -> Iterator[Metric]:
        activator, stats = self._activator, self._activator.stats
        for family, value in (
            (REQUESTS_HELD, activator.held),
            (HELD_BYTES, activator.held_bytes),
            (READY_INSTANCES, self._instances),
        ):
            gauge = family.gauge()
            gauge.add_metric([], value)
            yield gauge
        requests = REQUESTS.counter()
        for outcome, count in stats.outcomes.items():
            requests.add_metric([outcome], count)
        yield requests
        wakes = WAKES.counter()
        wakes.add_metric([], stats.wakes)
        yield wakes
        hold = HOLD_SECONDS.histogram()  # Stats keeps its buckets cumulated
        hold.add_metric([], buckets(HOLD_BUCKETS, stats.hold_buckets, stats.hold_count), stats.hold_sum_s)
        yield hold


def metrics_text(activator: Activator, instances: int) -> str:
    """Prometheus text (0.0.4) of the activator's figures."""
    return render(ActivatorCollector(activator, instances)).decode()
