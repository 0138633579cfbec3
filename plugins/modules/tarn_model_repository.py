#!/usr/bin/python
# Copyright: TARN developers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: tarn_model_repository
short_description: Upload a Triton model repository to HDFS; load new model versions in place
version_added: 0.1.0
description:
  - Copies the files of a local model repository to an HDFS directory through WebHDFS. A file is
    uploaded only when HDFS lacks it or its size or content differs. Content is compared with
    HDFS's own checksum (MD5-of-MD5-of-CRC32C), recomputed locally with the same code the
    launcher verifies staged copies with, so nothing is downloaded.
  - With O(load), each named model is then loaded in place on every READY Triton instance of
    O(service_name) through Triton's repository API (C(POST /v2/repository/models/<m>/load)),
    its files sent in the request. A new model version is served without restarting a
    container or restaging anything, and restarted instances stage it from HDFS.
author:
  - TARN developers (@tarn-developers)
extends_documentation_fragment:
  - tarn.yarn.connection
  - tarn.yarn.connection.service_name
attributes:
  check_mode:
    support: full
    description: Lists what would be uploaded, deleted and loaded; changes nothing.
  diff_mode:
    support: full
    description: The files on HDFS before and after, with their sizes.
options:
  src:
    description:
      - The local model repository (on the host that runs the module).
    type: path
    required: true
  dest:
    description:
      - The HDFS directory, for example C(/user/tarn/models), which O(service_name) serves as C(hdfs:///user/tarn/models).
    type: str
    required: true
  purge:
    description:
      - Delete files under O(dest) that O(src) does not have.
    type: bool
    default: false
  load:
    description:
      - Models to load in place on the running instances of O(service_name) after the upload,
        when any of their files changed (or always, with O(force_load)).
      - Triton serves the model with the configuration it has now (C(config.pbtxt) changes need a
        restart of the instances, M(tarn.yarn.tarn_deploy)).
    type: list
    elements: str
    default: []
  force_load:
    description:
      - Load the models of O(load) even when none of their files changed.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Publish the repository and serve version 2 of add_one without a restart
  tarn.yarn.tarn_model_repository:
    src: /srv/models
    dest: /user/tarn/models
    service_name: tarn-prod
    load: [add_one]
"""

RETURN = r"""
files:
  description: Every file and what was (or would be) done to it.
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: Path under O(dest).
      type: str
    action:
      description: C(create), C(update), C(delete) or C(unchanged).
      type: str
    size:
      description: Bytes.
      type: int
    reason:
      description: Why (for example C(content differs (HDFS checksum))).
      type: str
uploaded:
  description: Files uploaded (or to upload, in check mode).
  returned: always
  type: int
loaded:
  description: Per model, the instances it was (or would be) loaded on.
  returned: always
  type: dict
  sample: {add_one: [triton-0, triton-1]}
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.tarn.yarn.plugins.module_utils.common import (
    CONNECTION_ARGS,
    SERVICE_NAME_ARGS,
    argument_spec,
    connect,
    run,
)


def publish(module):
    from pathlib import Path

    from tarn import models

    params = module.params
    cluster = connect(module)
    src = Path(params["src"])
    dest = params["dest"].rstrip("/")
    changes = models.plan_repository(cluster.hdfs, src, dest, purge=params["purge"])
    touched = [c for c in changes if c.action != "unchanged"]
    to_load = [
        m for m in params["load"]
        if params["force_load"] or any(c.relpath.startswith(m + "/") for c in touched)
    ]  # fmt: skip
    loaded = {}
    endpoints = []
    if to_load:
        service = tarn_service_existing(cluster, params["service_name"])
        endpoints = models.triton_endpoints(service)
    if not module.check_mode:
        models.sync_repository(cluster.hdfs, src, dest, changes)
        for model in to_load:
            loaded[model] = models.load_in_place(endpoints, model, src / model, log=module.log)
    else:
        loaded = dict((model, [e.instance for e in endpoints]) for model in to_load)
    result = dict(
        changed=bool(touched or loaded),
        files=[dict(path=c.relpath, action=c.action, size=c.size, reason=c.reason) for c in changes],
        uploaded=sum(1 for c in changes if c.action in ("create", "update")),
        loaded=loaded,
    )
    if module._diff:
        before = dict((c.relpath, c.size) for c in changes if c.action in ("update", "delete", "unchanged"))
        after = dict((c.relpath, c.size) for c in changes if c.action != "delete")
        result["diff"] = dict(
            before_header="hdfs://%s" % dest,
            after_header=os.path.abspath(params["src"]),
            before="".join("%s (%s bytes)\n" % item for item in sorted(before.items())),
            after="".join("%s (%s bytes)\n" % item for item in sorted(after.items())),
        )
    return result


def tarn_service_existing(cluster, name):
    from tarn import service

    return service.existing(cluster.rm, name)


def main():
    module = AnsibleModule(
        argument_spec=argument_spec(
            CONNECTION_ARGS,
            SERVICE_NAME_ARGS,
            dict(
                src=dict(type="path", required=True),
                dest=dict(type="str", required=True),
                purge=dict(type="bool", default=False),
                load=dict(type="list", elements="str", default=[]),
                force_load=dict(type="bool", default=False),
            ),
        ),
        supports_check_mode=True,
    )
    run(module, publish)


if __name__ == "__main__":
    main()
