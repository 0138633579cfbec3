"""The OpenAI fronts' counters in the controller's /metrics (issue 35, item 4), pure.

Each instance that runs the front (``--openai-port``) is scraped at ``/metrics`` beside Triton
(tarn.controller.observe); its text (tarn.stdlib.openai.counters, under the families that
tarn.stdlib.openai.metric_names declares for both) becomes a :class:`FrontSample`.
Between two samples of one front, :func:`front_deltas` takes each series' increase, as
Prometheus' ``increase()`` does: a series that went down belongs to a front that restarted and
counts from zero; a series first seen counts whole. The first sample of a front is counted from
:data:`NOTHING_COUNTED` where the controller saw the instance start, and is the baseline of a front
it adopted already serving (after a restart of the controller).
A series that did not move is kept with 0, so the totals hold every bucket of a histogram (a
quantile estimated from buckets needs the empty ones' bounds) and a counter exists from 0 before
its first increase (which Prometheus' ``rate()`` would miss otherwise).
The controller adds the increases of every front into totals since it started (so a front that
restarts sets nothing back), and :func:`families` renders them under the fronts' own names, every
instance together: tokens and outcomes by user and model, the time-to-first-token and
between-tokens histograms by model. Streams in flight are a gauge: each front's as last scraped,
summed by model, and per instance (the load signal a router or the autoscaler can use).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families

from tarn.stdlib.openai import metric_names as names

# The fronts' names, types and labels are the front's own declaration; the help is the controller's
# (every front together).
HELP = {
    names.PROMPT_TOKENS: "Prompt tokens of generations through the OpenAI fronts",
    names.COMPLETION_TOKENS: "Completion tokens generated through the OpenAI fronts",
    names.REQUESTS: "Generations through the OpenAI fronts ended, by outcome",
    names.STREAMS_IN_FLIGHT: "Generations streaming from Triton now through the OpenAI fronts",
    names.TIME_TO_FIRST_TOKEN: "From a request's arrival at a front to its first token",
    names.TIME_BETWEEN_TOKENS: "Between two tokens of a stream",
    names.QUEUED_REQUESTS: "Requests waiting for a generation slot at the OpenAI fronts now",
    names.QUEUE_WAIT: "From a request's arrival at a front to its generation slot",
}
STREAMS = names.STREAMS_IN_FLIGHT.name
QUEUED = names.QUEUED_REQUESTS.name
# The monotone families, summed from their increases (a counter's samples end in _total; a
# histogram's in _bucket, _sum, _count); the gauge, streams in flight, is kept as last read.
MONOTONE = tuple(family for family in names.FAMILIES if family.kind != "gauge")
_SAMPLES = {sample: family.name for family in MONOTONE for sample in family.samples}
_SUFFIXES = ("_total", "_bucket", "_sum", "_count")

Labels = tuple[tuple[str, str], ...]  # sorted (name, value) pairs
Series = tuple[str, Labels]  # a sample's name and labels
UserModel = tuple[str, str]
Key = TypeVar("Key")


@dataclass(frozen=True)
class FrontSample:
    counters: Mapping[Series, float]  # every sample of MONOTONE
    streams: Mapping[str, float]  # streams in flight by model
    queued: Mapping[UserModel, float] = field(default_factory=dict)  # waiting for a slot

    @property
    def queued_total(self) -> float:
        return sum(self.queued.values())


def family_of(sample: str) -> str | None:
    """The family a sample name belongs to (``…_bucket`` -> the histogram), None if not kept."""
    return _SAMPLES.get(sample)


def parse_front_metrics(text: str) -> FrontSample:
    """A front's /metrics; ValueError when it is not Prometheus text. Other series are ignored."""
    counters: dict[Series, float] = {}
    streams: dict[str, float] = {}
    queued: dict[UserModel, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == QUEUED:
                key = (sample.labels.get("user", ""), sample.labels.get("model", ""))
                queued[key] = queued.get(key, 0.0) + sample.value
            elif sample.name == STREAMS:
                model = sample.labels.get("model", "")
                streams[model] = streams.get(model, 0.0) + sample.value
            elif family_of(sample.name) is not None:
                counters[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return FrontSample(counters, streams, queued)


NOTHING_COUNTED = FrontSample({}, {})  # a front just started, before its first request


def front_deltas(previous: FrontSample | None, current: FrontSample) -> dict[Series, float]:
    """Each series' increase between two samples of one front (see the module's docstring)."""
    if previous is None:
        return {}
    deltas = {}
    for series, now in current.counters.items():
        then = previous.counters.get(series, 0.0)
        deltas[series] = now - then if now >= then else now
    return deltas


def add(totals: dict[Series, float], deltas: Mapping[Series, float]) -> None:
    for series, increase in deltas.items():
        totals[series] = totals.get(series, 0.0) + increase


def summed(per_instance: Iterable[Mapping[Key, float]]) -> dict[Key, float]:
    """Each instance's gauge, every instance together: streams by model, queued by user and model."""
    total: dict[Key, float] = {}
    for values in per_instance:
        for key, value in values.items():
            total[key] = total.get(key, 0.0) + value
    return total


def _order(series: Series) -> tuple[object, ...]:
    """Within a family: by labels but ``le``, then buckets by bound (+Inf last), then _sum, _count."""
    name, labels = series
    rest = tuple(pair for pair in labels if pair[0] != "le")
    le = dict(labels).get("le")
    bound = float(le) if le is not None else float("inf")
    return (rest, _SUFFIXES.index("_" + name.rsplit("_", 1)[1]), bound)


def families(
    totals: Mapping[Series, float],
    streams: Mapping[str, float],
    queued: Mapping[UserModel, float] | None = None,
) -> Iterator[Metric]:
    """The fronts' families, every instance together, in Prometheus' types."""
    for declared in MONOTONE:
        family = declared.empty(HELP[declared])
        for series in sorted((s for s in totals if family_of(s[0]) == declared.name), key=_order):
            family.add_sample(series[0], dict(series[1]), totals[series])
        yield family
    gauge = names.STREAMS_IN_FLIGHT.empty(HELP[names.STREAMS_IN_FLIGHT])
    for model, value in sorted(streams.items()):
        gauge.add_sample(STREAMS, {"model": model}, value)
    yield gauge
    waiting = names.QUEUED_REQUESTS.empty(HELP[names.QUEUED_REQUESTS])
    for (user, model), value in sorted((queued or {}).items()):
        waiting.add_sample(QUEUED, {"user": user, "model": model}, value)
    yield waiting
