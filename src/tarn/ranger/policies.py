"""Ranger Admin's ServicePolicies and RangerRoles JSON, compiled once for evaluation (Ranger 2.8.0).

What is kept, as RangerPolicyRepository and RangerOptimizedPolicyEvaluator build it:

- access policies (``policyType`` 0 or absent) that are enabled; the others only count as
  "the service has policies" (``has_policies``), as Ranger counts them;
- per policy: its resource matchers (``resources`` and ``additionalResources``), validity
  schedules, deny / deny-exception / allow / allow-exception items (deny and exceptions only
  while the service definition enables them), ``isDenyAllElse``, priority, ``isAuditEnabled``;
- items with each access type's implied grants added (one round, in Java's HashMap order);
- Ranger's evaluation order: priority (OVERRIDE first), then policies with deny items or
  deny-all-else, then the evaluator's ``evalOrder`` score, then the name.

What Ranger would evaluate but this engine cannot is refused with ``PolicyError`` rather than
guessed: security zones, policy deltas, multi-resource service definitions, resource matchers
other than RangerDefaultResourceMatcher, defined policy conditions, recurring validity schedules
and ``${{…}}`` request expressions. Conditions whose type the service definition does not
declare are dropped, as Ranger drops them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tarn.errors import TarnError
from tarn.ranger.matchers import MatcherOptions, ResourceMatcher, java_fold

DEFAULT_MATCHER = "org.apache.ranger.plugin.resourcematcher.RangerDefaultResourceMatcher"
USER_MACRO = "{USER}"  # RangerPolicyEngine.USER_CURRENT
GROUP_PUBLIC = "public"


class PolicyError(TarnError):
    """ServicePolicies this engine cannot evaluate as Ranger would: one line naming what and why."""


def java_hash_order(names: Iterable[str]) -> list[str]:
    """The iteration order of a java.util.HashMap/HashSet filled with ``names`` in this order."""
    unique = list(dict.fromkeys(names))
    capacity = 16
    while len(unique) > capacity * 3 // 4:
        capacity *= 2

    def bucket(name: str) -> int:
        h = 0
        units = name.encode("utf-16-be")
        for i in range(0, len(units), 2):
            h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(unique, key=bucket)  # stable: insertion order within a bucket


@dataclass(frozen=True)
class ServiceDef:
    """What evaluation needs from the service definition."""

    name: str
    resource: str  # the one resource (``model`` for triton)
    matcher: MatcherOptions
    access_type_count: int
    implied_grants: tuple[tuple[str, tuple[str, ...]], ...]  # implying type → implied, Java order
    deny_enabled: bool  # option enableDenyAndExceptionsInPolicies
    condition_types: frozenset[str]

    @classmethod
    def from_json(cls, raw: Mapping[str, Any] | None) -> ServiceDef:
        if not raw:
            raise PolicyError("serviceDef: missing from the ServicePolicies; download them from Ranger Admin")
        resources = raw.get("resources") or []
        if len(resources) != 1:
            names = [r.get("name") for r in resources]
            raise PolicyError(f"serviceDef: resources {names} unsupported; this engine handles exactly one")
        resource = resources[0]
        matcher = resource.get("matcher") or DEFAULT_MATCHER
        if matcher != DEFAULT_MATCHER:
            raise PolicyError(f"serviceDef: resource matcher {matcher} unsupported; use {DEFAULT_MATCHER}")
        try:
            options = MatcherOptions.from_json(resource.get("matcherOptions"))
        except ValueError as e:
            raise PolicyError(f"serviceDef: {e}") from e
        implied: dict[str, list[str]] = {}
        for access_type in [*(raw.get("accessTypes") or []), *(raw.get("markerAccessTypes") or [])]:
            if access_type.get("impliedGrants"):
                implied.setdefault(access_type["name"], []).extend(access_type["impliedGrants"])
        # ServiceDefUtil.getBooleanValue(): absent or empty is the default, true
        deny = (raw.get("options") or {}).get("enableDenyAndExceptionsInPolicies")
        return cls(
            name=str(raw.get("name") or ""),
            resource=str(resource["name"]),
            matcher=options,
            access_type_count=len(raw.get("accessTypes") or []),
            implied_grants=tuple(
                (name, tuple(dict.fromkeys(implied[name]))) for name in java_hash_order(implied)
            ),
            deny_enabled=deny in (None, "") or str(deny).lower() == "true",
            condition_types=frozenset(c.get("name") for c in raw.get("policyConditions") or []),
        )


@dataclass(frozen=True)
class Requester:
    """Who asks for what, as the items compare it."""

    user: str
    groups: frozenset[str]
    roles: frozenset[str]
    access: str  # folded like Java's equalsIgnoreCase
    admin: bool  # access type ``_admin``: only delegateAdmin items match


@dataclass(frozen=True)
class Item:
    """A policy item (RangerDefaultPolicyItemEvaluator)."""

    users: frozenset[str]
    any_user: bool  # lists {USER}
    groups: frozenset[str]
    any_group: bool  # lists the group public
    roles: frozenset[str]
    accesses: frozenset[str]  # allowed access types with implied grants, folded
    delegate_admin: bool

    @classmethod
    def from_json(cls, raw: Mapping[str, Any], service: ServiceDef) -> Item:
        users = [u for u in raw.get("users") or [] if u is not None]
        groups = [g for g in raw.get("groups") or [] if g is not None]
        accesses = _with_implied_grants(raw.get("accesses") or [], service.implied_grants)
        return cls(
            users=frozenset(users),
            any_user=USER_MACRO in users,
            groups=frozenset(groups),
            any_group=GROUP_PUBLIC in groups,
            roles=frozenset(r for r in raw.get("roles") or [] if r is not None),
            accesses=frozenset(java_fold(t) for t, ok in accesses if ok),
            delegate_admin=bool(raw.get("delegateAdmin")),
        )

    def matches(self, who: Requester) -> bool:
        member = (
            self.any_user
            or who.user in self.users
            or self.any_group
            or not self.groups.isdisjoint(who.groups)
            or (bool(who.roles) and not self.roles.isdisjoint(who.roles))
        )
        if not member:
            return False
        return self.delegate_admin if who.admin else who.access in self.accesses


def _with_implied_grants(
    accesses: Sequence[Mapping[str, Any]], implied: Sequence[tuple[str, Sequence[str]]]
) -> list[tuple[str, bool]]:
    """RangerAbstractPolicyItemEvaluator.computeWithImpliedGrants(): one pass over the grants,
    in map order, each seeing what earlier ones added."""
    result = [[a.get("type"), a.get("isAllowed") is not False] for a in accesses]

    def find(name: str) -> list[Any] | None:
        key = java_fold(name)
        return next((a for a in result if isinstance(a[0], str) and java_fold(a[0]) == key), None)

    if result:
        for implying, grants in implied:
            access = find(implying)
            if access is None:
                continue
            for grant in grants:
                granted = find(grant)
                if granted is None:
                    result.append([grant, access[1]])
                elif not granted[1]:
                    granted[1] = access[1]
    return [(t, bool(ok)) for t, ok in result if isinstance(t, str)]


# RangerValiditySchedule.VALIDITY_SCHEDULE_DATE_STRING_SPECIFICATION, parsed leniently by
# SimpleDateFormat: any digit count and sign, blanks before a number, out-of-range fields roll
# over, trailing text ignored.
_DATE = re.compile(r"[ \t]*(-?\d+)/[ \t]*(-?\d+)/[ \t]*(-?\d+) [ \t]*(-?\d+):[ \t]*(-?\d+):[ \t]*(-?\d+)")
_CUSTOM_ZONE = re.compile(r"GMT([+-])(\d{1,2})(?::?(\d{2}))?")


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 in the proleptic Gregorian calendar, for any year."""
    year -= month <= 2
    era = year // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    return era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468


def _parse_ranger_time(text: str | None) -> int | None:
    """Milliseconds of the wall-clock time as if in UTC (the JVM default zone assumed UTC)."""
    found = _DATE.match(text or "")
    if not found:
        return None  # Ranger logs the ParseException and drops the bound
    year, month, day, hour, minute, second = (int(g) for g in found.groups())
    carry, month0 = divmod(month - 1, 12)
    days = _days_from_civil(year + carry, month0 + 1, 1) + day - 1
    return ((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000


# java.util.TimeZone's three-letter ids that the IANA database does not have (ZoneInfoFile)
_JAVA_SHORT_IDS = {
    "ACT": "Australia/Darwin",
    "AET": "Australia/Sydney",
    "AGT": "America/Argentina/Buenos_Aires",
    "ART": "Africa/Cairo",
    "AST": "America/Anchorage",
    "BET": "America/Sao_Paulo",
    "BST": "Asia/Dhaka",
    "CAT": "Africa/Harare",
    "CNT": "America/St_Johns",
    "CST": "America/Chicago",
    "CTT": "Asia/Shanghai",
    "EAT": "Africa/Addis_Ababa",
    "ECT": "Europe/Paris",
    "IET": "America/Indiana/Indianapolis",
    "IST": "Asia/Kolkata",
    "JST": "Asia/Tokyo",
    "MIT": "Pacific/Apia",
    "NET": "Asia/Yerevan",
    "NST": "Pacific/Auckland",
    "PLT": "Asia/Karachi",
    "PNT": "America/Phoenix",
    "PRT": "America/Puerto_Rico",
    "PST": "America/Los_Angeles",
    "SST": "Pacific/Guadalcanal",
    "VST": "Asia/Ho_Chi_Minh",
    "EST": "America/Panama",
    "MST": "America/Phoenix",
    "HST": "Pacific/Honolulu",
}


def _java_zone(name: str) -> tzinfo:
    """TimeZone.getTimeZone(): IANA ids, Java's three-letter ids, GMT±hh[:mm]; unknown ids are GMT."""
    name = _JAVA_SHORT_IDS.get(name, name)
    custom = _CUSTOM_ZONE.fullmatch(name)
    if custom:
        sign, hours, minutes = custom.groups()
        offset = timedelta(hours=int(hours), minutes=int(minutes or 0))
        if int(hours) <= 23 and int(minutes or 0) <= 59:
            return timezone(-offset if sign == "-" else offset)
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return timezone.utc


def _adjusted(wall_ms: int, zone: tzinfo) -> int:
    """RangerValidityScheduleEvaluator.getAdjustedTime(): shift by the zone's offset at that instant."""
    try:
        instant = datetime.fromtimestamp(wall_ms / 1000, tz=timezone.utc)
        offset = instant.astimezone(zone).utcoffset() or timedelta(0)
    except (OverflowError, ValueError, OSError):
        offset = timedelta(0)
    return wall_ms - int(offset.total_seconds() * 1000)


@dataclass(frozen=True)
class Schedule:
    """A validity schedule: [start, end] in epoch milliseconds, inclusive; 0 is open."""

    start_ms: int
    end_ms: int

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Schedule:
        for recurrence in raw.get("recurrences") or []:
            interval = (recurrence or {}).get("interval") or {}
            days, hours = interval.get("days") or 0, interval.get("hours") or 0
            minutes = (days * 24 + hours) * 60 + (interval.get("minutes") or 0)
            if minutes > 0:  # a recurrence without an interval always applies
                raise ValueError("recurring validity schedules are not supported")
        name = str(raw.get("timeZone") or "")
        zone = _java_zone(name if name.strip() else "GMT")

        def bound(text: str | None) -> int:
            wall = _parse_ranger_time(text)
            if wall is None:
                return 0
            return _adjusted(wall, zone) if wall > 0 else wall  # a bound before 1970 is not shifted

        return cls(start_ms=bound(raw.get("startTime")), end_ms=bound(raw.get("endTime")))

    def applies(self, now_ms: int) -> bool:
        return (self.start_ms == 0 or now_ms >= self.start_ms) and (self.end_ms == 0 or now_ms <= self.end_ms)


@dataclass(frozen=True)
class Policy:
    """An enabled access policy, compiled."""

    id: int
    name: str | None
    version: int | None
    priority: int  # 1 OVERRIDE, 0 NORMAL
    audit_enabled: bool
    deny_all_else: bool
    has_deny: bool  # deny items (even when the service disables them) or deny-all-else
    eval_order: int
    resources: tuple[ResourceMatcher, ...]  # only those that can match a request
    schedules: tuple[Schedule, ...]
    deny: tuple[Item, ...]
    deny_exceptions: tuple[Item, ...]
    allow: tuple[Item, ...]
    allow_exceptions: tuple[Item, ...]

    def applies_at(self, now_ms: int) -> bool:
        return not self.schedules or any(s.applies(now_ms) for s in self.schedules)

    def matches(self, value: str, probe: str, tokens: Mapping[str, str]) -> bool:
        return any(r.matches(value, probe, tokens) for r in self.resources)

    def decide(self, who: Requester) -> bool | None:
        """True allow, False deny, None: this policy says nothing for this request."""
        if _first_match(self.deny, self.deny_exceptions, who):
            return False
        if _first_match(self.allow, self.allow_exceptions, who):
            return True
        return False if self.deny_all_else else None


def _first_match(items: tuple[Item, ...], exceptions: tuple[Item, ...], who: Requester) -> bool:
    return any(i.matches(who) for i in items) and not any(e.matches(who) for e in exceptions)


_ITEM_LISTS = (
    "policyItems",
    "denyPolicyItems",
    "allowExceptions",
    "denyExceptions",
    "dataMaskPolicyItems",
    "rowFilterPolicyItems",
)


def compile_policy(raw: Mapping[str, Any], service: ServiceDef) -> Policy:
    policy_id = raw.get("id")
    try:
        return _compile_policy(raw, service)
    except ValueError as e:
        raise PolicyError(f"policy {policy_id} ({raw.get('name')}): {e}") from e


def _compile_policy(raw: Mapping[str, Any], service: ServiceDef) -> Policy:
    for holder in [raw, *(i for key in _ITEM_LISTS for i in raw.get(key) or [])]:
        for condition in holder.get("conditions") or []:
            if condition.get("type") in service.condition_types:
                raise ValueError(f"policy condition {condition.get('type')} is not supported")

    resource_maps = [raw.get("resources") or {}, *(raw.get("additionalResources") or [])]
    resources = tuple(m for m in (_resource_matcher(r, service) for r in resource_maps) if m is not None)

    def items(key: str) -> tuple[Item, ...]:
        return tuple(Item.from_json(i, service) for i in raw.get(key) or [])

    deny_all_else = bool(raw.get("isDenyAllElse"))
    return Policy(
        id=int(raw["id"]) if raw.get("id") is not None else -1,
        name=raw.get("name"),
        version=int(raw["version"]) if raw.get("version") is not None else None,
        priority=int(raw.get("policyPriority") or 0),
        audit_enabled=raw.get("isAuditEnabled") is not False,
        deny_all_else=deny_all_else,
        has_deny=deny_all_else or bool(raw.get("denyPolicyItems")),
        eval_order=_eval_order(raw, service, any(r.needs_dynamic_eval for r in resources)),
        resources=resources,
        schedules=tuple(Schedule.from_json(s) for s in raw.get("validitySchedules") or []),
        deny=items("denyPolicyItems") if service.deny_enabled else (),
        deny_exceptions=items("denyExceptions") if service.deny_enabled else (),
        allow=items("policyItems"),
        allow_exceptions=items("allowExceptions") if service.deny_enabled else (),
    )


def _resource_matcher(resources: Mapping[str, Any], service: ServiceDef) -> ResourceMatcher | None:
    """None for a resource map that can match nothing: empty, or keys outside the service's one
    resource (no valid resource hierarchy in Ranger)."""
    if set(resources) != {service.resource} or not resources[service.resource]:
        return None
    resource = resources[service.resource]
    values = resource.get("values") or []
    flags = bool(resource.get("isExcludes")), bool(resource.get("isRecursive"))
    return ResourceMatcher.compile(values, *flags, service.matcher)


def _eval_order(raw: Mapping[str, Any], service: ServiceDef, dynamic: bool) -> int:
    """RangerOptimizedPolicyEvaluator.computeEvalOrder(): lower is evaluated earlier."""
    order = 10_000 + (20 if dynamic else 0)

    resource = (raw.get("resources") or {}).get(service.resource) or {}
    values = [v for v in resource.get("values") or [] if v is not None]
    discount = 0
    if values:
        match_any = star = question = False
        for value in values:
            if value in ("", "*"):
                match_any = True
                break
            if "*" in value:
                star = True
            elif "?" in value:
                question = True
        if match_any:
            discount = 25
        else:
            discount = 10 if star else 5 if question else 0
            discount += 5 if resource.get("isExcludes") else 0
            discount += 5 if resource.get("isRecursive") else 0
    order -= min(100, discount)

    all_items = [i for key in _ITEM_LISTS for i in raw.get(key) or []]
    users = {u for i in all_items for u in i.get("users") or [] if u is not None}
    groups = {g for i in all_items for g in i.get("groups") or [] if g is not None}
    public = bool(raw.get("isDenyAllElse")) or any(java_fold(g) == GROUP_PUBLIC for g in groups)
    if public or any(java_fold(u) == java_fold(USER_MACRO) for u in users):
        order -= 25
    else:
        order -= min(len(users) + len(groups), 25)

    accesses = [a for i in all_items for a in i.get("accesses") or []]
    perms = {a.get("type") for a in accesses if a.get("isAllowed") is not False}
    if service.access_type_count:
        order -= math.floor(25 * len(perms) / service.access_type_count + 0.5)  # Math.round
    return order - 25  # no custom conditions: the full discount


def evaluation_order(policies: Iterable[Policy]) -> tuple[Policy, ...]:
    """RangerPolicyEvaluator.PolicyEvalOrderComparator, stable on the download order."""

    def key(policy: Policy) -> tuple[int, bool, int, bool, bytes]:
        name = policy.name.encode("utf-16-be") if policy.name is not None else b""  # String.compareTo
        return (-policy.priority, not policy.has_deny, policy.eval_order, policy.name is not None, name)

    return tuple(sorted(policies, key=key))


@dataclass(frozen=True)
class Roles:
    """RangerRolesUtil: the roles each user and group belongs to, nested roles included."""

    version: int
    by_user: Mapping[str, frozenset[str]]
    by_group: Mapping[str, frozenset[str]]

    @classmethod
    def from_json(cls, raw: Mapping[str, Any] | None) -> Roles:
        raw = raw or {}
        roles = raw.get("rangerRoles") or []
        by_name: dict[Any, Mapping[str, Any]] = {}
        for role in roles:
            by_name.setdefault(role.get("name"), role)
        by_user: dict[str, set[str]] = {}
        by_group: dict[str, set[str]] = {}
        for role in roles:
            for member_role in _contained_roles(role, by_name):
                for kind, index in (("users", by_user), ("groups", by_group)):
                    for member in member_role.get(kind) or []:
                        if member.get("name"):
                            index.setdefault(member["name"], set()).add(role.get("name"))
        version = raw.get("roleVersion")
        return cls(
            version=int(version) if version is not None else -1,
            by_user={k: frozenset(v) for k, v in by_user.items()},
            by_group={k: frozenset(v) for k, v in by_group.items()},
        )

    def of(self, user: str, groups: Iterable[str]) -> frozenset[str]:
        """RangerAuthContext.getRolesForUserAndGroups(): the user's, its groups', and public's."""
        found: set[str] = set(self.by_user.get(user, ())) if user else set()
        for group in [*groups, GROUP_PUBLIC]:
            found.update(self.by_group.get(group, ()))
        return frozenset(found)


def _contained_roles(role: Mapping[str, Any], by_name: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The role and every role nested in it, each once (cycles allowed)."""
    found = [role]
    seen = {id(role)}
    pending = [role]
    while pending:
        current = pending.pop(0)
        for member in current.get("roles") or []:
            inner = by_name.get(member.get("name")) if member.get("name") is not None else None
            if inner is not None and id(inner) not in seen:
                seen.add(id(inner))
                found.append(inner)
                pending.append(inner)
    return found
