"""The access decision of RangerPolicyEngineImpl (Ranger 2.8.0) for one model and access type.

``evaluate`` walks the policies whose resources may match, in Ranger's evaluation order, with
RangerPolicyEngineImpl.evaluatePoliciesForOneAccessTypeNoAudit()'s rules:

- super users and super groups are allowed (no deciding policy); policies still set the audit flag;
- a policy outside all its validity schedules is skipped entirely;
- in a policy whose resource matches: deny items (unless a deny exception matches), then allow
  items (unless an allow exception matches), then ``isDenyAllElse``;
- a deny is final; an allow is final once no policy with deny items can follow at its priority,
  and against every lower-priority policy: at equal priority deny wins, an OVERRIDE allow beats
  a NORMAL deny;
- nothing decided: denied (no fallback authorizer for this service);
- audited: always (``audit-all``), never (``audit-none``), else as soon as an applicable policy
  with ``isAuditEnabled`` matches the resource, whoever asks; a service with no policy at all
  (and no tag service) audits everything; audit-excluded users, groups and roles never.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, NamedTuple

from tarn.ranger.matchers import java_fold
from tarn.ranger.policies import (
    Policy,
    PolicyError,
    Requester,
    Roles,
    ServiceDef,
    compile_policy,
    evaluation_order,
    java_hash_order,
)
from tarn.ranger.trie import ResourceTrie

ANY_ACCESS = "_any"
ADMIN_ACCESS = "_admin"
SUPER_USER_ACCESS = "_super_user"
AUDIT_ALL = "audit-all"
AUDIT_NONE = "audit-none"
_MAX_PRIORITY = 2**31 - 1  # Integer.MAX_VALUE: a super user's result outranks every policy
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class Verdict:
    """RangerAccessResult: isAllowed, isAudited, policyId (-1: no policy decided) and the
    deciding policy's version (None: no policy decided)."""

    allowed: bool
    audited: bool
    policy_id: int = -1
    policy_version: int | None = None


class _Decision(NamedTuple):
    """The access result so far (RangerAccessResult's access part)."""

    allowed: bool
    priority: int
    policy_id: int
    version: int | None


class _Tokens(Mapping[str, str]):
    """The request context's tokens for ``{USER}``-style values; ``{ROLES}`` is Java's Set.toString()."""

    def __init__(self, user: str, roles: frozenset[str]) -> None:
        self._user = user
        self._roles = roles

    def __getitem__(self, key: str) -> str:
        if key == "USER":
            return self._user
        if key == "ROLES" and self._roles:
            return "[" + ", ".join(java_hash_order(sorted(self._roles))) + "]"
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(("USER", "ROLES") if self._roles else ("USER",))

    def __len__(self) -> int:
        return 2 if self._roles else 1


def _config_set(config: Mapping[str, Any], key: str) -> frozenset[str]:
    return frozenset(s.strip() for s in str(config.get(key) or "").split(",") if s.strip())


@dataclass(frozen=True)
class Engine:
    """Compiled ServicePolicies of one service; ``evaluate`` is pure and thread-safe."""

    service_name: str
    policy_version: int  # ServicePolicies.policyVersion (-1 when absent)
    service: ServiceDef
    policies: tuple[Policy, ...]  # enabled access policies, in evaluation order
    trie: ResourceTrie
    has_policies: bool  # any policy downloaded, disabled and non-access ones included
    has_tag_service: bool
    audit_mode: str
    roles: Roles
    super_users: frozenset[str]
    super_groups: frozenset[str]
    audit_excluded_users: frozenset[str]
    audit_excluded_groups: frozenset[str]
    audit_excluded_roles: frozenset[str]

    @classmethod
    def from_json(
        cls,
        service_policies: Mapping[str, Any],
        roles: Mapping[str, Any] | None = None,
        super_users: frozenset[str] = frozenset(),
        super_groups: frozenset[str] = frozenset(),
    ) -> Engine:
        """``service_policies``: GET /service/plugins/policies/download/{service};
        ``roles``: GET /service/roles/download/{service}; super users and groups: the plugin's
        ``ranger.plugin.triton.super.users`` / ``.super.groups``."""
        if service_policies.get("securityZones"):
            raise PolicyError("securityZones: security zones are not supported; keep triton out of zones")
        if service_policies.get("policyDeltas"):
            raise PolicyError("policyDeltas: policy deltas are not supported; download full policies")
        service = ServiceDef.from_json(service_policies.get("serviceDef"))
        downloaded = service_policies.get("policies") or []
        access_policies = [
            p for p in downloaded if p.get("isEnabled") is not False and p.get("policyType") in (None, 0)
        ]
        policies = evaluation_order(compile_policy(p, service) for p in access_policies)
        config = service_policies.get("serviceConfig") or {}
        tags = service_policies.get("tagPolicies") or {}
        version = service_policies.get("policyVersion")
        return cls(
            service_name=str(service_policies.get("serviceName") or ""),
            policy_version=int(version) if version is not None else -1,
            service=service,
            policies=policies,
            trie=ResourceTrie.build(
                [(i, r) for i, p in enumerate(policies) for r in p.resources], service.matcher
            ),
            has_policies=bool(downloaded),
            has_tag_service=bool(tags.get("serviceName")) and tags.get("serviceDef") is not None,
            audit_mode=str(service_policies.get("auditMode") or ""),
            roles=Roles.from_json(roles),
            super_users=frozenset(super_users) | _config_set(config, "ranger.plugin.super.users"),
            super_groups=frozenset(super_groups) | _config_set(config, "ranger.plugin.super.groups"),
            audit_excluded_users=_config_set(config, "ranger.plugin.audit.exclude.users"),
            audit_excluded_groups=_config_set(config, "ranger.plugin.audit.exclude.groups"),
            audit_excluded_roles=_config_set(config, "ranger.plugin.audit.exclude.roles"),
        )

    def evaluate(
        self, user: str, groups: frozenset[str], model: str, access: str, now: datetime | None = None
    ) -> Verdict:
        """May ``user`` (in ``groups``) perform ``access`` on ``model`` at ``now`` (default: the
        current time; a naive datetime is taken as UTC)?"""
        if access in ("", ANY_ACCESS):
            raise ValueError(f"access: {access!r} (any access) is not supported; ask for one access type")
        roles = self.roles.of(user, groups)
        now_ms = _epoch_ms(now)
        audited, audit_known = self._initial_audit(user, groups, roles)

        allowed, known, priority, policy_id, version = False, False, 0, -1, None
        is_super = user in self.super_users or not self.super_groups.isdisjoint(groups)
        if is_super or access == SUPER_USER_ACCESS:
            allowed, known, priority = is_super, True, _MAX_PRIORITY
        if not self.has_policies:
            return Verdict(allowed, audited)

        # the super-user result stands unless a policy of higher priority says otherwise
        allowed_before, denied_before = known and allowed, known and not allowed
        known = False
        who = Requester(user, groups, roles, java_fold(access), access == ADMIN_ACCESS)
        probe = self.service.matcher.fold(model)
        tokens = _Tokens(user, roles)
        decision: _Decision | None = None
        for rank in self._candidates(model):
            policy = self.policies[rank]
            if not policy.applies_at(now_ms):
                continue
            if (denied_before and priority >= policy.priority) or (allowed and priority > policy.priority):
                known = True
            if not (known and audit_known) and policy.matches(model, probe, tokens):
                if not audit_known and policy.audit_enabled:
                    audited = audit_known = True
                if not known:
                    outcome = policy.decide(who)
                    if outcome is not None:
                        decision = _merge(decision, outcome, policy)
                    if decision is not None:
                        allowed, priority, policy_id, version = decision
                        known = not allowed  # a deny is final; an allow may still be overruled
            if allowed and not policy.has_deny:
                known = True  # no deny can follow at this priority
            if known and audit_known:
                break
        if not known and (allowed_before or denied_before):
            allowed = allowed_before
        return Verdict(allowed, audited, policy_id, version)

    def _candidates(self, model: str) -> list[int]:
        """The policies Ranger evaluates for ``model``, by rank: the trie's, or all for "" (an
        empty resource string bypasses the trie)."""
        if not model:
            return list(range(len(self.policies)))
        return sorted(self.trie.lookup(model))

    def _initial_audit(self, user: str, groups: frozenset[str], roles: frozenset[str]) -> tuple[bool, bool]:
        """(audited, decided) before any policy: RangerPolicyEngineImpl.createAccessResult()."""
        excluded = (
            user in self.audit_excluded_users
            or not self.audit_excluded_groups.isdisjoint(groups)
            or not self.audit_excluded_roles.isdisjoint(roles)
        )
        if excluded or self.audit_mode == AUDIT_NONE:
            return False, True
        if self.audit_mode == AUDIT_ALL or not (self.has_policies or self.has_tag_service):
            return True, True
        return False, False


def _merge(decision: _Decision | None, allowed: bool, policy: Policy) -> _Decision:
    """RangerDefaultPolicyEvaluator.evaluatePolicyItems(): a deny replaces an allow of no higher
    priority; an allow replaces only a result of lower priority."""
    new = _Decision(allowed, policy.priority, policy.id, policy.version)
    if decision is None:
        return new
    if decision.allowed and not allowed:
        return new if policy.priority >= decision.priority else decision
    return new if policy.priority > decision.priority else decision


def _epoch_ms(now: datetime | None) -> int:
    if now is None:
        now = datetime.now(timezone.utc)
    elif now.tzinfo is None:
        now = now.replace(tzinfo=timezone.utc)
    return (now - _EPOCH) // timedelta(milliseconds=1)
