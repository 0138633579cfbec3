"""tarn.ranger.registration over a fake Ranger Admin: the one reconcile (read → compare → skip in
check mode → write → re-read) for the service def, the service and the policies, as a table."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from tarn.errors import ConfigError
from tarn.ranger.admin import RangerAdminError
from tarn.ranger.registration import register
from tarn.ranger.registration_plan import declare, triton_service_def
from tests.support.ranger_fake_admin import FakeAdmin

SERVICE = "triton_prod"
ALICE = {
    "name": "alice-add",
    "resources": {"model": {"values": ["add_*"]}},
    "policyItems": [{"users": ["alice"], "accesses": ["infer", "list"]}],
}
BOB = {
    "name": "bob-linear",
    "resources": {"model": ["linear_onnx"]},
    "policyItems": [{"users": ["bob"], "accesses": [{"type": "list"}]}],
}
MALLORY = {
    "name": "mallory-all",
    "resources": {"model": ["*"]},
    "policyItems": [{"users": ["mallory"], "accesses": ["list"]}],
}
DECLARED: dict[str, Any] = {"policies": [ALICE, BOB]}


def run(admin: FakeAdmin, check_mode: bool = False, done: list[str] | None = None, **options: Any) -> Any:
    """One registration, as the module makes it: every option declared, then registered."""
    flags = {k: options.pop(k) for k in ("purge_policies", "create_principals") if k in options}
    declared = declare(options.pop("service_def", None), SERVICE, **{**DECLARED, **options})
    return register(admin, declared, check_mode, done=[] if done is None else done, **flags)


def registered(**options: Any) -> FakeAdmin:
    """Admin once the declaration (with ``options``) is registered."""
    admin = FakeAdmin()
    run(admin, **options)
    admin.calls.clear()
    return admin


def edited(policy: dict[str, Any], edit: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    changed = copy.deepcopy(policy)
    edit(changed)
    return changed


def with_access(name: str) -> dict[str, Any]:
    sdef = triton_service_def()
    sdef["accessTypes"].append({"itemId": 4, "name": name, "label": name})
    return sdef


# (case, Admin before, options, check mode, actions, writes, the policies' (action, version) after)
CASES = [
    (
        "a fresh Admin: everything created",
        FakeAdmin,
        {},
        False,
        [
            "create service def triton",
            f"create service {SERVICE}",
            "create policy alice-add",
            "create policy bob-linear",
        ],
        [
            "POST servicedef triton",
            f"POST service {SERVICE}",
            "POST policy alice-add",
            "POST policy bob-linear",
        ],
        [("create", 1), ("create", 1)],
    ),
    (
        "a fresh Admin in check mode: reported, nothing written",
        FakeAdmin,
        {},
        True,
        [
            "create service def triton",
            f"create service {SERVICE}",
            "create policy alice-add",
            "create policy bob-linear",
        ],
        [],
        [("create", None), ("create", None)],
    ),
    ("registered: nothing to do", registered, {}, False, [], [], [("keep", 1), ("keep", 1)]),
    ("registered, check mode: nothing to do", registered, {}, True, [], [], [("keep", 1), ("keep", 1)]),
    (
        "a policy changed: that one updated, its next version read back",
        registered,
        {"policies": [ALICE, edited(BOB, lambda p: p["resources"]["model"].append("identity"))]},
        False,
        ["update policy bob-linear (resources)"],
        ["PUT policy bob-linear"],
        [("keep", 1), ("update", 2)],
    ),
    (
        "a policy changed, check mode: reported, not written",
        registered,
        {"policies": [edited(ALICE, lambda p: p["policyItems"][0]["accesses"].pop()), BOB]},
        True,
        ["update policy alice-add (policyItems)"],
        [],
        [("update", 1), ("keep", 1)],
    ),
    (
        "a policy added",
        registered,
        {"policies": [ALICE, BOB, {"name": "new", "resources": {"model": ["x"]}}]},
        False,
        ["create policy new"],
        ["POST policy new"],
        [("keep", 1), ("keep", 1), ("create", 1)],
    ),
    (
        "a policy no longer declared is kept without purge",
        registered,
        {"policies": [ALICE]},
        False,
        [],
        [],
        [("keep", 1)],
    ),
    (
        "a policy no longer declared, purged",
        registered,
        {"policies": [ALICE], "purge_policies": True},
        False,
        ["delete policy bob-linear"],
        ["DELETE policy bob-linear"],
        [("keep", 1), ("delete", 1)],
    ),
    (
        "the service def changed",
        registered,
        {"service_def": with_access("unload")},
        False,
        ["update service def triton (accessTypes)"],
        ["PUT servicedef triton"],
        [("keep", 1), ("keep", 1)],
    ),
    (
        "the service changed",
        registered,
        {"description": "production", "enabled": False},
        False,
        [f"update service {SERVICE} (description, isEnabled)"],
        [f"PUT service {SERVICE}"],
        [("keep", 1), ("keep", 1)],
    ),
    (
        "a password config cannot be compared: unchanged",
        lambda: registered(configs={"password": "s3cret"}),
        {"configs": {"password": "another"}},
        False,
        [],
        [],
        [("keep", 1), ("keep", 1)],
    ),
    (
        "Ranger's default policy of a service just made is seen, and purged, in the same run",
        FakeAdmin,
        {"configs": {"username": "tarn"}, "purge_policies": True},
        False,
        [
            "create service def triton",
            f"create service {SERVICE}",
            "create policy alice-add",
            "create policy bob-linear",
            "delete policy all - model",
        ],
        [
            "POST servicedef triton",
            f"POST service {SERVICE}",
            "POST policy alice-add",
            "POST policy bob-linear",
            "DELETE policy all - model",
        ],
        [("create", 1), ("create", 1), ("delete", 1)],
    ),
    (
        "Ranger's default policy is kept unless purged",
        lambda: registered(configs={"username": "tarn"}),
        {"configs": {"username": "tarn"}},
        False,
        [],
        [],
        [("keep", 1), ("keep", 1)],
    ),
    (
        "a principal Admin lacks, created with create_principals",
        registered,
        {"policies": [ALICE, BOB, MALLORY], "create_principals": True},
        False,
        ["create policy mallory-all"],
        ["POST policy mallory-all"],
        [("keep", 1), ("keep", 1), ("create", 1)],
    ),
]


@pytest.mark.parametrize(
    ("admin", "options", "check_mode", "actions", "writes", "after"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_register(
    admin: Callable[[], FakeAdmin],
    options: dict[str, Any],
    check_mode: bool,
    actions: list[str],
    writes: list[str],
    after: list[tuple[str, int | None]],
) -> None:
    fake = admin()
    done: list[str] = []
    result = run(fake, check_mode, done, **copy.deepcopy(options))
    assert done == actions
    assert fake.writes == writes
    assert [(p["action"], p.get("version")) for p in result.policies] == after
    if not check_mode:
        written = len(fake.writes)
        again = run(fake, **copy.deepcopy(options))
        assert (len(fake.writes), {p["action"] for p in again.policies}) == (written, {"keep"}), (
            "then nothing"
        )


def test_each_write_is_followed_by_a_read_and_the_policies_are_read_after_the_service() -> None:
    admin = FakeAdmin()
    run(admin, policies=[ALICE])
    assert admin.calls == [
        "GET servicedef triton",
        "POST servicedef triton",
        "GET servicedef triton",
        f"GET service {SERVICE}",
        f"POST service {SERVICE}",
        f"GET service {SERVICE}",
        f"GET policies {SERVICE}",
        "POST policy alice-add",
        f"GET policies {SERVICE}",
    ]


def test_what_is_returned_is_read_back_after_the_writes() -> None:
    admin = registered()
    result = run(admin, service_def=with_access("unload"), description="production")
    assert result.service_def == {"id": 1, "name": "triton", "version": 2}
    assert result.service == {"id": 2, "name": SERVICE, "type": "triton", "policyVersion": 3}
    assert result.policies == [
        {"id": 3, "version": 1, "name": "alice-add", "action": "keep"},
        {"id": 4, "version": 1, "name": "bob-linear", "action": "keep"},
    ]


def test_in_check_mode_what_is_returned_is_what_admin_has() -> None:
    fresh = run(FakeAdmin(), check_mode=True)
    assert (fresh.service_def, fresh.service) == ({}, {})
    assert fresh.policies == [
        {"name": "alice-add", "action": "create"},
        {"name": "bob-linear", "action": "create"},
    ]
    changed = run(registered(), check_mode=True, service_def=with_access("unload"))
    assert changed.service_def == {"id": 1, "name": "triton", "version": 1}


def test_the_diff_shows_the_compared_fields_before_and_after() -> None:
    fresh = run(FakeAdmin(), check_mode=True)
    assert fresh.before == {"service_def": {}, "service": {}, "policies": {}}
    assert list(fresh.after["policies"]) == ["alice-add", "bob-linear"]
    assert fresh.after["service"] == {"name": SERVICE, "type": "triton", "isEnabled": True}

    more = edited(BOB, lambda p: p["resources"]["model"].append("identity"))
    secret = {"password": "s3cret"}
    result = run(registered(configs=secret), policies=[ALICE, more], configs=secret)
    before, after = result.before, result.after
    assert [k for k in ("service_def", "service") if before[k] != after[k]] == []
    assert [n for n in after["policies"] if before["policies"][n] != after["policies"][n]] == ["bob-linear"]
    assert before["policies"]["bob-linear"]["resources"]["model"]["values"] == ["linear_onnx"]
    assert after["policies"]["bob-linear"]["resources"]["model"]["values"] == ["linear_onnx", "identity"]
    assert after["service"]["configs"] == {"password": "*****"}, "a password is never shown"


def test_a_refused_policy_names_the_principal_and_the_option_and_keeps_what_was_done() -> None:
    admin = FakeAdmin()
    done: list[str] = []
    with pytest.raises(RangerAdminError) as raised:
        run(admin, done=done, policies=[ALICE, MALLORY, BOB])
    message = str(raised.value)
    assert "policies: policy 'mallory-all' names the user 'mallory'" in message
    assert "create_principals_if_absent" in message
    assert done == ["create service def triton", f"create service {SERVICE}", "create policy alice-add"]
    assert admin.writes[-1] == "POST policy mallory-all"


def test_a_bad_declaration_sends_nothing() -> None:
    admin = FakeAdmin()
    with pytest.raises(ConfigError, match="policies: policy 'p': resources are needed"):
        run(admin, policies=[ALICE, {"name": "p"}])
    with pytest.raises(ConfigError, match="given more than once: alice-add"):
        run(admin, policies=[ALICE, ALICE])
    assert admin.calls == []
