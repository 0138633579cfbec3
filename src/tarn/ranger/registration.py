"""Registering the triton service in Ranger Admin: the service def, then the service, then its
policies, each by one reconcile: read what Admin has, compare (tarn.ranger.registration_plan, pure),
stop there in check mode, write, read again. The module tarn.yarn.tarn_ranger is this, over
tarn.ranger.public_api; the policies are read after the service's write, so Ranger's default
policy of a service just created is seen (and purged when asked) in the same run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from tarn.ranger.admin import RangerAdminError
from tarn.ranger.registration_plan import (
    Declaration,
    Json,
    Kind,
    Plan,
    Step,
    plan_policies,
    plan_service,
    plan_service_def,
    principal_failure,
    summary,
)

Observed = TypeVar("Observed")


class AdminApi(Protocol):
    """What registering asks of Ranger Admin (tarn.ranger.public_api.PublicApi; a fake in tests)."""

    def service_def(self, name: str) -> Json | None: ...
    def create_service_def(self, sdef: Json) -> Json: ...
    def update_service_def(self, name: str, sdef: Json) -> Json: ...
    def service(self, name: str) -> Json | None: ...
    def create_service(self, service: Json) -> Json: ...
    def update_service(self, name: str, service: Json) -> Json: ...
    def policies(self, service: str) -> list[Json]: ...
    def create_policy(self, policy: Json, create_principals: bool = False) -> Json: ...
    def update_policy(self, policy_id: int, policy: Json, create_principals: bool = False) -> Json: ...
    def delete_policy(self, policy_id: int) -> None: ...


@dataclass(frozen=True)
class Registered:
    """After the run (in check mode: as Admin has it, nothing created): the service def, the
    service, each policy with what was done to it; and the diff."""

    service_def: Json
    service: Json
    policies: list[Json]
    before: Json
    after: Json


def reconcile(
    read: Callable[[], Observed],
    plan: Callable[[Observed], Plan],
    write: Callable[[Step], Any],
    check_mode: bool,
    done: list[str],
) -> tuple[Plan, Observed, Observed]:
    """read → compare → (check mode: stop) → write → re-read: the plan, what Admin had, what it
    has. ``done`` grows by each write as it is made (in check mode, by each that would be), so a
    failure leaves what was done before it."""
    actual = read()
    planned = plan(actual)
    writes = [step for step in planned.steps if step.writes]
    if check_mode or not writes:
        done.extend(step.text for step in writes)
        return planned, actual, actual
    for step in writes:
        write(step)
        done.append(step.text)
    return planned, actual, read()


def register(
    admin: AdminApi,
    declared: Declaration,
    check_mode: bool = False,
    purge_policies: bool = False,
    create_principals: bool = False,
    done: list[str] | None = None,
) -> Registered:
    """Make Admin hold the declared service def, service and policies (``purge_policies``: only
    those). ``done``: the actions, as they are made."""
    done = [] if done is None else done
    type_name, name = declared.service_def["name"], declared.service["name"]

    def write(step: Step) -> Any:
        return send(admin, step, create_principals)

    sdef_plan, _sdef_before, sdef = reconcile(
        lambda: admin.service_def(type_name),
        lambda actual: plan_service_def(declared.service_def, actual),
        write,
        check_mode,
        done,
    )
    service_plan, _service_before, service = reconcile(
        lambda: admin.service(name),
        lambda actual: plan_service(declared.service, actual),
        write,
        check_mode,
        done,
    )
    exists = service is not None and service.get("id") is not None  # not yet, in check mode
    policies_plan, had, has = reconcile(
        lambda: admin.policies(name) if exists else [],
        lambda actual: plan_policies(declared.policies, actual, name, declared.spelling, purge_policies),
        write,
        check_mode,
        done,
    )
    had_by_name = {p.get("name"): p for p in had}
    has_by_name = {p.get("name"): p for p in has}
    policies = [  # a deleted policy: the one that was (its id tells which)
        dict(
            summary(
                (had_by_name if step.action == "delete" else has_by_name).get(step.name), "id", "version"
            ),
            name=step.name,
            action=step.action,
        )
        for step in policies_plan.steps
    ]
    plans = {"service_def": sdef_plan, "service": service_plan, "policies": policies_plan}
    return Registered(
        service_def=summary(sdef, "id", "name", "version"),
        service=summary(service, "id", "name", "type", "policyVersion"),
        policies=policies,
        before={key: plan.before for key, plan in plans.items()},
        after={key: plan.after for key, plan in plans.items()},
    )


def send(admin: AdminApi, step: Step, create_principals: bool) -> Any:
    """One write to Admin: a refused policy names the principal Admin lacks and the option to use."""
    body = step.body or {}
    if step.kind is Kind.SERVICE_DEF:
        if step.action == "create":
            return admin.create_service_def(body)
        return admin.update_service_def(step.name, body)
    if step.kind is Kind.SERVICE:
        if step.action == "create":
            return admin.create_service(body)
        return admin.update_service(step.name, body)
    if step.action == "delete":
        return admin.delete_policy(step.object_id)
    try:
        if step.action == "create":
            return admin.create_policy(body, create_principals)
        return admin.update_policy(step.object_id, body, create_principals)
    except RangerAdminError as exc:
        raise RangerAdminError(principal_failure(step.name, str(exc))) from exc
