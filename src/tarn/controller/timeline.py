"""The dashboard's charts: one point per tick over a recent window, from the published snapshots
(pure, bounded). Points carry no model or user names, so every viewer may see them: the OpenAI
fronts' figures are every user and model together (tarn.controller.llm), None without a front."""

from __future__ import annotations

from collections import deque
from dataclasses import asdict, dataclass

from tarn.controller import llm
from tarn.controller.snapshot import Snapshot

WINDOW_POINTS = 900  # 30 minutes of 2 s ticks


@dataclass(frozen=True)
class Point:
    at: float  # wall clock
    target: int
    running: int
    ready: int
    registered: int
    load: float | None  # mean over the instances that report one
    requests_per_s: float
    failures_per_s: float
    latency_s: float | None  # mean time in the server (Little's law over every instance)
    p99_s: float | None  # the slowest model's p99 (Triton's quantiles)
    queue_s: float | None  # mean queue time, request-weighted over the models
    gpu_utilization: float | None  # mean over every GPU
    gpu_memory_used: float | None  # bytes, every GPU together
    prompt_tokens_per_s: float | None = None  # through the OpenAI fronts, over the tick
    completion_tokens_per_s: float | None = None
    first_token_p99_s: float | None = None  # the slowest model's time to first token, over the tick
    streams: float | None = None  # generations streaming through the fronts now


def point_of(snap: Snapshot, since: float | None = None) -> Point:
    """``since``: the wall clock of the previous tick that counted (the fronts' rates' interval)."""
    loads = [i.load for i in snap.instances if i.load is not None]
    rate = sum(load.request_rate for load in loads)
    inflight = sum(load.inflight for load in loads)
    gpus = [g for i in snap.instances for g in i.gpus]
    p99s = [m.p99_s for m in snap.models if m.p99_s is not None]
    queued = [
        (m.queue_s, m.requests_per_s) for m in snap.models if m.queue_s is not None and m.requests_per_s
    ]
    weight = sum(r for _q, r in queued)
    with_front = [i.front_streams for i in snap.instances if i.front_streams is not None]
    tokens = llm.tick_figures(
        snap.events.front_deltas if snap.events else (), snap.at - since if since and with_front else None
    )
    return Point(
        at=snap.at,
        target=snap.target,
        running=snap.running,
        ready=sum(1 for i in snap.instances if i.state == "READY"),
        registered=len(snap.serving()),
        load=sum(load.value for load in loads) / len(loads) if loads else None,
        requests_per_s=rate,
        failures_per_s=sum(load.failure_rate for load in loads),
        latency_s=inflight / rate if rate > 0 else None,
        p99_s=max(p99s) if p99s else None,
        queue_s=sum(q * r for q, r in queued) / weight if weight else None,
        gpu_utilization=sum(g.utilization for g in gpus) / len(gpus) if gpus else None,
        gpu_memory_used=sum(g.memory_used_bytes for g in gpus) if gpus else None,
        prompt_tokens_per_s=tokens.prompt_tokens_per_s,
        completion_tokens_per_s=tokens.completion_tokens_per_s,
        first_token_p99_s=tokens.first_token_p99_s,
        streams=sum(with_front) if with_front else None,
    )


class Timeline:
    """The last `size` points; fed from each published snapshot, read by the API's threads."""

    def __init__(self, size: int = WINDOW_POINTS) -> None:
        self._points: deque[Point] = deque(maxlen=size)
        self._counted_at: float | None = None  # the last trusted tick's: its increases end there

    def add(self, snap: Snapshot) -> None:
        if snap.at:
            self._points.append(point_of(snap, self._counted_at))
            if snap.events is not None:  # an untrusted tick read no front
                self._counted_at = snap.at

    def points(self) -> list[dict[str, float | int | None]]:
        return [asdict(p) for p in list(self._points)]  # list(): a copy, safe against the loop's append
