"""Triton's metrics text → samples → load, and each model's figures."""

from __future__ import annotations

import pytest

from tarn.controller.signals import (
    ModelCounters,
    ModelDelta,
    TritonSample,
    instance_load,
    model_deltas,
    model_views,
    parse_triton_metrics,
)

# The shape of Triton 2.x's metrics port (series as the lab's tritonserver writes them).
TRITON_TEXT = """\
# HELP nv_inference_request_success Number of successful inference requests, all batch sizes
# TYPE nv_inference_request_success counter
nv_inference_request_success{model="add_one",version="1"} 120
nv_inference_request_success{model="linear_onnx",version="1"} 30
# HELP nv_inference_request_failure Number of failed inference requests, all batch sizes
# TYPE nv_inference_request_failure counter
nv_inference_request_failure{model="add_one",reason="BACKEND",version="1"} 2
nv_inference_request_failure{model="add_one",reason="OTHER",version="1"} 1
# HELP nv_inference_request_duration_us Cumulative inference request duration in microseconds
# TYPE nv_inference_request_duration_us counter
nv_inference_request_duration_us{model="add_one",version="1"} 4000000
nv_inference_request_duration_us{model="linear_onnx",version="1"} 1000000
# HELP nv_inference_pending_request_count Instantaneous number of pending requests
# TYPE nv_inference_pending_request_count gauge
nv_inference_pending_request_count{model="add_one",version="1"} 3
# HELP nv_gpu_utilization GPU utilization rate [0.0 - 1.0)
# TYPE nv_gpu_utilization gauge
nv_gpu_utilization{gpu_uuid="GPU-aaaa"} 0.5
nv_gpu_utilization{gpu_uuid="GPU-bbbb"} 0.7
# HELP nv_gpu_memory_total_bytes GPU total memory, in bytes
# TYPE nv_gpu_memory_total_bytes gauge
nv_gpu_memory_total_bytes{gpu_uuid="GPU-aaaa"} 8e9
# HELP nv_gpu_memory_used_bytes GPU used memory, in bytes
# TYPE nv_gpu_memory_used_bytes gauge
nv_gpu_memory_used_bytes{gpu_uuid="GPU-aaaa"} 2e9
"""


def test_parse_sums_models_and_keeps_gpus() -> None:
    sample = parse_triton_metrics(TRITON_TEXT, at=5.0)
    assert (sample.requests_ok, sample.requests_failed, sample.pending) == (150, 3, 3)
    assert sample.request_duration_us == 5_000_000
    assert [(g.uuid, g.utilization) for g in sample.gpus] == [("GPU-aaaa", 0.5), ("GPU-bbbb", 0.7)]
    assert (sample.gpus[0].memory_used_bytes, sample.gpus[0].memory_total_bytes) == (2e9, 8e9)


def test_parse_keeps_each_models_counters() -> None:
    sample = parse_triton_metrics(TRITON_TEXT + QUEUE_TEXT, at=5.0)
    assert sample.models == (
        ("add_one", ModelCounters(ok=120, failed=3, request_us=4_000_000, queue_us=250_000)),
        ("linear_onnx", ModelCounters(ok=30, failed=0, request_us=1_000_000, queue_us=0)),
    )


QUEUE_TEXT = """\
# TYPE nv_inference_queue_duration_us counter
nv_inference_queue_duration_us{model="add_one",version="1"} 200000
nv_inference_queue_duration_us{model="add_one",version="2"} 50000
"""


# The lab's tritonserver with --metrics-config=summary_latencies=true after 5 add_one requests
# (a second version's line added by hand, and a quantile without observations).
TRITON_SUMMARY_TEXT = """\
nv_inference_request_success{model="add_one",version="1"} 5
nv_inference_request_duration_us{model="add_one",version="1"} 30216
nv_inference_queue_duration_us{model="add_one",version="1"} 232
# HELP nv_inference_request_summary_us Summary of inference request duration in microseconds
# TYPE nv_inference_request_summary_us summary
nv_inference_request_summary_us_count{model="add_one",version="1"} 5
nv_inference_request_summary_us_sum{model="add_one",version="1"} 30216
nv_inference_request_summary_us{model="add_one",version="1",quantile="0.5"} 420
nv_inference_request_summary_us{model="add_one",version="1",quantile="0.9"} 439
nv_inference_request_summary_us{model="add_one",version="1",quantile="0.99"} 439
nv_inference_request_summary_us{model="add_one",version="2",quantile="0.99"} 900
nv_inference_request_summary_us{model="idle",version="1",quantile="0.5"} NaN
# TYPE nv_inference_queue_summary_us summary
nv_inference_queue_summary_us_count{model="add_one",version="1"} 5
nv_inference_queue_summary_us{model="add_one",version="1",quantile="0.5"} 21
nv_inference_queue_summary_us{model="add_one",version="1",quantile="0.99"} 25
"""


def test_parse_keeps_tritons_quantiles_the_largest_over_versions() -> None:
    [(name, counters)] = parse_triton_metrics(TRITON_SUMMARY_TEXT, at=1.0).models
    assert name == "add_one"
    assert counters == ModelCounters(
        ok=5,
        failed=0,
        request_us=30216,
        queue_us=232,
        p50_us=420,
        p99_us=900,
        queue_p50_us=21,
        queue_p99_us=25,
    )


def test_model_views_add_up_instances_and_keep_the_slowest_quantile() -> None:
    delta = ModelDelta(ok=10, failed=2, request_s=1.2, queue_s=0.12, elapsed_s=2.0)
    fast, slow = ModelCounters(p50_us=400, p99_us=800), ModelCounters(p50_us=500, p99_us=3000)
    view, other = model_views([{"m": delta}, {"m": delta}], [("m", "other")], [{"m": fast}, {"m": slow}])
    assert (other.model, other.instances, other.requests_per_s, other.latency_s) == ("other", 1, 0.0, None)
    assert (view.requests_per_s, view.failures_per_s, view.instances) == (12.0, 2.0, 1)
    assert view.latency_s == pytest.approx(0.1)
    assert view.queue_s == pytest.approx(0.01)
    assert (view.p50_s, view.p99_s, view.queue_p99_s) == (0.0005, 0.003, None)


def test_model_deltas_between_two_samples() -> None:
    before = TritonSample(10.0, models=(("a", ModelCounters(10, 1, 2e6, 1e5)), ("gone", ModelCounters(5))))
    after = TritonSample(
        12.0,
        models=(("a", ModelCounters(30, 1, 4e6, 3e5)), ("new", ModelCounters(4, 0, 4e5, 0))),
    )
    assert model_deltas(before, after) == {
        "a": ModelDelta(ok=20, failed=0, request_s=2.0, queue_s=0.2, elapsed_s=2.0),
        "new": ModelDelta(ok=4, failed=0, request_s=0.4, queue_s=0.0, elapsed_s=2.0),  # loaded since
    }
    restarted = TritonSample(14.0, models=(("a", ModelCounters(3, 0, 1e5, 0)),))
    assert model_deltas(after, restarted) == {}  # counters went down: no figure from that pair
    assert model_deltas(None, after) == {}


def test_parse_without_gpus_or_traffic() -> None:
    sample = parse_triton_metrics("nv_pinned_memory_pool_total_bytes 268435456\n", at=1.0)
    assert sample == TritonSample(at=1.0)


def sample(at: float, ok: float, duration_s: float, pending: float = 0, failed: float = 0) -> TritonSample:
    return TritonSample(at, ok, failed, duration_s * 1e6, pending)


@pytest.mark.parametrize(
    ("previous", "current", "value", "rate"),
    [
        (sample(0, 0, 0), sample(2, 0, 0), 0.0, 0.0),  # idle
        (sample(0, 0, 0), sample(2, 100, 8.0), 1.0, 50.0),  # 4 in flight on average = full at 4
        (sample(0, 0, 0), sample(2, 10, 1.0), 0.125, 5.0),
        (sample(0, 0, 0), sample(2, 0, 0, pending=6), 1.5, 0.0),  # a queue that completes nothing
        (sample(0, 0, 0), sample(2, 10, 0, failed=10), 0.0, 10.0),  # failures count as requests
    ],
)
def test_load_from_two_samples(
    previous: TritonSample, current: TritonSample, value: float, rate: float
) -> None:
    load = instance_load(previous, current, concurrency_per_instance=4)
    assert load is not None
    assert (load.value, load.request_rate) == (value, rate)


def test_gpu_utilization_raises_the_load() -> None:
    busy_gpu = parse_triton_metrics(TRITON_TEXT, at=2.0)
    earlier = TritonSample(0.0, busy_gpu.requests_ok, busy_gpu.requests_failed, busy_gpu.request_duration_us)
    load = instance_load(earlier, busy_gpu, concurrency_per_instance=100)
    assert load is not None
    assert (load.gpu_utilization, load.value) == pytest.approx((0.6, 0.6))


@pytest.mark.parametrize(
    ("previous", "current"),
    [
        (None, sample(2, 5, 1)),  # first sight: no rate yet
        (sample(0, 50, 5), sample(2, 3, 1)),  # Triton restarted: counters went down
        (sample(2, 0, 0), sample(2, 5, 1)),  # no time elapsed
    ],
)
def test_no_load_without_a_usable_pair(previous: TritonSample | None, current: TritonSample) -> None:
    assert instance_load(previous, current, 4) is None
