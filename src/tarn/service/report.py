"""What the front ends show of a service: its instances, a summary, where its controller is."""

from __future__ import annotations

from typing import Any

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
    """The service's state and, per component, the instances wanted and running."""
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
    }


def controller_url(service: JSON) -> str | None:
    """http://<controller host>:<--am-port>; None while the controller has no container."""
    running = containers(service, CONTROLLER)
    if component_of(service, CONTROLLER) is None or not running:
        return None
    host = container_host(running[0])
    return f"http://{host}:{read_back(service).config.am_port}" if host else None
