#!/usr/bin/python
# Copyright: TARN developers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

# ruff: noqa: E402 - the imports follow DOCUMENTATION, EXAMPLES and RETURN, as Ansible's validate-modules wants
from __future__ import annotations

DOCUMENTATION = r"""
module: tarn_ranger
short_description: Register the triton service definition, a service and its policies in Apache Ranger Admin
version_added: 0.1.0
description:
  - Creates or updates, through Ranger Admin's public REST API (C(/service/public/v2/api)) and the
    C(apache-ranger) Python client, the C(triton) service definition (TARN's own, by default), a
    service of that type (O(service)) and the policies of O(policies).
  - Service definitions and services are found and updated by name (Ranger ignores the id a
    service definition is created with).
  - The service definition and the service are compared on the fields given only (Ranger adds
    ids, versions, dates, the marker access types C(_CREATE) ... C(_ALL) and the implicit
    C(_expression) policy condition when it reads them back). A policy is compared in full on what
    decides access (resources, allow and deny items and their exceptions, C(policyPriority),
    C(isEnabled), C(isAuditEnabled)), with Ranger's defaults for what is left out; on other
    fields (C(description), C(policyLabels), ...) only when given.
  - Runs where Ranger Admin can be reached; the admin password is never logged or returned.
author:
  - TARN developers (@tarn-developers)
requirements:
  - apache-ranger (the Python client, e.g. 0.0.12)
  - tarn (only when O(service_def) is not given; the collection's C(src/), role tarn.yarn.tarn installs it)
attributes:
  check_mode:
    support: full
    description: Reads Ranger Admin and reports what would change without changing it.
  diff_mode:
    support: full
    description: The compared fields of the service definition, the service and each policy, before and after.
options:
  url:
    description:
      - Ranger Admin's URL, for example C(http://ranger-admin:6080).
    type: str
    required: true
  admin_user:
    description:
      - A Ranger Admin user allowed to manage service definitions, services and policies.
    type: str
    default: admin
  admin_password:
    description:
      - The password of O(admin_user).
    type: str
    required: true
  validate_certs:
    description:
      - Verify Ranger Admin's TLS certificate (HTTPS URLs).
    type: bool
    default: true
  timeout:
    description:
      - Seconds each request to Ranger Admin may take.
    type: int
    default: 30
  service_def:
    description:
      - The service definition, as Ranger's JSON (C(name), C(resources) and C(accessTypes) with
        their C(itemId)s, ...). Its C(id) is ignored.
      - Default TARN's C(triton) definition, the C(tarn) package's C(tarn/ranger/triton-service-def.json)
        (the role tarn.yarn.ranger_triton passes that same file, read on the Ansible controller).
    type: dict
  service:
    description:
      - The name of the service (the service instance) of that type.
    type: str
    default: triton_prod
  service_description:
    description:
      - The service's description; left as it is when not given.
    type: str
  service_configs:
    description:
      - Configs of the service. Only the keys given are compared and set; others are kept.
      - A config naming a user (C(username), C(default.policy.users)) makes Ranger create its default
        policy C(all - model) when the service is created.
      - A password config cannot be compared (Ranger shows it as C(*****)); it is set when the service
        is created or another config changes.
    type: dict
  service_enabled:
    description:
      - Whether the service is enabled (plugins of a disabled service get no policies).
    type: bool
    default: true
  policies:
    description:
      - Policies of the service, as Ranger's policy JSON, found by C(name). C(service) may be left out.
      - C(resources) maps a resource (C(model)) to C({values, isExcludes, isRecursive}) or to a list of
        values.
      - C(policyItems), C(denyPolicyItems), C(allowExceptions), C(denyExceptions) are lists of
        C({users, groups, roles, accesses, conditions, delegateAdmin}); an access is C({type}) or its name.
      - C(policyPriority) 1 is an OVERRIDE policy.
    type: list
    elements: dict
    default: []
  purge_policies:
    description:
      - Delete the service's policies not in O(policies) (Ranger's default policy C(all - model) too).
    type: bool
    default: false
  create_principals_if_absent:
    description:
      - Let Ranger create the users, groups and roles a policy names that it does not have
        (Ranger's C(createPrincipalsIfAbsent)). Without it, such a policy fails and the error
        names the principal.
    type: bool
    default: false
notes:
  - A policy naming a principal Ranger does not have is found out when it is sent, not in check mode.
  - Policies are not moved between services, zones are not supported, and service definitions,
    services and policies are never deleted, except policies with O(purge_policies).
"""

EXAMPLES = r"""
- name: The triton service type, the service triton_prod and two policies
  tarn.yarn.tarn_ranger:
    url: http://ranger-admin:6080
    admin_password: "{{ vault_ranger_admin_password }}"
    service: triton_prod
    policies:
      - name: ml-team-add
        resources: {model: {values: ["add_*"]}}
        policyItems:
          - groups: [ml-team]
            accesses: [infer, list, metadata]
      - name: no-infer-for-carol
        resources: {model: ["*"]}
        denyPolicyItems:
          - users: [carol]
            accesses: [{type: infer}]
"""

RETURN = r"""
actions:
  description: What was done (or, in check mode, would be done).
  returned: always
  type: list
  elements: str
  sample: ["create service def triton", "create service triton_prod", "create policy ml-team-add"]
service_def:
  description: The service definition after the run (not in check mode when it is created).
  returned: success
  type: dict
  sample: {id: 1, name: triton, version: 1}
service:
  description: The service after the run (not in check mode when it is created).
  returned: success
  type: dict
  sample: {id: 1, name: triton_prod, type: triton, policyVersion: 3}
policies:
  description: Each declared policy after the run, with what was done to it (create, update, keep, delete).
  returned: success
  type: list
  elements: dict
  sample: [{name: ml-team-add, id: 1, version: 1, action: create}]
"""

import contextlib
import functools
import io
import json
import traceback
from collections.abc import Callable
from typing import Any

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.tarn.yarn.plugins.module_utils.ranger import (
    PlanError,
    access_spelling,
    canonical_policy,
    declared_policy,
    declared_service,
    declared_service_def,
    masked,
    plan_policies,
    policy_update,
    project,
    refused_principal,
    service_changes,
    service_def_changes,
    service_update,
    shown_policy,
    shown_service_def,
)

try:
    from apache_ranger.client.ranger_client import RangerClient
    from apache_ranger.exceptions import RangerServiceException

    RANGER_IMPORT_ERROR = None
except ImportError:
    RANGER_IMPORT_ERROR = traceback.format_exc()
    RangerClient = None

    class RangerServiceException(Exception):  # type: ignore[no-redef] # stands in for the client's
        pass


SERVICE_DEF_RESOURCE = ("tarn.ranger", "triton-service-def.json")
Json = dict[str, Any]


class AdminError(Exception):
    """Ranger Admin refused a request or could not be reached (a message for fail_json)."""


class Admin:
    """Ranger Admin through the apache-ranger client's API table, answers as Admin's JSON (the
    client's model classes drop fields they do not know). A 404 reads as None."""

    def __init__(self, url: str, user: str, password: str, verify: bool, timeout: int) -> None:
        self.client = RangerClient(url, (user, password))
        self.client.session.verify = verify
        self.client.session.request = functools.partial(self.client.session.request, timeout=timeout)

    def call(
        self, api: Any, path: Json | None = None, params: Json | None = None, body: Json | None = None
    ) -> Any:
        if path:
            api = api.format_path(path)
        # The client prints the response of a failed call: a module's stdout is its JSON.
        with contextlib.redirect_stdout(io.StringIO()):
            try:
                return self.client.client_http.call_api(api, params, body)
            except RangerServiceException as exc:
                raise AdminError(admin_message(exc)) from exc
            except Exception as exc:  # requests' connection errors, TLS errors
                raise AdminError(f"Ranger Admin at {self.client.client_http.url}: {exc}") from exc

    def service_def(self, name: str) -> Any:
        return self.call(RangerClient.GET_SERVICEDEF_BY_NAME, {"name": name})

    def create_service_def(self, sdef: Json) -> Any:
        return self.call(RangerClient.CREATE_SERVICEDEF, body=sdef)

    def update_service_def(self, name: str, sdef: Json) -> Any:
        return self.call(RangerClient.UPDATE_SERVICEDEF_BY_NAME, {"name": name}, body=sdef)

    def service(self, name: str) -> Any:
        return self.call(RangerClient.GET_SERVICE_BY_NAME, {"name": name})

    def create_service(self, service: Json) -> Any:
        return self.call(RangerClient.CREATE_SERVICE, body=service)

    def update_service(self, name: str, service: Json) -> Any:
        return self.call(RangerClient.UPDATE_SERVICE_BY_NAME, {"name": name}, body=service)

    def policies(self, service: str) -> Any:
        return self.call(RangerClient.GET_POLICIES_IN_SERVICE, {"serviceName": service}) or []

    def create_policy(self, policy: Json, params: Json | None) -> Any:
        return self.call(RangerClient.CREATE_POLICY, params=params, body=policy)

    def update_policy(self, policy_id: int, policy: Json, params: Json | None) -> Any:
        return self.call(RangerClient.UPDATE_POLICY_BY_ID, {"id": policy_id}, params, policy)

    def delete_policy(self, policy_id: int) -> None:
        self.call(RangerClient.DELETE_POLICY_BY_ID, {"id": policy_id})


def admin_message(exc: Any) -> str:
    text = exc.msgDesc
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    detail = text or "; ".join(str(m) for m in exc.messageList or []) or "no message"
    return f"Ranger Admin answered {exc.statusCode} to {exc.method} {exc.path}: {detail}"


def packaged_service_def(module: AnsibleModule) -> Json:
    """TARN's triton service def, from the tarn package where the module runs."""
    try:
        from importlib.resources import files

        resource = files(SERVICE_DEF_RESOURCE[0]).joinpath(SERVICE_DEF_RESOURCE[1])
        sdef: Json = json.loads(resource.read_text(encoding="utf-8"))
        return sdef
    except (ImportError, OSError) as exc:
        reason = "service_def is not given: it defaults to the tarn package's triton service def"
        module.fail_json(msg=missing_required_lib("tarn", reason=reason), exception=str(exc))
        raise  # fail_json exits


def principal_failure(policy_name: str, message: str) -> str:
    refused = refused_principal(message)
    if refused is None:
        return f"policy {policy_name!r}: {message}"
    kind, name = refused
    return (
        f"policy {policy_name!r} names the {kind} {name!r}, which Ranger Admin does not have ({message}). "
        "Create it in Ranger (e.g. with usersync) or set create_principals_if_absent: true "
        "(role tarn.yarn.ranger_triton: ranger_triton_create_principals_if_absent) to let Ranger create it."
    )


def summary(obj: Json | None, *keys: str) -> Json:
    return {k: obj.get(k) for k in keys} if obj else {}


def register(module: AnsibleModule, admin: Admin, actions: list[str]) -> Json:
    """Compare, then create or update what differs; ``actions`` grows as they are done."""
    params = module.params
    check = module.check_mode
    before: Json = {}
    after: Json = {}

    def act(text: str, unchanged: Any, call: Callable[..., Any], *args: Any) -> Any:
        """Make a change (not in check mode), then record it: a failure leaves the actions done."""
        done = unchanged if check else call(*args)
        actions.append(text)
        return done

    # The service def, by name.
    sdef = declared_service_def(params["service_def"] or packaged_service_def(module))
    type_name = sdef["name"]
    actual_def = admin.service_def(type_name)
    changed = service_def_changes(sdef, actual_def)
    before["service_def"] = project(sdef, shown_service_def(sdef, actual_def)) if actual_def else {}
    after["service_def"] = sdef
    if actual_def is None:
        actual_def = act(f"create service def {type_name}", None, admin.create_service_def, sdef)
    elif changed:
        text = f"update service def {type_name} ({', '.join(changed)})"
        actual_def = act(text, actual_def, admin.update_service_def, type_name, sdef)

    # The service, by name.
    name = params["service"]
    service = declared_service(
        name, type_name, params["service_enabled"], params["service_description"], params["service_configs"]
    )
    actual_service = admin.service(name)
    changed = service_changes(service, actual_service)
    before["service"] = masked(project(service, actual_service)) if actual_service else {}
    after["service"] = masked(service)
    if actual_service is None:
        actual_service = act(f"create service {name}", None, admin.create_service, service)
    elif changed:
        text = f"update service {name} ({', '.join(changed)})"
        body = service_update(service, actual_service)
        actual_service = act(text, actual_service, admin.update_service, name, body)

    # The policies, by name within the service.
    spelling = access_spelling(sdef)
    declared = [declared_policy(p, name, spelling) for p in params["policies"]]
    existing = admin.policies(name) if actual_service and actual_service.get("id") is not None else []
    query = {"createPrincipalsIfAbsent": "true"} if params["create_principals_if_absent"] else None
    plan = plan_policies(declared, existing, name, spelling, params["purge_policies"])
    before["policies"], after["policies"] = {}, {}
    policies = []
    wanted = {p["name"]: p for p in declared}
    by_name = {p.get("name"): p for p in existing}
    for action, policy_name, fields in plan:
        policy, found = wanted.get(policy_name), by_name.get(policy_name)
        if found is not None:
            before["policies"][policy_name] = (
                canonical_policy(found, name, spelling)
                if policy is None
                else shown_policy(policy, found, name, spelling)
            )
        if policy is not None:
            after["policies"][policy_name] = policy
        now = found
        if action == "create" and policy is not None:
            now = act(
                f"create policy {policy_name}", None, send, admin.create_policy, policy_name, policy, query
            )
        elif action == "update" and policy is not None and found is not None:
            text = f"update policy {policy_name} ({', '.join(fields)})"
            update = functools.partial(admin.update_policy, found["id"])
            now = act(text, found, send, update, policy_name, policy_update(policy, found), query)
        elif action == "delete" and found is not None:
            act(f"delete policy {policy_name}", None, admin.delete_policy, found["id"])
        policies.append(dict(summary(now, "id", "version"), name=policy_name, action=action))

    result = dict(
        changed=bool(actions),
        actions=actions,
        service_def=summary(actual_def, "id", "name", "version"),
        service=summary(actual_service, "id", "name", "type", "policyVersion"),
        policies=policies,
    )
    if module._diff:
        result["diff"] = dict(before=before, after=after)
    return result


def send(call: Callable[[Json, Json | None], Any], policy_name: str, body: Json, query: Json | None) -> Any:
    try:
        return call(body, query)
    except AdminError as exc:
        raise AdminError(principal_failure(policy_name, str(exc))) from exc


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", required=True),
            admin_user=dict(type="str", default="admin"),
            admin_password=dict(type="str", required=True, no_log=True),
            validate_certs=dict(type="bool", default=True),
            timeout=dict(type="int", default=30),
            service_def=dict(type="dict"),
            service=dict(type="str", default="triton_prod"),
            service_description=dict(type="str"),
            service_configs=dict(type="dict"),
            service_enabled=dict(type="bool", default=True),
            policies=dict(type="list", elements="dict", default=[]),
            purge_policies=dict(type="bool", default=False),
            create_principals_if_absent=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    if RANGER_IMPORT_ERROR is not None:
        module.fail_json(msg=missing_required_lib("apache-ranger"), exception=RANGER_IMPORT_ERROR)
    params = module.params
    admin = Admin(
        params["url"],
        params["admin_user"],
        params["admin_password"],
        params["validate_certs"],
        params["timeout"],
    )
    actions: list[str] = []
    try:
        result = register(module, admin, actions)
    except (AdminError, PlanError) as exc:
        module.fail_json(msg=str(exc), changed=bool(actions), actions=actions)  # those done before
    module.exit_json(**result)


if __name__ == "__main__":
    main()
