#!/usr/bin/python
# Copyright: TARN developers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: tarn_info
short_description: The state, instances and load of a TARN service
version_added: 0.1.0
description:
  - Reads the service from the ResourceManager (state, version, components, Triton instances)
    and, when the controller answers, its C(/instances) (docs/discovery.md) for each instance's
    discovery state and load, summarized.
  - Changes nothing.
author:
  - TARN developers (@tarn-developers)
extends_documentation_fragment:
  - tarn.yarn.connection
  - tarn.yarn.connection.service_name
attributes:
  check_mode:
    support: full
    description: Reads only.
  diff_mode:
    support: none
    description: Reads only.
options:
  token:
    description:
      - The controller's API token, to read its C(/instances).
    type: str
  controller_url:
    description:
      - The controller's URL. Default the controller container's host and port, from the RM.
    type: str
"""

EXAMPLES = r"""
- name: How is the service doing
  tarn.yarn.tarn_info:
    service_name: tarn-prod
    token: "{{ vault_tarn_token }}"
  register: tarn

- name: Show the load
  ansible.builtin.debug:
    msg: "{{ tarn.load.mean_load }} over {{ tarn.load.registered }} registered instances"
"""

RETURN = r"""
exists:
  description: Whether the service exists.
  returned: always
  type: bool
state:
  description: The YARN service's state.
  returned: when the service exists
  type: str
  sample: STABLE
service:
  description: State, id, version and, per component, the instances wanted and running.
  returned: when the service exists
  type: dict
instances:
  description: The Triton instances as YARN sees them (instance, container, host, ip, state).
  returned: always
  type: list
  elements: dict
controller_url:
  description: The controller's API.
  returned: when the controller runs
  type: str
controller_instances:
  description: The controller's C(/instances) entries (discovery state, registered, load).
  returned: when the controller answered
  type: list
  elements: dict
load:
  description: Summary of the controller's view.
  returned: when the controller answered
  type: dict
  contains:
    instances:
      description: Instances the controller sees.
      type: int
    registered:
      description: Instances registered for discovery.
      type: int
    states:
      description: Instances per state (READY, DRAINING, ...).
      type: dict
    mean_load:
      description: Mean load (0..1+), null without metrics.
      type: float
    max_load:
      description: Highest load, null without metrics.
      type: float
controller_error:
  description: Why the controller's view is missing.
  returned: when the controller did not answer
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.tarn.yarn.plugins.module_utils.common import (
    CONNECTION_ARGS,
    SERVICE_NAME_ARGS,
    TarnError,
    argument_spec,
    connect,
    instances,
    run,
    tarn_service,
)


def info(module):
    params = module.params
    cluster = connect(module)
    actual = cluster.rm.service(params["service_name"])
    result = dict(changed=False, exists=actual is not None, instances=instances(actual))
    if actual is None:
        return result
    url = params["controller_url"] or tarn_service.controller_url(actual)
    result.update(state=actual.get("state"), service=tarn_service.summary(actual), controller_url=url)
    if url:
        from tarn.clients.controller import ControllerClient, load_summary
        from tarn.stdlib.api_token import Secret

        token = Secret(params["token"]) if params["token"] else None
        try:
            seen = ControllerClient(url, token).instances().get("instances", [])
        except TarnError as exc:
            result["controller_error"] = str(exc)
        else:
            result.update(controller_instances=seen, load=load_summary(seen))
    return result


def main():
    module = AnsibleModule(
        argument_spec=argument_spec(
            CONNECTION_ARGS,
            SERVICE_NAME_ARGS,
            dict(token=dict(type="str", no_log=True), controller_url=dict(type="str")),
        ),
        supports_check_mode=True,
    )
    run(module, info)


if __name__ == "__main__":
    main()
