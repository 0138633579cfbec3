"""TARN's Ranger policy engine (tarn.ranger.engine) against Apache Ranger's own engine.

The same policies and requests go through Ranger 2.8.0's RangerBasePlugin (lab/ranger-harness,
one JVM per batch, built by ``make integration`` into build/ranger-harness/) and through TARN's
Engine; allowed, audited and policy_id must agree for every request. Two sets:

- hand-written scenarios, one per rule, each request also carrying the verdict Ranger gives (so a
  scenario that stopped testing its rule shows up);
- seeded random policy sets over all those features, >= 5,000 requests.

The JVM runs with user.timezone=UTC: Ranger parses validity-schedule times in the JVM's zone before
shifting them to the schedule's, so its answers near a DST change depend on the JVM's zone.
"""

from __future__ import annotations

import copy
import json
import random
import subprocess
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, NamedTuple
from zoneinfo import ZoneInfo

import pytest

from tarn.ranger.engine import Engine
from tests.support.ranger_harness import harness_jar

ROOT = Path(__file__).resolve().parents[2]
SERVICE_DEF_FILE = ROOT / "src" / "tarn" / "ranger" / "triton-service-def.json"
SERVICE_DEF: dict[str, Any] = json.loads(SERVICE_DEF_FILE.read_text())
SERVICE = "triton"
UTC = timezone.utc
JUNE = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
Json = dict[str, Any]


class Verdict(NamedTuple):
    allowed: bool
    audited: bool
    policy_id: int


def allowed(policy_id: int, audited: bool = True) -> Verdict:
    return Verdict(True, audited, policy_id)


def denied(policy_id: int = -1, audited: bool = True) -> Verdict:
    return Verdict(False, audited, policy_id)


@dataclass(frozen=True)
class Request:
    user: str
    model: str
    access: str = "infer"
    groups: tuple[str, ...] = ()
    at: datetime = JUNE
    expect: Verdict | None = None  # what Ranger answers, for the hand-written ones

    def to_json(self) -> Json:
        return {
            "user": self.user,
            "groups": list(self.groups),
            "model": self.model,
            "access": self.access,
            "access_time": self.at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        }


@dataclass
class Scenario:
    name: str
    policies: list[Json]
    requests: list[Request]
    roles: list[Json] | None = None
    super_users: frozenset[str] = frozenset()
    super_groups: frozenset[str] = frozenset()
    audit_mode: str | None = None  # None: the key is absent (Ranger's default, audit-default)

    def service_policies(self) -> Json:
        """ServicePolicies as Ranger Admin's policy download returns it."""
        doc: Json = {
            "serviceName": SERVICE,
            "serviceId": 1,
            "policyVersion": 1,
            "policyUpdateTime": 1780000000000,
            "policies": self.policies,
            "serviceDef": SERVICE_DEF,
        }
        if self.audit_mode is not None:
            doc["auditMode"] = self.audit_mode
        return doc

    def ranger_roles(self) -> Json | None:
        if self.roles is None:
            return None
        return {"serviceName": SERVICE, "roleVersion": 1, "rangerRoles": self.roles}

    def harness_document(self) -> Json:
        return {
            "service_def": SERVICE_DEF,
            "service_policies": self.service_policies(),
            "roles": self.ranger_roles(),
            "super_users": sorted(self.super_users),
            "super_groups": sorted(self.super_groups),
            "cases": [r.to_json() for r in self.requests],
        }


# ---- policy JSON, as Ranger Admin writes it


def item(
    *,
    users: Sequence[str] = (),
    groups: Sequence[str] = (),
    roles: Sequence[str] = (),
    accesses: Sequence[str | tuple[str, bool]] = ("infer",),
) -> Json:
    """A policy item; an access given as (type, False) is listed but not allowed."""
    pairs = [(a, True) if isinstance(a, str) else a for a in accesses]
    return {
        "accesses": [{"type": t, "isAllowed": ok} for t, ok in pairs],
        "users": list(users),
        "groups": list(groups),
        "roles": list(roles),
        "conditions": [],
        "delegateAdmin": False,
    }


def policy(
    policy_id: int,
    values: Sequence[str],
    *,
    name: str | None = None,
    allow: Sequence[Json] = (),
    deny: Sequence[Json] = (),
    allow_exceptions: Sequence[Json] = (),
    deny_exceptions: Sequence[Json] = (),
    enabled: bool = True,
    audit: bool = True,
    override: bool = False,
    excludes: bool = False,
    deny_all_else: bool = False,
    schedules: Sequence[Json] = (),
) -> Json:
    return {
        "id": policy_id,
        "guid": f"guid-{policy_id}",
        "isEnabled": enabled,
        "version": 1,
        "service": SERVICE,
        "name": name if name is not None else f"policy-{policy_id}",
        "policyType": 0,
        "policyPriority": 1 if override else 0,
        "description": "",
        "isAuditEnabled": audit,
        "resources": {"model": {"values": list(values), "isExcludes": excludes, "isRecursive": False}},
        "policyItems": list(allow),
        "denyPolicyItems": list(deny),
        "allowExceptions": list(allow_exceptions),
        "denyExceptions": list(deny_exceptions),
        "dataMaskPolicyItems": [],
        "rowFilterPolicyItems": [],
        "serviceType": SERVICE,
        "options": {},
        "validitySchedules": list(schedules),
        "policyLabels": [],
        "isDenyAllElse": deny_all_else,
    }


def schedule(start: str | None, end: str | None, tz: str | None = None) -> Json:
    """Times as Ranger writes them, yyyy/MM/dd HH:mm:ss, in tz (absent: GMT)."""
    doc: Json = {"recurrences": []}
    if start is not None:
        doc["startTime"] = start
    if end is not None:
        doc["endTime"] = end
    if tz is not None:
        doc["timeZone"] = tz
    return doc


def role(
    name: str, *, users: Sequence[str] = (), groups: Sequence[str] = (), roles: Sequence[str] = ()
) -> Json:
    def members(names: Sequence[str]) -> list[Json]:
        return [{"name": n, "isAdmin": False} for n in names]

    return {
        "id": zlib.crc32(name.encode()) % 10_000,
        "isEnabled": True,
        "name": name,
        "description": "",
        "options": {},
        "users": members(users),
        "groups": members(groups),
        "roles": members(roles),
        "createdByUser": "admin",
    }


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# ---- the hand-written scenarios: one per rule


def hand_written() -> list[Scenario]:
    alice, bob = "alice", "bob"
    return [
        Scenario(
            "disabled policies are ignored, also for audit",
            [
                policy(1, ["add_one"], enabled=False, allow=[item(users=[alice])]),
                policy(2, ["add_*"], audit=False, allow=[item(users=[bob])]),
            ],
            [
                Request(alice, "add_one", expect=denied(audited=False)),
                Request(bob, "add_one", expect=allowed(2, audited=False)),
            ],
        ),
        Scenario(
            "only disabled policies: no decision, and not audited (the service has policies)",
            [policy(1, ["*"], enabled=False, allow=[item(users=[alice])])],
            [Request(alice, "add_one", expect=denied(audited=False))],
        ),
        Scenario(
            "no policies at all: denied, audited under audit-default",
            [],
            [Request(alice, "add_one", expect=denied(audited=True))],
        ),
        Scenario(
            "super users and super groups: allowed by no policy, even over a deny; audit from the policies",
            [
                policy(3, ["add_*"], deny=[item(users=["root"], groups=["admins"])]),
                policy(4, ["quiet_*"], audit=False, deny=[item(groups=["public"])]),
            ],
            [
                Request("root", "add_one", expect=allowed(-1, audited=True)),
                Request("carol", "add_one", "metadata", groups=("admins",), expect=allowed(-1)),
                Request("root", "quiet_model", expect=allowed(-1, audited=False)),
                Request("root", "other", expect=allowed(-1, audited=False)),
                Request("Root", "other", expect=denied(audited=False)),
                Request(alice, "add_one", groups=("admins_2",), expect=denied(audited=True)),
            ],
            super_users=frozenset({"root"}),
            super_groups=frozenset({"admins"}),
        ),
        Scenario(
            "validity schedules: start and end inclusive, time zones, several windows, expired",
            [
                policy(
                    5,
                    ["add_one"],
                    allow=[item(users=[alice])],
                    schedules=[schedule("2026/06/01 00:00:00", "2026/06/30 23:59:59", "UTC")],
                ),
                policy(
                    6,
                    ["add_two"],
                    allow=[item(users=[alice])],
                    schedules=[schedule("2026/06/01 12:00:00", None, "Asia/Kolkata")],
                ),
                policy(
                    7,
                    ["add_three"],
                    allow=[item(users=[alice])],
                    schedules=[
                        schedule("2026/01/01 00:00:00", "2026/01/31 23:59:59"),
                        schedule("2026/06/01 00:00:00", "2026/06/30 23:59:59"),
                    ],
                ),
                policy(
                    8,
                    ["add_four"],
                    allow=[item(users=[alice])],
                    schedules=[schedule(None, "2026/05/31 23:59:59")],
                ),
            ],
            [
                Request(alice, "add_one", expect=allowed(5)),
                Request(alice, "add_one", at=at("2026-07-01T00:00:00"), expect=denied(audited=False)),
                Request(alice, "add_one", at=at("2026-05-31T23:59:59"), expect=denied(audited=False)),
                Request(alice, "add_one", at=at("2026-06-30T23:59:59"), expect=allowed(5)),
                Request(alice, "add_two", at=at("2026-06-01T06:29:59"), expect=denied(audited=False)),
                Request(alice, "add_two", at=at("2026-06-01T06:30:00"), expect=allowed(6)),
                Request(alice, "add_three", at=at("2026-01-15T00:00:00"), expect=allowed(7)),
                Request(alice, "add_three", at=at("2026-03-01T00:00:00"), expect=denied(audited=False)),
                Request(alice, "add_three", at=at("2026-06-10T00:00:00"), expect=allowed(7)),
                Request(alice, "add_four", expect=denied(audited=False)),
                Request(alice, "add_four", at=at("2026-05-01T00:00:00"), expect=allowed(8)),
            ],
        ),
        Scenario(
            # Ranger reads a schedule's clock time as if in the JVM's zone (UTC here) and shifts it
            # by the schedule zone's offset at *that* instant, not at the real one. 03:30 in New
            # York on 2026-03-08 is 07:30Z (EDT); Ranger: 03:30Z + 5 h (EST at 03:30Z) = 08:30Z.
            # 01:30 in Berlin on 2026-10-25 is 23:30Z the day before (CEST); Ranger: 01:30Z - 1 h
            # (CET at 01:30Z) = 00:30Z.
            "validity schedules near a DST change: Ranger's own time arithmetic",
            [
                policy(
                    9,
                    ["dst_spring"],
                    allow=[item(users=[alice])],
                    schedules=[schedule("2026/03/08 03:30:00", None, "America/New_York")],
                ),
                policy(
                    19,
                    ["dst_autumn"],
                    allow=[item(users=[alice])],
                    schedules=[schedule("2026/10/25 01:30:00", None, "Europe/Berlin")],
                ),
            ],
            [
                Request(alice, "dst_spring", at=at("2026-03-08T07:29:59"), expect=denied(audited=False)),
                Request(alice, "dst_spring", at=at("2026-03-08T08:00:00"), expect=denied(audited=False)),
                Request(alice, "dst_spring", at=at("2026-03-08T08:30:00"), expect=allowed(9)),
                Request(alice, "dst_autumn", at=at("2026-10-24T23:45:00"), expect=denied(audited=False)),
                Request(alice, "dst_autumn", at=at("2026-10-25T00:30:00"), expect=allowed(19)),
            ],
        ),
        Scenario(
            "OVERRIDE policies are evaluated first and their decision stands",
            [
                policy(10, ["*"], deny=[item(users=[alice])]),
                policy(11, ["add_*"], override=True, allow=[item(users=[alice])]),
                policy(12, ["add_*"], allow=[item(users=[bob])]),
                policy(13, ["add_one"], override=True, deny=[item(users=[bob])]),
                policy(14, ["bert*"], override=True, allow=[item(groups=["ml"])], deny=[item(users=["eve"])]),
                policy(15, ["bert*"], deny=[item(groups=["ml"])]),
            ],
            [
                Request(alice, "add_one", expect=allowed(11)),
                Request(alice, "sub_one", expect=denied(10)),
                Request(bob, "add_one", expect=denied(13)),
                Request(bob, "add_two", expect=allowed(12)),
                Request("carol", "bert_base", groups=("ml",), expect=allowed(14)),
                Request("eve", "bert_base", groups=("ml",), expect=denied(14)),
            ],
        ),
        Scenario(
            "deny items, deny exceptions, allow items, allow exceptions",
            [
                policy(
                    20,
                    ["m1"],
                    allow=[item(groups=["analysts"], accesses=["infer", "metadata"])],
                    allow_exceptions=[item(users=[bob])],
                    deny=[item(groups=["guests"])],
                    deny_exceptions=[item(users=["carol"])],
                ),
                policy(22, ["m3"], allow=[item(users=[alice], accesses=[("infer", False), "list"])]),
            ],
            [
                Request(alice, "m1", groups=("analysts",), expect=allowed(20)),
                Request(alice, "m1", "metadata", groups=("analysts",), expect=allowed(20)),
                Request(alice, "m1", "list", groups=("analysts",), expect=denied()),
                Request(bob, "m1", groups=("analysts",), expect=denied()),
                Request("dave", "m1", groups=("guests",), expect=denied(20)),
                Request("dave", "m1", "metadata", groups=("guests",), expect=denied()),
                Request("carol", "m1", groups=("guests", "analysts"), expect=allowed(20)),
                Request("carol", "m1", groups=("guests",), expect=denied()),
                Request(alice, "m3", expect=denied()),
                Request(alice, "m3", "list", expect=allowed(22)),
            ],
        ),
        Scenario(
            "isDenyAllElse: what no allow item grants is denied by the policy",
            [
                policy(
                    21,
                    ["m2"],
                    deny_all_else=True,
                    allow=[item(users=[alice, bob])],
                    allow_exceptions=[item(users=[bob])],
                ),
            ],
            [
                Request(alice, "m2", expect=allowed(21)),
                Request(alice, "m2", "metadata", expect=denied(21)),
                Request(bob, "m2", expect=denied(21)),
                Request("zed", "m2", expect=denied(21)),
                Request("zed", "other", expect=denied(audited=False)),
            ],
        ),
        Scenario(
            "deny wins over allow at equal priority, whatever the evaluation order",
            [
                policy(30, ["*"], allow=[item(users=[alice])]),
                policy(31, ["add_one"], deny=[item(users=[alice])]),
                policy(32, ["x_*"], override=True, allow=[item(users=[alice])]),
                policy(33, ["x_one"], override=True, deny=[item(users=[alice])]),
                policy(34, ["y_*"], allow=[item(users=[alice])], deny=[item(users=[bob])]),
                policy(35, ["y_one"], deny=[item(users=[alice])]),
            ],
            [
                Request(alice, "add_one", expect=denied(31)),
                Request(alice, "add_two", expect=allowed(30)),
                Request(alice, "x_one", expect=denied(33)),
                Request(alice, "y_one", expect=denied(35)),
                Request(alice, "y_two", expect=allowed(34)),
            ],
        ),
        Scenario(
            "who: users (case-sensitive), {USER}, group public, the user's groups (case-sensitive)",
            [
                policy(40, ["u1"], allow=[item(users=["{USER}"])]),
                policy(41, ["u2"], allow=[item(groups=["public"])]),
                policy(42, ["u3"], allow=[item(users=[alice])]),
                policy(43, ["u4"], allow=[item(groups=["ml"])]),
            ],
            [
                Request("zed", "u1", expect=allowed(40)),
                Request("zed", "u2", expect=allowed(41)),
                Request("Alice", "u3", expect=denied()),
                Request(alice, "u3", expect=allowed(42)),
                Request(bob, "u4", groups=("ml", "x"), expect=allowed(43)),
                Request(bob, "u4", groups=("ML",), expect=denied()),
            ],
        ),
        Scenario(
            "roles: users', groups', public's; nested roles pass the outer role down; cycles",
            [
                policy(50, ["r1"], allow=[item(roles=["r_direct"])]),
                policy(51, ["r2"], allow=[item(roles=["r_group"])]),
                policy(52, ["r3"], allow=[item(roles=["r_parent"])]),
                policy(53, ["r4"], allow=[item(roles=["r_child"])]),
                policy(54, ["r5"], allow=[item(roles=["r_public"])]),
                policy(55, ["r6"], allow=[item(roles=["r_cycle_a"])]),
            ],
            [
                Request(alice, "r1", expect=allowed(50)),
                Request(bob, "r1", expect=denied()),
                Request("zed", "r2", groups=("ml",), expect=allowed(51)),
                Request(bob, "r3", expect=allowed(52)),
                Request(alice, "r3", expect=denied()),
                Request(bob, "r4", expect=allowed(53)),
                Request("erin", "r4", expect=denied()),
                Request("erin", "r3", expect=allowed(52)),
                Request("zed", "r5", expect=allowed(54)),
                Request("carol", "r6", expect=allowed(55)),
            ],
            roles=[
                role("r_direct", users=[alice]),
                role("r_group", groups=["ml"]),
                role("r_parent", users=["erin"], roles=["r_child"]),
                role("r_child", users=[bob]),
                role("r_public", groups=["public"]),
                role("r_cycle_a", roles=["r_cycle_b", "r_missing"]),
                role("r_cycle_b", users=["carol"], roles=["r_cycle_a"]),
            ],
        ),
        Scenario(
            # Policy items compare access types ignoring case. (A warmed-up Ranger engine may
            # not: see lab/ranger-harness, which answers each request from a fresh engine.)
            "access type case",
            [
                policy(60, ["c1"], allow=[item(users=[alice])]),
                policy(61, ["c2"], allow=[item(users=[alice], accesses=["infer", "metadata", "list"])]),
                policy(62, ["c3"], allow=[item(users=[alice], accesses=["INFER"])]),
                policy(63, ["c4"], deny_all_else=True, allow=[item(users=[alice])]),
            ],
            [
                Request(alice, "c1", "INFER", expect=allowed(60)),
                Request(alice, "c1", "infer", expect=allowed(60)),
                Request(alice, "c2", "INFER", expect=allowed(61)),
                Request(alice, "c2", "Metadata", expect=allowed(61)),
                Request(alice, "c2", "delete", expect=denied()),
                Request(alice, "c3", "infer", expect=allowed(62)),
                Request(alice, "c3", "INFER", expect=allowed(62)),
                Request(alice, "c4", "delete", expect=denied(63)),
                Request(alice, "c4", "INFER", expect=allowed(63)),
            ],
        ),
        Scenario(
            "model names: * and ? wildcards, ignoreCase",
            [
                policy(70, ["add_*"], allow=[item(groups=["public"])]),
                policy(71, ["*_v2"], allow=[item(groups=["public"])]),
                policy(72, ["r?snet"], allow=[item(groups=["public"])]),
                policy(73, ["b*t*x"], allow=[item(groups=["public"])]),
                policy(74, ["Exact_Name"], allow=[item(groups=["public"])]),
            ],
            [
                Request(alice, "ADD_ONE", expect=allowed(70)),
                Request(alice, "add", expect=denied(audited=False)),
                Request(alice, "bert_V2", expect=allowed(71)),
                Request(alice, "resnet", expect=allowed(72)),
                Request(alice, "rsnet", expect=denied(audited=False)),
                Request(alice, "b_t_x", expect=allowed(73)),
                Request(alice, "boatx", expect=allowed(73)),
                Request(alice, "exact_name", expect=allowed(74)),
            ],
        ),
        Scenario(
            "isExcludes: every model but the values; excluding * matches nothing",
            [
                policy(76, ["secret_*"], excludes=True, allow=[item(groups=["public"])]),
                policy(77, ["*"], excludes=True, allow=[item(users=[alice])]),
            ],
            [
                Request(alice, "secret_a", expect=denied(audited=False)),
                Request(alice, "SECRET_A", expect=denied(audited=False)),
                Request(alice, "open", expect=allowed(76)),
            ],
        ),
        Scenario(
            "{USER} in model names, expanded per request, compared ignoring case",
            [
                policy(78, ["home_{USER}"], allow=[item(groups=["public"])]),
                policy(79, ["{USER}_*"], allow=[item(groups=["public"], accesses=["metadata"])]),
            ],
            [
                Request(alice, "home_alice", expect=allowed(78)),
                Request(bob, "home_alice", expect=denied(audited=False)),
                Request("Alice", "home_alice", expect=allowed(78)),
                Request(alice, "alice_model", "metadata", expect=allowed(79)),
                Request(alice, "ALICE_model", "metadata", expect=allowed(79)),
                Request(alice, "alice_model", expect=denied(audited=True)),
            ],
        ),
        *audit_modes(),
        Scenario(
            "the first allowing policy names the verdict: evalOrder (wildcards, principals), then name",
            [
                policy(90, ["*"], name="zeta", allow=[item(users=[alice])]),
                policy(91, ["tie_model"], name="alpha", allow=[item(users=[alice])]),
                policy(92, ["tie2"], name="b", allow=[item(users=[alice])]),
                policy(93, ["tie2"], name="a", allow=[item(users=[alice])]),
                policy(94, ["tie3"], name="a94", allow=[item(users=[alice])]),
                policy(95, ["tie3"], name="z95", allow=[item(users=[alice, bob, "carol"])]),
            ],
            [
                Request(alice, "tie_model", expect=allowed(90)),
                Request(alice, "tie2", expect=allowed(90)),
                Request(bob, "tie3", expect=allowed(95)),
            ],
        ),
    ]


def audit_modes() -> Iterator[Scenario]:
    policies = [
        policy(80, ["a_*"], allow=[item(users=["alice"])]),
        policy(81, ["q_*"], audit=False, allow=[item(users=["alice"])]),
        policy(82, ["q_x*"], deny=[item(users=["bob"])]),
    ]
    expected = {
        None: [allowed(80), allowed(81, audited=False), allowed(81), denied(audited=False)],
        "audit-default": [allowed(80), allowed(81, audited=False), allowed(81), denied(audited=False)],
        "audit-all": [allowed(80), allowed(81), allowed(81), denied(audited=True)],
        "audit-none": [allowed(80, False), allowed(81, False), allowed(81, False), denied(audited=False)],
    }
    for mode, verdicts in expected.items():
        models = ["a_1", "q_1", "q_x1", "z"]
        yield Scenario(
            f"auditMode {mode or '(absent)'} with isAuditEnabled per policy",
            copy.deepcopy(policies),
            [Request("alice", m, expect=v) for m, v in zip(models, verdicts, strict=True)],
            audit_mode=mode,
        )


# ---- the random scenarios

USERS = ["alice", "bob", "carol", "dave", "Alice", "root", "svc-triton"]
GROUPS = ["analysts", "ops", "ml", "guests", "admins"]
ROLE_NAMES = ["readers", "writers", "ml_team", "everyone", "nested"]
ACCESS_TYPES = ["infer", "metadata", "list"]
REQUEST_ACCESSES = [*(["infer"] * 3), "metadata", "metadata", "list", "list", "INFER", "Metadata", "delete"]
MODEL_VALUES = [
    *("add_one", "ADD_ONE", "add_*", "*_one", "*", "res*", "*_v2", "a?d_one", "a*d*e", "home_{USER}"),
    *("{USER}_*", "bert_v2", "sub_one", "Resnet50", "*e*", "?ub_one", "home_*"),
]
MODELS = [
    *("add_one", "Add_One", "add_two", "sub_one", "resnet50", "resnet50_v2", "bert_v2", "home_alice"),
    *("home_bob", "HOME_carol", "alice_model", "bob_one", "a1d_one", "apple", "zzz"),
]
TIME_ZONES = [None, "UTC", "GMT", "America/New_York", "Europe/Berlin", "Asia/Kolkata"]
# DST changes (spring and autumn, America and Europe) and a plain day, with the zone to try there
ANCHORS = [
    (at("2026-03-08T07:00:00"), "America/New_York"),
    (at("2026-11-01T06:00:00"), "America/New_York"),
    (at("2026-03-29T01:00:00"), "Europe/Berlin"),
    (at("2026-10-25T01:00:00"), "Europe/Berlin"),
    (JUNE, "Asia/Kolkata"),
]
SEED = 20260601
RANDOM_SCENARIOS = 240
REQUESTS_PER_SCENARIO = 25


def random_item(rng: random.Random, role_names: Sequence[str]) -> Json:
    users = rng.sample(USERS, rng.choice([0, 1, 1, 2]))
    groups = rng.sample(GROUPS, rng.choice([0, 1, 1, 2]))
    if rng.random() < 0.1:
        users.append("{USER}")
    if rng.random() < 0.1:
        groups.append("public")
    roles = rng.sample(list(role_names), min(len(role_names), rng.choice([0, 0, 1]))) if role_names else []
    accesses: list[str | tuple[str, bool]] = []
    for access in rng.sample(ACCESS_TYPES, rng.randint(1, 3)):
        roll = rng.random()
        accesses.append(access.upper() if roll < 0.05 else (access, False) if roll < 0.1 else access)
    return item(users=users, groups=groups, roles=roles, accesses=accesses)


def random_items(rng: random.Random, chance: float, role_names: Sequence[str]) -> list[Json]:
    if rng.random() >= chance:
        return []
    return [random_item(rng, role_names) for _n in range(rng.choice([1, 1, 2]))]


def local(moment: datetime) -> str:
    return moment.strftime("%Y/%m/%d %H:%M:%S")


def random_schedules(rng: random.Random, anchor: datetime, zone: str) -> list[Json]:
    """Windows written in a zone's clock time, often just around the anchor's DST change."""
    schedules = []
    for _n in range(rng.choice([1, 1, 2])):
        tz = zone if rng.random() < 0.5 else rng.choice(TIME_ZONES)
        clock = anchor.astimezone(ZoneInfo(tz or "GMT")).replace(tzinfo=None)
        hours = rng.randint(-3, 6) if rng.random() < 0.5 else rng.randint(-48, 24)
        start = clock + timedelta(hours=hours, minutes=rng.choice([0, 30]))
        end = start + timedelta(hours=rng.randint(1, 6) if rng.random() < 0.5 else rng.randint(1, 72))
        schedules.append(
            schedule(
                local(start) if rng.random() < 0.8 else None,
                local(end) if rng.random() < 0.8 else None,
                tz,
            )
        )
    return schedules


def schedule_boundaries(policies: Sequence[Json]) -> list[datetime]:
    """The schedules' start and end times as instants (the clock time read in its zone)."""
    moments = []
    for p in policies:
        for s in p["validitySchedules"]:
            zone = ZoneInfo(s.get("timeZone") or "GMT")
            for key in ("startTime", "endTime"):
                if key in s:
                    moments.append(datetime.strptime(s[key], "%Y/%m/%d %H:%M:%S").replace(tzinfo=zone))
    return moments


def random_time(rng: random.Random, anchor: datetime, boundaries: Sequence[datetime]) -> datetime:
    """Around the anchor, or on or near a schedule's boundary (inclusive ends, DST arithmetic)."""
    if boundaries and rng.random() < 0.4:
        near = rng.choice([0, 0, 1, -1, rng.randint(-5400, 5400)])
        return rng.choice(boundaries).astimezone(UTC) + timedelta(seconds=near)
    return anchor + timedelta(hours=rng.randint(-50, 50), minutes=rng.randint(0, 59))


def random_roles(rng: random.Random) -> list[Json]:
    names = rng.sample(ROLE_NAMES, rng.randint(1, 4))
    roles = []
    for name in names:
        groups = rng.sample(GROUPS, rng.choice([0, 1]))
        if rng.random() < 0.1:
            groups.append("public")
        # members may name roles that do not exist, or the role itself, or form cycles
        nested = rng.sample([*ROLE_NAMES, "ghost"], rng.choice([0, 0, 1, 2]))
        roles.append(role(name, users=rng.sample(USERS, rng.choice([0, 1, 2])), groups=groups, roles=nested))
    return roles


def random_scenario(rng: random.Random, index: int) -> Scenario:
    anchor, zone = rng.choice(ANCHORS)
    roles = random_roles(rng) if rng.random() < 0.5 else None
    role_names = [r["name"] for r in roles] if roles else ROLE_NAMES[:1]
    count = rng.choice([0, *range(1, 11)])
    ids = rng.sample(range(1, 500), count)
    policies = [
        policy(
            policy_id,
            rng.sample(MODEL_VALUES, rng.choice([1, 1, 2, 3])),
            name=f"{rng.choice(['ml', 'ops', 'shared', 'zz'])}-{policy_id}",
            allow=random_items(rng, 0.75, role_names),
            deny=random_items(rng, 0.35, role_names),
            allow_exceptions=random_items(rng, 0.2, role_names),
            deny_exceptions=random_items(rng, 0.2, role_names),
            enabled=rng.random() < 0.9,
            audit=rng.random() < 0.75,
            override=rng.random() < 0.2,
            excludes=rng.random() < 0.1,
            deny_all_else=rng.random() < 0.1,
            schedules=random_schedules(rng, anchor, zone) if rng.random() < 0.15 else [],
        )
        for policy_id in ids
    ]
    boundaries = schedule_boundaries(policies)
    requests = [
        Request(
            rng.choice(USERS),
            rng.choice(MODELS),
            rng.choice(REQUEST_ACCESSES),
            groups=tuple(rng.sample(GROUPS, rng.choice([0, 1, 1, 2]))),
            at=random_time(rng, anchor, boundaries),
        )
        for _n in range(REQUESTS_PER_SCENARIO)
    ]
    return Scenario(
        f"random #{index}",
        policies,
        requests,
        roles=roles,
        super_users=frozenset(rng.sample(USERS, 1)) if rng.random() < 0.2 else frozenset(),
        super_groups=frozenset(rng.sample(GROUPS, 1)) if rng.random() < 0.15 else frozenset(),
        audit_mode=rng.choice([None, None, None, None, "audit-default", "audit-all", "audit-none"]),
    )


# ---- the two engines


@pytest.fixture(scope="module")
def harness() -> Path:
    return harness_jar()


def ranger_verdicts(jar: Path, scenarios: Sequence[Scenario]) -> list[list[Verdict]]:
    """Every scenario through Ranger's engine, in one JVM."""
    documents = [s.harness_document() for s in scenarios]
    proc = subprocess.run(
        ["java", "-Duser.timezone=UTC", "-jar", str(jar)],
        input=json.dumps(documents),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if proc.returncode != 0:
        pytest.fail(f"ranger-harness exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    out = json.loads(proc.stdout)
    return [[Verdict(v["allowed"], v["audited"], v["policy_id"]) for v in doc] for doc in out]


def tarn_verdicts(scenario: Scenario) -> list[Verdict | str]:
    """Every request of a scenario through TARN's engine; an exception is kept as its text."""
    try:
        engine = Engine.from_json(
            copy.deepcopy(scenario.service_policies()),
            copy.deepcopy(scenario.ranger_roles()),
            super_users=scenario.super_users,
            super_groups=scenario.super_groups,
        )
    except Exception as e:
        return [f"Engine.from_json raised {e!r}"] * len(scenario.requests)
    verdicts: list[Verdict | str] = []
    for r in scenario.requests:
        try:
            v = engine.evaluate(r.user, frozenset(r.groups), r.model, r.access, now=r.at)
            verdicts.append(Verdict(bool(v.allowed), bool(v.audited), int(v.policy_id)))
        except Exception as e:
            verdicts.append(f"evaluate raised {e!r}")
    return verdicts


@dataclass
class Disagreement:
    scenario: Scenario
    request: Request
    ranger: Verdict
    tarn: Verdict | str

    def describe(self) -> str:
        s = self.scenario
        context = {
            "policies": s.policies,
            "roles": s.roles,
            "super_users": sorted(s.super_users),
            "super_groups": sorted(s.super_groups),
            "auditMode": s.audit_mode,
        }
        return (
            f"[{s.name}] {self.request.to_json()}\n"
            f"  ranger: {self.ranger}\n  tarn:   {self.tarn}\n"
            f"  {json.dumps(_without_empty(context), sort_keys=True)}"
        )


def _without_empty(value: Any) -> Any:
    """The JSON without its empty lists, maps and strings (Ranger reads them as absent)."""
    if isinstance(value, dict):
        kept = {k: _without_empty(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v not in ([], {}, "", None)}
    if isinstance(value, list):
        return [_without_empty(v) for v in value]
    return value


@dataclass
class Comparison:
    cases: int = 0
    disagreements: list[Disagreement] = field(default_factory=list)
    ranger_allowed: int = 0
    ranger_audited: int = 0
    ranger_by_policy: int = 0

    def report(self, title: str, shown: int = 8) -> str:
        lines = [
            f"{title}: {self.cases} cases, {len(self.disagreements)} disagreements "
            f"(Ranger: {self.ranger_allowed} allowed, {self.ranger_audited} audited, "
            f"{self.ranger_by_policy} decided by a policy)"
        ]
        lines += [d.describe() for d in self.disagreements[:shown]]
        return "\n".join(lines)


def compare(jar: Path, scenarios: Sequence[Scenario]) -> Comparison:
    result = Comparison()
    for scenario, ranger in zip(scenarios, ranger_verdicts(jar, scenarios), strict=True):
        for request, java, python in zip(scenario.requests, ranger, tarn_verdicts(scenario), strict=True):
            result.cases += 1
            result.ranger_allowed += java.allowed
            result.ranger_audited += java.audited
            result.ranger_by_policy += java.policy_id != -1
            if python != java:
                result.disagreements.append(Disagreement(scenario, request, java, python))
    return result


# ---- the tests


def test_hand_written_scenarios_say_what_ranger_does(harness: Path) -> None:
    """Each hand-written request's expected verdict is Ranger's: the scenarios test their rule."""
    scenarios = hand_written()
    wrong = [
        f"[{s.name}] {r.to_json()}: expected {r.expect}, Ranger says {v}"
        for s, verdicts in zip(scenarios, ranger_verdicts(harness, scenarios), strict=True)
        for r, v in zip(s.requests, verdicts, strict=True)
        if r.expect != v
    ]
    assert not wrong, "\n".join(wrong)


def test_tarn_agrees_with_ranger_on_every_rule(harness: Path) -> None:
    result = compare(harness, hand_written())
    print(result.report("hand-written"))
    assert result.cases > 0
    assert not result.disagreements, result.report("hand-written", shown=len(result.disagreements))


def test_tarn_agrees_with_ranger_on_random_policy_sets(harness: Path) -> None:
    rng = random.Random(SEED)  # noqa: S311 - reproducible test input, not a secret
    scenarios = [random_scenario(rng, i) for i in range(RANDOM_SCENARIOS)]
    result = compare(harness, scenarios)
    print(result.report("random"))
    assert result.cases >= 5000
    assert not result.disagreements, result.report("random")
