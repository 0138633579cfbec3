"""/metrics of TARN's listeners (the OpenAI front, the activator), through prometheus_client.

One way for every exposition, the controller's too (tarn.controller.metrics): custom collectors
yield prometheus_client's own families, and ``generate_latest`` writes them from a private
``CollectorRegistry`` (Prometheus text 0.0.4). A listener declares each of its families once, as a
:class:`Family` (name, type, help, label names); its collector fills the family's ``counter()``,
``gauge()`` or ``histogram()`` from its figures, and :func:`render` writes the text. Families are
built without a created time, so no ``_created`` series. prometheus_client escapes label values
(quotes, backslashes, newlines); :func:`label` keeps one that UTF-8 cannot carry (a lone
surrogate) from failing the whole text.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

Kind = Literal["counter", "gauge", "histogram"]
_SUFFIXES: dict[str, tuple[str, ...]] = {
    "counter": ("_total",),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count"),
}


@dataclass(frozen=True)
class Family:
    """One metric family, declared once: what the listener writes and what readers expect."""

    name: str  # the family's, as prometheus_client's parser gives it (a counter's without _total)
    kind: Kind
    help: str
    labels: tuple[str, ...] = ()  # in the order the collector gives values; a histogram's le besides

    @property
    def samples(self) -> tuple[str, ...]:
        """The names its samples carry in the text: ``…_total`` for a counter, ``…_bucket``,
        ``…_sum``, ``…_count`` for a histogram, the name itself for a gauge."""
        return tuple(self.name + suffix for suffix in _SUFFIXES[self.kind])

    def empty(self, help_text: str | None = None) -> Metric:
        """The family without samples, for ``add_sample`` (``help_text``: another help than its own)."""
        return Metric(self.name, self.help if help_text is None else help_text, self.kind)

    def counter(self) -> CounterMetricFamily:
        """The counter without samples, for ``add_metric`` with its label values."""
        self._is("counter")
        return CounterMetricFamily(self.name, self.help, labels=self.labels)

    def gauge(self) -> GaugeMetricFamily:
        self._is("gauge")
        return GaugeMetricFamily(self.name, self.help, labels=self.labels)

    def histogram(self) -> HistogramMetricFamily:
        self._is("histogram")
        return HistogramMetricFamily(self.name, self.help, labels=self.labels)

    def _is(self, kind: Kind) -> None:
        if self.kind != kind:
            raise TypeError(f"{self.name} is declared a {self.kind}, not a {kind}")


def label(value: str) -> str:
    """A label value as the UTF-8 text can carry it: a lone surrogate (which no UTF-8 can encode,
    and which would fail the whole exposition) written as its escape, ``\\ud800``."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def buckets(bounds: Sequence[float], cumulated: Iterable[float], count: float) -> list[tuple[str, float]]:
    """A histogram's buckets for ``HistogramMetricFamily.add_metric``: each bound's ``le`` written
    ``%g`` (``1``, ``0.025``: the series keep the names they have always had), then ``+Inf``."""
    return [*((f"{bound:g}", value) for bound, value in zip(bounds, cumulated, strict=True)), ("+Inf", count)]


def render(*collectors: Collector) -> bytes:
    """The collectors' families in Prometheus text (0.0.4), from a registry of their own."""
    registry = CollectorRegistry(auto_describe=False)
    for collector in collectors:
        registry.register(collector)
    return generate_latest(registry)
