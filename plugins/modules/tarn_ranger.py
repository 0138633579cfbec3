#!/usr/bin/python
# Copyright: TARN developers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: tarn_ranger
short_description: Register the triton service definition, a service and its policies in Apache Ranger Admin
version_added: 0.1.0
description:
  - Creates or updates, through Ranger Admin's public REST API, the C(triton) service definition, a service of
    that type (O(service)) and the policies of O(policies); each is read, compared, written when it differs
    and read again. Definitions and services are found by name, policies by name within the service.
  - The definition and the service are compared on the fields given only (Ranger adds ids, versions, marker
    access types, ...); a policy in full on what decides access (resources, allow and deny items and their
    exceptions, C(policyPriority), C(isEnabled), C(isAuditEnabled)), with Ranger's defaults for what is left
    out, and on other fields (C(description), ...) when given.
author:
  - TARN developers (@tarn-developers)
extends_documentation_fragment:
  - tarn.yarn.ranger_admin
attributes:
  check_mode:
    support: full
    description: Reads Ranger Admin and reports what would change without changing it.
  diff_mode:
    support: full
    description: The compared fields of the service definition, the service and each policy, before and after.
options:
  service_def:
    description:
      - The service definition, as Ranger's JSON (C(name), C(resources) and C(accessTypes) with their
        C(itemId)s, ...). Its C(id) is ignored. Default TARN's, C(tarn/ranger/triton-service-def.json).
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
        policy C(all - model) when it creates the service.
      - A password config cannot be compared (Ranger shows C(*****)); it is sent when another config changes.
    type: dict
  service_enabled:
    description:
      - Whether the service is enabled (plugins of a disabled service get no policies).
    type: bool
    default: true
  policies:
    description:
      - Policies of the service, as Ranger's policy JSON, found by C(name); C(service) may be left out.
      - C(resources) maps a resource (C(model)) to C({values, isExcludes, isRecursive}) or to a list of values.
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
      - Let Ranger create the users, groups and roles a policy names that it lacks (C(createPrincipalsIfAbsent)).
        Without it, such a policy fails, naming the principal (found when it is sent, not in check mode).
    type: bool
    default: false
notes:
  - Nothing is moved between services, zones are not supported, and nothing is deleted but policies with
    O(purge_policies).
"""

EXAMPLES = r"""
- name: The triton service type, the service triton_prod and two policies
  tarn.yarn.tarn_ranger:
    url: http://ranger-admin:6080
    admin_password: "{{ vault_ranger_admin_password }}"
    policies:
      - name: ml-team-add
        resources: {model: {values: ["add_*"]}}
        policyItems: [{groups: [ml-team], accesses: [infer, list, metadata]}]
      - name: no-infer-for-carol
        resources: {model: ["*"]}
        denyPolicyItems: [{users: [carol], accesses: [{type: infer}]}]
"""

RETURN = r"""
actions:
  description: What was done (or, in check mode, would be done), also when a later step failed.
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
  description: The service after its own write (not in check mode when it is created).
  returned: success
  type: dict
  sample: {id: 1, name: triton_prod, type: triton, policyVersion: 3}
policies:
  description: Each policy after the run, with what was done to it (create, update, keep, delete).
  returned: success
  type: list
  elements: dict
  sample: [{name: ml-team-add, id: 1, version: 1, action: create}]
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.tarn.yarn.plugins.module_utils.common import (
    RANGER_ADMIN_ARGS,
    argument_spec,
    ranger_admin,
    ranger_plan,
    ranger_registration,
    run,
)


def register(module, done):
    params = module.params
    declared = ranger_plan.declare(
        params["service_def"],
        params["service"],
        enabled=params["service_enabled"],
        description=params["service_description"],
        configs=params["service_configs"],
        policies=params["policies"],
    )
    registered = ranger_registration.register(
        ranger_admin(module),
        declared,
        check_mode=module.check_mode,
        purge_policies=params["purge_policies"],
        create_principals=params["create_principals_if_absent"],
        done=done,
    )
    result = dict(changed=bool(done), actions=done, service_def=registered.service_def)
    result.update(service=registered.service, policies=registered.policies)
    if module._diff:
        result["diff"] = dict(before=registered.before, after=registered.after)
    return result


def main():
    module = AnsibleModule(
        argument_spec=argument_spec(
            RANGER_ADMIN_ARGS,
            dict(
                service_def=dict(type="dict"),
                service=dict(type="str", default="triton_prod"),
                service_description=dict(type="str"),
                service_configs=dict(type="dict"),
                service_enabled=dict(type="bool", default=True),
                policies=dict(type="list", elements="dict", default=[]),
                purge_policies=dict(type="bool", default=False),
                create_principals_if_absent=dict(type="bool", default=False),
            ),
        ),
        supports_check_mode=True,
    )
    done = []
    run(module, lambda m: register(m, done), done)


if __name__ == "__main__":
    main()
