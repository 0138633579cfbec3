"""Registering the triton service in Ranger Admin, decided without talking to it (pure): what the
module tarn.yarn.tarn_ranger declares, whether Admin's service def, service or a policy differs
from it, and the steps (and their bodies) that make Admin match. tarn.ranger.registration reads
and writes; the comparisons are tested in tests/unit/ranger/test_registration_plan.py.

Ranger Admin changes what it stores and shows, so "different" is not "not equal":

- A service def is compared on the fields the user declares only: Admin adds ids, guids, dates,
  versions, the marker access types (_CREATE ... _ALL), the implicit "_expression" policy
  condition, isValidLeaf, a displayName; it drops empty values ("parent": "" reads back absent)
  and keeps Map<String, String> values as text ({"wildCard": true} reads back "true").
- A service is compared on the fields declared; its configs on the keys declared (configs Admin
  or an operator added are kept); a password Admin shows as "*****" cannot be compared.
- A policy is compared on what decides access, in full: resources (names lower-cased, as Admin
  stores them), the four item lists (users, groups, roles, accesses, conditions, delegateAdmin),
  policyPriority, isEnabled and isAuditEnabled, with Ranger's defaults for what the user leaves
  out; any other field (description, policyLabels, ...) only when declared.

Errors are ConfigErrors naming the module option at fault, found before anything is sent.
"""

from __future__ import annotations

import copy
import enum
import json
import re
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, overload

from tarn.errors import ConfigError

Json = dict[str, Any]

# Fields Admin sets itself on every object; never compared, never sent.
SERVER_FIELDS = ("id", "guid", "version", "createTime", "updateTime", "createdBy", "updatedBy")
# Service-def fields Admin computes (ServiceDefUtil / populateViewBean).
MARKER_ACCESS_TYPES = ("_CREATE", "_READ", "_UPDATE", "_DELETE", "_MANAGE", "_ALL")
IMPLICIT_CONDITION = "_expression"
HIDDEN_PASSWORD = "*****"  # noqa: S105 - Admin's mask for a password config (ServiceDBStore)
# Policy fields Admin computes, dropped from an update's body (Admin recomputes them).
POLICY_SERVER_FIELDS = (*SERVER_FIELDS, "resourceSignature", "serviceType")
ITEM_LISTS = ("policyItems", "denyPolicyItems", "allowExceptions", "denyExceptions")
# Compared whether declared or not: what decides access, with Ranger's defaults.
POLICY_MANAGED = (
    "name",
    "service",
    "isEnabled",
    "isAuditEnabled",
    "policyPriority",
    "resources",
    *ITEM_LISTS,
)
PRINCIPAL_REFUSED = re.compile(
    r"(User|Group|Role) name: (.+?) specified in policy does not exist in ranger admin", re.IGNORECASE
)


# ---- comparison ---------------------------------------------------------------------------------


def java_text(value: Any) -> str:
    """A scalar as Admin's Java model would print it: Jackson binds true to "true" in a String map."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def is_empty(value: Any) -> bool:
    """Values Admin does not write back (Jackson NON_EMPTY), or its default (false)."""
    return value is None or value is False or (isinstance(value, (str, list, dict)) and len(value) == 0)


def matches(declared: Any, actual: Any) -> bool:
    """``actual`` (as Admin shows it) has what ``declared`` says: every declared key of a dict, lists
    item by item and of the same length, scalars as Java text; an empty declared value matches an
    absent one."""
    if isinstance(declared, dict):
        if actual is None:
            actual = {}
        if not isinstance(actual, dict):
            return False
        return all(matches(value, actual.get(key)) for key, value in declared.items())
    if isinstance(declared, list):
        if actual is None:
            actual = []
        if not isinstance(actual, list) or len(declared) != len(actual):
            return False
        return all(matches(d, a) for d, a in zip(declared, actual, strict=True))
    if actual is None or is_empty(declared):
        return is_empty(declared) and is_empty(actual)
    return java_text(declared) == java_text(actual)


def project(declared: Any, actual: Any) -> Any:
    """The part of ``actual`` that ``declared`` is compared with, for diffs: the declared keys, and
    the declared value itself wherever it matches (so a diff shows real differences only)."""
    if matches(declared, actual):
        return copy.deepcopy(declared)
    if isinstance(declared, dict) and isinstance(actual, dict):
        return {
            key: project(value, actual.get(key))
            for key, value in declared.items()
            if key in actual or matches(value, None)
        }
    if isinstance(declared, list) and isinstance(actual, list) and len(declared) == len(actual):
        return [project(d, a) for d, a in zip(declared, actual, strict=True)]
    return copy.deepcopy(actual)


def without(obj: Json, keys: tuple[str, ...]) -> Json:
    return {k: copy.deepcopy(v) for k, v in obj.items() if k not in keys}


# ---- the service def ----------------------------------------------------------------------------


def declared_service_def(sdef: Json) -> Json:
    """The def as sent and compared: no server fields (Admin ignores a given id on create and finds
    the def by name on update) and no marker access types (Admin computes them)."""
    if not isinstance(sdef, dict) or not sdef.get("name"):
        raise ConfigError(
            "service_def: a Ranger service definition with a name is needed; give Ranger's JSON of one "
            "(name, resources, accessTypes), or leave service_def out for TARN's triton definition"
        )
    return without(sdef, (*SERVER_FIELDS, "markerAccessTypes"))


def shown_service_def(declared: Json, actual: Json) -> Json:
    """Admin's def without what it adds on reading, unless the user declares it too: the marker
    access types (also when listed among accessTypes) and the implicit "_expression" condition."""
    shown = without(actual, ("markerAccessTypes",))
    declared_access = {a.get("name") for a in declared.get("accessTypes") or [] if isinstance(a, dict)}
    shown["accessTypes"] = [
        a
        for a in actual.get("accessTypes") or []
        if a.get("name") not in MARKER_ACCESS_TYPES or a.get("name") in declared_access
    ]
    declared_conditions = {
        c.get("name") for c in declared.get("policyConditions") or [] if isinstance(c, dict)
    }
    shown["policyConditions"] = [
        c
        for c in actual.get("policyConditions") or []
        if c.get("name") != IMPLICIT_CONDITION or IMPLICIT_CONDITION in declared_conditions
    ]
    return shown


def service_def_changes(declared: Json, actual: Json | None) -> list[str]:
    """The declared top-level fields that differ (all of them when there is no def yet)."""
    if actual is None:
        return sorted(declared)
    shown = shown_service_def(declared, actual)
    return sorted(key for key, value in declared.items() if not matches(value, shown.get(key)))


# ---- the service --------------------------------------------------------------------------------


def declared_service(
    name: str,
    service_type: str,
    enabled: bool = True,
    description: str | None = None,
    configs: Json | None = None,
) -> Json:
    service: Json = {"name": name, "type": service_type, "isEnabled": enabled}
    if description is not None:
        service["description"] = description
    if configs is not None:
        if not isinstance(configs, dict):
            raise ConfigError(
                "service_configs: a mapping of config names to values is needed; e.g. {username: tarn}"
            )
        service["configs"] = {str(k): java_text(v) for k, v in configs.items()}
    return service


def is_password(key: str) -> bool:
    return "password" in key.lower()


def service_changes(declared: Json, actual: Json | None) -> list[str]:
    """The declared fields that differ; configs by declared key. A password config Admin shows as
    "*****" counts as unchanged: Admin never shows it."""
    if actual is None:
        return sorted(declared)
    changed = []
    for key, value in declared.items():
        if key == "configs":
            shown = actual.get("configs") or {}
            if any(
                not matches(v, shown.get(k)) and not (is_password(k) and shown.get(k) == HIDDEN_PASSWORD)
                for k, v in value.items()
            ):
                changed.append(key)
        elif not matches(value, actual.get(key)):
            changed.append(key)
    return sorted(changed)


def service_update(declared: Json, actual: Json) -> Json:
    """The body of the service's update: Admin's service with the declared fields; configs merged
    (a masked password goes back as "*****", which Admin takes as "keep the stored one")."""
    body = without(actual, SERVER_FIELDS)
    for key in ("policyVersion", "policyUpdateTime", "tagVersion", "tagUpdateTime"):
        body.pop(key, None)
    body.update(copy.deepcopy(declared))
    if "configs" in declared:
        body["configs"] = {**(actual.get("configs") or {}), **declared["configs"]}
    body["id"] = actual["id"]
    return body


@overload
def masked(obj: Json) -> Json: ...


@overload
def masked(obj: None) -> None: ...


def masked(obj: Json | None) -> Json | None:
    """A service (or its declaration) with every password config shown as Admin shows it."""
    if obj is None or not isinstance(obj.get("configs"), dict):
        return obj
    configs = {k: HIDDEN_PASSWORD if is_password(k) else v for k, v in obj["configs"].items()}
    return {**obj, "configs": configs}


# ---- policies -----------------------------------------------------------------------------------


def access_spelling(sdef: Json) -> dict[str, str]:
    """Access type names by lower case, as Admin spells a policy's accesses (the def's spelling)."""
    names = [str(a["name"]) for a in sdef.get("accessTypes") or [] if isinstance(a, dict) and a.get("name")]
    return {name.lower(): name for name in [*names, *MARKER_ACCESS_TYPES]}


def _names(values: Any, where: str) -> list[str]:
    if values is None:
        return []
    if not isinstance(values, list):
        raise ConfigError(f"{where}: a list is needed; write [name, ...]")
    return list(dict.fromkeys(str(v).strip() for v in values))


def canonical_item(item: Any, spelling: dict[str, str], where: str) -> Json:
    """A policy item as Admin keeps it: principals trimmed and de-duplicated, one access per type
    in the def's spelling, Ranger's defaults for what is left out."""
    if not isinstance(item, dict):
        raise ConfigError(
            f"{where}: a policy item (a mapping) is needed; e.g. {{users: [alice], accesses: [list]}}"
        )
    accesses: dict[str, Json] = {}
    for access in item.get("accesses") or []:
        given = access.get("type") if isinstance(access, dict) else access
        if not given:
            raise ConfigError(f"{where}.accesses: each access needs a type; write {{type: infer}} or infer")
        kind = spelling.get(str(given).lower(), str(given))
        allowed = access.get("isAllowed", True) if isinstance(access, dict) else True
        accesses.setdefault(kind, {"type": kind, "isAllowed": allowed is not False})
    conditions = [
        {"type": c.get("type"), "values": [str(v) for v in c.get("values") or []]}
        for c in item.get("conditions") or []
        if isinstance(c, dict)
    ]
    return {
        "accesses": list(accesses.values()),
        "users": _names(item.get("users"), f"{where}.users"),
        "groups": _names(item.get("groups"), f"{where}.groups"),
        "roles": _names(item.get("roles"), f"{where}.roles"),
        "conditions": conditions,
        "delegateAdmin": item.get("delegateAdmin") is True,
    }


def canonical_resources(resources: Any, where: str) -> Json:
    if not isinstance(resources, dict):
        raise ConfigError(
            f"{where}.resources: a mapping of resource names to values is needed; e.g. {{model: [add_one]}}"
        )
    canonical: Json = {}
    for name, resource in resources.items():
        if isinstance(resource, list):  # a shorthand: the values alone
            resource = {"values": resource}
        if not isinstance(resource, dict):
            raise ConfigError(
                f"{where}.resources.{name}: a mapping with values is needed; e.g. {{values: [add_one]}}"
            )
        canonical[str(name).lower()] = {
            "values": [str(v) for v in resource.get("values") or []],
            "isExcludes": resource.get("isExcludes") is True,
            "isRecursive": resource.get("isRecursive") is True,
        }
    return canonical


def canonical_policy(policy: Json, service: str, spelling: dict[str, str]) -> Json:
    """The compared part of a policy (a declared one or Admin's), with Ranger's defaults."""
    name = str(policy.get("name") or "").strip()
    where = f"policies: policy {name!r}" if name else "policies: a policy"
    canonical: Json = {
        "name": name,
        "service": service,
        "isEnabled": policy.get("isEnabled") is not False,
        "isAuditEnabled": policy.get("isAuditEnabled") is not False,
        "policyPriority": int(policy.get("policyPriority") or 0),
        "resources": canonical_resources(policy.get("resources") or {}, where),
    }
    for key in ITEM_LISTS:
        items = policy.get(key) or []
        if not isinstance(items, list):
            raise ConfigError(
                f"{where}.{key}: a list of policy items is needed; write [{{users: [...], accesses: [...]}}]"
            )
        canonical[key] = [
            canonical_item(item, spelling, f"{where}.{key}[{n}]") for n, item in enumerate(items)
        ]
    return canonical


def declared_policy(policy: Any, service: str, spelling: dict[str, str]) -> Json:
    """A declared policy as sent: its canonical part and any other field it declares."""
    if not isinstance(policy, dict) or not str(policy.get("name") or "").strip():
        raise ConfigError("policies: every policy needs a name; add name: to each")
    if not policy.get("resources"):
        raise ConfigError(
            f"policies: policy {policy['name']!r}: resources are needed, e.g. {{model: {{values: ['*']}}}}"
        )
    if policy.get("service") not in (None, service):
        raise ConfigError(
            f"policies: policy {policy['name']!r}: service {policy['service']!r} is not {service!r}; "
            "leave it out or name the option service"
        )
    extra = without(policy, (*POLICY_SERVER_FIELDS, *POLICY_MANAGED))
    return {**canonical_policy(policy, service, spelling), **extra}


def policy_changes(declared: Json, actual: Json, service: str, spelling: dict[str, str]) -> list[str]:
    """The fields of a declared policy (from declared_policy) that Admin's differs in."""
    shown = canonical_policy(actual, service, spelling)
    changed = [key for key in POLICY_MANAGED if declared[key] != shown[key]]
    changed += [
        key for key in declared if key not in POLICY_MANAGED and not matches(declared[key], actual.get(key))
    ]
    return changed


def shown_policy(declared: Json, actual: Json, service: str, spelling: dict[str, str]) -> Json:
    """Admin's policy as it is compared with ``declared`` (for diffs)."""
    extra = {k: project(declared[k], actual.get(k)) for k in declared if k not in POLICY_MANAGED}
    return {**canonical_policy(actual, service, spelling), **extra}


def policy_update(declared: Json, actual: Json) -> Json:
    """The body of a policy's update: Admin's policy (fields not declared are kept) with the
    declared ones, under its id."""
    return {**without(actual, POLICY_SERVER_FIELDS), **copy.deepcopy(declared), "id": actual["id"]}


def unique_names(names: list[str]) -> None:
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(
            f"policies: each name once; given more than once: {', '.join(twice)}; rename or merge them"
        )


# ---- the steps ----------------------------------------------------------------------------------


class Kind(enum.Enum):
    """What a step writes, as the module's ``actions`` name it."""

    SERVICE_DEF = "service def"
    SERVICE = "service"
    POLICY = "policy"


@dataclass(frozen=True)
class Step:
    """What to do to one object (``kind`` named ``name``): create, update (the ``fields`` that
    differ), delete, or keep (no write). ``body`` is what is sent; ``object_id`` the policy's."""

    action: str
    kind: Kind
    name: str
    fields: tuple[str, ...] = ()
    body: Json | None = None
    object_id: Any = None

    @property
    def writes(self) -> bool:
        return self.action != "keep"

    @property
    def text(self) -> str:
        """As the module's ``actions`` list it: "update policy bob (resources)"."""
        changed = f" ({', '.join(self.fields)})" if self.fields else ""
        return f"{self.action} {self.kind.value} {self.name}{changed}"


@dataclass(frozen=True)
class Plan:
    """The steps that make Admin match the declaration, and the diff: the compared part of what
    Admin has (``before``) and what is declared (``after``)."""

    steps: tuple[Step, ...]
    before: Json = field(default_factory=dict)
    after: Json = field(default_factory=dict)


def plan_service_def(declared: Json, actual: Json | None) -> Plan:
    """Create the def, update it (by name) when a declared field differs, or nothing."""
    name = declared["name"]
    if actual is None:
        return Plan((Step("create", Kind.SERVICE_DEF, name, body=declared),), {}, declared)
    before = project(declared, shown_service_def(declared, actual))
    changed = tuple(service_def_changes(declared, actual))
    steps = (Step("update", Kind.SERVICE_DEF, name, changed, declared),) if changed else ()
    return Plan(steps, before, declared)


def plan_service(declared: Json, actual: Json | None) -> Plan:
    """Create the service, update it (by name, Admin's service with the declared fields) when a
    declared field differs, or nothing. Passwords are masked in the diff."""
    name = declared["name"]
    after = masked(declared)
    if actual is None:
        return Plan((Step("create", Kind.SERVICE, name, body=declared),), {}, after)
    before = masked(project(declared, actual))
    changed = tuple(service_changes(declared, actual))
    steps = (
        (Step("update", Kind.SERVICE, name, changed, service_update(declared, actual)),) if changed else ()
    )
    return Plan(steps, before, after)


def plan_policies(
    declared: list[Json], actual: list[Json], service: str, spelling: dict[str, str], purge: bool = False
) -> Plan:
    """A step for each policy: create, update (the fields that differ; by the id Admin's has under
    its name), keep, and with ``purge`` delete (Admin's policies not declared). Declared ones in
    their order. The diff maps policy names to their compared part."""
    names = [p["name"] for p in declared]
    unique_names(names)
    existing = {p.get("name"): p for p in actual}
    steps: list[Step] = []
    before: Json = {}
    after: Json = {}
    for policy in declared:
        name = policy["name"]
        after[name] = policy
        found = existing.get(name)
        if found is None:
            steps.append(Step("create", Kind.POLICY, name, body=policy))
            continue
        before[name] = shown_policy(policy, found, service, spelling)
        changed = tuple(policy_changes(policy, found, service, spelling))
        if changed:
            steps.append(
                Step("update", Kind.POLICY, name, changed, policy_update(policy, found), found["id"])
            )
        else:
            steps.append(Step("keep", Kind.POLICY, name))
    for found in actual if purge else []:
        if found.get("name") not in names:
            before[found["name"]] = canonical_policy(found, service, spelling)
            steps.append(Step("delete", Kind.POLICY, found["name"], object_id=found["id"]))
    return Plan(tuple(steps), before, after)


# ---- the declaration ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Declaration:
    """What the module's options declare, checked and in the form sent and compared."""

    service_def: Json
    service: Json
    policies: list[Json]
    spelling: dict[str, str]  # the def's access type names, by lower case


def triton_service_def() -> Json:
    """TARN's triton service def: the tarn package's own file."""
    text = resources.files("tarn.ranger").joinpath("triton-service-def.json").read_text(encoding="utf-8")
    sdef: Json = json.loads(text)
    return sdef


def declare(
    service_def: Json | None,
    service: str,
    enabled: bool = True,
    description: str | None = None,
    configs: Json | None = None,
    policies: list[Any] | None = None,
) -> Declaration:
    """Every option checked before anything is sent; without ``service_def``, TARN's triton def."""
    sdef = declared_service_def(service_def or triton_service_def())
    spelling = access_spelling(sdef)
    declared = [declared_policy(p, service, spelling) for p in policies or []]
    unique_names([p["name"] for p in declared])
    return Declaration(
        sdef, declared_service(service, sdef["name"], enabled, description, configs), declared, spelling
    )


def refused_principal(message: str) -> tuple[str, str] | None:
    """(kind, name) when Admin refused a policy naming a user, group or role it does not have."""
    found = PRINCIPAL_REFUSED.search(message or "")
    return (found.group(1).lower(), found.group(2)) if found else None


def principal_failure(policy_name: str, message: str) -> str:
    """Admin's refusal of a policy, naming the principal it lacks and the options that let it be."""
    refused = refused_principal(message)
    if refused is None:
        return f"policies: policy {policy_name!r}: {message}"
    kind, name = refused
    return (
        f"policies: policy {policy_name!r} names the {kind} {name!r}, which Ranger Admin does not have "
        f"({message}); create it in Ranger (e.g. with usersync) or set create_principals_if_absent: true "
        "(role tarn.yarn.ranger_triton: ranger_triton_create_principals_if_absent) to let Ranger create it"
    )


def summary(obj: Json | None, *keys: str) -> Json:
    """The ``keys`` of an object Admin has, for the module's return; empty when there is none."""
    return {k: obj.get(k) for k in keys} if obj else {}
