"""The TARN options: the seeds' ``yarn jar … Client`` flags, parsed into one validated, frozen config.

Same flag names and defaults as the seeds where they give them (``--port 8000``, ``--metrics-port
8002``, ``--am-port 8888``, ``--address 0.0.0.0``, ``--tp 1``, ``--pp 1``, ``--placement-tag
nvidia``, ``--scale-up 0.8``, ``--scale-down 0.2``, ``--zk-path /services/triton/instances``,
``--ranger-app-id tarn``; ``--grpc-port 8001`` is Triton's own default). Where the seeds are silent
TARN chooses: ``--min-instances 1``, ``--max-instances 4`` (the seeds' HAProxy example has four
slots), ``--cooldown 60000`` ms. ``--jar`` is accepted for compatibility and ignored (see
:attr:`TarnConfig.notes`).

Environment fallbacks (a flag always wins): ``RANGER_SERVICE``, ``RANGER_APP_ID``, ``RANGER_AUDIT``
(as in the seeds), ``TARN_TOKEN`` for ``--token`` (keeps the token out of ``ps``), and
``HADOOP_USER_NAME`` then ``USER`` for ``--user``.

Everything here is pure: :func:`parse_config` reads only the ``argv`` and ``environ`` it is given.
:func:`validate` raises :class:`tarn.errors.ConfigError` with one line that starts with the
offending flag and ends with the fix. Values that end up in a YARN launch command (paths, image,
tags) may not contain shell metacharacters or whitespace.

The token is held in a :class:`Secret`: ``repr``, ``str``, f-strings, :meth:`TarnConfig.redacted`
and :func:`config_to_argv` never show it; only :meth:`Secret.reveal` does.
"""

from __future__ import annotations

import argparse
import hmac
import ipaddress
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, NoReturn

from tarn.errors import ConfigError

Runtime = Literal["docker", "process"]
RUNTIMES: tuple[Runtime, ...] = ("docker", "process")

SHELL_METACHARACTERS = frozenset(";|&$`<>\\'\"\n\r")
_WHITESPACE = frozenset(" \t\v\f")

_SERVICE_NAME = re.compile(r"[a-z][a-z0-9-]{0,62}")  # YARN service names (Registry DNS limit)
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")  # user, queue, Ranger service and app id
_PLACEMENT_TAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_IMAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}")
_DOCKER_NETWORK = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_HOST = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,252}[A-Za-z0-9])?")
_ZK_PATH = re.compile(r"(/[A-Za-z0-9_.-]+)+")
_PORT_MAPPING = re.compile(r"(\d{1,5}:)?\d{1,5}")
_PROGRAM = re.compile(r"[A-Za-z0-9_./+-]+")
_RESERVED_ENV_PREFIXES = ("YARN_CONTAINER_RUNTIME_",)  # set by the spec builder from the Docker flags
_RESERVED_ENV_KEYS = frozenset({"TARN_TOKEN"})
_UNSAFE_IN_ENV_VALUE = ('"', "`", "\\", "\n", "\r", "$(")  # YARN writes env as export K="V"
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"", "0", "false", "no", "off"})


class Secret:
    """A string that never shows itself: repr, str and format print ``***``."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def matches(self, candidate: str) -> bool:
        """Constant-time comparison, for checking a presented token."""
        return hmac.compare_digest(self._value.encode(), candidate.encode())

    def __repr__(self) -> str:
        return "Secret('***')"

    def __str__(self) -> str:
        return "***"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and self.matches(other._value)

    def __hash__(self) -> int:
        return hash((Secret, self._value))


def read_token(token: str | Secret | None, token_file: str | None) -> Secret | None:
    """The API token: the one given, else the content of ``token_file`` (surrounding whitespace
    dropped), else None. One reader for the CLI, the modules, submit and the controller."""
    if token is not None:
        return token if isinstance(token, Secret) else Secret(token)
    if token_file is not None:
        return Secret(Path(token_file).read_text().strip())
    return None


@dataclass(frozen=True)
class InstancePorts:
    http: int
    grpc: int
    metrics: int


@dataclass(frozen=True, kw_only=True)
class TarnConfig:
    """One TARN service. Build it with :func:`parse_config`; check a hand-built one with :func:`validate`."""

    # what to serve
    model_repository: str
    image: str | None = None
    runtime: Runtime = "docker"
    # the YARN service
    service_name: str = "tarn"
    user: str | None = None
    queue: str = "default"
    lifetime: int | None = None  # seconds; None: unlimited
    # ports and API
    port: int = 8000
    grpc_port: int = 8001
    metrics_port: int = 8002
    am_port: int = 8888
    address: str = "0.0.0.0"  # noqa: S104 - the seeds' bind address; Triton must be reachable
    token: Secret | None = field(default=None, repr=False)
    token_file: str | None = None  # a local file holding the token (the controller gets one)
    # each Triton instance
    tp: int = 1
    pp: int = 1
    gpus_per_instance: int | None = None  # None: tp x pp; 0: CPU-only (no yarn.io/gpu requested)
    memory_mb: int = 4096
    vcores: int = 2
    controller_memory_mb: int = 1024
    controller_vcores: int = 1
    python: str = "python3"  # the interpreter that runs the launcher and the controller payload
    secrets: str | None = None
    # placement
    placement_tag: str = "nvidia"
    anti_affinity: bool = True
    port_stride: int = 0  # instance i listens on port + i * stride (several instances per node)
    # scaling
    scale_up: float = 0.8
    scale_down: float = 0.2
    min_instances: int = 1
    max_instances: int = 4
    cooldown_ms: int = 60000
    # the controller's loop (not in the seeds: their loop ran every 15-30 s and had no drain)
    tick_seconds: float = 2.0
    concurrency_per_instance: float = 4.0  # requests in flight that count as load 1.0
    drain_timeout_s: int = 30  # longest wait for a drained instance to go idle
    jar: str | None = None  # accepted for compatibility, ignored
    env: tuple[tuple[str, str], ...] = ()
    # discovery and authorization
    zk_ensemble: str | None = None
    zk_path: str = "/services/triton/instances"
    ranger_service: str | None = None
    ranger_app_id: str = "tarn"
    ranger_audit: bool = False
    # Docker runtime
    docker_network: str = "host"
    docker_privileged: bool = False
    docker_delayed_removal: bool = False
    docker_mounts: tuple[str, ...] = ()  # "src:dst:ro|rw"
    docker_ports: tuple[str, ...] = ()  # "host:container" or "container", bridge networks only

    @property
    def gpus(self) -> int:
        """yarn.io/gpu per Triton instance: tp x pp unless overridden."""
        return self.tp * self.pp if self.gpus_per_instance is None else self.gpus_per_instance

    @property
    def env_vars(self) -> dict[str, str]:
        return dict(self.env)

    @property
    def shares_host_network(self) -> bool:
        """Instances on one node share its ports (process runtime, or Docker's host network)."""
        return self.runtime == "process" or self.docker_network == "host"

    def instance_ports(self, index: int) -> InstancePorts:
        """The ports of Triton instance ``index`` (its YARN component id)."""
        shift = index * self.port_stride
        return InstancePorts(self.port + shift, self.grpc_port + shift, self.metrics_port + shift)

    @property
    def notes(self) -> tuple[str, ...]:
        """Things the user asked for that TARN accepts but does not use: to print, not to fail on."""
        notes: list[str] = []
        if self.jar is not None:
            notes.append("--jar is not needed and was ignored: TARN ships as a Python package")
        if self.runtime == "process":
            ignored = [
                flag
                for flag, used in (
                    ("--image", self.image is not None),
                    ("--docker-privileged", self.docker_privileged),
                    ("--docker-mounts", bool(self.docker_mounts)),
                    ("--docker-ports", bool(self.docker_ports)),
                )
                if used
            ]
            if ignored:
                notes.append(f"{', '.join(ignored)} ignored with --runtime process")
        return tuple(notes)

    def redacted(self) -> dict[str, Any]:
        """A JSON-friendly view for /config, logs and --dry-run: the token shows as ``***``."""
        view: dict[str, Any] = {}
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, Secret):
                value = str(value)
            elif item.name == "env":
                value = dict(value)
            elif isinstance(value, tuple):
                value = list(value)
            view[item.name] = value
        return view


_DEFAULTS = TarnConfig(model_repository="")


# ---- parsing


class ConfigArgumentParser(argparse.ArgumentParser):
    """An ArgumentParser that raises ConfigError (one line) instead of printing usage and exiting."""

    def error(self, message: str) -> NoReturn:
        message = message.replace("\n", " ").removeprefix("argument ")
        raise ConfigError(f"{message}; see {self.prog} --help")


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the TARN flags to ``parser`` (the CLI reuses this); read them back with config_from_namespace."""
    d = _DEFAULTS
    serve = parser.add_argument_group("what to serve")
    serve.add_argument("--model-repository", help="hdfs:///path (staged to the container) or /path (NFS)")
    serve.add_argument("--image", help="Triton Docker image (docker runtime)")
    serve.add_argument("--runtime", choices=RUNTIMES, default=d.runtime, help="docker or process")
    serve.add_argument("--python", default=d.python, help="interpreter in the containers (default python3)")

    service = parser.add_argument_group("YARN service")
    service.add_argument("--service-name", default=d.service_name, help="YARN service name (default tarn)")
    service.add_argument("--user", help="YARN user (default $HADOOP_USER_NAME, then $USER)")
    service.add_argument("--queue", default=d.queue, help="YARN queue (default default)")
    service.add_argument("--lifetime", type=int, help="seconds before YARN stops the service (default never)")
    service.add_argument("--jar", help="accepted for compatibility with the Java client; ignored")

    api = parser.add_argument_group("ports and API")
    api.add_argument("--port", type=int, default=d.port, help="Triton HTTP port (default 8000)")
    api.add_argument("--grpc-port", type=int, default=d.grpc_port, help="Triton gRPC port (default 8001)")
    api.add_argument("--metrics-port", type=int, default=d.metrics_port, help="Triton metrics (default 8002)")
    api.add_argument("--am-port", type=int, default=d.am_port, help="controller API port (default 8888)")
    api.add_argument("--address", default=d.address, help="bind address (default 0.0.0.0)")
    api.add_argument("--token", help="API token (or $TARN_TOKEN); sent as X-TARN-Token")
    api.add_argument("--token-file", help="a file holding the API token")

    instance = parser.add_argument_group("each Triton instance")
    instance.add_argument("--tp", "--tensor-parallelism", dest="tp", type=int, default=d.tp)
    instance.add_argument("--pp", "--pipeline-parallelism", dest="pp", type=int, default=d.pp)
    instance.add_argument("--gpus-per-instance", type=int, help="yarn.io/gpu per instance: 0 or >= tp*pp")
    instance.add_argument("--memory-mb", type=int, default=d.memory_mb)
    instance.add_argument("--vcores", type=int, default=d.vcores)
    instance.add_argument("--controller-memory-mb", type=int, default=d.controller_memory_mb)
    instance.add_argument("--controller-vcores", type=int, default=d.controller_vcores)
    instance.add_argument("--secrets", help="JCEKS file: hdfs:///path or /path")
    instance.add_argument("--env", action="append", metavar="KEY=VALUE", help="Triton environment (repeat)")

    place = parser.add_argument_group("placement")
    place.add_argument("--placement-tag", default=d.placement_tag, help="anti-affinity tag (default nvidia)")
    place.add_argument("--no-anti-affinity", dest="anti_affinity", action="store_false", default=True)
    place.add_argument("--port-stride", type=int, default=d.port_stride, help="port offset per instance")

    scale = parser.add_argument_group("scaling")
    scale.add_argument("--scale-up", type=float, default=d.scale_up, help="load threshold (default 0.8)")
    scale.add_argument("--scale-down", type=float, default=d.scale_down, help="load threshold (default 0.2)")
    scale.add_argument("--min-instances", type=int, default=d.min_instances)
    scale.add_argument("--max-instances", type=int, default=d.max_instances)
    scale.add_argument("--cooldown", dest="cooldown_ms", type=int, default=d.cooldown_ms, help="ms")
    scale.add_argument("--tick-seconds", type=float, default=d.tick_seconds, help="control loop period (2)")
    scale.add_argument(
        "--concurrency-per-instance",
        type=float,
        default=d.concurrency_per_instance,
        help="requests in flight per instance that count as full load (default 4)",
    )
    scale.add_argument(
        "--drain-timeout", dest="drain_timeout_s", type=int, default=d.drain_timeout_s, help="seconds"
    )

    discovery = parser.add_argument_group("discovery and authorization")
    discovery.add_argument("--zk-ensemble", help="host:port[,host:port…]")
    discovery.add_argument("--zk-path", default=d.zk_path)
    discovery.add_argument("--ranger-service", "-rs", help="Ranger service (or $RANGER_SERVICE)")
    discovery.add_argument("--ranger-app-id", "-ra", help="Ranger app id (or $RANGER_APP_ID; default tarn)")
    discovery.add_argument(
        "--ranger-audit", "-raudit", action=argparse.BooleanOptionalAction, help="audit to Ranger"
    )

    docker = parser.add_argument_group("Docker runtime")
    docker.add_argument("--docker-network", default=d.docker_network, help="default host")
    docker.add_argument("--docker-privileged", action="store_true")
    docker.add_argument("--docker-delayed-removal", action="store_true")
    docker.add_argument("--docker-mounts", action="append", metavar="SRC:DST[:ro|rw][,…]")
    docker.add_argument("--docker-ports", action="append", metavar="[HOST:]CONTAINER[,…]")


def config_from_namespace(namespace: argparse.Namespace, environ: Mapping[str, str]) -> TarnConfig:
    """The config a parsed namespace describes, with the environment fallbacks; not yet validated."""
    ns = vars(namespace)
    token = ns["token"] if ns["token"] is not None else environ.get("TARN_TOKEN")
    audit = ns["ranger_audit"]
    return TarnConfig(
        model_repository=ns["model_repository"] or "",
        image=ns["image"],
        runtime=ns["runtime"],
        service_name=ns["service_name"],
        user=ns["user"] or environ.get("HADOOP_USER_NAME") or environ.get("USER") or None,
        queue=ns["queue"],
        lifetime=ns["lifetime"],
        port=ns["port"],
        grpc_port=ns["grpc_port"],
        metrics_port=ns["metrics_port"],
        am_port=ns["am_port"],
        address=ns["address"],
        token=None if token is None else Secret(token),
        token_file=ns["token_file"],
        tp=ns["tp"],
        pp=ns["pp"],
        gpus_per_instance=ns["gpus_per_instance"],
        memory_mb=ns["memory_mb"],
        vcores=ns["vcores"],
        controller_memory_mb=ns["controller_memory_mb"],
        controller_vcores=ns["controller_vcores"],
        python=ns["python"],
        secrets=ns["secrets"],
        placement_tag=ns["placement_tag"],
        anti_affinity=ns["anti_affinity"],
        port_stride=ns["port_stride"],
        scale_up=ns["scale_up"],
        scale_down=ns["scale_down"],
        min_instances=ns["min_instances"],
        max_instances=ns["max_instances"],
        cooldown_ms=ns["cooldown_ms"],
        tick_seconds=ns["tick_seconds"],
        concurrency_per_instance=ns["concurrency_per_instance"],
        drain_timeout_s=ns["drain_timeout_s"],
        jar=ns["jar"],
        env=parse_env(ns["env"] or ()),
        zk_ensemble=ns["zk_ensemble"],
        zk_path=ns["zk_path"],
        ranger_service=ns["ranger_service"] or environ.get("RANGER_SERVICE") or None,
        ranger_app_id=ns["ranger_app_id"] or environ.get("RANGER_APP_ID") or _DEFAULTS.ranger_app_id,
        ranger_audit=audit if audit is not None else _env_bool("RANGER_AUDIT", environ),
        docker_network=ns["docker_network"],
        docker_privileged=ns["docker_privileged"],
        docker_delayed_removal=ns["docker_delayed_removal"],
        docker_mounts=parse_docker_mounts(ns["docker_mounts"] or ()),
        docker_ports=_split_commas(ns["docker_ports"] or ()),
    )


def parse_config(argv: Sequence[str], environ: Mapping[str, str]) -> TarnConfig:
    """Parse the TARN flags in ``argv`` (no program name) and validate them; ConfigError if invalid."""
    parser = ConfigArgumentParser(prog="tarn", allow_abbrev=False)
    add_config_arguments(parser)
    return validate(config_from_namespace(parser.parse_args(list(argv)), environ))


def parse_env(items: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """``--env KEY=VALUE`` items as pairs; the value may itself contain '='."""
    pairs: list[tuple[str, str]] = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            _fail("--env", f"{_show(item)} has no '='", "write --env KEY=VALUE")
        pairs.append((key, value))
    return tuple(pairs)


def parse_docker_mounts(items: Iterable[str]) -> tuple[str, ...]:
    """``--docker-mounts`` values (comma-separated, repeatable) as ``src:dst:mode``; mode defaults to ro."""
    return tuple(m if m.count(":") >= 2 else f"{m}:ro" for m in _split_commas(items))


def config_to_argv(config: TarnConfig, *, with_env: bool = True) -> list[str]:
    """The flags that :func:`parse_config` turns back into ``config``, less the token and --jar.

    The token is never rendered (give the controller ``--token-file``); ``with_env=False`` also
    leaves out ``--env`` (the Triton environment, which the controller does not need).
    """
    argv = ["--model-repository", config.model_repository]
    optional: list[tuple[str, object]] = [
        ("--image", config.image),
        ("--user", config.user),
        ("--lifetime", config.lifetime),
        ("--token-file", config.token_file),
        ("--gpus-per-instance", config.gpus_per_instance),
        ("--secrets", config.secrets),
        ("--zk-ensemble", config.zk_ensemble),
        ("--ranger-service", config.ranger_service),
    ]
    argv += [text for flag, value in optional if value is not None for text in (flag, str(value))]
    for name in _PLAIN_FLAGS:
        argv += [_flag(name), str(getattr(config, name))]
    switches = [
        ("--no-anti-affinity", not config.anti_affinity),
        ("--ranger-audit" if config.ranger_audit else "--no-ranger-audit", True),
        ("--docker-privileged", config.docker_privileged),
        ("--docker-delayed-removal", config.docker_delayed_removal),
    ]
    argv += [flag for flag, on in switches if on]
    argv += [text for mount in config.docker_mounts for text in ("--docker-mounts", mount)]
    argv += [text for ports in config.docker_ports for text in ("--docker-ports", ports)]
    if with_env:
        argv += [text for key, value in config.env for text in ("--env", f"{key}={value}")]
    return argv


_PLAIN_FLAGS = (
    "runtime",
    "service_name",
    "queue",
    "port",
    "grpc_port",
    "metrics_port",
    "am_port",
    "address",
    "tp",
    "pp",
    "memory_mb",
    "vcores",
    "controller_memory_mb",
    "controller_vcores",
    "python",
    "placement_tag",
    "port_stride",
    "scale_up",
    "scale_down",
    "min_instances",
    "max_instances",
    "cooldown_ms",
    "tick_seconds",
    "concurrency_per_instance",
    "drain_timeout_s",
    "zk_path",
    "ranger_app_id",
    "docker_network",
)


def _flag(name: str) -> str:
    renamed = {"cooldown_ms": "--cooldown", "drain_timeout_s": "--drain-timeout"}
    return renamed.get(name, "--" + name.replace("_", "-"))


def _split_commas(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(part for item in items for part in item.split(",") if part)


def _env_bool(name: str, environ: Mapping[str, str]) -> bool:
    raw = environ.get(name, "").strip().lower()
    if raw in _TRUE:
        return True
    if raw not in _FALSE:
        _fail(name, f"{_show(raw)} is not a boolean", "set it to true or false")
    return False


# ---- validation: one check per concern, each failing with "<flag>: <problem>; <fix>"


def validate(config: TarnConfig) -> TarnConfig:
    """Check every option; return ``config`` unchanged or raise ConfigError naming the flag and the fix."""
    for check in _CHECKS:
        check(config)
    return config


def _fail(flag: str, problem: str, fix: str) -> NoReturn:
    raise ConfigError(f"{flag}: {problem}; {fix}")


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _require_safe(flag: str, value: str) -> None:
    """No shell metacharacters or whitespace: the value ends up in a YARN launch command."""
    for char in value:
        if char in SHELL_METACHARACTERS or char in _WHITESPACE:
            _fail(flag, f"{_show(value)} contains {char!r}", "remove shell metacharacters and spaces")


def _require_match(flag: str, value: str, pattern: re.Pattern[str], fix: str) -> None:
    _require_safe(flag, value)
    if not pattern.fullmatch(value):
        _fail(flag, f"{_show(value)} is not valid", fix)


def _require_storage_path(flag: str, value: str) -> None:
    """hdfs://[authority]/path or an absolute local path, no '..' segments."""
    if not value:
        _fail(flag, "is empty", "give hdfs:///path or an absolute /path")
    _require_safe(flag, value)
    if value.startswith("hdfs://"):
        authority, slash, path = value[len("hdfs://") :].partition("/")
        if not slash or (authority and not re.fullmatch(r"[A-Za-z0-9.-]+(:\d{1,5})?", authority)):
            _fail(
                flag, f"{_show(value)} is not an HDFS URI", "write hdfs:///path or hdfs://namenode:8020/path"
            )
    elif "://" in value:
        scheme = value.split("://", 1)[0]
        _fail(flag, f"unknown scheme {scheme!r}", "use hdfs://… or an absolute path (an NFS gateway mount)")
    elif not value.startswith("/"):
        _fail(flag, f"{_show(value)} is a relative path", "use hdfs://… or an absolute path")
    else:
        path = value
    if ".." in path.split("/"):
        _fail(flag, f"{_show(value)} contains '..'", "give the path without '..'")


def _check_service(c: TarnConfig) -> None:
    if c.runtime not in RUNTIMES:
        _fail("--runtime", f"{_show(c.runtime)} is unknown", "use docker or process")
    fix = "use lowercase letters, digits and '-', starting with a letter, at most 63 characters"
    _require_match("--service-name", c.service_name, _SERVICE_NAME, fix)
    if c.user is not None:
        _require_match("--user", c.user, _NAME, "give a plain user name")
    _require_match("--queue", c.queue, _NAME, "give a queue name such as default or root.gpu")
    if c.lifetime is not None and c.lifetime < 1:
        _fail("--lifetime", f"{c.lifetime} is not positive", "give seconds, or leave it out for no limit")
    _require_match("--python", c.python, _PROGRAM, "give an interpreter such as python3 or /usr/bin/python3")


def _check_model_repository(c: TarnConfig) -> None:
    if not c.model_repository:
        _fail("--model-repository", "is required", "give hdfs:///path or an absolute /path")
    _require_storage_path("--model-repository", c.model_repository)


def _check_image(c: TarnConfig) -> None:
    if c.runtime == "docker" and not c.image:
        _fail("--image", "is required with --runtime docker", "give a Triton image, or use --runtime process")
    if c.image is not None:
        _require_match("--image", c.image, _IMAGE, "give an image reference such as registry/name:tag")


def _check_ports(c: TarnConfig) -> None:
    named = {"--port": c.port, "--grpc-port": c.grpc_port, "--metrics-port": c.metrics_port}
    for flag, port in {**named, "--am-port": c.am_port}.items():
        if not 1 <= port <= 65535:
            _fail(flag, f"{port} is outside 1..65535", "give a TCP port between 1 and 65535")
    seen: dict[int, str] = {}
    for flag, port in {**named, "--am-port": c.am_port}.items():
        if port in seen:
            _fail(
                flag,
                f"{port} is also {seen[port]}",
                "give --port, --grpc-port, --metrics-port, --am-port each their own port",
            )
        seen[port] = flag
    try:
        ipaddress.ip_address(c.address)
    except ValueError:
        _fail("--address", f"{_show(c.address)} is not an IP address", "give a bind address such as 0.0.0.0")


def _check_port_stride(c: TarnConfig) -> None:
    if c.port_stride < 0:
        _fail(
            "--port-stride",
            f"{c.port_stride} is negative",
            "give 0 (one instance per node) or a positive offset",
        )
    if c.port_stride == 0:
        if not c.anti_affinity and c.max_instances > 1 and c.shares_host_network:
            _fail(
                "--port-stride",
                "is 0 but --no-anti-affinity lets instances share a node",
                "set --port-stride, e.g. 10",
            )
        return
    taken = {c.am_port: "--am-port"}
    for index in range(c.max_instances):
        ports = c.instance_ports(index)
        for name, port in (
            ("--port", ports.http),
            ("--grpc-port", ports.grpc),
            ("--metrics-port", ports.metrics),
        ):
            where = f"instance {index}'s {name} ({port})"
            if port > 65535:
                _fail(
                    "--port-stride",
                    f"{c.port_stride} puts {where} above 65535",
                    "lower the stride or the ports",
                )
            if port in taken:
                _fail(
                    "--port-stride",
                    f"{c.port_stride} makes {where} clash with {taken[port]}",
                    "choose another stride",
                )
            taken[port] = where


def _check_parallelism(c: TarnConfig) -> None:
    for flag, value in (("--tp", c.tp), ("--pp", c.pp)):
        if value < 1:
            _fail(flag, f"{value} is less than 1", "give 1 or more GPUs")
    world = c.tp * c.pp
    if c.gpus_per_instance is not None and not (c.gpus_per_instance == 0 or c.gpus_per_instance >= world):
        _fail(
            "--gpus-per-instance",
            f"{c.gpus_per_instance} is below tp*pp ({world})",
            f"give 0 (CPU only) or at least {world}",
        )


def _check_resources(c: TarnConfig) -> None:
    for flag, value in (
        ("--memory-mb", c.memory_mb),
        ("--vcores", c.vcores),
        ("--controller-memory-mb", c.controller_memory_mb),
        ("--controller-vcores", c.controller_vcores),
    ):
        if value < 1:
            _fail(flag, f"{value} is not positive", "give a positive amount")


def _check_scaling(c: TarnConfig) -> None:
    if c.min_instances < 0:
        _fail("--min-instances", f"{c.min_instances} is negative", "give 0 or more")
    if c.max_instances < 1:
        _fail("--max-instances", f"{c.max_instances} is less than 1", "give 1 or more")
    if c.min_instances > c.max_instances:
        _fail(
            "--min-instances",
            f"{c.min_instances} is above --max-instances ({c.max_instances})",
            "lower it or raise --max-instances",
        )
    for flag, value in (("--scale-up", c.scale_up), ("--scale-down", c.scale_down)):
        if not 0.0 <= value <= 1.0:
            _fail(flag, f"{value} is outside [0, 1]", "give a load fraction such as 0.8")
    if c.scale_up <= c.scale_down:
        _fail(
            "--scale-up",
            f"{c.scale_up} is not above --scale-down ({c.scale_down})",
            "make --scale-up the larger threshold",
        )
    if c.cooldown_ms < 0:
        _fail("--cooldown", f"{c.cooldown_ms} is negative", "give milliseconds, 0 or more")
    if not 0.2 <= c.tick_seconds <= 300:
        _fail("--tick-seconds", f"{c.tick_seconds} is outside [0.2, 300]", "give seconds, e.g. 2")
    if not c.concurrency_per_instance > 0:
        _fail("--concurrency-per-instance", f"{c.concurrency_per_instance} is not positive", "give e.g. 4")
    if c.drain_timeout_s < 0:
        _fail("--drain-timeout", f"{c.drain_timeout_s} is negative", "give seconds, 0 or more")


def _check_secrets(c: TarnConfig) -> None:
    if c.secrets is not None:
        _require_storage_path("--secrets", c.secrets)


def _check_token(c: TarnConfig) -> None:
    if c.token is not None:
        value = c.token.reveal()
        if not value:
            _fail("--token", "is empty", "give a token or leave --token out")
        if not all("!" <= char <= "~" for char in value):  # printable ASCII, no spaces; never echoed
            _fail("--token", "contains spaces or non-printable characters", "use printable ASCII only")
        if c.token_file is not None:
            _fail("--token-file", "is given with --token", "give one of them")
    if c.token_file is not None:
        _require_match("--token-file", c.token_file, _PROGRAM, "give a plain file path")


def _check_env(c: TarnConfig) -> None:
    seen: set[str] = set()
    token = c.token.reveal() if c.token is not None else None
    for key, value in c.env:
        _require_match("--env", key, _ENV_KEY, "keys are letters, digits and '_', not starting with a digit")
        if key in seen:
            _fail("--env", f"{key} is given twice", "give each key once")
        seen.add(key)
        if key in _RESERVED_ENV_KEYS or key.startswith(_RESERVED_ENV_PREFIXES):
            _fail("--env", f"{key} is set by TARN", "use the --docker-* flags or --token instead")
        for bad in _UNSAFE_IN_ENV_VALUE:
            if bad in value:
                _fail("--env", f"the value of {key} contains {bad!r}", "remove it")
        if token and token in value:
            _fail(
                "--env",
                f"{key} carries the --token value",
                "the token reaches the controller only via --token",
            )


def _check_placement(c: TarnConfig) -> None:
    fix = "use letters, digits, '_', '.', '-' (at most 63)"
    _require_match("--placement-tag", c.placement_tag, _PLACEMENT_TAG, fix)


def _check_zookeeper(c: TarnConfig) -> None:
    if c.zk_ensemble is not None:
        _require_safe("--zk-ensemble", c.zk_ensemble)
        for member in c.zk_ensemble.split(","):
            host, _colon, port = member.partition(":")
            if not _HOST.fullmatch(host) or (port and not (port.isdigit() and 1 <= int(port) <= 65535)):
                _fail(
                    "--zk-ensemble",
                    f"{_show(member)} is not host[:port]",
                    "write host1:2181,host2:2181 (no chroot)",
                )
    if not c.zk_path.startswith("/"):
        _fail(
            "--zk-path",
            f"{_show(c.zk_path)} is not absolute",
            "start it with '/', e.g. /services/triton/instances",
        )
    _require_match("--zk-path", c.zk_path, _ZK_PATH, "use /a/b/c with letters, digits, '_', '.', '-'")
    if any(part in (".", "..") for part in c.zk_path.split("/")) or c.zk_path.split("/")[1] == "zookeeper":
        _fail("--zk-path", f"{_show(c.zk_path)} uses a reserved name", "avoid '.', '..' and /zookeeper")


def _check_ranger(c: TarnConfig) -> None:
    if c.ranger_service is not None:
        _require_match(
            "--ranger-service", c.ranger_service, _NAME, "give the Ranger service name, e.g. triton_prod"
        )
    _require_match("--ranger-app-id", c.ranger_app_id, _NAME, "give an id such as tarn")


def _check_docker(c: TarnConfig) -> None:
    _require_match(
        "--docker-network", c.docker_network, _DOCKER_NETWORK, "give a Docker network such as host or bridge"
    )
    for mount in c.docker_mounts:
        _require_safe("--docker-mounts", mount)
        parts = mount.split(":")
        if len(parts) != 3 or parts[2] not in ("ro", "rw") or not all(p.startswith("/") for p in parts[:2]):
            _fail(
                "--docker-mounts",
                f"{_show(mount)} is not /src:/dst[:ro|rw]",
                "give absolute paths and ro or rw",
            )
        if ".." in mount.split("/"):
            _fail("--docker-mounts", f"{_show(mount)} contains '..'", "give the paths without '..'")
    for mapping in c.docker_ports:
        if not _PORT_MAPPING.fullmatch(mapping) or not all(1 <= int(p) <= 65535 for p in mapping.split(":")):
            _fail(
                "--docker-ports",
                f"{_show(mapping)} is not [host:]container",
                "give ports between 1 and 65535",
            )
    if c.docker_ports and c.docker_network == "host":
        _fail("--docker-ports", "needs a bridge network", "drop it or set --docker-network bridge")


_CHECKS: tuple[Callable[[TarnConfig], None], ...] = (
    _check_service,
    _check_model_repository,
    _check_image,
    _check_ports,
    _check_parallelism,
    _check_resources,
    _check_scaling,
    _check_port_stride,
    _check_secrets,
    _check_token,
    _check_env,
    _check_placement,
    _check_zookeeper,
    _check_ranger,
    _check_docker,
)

__all__ = [
    "RUNTIMES",
    "ConfigArgumentParser",
    "InstancePorts",
    "Runtime",
    "Secret",
    "TarnConfig",
    "add_config_arguments",
    "config_from_namespace",
    "config_to_argv",
    "parse_config",
    "parse_docker_mounts",
    "parse_env",
    "validate",
]
