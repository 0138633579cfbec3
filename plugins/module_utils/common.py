# Copyright: TARN developers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""What the tarn.yarn modules share: the connection options, the TARN service options (the `tarn`
CLI's flags, snake_case), Ranger Admin's options, import guards and error handling. The logic itself
is the `tarn` package's (tarn.service, tarn.models, tarn.ranger.registration): the modules only
translate options and results."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # noqa: F821 - ansible-test's boilerplate for module_utils

import os
import traceback

from ansible.module_utils.basic import missing_required_lib
from ansible_collections.tarn.yarn.plugins.module_utils.service_options import SERVICE_OPTIONS

try:
    import requests  # noqa: F401 pylint: disable=unused-import

    REQUESTS_IMPORT_ERROR = None
except ImportError:
    REQUESTS_IMPORT_ERROR = traceback.format_exc()

try:
    from tarn import service as tarn_service
    from tarn.ansible_options import config_from_params
    from tarn.errors import TarnError  # pylint: disable=unused-import
    from tarn.ranger import registration as ranger_registration  # pylint: disable=unused-import
    from tarn.ranger import registration_plan as ranger_plan  # pylint: disable=unused-import
    from tarn.ranger.public_api import PublicApi as RangerPublicApi
    from tarn.stdlib.api_token import read_token  # pylint: disable=unused-import

    TARN_IMPORT_ERROR = None
except ImportError:
    TARN_IMPORT_ERROR = traceback.format_exc()
    tarn_service = None
    read_token = None  # check_libraries fails the module before anything uses it
    config_from_params = None
    ranger_registration = ranger_plan = RangerPublicApi = None

    class TarnError(Exception):  # noqa: N818 - stands in for tarn.errors.TarnError
        pass


# ---- the connection (doc fragment tarn.yarn.connection)

CONNECTION_ARGS = dict(
    rm_url=dict(type="list", elements="str", aliases=["rm_urls"]),
    webhdfs_url=dict(type="str"),
    conf_dir=dict(type="path"),
    user=dict(type="str"),
    kerberos=dict(type="bool", default=False),
    principal=dict(type="str"),
    keytab=dict(type="path", no_log=False),
)

SERVICE_NAME_ARGS = dict(service_name=dict(type="str", default="tarn"))

# ---- Ranger Admin (doc fragment tarn.yarn.ranger_admin)

RANGER_ADMIN_ARGS = dict(
    url=dict(type="str", required=True),
    admin_user=dict(type="str", default="admin"),
    admin_password=dict(type="str", required=True, no_log=True),
    validate_certs=dict(type="bool", default=True),
    timeout=dict(type="int", default=30),
)


def ranger_admin(module):
    """Ranger Admin's public API, from RANGER_ADMIN_ARGS."""
    params = module.params
    return RangerPublicApi(
        params["url"],
        params["admin_user"],
        params["admin_password"],
        verify=params["validate_certs"],
        timeout=float(params["timeout"]),
    )


# ---- the TARN service options (doc fragment tarn.yarn.service): generated from the `tarn` CLI's
# declaration into service_options.py. No defaults there: an option left out is a flag left out,
# so the CLI's default applies (one place).


def service_args():
    return dict((name, dict(spec)) for name, (spec, flag) in SERVICE_OPTIONS.items())


def argument_spec(*parts):
    spec = {}
    for part in parts:
        spec.update(part)
    return spec


def service_environ(params):
    """The environment the CLI would read: the user's and the service identity's fallbacks, and the
    credential store password."""
    passed = (
        "HADOOP_USER_NAME",
        "USER",
        "HADOOP_CONF_DIR",
        "TARN_SERVICE_PRINCIPAL",
        "TARN_SERVICE_KEYTAB",
        "TARN_CONTAINER_EXECUTOR_CFG",
    )
    environ = dict((k, os.environ[k]) for k in passed if k in os.environ)
    if params.get("secrets_password"):
        environ[tarn_service.STORE_PASSWORD_ENV] = params["secrets_password"]
    return environ


def tarn_config(params):
    """A validated tarn.stdlib.config.TarnConfig, through the CLI's own parser (same defaults, same checks)."""
    return config_from_params(params, service_environ(params), "tarn_deploy")


# ---- running


def check_libraries(module):
    if REQUESTS_IMPORT_ERROR is not None:
        module.fail_json(msg=missing_required_lib("requests"), exception=REQUESTS_IMPORT_ERROR)
    if TARN_IMPORT_ERROR is not None:
        module.fail_json(
            msg=missing_required_lib(
                "tarn", url="the tarn.yarn collection's src/ (role tarn.yarn.tarn installs it)"
            ),
            exception=TARN_IMPORT_ERROR,
        )


def connect(module):
    params = module.params
    return tarn_service.connect(
        user=params.get("user"),
        rm_urls=params.get("rm_url"),
        webhdfs=params.get("webhdfs_url"),
        conf_dir=params.get("conf_dir"),
        kerberos=params.get("kerberos"),
        principal=params.get("principal"),
        keytab=params.get("keytab"),
        environ=os.environ,
    )


def fail(module, exc, **result):
    """One place that turns TARN's errors (one line naming the option at fault) into fail_json."""
    text = str(exc)
    if text.startswith("--"):  # "--min-instances: …" names the option: min_instances
        flag, sep, rest = text.partition(":")
        text = flag[2:].replace("-", "_") + sep + rest
    module.fail_json(msg=text, **result)


def run(module, action, done=None):
    """A module's whole run: the imports it needs, then ``action(module)``'s result, or the failure.
    ``done``: the list of actions the module makes as it goes; a failure reports those made."""
    check_libraries(module)
    try:
        result = action(module)
    except TarnError as exc:
        fail(module, exc, **({} if done is None else dict(changed=bool(done), actions=done)))
    module.exit_json(**result)


def instances(service):
    return tarn_service.instances_of(service) if service else []
