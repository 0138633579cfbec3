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

import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Gpu:
    uuid: str
    utilization: float  # 0..1
    memory_used_bytes: float
    memory_total_bytes: float


@dataclass(frozen=True)
class TritonSample:
    """One scrape of an instance's metrics port, reduced to what the controller uses."""

    at: float  # monotonic seconds
    requests_ok: float = 0.0
    requests_failed: float = 0.0
    request_duration_us: float = 0.0
    pending: float = 0.0
    gpus: tuple[Gpu, ...] = field(default=())


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
_GPU_UUID = re.compile(r'gpu_uuid="([^"]*)"')


def parse_triton_metrics(text: str, at: float) -> TritonSample:
    """Sum Triton's per-model series; keep the per-GPU ones.

    A line reader for the few series used, not a general exposition parser: the controller reads
    every instance every tick, and Triton writes ``name{labels} value`` lines without timestamps.
    """
    sums = dict.fromkeys(_SUMMED.values(), 0.0)
    gpu_values: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        if not line.startswith("nv_"):
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        key = _SUMMED.get(name) or _PER_GPU.get(name)
        if key is None:
            continue
        try:
            value = float(line.rsplit(" ", 1)[1])
        except (IndexError, ValueError):
            continue
        if name in _SUMMED:
            sums[key] += value
        else:
            uuid = _GPU_UUID.search(line)
            if uuid:
                gpu_values.setdefault(uuid.group(1), {})[key] = value
    gpus = tuple(
        Gpu(uuid, v.get("utilization", 0.0), v.get("used", 0.0), v.get("total", 0.0))
        for uuid, v in sorted(gpu_values.items())
    )
    return TritonSample(at, sums["ok"], sums["failed"], sums["duration"], sums["pending"], gpus)


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
