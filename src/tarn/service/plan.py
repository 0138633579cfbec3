"""Desired state vs the RM's service JSON → what to do (pure).

Runtime fields (containers, states, ids, the remaining lifetime, the instance count chosen by the
controller) are ignored. A change of the Triton instance count only flexes; any other change
upgrades (a YARN service upgrade), and only the components that changed.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Literal

from tarn import __version__
from tarn.errors import ClusterError
from tarn.service.wait import STOPPED_STATES, UPGRADING_STATES
from tarn.spec import CONTROLLER, TRITON, triton_count

JSON = dict[str, Any]
State = Literal["present", "started", "stopped", "absent"]
STATES: tuple[State, ...] = ("present", "started", "stopped", "absent")
COMPONENTS = (TRITON, CONTROLLER)  # upgrade order: Triton while the controller can still drain
# Per-component keys whose values are maps the user fills (compared whole, keys added or removed).
_MAPS = frozenset({"env", "properties", "additional"})
# Keys the RM adds or maintains while the service runs: never part of "what was asked for".
_RUNTIME = frozenset(
    {"id", "state", "containers", "launch_time", "lifetime", "number_of_containers",
     "number_of_running_containers", "decommissioned_instances", "description"}
)  # fmt: skip


def spec_version(spec: JSON) -> str:
    """TARN's version + a digest of the spec less runtime fields (code digests included, no secret)."""
    digest = hashlib.sha256(json.dumps(comparable(spec), sort_keys=True).encode())
    return f"{__version__}-{digest.hexdigest()[:12]}"


def comparable(spec: JSON, template: JSON | None = None) -> JSON:
    """The part of a service spec a user asks for: runtime fields dropped, components keyed by name.

    With ``template`` (the desired spec) only the keys the template has are kept, except maps
    (env, properties, …) which are compared whole, so a removed variable shows as a change.
    """
    view: JSON = {}
    for key, value in spec.items():
        if key in _RUNTIME or key == "version" or (template is not None and key not in template):
            continue
        if key == "components":
            wanted = {c["name"]: c for c in (template or {}).get("components", [])}
            view[key] = {
                c["name"]: _project(c, wanted.get(c["name"]) if template is not None else None, False)
                for c in value
                if template is None or c["name"] in wanted
            }
        else:
            view[key] = _project(value, template.get(key) if template is not None else None, key in _MAPS)
    return view


def _project(value: Any, template: Any, whole: bool = False) -> Any:
    """``value`` cut to the shape of ``template``; a ``whole`` map keeps every key (values still cut)."""
    if isinstance(value, dict):
        shape = template if isinstance(template, dict) else {}
        return {
            k: _project(v, shape.get(k), whole=k in _MAPS)
            for k, v in value.items()
            if k not in _RUNTIME and (whole or template is None or k in shape)
        }
    if isinstance(value, list):
        items = (
            template if isinstance(template, list) and len(template) == len(value) else [None] * len(value)
        )
        return [_project(v, t) for v, t in zip(value, items, strict=True)]
    if isinstance(template, str) and not isinstance(value, str) and value is not None:
        return str(value)  # the RM echoes some strings (memory) as numbers, or the reverse
    return value


@dataclass(frozen=True)
class Plan:
    """What :func:`apply` will do; ``before``/``after`` are the comparable views for a diff."""

    create: bool = False
    upgrade: tuple[str, ...] = ()  # components whose instances are relaunched, in order
    resume_upgrade: bool = False  # an earlier upgrade is still going: finish it
    flex_to: int | None = None
    start: bool = False
    stop: bool = False
    destroy: bool = False
    before: JSON | None = None
    after: JSON | None = None

    @property
    def changed(self) -> bool:
        return bool(
            self.create or self.upgrade or self.resume_upgrade or self.flex_to is not None
            or self.start or self.stop or self.destroy
        )  # fmt: skip

    def actions(self) -> list[str]:
        """The plan in words, for module output and the CLI."""
        steps = ["create"] if self.create else []
        steps += [f"upgrade {c}" for c in self.upgrade]
        steps += ["finish the upgrade in progress"] if self.resume_upgrade else []
        steps += [f"flex triton to {self.flex_to}"] if self.flex_to is not None else []
        steps += [word for word, on in (("start", self.start), ("stop", self.stop)) if on]
        return steps + (["destroy"] if self.destroy else [])


def view(service: JSON | None, template: JSON | None = None) -> JSON | None:
    """A service for a diff: the comparable spec, the version and the Triton instance count."""
    if service is None:
        return None
    shown = comparable(service, template)
    shown["version"] = service.get("version")
    shown["triton_instances"] = triton_count(service)
    shown["state"] = service.get("state")
    return shown


def plan(
    state: State, actual: JSON | None, desired: JSON | None = None, bounds: tuple[int, int] | None = None
) -> Plan:
    """What it takes to bring ``actual`` (the RM's service, None when absent) to ``state``.

    ``desired`` (the spec) and ``bounds`` (min, max Triton instances) are needed for present and
    started. The instance count only changes when it is outside the bounds: in between, it is the
    controller's to choose.
    """
    if state == "absent":
        return Plan(destroy=actual is not None, before=view(actual), after=None)
    if state == "stopped":
        stop = actual is not None and str(actual.get("state")) not in STOPPED_STATES
        after = None if actual is None else {**(view(actual) or {}), "state": "STOPPED"}
        return Plan(stop=stop, before=view(actual), after=after)
    if desired is None or bounds is None:
        raise ValueError(f"state {state}: the desired spec and the instance bounds are needed")
    low, high = bounds
    if actual is None:
        after = view(desired) or {}
        after["state"] = "STARTED"
        return Plan(create=True, before=None, after=after)
    before = view(actual, desired) or {}
    mine = comparable(desired)
    theirs = comparable(actual, desired)
    changed = tuple(
        c for c in COMPONENTS if mine.get("components", {}).get(c) != theirs.get("components", {}).get(c)
    )
    service_level = {k: v for k, v in mine.items() if k != "components"} != {
        k: v for k, v in theirs.items() if k != "components"
    }
    if service_level and not changed:
        changed = COMPONENTS  # service-wide settings changed: relaunch all
    # The versions alone may differ (a spec the RM echoed back, e.g. after tarn_scale changed the
    # bounds to what is asked now): nothing to relaunch for that.
    running = str(actual.get("state"))
    count = triton_count(actual)
    target = min(max(count, low), high)
    upgrading = running in UPGRADING_STATES
    if changed and running in STOPPED_STATES:
        raise ClusterError(
            f"service {desired['name']} is {running}: a spec change is applied by a rolling upgrade, "
            "which needs it running; start it first (state started), then apply the change"
        )
    after = {**comparable(desired), "version": desired.get("version"), "triton_instances": target}
    after["state"] = "STARTED" if state == "started" and running in STOPPED_STATES else running
    return Plan(
        upgrade=() if upgrading else changed,
        resume_upgrade=upgrading,
        flex_to=target if target != count else None,
        start=state == "started" and running in STOPPED_STATES,
        before=before,
        after=after,
    )


def spec_of(service: JSON) -> JSON:
    """The RM's service JSON less its runtime fields: a spec to upgrade to, once changed."""
    spec: JSON = {k: _project(v, None) for k, v in service.items() if k not in _RUNTIME}
    spec["components"] = [
        {k: _project(v, None) for k, v in c.items() if k not in _RUNTIME} | {"number_of_containers": n}
        for c, n in ((c, c.get("number_of_containers", 0)) for c in service.get("components", []))
    ]
    return spec
