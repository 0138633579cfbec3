"""Waiting on the RM: named predicates over its service JSON, and the one waiter that polls them."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tarn.clients.resourcemanager import ResourceManager
from tarn.errors import ClusterError
from tarn.service.options import Options
from tarn.spec import CONTROLLER, TRITON, component_of

JSON = dict[str, Any]
Predicate = Callable[[JSON], bool]

STOPPED_STATES = frozenset({"STOPPED", "FAILED", "SUCCEEDED"})
UPGRADING_STATES = frozenset({"UPGRADING", "UPGRADING_AUTO_FINALIZE", "EXPRESS_UPGRADING"})


# ---- predicates (pure)


def stopped(service: JSON) -> bool:
    return str(service.get("state")) in STOPPED_STATES


def stable(service: JSON) -> bool:
    """YARN has every component at its count: the only state in which it starts an upgrade."""
    return service.get("state") == "STABLE"


def upgrading(service: JSON) -> bool:
    """An upgrade is under way: YARN says so, or some instance waits for its upgrade."""
    return str(service.get("state")) in UPGRADING_STATES or bool(needing_upgrade(service, TRITON, CONTROLLER))


def finalized(version: str) -> Predicate:
    return lambda service: service.get("version") == version and stable(service)


def instance_upgraded(component: str, instance: str) -> Predicate:
    """The instance's upgrade is over: READY, or FAILED_UPGRADE (YARN will not retry it)."""
    return lambda service: instance_state(service, component, instance) in ("READY", "FAILED_UPGRADE")


def ready(count: int) -> Predicate:
    """``count`` Triton instances and the controller are READY."""

    def test(service: JSON) -> bool:
        triton = [c for c in containers(service, TRITON) if c.get("state") == "READY"]
        controller = containers(service, CONTROLLER)
        return (
            len(triton) >= count and bool(controller) and all(c.get("state") == "READY" for c in controller)
        )

    return test


def containers(service: JSON, component: str) -> list[JSON]:
    return list((component_of(service, component) or {}).get("containers") or [])


def needing_upgrade(service: JSON, *components: str) -> list[str]:
    """Instances YARN marks NEEDS_UPGRADE, in component order, then by name."""
    return [
        str(c["component_instance_name"])
        for name in components
        for c in sorted(containers(service, name), key=lambda c: str(c["component_instance_name"]))
        if c.get("state") == "NEEDS_UPGRADE"
    ]


def instance_state(service: JSON, component: str, instance: str) -> str | None:
    found = [c for c in containers(service, component) if c.get("component_instance_name") == instance]
    return str(found[0].get("state")) if found else None


# ---- the waiter


def poll(read: Callable[[], JSON | None], test: Predicate, what: str, options: Options) -> JSON:
    """The first answer of ``read`` that ``test`` holds for (None: no answer yet, ask again);
    ClusterError naming ``what`` after ``options.timeout``."""
    deadline = time.monotonic() + options.timeout
    while True:
        found = read()
        if found is not None and test(found):
            return found
        if time.monotonic() > deadline:
            raise ClusterError(f"timed out after {options.timeout:.0f} s waiting for {what}")
        time.sleep(options.poll)


def until(rm: ResourceManager, name: str, test: Predicate, what: str, options: Options) -> JSON:
    """The service once ``test`` holds for it; ClusterError after ``options.timeout``, or at once
    when YARN has given the service up (FAILED: its AM failed every attempt), with YARN's reason."""

    def read() -> JSON | None:
        service = rm.service(name)
        if service is not None and service.get("state") == "FAILED" and not test(service):
            raise ClusterError(f"service {name} FAILED while waiting for {what}: {failure(rm, service)}")
        return service

    return poll(read, test, what, options)


def failure(rm: ResourceManager, service: JSON) -> str:
    """The RM's diagnostics of a failed service's application (the AM's exit and where its logs are)."""
    app_id = service.get("id")
    if not app_id:
        return "YARN gives no reason"
    try:
        diagnostics = str(rm.app(str(app_id)).get("diagnostics") or "YARN gives no reason")
    except ClusterError as exc:
        return f"its application {app_id} could not be read ({exc})"
    return f"{app_id}: {' '.join(diagnostics.split())[:FAILURE_CHARS]}"


FAILURE_CHARS = 800  # the RM's diagnostics repeat the AM's stderr; the start says what failed


def wait_ready(rm: ResourceManager, name: str, count: int, options: Options) -> JSON:
    return until(
        rm, name, ready(count), f"service {name}: {count} READY Triton instances and the controller", options
    )
