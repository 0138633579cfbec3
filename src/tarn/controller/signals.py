"""From Triton's Prometheus text to one load figure per instance (pure functions).

Triton's counters are cumulative, so a load needs two samples: the request rate is the change
of completed requests over the interval, and the average number of requests in flight is the
change of ``nv_inference_request_duration_us`` (total time requests spent in the server,
queue included) over the interval — Little's law. ``nv_inference_pending_request_count`` (a
gauge) catches a queue that builds up faster than requests complete.

The load of an instance is the larger of:
- its GPUs' mean utilization (``nv_gpu_utilization``, already 0..1), when it reports GPUs;
- its requests in flight divided by ``--concurrency-per-instance`` (what counts as full).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Gpu:
    uuid: str
    utilization: float  # 0..1
    memory_used_bytes: float
    memory_total_bytes: float


@dataclass(frozen=True)
class ModelCounters:
    """Triton's cumulative counters of one model on one instance, summed over its versions."""

    ok: float = 0.0
    failed: float = 0.0
    request_us: float = 0.0  # nv_inference_request_duration_us: time in the server, queue included
    queue_us: float = 0.0  # nv_inference_queue_duration_us
    # Triton's own quantiles over its recent window (--metrics-config=summary_latencies=true, which
    # the launcher sets); the largest over the model's versions; None where Triton gives none
    p50_us: float | None = None
    p99_us: float | None = None
    queue_p50_us: float | None = None
    queue_p99_us: float | None = None


@dataclass(frozen=True)
class ModelDelta:
    """What one model did on one instance between two samples."""

    ok: float
    failed: float
    request_s: float
    queue_s: float
    elapsed_s: float


@dataclass(frozen=True)
class TritonSample:
    """One scrape of an instance's metrics port, reduced to what the controller uses."""

    at: float  # monotonic seconds
    requests_ok: float = 0.0
    requests_failed: float = 0.0
    request_duration_us: float = 0.0
    pending: float = 0.0
    gpus: tuple[Gpu, ...] = field(default=())
    models: tuple[tuple[str, ModelCounters], ...] = ()  # by model name, sorted


@dataclass(frozen=True)
class Load:
    value: float  # 0..1 is within capacity; above 1 is overload
    request_rate: float  # completed requests per second
    inflight: float  # mean requests in the server over the interval (or the queue, if larger)
    failure_rate: float
    gpu_utilization: float | None  # mean over the instance's GPUs, None without GPUs


_SUMMED = {
    "nv_inference_request_success": "ok",
    "nv_inference_request_failure": "failed",
    "nv_inference_request_duration_us": "duration",
    "nv_inference_pending_request_count": "pending",
}
_PER_GPU = {
    "nv_gpu_utilization": "utilization",
    "nv_gpu_memory_used_bytes": "used",
    "nv_gpu_memory_total_bytes": "total",
}
_PER_MODEL = {
    "nv_inference_request_success": "ok",
    "nv_inference_request_failure": "failed",
    "nv_inference_request_duration_us": "request_us",
    "nv_inference_queue_duration_us": "queue_us",
}
_QUANTILES = {  # (series, quantile label) -> ModelCounters field
    ("nv_inference_request_summary_us", "0.5"): "p50_us",
    ("nv_inference_request_summary_us", "0.99"): "p99_us",
    ("nv_inference_queue_summary_us", "0.5"): "queue_p50_us",
    ("nv_inference_queue_summary_us", "0.99"): "queue_p99_us",
}
_SUMMARIES = {series for series, _quantile in _QUANTILES}
_GPU_UUID = re.compile(r'gpu_uuid="([^"]*)"')
_MODEL = re.compile(r'[{,]model="([^"]*)"')
_QUANTILE = re.compile(r'[{,]quantile="([^"]*)"')


def parse_triton_metrics(text: str, at: float) -> TritonSample:
    """Sum Triton's per-model series (and keep them per model); keep the per-GPU ones.

    A line reader for the few series used, not a general exposition parser: the controller reads
    every instance every tick, and Triton writes ``name{labels} value`` lines without timestamps.
    """
    sums = dict.fromkeys(_SUMMED.values(), 0.0)
    gpu_values: dict[str, dict[str, float]] = {}
    per_model: dict[str, dict[str, float]] = {}
    quantiles: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        if not line.startswith("nv_"):
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name not in _SUMMED and name not in _PER_GPU and name not in _PER_MODEL and name not in _SUMMARIES:
            continue
        try:
            value = float(line.rsplit(" ", 1)[1])
        except (IndexError, ValueError):
            continue
        if name in _SUMMED:
            sums[_SUMMED[name]] += value
        if name in _PER_MODEL and (model := _MODEL.search(line)):
            counters = per_model.setdefault(model.group(1), dict.fromkeys(_PER_MODEL.values(), 0.0))
            counters[_PER_MODEL[name]] += value
        key = _quantile_field(name, line)
        if key and (model := _MODEL.search(line)) and not math.isnan(value):  # NaN: no request in the window
            mine = quantiles.setdefault(model.group(1), {})
            mine[key] = max(mine.get(key, value), value)
        if name in _PER_GPU and (uuid := _GPU_UUID.search(line)):
            gpu_values.setdefault(uuid.group(1), {})[_PER_GPU[name]] = value
    gpus = tuple(
        Gpu(uuid, v.get("utilization", 0.0), v.get("used", 0.0), v.get("total", 0.0))
        for uuid, v in sorted(gpu_values.items())
    )
    models = tuple(
        (name, ModelCounters(**per_model.get(name, {}), **quantiles.get(name, {})))
        for name in sorted(per_model.keys() | quantiles.keys())
    )
    return TritonSample(at, sums["ok"], sums["failed"], sums["duration"], sums["pending"], gpus, models)


def _quantile_field(name: str, line: str) -> str | None:
    """The ModelCounters field a summary's quantile line fills, if it is one TARN keeps."""
    if name not in _SUMMARIES or not (quantile := _QUANTILE.search(line)):
        return None
    return _QUANTILES.get((name, quantile.group(1)))


def model_deltas(previous: TritonSample | None, current: TritonSample) -> dict[str, ModelDelta]:
    """Per model, what it did between two samples of one instance. A model first seen counts from
    zero (loaded since); one whose counters went down (Triton restarted) is left out."""
    if previous is None or current.at <= previous.at:
        return {}
    before = dict(previous.models)
    deltas = {}
    for name, now in current.models:
        then = before.get(name, ModelCounters())
        ok, failed = now.ok - then.ok, now.failed - then.failed
        request_us, queue_us = now.request_us - then.request_us, now.queue_us - then.queue_us
        if min(ok, failed, request_us, queue_us) < 0:
            continue
        deltas[name] = ModelDelta(ok, failed, request_us / 1e6, queue_us / 1e6, current.at - previous.at)
    return deltas


def instance_load(
    previous: TritonSample | None, current: TritonSample, concurrency_per_instance: float
) -> Load | None:
    """The load between two samples of one instance; None without a usable previous sample.

    A counter that went down means Triton restarted: no load can be derived from that pair.
    """
    gpu = _mean([g.utilization for g in current.gpus]) if current.gpus else None
    if previous is None:
        return None
    elapsed = current.at - previous.at
    completed = current.requests_ok - previous.requests_ok
    failed = current.requests_failed - previous.requests_failed
    busy_us = current.request_duration_us - previous.request_duration_us
    if elapsed <= 0 or completed < 0 or failed < 0 or busy_us < 0:
        return None
    inflight = max(busy_us / (elapsed * 1e6), current.pending)
    value = inflight / concurrency_per_instance
    if gpu is not None:
        value = max(value, gpu)
    return Load(
        value=round(value, 4),
        request_rate=(completed + failed) / elapsed,
        inflight=inflight,
        failure_rate=failed / elapsed,
        gpu_utilization=gpu,
    )


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


@dataclass(frozen=True)
class ModelTotals:
    """Since the controller started: what Triton reported for one model on every instance."""

    ok: float = 0.0
    failed: float = 0.0
    request_s: float = 0.0
    queue_s: float = 0.0

    def plus(self, d: ModelDelta) -> ModelTotals:
        return ModelTotals(
            self.ok + d.ok, self.failed + d.failed, self.request_s + d.request_s, self.queue_s + d.queue_s
        )


@dataclass(frozen=True)
class ModelView:
    """One model over the last tick, all instances together."""

    model: str
    instances: int  # instances that list it as ready
    requests_per_s: float
    failures_per_s: float
    latency_s: float | None  # mean time in the server (queue included); None without requests
    queue_s: float | None
    # Triton's quantiles, the largest over the instances (the slowest instance's); None: none given
    p50_s: float | None = None
    p99_s: float | None = None
    queue_p50_s: float | None = None
    queue_p99_s: float | None = None


def model_views(
    deltas: list[dict[str, ModelDelta]],
    listed: list[tuple[str, ...]],
    latest: list[dict[str, ModelCounters]] | None = None,
) -> tuple[ModelView, ...]:
    """Per model: the instances' deltas of one tick (one dict per instance) added up, the number
    of instances whose model list has it, and the largest of their latest quantiles."""
    latest = latest or []
    names = sorted({name for d in deltas for name in d} | {name for models in listed for name in models})
    views = []
    for name in names:
        mine = [d[name] for d in deltas if name in d and d[name].elapsed_s > 0]
        count = sum(d.ok + d.failed for d in mine)
        counters = [c[name] for c in latest if name in c]
        views.append(
            ModelView(
                model=name,
                instances=sum(name in models for models in listed),
                requests_per_s=sum((d.ok + d.failed) / d.elapsed_s for d in mine),
                failures_per_s=sum(d.failed / d.elapsed_s for d in mine),
                latency_s=sum(d.request_s for d in mine) / count if count else None,
                queue_s=sum(d.queue_s for d in mine) / count if count else None,
                p50_s=_largest_s(c.p50_us for c in counters),
                p99_s=_largest_s(c.p99_us for c in counters),
                queue_p50_s=_largest_s(c.queue_p50_us for c in counters),
                queue_p99_s=_largest_s(c.queue_p99_us for c in counters),
            )
        )
    return tuple(views)


def _largest_s(values_us: Iterable[float | None]) -> float | None:
    known = [v for v in values_us if v is not None]
    return max(known) / 1e6 if known else None
