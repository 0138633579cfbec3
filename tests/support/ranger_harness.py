"""Ranger's own policy engine (ranger-plugins-common through lab/ranger-harness, a jar that make
integration builds), asked the questions the tests ask TARN's engine."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from itertools import product
from pathlib import Path
from typing import Any

import pytest

from tests.support import ROOT
from tests.support.ranger_admin import PluginDownloads, served

HARNESS_JAR = ROOT / "build" / "ranger-harness" / "ranger-harness.jar"
USERS = ("alice", "bob", "carol")
ACTIONS = ("infer", "metadata", "list")
Json = dict[str, Any]


def harness_jar() -> Path:
    """The harness's jar; the test fails (never skips) when it was not built."""
    if not HARNESS_JAR.is_file():
        pytest.fail(
            f"{HARNESS_JAR.relative_to(ROOT)} is missing: build it with "
            "`lab/ranger-harness/build.sh build/ranger-harness` (make integration does)"
        )
    return HARNESS_JAR


def ranger_decisions(
    jar: Path, admin: PluginDownloads, models: Sequence[str]
) -> dict[tuple[str, str, str], Json]:
    """What Ranger's own engine decides (allowed, audited, policy_id) over the same documents."""
    policies, roles, groups = served(admin)
    keys = list(product(USERS, models, ACTIONS))
    document = {
        "service_def": policies["serviceDef"],
        "service_policies": policies,
        "roles": roles,
        "super_users": [],
        "super_groups": [],
        "cases": [{"user": u, "groups": groups.get(u, []), "model": m, "access": a} for u, m, a in keys],
    }
    proc = subprocess.run(
        ["java", "-jar", str(jar)], input=json.dumps(document), capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    return dict(zip(keys, json.loads(proc.stdout), strict=True))
