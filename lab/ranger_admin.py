"""A stand-in for Apache Ranger Admin 2.8.0: the REST subset TARN, its Ansible role and Ranger's
own plugin client use, for the lab and the tests. Standard library only (a lab node has python3).

It is NOT Ranger: no database, UI, audit, Kerberos, security zones, tag services or policy deltas.
It follows Ranger 2.8.0's sources (apache/ranger, tag release-ranger-2.8.0) for every endpoint it
has: paths, status codes, JSON field names and types, Jackson's NON_EMPTY omission of empty values,
dates as epoch milliseconds, versions, 304 on an unchanged download, and the error bodies
(VXResponse ``{"statusCode", "msgDesc", "messageList"}``). Each handler names the Ranger code it
follows.

Endpoints, all under ``/service``; anything else answers 404 (405 for a known path, other method):

  Public API v2 (``/public/v2/api``, HTTP basic auth as --admin-user):
    servicedef        POST; GET /{id}, /name/{name}; PUT /{id}, /name/{name}
    service           POST; GET /{id}, /name/{name}; PUT /{id}, /name/{name}
    policy            POST; GET/PUT/DELETE /{id}; DELETE ?servicename=&policyname=
    service/{s}/policy            GET (list; only the ``policyName`` filter)
    service/{s}/policy/{name}     GET, PUT
    roles             POST, GET; GET /names, /{id}, /name/{name}; PUT /{id};
                      DELETE /{id}, /name/{name}
  Plugin downloads (no authentication, as Ranger without Kerberos):
    GET /plugins/policies/download/{service}?lastKnownVersion=&supportsPolicyDeltas=...
    GET /roles/download/{service}?lastKnownRoleVersion=...
    GET /xusers/download/{service}?lastKnownUserStoreVersion=...

Users and groups come from --users FILE (there is no xusers API), for example::

  {"users":  {"alice": {"groups": ["ml-team"]}, "bob": {"groups": ["analysts"]}, "carol": {}},
   "groups": {"analysts": {"attributes": {"dept": "bi"}}}}

A user's groups need not be listed under "groups"; "attributes" (optional) go to the user store's
attribute maps. Ranger's built-in principals are always there: users admin, keyadmin,
rangerusersync, rangertagsync, {USER}, {OWNER}; group public.

Behaviour kept from Ranger because a client can tell the difference:
  - a service def's "id" is ignored on create; resources and access types need an "itemId";
  - reading a service def adds the marker access types (_CREATE ... _ALL) and the implicit
    "_expression" policy condition;
  - creating a service creates the "all - <resources>" default policy when its configs name a
    user ("username", "default.policy.users") or group ("default.policy.groups");
  - a policy naming an unknown user, group or role is refused (400) unless
    ``?createPrincipalsIfAbsent=true``; resource names are lower-cased; a second enabled policy
    on the same resources is refused (resourceSignature, as RangerPolicyResourceSignature);
  - a missing object by id is 400 "Data Not Found", by name 404 "Not found" (a role: 400);
  - a service def's PUT /{id} with another "id" in the body is 400 "serviceDef id mismatch";
  - policy, service-def and enabling/plugin-config service changes bump the service's
    policyVersion; role changes bump the role version (and the policyVersion of services whose
    policies name the role); principals created by a request bump the user store version;
  - a download for an unknown service is 404 whose body Ranger's plugin ignores; for a disabled
    one, 400.

Not implemented, knowingly: the secure (Kerberos) download paths; the tag service Ranger links to
each new service by default (ranger.tagservice.auto.create/link); policy deltas (always full
policies); security zones; grant/revoke; the xusers, plugin-info, import/export and search-filter
APIs other than those above (a filter or flag it does not know is a 400 saying so, never ignored);
password encryption (a "password" config is kept as given and shown as "*****"); the policy checks
on type changes, zones, validity schedules, masks and row filters, resource-value regexes and
multi-hierarchy defs (the default policy, too, assumes one hierarchy); resourceSignature for
policies with validity schedules (approximated). Ids count from 1 (Ranger's service defs follow
its embedded ones).

Usage: python3 ranger_admin.py [--host H] [--port 6080] [--admin-user admin]
           --admin-password PW (or $RANGER_ADMIN_PASSWORD) [--state FILE] [--users FILE]
It prints "ranger_admin: listening on HOST:PORT" once it accepts connections (--port 0 picks one).
"""

from __future__ import annotations

import argparse
import base64
import binascii
import copy
import hashlib
import hmac
import json
import os
import re
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

Json = dict[str, Any]

AUDIT_DEFAULT = "audit-default"  # RangerPolicyEngine.AUDIT_DEFAULT
HIDDEN_PASSWORD = "*****"  # noqa: S105 - ServiceDBStore.HIDDEN_PASSWORD_STR, the mask
PLUGIN_CONFIG_PREFIX = "ranger.plugin."  # ServiceDBStore.RANGER_PLUGIN_CONFIG_PREFIX
SCRIPT_EVALUATOR = "org.apache.ranger.plugin.conditionevaluator.RangerScriptConditionEvaluator"
ACCESS_TYPE_MARKERS = ("_CREATE", "_READ", "_UPDATE", "_DELETE", "_MANAGE", "_ALL")
CATEGORY_MARKERS = {category: f"_{category}" for category in ("CREATE", "READ", "UPDATE", "DELETE", "MANAGE")}
BUILTIN_USERS = ("admin", "rangerusersync", "keyadmin", "rangertagsync", "{USER}", "{OWNER}")
BUILTIN_GROUPS = ("public",)
SERVICE_NAME = re.compile(r"[a-zA-Z0-9_-][a-zA-Z0-9_-]{0,254}")  # RangerServiceValidator
JAVA = {
    "policy": "org.apache.ranger.plugin.model.RangerPolicy",
    "servicedef": "org.apache.ranger.plugin.model.RangerServiceDef",
    "role": "org.apache.ranger.plugin.model.RangerRole",
}


# --- errors: the bodies RESTErrorUtil and the exception mappers write --------------------------


class RangerError(Exception):
    """An error answer: HTTP status and the JSON body Ranger sends with it."""

    def __init__(self, status: int, body: Json) -> None:
        super().__init__(f"HTTP {status}: {body}")
        self.status = status
        self.body = body


MESSAGES = {  # MessageEnums: name -> (rbKey, message)
    "DATA_NOT_FOUND": ("xa.error.data_not_found", "Data not found"),
    "INVALID_INPUT_DATA": ("xa.validation.invalid_input_data", "Invalid input data"),
    "ERROR_CREATING_OBJECT": ("xa.error.create_object", "Error creating object"),
    "OPER_NOT_ALLOWED_FOR_STATE": (
        "xa.error.oper_not_allowed_for_state",
        "Operation not allowed in current state",
    ),
}


def vx_message(name: str, object_id: int | None = None) -> Json:
    rb_key, message = MESSAGES[name]
    body: Json = {"name": name, "rbKey": rb_key, "message": message}
    if object_id is not None:
        body["objectId"] = object_id
    return body


def rest_error(message: str, enum: str | None = None, object_id: int | None = None) -> RangerError:
    """RESTErrorUtil.createRESTException(message[, MessageEnums]): 400, statusCode 1 (STATUS_ERROR)."""
    body: Json = {"statusCode": 1, "msgDesc": message}
    if enum:
        body["messageList"] = [vx_message(enum, object_id)]
    return RangerError(400, body)


def status_error(status: int, message: str) -> RangerError:
    """RESTErrorUtil.createRESTException(int, String, boolean): statusCode is the HTTP status."""
    return RangerError(status, {"statusCode": status, "msgDesc": message})


def not_found() -> RangerError:
    return status_error(404, "Not found")


def data_not_found(kind: str, object_id: int) -> RangerError:
    """RangerBaseModelService.read(id) of a missing row."""
    return rest_error(f"{JAVA[kind]} :Data Not Found for given Id", "DATA_NOT_FOUND", object_id)


def mapping_error(message: str, parse: bool = False) -> RangerError:
    """RangerJson{Parser,Mapping}ExceptionMapper: Hadoop's HttpExceptionUtils body, HTTP 400."""
    jackson = "com.fasterxml.jackson"
    cls = (
        f"{jackson}.core.JsonParseException" if parse else f"{jackson}.databind.exc.MismatchedInputException"
    )
    remote = {"message": message, "exception": cls.rsplit(".", 1)[1], "javaClassName": cls}
    return RangerError(400, {"RemoteException": remote})


def vxresponse_text(status_code: int, message: str, enum: str | None = None) -> str:
    """VXResponse.toString() (with VXMessage's; hash codes 0): the download endpoints put it, not
    the message, in msgDesc."""
    messages = "null"
    if enum:
        rb_key, text = MESSAGES[enum]
        messages = f"[VXMessage={{org.apache.ranger.view.VXMessage@0name={{{enum}}} rbKey={{{rb_key}}} "
        messages += f"message={{{text}}} objectId={{null}} fieldName={{null}} }}]"
    prefix = f"VXResponse={{org.apache.ranger.view.VXResponse@0statusCode={{{status_code}}} "
    return prefix + f"msgDesc={{{message}}} messageList={{{messages}}} }}"


@dataclass(frozen=True)
class Failure:
    """ValidationFailureDetails; its str() is Ranger's."""

    field_name: str
    reason: str
    kind: str = "missing"  # "missing" | "semantically incorrect" | "internal error"
    code: int = 0
    subfield: str | None = None

    def __str__(self) -> str:
        return (
            f" Validation failure: error code[{self.code}], reason[{self.reason}], "
            f"field[{self.field_name}], subfield[{java_str(self.subfield)}], type[{self.kind}]"
        )


def validation_error(failures: list[Failure]) -> RangerError:
    """RangerValidator.serializeFailures, thrown as a plain Exception: 400 STATUS_ERROR."""
    return rest_error("".join(f"({i}){failure} " for i, failure in enumerate(failures)))


def missing(field_name: str, reason: str, code: int = 0, subfield: str | None = None) -> Failure:
    return Failure(field_name, reason, "missing", code, subfield)


def incorrect(field_name: str, reason: str, code: int = 0, subfield: str | None = None) -> Failure:
    return Failure(field_name, reason, "semantically incorrect", code, subfield)


def java_str(value: Any) -> str:
    return "null" if value is None else str(value)


def java_list(items: Iterable[Any]) -> str:
    return "[" + ", ".join(java_str(item) for item in items) + "]"


# --- model shapes: Ranger's classes as Jackson reads and writes them -----------------------------
# A field is (name, kind, default): kind "str" | "long" | "bool" | "strmap" (Map<String,String>)
# | "objmap" | "strlist" | "any", or ("obj" | "list" | "map" | "listmap", SHAPE). Defaults are the
# setters' (null -> FALSE, ...); lists and maps are never null. Writing drops what NON_EMPTY drops.

Shape = tuple[tuple[str, Any, Any], ...]

# fmt: off
BASE: Shape = (
    ("id", "long", None), ("guid", "str", None), ("isEnabled", "bool", True),
    ("createdBy", "str", None), ("updatedBy", "str", None), ("createTime", "long", None),
    ("updateTime", "long", None), ("version", "long", None),
)
CONFIG_DEF: Shape = (
    ("itemId", "long", None), ("name", "str", None), ("type", "str", None), ("subType", "str", None),
    ("mandatory", "bool", False), ("defaultValue", "str", None), ("validationRegEx", "str", None),
    ("validationMessage", "str", None), ("uiHint", "str", None), ("label", "str", None),
    ("description", "str", None), ("rbKeyLabel", "str", None), ("rbKeyDescription", "str", None),
    ("rbKeyValidationMessage", "str", None),
)
RESOURCE_DEF: Shape = (
    ("itemId", "long", None), ("name", "str", None), ("type", "str", None), ("level", "long", 1),
    ("parent", "str", None), ("mandatory", "bool", False), ("lookupSupported", "bool", False),
    ("recursiveSupported", "bool", False), ("excludesSupported", "bool", False),
    ("matcher", "str", None), ("matcherOptions", "strmap", None), ("validationRegEx", "str", None),
    ("validationMessage", "str", None), ("uiHint", "str", None), ("label", "str", None),
    ("description", "str", None), ("rbKeyLabel", "str", None), ("rbKeyDescription", "str", None),
    ("rbKeyValidationMessage", "str", None), ("accessTypeRestrictions", "strlist", None),
    ("isValidLeaf", "bool", None),
)
ACCESS_TYPE_DEF: Shape = (
    ("itemId", "long", None), ("name", "str", None), ("label", "str", None),
    ("rbKeyLabel", "str", None), ("impliedGrants", "strlist", None), ("category", "str", None),
)
CONDITION_DEF: Shape = (
    ("itemId", "long", None), ("name", "str", None), ("evaluator", "str", None),
    ("evaluatorOptions", "strmap", None), ("validationRegEx", "str", None),
    ("validationMessage", "str", None), ("uiHint", "str", None), ("label", "str", None),
    ("description", "str", None), ("rbKeyLabel", "str", None), ("rbKeyDescription", "str", None),
    ("rbKeyValidationMessage", "str", None),
)
ENRICHER_DEF: Shape = (
    ("itemId", "long", None), ("name", "str", None), ("enricher", "str", None),
    ("enricherOptions", "strmap", None),
)
ENUM_ELEMENT_DEF: Shape = (
    ("itemId", "long", None), ("name", "str", None), ("label", "str", None),
    ("rbKeyLabel", "str", None),
)
ENUM_DEF: Shape = (
    ("itemId", "long", None), ("name", "str", None), ("elements", ("list", ENUM_ELEMENT_DEF), None),
    ("defaultIndex", "long", 0),
)
MASK_TYPE_DEF: Shape = (
    ("itemId", "long", None), ("name", "str", None), ("label", "str", None),
    ("description", "str", None), ("transformer", "str", None), ("dataMaskOptions", "strmap", None),
    ("rbKeyLabel", "str", None), ("rbKeyDescription", "str", None),
)
DATA_MASK_DEF: Shape = (
    ("maskTypes", ("list", MASK_TYPE_DEF), None), ("accessTypes", ("list", ACCESS_TYPE_DEF), None),
    ("resources", ("list", RESOURCE_DEF), None),
)
ROW_FILTER_DEF: Shape = (
    ("accessTypes", ("list", ACCESS_TYPE_DEF), None), ("resources", ("list", RESOURCE_DEF), None),
)
SERVICE_DEF: Shape = (
    *BASE, ("name", "str", None), ("displayName", "str", None), ("implClass", "str", None),
    ("label", "str", None), ("description", "str", None), ("rbKeyLabel", "str", None),
    ("rbKeyDescription", "str", None), ("options", "strmap", None),
    ("configs", ("list", CONFIG_DEF), None), ("resources", ("list", RESOURCE_DEF), None),
    ("accessTypes", ("list", ACCESS_TYPE_DEF), None),
    ("policyConditions", ("list", CONDITION_DEF), None),
    ("contextEnrichers", ("list", ENRICHER_DEF), None), ("enums", ("list", ENUM_DEF), None),
    ("dataMaskDef", ("obj", DATA_MASK_DEF), None), ("rowFilterDef", ("obj", ROW_FILTER_DEF), None),
    ("markerAccessTypes", ("list", ACCESS_TYPE_DEF), None),
)
SERVICE: Shape = (
    *BASE, ("type", "str", None), ("name", "str", None), ("displayName", "str", None),
    ("description", "str", None), ("tagService", "str", None), ("configs", "strmap", None),
    ("policyVersion", "long", None), ("policyUpdateTime", "long", None),
    ("tagVersion", "long", None), ("tagUpdateTime", "long", None),
)
POLICY_RESOURCE: Shape = (
    ("values", "strlist", None), ("isExcludes", "bool", False), ("isRecursive", "bool", False),
)
ITEM_ACCESS: Shape = (("type", "str", ""), ("isAllowed", "bool", True))
ITEM_CONDITION: Shape = (("type", "str", None), ("values", "strlist", None))
POLICY_ITEM: Shape = (
    ("accesses", ("list", ITEM_ACCESS), None), ("users", "strlist", None),
    ("groups", "strlist", None), ("roles", "strlist", None),
    ("conditions", ("list", ITEM_CONDITION), None), ("delegateAdmin", "bool", False),
)
MASK_INFO: Shape = (
    ("dataMaskType", "str", None), ("conditionExpr", "str", None), ("valueExpr", "str", None),
)
MASK_ITEM: Shape = (*POLICY_ITEM, ("dataMaskInfo", ("obj", MASK_INFO), None))
ROW_FILTER_INFO: Shape = (("filterExpr", "str", None),)
ROW_FILTER_ITEM: Shape = (*POLICY_ITEM, ("rowFilterInfo", ("obj", ROW_FILTER_INFO), None))
POLICY: Shape = (
    *BASE, ("service", "str", None), ("name", "str", None), ("policyType", "long", None),
    ("policyPriority", "long", 0), ("description", "str", None), ("resourceSignature", "str", None),
    ("isAuditEnabled", "bool", True), ("resources", ("map", POLICY_RESOURCE), None),
    ("additionalResources", ("listmap", POLICY_RESOURCE), None),
    ("conditions", ("list", ITEM_CONDITION), None), ("policyItems", ("list", POLICY_ITEM), None),
    ("denyPolicyItems", ("list", POLICY_ITEM), None),
    ("allowExceptions", ("list", POLICY_ITEM), None),
    ("denyExceptions", ("list", POLICY_ITEM), None),
    ("dataMaskPolicyItems", ("list", MASK_ITEM), None),
    ("rowFilterPolicyItems", ("list", ROW_FILTER_ITEM), None), ("serviceType", "str", None),
    ("options", "objmap", None), ("validitySchedules", "any", []),
    ("policyLabels", "strlist", None), ("zoneName", "str", None), ("isDenyAllElse", "bool", False),
)
ROLE_MEMBER: Shape = (("name", "str", None), ("isAdmin", "bool", False))
ROLE: Shape = (
    *BASE, ("name", "str", None), ("description", "str", None), ("options", "objmap", None),
    ("users", ("list", ROLE_MEMBER), None), ("groups", ("list", ROLE_MEMBER), None),
    ("roles", ("list", ROLE_MEMBER), None), ("createdByUser", "str", None),
)
# fmt: on


def coerce(kind: Any, value: Any, where: str) -> Any:
    """One JSON value as Jackson binds it to the field's Java type (scalars coerce, as by default)."""
    if value is None:
        return None
    if isinstance(kind, tuple):
        return coerce_nested(kind[0], kind[1], value, where)
    if kind == "any":
        return value
    if kind == "str":
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, str | int | float):
            return str(value)
    elif kind == "long":
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value):
            return int(value)
    elif kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        if isinstance(value, int):
            return value != 0
    elif kind in ("strmap", "objmap") and isinstance(value, dict):
        if kind == "objmap":
            return dict(value)
        return {str(k): coerce("str", v, f"{where}[{k}]") for k, v in value.items()}
    elif kind == "strlist" and isinstance(value, list):
        return [coerce("str", v, f"{where}[]") for v in value]
    raise mapping_error(f"Cannot deserialize value of type {kind} from {json.dumps(value)} at {where}")


def coerce_nested(container: str, shape: Shape, value: Any, where: str) -> Any:
    if container == "obj":
        return read_model(value, shape, where)
    if container == "list" and isinstance(value, list):
        return [read_model(v, shape, f"{where}[]") for v in value]
    if container == "map" and isinstance(value, dict):
        return {str(k): read_model(v, shape, f"{where}[{k}]") for k, v in value.items()}
    if container == "listmap" and isinstance(value, list):
        return [coerce_nested("map", shape, v, f"{where}[]") for v in value]
    raise mapping_error(f"Cannot deserialize {container} from {json.dumps(value)} at {where}")


def read_model(value: Any, shape: Shape, where: str = "$") -> Json:
    """A request object as the Java model holds it after Jackson: unknown fields dropped
    (@JsonIgnoreProperties(ignoreUnknown=true)), setter defaults applied, containers never null."""
    if not isinstance(value, dict):
        raise mapping_error(f"Cannot deserialize object from {json.dumps(value)} at {where}")
    model: Json = {}
    for name, kind, default in shape:
        got = coerce(kind, value.get(name), f"{where}.{name}")
        if got is None:
            got = copy.deepcopy(default)
        model[name] = empty_value(kind, f"{where}.{name}") if got is None else got
    return model


def empty_value(kind: Any, where: str) -> Any:
    """What a never-null field holds when the request has none: {}, [] or a default object."""
    container = kind[0] if isinstance(kind, tuple) else kind
    if container in ("strmap", "objmap", "map"):
        return {}
    if container in ("strlist", "list", "listmap"):
        return []
    return read_model({}, kind[1], where) if container == "obj" else None


def write_model(model: Json, shape: Shape) -> Json:
    """The JSON Jackson writes with @JsonInclude(NON_EMPTY): no nulls, "", [] or {} (objects stay)."""
    out: Json = {}
    for name, kind, _shape in shape:
        value = model.get(name)
        if value is None or (value in ("", [], {}) and not (isinstance(kind, tuple) and kind[0] == "obj")):
            continue
        if isinstance(kind, tuple):
            out[name] = write_nested(kind[0], kind[1], value)
        else:
            out[name] = copy.deepcopy(value)
    return out


def write_nested(container: str, shape: Shape, value: Any) -> Any:
    if container == "obj":
        return write_model(value, shape)
    if container == "list":
        return [write_model(v, shape) for v in value]
    if container == "map":
        return {k: write_model(v, shape) for k, v in value.items()}
    return [write_nested("map", shape, v) for v in value]


# --- service defs ------------------------------------------------------------------------------


def validate_service_def(sdef: Json, others: list[Json], updating: bool) -> list[Failure]:
    """RangerServiceDefValidator.isValid, the checks on name, access types and resources."""
    failures: list[Failure] = []
    name = sdef["name"]
    if not (name or "").strip():
        failures.append(missing("name", f"Service def name[{name}] was null/empty/blank", 2006))
    elif any(o["name"] == name and (not updating or o["id"] != sdef["id"]) for o in others):
        failures.append(incorrect("name", f"service def with the name[{name}] already exists", 2007))
    failures += unique_items(sdef["accessTypes"], "access type", "access types")
    known = {a["name"] for a in sdef["accessTypes"]}
    for access in sdef["accessTypes"]:
        unknown = [g for g in access["impliedGrants"] if g not in known]
        if unknown:
            grants, bad = java_list(access["impliedGrants"]), java_list(unknown)
            reason = f"implied grant[{grants}] contains an unknown access types[{bad}]"
            failures.append(incorrect("implied grants", reason, 2009))
    failures += unique_items(sdef["resources"], "resource", "resources")
    names = {r["name"] for r in sdef["resources"]}
    if not failures and any(r["parent"] and r["parent"] not in names for r in sdef["resources"]):
        reason = (
            "Resource graph implied by various resources, e.g. parent value is invalid.  "
            "Valid graph must forest (union of disjoint trees)."
        )
        failures.append(incorrect("resource graph", reason, 2016))
    return failures


def unique_items(items: list[Json], what: str, plural: str) -> list[Failure]:
    """The isUnique checks on a service def list: non-empty, names and itemIds present and unique."""
    if not items:
        return [missing(plural, f"Internal error: missing field[{plural}]", 2002)]
    failures: list[Failure] = []
    seen: dict[str, set[Any]] = {"name": set(), "itemId": set()}
    for item in items:
        for key in ("name", "itemId"):
            value, label = item[key], f"{what} {key}"
            if value is None or value == "":
                failures.append(
                    missing(label, f"{label}[{'null' if value is None else value}] is null/empty")
                )
            elif value in seen[key]:
                reason = f"duplicate {label}[{value}] in {plural}"
                failures.append(incorrect(label, reason, subfield=str(value)))
            seen[key].add(value)
    return failures


def store_service_def(sdef: Json) -> Json:
    """What ServiceDBStore.createServiceDef keeps: a parent "" is no parent; leaves are marked."""
    stored = copy.deepcopy(sdef)
    stored["displayName"] = (stored["displayName"] or "").strip() or stored["name"]
    children: set[str] = set()
    for resource in stored["resources"]:
        resource["parent"] = resource["parent"] or None
        if resource["parent"]:
            children.add(resource["parent"])
    for resource in stored["resources"]:  # RangerServiceDefHelper.patchServiceDefWithDefaultValues
        if resource["isValidLeaf"] is not True:
            resource["isValidLeaf"] = resource["name"] not in children
    stored["markerAccessTypes"] = []
    return stored


def service_def_view(stored: Json) -> Json:
    """RangerServiceDefServiceBase.populateViewBean: adds the marker access types and, unless the
    def's option enableImplicitConditionExpression is false, the "_expression" condition."""
    view = copy.deepcopy(stored)
    view["markerAccessTypes"] = marker_access_types(view["accessTypes"])
    conditions = view["policyConditions"]
    enabled = str(view["options"].get("enableImplicitConditionExpression", "true")).lower() != "false"
    if enabled and not any((c["evaluator"] or "").lower() == SCRIPT_EVALUATOR.lower() for c in conditions):
        item_id = max([0, *(c["itemId"] or 0 for c in conditions)]) + 1
        conditions.append(
            read_model(
                {
                    "itemId": item_id,
                    "name": "_expression",
                    "evaluator": SCRIPT_EVALUATOR,
                    "evaluatorOptions": {"engineName": "JavaScript", "ui.isMultiline": "true"},
                    "uiHint": '{ "isMultiline":true }',
                    "label": "Enter boolean expression",
                    "description": "Boolean expression",
                },
                CONDITION_DEF,
            )
        )
    return view


def marker_access_types(access_types: list[Json]) -> list[Json]:
    """ServiceDefUtil.getMarkerAccessTypes: _ALL implies every access type, _READ ... by category."""
    grants: dict[str, set[str]] = {marker: set() for marker in ACCESS_TYPE_MARKERS}
    for access in access_types:
        if not access["name"] or access["name"] in ACCESS_TYPE_MARKERS:
            continue
        implied = {access["name"], *access["impliedGrants"]}
        grants["_ALL"] |= implied
        if access["category"] in CATEGORY_MARKERS:
            grants[CATEGORY_MARKERS[access["category"]]] |= implied
    next_id = max([-1, *(a["itemId"] for a in access_types if a["itemId"] is not None)])
    markers = []
    for offset, marker in enumerate(ACCESS_TYPE_MARKERS, start=1):
        markers.append(
            read_model(
                {
                    "itemId": next_id + offset,
                    "name": marker,
                    "label": marker,
                    "impliedGrants": sorted(grants[marker]),
                },
                ACCESS_TYPE_DEF,
            )
        )
    return markers


# --- policies ----------------------------------------------------------------------------------


def resource_signature(policy: Json) -> str:
    """RangerPolicyResourceSignature(policy).getSignature(): SHA-256 of Ranger's string form."""
    text = ""
    if policy["isEnabled"] or policy["guid"]:
        resource = signature_of(policy["resources"])
        if policy["additionalResources"]:
            resource = java_list(sorted([resource, *map(signature_of, policy["additionalResources"])]))
        if policy["validitySchedules"]:  # Java's RangerValiditySchedule.toString: approximated
            resource += json.dumps(policy["validitySchedules"], sort_keys=True)
        if policy["policyPriority"]:
            resource += str(policy["policyPriority"])
        resource += policy["zoneName"] or ""
        conditions = {c["type"]: sorted(c["values"]) for c in policy["conditions"] if c["type"] is not None}
        if conditions:
            pairs = ", ".join(f"{t}={java_list(v)}" for t, v in sorted(conditions.items()))
            resource += f"{{RangerPolicyConditions={{{pairs}}}}}"
        if not policy["isEnabled"]:
            resource += str(policy["guid"])
        text = f"{{version=1,type={policy['policyType'] or 0},resource={resource}}}"
    return hashlib.sha256(text.encode()).hexdigest()


def signature_of(resources: dict[str, Json]) -> str:
    """toSignatureString: a TreeMap of name -> {values=[sorted],excludes=..,recursive=..}."""
    parts = []
    for name in sorted(resources):
        res = resources[name]
        excludes, recursive = (str(bool(res[flag])).lower() for flag in ("isExcludes", "isRecursive"))
        values = java_list(sorted(res["values"]))
        parts.append(f"{name}={{values={values},excludes={excludes},recursive={recursive}}}")
    return "{" + ", ".join(parts) + "}"


ITEM_LISTS = (
    "policyItems", "denyPolicyItems", "allowExceptions", "denyExceptions", "dataMaskPolicyItems",
    "rowFilterPolicyItems",
)  # fmt: skip


def policy_items(policy: Json) -> list[Json]:
    return [item for key in ITEM_LISTS for item in policy[key]]


def validate_policy(policy: Json, state: State, existing: Json | None) -> list[Failure]:
    """RangerPolicyValidator.isValid for CREATE (existing None) and UPDATE: the checks a TARN
    policy can trip (service, name, items, accesses, resources, duplicate resources)."""
    failures: list[Failure] = []
    if policy["policyPriority"] not in (0, 1):
        failures.append(incorrect("policyPriority", "Invalid priority value", 3030))
    service_name = policy["service"] or ""
    service = state.service_by_name(service_name)
    if not service_name.strip():
        failures.append(missing("service name", "Internal error: missing field[service name]", 3002))
    elif service is None:
        failures.append(incorrect("service name", f"no service found with name[{service_name}]", 3007))
    same = state.policy_by_name(service_name, policy["name"] or "", policy["zoneName"])
    if not (policy["name"] or "").strip():
        failures.append(missing("name", "Internal error: missing field[name]", 3002))
    elif same is not None and (existing is None or same["id"] != policy["id"]):
        reason = (
            f"Another policy already exists for this name: policy-id=[{same['id']}], service=[{service_name}]"
        )
        failures.append(incorrect("policy name" if existing is None else "id/name", reason, 3006))
    if existing is not None and existing["service"].lower() != service_name.lower():
        moved = f"from service={existing['service']} to service={service_name}"
        failures.append(
            incorrect(
                "service name", f"attempt to move policy id={policy['id']} {moved} is not allowed", 3027
            )
        )
    sdef = state.service_def_by_name(service["type"]) if service else None
    if service is None or sdef is None:
        return failures
    if not policy_items(policy) and not policy["isAuditEnabled"]:
        reason = "at least one policy item must be specified if audit isn't enabled"
        failures.append(missing("policy items", reason, 3008))
    for item in policy_items(policy):
        failures += validate_policy_item(item, sdef)
    return failures + validate_policy_resources(policy, state, sdef)


def validate_policy_item(item: Json, sdef: Json) -> list[Failure]:
    """RangerPolicyValidator.isValidPolicyItem / isValidPolicyItemAccess."""
    failures: list[Failure] = []
    valid = sorted([a["name"] for a in sdef["accessTypes"]] + list(ACCESS_TYPE_MARKERS))  # Java: a HashSet
    if not item["accesses"] and not item["delegateAdmin"]:
        reason = "Internal error: missing field[policy item accesses]"
        failures.append(missing("policy item accesses", reason, 3002))
    for access in item["accesses"]:
        if not access["type"].strip():
            reason = "Internal error: missing field[policy item access type]"
            failures.append(missing("policy item access type", reason, 3002))
        elif access["type"] not in valid:
            reason = f"Invalid access type: access type=[{access['type']}], "
            reason += f"valid access types=[{java_list(valid)}]"
            failures.append(incorrect("policy item access type", reason, 3022))
        if access["isAllowed"] is False:
            reason = "Currently deny access types are not supported. Access type is set to deny."
            failures.append(incorrect("policy item access type allowed", reason, 3023))
    if not (item["users"] or item["groups"] or item["roles"]):
        reason = "All of users,  user-groups and roles collections on the policy item were null/empty"
        failures.append(missing("policy item users/user-groups/roles", reason, 3020))
    return failures


def validate_policy_resources(policy: Json, state: State, sdef: Json) -> list[Failure]:
    """isPolicyResourceUnique, isValidResourceNames (single hierarchy), isValidResourceValues and
    isValidResourceFlags."""
    failures: list[Failure] = []
    signature = resource_signature(policy)
    for other in state.policies.values():
        if (
            other["service"] == policy["service"] and other["isEnabled"] and other["id"] != policy["id"]
            and other["resourceSignature"] == signature
        ):  # fmt: skip
            reason = "Another policy already exists for matching resource: "
            reason += f"policy-name=[{other['name']}], service=[{policy['service']}]"
            failures.append(incorrect("resources", reason, 3010))
            break
    defs = {r["name"].lower(): r for r in sdef["resources"]}
    names = set(policy["resources"])
    prefix = f"Invalid resources specified. {sdef['name']} policy"
    if names - set(defs):
        allowed = java_list(f"[{r['name']}]" for r in sdef["resources"])
        reason = f"{prefix} can specify values for the following resources: {allowed}"
        failures.append(incorrect("policy resources", reason, 3024, "incompatible"))
    elif not policy["policyType"] and any(r["mandatory"] and n not in names for n, r in defs.items()):
        mandatory = java_list(f"[{r['name']}]" for r in sdef["resources"] if r["mandatory"])
        reason = f"{prefix} must specify values for the following resources: {mandatory}"
        failures.append(incorrect("policy resources", reason, 3025, "missing mandatory"))
    for name, resource in policy["resources"].items():
        failures += validate_resource_values(name, resource, defs.get(name))
    return failures


def validate_resource_values(name: str, resource: Json, rdef: Json | None) -> list[Failure]:
    failures: list[Failure] = []
    resource["values"] = [v for v in resource["values"] if v.strip()]  # the validator drops blanks
    duplicates = [v for i, v in enumerate(resource["values"]) if v in resource["values"][:i]]
    if not resource["values"]:
        reason = "Resource list was empty or contains null. At least one resource must be specified"
        failures.append(missing("resource-values", reason, 3026, name))
    elif duplicates:
        reason = f"Values for the resource={name} contained a duplicate value={duplicates[0]}. "
        reason += "Ensure all values for a resource are unique"
        failures.append(incorrect("resource-values", reason, 3056, name))
    if rdef and resource["isExcludes"] and not rdef["excludesSupported"]:
        reason = f"Excludes option not supported: resource-name=[{name}]"
        failures.append(incorrect("isExcludes", reason, 3015, name))
    if rdef and resource["isRecursive"] and not rdef["recursiveSupported"]:
        reason = f"Recursive option not supported: resource-name=[{name}]."
        failures.append(incorrect("isRecursive", reason, 3017, name))
    return failures


def missing_principals(policy_or_role: Json, state: State, kinds: Iterable[str]) -> list[tuple[str, str]]:
    """(kind, name) of each user/group/role a policy or role names that Ranger does not know."""
    known = {"users": state.users, "groups": state.groups, "roles": {r["name"] for r in state.roles.values()}}
    absent: list[tuple[str, str]] = []
    for kind in kinds:
        for name in principal_names(policy_or_role, kind):
            if name.strip() and name not in known[kind] and (kind, name) not in absent:
                absent.append((kind, name))
    return absent


def principal_names(obj: Json, kind: str) -> list[str]:
    if "policyItems" in obj:
        return [name for item in policy_items(obj) for name in item[kind]]
    return [member["name"] for member in obj[kind] if member["name"]]


def default_policy(service: Json, sdef: Json) -> Json | None:
    """RangerBaseService.getDefaultRangerPolicies for a single-hierarchy def: "all - <resources>",
    "*" on the mandatory resources, every access type for the service's configured principals;
    none when nobody is configured (ServiceDBStore.validatePolicyItems drops it)."""
    configs, key = service["configs"], "create.default.policy.per.hierarchy"
    if str(configs.get(key, sdef["options"].get(key, "true"))).lower() != "true":
        return None
    users = sorted(
        {configs.get("username", "").strip(), *configs.get("default.policy.users", "").split(",")} - {""}
    )
    groups = sorted(set(configs.get("default.policy.groups", "").split(",")) - {""})
    hierarchy = [r for r in sdef["resources"] if r["mandatory"]] or sdef["resources"][:1]
    if not (users or groups) or not hierarchy:
        return None
    name = "all - " + ", ".join(r["name"] for r in hierarchy)
    return read_model(
        {
            "isEnabled": True,
            "name": name,
            "service": service["name"],
            "description": f"Policy for {name}",
            "isAuditEnabled": True,
            "resources": {
                r["name"]: {"values": ["*"], "isExcludes": False, "isRecursive": r["recursiveSupported"]}
                for r in hierarchy
            },
            "policyItems": [
                {
                    "users": users,
                    "groups": groups,
                    "delegateAdmin": True,
                    "accesses": [{"type": a["name"], "isAllowed": True} for a in sdef["accessTypes"]],
                }
            ],
        },
        POLICY,
    )


# --- the state and the decisions on it ---------------------------------------------------------


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class State:
    """Everything Ranger keeps in its database, as plain JSON so it persists as it is."""

    service_defs: dict[int, Json] = field(default_factory=dict)
    services: dict[int, Json] = field(default_factory=dict)
    policies: dict[int, Json] = field(default_factory=dict)
    roles: dict[int, Json] = field(default_factory=dict)
    users: dict[str, Json] = field(default_factory=dict)  # name -> {"groups", "attributes", "internal"}
    groups: dict[str, Json] = field(default_factory=dict)  # name -> {"attributes", "internal"}
    next_ids: dict[str, int] = field(
        default_factory=lambda: {"servicedef": 1, "service": 1, "policy": 1, "role": 1}
    )
    role_version: int = 1  # x_ranger_global_state 'RangerRole', 1 on a new install
    role_update_time: int = field(default_factory=now_ms)
    userstore_version: int = 1  # x_ranger_global_state 'RangerUserStore'
    userstore_update_time: int = field(default_factory=now_ms)

    def __post_init__(self) -> None:
        self.ensure_builtins()

    def ensure_builtins(self) -> None:
        """The principals a new Ranger install has (its SQL scripts, createGenericUsers)."""
        for user in BUILTIN_USERS:
            self.users.setdefault(user, {"groups": [], "attributes": {}, "internal": True})
        for group in BUILTIN_GROUPS:
            self.groups.setdefault(group, {"attributes": {}, "internal": True})

    def new_id(self, kind: str) -> int:
        self.next_ids[kind] += 1
        return self.next_ids[kind] - 1

    def service_def_by_name(self, name: str) -> Json | None:
        return next((d for d in self.service_defs.values() if d["name"] == name), None)

    def service_by_name(self, name: str) -> Json | None:
        return next((s for s in self.services.values() if s["name"] == name), None)

    def policy_by_name(self, service: str, name: str, zone: str | None = None) -> Json | None:
        return next(
            (
                p
                for p in self.policies.values()
                if p["service"] == service and p["name"] == name and (p["zoneName"] or None) == (zone or None)
            ),
            None,
        )

    def role_by_name(self, name: str) -> Json | None:
        return next((r for r in self.roles.values() if r["name"] == name), None)

    def bump_policy_version(self, service: Json) -> None:
        """ServiceDBStore.persistVersionChange(POLICY_VERSION)."""
        service["policyVersion"] = (service["policyVersion"] or 0) + 1
        service["policyUpdateTime"] = now_ms()

    def bump_role_version(self) -> None:
        self.role_version += 1
        self.role_update_time = now_ms()

    def bump_userstore_version(self) -> None:
        self.userstore_version += 1
        self.userstore_update_time = now_ms()

    def add_principals(self, absent: list[tuple[str, str]], by: str) -> None:
        """PolicyPrincipalAssociator / RoleRefUpdater with createPrincipalsIfAbsent: external ones."""
        for kind, name in absent:
            if kind == "users":
                self.users[name] = {"groups": [], "attributes": {}, "internal": False}
            elif kind == "groups":
                self.groups[name] = {"attributes": {}, "internal": False}
            else:
                self.create_role(read_model({"name": name}, ROLE), by)
        if any(kind != "roles" for kind, _name in absent):
            self.bump_userstore_version()

    def create_role(self, role: Json, by: str) -> Json:
        stamp = now_ms()
        role.update(
            id=self.new_id("role"),
            guid=role["guid"] or str(uuid.uuid4()),
            version=1,
            createdBy=screen_name(by),
            updatedBy=screen_name(by),
            createTime=stamp,
            updateTime=stamp,
        )
        self.roles[role["id"]] = role
        self.bump_role_version()
        return role

    def to_json(self) -> Json:
        return {
            "service_defs": list(self.service_defs.values()),
            "services": list(self.services.values()),
            "policies": list(self.policies.values()),
            "roles": list(self.roles.values()),
            "users": self.users,
            "groups": self.groups,
            "next_ids": self.next_ids,
            "role_version": self.role_version,
            "role_update_time": self.role_update_time,
            "userstore_version": self.userstore_version,
            "userstore_update_time": self.userstore_update_time,
        }

    @classmethod
    def from_json(cls, data: Json) -> State:
        by_id = {
            key: {obj["id"]: obj for obj in data[key]}
            for key in ("service_defs", "services", "policies", "roles")
        }
        return cls(
            users=data["users"],
            groups=data["groups"],
            next_ids=data["next_ids"],
            role_version=data["role_version"],
            role_update_time=data["role_update_time"],
            userstore_version=data["userstore_version"],
            userstore_update_time=data["userstore_update_time"],
            **by_id,
        )


def screen_name(login: str) -> str:
    """getUserScreenName: the admin portal user's public screen name is "Admin"."""
    return "Admin" if login == "admin" else login


def user_store_entries(spec: Json) -> tuple[dict[str, Json], dict[str, Json]]:
    """Users and groups of a --users file, as the state keeps them (usersync's: external)."""
    users: dict[str, Json] = {}
    groups: dict[str, Json] = {}
    for name, info in (spec.get("groups") or {}).items():
        groups[name] = {"attributes": dict((info or {}).get("attributes") or {}), "internal": False}
    for name, info in (spec.get("users") or {}).items():
        info = info or {}
        member_of = [str(g) for g in info.get("groups") or []]
        users[name] = {
            "groups": member_of,
            "attributes": dict(info.get("attributes") or {}),
            "internal": False,
        }
        for group in member_of:
            groups.setdefault(group, {"attributes": {}, "internal": False})
    return users, groups


def service_view(service: Json) -> Json:
    """RangerServiceService.populateViewBean: a "password" config shows as *****."""
    view = write_model(service, SERVICE)
    configs = view.get("configs", {})
    for key in configs:
        if key.lower() == "password":
            configs[key] = HIDDEN_PASSWORD
    return view


def policy_view(policy: Json) -> Json:
    return write_model(policy, POLICY)


def role_view(role: Json) -> Json:
    return write_model(role, ROLE)


def service_policies(state: State, service: Json, last_known: int, supports_deltas: bool) -> Json | None:
    """ServiceDBStore.getServicePoliciesIfUpdated: None (304) when the version is the plugin's; else
    every policy (disabled ones dropped unless a delta-capable plugin asks from a known version)."""
    if last_known == service["policyVersion"]:
        return None
    sdef = state.service_def_by_name(service["type"])
    if sdef is None:
        raise status_error(400, f"service-def does not exist. id={service['type']}")
    keep_disabled = supports_deltas and last_known != -1
    policies = [
        p
        for _id, p in sorted(state.policies.items())
        if p["service"] == service["name"] and not p["zoneName"] and (p["isEnabled"] or keep_disabled)
    ]
    answer: Json = {
        "serviceName": service["name"],
        "serviceId": service["id"],
        "policyVersion": service["policyVersion"],
        "policyUpdateTime": service["policyUpdateTime"],
        "policies": [policy_view(p) for p in policies],
        "serviceDef": write_model(service_def_view(sdef), SERVICE_DEF),
        "auditMode": AUDIT_DEFAULT,
        "serviceConfig": {k: v for k, v in service["configs"].items() if k.startswith(PLUGIN_CONFIG_PREFIX)},
    }
    return {k: v for k, v in answer.items() if v not in (None, [], {})}  # ServicePolicies is NON_EMPTY


def user_store(state: State) -> Json:
    """RangerUserStore as XUserMgr builds it: every principal carries "_isInternal"."""

    def attrs(entry: Json) -> dict[str, str]:
        return {
            **{k: str(v) for k, v in entry["attributes"].items()},
            "_isInternal": str(entry["internal"]).lower(),
        }

    user_attrs = {name: attrs(u) for name, u in sorted(state.users.items())}
    group_attrs = {name: attrs(g) for name, g in sorted(state.groups.items())}
    answer: Json = {
        "userStoreVersion": state.userstore_version,
        "userStoreUpdateTime": state.userstore_update_time,
        "userAttrMapping": user_attrs,
        "groupAttrMapping": group_attrs,
        "userGroupMapping": {
            name: sorted(set(u["groups"])) for name, u in sorted(state.users.items()) if u["groups"]
        },
        "userCloudIdMapping": {a["cloud_id"]: n for n, a in user_attrs.items() if a.get("cloud_id")},
        "groupCloudIdMapping": {a["cloud_id"]: n for n, a in group_attrs.items() if a.get("cloud_id")},
    }
    return {k: v for k, v in answer.items() if v not in (None, {})}


# --- request handlers: (state, request) -> (status, body) --------------------------------------


@dataclass
class Request:
    method: str
    params: list[str]  # the path's {parameters}, URL-decoded
    query: dict[str, str]
    body: Any
    user: str  # the authenticated login; "" on the plugin endpoints


Answer = tuple[int, Any]
Handler = Callable[[State, Request], Answer]


def path_long(text: str) -> int:
    """A Long @PathParam / @QueryParam: Jersey answers 404 to one that does not parse."""
    if not re.fullmatch(r"[+-]?\d+", text.strip()):
        raise RangerError(404, {"statusCode": 404, "msgDesc": f"Not found: {text}"})
    return int(text)


def query_long(request: Request, name: str, default: int) -> int:
    return path_long(request.query[name]) if name in request.query else default


def get_service_def(state: State, req: Request) -> Answer:
    """ServiceREST.getServiceDef(id): a missing id is read()'s 400."""
    sdef = state.service_defs.get(path_long(req.params[0]))
    if sdef is None:
        raise data_not_found("servicedef", path_long(req.params[0]))
    return 200, write_model(service_def_view(sdef), SERVICE_DEF)


def get_service_def_by_name(state: State, req: Request) -> Answer:
    sdef = state.service_def_by_name(req.params[0])
    if sdef is None:
        raise not_found()
    return 200, write_model(service_def_view(sdef), SERVICE_DEF)


def create_service_def(state: State, req: Request) -> Answer:
    """ServiceREST.createServiceDef + ServiceDBStore.createServiceDef: the id is the store's."""
    sdef = read_model(req.body, SERVICE_DEF)
    sdef["displayName"] = (sdef["displayName"] or "").strip() or sdef["name"]
    failures = validate_service_def(sdef, list(state.service_defs.values()), updating=False)
    if failures:
        raise validation_error(failures)
    stored = store_service_def(sdef)
    stamp = now_ms()
    stored.update(
        id=state.new_id("servicedef"),
        guid=stored["guid"] or str(uuid.uuid4()),
        version=1,
        createdBy=screen_name(req.user),
        updatedBy=screen_name(req.user),
        createTime=stamp,
        updateTime=stamp,
    )
    state.service_defs[stored["id"]] = stored
    return 200, write_model(service_def_view(stored), SERVICE_DEF)


def update_service_def(state: State, req: Request) -> Answer:
    """PublicAPIsv2.updateServiceDef(ById|ByName) + ServiceDBStore.updateServiceDef, which bumps the
    policy version of every service of the type (updateServicesForServiceDefUpdate)."""
    sdef = read_model(req.body, SERVICE_DEF)
    if req.params[0].startswith("name:"):
        name = req.params[0][len("name:") :]
        if sdef["name"] is not None and sdef["name"] != name:
            raise status_error(400, "serviceDef name mismatch")
        found = state.service_def_by_name(name)
        if found is None:
            raise not_found()
        sdef.update(name=name, id=found["id"], guid=sdef["guid"] or found["guid"])
    else:
        sdef_id = path_long(req.params[0])
        if sdef["id"] is not None and sdef["id"] != sdef_id:
            raise status_error(400, "serviceDef id mismatch")
        sdef["id"] = sdef_id
    existing = state.service_defs.get(sdef["id"])
    if existing is None:
        raise validation_error([incorrect("id", f"No service def found for id [{sdef['id']}]", 2005)])
    sdef["displayName"] = (sdef["displayName"] or "").strip() or sdef["name"]
    failures = validate_service_def(sdef, list(state.service_defs.values()), updating=True)
    if failures:
        raise validation_error(failures)
    stored = store_service_def(sdef)
    stored.update(
        guid=existing["guid"],
        createTime=existing["createTime"],
        createdBy=existing["createdBy"],
        version=existing["version"] + 1,
        updatedBy=screen_name(req.user),
        updateTime=now_ms(),
    )
    state.service_defs[stored["id"]] = stored
    for service in state.services.values():
        if service["type"] in (existing["name"], stored["name"]):
            service["type"] = stored["name"]
            state.bump_policy_version(service)
    return 200, write_model(service_def_view(stored), SERVICE_DEF)


def validate_service(service: Json, state: State, updating: bool) -> list[Failure]:
    """RangerServiceValidator.isValid: name (pattern, unique), displayName, type."""
    failures: list[Failure] = []
    name, display, kind = service["name"] or "", service["displayName"] or "", service["type"] or ""
    other = state.service_by_name(name)
    if not name.strip():
        failures.append(missing("name", "Missing service name", 1006))
    elif not SERVICE_NAME.fullmatch(name):
        reason = f"Invalid service name=[{name}]. It should not be longer than 256 characters and "
        reason += "special characters are not allowed (except underscore and hyphen)"
        failures.append(incorrect("name", reason, 3031))
    elif other is not None and not updating:
        failures.append(incorrect("name", f"Duplicate service name: name=[{name}]", 1007))
    elif other is not None and other["id"] != service["id"]:
        reason = f"Duplicate service name: name=[{name}], id=[{other['id']}]"
        failures.append(incorrect("id/name", reason, 1008))
    shown = next((s for s in state.services.values() if s["displayName"] == display), None)
    if shown is not None and (not updating or shown["id"] != service["id"]):
        reason = f"Display name [{display}] is already used by service [{shown['name']}]"
        failures.append(incorrect("id/displayName" if updating else "displayName", reason, 3051))
    if not kind.strip():
        failures.append(missing("type", "Missing service def", 1009))
    elif state.service_def_by_name(kind) is None:
        failures.append(incorrect("type", f"Service def not found: service-def-name=[{kind}]", 1010))
    return failures


def create_service(state: State, req: Request) -> Answer:
    """ServiceREST.createService + ServiceDBStore.createService (then createDefaultPolicies)."""
    service = read_model(req.body, SERVICE)
    service["displayName"] = (service["displayName"] or "").strip() or service["name"]
    failures = validate_service(service, state, updating=False)
    if failures:
        raise validation_error(failures)
    if service["tagService"]:
        raise rest_error(f"No Service found with name :{service['tagService']}", "INVALID_INPUT_DATA")
    stamp = now_ms()
    service.update(
        id=state.new_id("service"),
        guid=service["guid"] or str(uuid.uuid4()),
        version=1,
        name=service["name"].strip(),
        createdBy=screen_name(req.user),
        updatedBy=screen_name(req.user),
        createTime=stamp,
        updateTime=stamp,
        configs={k: v for k, v in service["configs"].items() if v},
        policyVersion=1,
        policyUpdateTime=stamp,
        tagVersion=1,
        tagUpdateTime=stamp,
    )
    state.services[service["id"]] = service
    created = service_view(service)  # the answer is read before the default policies are made
    sdef = state.service_def_by_name(service["type"])
    policy = default_policy(service, sdef) if sdef else None
    if policy is not None:
        state.add_principals(missing_principals(policy, state, ("users", "groups")), req.user)
        store_policy(state, policy, req.user)
    return 200, created


def get_service(state: State, req: Request) -> Answer:
    service = state.services.get(path_long(req.params[0]))
    if service is None:  # ServiceDBStore.getService: DATA_NOT_FOUND, 400
        raise rest_error("Data Not Found for given Id", "DATA_NOT_FOUND", path_long(req.params[0]))
    return 200, service_view(service)


def get_service_by_name(state: State, req: Request) -> Answer:
    service = state.service_by_name(req.params[0])
    if service is None:
        raise not_found()
    return 200, service_view(service)


def update_service(state: State, req: Request) -> Answer:
    """PublicAPIsv2.updateService(ById|ByName) + ServiceDBStore.updateService: the policy version
    moves when isEnabled or a ranger.plugin.* config changes."""
    service = read_model(req.body, SERVICE)
    if req.params[0].startswith("name:"):
        found = state.service_by_name(req.params[0][len("name:") :])
        if found is None:
            raise not_found()
        service.update(
            id=found["id"], guid=service["guid"] or found["guid"], name=service["name"] or found["name"]
        )
    else:
        service_id = path_long(req.params[0])
        if service["id"] is not None and service["id"] != service_id:
            raise status_error(400, "service id mismatch")
        service["id"] = service_id
    existing = state.services.get(service["id"])
    if existing is None:
        raise validation_error([incorrect("id", f"No service found for id [{service['id']}]", 1005)])
    service["displayName"] = (
        (service["displayName"] or "").strip() or existing["displayName"] or service["name"]
    )
    failures = validate_service(service, state, updating=True)
    if failures:
        raise validation_error(failures)
    if service["tagService"]:
        raise rest_error(f"Invalid tag service name {service['tagService']}", "ERROR_CREATING_OBJECT")
    configs = {k: v for k, v in service["configs"].items() if v}
    for key, value in configs.items():  # a client sends back the ***** it was shown
        if key.lower() == "password" and value == HIDDEN_PASSWORD:
            configs[key] = existing["configs"].get(key, value)

    def plugin_configs(c: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in c.items() if k.startswith(PLUGIN_CONFIG_PREFIX)}

    moved = existing["isEnabled"] != service["isEnabled"] or plugin_configs(configs) != plugin_configs(
        existing["configs"]
    )
    renamed = existing["name"]
    existing.update(
        name=service["name"].strip(),
        displayName=service["displayName"],
        type=service["type"],
        description=service["description"],
        isEnabled=service["isEnabled"],
        configs=configs,
        version=existing["version"] + 1,
        updatedBy=screen_name(req.user),
        updateTime=now_ms(),
    )
    for policy in state.policies.values():
        if policy["service"] == renamed:
            policy["service"] = existing["name"]
    if moved:
        state.bump_policy_version(existing)
    return 200, service_view(existing)


def store_policy(state: State, policy: Json, by: str) -> Json:
    """ServiceDBStore.createPolicy: version 1, the signature (before the guid), a policy version."""
    service = state.service_by_name(policy["service"])
    assert service is not None  # validated by the caller
    stamp = now_ms()
    policy.update(id=state.new_id("policy"), version=1, policyType=policy["policyType"] or 0)
    policy["resourceSignature"] = resource_signature(policy)
    policy.update(
        guid=policy["guid"] or str(uuid.uuid4()),
        serviceType=service["type"],
        createTime=stamp,
        updateTime=stamp,
        createdBy=screen_name(by),
        updatedBy=screen_name(by),
    )
    state.policies[policy["id"]] = policy
    state.bump_policy_version(service)
    return policy


def normalize_policy(policy: Json, sdef: Json | None) -> Json:
    """What RangerPolicyValidator changes in the policy it checks: lower-case resource names,
    trimmed and de-duplicated principals, one access per type, in the def's spelling."""
    policy["name"] = (policy["name"] or "").strip() or None
    policy["policyType"] = policy["policyType"] or 0
    policy["resources"] = {name.lower(): res for name, res in policy["resources"].items()}
    policy["additionalResources"] = [
        {n.lower(): r for n, r in more.items()} for more in policy["additionalResources"]
    ]
    names = [a["name"] for a in (sdef or {}).get("accessTypes", [])] + list(ACCESS_TYPE_MARKERS)
    spelling = {name.lower(): name for name in names}  # getMatchedAccessType
    for item in policy_items(policy):
        for kind in ("users", "groups", "roles"):
            item[kind] = list(dict.fromkeys(name.strip() for name in item[kind]))
        accesses: dict[str, Json] = {}
        for access in item["accesses"]:
            access["type"] = spelling.get(access["type"].lower(), access["type"])
            accesses.setdefault(access["type"], access)
        item["accesses"] = list(accesses.values())
    return policy


def prepare_policy(state: State, req: Request, existing: Json | None) -> Json:
    """Read, validate and check the principals of a policy in a create or update request."""
    policy = read_model(req.body, POLICY)
    service = state.service_by_name(policy["service"] or "")
    normalize_policy(policy, state.service_def_by_name(service["type"]) if service else None)
    if existing is not None:
        policy["id"] = existing["id"]
    if existing is None and policy["name"] is None and policy["service"]:  # createPolicyUnconditionally
        policy["guid"] = policy["guid"] or str(uuid.uuid4())
        policy["name"] = f"{policy['service']}-{policy['guid']}"
    failures = validate_policy(policy, state, existing)
    if failures:
        raise validation_error(failures)
    absent = missing_principals(policy, state, ("roles", "groups", "users"))
    if absent and req.query.get("createPrincipalsIfAbsent", "").lower() == "true":
        state.add_principals(absent, req.user)
    elif absent:  # PolicyRefUpdater.createNewPolMappingForRefTable
        kind, name = absent[0]
        label = {"users": "User", "groups": "Group", "roles": "Role"}[kind]
        raise RangerError(
            400,
            {
                "statusCode": 400,
                "msgDesc": f"Operation denied. {label} name: {name} "
                "specified in policy does not exist in ranger admin.",
            },
        )
    return policy


def create_policy(state: State, req: Request) -> Answer:
    """ServiceREST.createPolicy -> createPolicyUnconditionally (no update/merge-if-exists)."""
    for flag in ("deleteIfExists", "updateIfExists", "mergeIfExists"):
        if req.query.get(flag, "").lower() == "true":
            raise status_error(400, f"ranger_admin stand-in: {flag} is not implemented")
    policy = prepare_policy(state, req, None)
    return 200, policy_view(store_policy(state, policy, req.user))


def find_policy(state: State, req: Request) -> Json:
    """The policy a path names: {id} (a missing one is read()'s 400) or service/name (404)."""
    if req.params[0].startswith("name:"):
        service, name = req.params[0][len("name:") :], req.params[1]
        policy = state.policy_by_name(service, name, req.query.get("zoneName"))
        if policy is None:
            raise not_found()
        return policy
    policy_id = path_long(req.params[0])
    if policy_id not in state.policies:
        raise data_not_found("policy", policy_id)
    return state.policies[policy_id]


def get_policy(state: State, req: Request) -> Answer:
    return 200, policy_view(find_policy(state, req))


def update_policy(state: State, req: Request) -> Answer:
    """PublicAPIsv2.updatePolicy(ByName) + ServiceDBStore.updatePolicy: JPA bumps "version"."""
    body = req.body if isinstance(req.body, dict) else {}
    if req.params[0].startswith("name:"):
        if body.get("service") != req.params[0][len("name:") :]:
            raise status_error(400, "service name mismatch")
        existing = find_policy(state, req)
        body = {**body, "id": existing["id"], "name": body.get("name") or existing["name"]}
    else:
        policy_id = path_long(req.params[0])
        if body.get("id") is not None and coerce("long", body["id"], "$.id") != policy_id:
            raise status_error(400, "policyID mismatch")
        if policy_id not in state.policies:
            raise validation_error([incorrect("id", f"No policy found for id[{policy_id}]", 3004)])
        existing = state.policies[policy_id]
    policy = prepare_policy(state, Request(req.method, req.params, req.query, body, req.user), existing)
    policy["guid"] = policy["guid"] or existing["guid"]
    policy["resourceSignature"] = resource_signature(policy)
    policy.update(
        serviceType=existing["serviceType"],
        createTime=existing["createTime"],
        createdBy=existing["createdBy"],
        version=existing["version"] + 1,
        updateTime=now_ms(),
        updatedBy=screen_name(req.user),
    )
    state.policies[policy["id"]] = policy
    service = state.service_by_name(policy["service"])
    if service is not None:
        state.bump_policy_version(service)
    return 200, policy_view(policy)


def delete_policy(state: State, req: Request) -> Answer:
    """ServiceREST.deletePolicy / PublicAPIsv2.deletePolicyByName: 204 and a policy version."""
    if req.params[0] == "query":
        service_name, name = req.query.get("servicename"), req.query.get("policyname")
        if service_name is None or name is None:
            raise status_error(400, "Invalid service name or policy name")
        req = Request(req.method, [f"name:{service_name}", name], req.query, None, req.user)
    policy = state.policies.pop(find_policy(state, req)["id"])
    service = state.service_by_name(policy["service"])
    if service is not None:
        state.bump_policy_version(service)
    return 204, None


def list_service_policies(state: State, req: Request) -> Answer:
    """PublicAPIsv2.searchPolicies: the service's unzoned policies by id; filter policyName only."""
    unsupported = set(req.query) - {"policyName", "startIndex", "pageSize", "user.name"}
    if unsupported:
        raise status_error(400, f"ranger_admin stand-in: filter {sorted(unsupported)} is not implemented")
    if state.service_by_name(req.params[0]) is None:
        raise rest_error(f"service does not exist - name='{req.params[0]}")
    name = req.query.get("policyName")
    found = [
        p
        for _id, p in sorted(state.policies.items())
        if p["service"] == req.params[0] and not p["zoneName"] and (not name or p["name"] == name)
    ]
    return 200, [policy_view(p) for p in found]


def prepare_role(state: State, req: Request, existing: Json | None) -> Json:
    """RangerRoleValidator + RoleRefUpdater: a name, unique; members Ranger knows."""
    role = read_model(req.body, ROLE)
    if not role["name"]:
        reason = "Internal error: RangerRole name passed in was null/empty"
        raise validation_error([missing("name", reason, 4003)])
    other = state.role_by_name(role["name"])
    if other is not None and (existing is None or other["id"] != existing["id"]):
        reason = f"Another RangerRole already exists for this name: Role =[{role['name']}]]"
        raise validation_error([incorrect("name", reason, 4005)])
    absent = missing_principals(role, state, ("users", "groups", "roles"))
    if absent and req.query.get("createNonExistUserGroup", "").lower() == "true":
        state.add_principals(absent, req.user)
    elif absent:
        kind, name = absent[0]
        label = {"users": "user", "groups": "Group", "roles": "Role"}[kind]
        raise rest_error(f"{label} with name: {name} does not exist ", "INVALID_INPUT_DATA")
    return role


def create_role(state: State, req: Request) -> Answer:
    """RoleREST.createRole + RoleDBStore.createRole: the role version moves."""
    return 200, role_view(state.create_role(prepare_role(state, req, None), req.user))


def find_role(state: State, req: Request) -> Json:
    if req.params[0].startswith("name:"):
        role = state.role_by_name(req.params[0][len("name:") :])
        if role is None:  # RoleDBStore.getRole(name)
            raise rest_error(f"Role with name: {req.params[0][len('name:') :]} does not exist")
        return role
    role_id = path_long(req.params[0])
    if role_id not in state.roles:
        raise data_not_found("role", role_id)
    return state.roles[role_id]


def get_role(state: State, req: Request) -> Answer:
    return 200, role_view(find_role(state, req))


def list_roles(state: State, req: Request) -> Answer:
    return 200, [role_view(r) for _id, r in sorted(state.roles.items())]


def role_names(state: State, req: Request) -> Answer:
    return 200, [r["name"] for _id, r in sorted(state.roles.items())]


def roles_containing(state: State, name: str) -> set[str]:
    """The role and every role that has it as a member, transitively (getContainingRoles)."""
    found = {name}
    while True:
        more = {r["name"] for r in state.roles.values() if {m["name"] for m in r["roles"]} & found} - found
        if not more:
            return found
        found |= more


def update_role(state: State, req: Request) -> Answer:
    """RoleREST.updateRole + RoleDBStore.updateRole, which answers the request's role as sent."""
    role_id = path_long(req.params[0])
    body = req.body if isinstance(req.body, dict) else {}
    if body.get("id") is not None and coerce("long", body["id"], "$.id") != role_id:
        raise rest_error("roleId mismatch!!")
    existing = state.roles.get(role_id)
    if existing is None:
        raise data_not_found("role", role_id)
    role = prepare_role(state, req, existing)
    role["id"] = role_id
    stored = {
        **copy.deepcopy(role),
        "guid": role["guid"] or existing["guid"],
        "createTime": existing["createTime"],
        "createdBy": existing["createdBy"],
        "version": existing["version"] + 1,
        "updateTime": now_ms(),
        "updatedBy": screen_name(req.user),
    }
    state.roles[role_id] = stored
    state.bump_role_version()
    affected = roles_containing(state, stored["name"])
    for service in state.services.values():  # RangerRoleService.updatePolicyVersions
        if any(
            set(i["roles"]) & affected
            for p in state.policies.values()
            if p["service"] == service["name"]
            for i in policy_items(p)
        ):
            state.bump_policy_version(service)
    return 200, role_view(role)


def delete_role(state: State, req: Request) -> Answer:
    """RoleDBStore.deleteRole: refused while a policy or another role names it."""
    role = find_role(state, req)
    if any(role["name"] in i["roles"] for p in state.policies.values() for i in policy_items(p)):
        raise rest_error(
            f"Role '{role['name']}' can not be deleted as it is referenced in one or more policies"
        )
    if any(role["name"] in {m["name"] for m in r["roles"]} for r in state.roles.values()):
        raise rest_error(
            f"Role '{role['name']}' can not be deleted as it is referenced in one or more other roles"
        )
    del state.roles[role["id"]]
    state.bump_role_version()
    return 204, None


def download_service(state: State, req: Request) -> Json:
    """ServiceUtil.isValidService / isValidateHttpsAuthentication, as the download endpoints answer
    them: the inner VXResponse's toString() becomes the outer msgDesc."""
    service = state.service_by_name(req.params[0])
    if service is None:
        marker = f'"RANGER_ERROR_SERVICE_NOT_FOUND: ServiceName={req.params[0]}"'
        raise status_error(404, vxresponse_text(404, marker))
    if not service["isEnabled"]:
        raise status_error(400, vxresponse_text(1, "Unauthorized access.", "OPER_NOT_ALLOWED_FOR_STATE"))
    return service


def download_policies(state: State, req: Request) -> Answer:
    """ServiceREST.getServicePoliciesIfUpdated: 200 ServicePolicies or 304."""
    last_known = query_long(req, "lastKnownVersion", -1)
    query_long(req, "lastActivationTime", 0)
    service = download_service(state, req)
    supports_deltas = req.query.get("supportsPolicyDeltas", "false").lower() == "true"
    answer = service_policies(state, service, last_known, supports_deltas)
    return (304, None) if answer is None else (200, answer)


def download_roles(state: State, req: Request) -> Answer:
    """RoleREST.getRangerRolesIfUpdated: every role, versioned globally."""
    last_known = query_long(req, "lastKnownRoleVersion", -1)
    query_long(req, "lastActivationTime", 0)
    service = download_service(state, req)
    if last_known == state.role_version:
        return 304, None
    roles = [role_view(r) for _id, r in sorted(state.roles.items())]
    answer = {
        "serviceName": service["name"],
        "roleVersion": state.role_version,
        "roleUpdateTime": state.role_update_time,
        "rangerRoles": roles,
    }
    return 200, {k: v for k, v in answer.items() if v != []}


def download_user_store(state: State, req: Request) -> Answer:
    """XUserREST.getRangerUserStoreIfUpdated."""
    last_known = query_long(req, "lastKnownUserStoreVersion", -1)
    query_long(req, "lastActivationTime", 0)
    download_service(state, req)
    if last_known == state.userstore_version:
        return 304, None
    return 200, user_store(state)


API = "/service/public/v2/api"
NAME = r"([^/]+)"
ROUTES: list[tuple[str, str, Handler, bool]] = [  # method, path pattern, handler, mutates
    ("POST", rf"{API}/servicedef/?", create_service_def, True),
    ("GET", rf"{API}/servicedef/name/{NAME}", get_service_def_by_name, False),
    ("PUT", rf"{API}/servicedef/name/{NAME}", lambda s, r: update_service_def(s, named(r)), True),
    ("GET", rf"{API}/servicedef/{NAME}", get_service_def, False),
    ("PUT", rf"{API}/servicedef/{NAME}", update_service_def, True),
    ("POST", rf"{API}/service/?", create_service, True),
    ("GET", rf"{API}/service/name/{NAME}", get_service_by_name, False),
    ("PUT", rf"{API}/service/name/{NAME}", lambda s, r: update_service(s, named(r)), True),
    ("GET", rf"{API}/service/{NAME}/policy/?", list_service_policies, False),
    ("GET", rf"{API}/service/{NAME}/policy/{NAME}", lambda s, r: get_policy(s, named(r)), False),
    ("PUT", rf"{API}/service/{NAME}/policy/{NAME}", lambda s, r: update_policy(s, named(r)), True),
    ("GET", rf"{API}/service/{NAME}", get_service, False),
    ("PUT", rf"{API}/service/{NAME}", update_service, True),
    ("POST", rf"{API}/policy/?", create_policy, True),
    ("DELETE", rf"{API}/policy/?", lambda s, r: delete_policy(s, with_params(r, ["query"])), True),
    ("GET", rf"{API}/policy/{NAME}", get_policy, False),
    ("PUT", rf"{API}/policy/{NAME}", update_policy, True),
    ("DELETE", rf"{API}/policy/{NAME}", delete_policy, True),
    ("POST", rf"{API}/roles/?", create_role, True),
    ("GET", rf"{API}/roles/?", list_roles, False),
    ("GET", rf"{API}/roles/names/?", role_names, False),
    ("GET", rf"{API}/roles/name/{NAME}", lambda s, r: get_role(s, named(r)), False),
    ("DELETE", rf"{API}/roles/name/{NAME}", lambda s, r: delete_role(s, named(r)), True),
    ("GET", rf"{API}/roles/{NAME}", get_role, False),
    ("PUT", rf"{API}/roles/{NAME}", update_role, True),
    ("DELETE", rf"{API}/roles/{NAME}", delete_role, True),
    ("GET", rf"/service/plugins/policies/download/{NAME}", download_policies, False),
    ("GET", rf"/service/roles/download/{NAME}", download_roles, False),
    ("GET", rf"/service/xusers/download/{NAME}", download_user_store, False),
]
PLUGIN_PATHS = ("/service/plugins/", "/service/roles/download/", "/service/xusers/download/")


def named(req: Request) -> Request:
    """Mark the first path parameter as a name, so one handler serves /{id} and /name/{name}."""
    return with_params(req, [f"name:{req.params[0]}", *req.params[1:]])


def with_params(req: Request, params: list[str]) -> Request:
    return Request(req.method, params, req.query, req.body, req.user)


def route(method: str, path: str) -> tuple[Handler, list[str], bool]:
    """The handler for a request; 404 for an unknown path, 405 for a known one's other method."""
    known_path = False
    for verb, pattern, handler, mutates in ROUTES:
        match = re.fullmatch(pattern, path)
        if match:
            known_path = True
            if verb == method:
                return handler, [unquote(p) for p in match.groups()], mutates
    if known_path:
        raise status_error(405, f"Method {method} is not allowed on {path}")
    raise not_found()


# --- HTTP: the thin layer --------------------------------------------------------------------


@dataclass
class Server:
    state: State
    admin_user: str
    admin_password: str
    state_file: Path | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def authenticated(self, header: str | None) -> str | None:
        """The login of a valid HTTP basic Authorization header, else None."""
        if not header or not header.startswith("Basic "):
            return None
        try:
            user, _colon, password = base64.b64decode(header[6:], validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        good = hmac.compare_digest(user.encode(), self.admin_user.encode())
        return user if hmac.compare_digest(password.encode(), self.admin_password.encode()) and good else None

    def answer(self, method: str, target: str, headers: dict[str, str], raw: bytes) -> Answer:
        url = urlsplit(target)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        path = url.path
        if not path.startswith("/service/"):
            raise not_found()
        user = ""
        if not path.startswith(PLUGIN_PATHS):
            login = self.authenticated(headers.get("authorization"))
            if login is None:  # RangerAuthenticationEntryPoint
                return 401, {"statusCode": 401, "msgDesc": "Authentication Failed"}
            user = login
        handler, params, mutates = route(method, path)
        body = None
        if method in ("POST", "PUT"):
            if "json" not in headers.get("content-type", ""):
                raise status_error(415, "Unsupported Media Type: send Content-Type: application/json")
            try:
                body = json.loads(raw or b"null")
            except ValueError as error:
                raise mapping_error(f"Unexpected character: {error}", parse=True) from None
            if body is None:
                raise mapping_error("No content to map due to end-of-input")
        with self.lock:
            try:
                return handler(self.state, Request(method, params, query, body, user))
            finally:  # a refused request may have added principals, as Ranger's would
                if mutates and self.state_file is not None:
                    save_state(self.state, self.state_file)


def save_state(state: State, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(state.to_json(), indent=1, sort_keys=True))
    os.replace(tmp, path)


def make_handler(server: Server) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as Tomcat; answers with a body say its length
        server_version = "ranger_admin-standin"

        def handle_method(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            try:
                status, body = server.answer(self.command, self.path, headers, raw)
            except RangerError as error:
                status, body = error.status, error.body
            except Exception as error:  # a bug here: answer as Ranger answers an uncaught one
                traceback.print_exc()
                status, body = 500, {"statusCode": 1, "msgDesc": repr(error)}
            self.send_answer(status, body)

        def send_answer(self, status: int, body: Any) -> None:
            self.send_response(status)
            if status in (204, 304):  # no body, so no Content-Type or Content-Length (RFC 9110)
                self.end_headers()
                return
            payload = json.dumps(body, separators=(",", ":")).encode()
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PUT = do_DELETE = handle_method

        def log_message(self, format: str, *args: Any) -> None:
            sys.stderr.write(f"ranger_admin: {self.address_string()} {format % args}\n")

    return Handler


def load_state(state_file: Path | None, users_file: Path | None) -> State:
    """The saved state if there is one; a --users file replaces its users and groups."""
    state = (
        State.from_json(json.loads(state_file.read_text())) if state_file and state_file.exists() else State()
    )
    if users_file is not None:
        users, groups = user_store_entries(json.loads(users_file.read_text()))
        before = (copy.deepcopy(state.users), copy.deepcopy(state.groups))
        state.users = {n: u for n, u in state.users.items() if u["internal"]} | users
        state.groups = {n: g for n, g in state.groups.items() if g["internal"]} | groups
        state.ensure_builtins()
        if (state.users, state.groups) != before and state_file and state_file.exists():
            state.bump_userstore_version()
    return state


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0] if __doc__ else None)
    parser.add_argument("--host", default="0.0.0.0")  # noqa: S104 - a lab node serves its cluster
    parser.add_argument("--port", type=int, default=6080)
    parser.add_argument("--admin-user", default="admin")
    parser.add_argument("--admin-password", default=os.environ.get("RANGER_ADMIN_PASSWORD"))
    parser.add_argument("--state", type=Path, help="JSON file the state is loaded from and saved to")
    parser.add_argument("--users", type=Path, help="JSON file of users and groups (see the module docstring)")
    args = parser.parse_args(argv)
    if not args.admin_password:
        parser.error("--admin-password: missing; pass it or set RANGER_ADMIN_PASSWORD")
    server = Server(load_state(args.state, args.users), args.admin_user, args.admin_password, args.state)
    if args.state is not None:
        save_state(server.state, args.state)
    httpd = ThreadingHTTPServer((args.host, args.port), make_handler(server))
    host, port = httpd.server_address[:2]
    print(f"ranger_admin: listening on {host!s}:{port}", flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
