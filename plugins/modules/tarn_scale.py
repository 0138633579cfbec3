#!/usr/bin/python
# Copyright: TARN developers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: tarn_scale
short_description: Set the number of Triton instances of a TARN service, or its autoscaling bounds
version_added: 0.1.0
description:
  - O(count) flexes the Triton component to a fixed number of instances (as C(tarn scale N)).
    The controller keeps scaling between its bounds afterwards; a count outside them is taken
    back at its next decision, so change the bounds for a lasting change.
  - O(min_instances) and O(max_instances) change the controller's autoscaling bounds. They are
    the controller's flags, so this is a YARN service upgrade of the controller component alone
    (the controller restarts and rebuilds its state; no Triton instance restarts). The instance
    count is then flexed into the new bounds if it is outside them.
author:
  - TARN developers (@tarn-developers)
extends_documentation_fragment:
  - tarn.yarn.connection
  - tarn.yarn.connection.service_name
attributes:
  check_mode:
    support: full
    description: Reports the change without making it.
  diff_mode:
    support: full
    description: The instance count and the bounds, before and after.
options:
  count:
    description:
      - Triton instances wanted now (0 or more).
    type: int
  min_instances:
    description:
      - New lower autoscaling bound.
    type: int
  max_instances:
    description:
      - New upper autoscaling bound.
    type: int
  token:
    description:
      - The controller's API token. A lower O(count) drains the instances it removes through the
        controller first (the same ones the controller would pick), then decommissions exactly those.
    type: str
  token_file:
    description:
      - A file holding the controller's API token (instead of O(token)).
    type: path
  wait:
    description:
      - Wait until the instances wanted are READY.
    type: bool
    default: true
  wait_timeout:
    description:
      - Seconds each wait may take.
    type: int
    default: 600
"""

EXAMPLES = r"""
- name: Four instances now
  tarn.yarn.tarn_scale:
    service_name: tarn-prod
    count: 4

- name: Let the controller scale between 2 and 8 instances
  tarn.yarn.tarn_scale:
    service_name: tarn-prod
    min_instances: 2
    max_instances: 8
"""

RETURN = r"""
count:
  description: Triton instances wanted after the run.
  returned: success
  type: int
  sample: 2
bounds:
  description: The controller's autoscaling bounds after the run.
  returned: success
  type: dict
  sample: {min_instances: 1, max_instances: 4}
actions:
  description: What was done (or, in check mode, would be done).
  returned: always
  type: list
  elements: str
instances:
  description: The Triton instances (instance, container, host, ip, state), as in M(tarn.yarn.tarn_deploy).
  returned: success
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.tarn.yarn.plugins.module_utils.common import (
    CONNECTION_ARGS,
    SERVICE_NAME_ARGS,
    argument_spec,
    connect,
    instances,
    read_token,
    run,
    tarn_service,
)


def scale(module):
    params = module.params
    name = params["service_name"]
    cluster = connect(module)
    actual = tarn_service.existing(cluster.rm, name)
    steps = tarn_service.plan_scale(actual, params["count"], params["min_instances"], params["max_instances"])
    actions = steps.actions()
    if actions and not module.check_mode:
        options = tarn_service.Options(
            wait=params["wait"],
            timeout=float(params["wait_timeout"]),
            log=module.log,
            token=read_token(params["token"] or None, params["token_file"] or None),
        )
        actual = tarn_service.apply_scale(cluster.rm, name, steps, options)
    result = dict(
        changed=bool(actions),
        actions=actions,
        count=steps.target,
        bounds=dict(min_instances=steps.bounds[0], max_instances=steps.bounds[1]),
        instances=instances(actual),
    )
    if module._diff:
        before = steps.bounds_before
        result["diff"] = dict(
            before=dict(count=steps.count, min_instances=before[0], max_instances=before[1]),
            after=dict(count=steps.target, min_instances=steps.bounds[0], max_instances=steps.bounds[1]),
        )
    return result


def main():
    module = AnsibleModule(
        argument_spec=argument_spec(
            CONNECTION_ARGS,
            SERVICE_NAME_ARGS,
            dict(
                count=dict(type="int"),
                min_instances=dict(type="int"),
                max_instances=dict(type="int"),
                wait=dict(type="bool", default=True),
                wait_timeout=dict(type="int", default=600),
                token=dict(type="str", no_log=True),
                token_file=dict(type="path"),
            ),
        ),
        required_one_of=[("count", "min_instances", "max_instances")],
        mutually_exclusive=[("token", "token_file")],
        supports_check_mode=True,
    )
    run(module, scale)


if __name__ == "__main__":
    main()
