"""The YARN service spec (Hadoop 3.1+ Services API, ``POST /app/v1/services``) of one TARN service.

:func:`build_service_spec` is a pure function of a :class:`~tarn.stdlib.config.TarnConfig` and the HDFS
paths of the files TARN ships (:class:`Artifacts`). It validates the config first, so a spec is
never built from unchecked input. Two components (design.md §1):

``controller``
    1 container, restart ALWAYS, runs ``<python> tarn.pyz controller <the config's flags>``; the
    flags are :func:`~tarn.stdlib.config.config_to_argv` of the config, less ``--env`` and the token.
    Readiness: HTTP ``/health`` on ``--am-port`` (it must answer without a token).
``triton``
    ``--min-instances`` containers, restart ALWAYS, runs ``<python> tarn-launcher.pyz`` with the
    model repository, ports, bind address, ``--tp``/``--pp`` and ``--secrets``. Resource
    ``yarn.io/gpu`` = tp x pp (``--gpus-per-instance`` overrides: 0 requests no GPU at all, for
    CPU-only clusters; a larger number reserves more of a node). Readiness: HTTP
    ``/v2/health/ready`` on ``--port``.

Files are localized from HDFS as ``STATIC`` config files; YARN links each into the container's
working directory under its ``dest_file`` name, which the launch commands then use.

Placement. The YARN service AM tags every container with its *component name* (nothing else);
target tags name components. An ANTI_AFFINITY constraint on ``--placement-tag`` ("nvidia") would
target no container at all and silently allow several instances per node, so the constraint
targets the ``triton`` component itself and carries the placement tag as its ``name`` (shown in
the RM's service JSON). ``--no-anti-affinity`` drops the constraint; instance *i* (its YARN
``${COMPONENT_ID}``) then listens on ``port + i x --port-stride``, which the launcher computes.
With a stride the readiness check is ``DEFAULT`` (the AM only substitutes ``${THIS_HOST}``, not a
per-instance port); the controller checks ``/v2/health/ready`` itself before it registers an
instance anywhere.

Docker runtime: ``artifact {type DOCKER}`` plus the ``YARN_CONTAINER_RUNTIME_*`` variables
(Hadoop's DockerContainers.md): runtime type, image, network, mounts (the explicit
``--docker-mounts`` plus read-only mounts of a local ``--model-repository`` or ``--secrets`` not
already covered; they must be in the NodeManagers' allowed mounts), privileged (Triton only),
delayed removal, port mapping (bridge networks). Process runtime: no artifact and no such
variables; the NodeManager runs the command on the host.

Secrets never appear in the spec, so never in the RM's REST output either:

* the API token: ``tarn submit`` writes it to an HDFS file readable only by the service user
  (mode 0600 in that user's home, e.g. ``/user/<user>/.tarn/<service>/token``) and names it in
  ``Artifacts.token_file``. The spec carries that *path*; YARN localizes the file into the
  controller's private container directory (application-visibility, owned by the service user,
  deleted with the application) and the controller reads it with ``--token-file tarn-token``.
  With ``--openai-port`` the Triton containers get it the same way, for the OpenAI front
  (``--front-token-file``: its /metrics, and the proof of Knox's users).
  The value is not in the launch command, the container environment or the RM's service JSON.
* Ranger's plugin configuration (``--ranger-service``): ``tarn submit`` uploads the
  ``ranger-triton-*.xml`` files of ``--ranger-conf-dir`` beside the token (``Artifacts.ranger_conf``);
  YARN localizes them into the controller's working directory, and the controller is started
  with ``--ranger-conf-dir .``. They name Ranger Admin and the plugin's settings, no secret.
* JCEKS secrets (``--secrets``): an ``hdfs://`` file is localized the same way as
  ``tarn-secrets.jceks`` in each Triton container and the launcher reads it (``--secrets
  tarn-secrets.jceks``); a local path is passed as is. The store's password is Hadoop's default
  ``none`` unless ``tarn submit`` ran with ``HADOOP_CREDSTORE_PASSWORD`` set (Hadoop's own
  variable); then it travels like the token, in a private HDFS file localized as
  ``tarn-secrets.password``. The launcher turns the aliases into the
  environment of the tritonserver process it execs, never into the YARN container environment.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, fields, replace
from typing import Any

from tarn import __version__
from tarn.errors import ClusterError, ConfigError
from tarn.stdlib.config import LAUNCHER_OPTIONS, SHELL_METACHARACTERS, TarnConfig, config_to_argv, validate

JSON = dict[str, Any]

CONTROLLER = "controller"
TRITON = "triton"
# YARN's Docker runtime variables in a component's environment (Hadoop's DockerContainers.md):
# written here, read back by tarn.service.docker_policy.
ENV_RUNTIME = "YARN_CONTAINER_RUNTIME_TYPE"
ENV_IMAGE = "YARN_CONTAINER_RUNTIME_DOCKER_IMAGE"
ENV_NETWORK = "YARN_CONTAINER_RUNTIME_DOCKER_CONTAINER_NETWORK"
ENV_MOUNTS = "YARN_CONTAINER_RUNTIME_DOCKER_MOUNTS"
ENV_TMPFS = "YARN_CONTAINER_RUNTIME_DOCKER_TMPFS_MOUNTS"
ENV_PRIVILEGED = "YARN_CONTAINER_RUNTIME_DOCKER_RUN_PRIVILEGED_CONTAINER"
ENV_DELAYED_REMOVAL = "YARN_CONTAINER_RUNTIME_DOCKER_DELAYED_REMOVAL"
ENV_PORTS = "YARN_CONTAINER_RUNTIME_DOCKER_PORTS_MAPPING"
ENV_ENTRY_POINT = "YARN_CONTAINER_RUNTIME_DOCKER_RUN_OVERRIDE_DISABLE"
PAYLOAD_FILE = "tarn.pyz"
LAUNCHER_FILE = "tarn-launcher.pyz"
TOKEN_FILE = "tarn-token"  # noqa: S105 - the name of a localized file, not a token
SECRETS_FILE = "tarn-secrets.jceks"
SECRETS_PASSWORD_FILE = "tarn-secrets.password"  # noqa: S105 - the name of a localized file
RANGER_CONF_DIR = "."  # the ranger-triton-*.xml files are localized into the working directory
INSTANCE_ID = "${COMPONENT_ID}"  # substituted per container by the YARN service AM
TRITON_READY_PATH = "/v2/health/ready"
# Mounted read-only into Docker containers (_node_files).
ACCOUNT_FILES = ("/etc/passwd", "/etc/group")
KRB5_CONF = "/etc/krb5.conf"
HADOOP_CONF_ROOT = "/etc/hadoop"  # Bigtop's, ODP's and Cloudera's
CA_CERTIFICATES = "/etc/ssl/certs"
CONTROLLER_HEALTH_PATH = "/health"
# How often the service AM probes readiness (Hadoop's default is 30 s): an instance starts
# taking traffic seconds, not half a minute, after Triton is ready.
READINESS_CHECK_SECONDS = 2
# YARN's service AM ends the whole service once one component's containers failed more than 10
# times in its 6-hour window, and stops placing a component's instances on a node where more than
# 3 failed (docs/recovery.md): a service that runs for months, whose instances YARN relaunches and
# the controller replaces, must not end for eleven Triton crashes, and with anti-affinity a node
# shunned after four leaves its instance unplaced for hours.
COMPONENT_FAILURES_BEFORE_THE_SERVICE_ENDS = 1000
NODE_FAILURES_BEFORE_YARN_SHUNS_IT = 10
SERVICE_PROPERTIES = {
    "yarn.service.readiness-check-interval.seconds": str(READINESS_CHECK_SECONDS),
    "yarn.service.container-failure-per-component.threshold": str(COMPONENT_FAILURES_BEFORE_THE_SERVICE_ENDS),
    "yarn.service.node-blacklist.threshold": str(NODE_FAILURES_BEFORE_YARN_SHUNS_IT),
}
# The settings TARN reads back from a running service, as JSON in a property of the controller
# component (the Services API keeps properties intact; launch commands are shell words).
SETTINGS_PROPERTY = "tarn.settings"
# Options not kept in the settings: the token (never in a spec), the Triton environment (in the
# spec already, and possibly sensitive), --jar (ignored), the submitter's copy of
# container-executor.cfg (read where tarn runs, before submitting; nothing in the service uses it).
_UNSETTLED = frozenset({"token", "env", "jar", "container_executor_cfg"})


@dataclass(frozen=True)
class Artifacts:
    """HDFS paths of the files a TARN service localizes (uploaded by ``tarn submit``).

    payload: the TARN zipapp that runs ``controller``; launcher: the standard-library-only Triton
    launcher script; token_file: the API token, in a file only the service user can read (needed
    exactly when the config has a token); secrets_password_file: the JCEKS store password, in a
    file only the service user can read (when the store does not use Hadoop's default "none").
    rm_urls: the ResourceManager web URLs the controller calls, given to it on its command line
    (a Docker container has no Hadoop client configuration); none: it reads $HADOOP_CONF_DIR.
    ranger_conf: the ``ranger-triton-*.xml`` files of ``--ranger-conf-dir`` (needed exactly when the
    config has one), localized into the controller's working directory under their own names.
    """

    payload: str
    launcher: str
    token_file: str | None = None
    secrets_password_file: str | None = None
    rm_urls: tuple[str, ...] = ()
    ranger_conf: tuple[str, ...] = ()


def build_service_spec(config: TarnConfig, artifacts: Artifacts) -> JSON:
    """The YARN Services API JSON for ``config``; ConfigError if the config or the artifacts are invalid."""
    validate(config)
    _check_artifacts(config, artifacts)
    spec: JSON = {
        "name": config.service_name,
        "version": __version__,
        "description": f"TARN {__version__}: Triton Inference Server on YARN ({config.runtime} runtime)",
        "queue": config.queue,
        "components": [_controller(config, artifacts), _triton(config, artifacts)],
        "configuration": {"properties": dict(SERVICE_PROPERTIES)},
    }
    if config.lifetime is not None:
        spec["lifetime"] = config.lifetime
    if config.service_principal:
        # The service AM logs in from this keytab; TARN's controller and launcher do too (the same
        # flags reach them), so no token the service holds outlives its use.
        spec["kerberos_principal"] = {
            "principal_name": config.service_principal,
            "keytab": keytab_uri(config.service_keytab or ""),
        }
    return spec


def keytab_path(path: str) -> str:
    """The keytab's path on the NodeManagers, from a plain path or a file:// URI."""
    return path.removeprefix("file://")


def keytab_uri(path: str) -> str:
    """The spec's keytab: a file:// URI of the path on every NodeManager."""
    return path if path.startswith("file://") else f"file://{path}"


# ---- reading a service back: the one place for the component lookup, the instance number and its port


def component_of(service: JSON, name: str) -> JSON | None:
    """A component of a service spec or of the RM's service JSON, by name."""
    return next((c for c in service.get("components", []) if c.get("name") == name), None)


def container_host(container: JSON) -> str:
    """Where a container of the RM's service JSON is reached: its NodeManager's host (``bare_host``).
    TARN's containers use the host's network; a Docker container's ``hostname`` is the name YARN
    gives it (``triton-0.<service>.<user>``), which only YARN's registry DNS resolves. Before the
    RM knows the node: the hostname, else the IP."""
    return str(container.get("bare_host") or container.get("hostname") or container.get("ip") or "")


def triton_count(service: JSON) -> int:
    """The Triton instances the service asks for (its number_of_containers)."""
    component = component_of(service, TRITON)
    return int(component.get("number_of_containers") or 0) if component else 0


def instance_number(instance: str) -> int:
    """The YARN component instance id: triton-3 -> 3 (the port stride uses it)."""
    tail = instance.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else 0


@dataclass(frozen=True)
class Deployed:
    """What a running service was built from: its config (less the token and the Triton
    environment), whether the controller reads a token file, the RM URLs it was given."""

    config: TarnConfig
    has_token: bool
    rm_urls: tuple[str, ...]

    def instance_port(self, instance: str) -> int:
        """The HTTP port of a Triton instance, e.g. triton-3."""
        return self.config.instance_ports(instance_number(instance)).http


def read_back(service: JSON) -> Deployed:
    """The settings the spec builder wrote into ``service`` (a spec, or the RM's service JSON)."""
    controller = component_of(service, CONTROLLER) or {}
    text = ((controller.get("configuration") or {}).get("properties") or {}).get(SETTINGS_PROPERTY)
    if not text:
        raise ClusterError(
            f"service {service.get('name')}: no {SETTINGS_PROPERTY} on its controller; is it a TARN "
            "service deployed by this version? Redeploy it with tarn submit or tarn_deploy"
        )
    settings = json.loads(text)
    options: dict[str, Any] = {
        k: tuple(v) if isinstance(v, list) else v for k, v in settings["options"].items()
    }
    return Deployed(TarnConfig(**options), bool(settings["token_file"]), tuple(settings["rm_urls"]))


def with_settings(service: JSON, config: TarnConfig) -> JSON:
    """``service`` (the spec from :func:`~tarn.service.plan.spec_of`) with the controller launched
    from ``config`` instead: how the instance bounds change without touching Triton."""
    validate(config)
    deployed = read_back(service)
    controller = component_of(service, CONTROLLER)
    assert controller is not None  # read_back found it
    controller["launch_command"] = _controller_command(config, deployed.has_token, deployed.rm_urls)
    properties = controller.setdefault("configuration", {}).setdefault("properties", {})
    properties[SETTINGS_PROPERTY] = _settings(config, deployed.has_token, deployed.rm_urls)
    return service


def _settings(config: TarnConfig, has_token: bool, rm_urls: tuple[str, ...]) -> str:
    options = {f.name: getattr(config, f.name) for f in fields(config) if f.name not in _UNSETTLED}
    return json.dumps({"options": options, "token_file": has_token, "rm_urls": list(rm_urls)}, sort_keys=True)


# ---- the two components


def _controller(config: TarnConfig, artifacts: Artifacts) -> JSON:
    files = [_static(artifacts.payload, PAYLOAD_FILE)]
    if artifacts.token_file is not None:
        files.append(_static(artifacts.token_file, TOKEN_FILE))
    files += [_static(path, path.rsplit("/", 1)[-1]) for path in artifacts.ranger_conf]
    am_mapping = () if config.docker_network == "host" else (f"{config.am_port}:{config.am_port}",)
    has_token = artifacts.token_file is not None
    component = _component(
        config,
        name=CONTROLLER,
        count=1,
        command=_controller_command(config, has_token, artifacts.rm_urls),
        resource={"cpus": config.controller_vcores, "memory": str(config.controller_memory_mb)},
        readiness=_http_readiness(config.am_port, CONTROLLER_HEALTH_PATH),
        env=_docker_env(
            config, privileged=False, ports=am_mapping, reads=(config.model_repository, *_node_files(config))
        ),
        files=files,
    )
    if config.anti_affinity:
        # Beside Triton's constraint the controller needs one of its own (docs/recovery.md). Once
        # one component has a placement policy, YARN's service AM asks for every component's
        # containers with SchedulingRequests; one without a constraint is accepted the first time
        # and, asked again (the controller's replacement), fails every AM heartbeat in YARN 3.4's
        # ResourceManager with a NullPointerException (SingleConstraintAppPlacementAllocator
        # compares the stored request's null constraint): nothing is allocated again in that AM
        # attempt. Anti-affinity to itself constrains nothing: there is one controller.
        component["placement_policy"] = _anti_affinity(CONTROLLER, CONTROLLER)
    # YARN merges the service's properties into each component's: written here too, the spec
    # reads back exactly as it was sent.
    properties = {**SERVICE_PROPERTIES, SETTINGS_PROPERTY: _settings(config, has_token, artifacts.rm_urls)}
    component["configuration"]["properties"] = properties
    return component


def _triton(config: TarnConfig, artifacts: Artifacts) -> JSON:
    files = [_static(artifacts.launcher, LAUNCHER_FILE)]
    if config.secrets is not None and config.secrets.startswith("hdfs://"):
        files.append(_static(config.secrets, SECRETS_FILE))
    if artifacts.secrets_password_file is not None:
        files.append(_static(artifacts.secrets_password_file, SECRETS_PASSWORD_FILE))
    if _front_has_token(config, artifacts):
        files.append(_static(str(artifacts.token_file), TOKEN_FILE))
    component = _component(
        config,
        name=TRITON,
        count=config.min_instances,
        command=_triton_command(config, artifacts),
        resource=_triton_resource(config),
        readiness=_triton_readiness(config),
        env={**_triton_docker_env(config), **config.env_vars},
        files=files,
    )
    if config.anti_affinity:
        component["placement_policy"] = _anti_affinity(config.placement_tag, TRITON)
    return component


def _component(
    config: TarnConfig,
    *,
    name: str,
    count: int,
    command: str,
    resource: JSON,
    readiness: JSON,
    env: dict[str, str],
    files: list[JSON],
) -> JSON:
    component: JSON = {"name": name, "number_of_containers": count}
    if config.runtime == "docker":
        component["artifact"] = {"id": config.image, "type": "DOCKER"}
    component.update(
        {
            "launch_command": command,
            "resource": resource,
            "restart_policy": "ALWAYS",
            "readiness_check": readiness,
            "configuration": {"env": env, "files": files},
        }
    )
    return component


# ---- launch commands


def _controller_command(config: TarnConfig, has_token: bool, rm_urls: tuple[str, ...]) -> str:
    # The ranger conf dir is the submitter's: the controller reads the files YARN localized.
    ranger_conf_dir = None if config.ranger_conf_dir is None else RANGER_CONF_DIR
    shipped = replace(
        config, token=None, token_file=None, ranger_conf_dir=ranger_conf_dir, container_executor_cfg=None
    )
    flags = config_to_argv(shipped, with_env=False)
    if has_token:
        flags += ["--token-file", TOKEN_FILE]
    flags += [text for url in rm_urls for text in ("--rm-url", url)]
    return _exec([config.python, PAYLOAD_FILE, CONTROLLER, *flags])


def _triton_command(config: TarnConfig, artifacts: Artifacts) -> str:
    """The launcher with its subset of the options; a localized keystore goes by its local name."""
    secrets = config.secrets
    if secrets is not None and secrets.startswith("hdfs://"):
        secrets = SECRETS_FILE
    launcher = replace(config, secrets=secrets, port_stride=0)
    args = [config.python, LAUNCHER_FILE, *config_to_argv(launcher, only=_LAUNCHER_FLAGS)]
    if artifacts.secrets_password_file is not None:
        args += ["--secrets-password-file", SECRETS_PASSWORD_FILE]
    if _front_has_token(config, artifacts):
        args += ["--front-token-file", TOKEN_FILE]
    command = _exec(args)
    if config.port_stride:  # ${COMPONENT_ID} must reach the AM unquoted, to be substituted
        command += f" --port-stride {config.port_stride} --instance-id {INSTANCE_ID}"
    return command


def _front_has_token(config: TarnConfig, artifacts: Artifacts) -> bool:
    """The OpenAI front gets the API token: its /metrics needs it, and Knox proves its users with it
    (tarn.stdlib.openai.trust). The token file is the service user's, like the container."""
    return config.openai_port is not None and artifacts.token_file is not None


_LAUNCHER_FLAGS = tuple(name for name in LAUNCHER_OPTIONS if name != "port_stride")


def _exec(args: list[str]) -> str:
    """A launch command that replaces the shell YARN runs it in. In a Docker container that shell
    is PID 1, which the kernel gives no signal it has no handler for: YARN's stop (SIGTERM) would
    be lost and Docker would SIGKILL the container after its grace period (10 s), so TARN's
    processes must receive it themselves to drain and deregister."""
    return "exec " + shlex.join(args)


# ---- pieces


def _triton_resource(config: TarnConfig) -> JSON:
    resource: JSON = {"cpus": config.vcores, "memory": str(config.memory_mb)}
    if config.gpus > 0:
        resource["additional"] = {"yarn.io/gpu": {"value": config.gpus, "unit": ""}}
    return resource


def yarn_checks_triton(config: TarnConfig) -> bool:
    """Whether YARN's readiness check asks Triton itself. With a stride it cannot (one URL for
    every instance): DEFAULT, which YARN reports READY as soon as the container has an address."""
    return not config.port_stride


def _triton_readiness(config: TarnConfig) -> JSON:
    if not yarn_checks_triton(config):
        return {"type": "DEFAULT"}
    return _http_readiness(config.port, TRITON_READY_PATH)


def _http_readiness(port: int, path: str) -> JSON:
    return {"type": "HTTP", "properties": {"url": f"http://${{THIS_HOST}}:{port}{path}"}}


def _anti_affinity(name: str, component: str) -> JSON:
    """At most one container of ``component`` per node; ``name`` is shown in the RM's service JSON."""
    constraint = {"name": name, "type": "ANTI_AFFINITY", "scope": "NODE", "target_tags": [component]}
    return {"constraints": [constraint]}


def _static(src: str, dest: str) -> JSON:
    return {"type": "STATIC", "src_file": src, "dest_file": dest}


def _node_files(config: TarnConfig) -> tuple[str, ...]:
    """Files of the node a Docker container reads, at the same paths as on the node (the
    yarn_nodemanager role allows each as a read-only mount): the accounts (YARN runs the container
    as a user of the node, by uid), the Hadoop client configuration ($HADOOP_CONF_DIR, which YARN
    passes on, is below it: fs.defaultFS, the NameNode's addresses), the node's CA certificates
    (HTTPS to the NameNode and the ResourceManager), and on a secure cluster Kerberos' settings and
    the service's keytab."""
    files: tuple[str, ...] = (*ACCOUNT_FILES, HADOOP_CONF_ROOT, CA_CERTIFICATES)
    if config.service_principal:
        files += (KRB5_CONF, keytab_path(config.service_keytab or ""))
    return files


def _triton_docker_env(config: TarnConfig) -> dict[str, str]:
    reads = (config.model_repository, config.secrets, *_node_files(config))
    # the node cache, when staging from HDFS: the launcher writes it (the role allows it rw)
    writes = (config.model_cache_dir,) if config.model_repository.startswith("hdfs://") else ()
    env = _docker_env(
        config, privileged=config.docker_privileged, ports=config.docker_ports, reads=reads, writes=writes
    )
    if env and config.world_size > 1:
        # The ranks of a world share the container (one IPC namespace: no --ipc=host, which YARN
        # cannot pass anyway). NCCL and the Python backend's stubs need more shared memory than
        # Docker's 64 MiB /dev/shm, and YARN has no --shm-size: a tmpfs on /dev/shm replaces
        # Docker's, private to the container and counted in its memory (--memory-mb).
        env[ENV_TMPFS] = "/dev/shm"  # noqa: S108 - a mount point, not a file
    return env


def _docker_env(
    config: TarnConfig,
    *,
    privileged: bool,
    ports: tuple[str, ...],
    reads: tuple[str | None, ...],
    writes: tuple[str | None, ...] = (),
) -> dict[str, str]:
    if config.runtime != "docker":
        return {}
    env = {ENV_RUNTIME: "docker", ENV_IMAGE: config.image or "", ENV_NETWORK: config.docker_network}
    mounts = _docker_mounts(config, reads, writes)
    optional = {
        ENV_MOUNTS: ",".join(mounts),
        ENV_PRIVILEGED: "true" if privileged else "",
        ENV_DELAYED_REMOVAL: "true" if config.docker_delayed_removal else "",
        ENV_PORTS: ",".join(ports),
    }
    env.update({key: value for key, value in optional.items() if value})
    return env


def _docker_mounts(
    config: TarnConfig, reads: tuple[str | None, ...], writes: tuple[str | None, ...] = ()
) -> list[str]:
    """The explicit mounts, then a mount of each local path the component reads (read-only) or
    writes (read-write) that none covers."""
    mounts = list(config.docker_mounts)
    for paths, mode in ((reads, "ro"), (writes, "rw")):
        for path in paths:
            if path is None or not path.startswith("/"):
                continue
            if not any(_within(path, mount.split(":")[1]) for mount in mounts):
                mounts.append(f"{path}:{path}:{mode}")
    return mounts


def _within(path: str, directory: str) -> bool:
    directory = directory.rstrip("/") or "/"
    return path == directory or path.startswith(directory if directory == "/" else directory + "/")


def _check_artifacts(config: TarnConfig, artifacts: Artifacts) -> None:
    named = {
        "payload": artifacts.payload,
        "launcher": artifacts.launcher,
        "token_file": artifacts.token_file,
        "secrets_password_file": artifacts.secrets_password_file,
        **{f"ranger_conf[{n}]": path for n, path in enumerate(artifacts.ranger_conf)},
    }
    for name, path in named.items():
        if path is None:
            continue
        if not path.startswith("hdfs://") or any(c in SHELL_METACHARACTERS or c.isspace() for c in path):
            raise ConfigError(
                f"artifacts.{name}: {path!r} is not a plain hdfs:// path; upload the file to HDFS"
            )
    if (config.token is not None or config.token_file is not None) and artifacts.token_file is None:
        raise ConfigError(
            "--token: the spec never carries the token; upload it to HDFS and set artifacts.token_file"
        )
    if (config.ranger_conf_dir is not None) != bool(artifacts.ranger_conf):
        raise ConfigError(
            "--ranger-conf-dir: the controller reads the ranger-triton-*.xml files from HDFS; upload "
            "the directory's files and set artifacts.ranger_conf (and only with --ranger-conf-dir)"
        )


__all__ = [
    "CONTROLLER",
    "LAUNCHER_FILE",
    "PAYLOAD_FILE",
    "RANGER_CONF_DIR",
    "SECRETS_FILE",
    "SECRETS_PASSWORD_FILE",
    "SETTINGS_PROPERTY",
    "TOKEN_FILE",
    "TRITON",
    "Artifacts",
    "Deployed",
    "build_service_spec",
    "component_of",
    "instance_number",
    "read_back",
    "triton_count",
    "with_settings",
]
