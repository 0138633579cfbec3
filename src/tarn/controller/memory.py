"""What a controller remembers across a restart: the scaling history and the drains in progress.

Kept as one JSON document in a persistent znode beside the instances' (``memory_path``), written
by the loop when it changes and read back by the next controller's first tick, so the dashboard
does not go blank and a drain is finished, not forgotten. Without ZooKeeper nothing is kept.

The znode is named after the service, and nothing removes it when the service is destroyed or
stopped; a service submitted or started again under that name is a new YARN application, with
new containers under the old instance names (triton-1 again). So the document carries the id of
the application that wrote it, and a controller of another application ignores it (``foreign``):
its history is another service's, and its drains would take fresh instances out.

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
    application: str | None = None  # the YARN application that wrote it; None: unknown


def application_of(service: Mapping[str, Any]) -> str | None:
    """The YARN application id in the RM's service JSON (``id``): which submission or start of
    the service this is. YARN sets it once the service is submitted; None where it is missing."""
    found = service.get("id")
    return str(found) if found else None


def foreign(memory: Memory, application: str | None) -> bool:
    """Whether ``memory`` was written by another application than ``application``.

    Not when either is unknown: a document of an older controller has no application id, and is
    recalled as before so that an upgrade of a running service keeps its drains; an RM answer
    without ``id`` leaves no way to tell, and the memory is recalled as before too.
    """
    return memory.application is not None and application is not None and memory.application != application


def memory_path(zk_path: str, service: str) -> str:
    """A sibling of the instances' znode: readers of --zk-path see instances only."""
    return posixpath.join(posixpath.dirname(zk_path.rstrip("/")) or "/", f"controller.{service}")


def encode(memory: Memory, clock_now: float, wall_now: float) -> bytes:
    drains = {
        name: {**asdict(d), "started": wall_now - (clock_now - d.started)}
        for name, d in sorted(memory.drains.items())
    }
    document: dict[str, Any] = {
        "version": VERSION,
        "history": [asdict(e) for e in memory.history],
        "drains": drains,
    }
    if memory.application is not None:  # an optional key: version 1 still, older readers skip it
        document["application"] = memory.application
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def decode(data: bytes | None, clock_now: float, wall_now: float) -> Memory:
    """What an earlier controller wrote, whichever application it was (``foreign`` tells); an
    empty memory for nothing, another version or garbage."""
    try:
        document: Any = json.loads(data or b"null")
        if not isinstance(document, dict) or document.get("version") != VERSION:
            return Memory()
        application = document.get("application")  # absent from an older controller's
        if application is not None and not isinstance(application, str):
            return Memory()
        history = tuple(ScalingEvent(**event) for event in document["history"])
        drains = {
            str(name): replace(Drain(**fields), started=clock_now - (wall_now - float(fields["started"])))
            for name, fields in document["drains"].items()
        }
    except (ValueError, TypeError, KeyError):
        return Memory()
    return Memory(history, drains, application)
