"""What the controller publishes once a tick: one immutable ``Snapshot`` with its instances.

The API threads (server, metrics, dashboard) read these types, through the ``Controller``
protocol (tarn.controller.publication); they never import the loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tarn.controller.decide import Decision
from tarn.controller.drain import Drain
from tarn.controller.fronts import Series
from tarn.controller.memory import ScalingEvent
from tarn.controller.signals import Gpu, Load, ModelDelta, ModelView

# Container states YARN's service AM leaves in a component's list after the container ended: its
# instance waits for another (Hadoop 3.4 marks the old one FAILED or SUCCEEDED, it does not remove
# it). Such an instance is owed a container, not running one (CI8: a relaunch request lost, the
# instance listed FAILED for 10 minutes, nothing seen as owed).
ENDED_AT_YARN = frozenset({"FAILED", "SUCCEEDED", "STOPPED"})


def placed(yarn_states: Iterable[str]) -> int:
    """The containers YARN runs among those it lists: what the tick's owed count and
    tarn_running_containers (and tarn_unplaced_containers from it) both count."""
    return sum(1 for state in yarn_states if state not in ENDED_AT_YARN)


JSON = dict[str, Any]


@dataclass(frozen=True)
class InstanceView:
    instance: str
    container_id: str
    host: str
    ip: str
    http_port: int
    grpc_port: int
    metrics_port: int
    yarn_state: str
    state: str  # STARTING | READY | DRAINING | UNREACHABLE
    registered: bool
    load: Load | None
    gpus: tuple[Gpu, ...]
    models: tuple[str, ...]
    requests_ok: float
    requests_failed: float
    unready_s: float = 0.0  # how long it has not answered ready (starting, or stopped answering)
    openai_port: int | None = None  # its OpenAI front's, None without one
    openai_streams: tuple[tuple[str, float], ...] = ()  # its front's streams in flight by model, last read
    openai_queued: tuple[tuple[tuple[str, str], float], ...] = ()  # waiting for a slot, by (user, model)

    @property
    def front_streams(self) -> float | None:
        """Its front's streams in flight, every model together; None where no front runs."""
        return None if self.openai_port is None else sum(v for _model, v in self.openai_streams)

    def record(self, service: str) -> JSON:
        """The discovery record: the znode's JSON (docs/discovery.md). ``openai_port`` only where
        the instance runs the OpenAI front: a reader routes ``/v1`` to the instances that have it."""
        front = {} if self.openai_port is None else {"openai_port": self.openai_port}
        return {
            "service": service,
            "instance": self.instance,
            "container_id": self.container_id,
            "host": self.host,
            "ip": self.ip,
            "http_port": self.http_port,
            "grpc_port": self.grpc_port,
            "metrics_port": self.metrics_port,
            "url": f"http://{self.ip}:{self.http_port}",
            "models": list(self.models),
            **front,
        }


@dataclass(frozen=True)
class TickEvents:
    """What one trusted tick did, for the counters (tarn.controller.publication.Counters)."""

    scaled: str | None = None  # the direction of a scaling decision taken (a history entry)
    drains_started: int = 0  # operator drains and scale-down drains begun
    decommissioned: int = 0  # drained instances YARN accepted to remove
    replaced: int = 0  # instances unready past --replace-unready-after that YARN accepted to remove
    model_deltas: tuple[Mapping[str, ModelDelta], ...] = ()  # one per instance scraped
    front_deltas: tuple[Mapping[Series, float], ...] = ()  # one per OpenAI front read (fronts.py)


@dataclass(frozen=True)
class Snapshot:
    service: str
    at: float = 0.0  # wall clock of the tick; 0: no tick yet
    state: str = "UNKNOWN"
    target: int = 0
    instances: tuple[InstanceView, ...] = ()
    decision: Decision | None = None
    history: tuple[ScalingEvent, ...] = ()
    zookeeper: str = "off"
    problems: tuple[str, ...] = ()
    tick_seconds: float = 0.0
    held: int = 0  # requests an activator holds, as it last reported
    held_oldest_s: float = 0.0  # how long the oldest of them had waited then
    scale_to_zero: bool = False  # --scale-to-zero-after is on
    models: tuple[ModelView, ...] = ()  # per model, over the last tick
    drains: dict[str, Drain] = field(default_factory=dict)  # the loop's own, never changed after publishing
    events: TickEvents | None = None  # None: an untrusted tick, which did nothing

    @property
    def running(self) -> int:
        return placed(i.yarn_state for i in self.instances)

    def names(self) -> set[str]:
        return {i.instance for i in self.instances}

    def drained(self, instance: str) -> bool:
        found = self.drains.get(instance)
        return bool(found and found.done)

    def serving(self) -> list[InstanceView]:
        return [i for i in self.instances if i.registered]
