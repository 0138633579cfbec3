"""Registering the triton service, its pure part (tarn.ranger.registration_plan): what counts as a
change to the service def, the service and a policy once Ranger Admin has stored and shown them,
and what is sent."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tarn.errors import ConfigError
from tarn.ranger import registration_plan as ranger

ROOT = Path(__file__).resolve().parents[3]
SERVICE_DEF = json.loads((ROOT / "src" / "tarn" / "ranger" / "triton-service-def.json").read_text())
SPELLING = ranger.access_spelling(SERVICE_DEF)
SERVICE = "triton_prod"


def as_admin_shows_it(sdef: dict[str, Any]) -> dict[str, Any]:
    """The def as Ranger Admin 2.8 reads it back (lab/ranger_admin.py's service_def_view): its own
    id, guid, version and dates, displayName, no empty values, Map<String, String> as text,
    isValidLeaf, the marker access types and the implicit "_expression" condition."""
    shown = copy.deepcopy(sdef)
    shown.update(
        id=7, guid="0c6e", version=3, createTime=1, updateTime=2, createdBy="Admin", displayName="triton"
    )
    for key in ("contextEnrichers", "policyConditions"):
        shown.pop(key)
    for resource in shown["resources"]:
        resource.pop("parent")
        resource["matcherOptions"] = {k: str(v).lower() for k, v in resource["matcherOptions"].items()}
        resource.update(isValidLeaf=True, excludesSupported=False)
    shown["markerAccessTypes"] = [
        {"itemId": 3 + n, "name": m, "label": m} for n, m in enumerate(ranger.MARKER_ACCESS_TYPES, 1)
    ]
    shown["policyConditions"] = [{"itemId": 1, "name": "_expression", "label": "Enter boolean expression"}]
    shown["dataMaskDef"], shown["rowFilterDef"] = {}, {}
    return shown


# ---- comparison ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("declared", "actual", "same"),
    [
        ({"a": 1}, {"a": 1, "added": "by admin"}, True),
        ({"a": 1}, {"a": 2}, False),
        ({"on": True}, {"on": "true"}, True),  # Map<String, String>
        ({"on": True}, {"on": "false"}, False),
        ({"n": 1}, {"n": True}, False),
        ({"parent": ""}, {}, True),  # Jackson NON_EMPTY drops it
        ({"parent": ""}, {"parent": "model"}, False),
        ({"flag": False}, {}, True),
        ({"flag": True}, {}, False),
        ({"items": []}, {}, True),
        ({"items": [{"a": 1}]}, {"items": [{"a": 1, "b": 2}]}, True),
        ({"items": [{"a": 1}]}, {"items": [{"a": 1}, {"a": 2}]}, False),
        ({"items": [1, 2]}, {"items": [2, 1]}, False),
        ({"m": {}}, {"m": {"k": "v"}}, True),
        ("text", None, False),
    ],
)
def test_matches_compares_the_declared_fields_only(declared: Any, actual: Any, same: bool) -> None:
    assert ranger.matches(declared, actual) is same


def test_project_keeps_the_declared_value_where_it_matches() -> None:
    declared = {"a": {"x": True, "p": ""}, "b": [1], "c": "new"}
    actual = {"a": {"x": "true", "y": 5}, "b": [2], "zz": 1}
    assert ranger.project(declared, actual) == {"a": {"x": True, "p": ""}, "b": [2]}


# ---- the service def ----------------------------------------------------------------------------


def test_the_shipped_def_as_admin_shows_it_is_unchanged() -> None:
    declared = ranger.declared_service_def(SERVICE_DEF)
    assert "id" not in declared, "Ranger ignores it; the def is found by name"
    assert ranger.service_def_changes(declared, as_admin_shows_it(SERVICE_DEF)) == []
    shown = ranger.shown_service_def(declared, as_admin_shows_it(SERVICE_DEF))
    assert ranger.project(declared, shown) == declared, "a diff shows nothing"


def test_a_new_def_is_all_changes() -> None:
    declared = ranger.declared_service_def(SERVICE_DEF)
    assert ranger.service_def_changes(declared, None) == sorted(declared)


@pytest.mark.parametrize(
    ("edit", "changed"),
    [
        (
            lambda d: d["accessTypes"].append({"itemId": 4, "name": "unload", "label": "Unload"}),
            ["accessTypes"],
        ),
        (lambda d: d["accessTypes"][0].update(label="Infer"), ["accessTypes"]),
        (lambda d: d["resources"][0]["matcherOptions"].update(ignoreCase=False), ["resources"]),
        (lambda d: d.update(description="Triton models"), ["description"]),
        (lambda d: d["policyConditions"].append({"itemId": 1, "name": "ip-range"}), ["policyConditions"]),
        (lambda d: d.update(id=1001, version=9, guid="x"), []),  # server fields: never compared
    ],
)
def test_service_def_changes_name_the_fields_that_differ(edit: Any, changed: list[str]) -> None:
    wanted = copy.deepcopy(SERVICE_DEF)
    edit(wanted)
    declared = ranger.declared_service_def(wanted)
    assert ranger.service_def_changes(declared, as_admin_shows_it(SERVICE_DEF)) == changed


def test_markers_and_the_implicit_condition_count_when_declared() -> None:
    wanted = copy.deepcopy(SERVICE_DEF)
    wanted["policyConditions"] = [{"itemId": 1, "name": "_expression", "label": "Enter boolean expression"}]
    shown = as_admin_shows_it(SERVICE_DEF)
    assert ranger.service_def_changes(ranger.declared_service_def(wanted), shown) == []
    shown["policyConditions"] = []
    assert ranger.service_def_changes(ranger.declared_service_def(wanted), shown) == ["policyConditions"]
    shown = as_admin_shows_it(SERVICE_DEF)
    shown["accessTypes"] += [{"itemId": 9, "name": "_ALL", "label": "_ALL"}]  # markers listed among them
    assert ranger.service_def_changes(ranger.declared_service_def(SERVICE_DEF), shown) == []


def test_a_def_needs_a_name() -> None:
    with pytest.raises(ConfigError, match="service_def: a Ranger service definition with a name"):
        ranger.declared_service_def({"resources": []})


# ---- the service --------------------------------------------------------------------------------

ADMIN_SERVICE: dict[str, Any] = {
    "id": 1, "guid": "g", "version": 4, "isEnabled": True, "type": "triton", "name": SERVICE,
    "displayName": SERVICE, "description": "prod", "policyVersion": 12, "policyUpdateTime": 5,
    "tagVersion": 1, "tagUpdateTime": 5,
    "configs": {"username": "tarn", "password": "*****", "ranger.plugin.audit.filters": "[]"},
}  # fmt: skip


@pytest.mark.parametrize(
    ("kwargs", "changed"),
    [
        ({}, []),
        ({"description": "prod"}, []),
        ({"description": "production"}, ["description"]),
        ({"enabled": False}, ["isEnabled"]),
        ({"configs": {}}, []),
        ({"configs": {"username": "tarn"}}, []),  # configs Admin has beyond the declared ones stay
        ({"configs": {"username": "triton"}}, ["configs"]),
        ({"configs": {"password": "s3cret"}}, []),  # masked: cannot be compared
        ({"configs": {"policy.download.auth.users": "tarn"}}, ["configs"]),
    ],
)
def test_service_changes(kwargs: dict[str, Any], changed: list[str]) -> None:
    declared = ranger.declared_service(SERVICE, "triton", **kwargs)
    assert ranger.service_changes(declared, ADMIN_SERVICE) == changed
    assert ranger.service_changes(declared, None) == sorted(declared)


def test_a_service_update_merges_configs_and_drops_server_fields() -> None:
    declared = ranger.declared_service(SERVICE, "triton", description="production", configs={"timeout": 30})
    body = ranger.service_update(declared, ADMIN_SERVICE)
    assert body["id"] == 1
    assert body["configs"] == {**ADMIN_SERVICE["configs"], "timeout": "30"}
    assert body["description"] == "production"
    assert not {"version", "guid", "policyVersion", "tagVersion"} & set(body)


def test_passwords_are_masked_for_diffs_and_returns() -> None:
    secret = "s3cret"  # noqa: S105 - a test value
    declared = ranger.declared_service(SERVICE, "triton", configs={"password": secret, "username": "tarn"})
    assert ranger.masked(declared)["configs"] == {"password": "*****", "username": "tarn"}
    assert declared["configs"]["password"] == secret, "the body sent keeps it"


# ---- policies -----------------------------------------------------------------------------------


def admin_policy(declared: dict[str, Any], policy_id: int = 5) -> dict[str, Any]:
    """A declared policy as Admin stores and shows it (lab/ranger_admin.py's policy_view)."""
    shown = copy.deepcopy(declared)
    shown.update(id=policy_id, guid="pg", version=2, service=SERVICE, serviceType="triton")
    shown.update(
        policyType=0, resourceSignature="f" * 64, isEnabled=True, isAuditEnabled=True, createdBy="Admin"
    )
    shown["resources"] = {
        k.lower(): {"values": v["values"], "isExcludes": False, "isRecursive": False}
        for k, v in declared["resources"].items()
    }
    for key in ranger.ITEM_LISTS:
        for item in shown.get(key, []):
            types = [a["type"] if isinstance(a, dict) else a for a in item["accesses"]]
            item["accesses"] = [{"type": SPELLING[t.lower()], "isAllowed": True} for t in types]
            item["users"] = list(dict.fromkeys(u.strip() for u in item.get("users", [])))
            item["delegateAdmin"] = False
    shown.setdefault("policyPriority", 0)
    return shown


DENY: dict[str, Any] = {
    "name": "bob-not-add-one",
    "resources": {"Model": {"values": ["add_one"]}},
    "denyPolicyItems": [{"users": ["bob", "bob "], "accesses": [{"type": "INFER"}, {"type": "list"}]}],
    "denyExceptions": [{"users": ["bob"], "accesses": ["metadata"]}],
}


def test_a_policy_is_declared_as_admin_keeps_it() -> None:
    declared = ranger.declared_policy(DENY, SERVICE, SPELLING)
    assert declared["resources"] == {
        "model": {"values": ["add_one"], "isExcludes": False, "isRecursive": False}
    }
    (deny,) = declared["denyPolicyItems"]
    assert deny["users"] == ["bob"]
    assert deny["accesses"] == [{"type": "infer", "isAllowed": True}, {"type": "list", "isAllowed": True}]
    assert declared["denyExceptions"][0]["accesses"] == [{"type": "metadata", "isAllowed": True}]
    assert (declared["policyItems"], declared["allowExceptions"]) == ([], [])
    assert (declared["service"], declared["policyPriority"], declared["isEnabled"]) == (SERVICE, 0, True)


@pytest.mark.parametrize(
    ("edit", "changed"),
    [
        (lambda p: None, []),
        (lambda p: p.update(policyPriority=1), ["policyPriority"]),
        (lambda p: p.update(isEnabled=False), ["isEnabled"]),
        (lambda p: p["resources"]["Model"]["values"].append("add_sub"), ["resources"]),
        (lambda p: p["denyExceptions"].clear(), ["denyExceptions"]),  # left out: Ranger's default, none
        (lambda p: p.pop("denyExceptions"), ["denyExceptions"]),
        (lambda p: p["denyPolicyItems"][0]["users"].append("carol"), ["denyPolicyItems"]),
        (lambda p: p["denyPolicyItems"][0].update(groups=["analysts"]), ["denyPolicyItems"]),
        (lambda p: p["denyPolicyItems"][0].update(delegateAdmin=True), ["denyPolicyItems"]),
        (lambda p: p.update(policyItems=[{"groups": ["analysts"], "accesses": ["list"]}]), ["policyItems"]),
        (lambda p: p.update(description="no bob"), ["description"]),  # declared: compared
        (lambda p: p.update(id=99, version=7, guid="x"), []),  # Admin's fields: never compared
    ],
)
def test_policy_changes(edit: Any, changed: list[str]) -> None:
    stored = admin_policy(DENY)
    wanted = copy.deepcopy(DENY)
    edit(wanted)
    declared = ranger.declared_policy(wanted, SERVICE, SPELLING)
    assert ranger.policy_changes(declared, stored, SERVICE, SPELLING) == changed


def test_a_description_set_in_admin_is_kept_when_not_declared() -> None:
    stored = {**admin_policy(DENY), "description": "set in the UI"}
    declared = ranger.declared_policy(DENY, SERVICE, SPELLING)
    assert ranger.policy_changes(declared, stored, SERVICE, SPELLING) == []
    wanted = copy.deepcopy(DENY)
    wanted["denyPolicyItems"][0]["users"] = ["carol"]
    body = ranger.policy_update(ranger.declared_policy(wanted, SERVICE, SPELLING), stored)
    assert (body["id"], body["description"], body["denyPolicyItems"][0]["users"]) == (
        5,
        "set in the UI",
        ["carol"],
    )
    assert not {"version", "guid", "resourceSignature", "createdBy"} & set(body)


def test_plan_policies() -> None:
    keep = ranger.declared_policy(DENY, SERVICE, SPELLING)
    new = ranger.declared_policy({"name": "new", "resources": {"model": ["x"]}}, SERVICE, SPELLING)
    moved = ranger.declared_policy({**DENY, "name": "moved", "policyPriority": 1}, SERVICE, SPELLING)
    existing = [
        admin_policy(DENY, 1),
        admin_policy({**DENY, "name": "moved"}, 2),
        {"id": 3, "name": "all - model", "resources": {"model": {"values": ["*"]}}},
    ]
    declared = [keep, new, moved]

    def steps(plan: ranger.Plan) -> list[tuple[str, str, list[str]]]:
        return [(step.action, step.name, list(step.fields)) for step in plan.steps]

    assert steps(ranger.plan_policies(declared, existing, SERVICE, SPELLING)) == [
        ("keep", "bob-not-add-one", []),
        ("create", "new", []),
        ("update", "moved", ["policyPriority"]),
    ]
    assert steps(ranger.plan_policies(declared, existing, SERVICE, SPELLING, purge=True))[-1] == (
        "delete",
        "all - model",
        [],
    )
    with pytest.raises(ConfigError, match="given more than once: new"):
        ranger.plan_policies([new, keep, new], existing, SERVICE, SPELLING)


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        ({"resources": {"model": ["x"]}}, "every policy needs a name"),
        ({"name": "p"}, "policy 'p': resources are needed"),
        (
            {"name": "p", "resources": {"model": ["x"]}, "service": "dev"},
            "service 'dev' is not 'triton_prod'",
        ),
        ({"name": "p", "resources": {"model": ["x"]}, "policyItems": [{"accesses": [{}]}]}, "needs a type"),
        ({"name": "p", "resources": {"model": ["x"]}, "policyItems": [{"users": "bob"}]}, "users: a list"),
    ],
)
def test_bad_policies_are_refused_before_anything_is_sent(policy: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ranger.declared_policy(policy, SERVICE, SPELLING)


REFUSED = "Operation denied. {} name: {} specified in policy does not exist in ranger admin."


@pytest.mark.parametrize(
    ("message", "refused"),
    [
        (REFUSED.format("User", "mallory"), ("user", "mallory")),
        (REFUSED.format("Group", "ml ops"), ("group", "ml ops")),
        (REFUSED.format("Role", "readers"), ("role", "readers")),
        ("Another policy already exists for matching resource: policy-name=[x]", None),
    ],
)
def test_refused_principal(message: str, refused: tuple[str, str] | None) -> None:
    assert ranger.refused_principal(message) == refused


def test_without_service_def_the_tarn_package_s_own_file_is_declared() -> None:
    assert ranger.triton_service_def() == SERVICE_DEF
    declared = ranger.declare(None, SERVICE)
    assert declared.service_def == ranger.declared_service_def(SERVICE_DEF)
