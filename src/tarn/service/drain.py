"""The client side of a drain: ask the controller to take an instance out of discovery and wait
for its requests to finish, before YARN removes or relaunches it (scale-down, rolling upgrades)."""

from __future__ import annotations

import time
from typing import Any

from tarn.clients.controller import ControllerClient
from tarn.errors import ClusterError
from tarn.service.options import Options
from tarn.service.report import controller_url
from tarn.service.wait import poll
from tarn.spec import read_back

JSON = dict[str, Any]
# The drain call outlives the controller's own bound (--drain-timeout) by this much.
DRAIN_MARGIN_S = 60.0


def controller_of(service: JSON, options: Options) -> ControllerClient:
    """The client of the service's controller (``options.controller_url`` overrides its address)."""
    url = options.controller_url or controller_url(service)
    if url is None:
        raise ClusterError(
            f"service {service.get('name')}: no controller container; is the controller running?"
        )
    return ControllerClient(url, options.token)


def drain(service: JSON, controller: ControllerClient, instance: str) -> tuple[bool, float]:
    """Drain ``instance``: (whether it went idle within the controller's bound, seconds taken)."""
    timeout = read_back(service).config.drain_timeout_s + DRAIN_MARGIN_S
    started = time.monotonic()
    answer = controller.drain(instance, timeout=timeout)
    return bool(answer.get("drained")), time.monotonic() - started


def serving(listing: JSON, instance: str) -> bool:
    """The controller's listing has ``instance`` back in discovery (registered)."""
    rows = listing.get("instances") or []
    return any(row.get("instance") == instance and row.get("registered") for row in rows)


def wait_serving(controller: ControllerClient, instance: str, options: Options) -> float:
    """Wait until the controller has ``instance`` registered again (seconds taken): YARN's READY
    comes before the controller's next tick registers it, and draining the next instance in that
    window would leave discovery with fewer instances than the upgrade means to keep."""

    def listing() -> JSON | None:
        try:
            return controller.instances()
        except ClusterError:
            return None  # the controller relaunching: ask again

    started = time.monotonic()
    what = f"the controller to register {instance} again"
    poll(listing, lambda found: serving(found, instance), what, options)
    return time.monotonic() - started
