# Copyright: TARN developers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""What the tarn.yarn modules share: the connection options, the TARN service options (the `tarn`
CLI's flags, snake_case), import guards and error handling. The logic itself is the `tarn`
package's (tarn.service, tarn.models): the modules only translate options and results."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # noqa: F821 - ansible-test's boilerplate for module_utils

import os
import traceback

from ansible.module_utils.basic import missing_required_lib

try:
    import requests  # noqa: F401 pylint: disable=unused-import

    REQUESTS_IMPORT_ERROR = None
except ImportError:
    REQUESTS_IMPORT_ERROR = traceback.format_exc()

try:
    from tarn import service as tarn_service
    from tarn.stdlib.config import add_config_arguments, config_from_namespace, validate
    from tarn.stdlib.api_token import read_token
    from tarn.errors import TarnError  # pylint: disable=unused-import

    TARN_IMPORT_ERROR = None
except ImportError:
    TARN_IMPORT_ERROR = traceback.format_exc()
    tarn_service = None
    read_token = None  # check_libraries fails the module before anything uses it

    class TarnError(Exception):  # noqa: N818 - stands in for tarn.errors.TarnError
        pass


# ---- the connection (doc fragment tarn.yarn.connection)

CONNECTION_ARGS = dict(
    rm_url=dict(type="list", elements="str", aliases=["rm_urls"]),
    webhdfs_url=dict(type="str"),
    conf_dir=dict(type="path"),
    user=dict(type="str"),
    kerberos=dict(type="bool", default=False),
)

SERVICE_NAME_ARGS = dict(service_name=dict(type="str", default="tarn"))

# ---- the TARN service options (doc fragment tarn.yarn.service): name -> (argument spec, CLI flag).
# No defaults here: an option left out is a flag left out, so the CLI's default applies (one place).
SERVICE_OPTIONS = dict(
    model_repository=(dict(type="str"), "--model-repository"),
    image=(dict(type="str"), "--image"),
    runtime=(dict(type="str", choices=["docker", "process"]), "--runtime"),
    python=(dict(type="str"), "--python"),
    queue=(dict(type="str"), "--queue"),
    lifetime=(dict(type="int"), "--lifetime"),
    port=(dict(type="int"), "--port"),
    grpc_port=(dict(type="int"), "--grpc-port"),
    metrics_port=(dict(type="int"), "--metrics-port"),
    am_port=(dict(type="int"), "--am-port"),
    address=(dict(type="str"), "--address"),
    token=(dict(type="str", no_log=True), "--token"),
    token_file=(dict(type="path"), "--token-file"),
    tp=(dict(type="int"), "--tp"),
    pp=(dict(type="int"), "--pp"),
    gpus_per_instance=(dict(type="int"), "--gpus-per-instance"),
    memory_mb=(dict(type="int"), "--memory-mb"),
    vcores=(dict(type="int"), "--vcores"),
    controller_memory_mb=(dict(type="int"), "--controller-memory-mb"),
    controller_vcores=(dict(type="int"), "--controller-vcores"),
    secrets=(dict(type="str", no_log=False), "--secrets"),  # a keystore path, not a secret
    env=(dict(type="dict"), "--env"),
    placement_tag=(dict(type="str"), "--placement-tag"),
    anti_affinity=(dict(type="bool"), "--no-anti-affinity"),
    port_stride=(dict(type="int"), "--port-stride"),
    scale_up=(dict(type="float"), "--scale-up"),
    scale_down=(dict(type="float"), "--scale-down"),
    min_instances=(dict(type="int"), "--min-instances"),
    max_instances=(dict(type="int"), "--max-instances"),
    cooldown=(dict(type="int"), "--cooldown"),
    tick_seconds=(dict(type="float"), "--tick-seconds"),
    concurrency_per_instance=(dict(type="float"), "--concurrency-per-instance"),
    drain_timeout=(dict(type="int"), "--drain-timeout"),
    zk_ensemble=(dict(type="str"), "--zk-ensemble"),
    zk_path=(dict(type="str"), "--zk-path"),
    ranger_service=(dict(type="str"), "--ranger-service"),
    ranger_app_id=(dict(type="str"), "--ranger-app-id"),
    ranger_audit=(dict(type="bool"), "--ranger-audit"),
    docker_network=(dict(type="str"), "--docker-network"),
    docker_privileged=(dict(type="bool"), "--docker-privileged"),
    docker_delayed_removal=(dict(type="bool"), "--docker-delayed-removal"),
    docker_mounts=(dict(type="list", elements="str"), "--docker-mounts"),
    docker_ports=(dict(type="list", elements="str"), "--docker-ports"),
    secrets_password=(dict(type="str", no_log=True), None),  # HADOOP_CREDSTORE_PASSWORD
)


def service_args():
    return dict((name, dict(spec)) for name, (spec, flag) in SERVICE_OPTIONS.items())


def argument_spec(*parts):
    spec = {}
    for part in parts:
        spec.update(part)
    return spec


def service_argv(params):
    """The `tarn submit` flags the options stand for (the token included: it stays in-process)."""
    argv = ["--service-name", params["service_name"]]
    if params.get("user"):
        argv += ["--user", params["user"]]
    for name, (spec, flag) in SERVICE_OPTIONS.items():
        value = params.get(name)
        if value is None or flag is None:
            continue
        if name == "anti_affinity":
            argv += [] if value else [flag]
        elif name == "ranger_audit":
            argv += ["--ranger-audit" if value else "--no-ranger-audit"]
        elif spec["type"] == "bool":
            argv += [flag] if value else []
        elif name == "env":
            for key in sorted(value):
                argv += ["--env", "%s=%s" % (key, value[key])]
        elif spec["type"] == "list":
            for item in value:
                argv += [flag, item]
        else:
            argv += [flag, str(value)]
    return argv


def service_environ(params):
    """The environment the CLI would read: the user's fallbacks and the credential store password."""
    environ = dict((k, os.environ[k]) for k in ("HADOOP_USER_NAME", "USER", "HADOOP_CONF_DIR") if k in os.environ)
    if params.get("secrets_password"):
        environ[tarn_service.STORE_PASSWORD_ENV] = params["secrets_password"]
    return environ


def tarn_config(params):
    """A validated tarn.stdlib.config.TarnConfig, through the CLI's own parser (same defaults, same checks)."""
    parser = ConfigArgumentParser(prog="tarn_deploy", allow_abbrev=False)
    add_config_arguments(parser)
    return validate(config_from_namespace(parser.parse_args(service_argv(params)), service_environ(params)))


# ---- running


def check_libraries(module):
    if REQUESTS_IMPORT_ERROR is not None:
        module.fail_json(msg=missing_required_lib("requests"), exception=REQUESTS_IMPORT_ERROR)
    if TARN_IMPORT_ERROR is not None:
        module.fail_json(
            msg=missing_required_lib("tarn", url="the tarn.yarn collection's src/ (role tarn.yarn.tarn installs it)"),
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
        environ=os.environ,
    )


def fail(module, exc):
    """One place that turns TARN's errors (one line naming the option at fault) into fail_json."""
    text = str(exc)
    if text.startswith("--"):  # "--min-instances: …" names the option: min_instances
        flag, sep, rest = text.partition(":")
        text = flag[2:].replace("-", "_") + sep + rest
    module.fail_json(msg=text)


def run(module, action):
    """A module's whole run: the imports it needs, then ``action(module)``'s result, or the failure."""
    check_libraries(module)
    try:
        result = action(module)
    except TarnError as exc:
        fail(module, exc)
    module.exit_json(**result)


def instances(service):
    return tarn_service.instances_of(service) if service else []
