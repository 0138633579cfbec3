"""The Ranger policy engine for ``triton``, rule by rule, with hand-written ServicePolicies.

Each table row names the Ranger 2.8.0 behaviour it pins; tests/integration/test_ranger_conformance.py
compares the same engine with Ranger's own on random policy sets.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from tarn.ranger.engine import Engine, Verdict
from tarn.ranger.matchers import TokenSyntax, java_fold
from tarn.ranger.policies import PolicyError, java_hash_order

Json = dict[str, Any]

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=timezone.utc)


def service_def(**matcher_options: Any) -> Json:
    """The user's document: one resource ``model``, access types infer, metadata, list."""
    return {
        "name": "triton",
        "resources": [
            {
                "itemId": 1,
                "name": "model",
                "level": 1,
                "mandatory": True,
                "matcher": "org.apache.ranger.plugin.resourcematcher.RangerDefaultResourceMatcher",
                "matcherOptions": {"wildCard": True, "ignoreCase": True, **matcher_options},
            }
        ],
        "accessTypes": [{"itemId": i, "name": n} for i, n in enumerate(["infer", "metadata", "list"], 1)],
    }


def item(
    users: list[str] | None = None,
    groups: list[str] | None = None,
    roles: list[str] | None = None,
    access: tuple[str, ...] = ("infer",),
    **extra: Any,
) -> Json:
    return {
        "users": users or [],
        "groups": groups or [],
        "roles": roles or [],
        "accesses": [{"type": a, "isAllowed": True} for a in access],
        **extra,
    }


def policy(
    pid: int,
    values: list[str],
    allow: list[Json] | None = None,
    deny: list[Json] | None = None,
    *,
    excludes: bool = False,
    **extra: Any,
) -> Json:
    return {
        "id": pid,
        "name": extra.pop("name", f"policy-{pid:03d}"),
        "version": extra.pop("version", 1),
        "isEnabled": True,
        "isAuditEnabled": True,
        "resources": {"model": {"values": values, "isExcludes": excludes, "isRecursive": False}},
        "policyItems": allow or [],
        "denyPolicyItems": deny or [],
        **extra,
    }


def engine(*policies: Json, roles: Json | None = None, sd: Json | None = None, **top: Any) -> Engine:
    super_users = frozenset(top.pop("super_users", ()))
    super_groups = frozenset(top.pop("super_groups", ()))
    document = {
        "serviceName": "triton",
        "serviceId": 7,
        "policyVersion": 42,
        "serviceDef": sd or service_def(),
        "auditMode": "audit-default",
        "policies": list(policies),
        **top,
    }
    return Engine.from_json(document, roles, super_users, super_groups)


def ask(
    e: Engine, user: str, model: str, access: str = "infer", groups: tuple[str, ...] = (), now: datetime = NOW
) -> Verdict:
    return e.evaluate(user, frozenset(groups), model, access, now=now)


ALICE_INFER = item(users=["alice"])


# ---- which policies count


def test_disabled_policies_are_dropped() -> None:
    e = engine(policy(1, ["m"], [ALICE_INFER], isEnabled=False))
    assert ask(e, "alice", "m") == Verdict(allowed=False, audited=False, policy_id=-1)


@pytest.mark.parametrize("policy_type", [1, 2])
def test_masking_and_row_filter_policies_do_not_decide_access(policy_type: int) -> None:
    e = engine(policy(1, ["m"], [ALICE_INFER], policyType=policy_type))
    assert ask(e, "alice", "m") == Verdict(allowed=False, audited=False, policy_id=-1)


# ---- super users and groups (RangerPolicyEngineImpl.isSuperUser)


def test_super_user_is_allowed_without_a_deciding_policy() -> None:
    e = engine(policy(1, ["m"], deny=[item(users=["root"])]), super_users={"root"})
    assert ask(e, "root", "m") == Verdict(allowed=True, audited=True, policy_id=-1)


def test_super_user_audit_still_follows_the_policies() -> None:
    e = engine(policy(1, ["m"], [ALICE_INFER], isAuditEnabled=False), super_users={"root"})
    assert ask(e, "root", "m") == Verdict(allowed=True, audited=False)
    assert ask(e, "root", "other") == Verdict(allowed=True, audited=False)


def test_super_group_and_service_config_super_users() -> None:
    e = engine(
        policy(1, ["m"]),
        super_groups={"wheel"},
        serviceConfig={"ranger.plugin.super.users": " carol , dave", "ranger.plugin.super.groups": "admins"},
    )
    assert ask(e, "bob", "m", groups=("wheel",)).allowed
    assert ask(e, "carol", "m").allowed
    assert ask(e, "dave", "m").allowed
    assert ask(e, "erin", "m", groups=("admins",)).allowed
    assert not ask(e, "erin", "m").allowed


def test_super_user_access_type() -> None:
    e = engine(policy(1, ["m"], [item(groups=["public"], access=("_super_user",))]), super_users={"root"})
    assert ask(e, "root", "m", "_super_user").allowed
    assert ask(e, "alice", "m", "_super_user") == Verdict(allowed=False, audited=True, policy_id=-1)


# ---- validity schedules (RangerValidityScheduleEvaluator)


def scheduled(*schedules: Json) -> Engine:
    return engine(policy(1, ["m"], [ALICE_INFER], validitySchedules=list(schedules)))


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc)


JUNE = {"startTime": "2025/06/01 00:00:00", "endTime": "2025/06/30 00:00:00"}
KOLKATA_8AM = {"startTime": "2025/06/01 08:00:00", "timeZone": "Asia/Kolkata"}


@pytest.mark.parametrize(
    ("schedule", "when", "applies"),
    [
        (JUNE, "2025-06-15T00:00", True),
        (JUNE, "2025-05-31T23:59:59", False),
        (JUNE, "2025-06-30T00:00:00", True),  # both bounds inclusive
        (JUNE, "2025-06-30T00:00:01", False),
        ({"startTime": "2025/06/01 00:00:00"}, "2099-01-01T00:00", True),
        ({"endTime": "2025/06/30 00:00:00"}, "2000-01-01T00:00", True),
        # the wall clock is read in timeZone: 08:00 in Kolkata is 02:30 UTC
        (KOLKATA_8AM, "2025-06-01T02:29:59", False),
        (KOLKATA_8AM, "2025-06-01T02:30:00", True),
        ({**KOLKATA_8AM, "timeZone": "GMT+05:30"}, "2025-06-01T02:30:00", True),
        ({**KOLKATA_8AM, "timeZone": "IST"}, "2025-06-01T02:30:00", True),  # Java's own short id
        ({**KOLKATA_8AM, "timeZone": "Nowhere/Land"}, "2025-06-01T07:59:59", False),  # unknown: GMT
        # SimpleDateFormat is lenient: June 31st is July 1st; blanks before numbers are skipped
        ({"startTime": "2025/06/31 00:00:00"}, "2025-06-30T23:59:59", False),
        ({"startTime": "2025/06/31 00:00:00"}, "2025-07-01T00:00:00", True),
        ({"startTime": " 2025/6/1 0:0:0"}, "2025-05-31T23:59:59", False),
        # an unparsable bound is dropped (Ranger logs it), so the schedule is open on that side
        ({"startTime": "2025-06-01 00:00:00", "endTime": "2025/06/30 00:00:00"}, "2000-01-01T00:00", True),
        ({"startTime": "2025/06/01\t00:00:00"}, "2000-01-01T00:00", True),
        # a recurrence without an interval always applies
        ({**JUNE, "recurrences": [{"schedule": {"minute": "0"}}]}, "2025-06-02T00:00", True),
    ],
)
def test_validity_schedule(schedule: Json, when: str, applies: bool) -> None:
    e = scheduled(schedule)
    expected = Verdict(True, True, 1, 1) if applies else Verdict(False, False, -1)
    assert ask(e, "alice", "m", now=at(when)) == expected


def test_any_schedule_may_apply() -> None:
    e = scheduled(
        {"startTime": "2025/01/01 00:00:00", "endTime": "2025/01/31 00:00:00"},
        {"startTime": "2025/06/01 00:00:00", "endTime": "2025/06/30 00:00:00"},
    )
    assert ask(e, "alice", "m", now=at("2025-01-15T00:00")).allowed
    assert not ask(e, "alice", "m", now=at("2025-03-15T00:00")).allowed
    assert ask(e, "alice", "m", now=at("2025-06-15T00:00")).allowed


def test_a_policy_outside_its_schedule_neither_denies_nor_audits() -> None:
    expired = policy(2, ["m"], deny=[ALICE_INFER], validitySchedules=[{"endTime": "2020/01/01 00:00:00"}])
    e = engine(policy(1, ["m"], [ALICE_INFER], isAuditEnabled=False), expired)
    assert ask(e, "alice", "m") == Verdict(True, False, 1, 1)


def test_naive_now_is_utc_and_default_now_is_the_clock() -> None:
    e = scheduled({"startTime": "2025/06/01 00:00:00", "endTime": "2025/06/30 00:00:00"})
    assert ask(e, "alice", "m", now=datetime(2025, 6, 15)).allowed
    assert not e.evaluate("alice", frozenset(), "m", "infer").allowed  # today is not June 2025


# ---- evaluation order and priorities (RangerPolicyEngineImpl, PolicyEvalOrderComparator)


ALLOW_ALICE = [ALICE_INFER]
DENY_ALICE = [ALICE_INFER]


@pytest.mark.parametrize(
    ("policies", "expected"),
    [
        pytest.param(
            [policy(1, ["m"], ALLOW_ALICE), policy(2, ["m"], deny=DENY_ALICE)],
            Verdict(False, True, 2, 1),
            id="normal: deny wins over allow",
        ),
        pytest.param(
            [policy(2, ["m"], deny=DENY_ALICE), policy(1, ["m"], ALLOW_ALICE)],
            Verdict(False, True, 2, 1),
            id="normal: deny wins in any download order",
        ),
        pytest.param(
            [policy(1, ["m"], deny=DENY_ALICE), policy(2, ["m"], ALLOW_ALICE, policyPriority=1)],
            Verdict(True, True, 2, 1),
            id="override allow beats normal deny",
        ),
        pytest.param(
            [
                policy(1, ["m"], ALLOW_ALICE, policyPriority=1),
                policy(2, ["m"], deny=DENY_ALICE, policyPriority=1),
            ],
            Verdict(False, True, 2, 1),
            id="override: deny wins over allow",
        ),
        pytest.param(
            [policy(1, ["m"], deny=DENY_ALICE, policyPriority=1), policy(2, ["m"], ALLOW_ALICE)],
            Verdict(False, True, 1, 1),
            id="normal allow does not beat override deny",
        ),
        pytest.param(
            # the override policy has deny items (not for alice), so its allow is not final at
            # its priority; the normal deny cannot overrule it anyway
            [
                policy(1, ["m"], ALLOW_ALICE, deny=[item(users=["bob"])], policyPriority=1),
                policy(2, ["m"], deny=DENY_ALICE),
            ],
            Verdict(True, True, 1, 1),
            id="override allow with deny items still beats normal deny",
        ),
        pytest.param(
            # evalOrder: "*" (9917) is scored before "m" (9941), so it decides
            [policy(1, ["m"], ALLOW_ALICE), policy(2, ["*"], ALLOW_ALICE)],
            Verdict(True, True, 2, 1),
            id="first allow in evaluation order decides",
        ),
        pytest.param(
            [policy(1, ["m"], ALLOW_ALICE, name="beta"), policy(2, ["m"], ALLOW_ALICE, name="alpha")],
            Verdict(True, True, 2, 1),
            id="equal score: by name",
        ),
        pytest.param(
            # a policy with deny items is evaluated first even when its score is worse
            [policy(1, ["*"], ALLOW_ALICE), policy(2, ["m"], ALLOW_ALICE, deny=[item(users=["bob"])])],
            Verdict(True, True, 2, 1),
            id="policies with deny items first",
        ),
    ],
)
def test_priority_and_order(policies: list[Json], expected: Verdict) -> None:
    assert ask(engine(*policies), "alice", "m") == expected


def test_evaluation_order() -> None:
    e = engine(
        policy(1, ["m"], ALLOW_ALICE, name="z-exact"),  # 10000 - 0 - 1 - 8 - 25
        policy(2, ["m*"], ALLOW_ALICE, name="y-prefix"),  # wildcard: -10
        policy(3, ["*"], [item(groups=["public"])], name="x-all"),  # any value -25, public -25
        policy(4, ["m"], deny=DENY_ALICE, name="w-deny"),
        policy(5, ["m"], ALLOW_ALICE, name="v-override", policyPriority=1),
        policy(6, ["{USER}"], ALLOW_ALICE, name="u-macro"),  # needs dynamic eval: +20
    )
    assert [(p.id, p.eval_order) for p in e.policies] == [
        (5, 9966),
        (4, 9966),
        (3, 9917),
        (2, 9956),
        (1, 9966),
        (6, 9986),
    ]


# ---- inside one policy (RangerDefaultPolicyEvaluator.evaluatePolicyItems)


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        pytest.param({"denyPolicyItems": [ALICE_INFER]}, Verdict(False, True, 1, 1), id="deny item"),
        pytest.param(
            {"denyPolicyItems": [ALICE_INFER], "denyExceptions": [ALICE_INFER]},
            Verdict(True, True, 1, 1),
            id="deny exception falls through to allow",
        ),
        pytest.param({"allowExceptions": [ALICE_INFER]}, Verdict(False, True, -1), id="allow exception"),
        pytest.param(
            {"allowExceptions": [ALICE_INFER], "isDenyAllElse": True},
            Verdict(False, True, 1, 1),
            id="allow exception then deny-all-else",
        ),
        pytest.param(
            {"policyItems": [], "isDenyAllElse": True}, Verdict(False, True, 1, 1), id="deny-all-else"
        ),
        pytest.param({"isDenyAllElse": True}, Verdict(True, True, 1, 1), id="deny-all-else after an allow"),
        pytest.param(
            {"allowExceptions": [item(users=["bob"])]},
            Verdict(True, True, 1, 1),
            id="exception for another user",
        ),
    ],
)
def test_items_of_one_policy(extra: Json, expected: Verdict) -> None:
    e = engine(policy(1, ["m"], [item(users=["alice", "bob"])], **extra))
    assert ask(e, "alice", "m") == expected


def test_deny_all_else_covers_other_users_and_access_types() -> None:
    e = engine(policy(1, ["m"], [ALICE_INFER], isDenyAllElse=True))
    assert ask(e, "bob", "m") == Verdict(False, True, 1, 1)
    assert ask(e, "alice", "m", "list") == Verdict(False, True, 1, 1)
    assert ask(e, "alice", "other") == Verdict(False, False, -1)


def test_service_def_can_disable_deny_items_and_exceptions() -> None:
    sd = service_def()
    sd["options"] = {"enableDenyAndExceptionsInPolicies": "false"}
    e = engine(
        policy(1, ["m"], [ALICE_INFER], deny=[ALICE_INFER], allowExceptions=[ALICE_INFER]),
        sd=sd,
    )
    assert ask(e, "alice", "m") == Verdict(True, True, 1, 1)


# ---- who an item names (RangerDefaultPolicyItemEvaluator.matchUserGroupAndOwner)


ROLES = {
    "serviceName": "triton",
    "roleVersion": 3,
    "rangerRoles": [
        {"name": "readers", "users": [{"name": "alice", "isAdmin": False}], "groups": [], "roles": []},
        {"name": "ml", "users": [], "groups": [{"name": "data", "isAdmin": False}], "roles": []},
        {"name": "all-staff", "users": [], "groups": [], "roles": [{"name": "readers"}, {"name": "ml"}]},
        {"name": "everyone", "users": [], "groups": [{"name": "public"}], "roles": []},
        {"name": "loop-a", "users": [{"name": "zed"}], "groups": [], "roles": [{"name": "loop-b"}]},
        {"name": "loop-b", "users": [], "groups": [], "roles": [{"name": "loop-a"}]},
    ],
}


@pytest.mark.parametrize(
    ("who", "user", "groups", "allowed"),
    [
        ({"users": ["alice"]}, "alice", (), True),
        ({"users": ["alice"]}, "Alice", (), False),  # user names are case-sensitive
        ({"users": ["{USER}"]}, "anyone", (), True),
        ({"users": ["{user}"]}, "anyone", (), False),  # only the exact macro
        ({"groups": ["public"]}, "anyone", (), True),
        ({"groups": ["data"]}, "bob", ("data",), True),
        ({"groups": ["data"]}, "bob", ("ops",), False),
        ({"roles": ["readers"]}, "alice", (), True),
        ({"roles": ["readers"]}, "bob", (), False),
        ({"roles": ["ml"]}, "bob", ("data",), True),  # through a group
        ({"roles": ["all-staff"]}, "alice", (), True),  # nested: readers is in all-staff
        ({"roles": ["all-staff"]}, "bob", ("data",), True),
        ({"roles": ["everyone"]}, "bob", (), True),  # a role of the group public
        ({"roles": ["loop-b"]}, "zed", (), True),  # cycles are fine
        ({"roles": ["ghost"]}, "alice", (), False),
    ],
)
def test_item_members(who: Json, user: str, groups: tuple[str, ...], allowed: bool) -> None:
    e = engine(policy(1, ["m"], [item(**who)]), roles=ROLES)
    assert ask(e, user, "m", groups=groups).allowed is allowed


def test_roles_of_a_user() -> None:
    e = engine(roles=ROLES)
    assert e.roles.of("alice", ["data"]) == {"readers", "ml", "all-staff", "everyone"}
    assert e.roles.of("nobody", []) == {"everyone"}
    assert e.roles.version == 3


# ---- access types (RangerDefaultPolicyItemEvaluator.isMatch)


def test_access_type_is_compared_ignoring_case() -> None:
    e = engine(policy(1, ["m"], [item(users=["alice"], access=("Infer",))]))
    assert ask(e, "alice", "m", "INFER").allowed
    assert not ask(e, "alice", "m", "metadata").allowed


def test_access_not_allowed_in_the_item_grants_nothing() -> None:
    access = item(users=["alice"])
    access["accesses"] = [{"type": "infer", "isAllowed": False}]
    assert not ask(engine(policy(1, ["m"], [access])), "alice", "m").allowed


def test_delegate_admin_grants_only_admin() -> None:
    e = engine(policy(1, ["m"], [item(users=["alice"], access=("list",), delegateAdmin=True)]))
    assert not ask(e, "alice", "m", "infer").allowed
    assert ask(e, "alice", "m", "list").allowed
    assert ask(e, "alice", "m", "_admin").allowed
    assert not ask(engine(policy(1, ["m"], [ALICE_INFER])), "alice", "m", "_admin").allowed


def test_implied_grants() -> None:
    sd = service_def()
    sd["accessTypes"][0]["impliedGrants"] = ["metadata", "list"]
    e = engine(policy(1, ["m"], [ALICE_INFER]), sd=sd)
    assert ask(e, "alice", "m", "list").allowed


def test_implied_grants_are_one_pass_in_java_hash_order() -> None:
    # infer -> metadata -> list: 'list' is reached only if infer's entry comes first in the
    # HashMap; java_hash_order says it does not ("metadata" hashes to an earlier bucket)
    sd = service_def()
    sd["accessTypes"][0]["impliedGrants"] = ["metadata"]
    sd["accessTypes"][1]["impliedGrants"] = ["list"]
    assert java_hash_order(["infer", "metadata"]) == ["metadata", "infer"]
    e = engine(policy(1, ["m"], [ALICE_INFER]), sd=sd)
    assert ask(e, "alice", "m", "metadata").allowed
    assert not ask(e, "alice", "m", "list").allowed


@pytest.mark.parametrize("access", ["", "_any"])
def test_any_access_is_refused(access: str) -> None:
    with pytest.raises(ValueError, match="any access"):
        ask(engine(), "alice", "m", access)


# ---- resources (RangerDefaultResourceMatcher, RangerAbstractResourceMatcher)


@pytest.mark.parametrize(
    ("values", "options", "model", "allowed"),
    [
        (["resnet50"], {}, "ResNet50", True),  # ignoreCase
        (["resnet50"], {"ignoreCase": False}, "ResNet50", False),
        (["resnet*"], {}, "resnet101", True),
        (["resnet*"], {}, "bert", False),
        (["*-prod"], {}, "bert-PROD", True),
        (["b*t-*d"], {}, "bert-prod", True),
        (["b?rt"], {}, "bert", True),
        (["b?rt"], {}, "brt", False),
        (["*"], {}, "anything", True),
        (["*"], {"wildCard": False}, "anything", False),  # a literal '*'
        (["*"], {"wildCard": False}, "*", False),  # a '*' request still asks for every value
        (["a", "", "b"], {}, "b", True),  # empty values are dropped
        ([], {}, "anything", True),  # no value at all: matches anything
        (["", ""], {}, "anything", True),
        (["{USER}"], {}, "Alice", True),  # the requesting user (alice)
        (["{USER}"], {}, "bob", False),
        (["home-{USER}-*"], {}, "home-alice-v2", True),
        (["\\{USER}"], {}, "{USER}", True),  # escaped: no token
        (["\\{USER}"], {}, "alice", False),
        (["{USER}"], {"replaceTokens": False}, "{USER}", True),
        (["%USER%"], {"tokenDelimiterStart": "%", "tokenDelimiterEnd": "%"}, "alice", True),
        (["{OWNER}"], {}, "{OWNER}", True),  # no owner: the token stays
        (["m"], {}, "*", False),  # asking for every model matches only '*' policies
        (["*"], {}, "*", True),
        (["*"], {}, "", True),
    ],
)
def test_resource_values(values: list[str], options: Json, model: str, allowed: bool) -> None:
    e = engine(policy(1, values, [ALICE_INFER]), sd=service_def(**options))
    assert ask(e, "alice", model).allowed is allowed


@pytest.mark.parametrize(
    ("values", "model", "allowed"),
    [
        (["secret*"], "resnet", True),
        (["secret*"], "secret-1", False),
        (["*"], "resnet", False),  # excluding everything matches nothing
        (["secret*"], "*", False),  # every value requested: excludes has no effect
        (["*"], "*", False),
    ],
)
def test_excludes(values: list[str], model: str, allowed: bool) -> None:
    e = engine(policy(1, values, [ALICE_INFER], excludes=True))
    assert ask(e, "alice", model).allowed is allowed


def test_additional_resources() -> None:
    e = engine(policy(1, ["resnet"], [ALICE_INFER], additionalResources=[{"model": {"values": ["bert"]}}]))
    assert ask(e, "alice", "resnet").allowed
    assert ask(e, "alice", "bert").allowed
    assert not ask(e, "alice", "gpt").allowed


def test_resources_outside_the_service_def_never_match() -> None:
    odd = policy(1, ["m"], [ALICE_INFER])
    odd["resources"]["other"] = {"values": ["x"]}
    e = engine(odd, policy(2, [], [ALICE_INFER], resources={}))
    assert ask(e, "alice", "m") == Verdict(False, False, -1)


def test_roles_token_is_java_set_to_string() -> None:
    # the roles' HashSet prints in bucket order: "r2" hashes to bucket 0, "r1" to 15
    roles = {"rangerRoles": [{"name": n, "users": [{"name": "alice"}]} for n in ("r1", "r2")]}
    e = engine(policy(1, ["{ROLES}"], [ALICE_INFER]), roles=roles)
    assert ask(e, "alice", "[r2, r1]").allowed
    assert not ask(e, "alice", "[r1, r2]").allowed


# ---- Java's string comparison, reproduced


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        ("ResNet", "resnet", True),
        ("straße", "STRASSE", False),  # no multi-char mappings
        ("İ", "i", True),
        ("\u0131", "I", True),  # dotless i
        ("\u017f", "S", True),  # long s
        ("K", "k", True),  # Kelvin sign
        ("\U00010400", "\U00010428", True),  # a surrogate pair compared as one character
    ],
)
def test_java_fold(a: str, b: str, equal: bool) -> None:
    assert (java_fold(a) == java_fold(b)) is equal


def test_the_trie_skips_what_ranger_skips() -> None:
    # Ranger's trie steps by Character.toLowerCase (dotless i stays itself, 'İ' becomes 'i')
    # before the matcher's equalsIgnoreCase would say yes: the policy is never looked at.
    e = engine(policy(1, ["İstanbul"], [ALICE_INFER]))
    assert ask(e, "alice", "istanbul").allowed
    assert not ask(e, "alice", "\u0131stanbul").allowed
    # and it splits a node at a shared non-ASCII char (boxed Characters compared with !=)
    e = engine(
        policy(1, ["\U00010428?"], [item(groups=["public"])]),
        policy(2, ["\U00010428Σ"], [item(groups=["public"])]),
    )
    assert ask(e, "alice", "\U00010428i").allowed
    assert not ask(e, "alice", "\U00010400i").allowed


@pytest.mark.parametrize(
    ("value", "expanded"),
    [
        ("{USER}", "alice"),
        ("a{USER}b{USER}", "aalicebalice"),
        ("\\{USER}", "{USER}"),
        ("\\\\{USER}", "\\alice"),
        ("\\x", "\\x"),
        ("{UNKNOWN}", "{UNKNOWN}"),
        ("{USER", "{USER"),
        ("end\\", "end\\"),
    ],
)
def test_token_replacement(value: str, expanded: str) -> None:
    assert TokenSyntax().replace(value, {"USER": "alice"}) == expanded


# ---- audit (RangerDefaultPolicyEvaluator.evaluate, RangerPolicyEngineImpl.createAccessResult)


@pytest.mark.parametrize(
    ("mode", "user", "model", "audited"),
    [
        ("audit-all", "bob", "other", True),
        ("audit-none", "alice", "m", False),
        ("audit-default", "alice", "m", True),
        ("audit-default", "bob", "m", True),  # the resource matched: audited whoever asks
        ("audit-default", "bob", "other", False),
        (None, "bob", "m", True),  # anything else is audit-default
    ],
)
def test_audit_mode(mode: str | None, user: str, model: str, audited: bool) -> None:
    e = engine(policy(1, ["m"], [ALICE_INFER]), auditMode=mode)
    assert ask(e, user, model).audited is audited


def test_audit_follows_the_first_matching_policy_that_audits() -> None:
    quiet = policy(1, ["m"], deny=[ALICE_INFER], isAuditEnabled=False)
    assert ask(engine(quiet), "alice", "m") == Verdict(False, False, 1, 1)
    loud = policy(2, ["*"], [item(users=["bob"])])
    assert ask(engine(quiet, loud), "alice", "m") == Verdict(False, True, 1, 1)


def test_a_service_without_policies_audits_everything() -> None:
    assert ask(engine(), "alice", "m") == Verdict(False, True, -1)
    # disabled policies still count as policies
    assert ask(engine(policy(1, ["m"], isEnabled=False)), "alice", "m") == Verdict(False, False, -1)
    # as does a tag service
    tags = {"serviceName": "tags", "serviceDef": {"name": "tag"}, "policies": []}
    assert ask(engine(tagPolicies=tags), "alice", "m") == Verdict(False, False, -1)


def test_audit_excluded_users_groups_and_roles() -> None:
    config = {
        "ranger.plugin.audit.exclude.users": "svc",
        "ranger.plugin.audit.exclude.groups": "robots",
        "ranger.plugin.audit.exclude.roles": "ml",
    }
    e = engine(
        policy(1, ["m"], [item(groups=["public"])]), roles=ROLES, serviceConfig=config, auditMode="audit-all"
    )
    assert ask(e, "svc", "m") == Verdict(True, False, 1, 1)
    assert not ask(e, "bob", "m", groups=("robots",)).audited
    assert not ask(e, "bob", "m", groups=("data",)).audited  # role ml through group data
    assert ask(e, "bob", "m").audited


# ---- the rest of the result


def test_nothing_decides_means_denied() -> None:
    e = engine(policy(1, ["m"], [ALICE_INFER]))
    assert ask(e, "bob", "m") == Verdict(False, True, -1, None)


def test_versions() -> None:
    e = engine(policy(1, ["m"], [ALICE_INFER], version=7))
    assert ask(e, "alice", "m").policy_version == 7
    assert e.policy_version == 42
    assert e.service_name == "triton"


# ---- what the engine refuses rather than guesses


HOURLY = {"interval": {"hours": 1}, "schedule": {"minute": "0"}}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"securityZones": {"z": {"policies": []}}}, "security zones"),
        ({"policyDeltas": [{"changeType": 1}]}, "policy deltas"),
        ({"serviceDef": None}, "serviceDef: missing"),
        ({"serviceDef": {**service_def(), "resources": []}}, "exactly one"),
        ({"serviceDef": {**service_def(), "resources": [{"name": "model", "matcher": "x.Path"}]}}, "matcher"),
        ({"serviceDef": service_def(quotedCaseSensitive="true")}, "quotedCaseSensitive"),
        ({"policies": [policy(1, ["${{USER.dept}}"])]}, "request expressions"),
        ({"policies": [policy(1, ["m"], validitySchedules=[{"recurrences": [HOURLY]}])]}, "recurring"),
    ],
)
def test_unsupported(change: Json, message: str) -> None:
    document = {"serviceName": "triton", "serviceDef": service_def(), "policies": [], **change}
    with pytest.raises(PolicyError, match=message):
        Engine.from_json(document)


def test_policy_conditions() -> None:
    ip_range = {"type": "ip-range", "values": ["10.0.0.0/8"]}
    conditioned = policy(1, ["m"], [item(users=["alice"], conditions=[ip_range])])
    # a condition type the service definition does not declare is dropped, as Ranger drops it
    assert ask(engine(conditioned), "alice", "m").allowed
    sd = service_def()
    sd["policyConditions"] = [{"itemId": 1, "name": "ip-range", "evaluator": "x.IpRange"}]
    with pytest.raises(PolicyError, match=r"policy 1 .*ip-range"):
        engine(conditioned, sd=sd)
