#!/usr/bin/python
# Copyright: TARN developers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: tarn_deploy
short_description: Deploy, upgrade, start, stop or remove the TARN service (Triton on YARN)
version_added: 0.1.0
description:
  - Makes the TARN YARN service (a controller and Triton instances, see docs/service.md) what the
    options describe, through the ResourceManager's Services REST API.
  - The options are the C(tarn submit) flags, snake_case. The spec is built by the same code as
    the CLI's, so a playbook and C(tarn submit) with the same options make the same service.
  - Idempotent. The desired spec is compared with the RM's, runtime fields (containers, states,
    the remaining lifetime) ignored. The Triton instance count is the controller's to choose
    between O(min_instances) and O(max_instances); it is only flexed when it is outside them.
    Any other change is a rolling YARN service upgrade of the components that changed, one
    instance at a time, each Triton instance drained through the controller first (so no request
    in flight is lost) and READY again before the next.
  - The service's C(version) carries a digest of its spec and of the TARN code shipped with it,
    so a new TARN release also upgrades a running service.
  - On a Kerberized cluster whose C(fs.defaultFS) is an HDFS HA nameservice, creating the service
    warns that YARN's service AM keeps the submission's HDFS token there and fails to launch
    containers once it passes C(dfs.namenode.delegation.token.max-lifetime); stop and start the
    service before then (docs/kerberos.md).
author:
  - TARN developers (@tarn-developers)
extends_documentation_fragment:
  - tarn.yarn.connection
  - tarn.yarn.connection.service_name
  - tarn.yarn.service
attributes:
  check_mode:
    support: full
    description: Reports what would change (and the diff) without uploading or changing anything.
  diff_mode:
    support: full
    description: The service spec (less runtime fields), its version, state and Triton instance count, before and after.
options:
  state:
    description:
      - V(present) creates the service or brings its spec up to date (a stopped service stays stopped).
      - V(started) does the same and starts a stopped service.
      - V(stopped) stops every container and keeps the definition; nothing happens when there is no service.
      - V(absent) removes the service and its HDFS files (C(/user/<user>/.tarn/<service>)).
      - A spec change to a stopped service fails (a YARN upgrade needs it running).
    type: str
    choices: [present, started, stopped, absent]
    default: started
  wait:
    description:
      - Wait until the Triton instances and the controller are READY after a create or flex.
      - Rolling upgrades always wait, instance by instance.
    type: bool
    default: true
  wait_timeout:
    description:
      - Seconds each wait may take (the service READY, one instance's upgrade, the upgrade's finalization).
    type: int
    default: 600
  controller_url:
    description:
      - The controller's URL for draining, C(http://host:am_port).
      - Default the controller container's host and O(am_port), from the RM.
    type: str
"""

EXAMPLES = r"""
- name: Serve the model repository with two to four Triton instances
  tarn.yarn.tarn_deploy:
    rm_url: [http://rm1:8088, http://rm2:8088]
    webhdfs_url: http://nn:9870
    user: tarn
    service_name: tarn-prod
    model_repository: hdfs:///user/tarn/models
    image: nvcr.io/nvidia/tritonserver:24.09-py3
    tp: 2
    min_instances: 2
    max_instances: 4
    token: "{{ vault_tarn_token }}"
    secrets: hdfs:///user/tarn/secrets/hf.jceks

- name: Remove it, and its files on HDFS
  tarn.yarn.tarn_deploy:
    service_name: tarn-prod
    state: absent
"""

RETURN = r"""
state:
  description: The YARN service's state after the run (C(STABLE), C(STARTED), C(STOPPED), ...); absent when there is none.
  returned: success
  type: str
  sample: STABLE
version:
  description: The service's version (TARN's version and a digest of the spec and code).
  returned: when the service exists
  type: str
  sample: 0.1.0-3f2a9c1d0b7e
actions:
  description: What was done (or, in check mode, would be done).
  returned: always
  type: list
  elements: str
  sample: [upgrade triton, flex triton to 2]
controller_url:
  description: The controller's API (C(/instances), C(/metrics), C(/dashboard)).
  returned: when the controller runs
  type: str
  sample: http://worker1:8888
instances:
  description: The Triton instances.
  returned: always
  type: list
  elements: dict
  contains:
    instance:
      description: YARN component instance name.
      type: str
      sample: triton-0
    container:
      description: Container id.
      type: str
    host:
      description: Node host name.
      type: str
    ip:
      description: Node IP address.
      type: str
    state:
      description: Container state (C(READY), C(RUNNING_BUT_UNREADY), C(NEEDS_UPGRADE), ...).
      type: str
service:
  description: The service's summary (state, id, version, per component the instances wanted and running).
  returned: when the service exists
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.tarn.yarn.plugins.module_utils.common import (
    CONNECTION_ARGS,
    SERVICE_NAME_ARGS,
    argument_spec,
    connect,
    instances,
    run,
    service_args,
    tarn_config,
    tarn_service,
)


def deploy(module):
    params = module.params
    name = params["service_name"]
    cluster = connect(module)
    desired = None
    bounds = None
    if params["state"] in ("present", "started"):
        config = tarn_config(dict(params, user=cluster.user))
        password = params.get("secrets_password")
        environ = {tarn_service.STORE_PASSWORD_ENV: password} if password else {}
        desired = tarn_service.desired_service(
            config, cluster.user, environ, cluster.rm.configured_urls, cluster.realm, cluster.conf_dir
        )
        bounds = (config.min_instances, config.max_instances)
    actual = cluster.rm.service(name)
    plan = tarn_service.plan(params["state"], actual, desired.spec if desired else None, bounds)
    if plan.changed and not module.check_mode:
        options = tarn_service.Options(
            wait=params["wait"],
            timeout=float(params["wait_timeout"]),
            token=desired.config.token if desired else None,
            controller_url=params.get("controller_url"),
            log=module.log,
            warn=module.warn,
        )
        actual = tarn_service.apply(cluster, name, plan, desired, options)
    result = dict(changed=plan.changed, actions=plan.actions(), instances=instances(actual))
    if actual is not None:
        result.update(
            state=actual.get("state"),
            version=actual.get("version"),
            service=tarn_service.summary(actual),
            controller_url=tarn_service.controller_url(actual),
        )
    if module._diff:
        result["diff"] = dict(before=plan.before or {}, after=plan.after or {})
    return result


def main():
    module = AnsibleModule(
        argument_spec=argument_spec(
            CONNECTION_ARGS,
            SERVICE_NAME_ARGS,
            service_args(),
            dict(
                state=dict(
                    type="str", default="started", choices=["present", "started", "stopped", "absent"]
                ),
                wait=dict(type="bool", default=True),
                wait_timeout=dict(type="int", default=600),
                controller_url=dict(type="str"),
            ),
        ),
        required_if=[("state", "present", ["model_repository"]), ("state", "started", ["model_repository"])],
        mutually_exclusive=[("token", "token_file")],
        supports_check_mode=True,
    )
    run(module, deploy)


if __name__ == "__main__":
    main()
