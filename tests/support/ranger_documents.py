"""Ranger Admin's plugin documents, hand-written for the controller's Ranger tests: ServicePolicies
over the triton service def (src/tarn/ranger/triton-service-def.json), RangerRoles, RangerUserStore;
and the plugin's own settings file, ranger-triton-security.xml."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tarn.stdlib.hadoop_site import properties_xml

JSON = dict[str, Any]
SERVICE = "triton_prod"
SERVICE_DEF: JSON = json.loads(
    (Path(__file__).resolve().parents[2] / "src" / "tarn" / "ranger" / "triton-service-def.json").read_text()
)


def allow(
    pid: int,
    models: Sequence[str],
    accesses: Sequence[str],
    users: Sequence[str] = (),
    groups: Sequence[str] = (),
    **extra: Any,
) -> JSON:
    """A policy allowing ``accesses`` on ``models`` to ``users`` and ``groups``."""
    item = {"users": list(users), "groups": list(groups), "accesses": [{"type": a} for a in accesses]}
    return {
        "id": pid,
        "name": f"policy-{pid}",
        "version": 1,
        "isEnabled": True,
        "isAuditEnabled": True,
        "resources": {"model": {"values": list(models)}},
        "policyItems": [item],
        **extra,
    }


def policies(version: int, *items: JSON, service: str = SERVICE, **extra: Any) -> JSON:
    return {
        "serviceName": service,
        "serviceId": 1,
        "policyVersion": version,
        "policies": list(items),
        "serviceDef": SERVICE_DEF,
        **extra,
    }


def roles(version: int) -> JSON:
    return {"serviceName": SERVICE, "roleVersion": version}


def user_store(version: int, mapping: dict[str, list[str]]) -> JSON:
    return {"userStoreVersion": version, "userGroupMapping": mapping}


# alice (ml-team) may list and infer add_*; bob may list linear_onnx
BASIC = policies(
    3,
    allow(1, ["add_*"], ["list", "infer"], groups=["ml-team"]),
    allow(2, ["linear_onnx"], ["list"], users=["bob"]),
)
USERS = user_store(1, {"alice": ["ml-team"], "bob": ["analysts"]})


# The one property a plugin's settings cannot do without: where Ranger Admin is.
URL = {"ranger.plugin.triton.policy.rest.url": "http://ranger:6080"}


def write_xml(directory: Path, properties: dict[str, str], name: str = "ranger-triton-security.xml") -> Path:
    """A Ranger plugin's Hadoop-style XML file, written as TARN writes such files."""
    path = directory / name
    path.write_bytes(properties_xml(properties))
    return path
