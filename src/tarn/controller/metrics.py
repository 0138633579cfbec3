"""/metrics: the controller's view in Prometheus text, through prometheus_client.

The seeds' names (tarn_target_containers, tarn_running_containers, tarn_container_load,
tarn_gpu_utilization, tarn_gpu_memory_used) plus request, latency and scaling series. Gauges
are read from the latest snapshot at scrape time; counters live in the controller.
Labels never carry a secret: instance names, container ids, hosts, GPU UUIDs only.

Per model (every instance together): ``tarn_model_requests_total`` (label outcome),
``tarn_model_request_duration_seconds`` and ``tarn_model_queue_duration_seconds`` (summaries: _sum
and _count, mean = rate(_sum) / rate(_count); quantiles 0.5 and 0.99 from Triton's own summaries,
the slowest instance's), ``tarn_model_instances``.

The OpenAI fronts (``--openai-port``, every instance together, tarn.controller.fronts): their own
names, ``tarn_openai_prompt_tokens_total`` and ``tarn_openai_completion_tokens_total`` (labels user
and model), ``tarn_openai_requests_total`` (user, model, outcome), the histograms
``tarn_openai_time_to_first_token_seconds`` and ``tarn_openai_time_between_tokens_seconds`` (model),
all since the controller started; ``tarn_openai_streams_in_flight`` (model) now, and per instance
``tarn_container_openai_streams``.

Scale to zero: ``tarn_scaled_to_zero`` (0/1, with ``--scale-to-zero-after``), ``tarn_requests_held``
and ``tarn_requests_held_oldest_seconds`` (an activator's last report), ``tarn_demand_reports_total``.

With ``--ranger-service``: ``tarn_ranger_policies_loaded`` and ``tarn_ranger_policies_stale`` (0/1),
``tarn_ranger_policy_version``, ``tarn_ranger_policy_age_seconds`` (since Admin last confirmed the
policies in force), ``tarn_ranger_refresh_failures_total`` and ``tarn_ranger_decisions_total``
(labels access and decision: never a user or a model); with ``--ranger-audit`` also
``tarn_ranger_audit_events_written_total``, ``..._dropped_total``, ``tarn_ranger_audit_write_failures_total``
and ``tarn_ranger_audit_events_pending``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tarn.controller import fronts
from tarn.controller.fronts import Series
from tarn.controller.publication import Controller, Counters
from tarn.controller.signals import ModelTotals
from tarn.controller.snapshot import Snapshot
from tarn.ranger.authorizer import Authorizer

INSTANCE_LABELS = ["instance", "container", "host"]


class SnapshotCollector(Collector):
    def __init__(
        self,
        controller: Controller,
        api_requests: Callable[[], dict[tuple[str, str], int]],
        authorizer: Authorizer | None = None,
    ) -> None:
        self._controller = controller
        self._api_requests = api_requests
        self._authorizer = authorizer

    def collect(self) -> Iterator[Metric]:
        snap = self._controller.snapshot
        yield _gauge("tarn_target_containers", "Target number of Triton containers", snap.target)
        yield _gauge("tarn_running_containers", "Triton containers YARN runs", snap.running)
        yield _gauge(
            "tarn_unplaced_containers",
            "Triton containers of the target YARN has not placed (an AM that cannot allocate, no room)",
            max(0, snap.target - snap.running),
        )
        yield _gauge(
            "tarn_ready_containers",
            "Containers answering ready",
            sum(i.state == "READY" for i in snap.instances),
        )
        yield _gauge("tarn_registered_containers", "Containers in discovery", len(snap.serving()))
        yield _gauge(
            "tarn_controller_tick_seconds", "Duration of the last control loop tick", snap.tick_seconds
        )
        if snap.scale_to_zero:
            yield _gauge(
                "tarn_scaled_to_zero", "1 while the service runs no Triton instance", float(snap.target == 0)
            )
        yield _gauge("tarn_requests_held", "Requests an activator holds for a ready instance", snap.held)
        yield _gauge(
            "tarn_requests_held_oldest_seconds",
            "How long the oldest held request has waited",
            snap.held_oldest_s,
        )
        yield from _per_instance(snap)
        yield from _per_gpu(snap)
        counters = self._controller.counters  # one copy, consistent across the families
        yield from _per_model(snap, counters.models)
        yield from _openai(snap, counters.openai)
        yield from self._counters(counters)
        if self._authorizer is not None:
            yield from _ranger(self._authorizer)

    def _counters(self, counters: Counters) -> Iterator[CounterMetricFamily]:
        scaling = CounterMetricFamily(
            "tarn_scaling_decisions", "Scaling decisions taken", labels=["direction"]
        )
        for direction, count in sorted(counters.scaling.items()):
            scaling.add_metric([direction], count)
        yield scaling
        yield CounterMetricFamily(
            "tarn_drains", "Instances drained (scale-down or operator)", counters.drains
        )
        yield CounterMetricFamily(
            "tarn_decommissioned_instances", "Drained instances removed from YARN", counters.decommissioned
        )
        yield CounterMetricFamily(
            "tarn_replaced_instances",
            "Instances unready past --replace-unready-after, removed so that YARN starts others",
            counters.replaced,
        )
        yield CounterMetricFamily("tarn_controller_ticks", "Control loop ticks", counters.ticks)
        yield CounterMetricFamily(
            "tarn_demand_reports", "Reports of held requests from activators", counters.demand_reports
        )
        api = CounterMetricFamily("tarn_api_requests", "Controller API requests", labels=["path", "code"])
        for (path, code), count in sorted(self._api_requests().items()):
            api.add_metric([path, code], count)
        yield api


def _gauge(name: str, text: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, text, value=value)


def _per_model(snap: Snapshot, totals: dict[str, ModelTotals]) -> Iterator[Metric]:
    """Per model, every instance together. Counters and sums run from the controller's start (a
    Triton that restarts does not set them back); Prometheus takes rates and means from them. The
    quantiles are Triton's own over its recent window, the slowest instance's."""
    requests = CounterMetricFamily(
        "tarn_model_requests", "Requests Triton completed for the model", labels=["model", "outcome"]
    )
    duration = Metric(
        "tarn_model_request_duration_seconds", "Time requests spent in Triton, queue included", "summary"
    )
    queue = Metric("tarn_model_queue_duration_seconds", "Time requests waited in Triton's queue", "summary")
    instances = GaugeMetricFamily("tarn_model_instances", "Instances serving the model", labels=["model"])
    for name, total in sorted(totals.items()):
        requests.add_metric([name, "success"], total.ok)
        requests.add_metric([name, "failure"], total.failed)
        count = round(total.ok + total.failed)  # Triton's counters are whole numbers
        for family, seconds in ((duration, total.request_s), (queue, total.queue_s)):
            family.add_sample(f"{family.name}_count", {"model": name}, count)
            family.add_sample(f"{family.name}_sum", {"model": name}, seconds)
    for view in snap.models:
        instances.add_metric([view.model], view.instances)
        for family, quantiles in (
            (duration, {"0.5": view.p50_s, "0.99": view.p99_s}),
            (queue, {"0.5": view.queue_p50_s, "0.99": view.queue_p99_s}),
        ):
            for quantile, value in quantiles.items():
                if value is not None:
                    family.add_sample(family.name, {"model": view.model, "quantile": quantile}, value)
    yield from (requests, duration, queue, instances)


def _openai(snap: Snapshot, totals: dict[Series, float]) -> Iterator[Metric]:
    """The fronts' counters since the controller started, their streams now (by model, and per
    instance: the load signal for routing and scaling by streams)."""
    yield from fronts.families(
        totals,
        fronts.summed(dict(i.openai_streams) for i in snap.instances),
        fronts.summed(dict(i.openai_queued) for i in snap.instances),
    )
    streams = GaugeMetricFamily(
        "tarn_container_openai_streams",
        "Generations streaming through the container's OpenAI front now",
        labels=INSTANCE_LABELS,
    )
    for i in snap.instances:
        if i.front_streams is not None:
            streams.add_metric([i.instance, i.container_id, i.host], i.front_streams)
    yield streams


def _per_instance(snap: Snapshot) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    load = GaugeMetricFamily(
        "tarn_container_load", "Load per container (0..1 within capacity)", labels=INSTANCE_LABELS
    )
    rate = GaugeMetricFamily("tarn_inference_request_rate", "Requests per second", labels=INSTANCE_LABELS)
    inflight = GaugeMetricFamily(
        "tarn_inference_inflight", "Mean requests in the server", labels=INSTANCE_LABELS
    )
    latency = GaugeMetricFamily(
        "tarn_inference_latency_seconds", "Mean request latency over the last tick", labels=INSTANCE_LABELS
    )
    requests = CounterMetricFamily(
        "tarn_inference_requests", "Requests Triton completed", labels=[*INSTANCE_LABELS, "outcome"]
    )
    up = GaugeMetricFamily(
        "tarn_container_ready", "1 when the container answers ready", labels=INSTANCE_LABELS
    )
    unready = GaugeMetricFamily(
        "tarn_container_unready_seconds",
        "How long the container has not answered ready (starting, or stopped answering)",
        labels=INSTANCE_LABELS,
    )
    for i in snap.instances:
        labels = [i.instance, i.container_id, i.host]
        up.add_metric(labels, 1.0 if i.state in ("READY", "DRAINING") else 0.0)
        unready.add_metric(labels, i.unready_s)
        requests.add_metric([*labels, "success"], i.requests_ok)
        requests.add_metric([*labels, "failure"], i.requests_failed)
        if i.load is not None:
            load.add_metric(labels, i.load.value)
            rate.add_metric(labels, i.load.request_rate)
            inflight.add_metric(labels, i.load.inflight)
            if i.load.request_rate > 0:
                latency.add_metric(labels, i.load.inflight / i.load.request_rate)  # Little's law
    yield from (up, unready, load, rate, inflight, latency, requests)


def _per_gpu(snap: Snapshot) -> Iterator[GaugeMetricFamily]:
    labels = [*INSTANCE_LABELS, "gpu_uuid"]
    utilization = GaugeMetricFamily("tarn_gpu_utilization", "GPU utilization (0..1)", labels=labels)
    used = GaugeMetricFamily("tarn_gpu_memory_used", "GPU memory used, bytes", labels=labels)
    total = GaugeMetricFamily("tarn_gpu_memory_total", "GPU memory, bytes", labels=labels)
    for i in snap.instances:
        for gpu in i.gpus:
            values = [i.instance, i.container_id, i.host, gpu.uuid]
            utilization.add_metric(values, gpu.utilization)
            used.add_metric(values, gpu.memory_used_bytes)
            total.add_metric(values, gpu.memory_total_bytes)
    yield from (utilization, used, total)


def _ranger(authorizer: Authorizer) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    health = authorizer.health()
    yield _gauge(
        "tarn_ranger_policies_loaded", "1 when Ranger policies are in force (0: every check is denied)",
        1.0 if health.status != "missing" else 0.0,
    )  # fmt: skip
    yield _gauge(
        "tarn_ranger_policies_stale", "1 when the policies in force were not confirmed by the last poll",
        1.0 if health.status == "stale" else 0.0,
    )  # fmt: skip
    yield _gauge(
        "tarn_ranger_policy_version",
        "Version of the Ranger policies in force (-1: none)",
        health.policy_version,
    )
    if health.age_s is not None:
        yield _gauge(
            "tarn_ranger_policy_age_seconds",
            "Seconds since Ranger Admin last confirmed the policies",
            health.age_s,
        )
    yield CounterMetricFamily(
        "tarn_ranger_refresh_failures", "Polls of Ranger Admin that failed", authorizer.state.failures
    )
    decisions = CounterMetricFamily(
        "tarn_ranger_decisions", "Authorization decisions", labels=["access", "decision"]
    )
    for (access, decision), count in sorted(authorizer.decisions().items()):
        decisions.add_metric([access, decision], count)
    yield decisions
    if authorizer.audit is not None:
        audit = authorizer.audit
        for name, text, value in (
            ("tarn_ranger_audit_events_written", "Ranger audit events written", audit.written),
            ("tarn_ranger_audit_events_dropped", "Ranger audit events dropped (queue full)", audit.dropped),
            ("tarn_ranger_audit_write_failures", "Failed writes of Ranger audits to HDFS", audit.failures),
        ):
            yield CounterMetricFamily(name, text, value)
        yield _gauge("tarn_ranger_audit_events_pending", "Ranger audit events not yet written", audit.pending)


def metrics_registry(
    controller: Controller,
    api_requests: Callable[[], dict[tuple[str, str], int]],
    authorizer: Authorizer | None = None,
) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(controller, api_requests, authorizer))
    return registry


def render(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)
