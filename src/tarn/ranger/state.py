"""What the controller's Ranger plugin holds, how a poll or the cache changes it, and the decision
it gives (pure: no I/O, no clock; tarn.ranger.refresher does the downloads and the files).

The plugin keeps the last good documents Ranger Admin sent (ServicePolicies, RangerRoles,
RangerUserStore) and the engine compiled from them. It fails closed: with no policies every check
is denied; a poll that fails, or a document that does not compile, keeps the last good ones and
marks them stale. A user's groups are those of the user store's ``userGroupMapping`` (the
controller has no OS group mapping of the cluster's users).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from tarn.ranger.engine import Engine, Verdict

JSON = dict[str, Any]
Source = Literal["none", "cache", "admin"]
Status = Literal["current", "stale", "missing"]
# Nothing loaded: denied. Audited, as Ranger audits every request to a service with no policies.
NOTHING_LOADED = Verdict(allowed=False, audited=True)
NO_USER = Verdict(allowed=False, audited=True)


@dataclass(frozen=True)
class Documents:
    """Ranger Admin's three plugin documents, as downloaded (None: not held)."""

    policies: JSON | None = None
    roles: JSON | None = None
    user_store: JSON | None = None

    @property
    def policy_version(self) -> int:
        return _version(self.policies, "policyVersion")

    @property
    def role_version(self) -> int:
        return _version(self.roles, "roleVersion")

    @property
    def user_store_version(self) -> int:
        return _version(self.user_store, "userStoreVersion")

    def updated(self, sent: Documents) -> Documents:
        """These documents with the ones Admin sent replacing theirs."""
        return Documents(
            sent.policies if sent.policies is not None else self.policies,
            sent.roles if sent.roles is not None else self.roles,
            sent.user_store if sent.user_store is not None else self.user_store,
        )


@dataclass(frozen=True)
class PolicyState:
    """The plugin's state; ``engine`` is None until policies were loaded (then every check is denied)."""

    documents: Documents = Documents()
    engine: Engine | None = None
    groups: Mapping[str, frozenset[str]] = field(default_factory=dict)  # user -> groups (user store)
    source: Source = "none"
    confirmed_at: float | None = None  # wall clock: policies last known current (Admin; or the cache's time)
    activated_at: float = 0.0  # wall clock the held policies took effect (Ranger's lastActivationTime)
    attempted_at: float | None = None  # the last poll
    error: str | None = None  # the last poll's failure; None when it succeeded
    failures: int = 0  # polls that failed, in all
    cache_problem: str | None = None

    @property
    def loaded(self) -> bool:
        return self.engine is not None


@dataclass(frozen=True)
class Health:
    """How current the policies in force are, for /metrics and the dashboard."""

    status: Status
    policy_version: int
    age_s: float | None  # since the policies were last confirmed; None: never
    text: str


def compiled(
    documents: Documents, super_users: frozenset[str], super_groups: frozenset[str]
) -> tuple[Engine, dict[str, frozenset[str]]] | None:
    """The engine and the user → groups map of ``documents``; None without policies. Raises what
    Engine.from_json raises on documents it cannot take (PolicyError, or a malformed field)."""
    if documents.policies is None:
        return None
    engine = Engine.from_json(documents.policies, documents.roles, super_users, super_groups)
    return engine, user_groups(documents.user_store)


def user_groups(user_store: JSON | None) -> dict[str, frozenset[str]]:
    """RangerUserStore's userGroupMapping: user → groups."""
    mapping = (user_store or {}).get("userGroupMapping") or {}
    if not isinstance(mapping, dict):
        return {}
    return {str(user): frozenset(str(g) for g in groups or ()) for user, groups in mapping.items()}


def polled(
    state: PolicyState,
    sent: Documents,
    errors: Sequence[str],
    now: float,
    super_users: frozenset[str] = frozenset(),
    super_groups: frozenset[str] = frozenset(),
) -> PolicyState:
    """The state after one poll: ``sent`` holds what Admin sent (None where unchanged or failed),
    ``errors`` what failed. New documents replace the held ones only if they compile."""
    problems = list(errors)
    documents = state.documents.updated(sent)
    engine, groups, activated_at = state.engine, state.groups, state.activated_at
    if documents != state.documents:
        try:
            built = compiled(documents, super_users, super_groups)
        except Exception as exc:  # a document TARN cannot take must not replace the last good one
            problems.append(f"policies version {documents.policy_version} not applied: {exc}")
            documents = state.documents
        else:
            if built is not None:
                (engine, groups), activated_at = built, now
    ok = not problems
    fresh = ok or engine is not state.engine  # confirmed by Admin now, or just downloaded from it
    return replace(
        state,
        documents=documents,
        engine=engine,
        groups=groups,
        source="none" if engine is None else "admin" if fresh else state.source,
        confirmed_at=now if ok and engine is not None else state.confirmed_at,
        activated_at=activated_at,
        attempted_at=now,
        error="; ".join(problems) or None,
        failures=state.failures + (0 if ok else 1),
    )


def from_cache(
    state: PolicyState,
    documents: Documents,
    saved_at: float,
    now: float,
    super_users: frozenset[str] = frozenset(),
    super_groups: frozenset[str] = frozenset(),
) -> PolicyState:
    """The state with the cache's documents in force, unless policies are already held (Admin's
    are newer). The cache's policies count as confirmed when the cache was written."""
    if state.loaded or documents.policies is None:
        return state
    try:
        built = compiled(documents, super_users, super_groups)
    except Exception as exc:  # a cache TARN cannot take is no policy at all: still fail closed
        return replace(state, cache_problem=f"cache not used: {exc}")
    assert built is not None  # policies are there
    engine, groups = built
    return replace(
        state,
        documents=documents,
        engine=engine,
        groups=groups,
        source="cache",
        confirmed_at=saved_at,
        activated_at=now,
    )


def verdict(state: PolicyState, user: str | None, model: str, access: str) -> Verdict:
    """May ``user`` perform ``access`` on ``model``? Denied without policies or without a user."""
    if state.engine is None:
        return NOTHING_LOADED
    if not user:
        return NO_USER
    return state.engine.evaluate(user, state.groups.get(user, frozenset()), model, access)


def service_type_id(state: PolicyState) -> int:
    """The service def's id, as Ranger's audit events give it (repoType); -1 when unknown."""
    definition = (state.documents.policies or {}).get("serviceDef") or {}
    found = definition.get("id")
    return found if isinstance(found, int) else -1


def health(state: PolicyState, now: float) -> Health:
    """Current: policies confirmed by Admin at the last poll. Stale: policies in force, but the
    last poll failed or they came from the cache. Missing: none, so every check is denied."""
    version = state.documents.policy_version
    age = None if state.confirmed_at is None else max(0.0, now - state.confirmed_at)
    if state.engine is None:
        why = state.error or state.cache_problem or "not loaded yet"
        return Health("missing", version, age, f"Ranger: no policies ({why}); every model is denied")
    shown_age = "?" if age is None else f"{age:.0f} s"
    if state.error is not None:
        text = f"Ranger: policies version {version} are stale, confirmed {shown_age} ago; {state.error}"
        return Health("stale", version, age, text)
    if state.source == "cache":
        text = f"Ranger: policies version {version} from the cache of {shown_age} ago; Admin not reached yet"
        return Health("stale", version, age, text)
    return Health("current", version, age, f"Ranger: policies version {version}, confirmed {shown_age} ago")


def _version(document: JSON | None, key: str) -> int:
    value = (document or {}).get(key)
    try:
        return int(value) if value is not None else -1
    except (TypeError, ValueError):
        return -1
