"""The number of Triton instances and its bounds: one path for `tarn scale` and `tarn_scale`.

Up: flex. Down: the victims the controller itself would pick (not ready, least loaded, newest) are
drained through the controller, then exactly those are decommissioned, so no request in flight is
cut. Without a reachable controller: a plain flex (YARN picks the victims), said in the answer.
New bounds relaunch the controller alone (a rolling upgrade of its component).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from tarn.clients.resourcemanager import ResourceManager
from tarn.controller.decide import Candidate, pick_victims
from tarn.errors import TarnError
from tarn.service.apply import check_count, existing
from tarn.service.drain import controller_of, drain
from tarn.service.options import Options
from tarn.service.plan import spec_of, spec_version
from tarn.service.upgrade import rolling_upgrade
from tarn.service.wait import wait_ready
from tarn.spec import TRITON, read_back, triton_count, with_settings

JSON = dict[str, Any]


@dataclass(frozen=True)
class ScalePlan:
    count: int  # Triton instances now
    target: int
    bounds_before: tuple[int, int]  # (min, max) instances
    bounds: tuple[int, int]
    spec: JSON | None  # the spec with the controller relaunched on the new bounds; None: unchanged

    def actions(self) -> list[str]:
        steps = [f"upgrade controller (bounds {self.bounds[0]}..{self.bounds[1]})"] if self.spec else []
        return steps + ([f"flex triton to {self.target}"] if self.target != self.count else [])


def plan_scale(service: JSON, count: int | None, low: int | None, high: int | None) -> ScalePlan:
    """What it takes to run ``count`` instances (None: the current count, kept within the bounds)
    with new bounds ``low``/``high`` (None: unchanged). Pure; ConfigError names the flag at fault."""
    config = read_back(service).config
    before = (config.min_instances, config.max_instances)
    bounds = (before[0] if low is None else low, before[1] if high is None else high)
    spec = None
    if bounds != before:
        rebound = replace(config, min_instances=bounds[0], max_instances=bounds[1])
        spec = with_settings(spec_of(service), rebound)  # validates the new bounds
        spec["version"] = spec_version(spec)
    current = triton_count(service)
    target = count if count is not None else min(max(current, bounds[0]), bounds[1])
    check_count(target)
    return ScalePlan(current, target, before, bounds, spec)


def apply_scale(rm: ResourceManager, name: str, steps: ScalePlan, options: Options) -> JSON | None:
    """Carry out a :class:`ScalePlan`: new bounds first, then the count; the service afterwards."""
    if steps.spec is not None:
        rm.initiate_upgrade(steps.spec)
        rolling_upgrade(rm, name, str(steps.spec["version"]), options)
    if steps.target != steps.count:
        options.log(scale(rm, name, steps.target, options))
        if options.wait:
            wait_ready(rm, name, steps.target, options)
    return rm.service(name)


def scale(rm: ResourceManager, name: str, count: int, options: Options) -> str:
    """Set the number of Triton instances (see the module's docstring); the outcome in words."""
    check_count(count)
    found = existing(rm, name)
    current = triton_count(found)
    if count >= current:
        return str(rm.flex(name, TRITON, count).get("diagnostics", "ok"))
    try:
        controller = controller_of(found, options)
        listing = controller.instances()["instances"]
    except TarnError as exc:
        rm.flex(name, TRITON, count)
        return f"flexed to {count} without draining (controller unavailable: {exc})"
    candidates = [Candidate(str(i["instance"]), i.get("state") == "READY", i.get("load")) for i in listing]
    victims = pick_victims(candidates, current - count)
    for instance in victims:
        drained, _took = drain(found, controller, instance)
        options.log(f"{instance} drained" if drained else f"{instance} still busy; removing it")
    rm.decommission(name, TRITON, victims)
    return f"decommissioned {', '.join(victims)} after draining them"
