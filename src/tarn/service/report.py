"""What the front ends show of a service: its instances, a summary, where its controller is."""

from __future__ import annotations

from typing import Any

from tarn.controller.observe import AM_STATES
from tarn.service.wait import containers
from tarn.spec import CONTROLLER, TRITON, component_of, container_host, read_back

JSON = dict[str, Any]


def instances_of(service: JSON) -> list[JSON]:
    """The Triton containers of a service JSON from the RM, in instance order."""
    rows = [
        {
            "instance": c.get("component_instance_name"),
            "container": c.get("id"),
            "host": container_host(c),
            "ip": c.get("ip"),
            "state": c.get("state"),
        }
        for c in containers(service, TRITON)
    ]
    return sorted(rows, key=lambda r: str(r["instance"]))


def summary(service: JSON) -> JSON:
    """The service's state, per component the instances wanted and running, and its problems."""
    return {
        "name": service["name"],
        "state": service.get("state"),
        "id": service.get("id"),
        "version": service.get("version"),
        "components": {
            c["name"]: {"wanted": c.get("number_of_containers"), "running": len(c.get("containers", []))}
            for c in service.get("components", [])
            if c["name"] in (CONTROLLER, TRITON)
        },
        "problems": problems(service),
    }


def problems(service: JSON) -> list[str]:
    """What an operator must know from the RM's view alone, each line naming the cause and where
    to look: the controller not running (discovery then stays as it was: issue 47), and
    containers YARN has not placed (the service AM cannot allocate, or no node has room)."""
    if service.get("state") not in AM_STATES:  # stopped, or no AM to report the components yet
        return []
    found = []
    controller = containers(service, CONTROLLER)
    if component_of(service, CONTROLLER) is not None and not any(
        c.get("state") == "READY" for c in controller
    ):
        states = ", ".join(sorted({str(c.get("state")) for c in controller})) or "no container"
        found.append(
            f"the controller is not running ({states}): the instances it registered stay discoverable, "
            "but nothing is scaled, drained or newly registered until YARN relaunches it"
        )
    for name in (CONTROLLER, TRITON):
        component = component_of(service, name)
        if component is None:
            continue
        wanted, placed = int(component.get("number_of_containers") or 0), len(containers(service, name))
        if placed < wanted:
            found.append(
                f"YARN has placed {placed} of {wanted} {name} containers: if this lasts, the service AM "
                "cannot allocate (its log, serviceam.log, says why; docs/recovery.md) or no NodeManager "
                "has the resources"
            )
    return found


def controller_url(service: JSON) -> str | None:
    """http://<controller host>:<--am-port>; None while the controller has no container."""
    running = containers(service, CONTROLLER)
    if component_of(service, CONTROLLER) is None or not running:
        return None
    host = container_host(running[0])
    return f"http://{host}:{read_back(service).config.am_port}" if host else None
