"""The Ranger plugin's state (tarn.ranger.state, pure): what a poll or the cache changes, the
decision it gives (failing closed) and how current the policies are."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tarn.ranger.state import (
    Documents,
    PolicyState,
    from_cache,
    health,
    polled,
    user_groups,
    verdict,
)
from tests.support.ranger_documents import BASIC, USERS, allow, policies, roles, user_store

NOW = 1_750_000_000.0
LOADED = polled(PolicyState(), Documents(BASIC, roles(1), USERS), [], NOW)


@pytest.mark.parametrize(
    ("state", "user", "model", "access", "allowed"),
    [
        (PolicyState(), "alice", "add_one", "list", False),  # nothing loaded: denied
        (LOADED, "alice", "add_one", "list", True),  # through her group, from the user store
        (LOADED, "alice", "add_one", "metadata", False),
        (LOADED, "alice", "linear_onnx", "list", False),
        (LOADED, "bob", "linear_onnx", "list", True),
        (LOADED, "bob", "add_one", "list", False),
        (LOADED, "carol", "add_one", "list", False),  # in no group, named nowhere
        (LOADED, None, "add_one", "list", False),  # no user: denied
        (LOADED, "", "linear_onnx", "list", False),
    ],
)
def test_verdict(state: PolicyState, user: str | None, model: str, access: str, allowed: bool) -> None:
    assert verdict(state, user, model, access).allowed is allowed


def test_super_users_are_allowed_once_policies_are_loaded_and_denied_before() -> None:
    loaded = polled(PolicyState(), Documents(BASIC), [], NOW, super_users=frozenset({"root"}))
    assert verdict(loaded, "root", "anything", "infer").allowed
    assert not verdict(PolicyState(), "root", "anything", "infer").allowed


def test_a_good_poll_loads_and_confirms() -> None:
    assert (LOADED.source, LOADED.confirmed_at, LOADED.activated_at, LOADED.error) == (
        "admin",
        NOW,
        NOW,
        None,
    )
    d = LOADED.documents
    assert (d.policy_version, d.role_version, d.user_store_version) == (3, 1, 1)
    assert LOADED.groups == {"alice": frozenset({"ml-team"}), "bob": frozenset({"analysts"})}


def test_an_unchanged_poll_confirms_without_rebuilding() -> None:
    later = polled(LOADED, Documents(), [], NOW + 30)
    assert later.engine is LOADED.engine
    assert (later.confirmed_at, later.activated_at) == (NOW + 30, NOW)


def test_a_failed_poll_keeps_the_last_good_policies_and_counts() -> None:
    failed = polled(LOADED, Documents(), ["no Ranger Admin answered"], NOW + 30)
    assert failed.engine is LOADED.engine
    assert (failed.confirmed_at, failed.attempted_at, failed.failures) == (NOW, NOW + 30, 1)
    assert failed.error == "no Ranger Admin answered"
    assert verdict(failed, "alice", "add_one", "list").allowed
    recovered = polled(failed, Documents(), [], NOW + 60)
    assert (recovered.error, recovered.failures, recovered.confirmed_at) == (None, 1, NOW + 60)


def test_a_failed_first_poll_denies_everything() -> None:
    failed = polled(PolicyState(), Documents(), ["no Ranger Admin answered"], NOW)
    assert (failed.loaded, failed.source, failed.failures) == (False, "none", 1)
    assert not verdict(failed, "alice", "add_one", "list").allowed


def test_new_policies_that_do_not_compile_are_not_applied() -> None:
    deltas = policies(4, policyDeltas=[{"changeType": 1}])
    state = polled(LOADED, Documents(deltas), [], NOW + 30)
    assert state.documents == LOADED.documents
    assert state.engine is LOADED.engine
    assert state.error is not None
    assert "policies version 4 not applied" in state.error
    assert (state.failures, state.confirmed_at) == (1, NOW)


def test_new_policies_with_a_failed_download_beside_them_apply_but_stay_unconfirmed() -> None:
    newer = policies(4, allow(1, ["*"], ["list"], users=["carol"]))
    state = polled(LOADED, Documents(newer), ["roles: answered 500"], NOW + 30)
    assert verdict(state, "carol", "linear_onnx", "list").allowed
    assert (state.source, state.confirmed_at, state.activated_at) == ("admin", NOW, NOW + 30)
    assert health(state, NOW + 30).status == "stale"


def test_a_new_user_store_changes_the_groups() -> None:
    moved = polled(LOADED, Documents(user_store=user_store(2, {"carol": ["ml-team"]})), [], NOW + 30)
    assert verdict(moved, "carol", "add_one", "list").allowed
    assert not verdict(moved, "alice", "add_one", "list").allowed


def test_the_cache_is_used_only_while_nothing_is_loaded() -> None:
    cached = Documents(BASIC, roles(1), USERS)
    state = from_cache(PolicyState(), cached, NOW - 600, NOW)
    assert (state.source, state.confirmed_at, state.activated_at) == ("cache", NOW - 600, NOW)
    assert verdict(state, "alice", "add_one", "list").allowed
    assert from_cache(LOADED, Documents(policies(1)), NOW, NOW) is LOADED
    assert from_cache(PolicyState(), Documents(), NOW, NOW) == PolicyState()
    bad = from_cache(PolicyState(), Documents(policies(2, securityZones={"z": {}})), NOW, NOW)
    assert (bad.loaded, bad.cache_problem is not None) == (False, True)


@pytest.mark.parametrize(
    ("state", "status", "age", "words"),
    [
        (PolicyState(), "missing", None, "every model is denied"),
        (
            replace(PolicyState(), error="no Ranger Admin answered"),
            "missing",
            None,
            "no Ranger Admin answered",
        ),
        (LOADED, "current", 10.0, "policies version 3, confirmed 10 s ago"),
        (
            polled(LOADED, Documents(), ["refused"], NOW + 5),
            "stale",
            10.0,
            "are stale, confirmed 10 s ago; refused",
        ),
        (
            from_cache(PolicyState(), Documents(BASIC), NOW - 90, NOW),
            "stale",
            100.0,
            "from the cache of 100 s ago",
        ),
    ],
)
def test_health(state: PolicyState, status: str, age: float | None, words: str) -> None:
    found = health(state, NOW + 10)
    assert (found.status, found.age_s) == (status, age)
    assert words in found.text
    assert found.policy_version == state.documents.policy_version


@pytest.mark.parametrize(
    ("store", "groups"),
    [
        (None, {}),
        ({}, {}),
        ({"userGroupMapping": None}, {}),
        ({"userGroupMapping": ["not", "a", "map"]}, {}),
        (
            {"userGroupMapping": {"a": ["g1", "g2"], "b": None}},
            {"a": frozenset({"g1", "g2"}), "b": frozenset()},
        ),
    ],
)
def test_user_groups(store: dict[str, object] | None, groups: dict[str, frozenset[str]]) -> None:
    assert user_groups(store) == groups
