"""What a controller remembers across a restart: the scaling history and the drains in progress.

Kept as one JSON document in a persistent znode beside the instances' (``memory_path``), written
by the loop when it changes and read back by the next controller's first tick, so the dashboard
does not go blank and a drain is finished, not forgotten. Without ZooKeeper nothing is kept.

A drain's start is a reading of the process's monotonic clock, which means nothing to the next
process: it travels as wall-clock time and is mapped back onto the new process's clock.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from tarn.controller.drain import Drain

VERSION = 1


@dataclass(frozen=True)
class ScalingEvent:
    at: float  # wall clock
    direction: str
    target_from: int
    target_to: int
    reason: str


@dataclass(frozen=True)
class Memory:
    history: tuple[ScalingEvent, ...] = ()
    drains: Mapping[str, Drain] = field(default_factory=dict)  # by instance name


def memory_path(zk_path: str, service: str) -> str:
    """A sibling of the instances' znode: readers of --zk-path see instances only."""
    return posixpath.join(posixpath.dirname(zk_path.rstrip("/")) or "/", f"controller.{service}")


def encode(memory: Memory, clock_now: float, wall_now: float) -> bytes:
    drains = {
        name: {**asdict(d), "started": wall_now - (clock_now - d.started)}
        for name, d in sorted(memory.drains.items())
    }
    document = {"version": VERSION, "history": [asdict(e) for e in memory.history], "drains": drains}
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def decode(data: bytes | None, clock_now: float, wall_now: float) -> Memory:
    """What an earlier controller wrote; an empty memory for nothing, another version or garbage."""
    try:
        document: Any = json.loads(data or b"null")
        if not isinstance(document, dict) or document.get("version") != VERSION:
            return Memory()
        history = tuple(ScalingEvent(**event) for event in document["history"])
        drains = {
            str(name): replace(Drain(**fields), started=clock_now - (wall_now - float(fields["started"])))
            for name, fields in document["drains"].items()
        }
    except (ValueError, TypeError, KeyError):
        return Memory()
    return Memory(history, drains)
