"""The checks of a :class:`~tarn.stdlib.config.declaration.TarnConfig`: one per concern, each failing
with one line, ``<flag>: <problem>; <fix>``.

A check names the option it refuses by its field (``fail("min_instances", …)``); the flag in the
message, and any flag the message mentions (:func:`cli_flag`), come from the declaration.
``tests/unit/stdlib/config/test_checks.py`` fails on a flag spelled out here.

Values that end up in a YARN launch command (paths, image, tags) may not contain shell
metacharacters or whitespace.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Callable
from typing import NoReturn

from tarn.errors import ConfigError
from tarn.stdlib.api_token import well_formed
from tarn.stdlib.config.declaration import MODEL_VERIFY_MODES, RUNTIMES, SCALE_SIGNALS, TarnConfig, cli_flag
from tarn.stdlib.openai.admission import POLICIES

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
_PRINCIPAL = re.compile(
    r"(?P<primary>[A-Za-z0-9_.-]+)(/(?P<instance>[A-Za-z0-9_.-]+))?@(?P<realm>[A-Za-z0-9.-]+)"
)
MIN_UNREADY_BOUND_S = 10  # no Triton instance is ready sooner (staging, start, the first probe)
_RESERVED_ENV_PREFIXES = ("YARN_CONTAINER_RUNTIME_",)  # set by the spec builder from the Docker flags
_RESERVED_ENV_KEYS = frozenset({"TARN_TOKEN"})
_UNSAFE_IN_ENV_VALUE = ('"', "`", "\\", "\n", "\r", "$(")  # YARN writes env as export K="V"
_PORTS = ("port", "grpc_port", "metrics_port", "am_port", "openai_port")  # each its own port, when set


def validate(config: TarnConfig) -> TarnConfig:
    """Check every option; return ``config`` unchanged or raise ConfigError naming the flag and the fix."""
    for check in _CHECKS:
        check(config)
    return config


def refuse(subject: str, problem: str, fix: str) -> NoReturn:
    """The one error of the options: ``<subject>: <problem>; <fix>``."""
    raise ConfigError(f"{subject}: {problem}; {fix}")


def fail(option: str, problem: str, fix: str) -> NoReturn:
    """Refuse the value of ``option`` (a TarnConfig field), named by its flag."""
    refuse(cli_flag(option), problem, fix)


def show(value: object) -> str:
    """A value as a message quotes it: its repr, cut to 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _require_safe(option: str, value: str) -> None:
    """No shell metacharacters or whitespace: the value ends up in a YARN launch command."""
    for char in value:
        if char in SHELL_METACHARACTERS or char in _WHITESPACE:
            fail(option, f"{show(value)} contains {char!r}", "remove shell metacharacters and spaces")


def _require_match(option: str, value: str, pattern: re.Pattern[str], fix: str) -> None:
    _require_safe(option, value)
    if not pattern.fullmatch(value):
        fail(option, f"{show(value)} is not valid", fix)


def _require_storage_path(option: str, value: str) -> None:
    """hdfs://[authority]/path or an absolute local path, no '..' segments."""
    if not value:
        fail(option, "is empty", "give hdfs:///path or an absolute /path")
    _require_safe(option, value)
    if value.startswith("hdfs://"):
        authority, slash, path = value[len("hdfs://") :].partition("/")
        if not slash or (authority and not re.fullmatch(r"[A-Za-z0-9.-]+(:\d{1,5})?", authority)):
            fail(
                option, f"{show(value)} is not an HDFS URI", "write hdfs:///path or hdfs://namenode:8020/path"
            )
    elif "://" in value:
        scheme = value.split("://", 1)[0]
        fail(option, f"unknown scheme {scheme!r}", "use hdfs://… or an absolute path (an NFS gateway mount)")
    elif not value.startswith("/"):
        fail(option, f"{show(value)} is a relative path", "use hdfs://… or an absolute path")
    else:
        path = value
    if ".." in path.split("/"):
        fail(option, f"{show(value)} contains '..'", "give the path without '..'")


def _check_service(c: TarnConfig) -> None:
    if c.runtime not in RUNTIMES:
        fail("runtime", f"{show(c.runtime)} is unknown", "use docker or process")
    fix = "use lowercase letters, digits and '-', starting with a letter, at most 63 characters"
    _require_match("service_name", c.service_name, _SERVICE_NAME, fix)
    if c.user is not None:
        _require_match("user", c.user, _NAME, "give a plain user name")
    _require_match("queue", c.queue, _NAME, "give a queue name such as default or root.gpu")
    if c.lifetime is not None and c.lifetime < 1:
        fail("lifetime", f"{c.lifetime} is not positive", "give seconds, or leave it out for no limit")
    _require_match("python", c.python, _PROGRAM, "give an interpreter such as python3 or /usr/bin/python3")


def _check_model_repository(c: TarnConfig) -> None:
    if not c.model_repository:
        fail("model_repository", "is required", "give hdfs:///path or an absolute /path")
    _require_storage_path("model_repository", c.model_repository)
    if c.model_cache_dir is not None:
        _require_safe("model_cache_dir", c.model_cache_dir)
        if not c.model_cache_dir.startswith("/") or ".." in c.model_cache_dir.split("/"):
            fail("model_cache_dir", f"{show(c.model_cache_dir)} is not an absolute path",
                 "give the node cache directory, e.g. /var/lib/tarn/model-cache")  # fmt: skip
    if not c.model_cache_max_gib > 0:
        fail("model_cache_max_gib", f"{c.model_cache_max_gib} is not positive", "give GiB, e.g. 100")
    if c.model_verify not in MODEL_VERIFY_MODES:
        fail("model_verify", f"{show(c.model_verify)} is unknown", "use hdfs or recompute")


def _check_image(c: TarnConfig) -> None:
    runtime = cli_flag("runtime")
    if c.runtime == "docker" and not c.image:
        fail("image", f"is required with {runtime} docker", f"give a Triton image, or use {runtime} process")
    if c.image is not None:
        _require_match("image", c.image, _IMAGE, "give an image reference such as registry/name:tag")


def _check_ports(c: TarnConfig) -> None:
    ports = {name: port for name in _PORTS if (port := getattr(c, name)) is not None}
    for name, port in ports.items():
        if not 1 <= port <= 65535:
            fail(name, f"{port} is outside 1..65535", "give a TCP port between 1 and 65535")
    seen: dict[int, str] = {}
    for name, port in ports.items():
        if port in seen:
            fail(
                name,
                f"{port} is also {seen[port]}",
                f"give {', '.join(cli_flag(n) for n in ports)} each their own port",
            )
        seen[port] = cli_flag(name)
    try:
        ipaddress.ip_address(c.address)
    except ValueError:
        fail("address", f"{show(c.address)} is not an IP address", "give a bind address such as 0.0.0.0")


def _check_port_stride(c: TarnConfig) -> None:
    if c.port_stride < 0:
        fail(
            "port_stride",
            f"{c.port_stride} is negative",
            "give 0 (one instance per node) or a positive offset",
        )
    if c.port_stride == 0:
        if not c.anti_affinity and c.max_instances > 1 and c.shares_host_network:
            fail(
                "port_stride",
                f"is 0 but {cli_flag('anti_affinity')} lets instances share a node",
                f"set {cli_flag('port_stride')}, e.g. 10",
            )
        return
    taken = {c.am_port: cli_flag("am_port")}
    for index in range(c.max_instances):
        ports = c.instance_ports(index)
        shifted = [("port", ports.http), ("grpc_port", ports.grpc), ("metrics_port", ports.metrics)]
        if ports.openai is not None:
            shifted.append(("openai_port", ports.openai))
        for name, port in shifted:
            where = f"instance {index}'s {cli_flag(name)} ({port})"
            if port > 65535:
                fail(
                    "port_stride",
                    f"{c.port_stride} puts {where} above 65535",
                    "lower the stride or the ports",
                )
            if port in taken:
                fail(
                    "port_stride",
                    f"{c.port_stride} makes {where} clash with {taken[port]}",
                    "choose another stride",
                )
            taken[port] = where


def _check_openai_admission(c: TarnConfig) -> None:
    if c.openai_max_generations < 0:
        fail(
            "openai_max_generations",
            f"{c.openai_max_generations} is negative",
            "give 0 (the model's own max_concurrent_generations) or the generations a front runs at once",
        )
    if c.openai_admission not in POLICIES:
        fail("openai_admission", f"{show(c.openai_admission)} is unknown", "use fair or fifo")


def _check_parallelism(c: TarnConfig) -> None:
    for name, value in (("tp", c.tp), ("pp", c.pp)):
        if value < 1:
            fail(name, f"{value} is less than 1", "give 1 or more GPUs")
    world = c.world_size
    if c.gpus_per_instance is not None and not (c.gpus_per_instance == 0 or c.gpus_per_instance >= world):
        fail(
            "gpus_per_instance",
            f"{c.gpus_per_instance} is below tp*pp ({world})",
            f"give 0 (CPU only) or at least {world}",
        )


def _check_resources(c: TarnConfig) -> None:
    for name, value in (
        ("memory_mb", c.memory_mb),
        ("vcores", c.vcores),
        ("controller_memory_mb", c.controller_memory_mb),
        ("controller_vcores", c.controller_vcores),
    ):
        if value < 1:
            fail(name, f"{value} is not positive", "give a positive amount")


def _check_scaling(c: TarnConfig) -> None:
    least, most, idle = (
        cli_flag("min_instances"),
        cli_flag("max_instances"),
        cli_flag("scale_to_zero_after_s"),
    )
    if c.min_instances < 0:
        fail("min_instances", f"{c.min_instances} is negative", "give 0 or more")
    if c.max_instances < 1:
        fail("max_instances", f"{c.max_instances} is less than 1", "give 1 or more")
    if c.min_instances > c.max_instances:
        fail(
            "min_instances",
            f"{c.min_instances} is above {most} ({c.max_instances})",
            f"lower it or raise {most}",
        )
    if c.scale_to_zero_after_s < 0:
        fail(
            "scale_to_zero_after_s", f"{c.scale_to_zero_after_s} is negative", "give seconds, or 0 for never"
        )
    if c.min_instances == 0 and not c.scale_to_zero_after_s:
        fail(
            "min_instances",
            f"0 without {idle}",
            f"give {idle} SECONDS (the idle time before the last instance goes), or 1 or more",
        )
    if c.scale_to_zero_after_s and c.min_instances:
        fail(
            "scale_to_zero_after_s",
            f"is set but {least} is {c.min_instances}",
            f"give {least} 0 with it, or leave it out",
        )
    for name, value in (("scale_up", c.scale_up), ("scale_down", c.scale_down)):
        if not 0.0 <= value <= 1.0:
            fail(name, f"{value} is outside [0, 1]", "give a load fraction such as 0.8")
    if c.scale_up <= c.scale_down:
        fail(
            "scale_up",
            f"{c.scale_up} is not above {cli_flag('scale_down')} ({c.scale_down})",
            f"make {cli_flag('scale_up')} the larger threshold",
        )
    if c.cooldown_ms < 0:
        fail("cooldown_ms", f"{c.cooldown_ms} is negative", "give milliseconds, 0 or more")
    if not 0.2 <= c.tick_seconds <= 300:
        fail("tick_seconds", f"{c.tick_seconds} is outside [0.2, 300]", "give seconds, e.g. 2")
    if not c.concurrency_per_instance > 0:
        fail("concurrency_per_instance", f"{c.concurrency_per_instance} is not positive", "give e.g. 4")
    if c.drain_timeout_s < 0:
        fail("drain_timeout_s", f"{c.drain_timeout_s} is negative", "give seconds, 0 or more")
    shortest = max(MIN_UNREADY_BOUND_S, 3 * c.tick_seconds)  # a few ticks, and Triton's quickest start
    if c.replace_unready_after_s < 0 or 0 < c.replace_unready_after_s < shortest:
        fail(
            "replace_unready_after_s",
            f"{c.replace_unready_after_s} is below {shortest:g} s",
            f"give 0 (never) or at least {shortest:g} seconds, more than an instance takes to start",
        )


def _check_scale_signal(c: TarnConfig) -> None:
    """--scale-on load uses --scale-up/--scale-down; queue and streams, --scale-up-at/--scale-down-at
    in their own unit (a mean per ready instance), which they need and load refuses."""
    on, up_at, down_at = cli_flag("scale_on"), cli_flag("scale_up_at"), cli_flag("scale_down_at")
    if c.scale_on not in SCALE_SIGNALS:
        fail("scale_on", f"{show(c.scale_on)} is unknown", "use load, queue or streams")
    if c.scale_on == "load":
        for name in ("scale_up_at", "scale_down_at"):
            if getattr(c, name) is not None:
                fail(
                    name,
                    f"is for {on} queue or streams; {on} load uses {cli_flag('scale_up')} and "
                    f"{cli_flag('scale_down')}",
                    f"give {on} queue or {on} streams with it, or leave it out",
                )
        return
    unit = "pending requests" if c.scale_on == "queue" else "streams in flight"
    if c.scale_on == "streams" and c.openai_port is None:
        fail(
            "scale_on",
            f"streams without {cli_flag('openai_port')}: no OpenAI front counts streams",
            f"give {cli_flag('openai_port')} PORT (the front beside each instance), or {on} load or queue",
        )
    if c.scale_up_at is None or c.scale_down_at is None:
        fail(
            "scale_on",
            f"{c.scale_on} needs {up_at if c.scale_up_at is None else down_at}",
            f"give {up_at} and {down_at}: the mean {unit} per ready instance above which an instance is "
            f"added and below which one is removed, e.g. {up_at} 8 {down_at} 2",
        )
    for name, value in (("scale_up_at", c.scale_up_at), ("scale_down_at", c.scale_down_at)):
        if not (math.isfinite(value) and value >= 0):
            fail(
                name,
                f"{value} is not a number of 0 or more",
                f"give the mean {unit} per ready instance, e.g. 8",
            )
    if c.scale_up_at <= c.scale_down_at:
        fail(
            "scale_up_at",
            f"{c.scale_up_at:g} is not above {down_at} ({c.scale_down_at:g})",
            f"make {up_at} the larger threshold",
        )


def _check_secrets(c: TarnConfig) -> None:
    if c.secrets is not None:
        _require_storage_path("secrets", c.secrets)


def _check_token(c: TarnConfig) -> None:
    token = cli_flag("token")
    if c.token is not None:
        value = c.token.reveal()
        if not value:
            fail("token", "is empty", f"give a token or leave {token} out")
        if not well_formed(value):
            fail("token", "contains spaces or non-printable characters", "use printable ASCII only")
        if c.token_file is not None:
            fail("token_file", f"is given with {token}", "give one of them")
    if c.token_file is not None:
        _require_match("token_file", c.token_file, _PROGRAM, "give a plain file path")


def _check_env(c: TarnConfig) -> None:
    seen: set[str] = set()
    token = c.token.reveal() if c.token is not None else None
    for key, value in c.env:
        _require_match("env", key, _ENV_KEY, "keys are letters, digits and '_', not starting with a digit")
        if key in seen:
            fail("env", f"{key} is given twice", "give each key once")
        seen.add(key)
        if key in _RESERVED_ENV_KEYS or key.startswith(_RESERVED_ENV_PREFIXES):
            # --docker-*: the family of the Docker runtime's flags, no one option
            fail("env", f"{key} is set by TARN", f"use the --docker-* flags or {cli_flag('token')} instead")
        for bad in _UNSAFE_IN_ENV_VALUE:
            if bad in value:
                fail("env", f"the value of {key} contains {bad!r}", "remove it")
        if token and token in value:
            fail(
                "env",
                f"{key} carries the {cli_flag('token')} value",
                f"the token reaches the controller only via {cli_flag('token')}",
            )


def _check_placement(c: TarnConfig) -> None:
    fix = "use letters, digits, '_', '.', '-' (at most 63)"
    _require_match("placement_tag", c.placement_tag, _PLACEMENT_TAG, fix)


def _check_zookeeper(c: TarnConfig) -> None:
    if c.zk_ensemble is not None:
        _require_safe("zk_ensemble", c.zk_ensemble)
        for member in c.zk_ensemble.split(","):
            host, _colon, port = member.partition(":")
            if not _HOST.fullmatch(host) or (port and not (port.isdigit() and 1 <= int(port) <= 65535)):
                fail(
                    "zk_ensemble",
                    f"{show(member)} is not host[:port]",
                    "write host1:2181,host2:2181 (no chroot)",
                )
    if not c.zk_path.startswith("/"):
        fail(
            "zk_path",
            f"{show(c.zk_path)} is not absolute",
            "start it with '/', e.g. /services/triton/instances",
        )
    _require_match("zk_path", c.zk_path, _ZK_PATH, "use /a/b/c with letters, digits, '_', '.', '-'")
    if any(part in (".", "..") for part in c.zk_path.split("/")) or c.zk_path.split("/")[1] == "zookeeper":
        fail("zk_path", f"{show(c.zk_path)} uses a reserved name", "avoid '.', '..' and /zookeeper")


def _check_ranger(c: TarnConfig) -> None:
    if c.ranger_service is not None:
        _require_match(
            "ranger_service", c.ranger_service, _NAME, "give the Ranger service name, e.g. triton_prod"
        )
    _require_match("ranger_app_id", c.ranger_app_id, _NAME, "give an id such as tarn")
    if c.ranger_conf_dir is not None:
        _require_match("ranger_conf_dir", c.ranger_conf_dir, _PROGRAM, "give a plain directory path")
        if c.ranger_service is None:  # Ranger is on only with a service: never a silent "allow all"
            service = cli_flag("ranger_service")
            fail("ranger_conf_dir", f"is given without {service}", f"add {service} NAME")


def _check_docker(c: TarnConfig) -> None:
    fix = "give a Docker network such as host or bridge"
    _require_match("docker_network", c.docker_network, _DOCKER_NETWORK, fix)
    for mount in c.docker_mounts:
        _require_safe("docker_mounts", mount)
        parts = mount.split(":")
        if len(parts) != 3 or parts[2] not in ("ro", "rw") or not all(p.startswith("/") for p in parts[:2]):
            fail(
                "docker_mounts", f"{show(mount)} is not /src:/dst[:ro|rw]", "give absolute paths and ro or rw"
            )
        if ".." in mount.split("/"):
            fail("docker_mounts", f"{show(mount)} contains '..'", "give the paths without '..'")
    for mapping in c.docker_ports:
        if not _PORT_MAPPING.fullmatch(mapping) or not all(1 <= int(p) <= 65535 for p in mapping.split(":")):
            fail("docker_ports", f"{show(mapping)} is not [host:]container", "give ports between 1 and 65535")
    if c.docker_ports and c.docker_network == "host":
        fail("docker_ports", "needs a bridge network", f"drop it or set {cli_flag('docker_network')} bridge")


def _check_kerberos(c: TarnConfig) -> None:
    if not c.service_principal and not c.service_keytab:
        return
    if not c.service_principal:
        fail(
            "service_keytab",
            "is given without a principal",
            f"add {cli_flag('service_principal')} tarn/_HOST@REALM",
        )
    if not c.service_keytab:
        fail(
            "service_principal",
            "has no keytab",
            f"add {cli_flag('service_keytab')} /etc/security/keytabs/<file>",
        )
    match = _PRINCIPAL.fullmatch(c.service_principal)
    if match is None:
        fail("service_principal", f"{show(c.service_principal)} is not a Kerberos principal",
             "write primary/_HOST@REALM (e.g. tarn/_HOST@EXAMPLE.COM) or primary@REALM")  # fmt: skip
    if match["realm"] != match["realm"].upper():
        fail("service_principal", f"realm {match['realm']!r} is not upper case",
             f"write the realm as the KDC names it: {match['realm'].upper()}")  # fmt: skip
    primary, realm = match["primary"], match["realm"]
    if match["instance"] not in (None, "_HOST"):
        fail("service_principal", f"{show(c.service_principal)} names one host; instances run on many",
             f"use {primary}/_HOST@{realm} (each node's keytab) or {primary}@{realm}")  # fmt: skip
    keytab = c.service_keytab.removeprefix("file://")
    _require_safe("service_keytab", keytab)
    if not keytab.startswith("/"):
        fail("service_keytab", f"{show(c.service_keytab)} is not an absolute path",
             "give its path on the NodeManagers, e.g. /etc/security/keytabs/tarn.service.keytab")  # fmt: skip


_CHECKS: tuple[Callable[[TarnConfig], None], ...] = (
    _check_service,
    _check_model_repository,
    _check_image,
    _check_ports,
    _check_openai_admission,
    _check_parallelism,
    _check_resources,
    _check_scaling,
    _check_scale_signal,
    _check_port_stride,
    _check_secrets,
    _check_token,
    _check_env,
    _check_placement,
    _check_zookeeper,
    _check_ranger,
    _check_docker,
    _check_kerberos,
)
