"""The NodeManagers' Docker policy, and whether a TARN service spec passes it, checked before
anything is uploaded or submitted.

Hadoop's setuid ``container-executor`` starts every Docker container of YARN's
LinuxContainerExecutor, and applies the ``[docker]`` rules of its ``container-executor.cfg`` to
each one: a network, runtime, capability or mount that is not allowed fails every launch with an
exit code, and an image whose registry is not in ``docker.trusted.registries`` is started without
any mount and without its added capabilities (YARN's own mounts of the container's working
directory included, so its launch script is not there), with a line on stderr and no error. TARN
reads the cluster's copy of that file (``--container-executor-cfg``, else
``<conf-dir>/container-executor.cfg``, where Ambari, Cloudera Manager and Bigtop put it on every
host) and refuses such a spec with one line naming the option and the fix.

The decisions (:func:`check_spec`) are pure, over the spec the builder made (so they see exactly
the Docker variables it wrote) and the parsed file. They follow Hadoop 3.4's
``configuration.c``, ``utils/docker-util.c`` and ``utils/mount-utils.c``, as the lab's stand-in
``lab/container_executor/container_executor.py`` does; ``tests/unit/service/test_docker_policy.py``
checks each decision against the stand-in's.

What cannot be seen from where tarn runs is the role's (``tarn.yarn.yarn_nodemanager``): that every
allowed mount exists on each node (else exit 52 for every container with a mount), that the Docker
engine knows each allowed runtime, that a mount's source exists there (exit 49), and symbolic
links (container-executor resolves both sides with ``realpath`` on the node; here paths are
compared as written, normalized).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from tarn.errors import ConfigError
from tarn.spec import (
    CONTROLLER,
    ENV_ENTRY_POINT,
    ENV_IMAGE,
    ENV_MOUNTS,
    ENV_NETWORK,
    ENV_PORTS,
    ENV_PRIVILEGED,
    ENV_RUNTIME,
    TRITON,
    component_of,
)
from tarn.stdlib.config import TarnConfig, cli_flag
from tarn.stdlib.hadoop_site import read_properties

JSON = dict[str, Any]

CFG_NAME = "container-executor.cfg"
DOCKER_SECTION = "docker"
# YARN's nvidia-docker-v2 GPU plugin (the yarn_nodemanager role's) runs every container that has
# yarn.io/gpu with this Docker runtime.
GPU_RUNTIME = "nvidia"
# The capabilities the NodeManager asks for every Docker container (its yarn-site.xml).
CAPABILITIES_KEY = "yarn.nodemanager.runtime.linux.docker.capabilities"
# docker-util.c's image name (validate_docker_image_name): lowercase path, no digest.
IMAGE_NAME = re.compile(r"^(([a-zA-Z0-9.-]+)(:[0-9]+)?/)?([a-z0-9_./-]+)(:[a-zA-Z0-9_.-]+)?$")
# docker-util.c's port mapping (validate_docker_ports_mapping), also DockerLinuxContainerRuntime's.
PORTS_MAPPING = re.compile(
    r"^:[0-9]+|^[0-9]+:[0-9]+|^(([0-9]|[1-9][0-9]|1[0-9]{2}|2[0-4][0-9]|25[0-5])\.)"
    r"{3}([0-9]|[1-9][0-9]|1[0-9]{2}|2[0-4][0-9]|25[0-5]):[0-9]+:[0-9]+$"
)
# What the yarn_nodemanager role calls each rule, for the fix.
ROLE_VARIABLE = {
    "docker.trusted.registries": "yarn_nodemanager_docker_trusted_registries",
    "docker.allowed.networks": "yarn_nodemanager_docker_allowed_networks",
    "docker.allowed.ro-mounts": "yarn_nodemanager_docker_allowed_ro_mounts",
    "docker.allowed.rw-mounts": "yarn_nodemanager_docker_allowed_rw_mounts",
    "docker.allowed.runtimes": "yarn_nodemanager_docker_allowed_runtimes",
    "docker.allowed.capabilities": "yarn_nodemanager_docker_allowed_capabilities",
    "docker.privileged-containers.enabled": "yarn_nodemanager_docker_privileged_containers",
}


# ---- the file, read as container-executor reads it (configuration.c)


def parse_cfg(text: str) -> dict[str, dict[str, str]]:
    """section → key → value ("" holds the lines before any [section]); ValueError on a line the
    real parser refuses (it then exits 24 for every operation). Its quirks are kept: '#' starts a
    comment anywhere, a value ends at the next '=', an empty value drops the key, a line of blanks
    is an error, the first of two equal keys wins, a repeated section is merged."""
    sections: dict[str, dict[str, str]] = {"": {}}
    current = ""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for raw in lines:
        if raw.startswith("#"):
            continue
        line = raw.split("#", 1)[0]
        if line[:1] == "[" and line[-1:] == "]":
            current = line[1:-1]
            if not current:
                raise ValueError("an empty section name []")
            sections.setdefault(current, {})
            continue
        if not line:
            continue
        pieces = [piece for piece in line.split("=") if piece]
        if not pieces or ("=" not in line):
            raise ValueError(f"the line {line!r} is not key=value")
        if len(pieces) >= 2:
            sections[current].setdefault(pieces[0].strip(), pieces[1].strip())
    return sections


def split_values(value: str | None) -> tuple[str, ...] | None:
    """A comma-separated value as container-executor splits it: empty pieces skipped, no trimming."""
    if value is None:
        return None
    return tuple(piece for piece in value.split(",") if piece) or (value,)


@dataclass(frozen=True)
class DockerPolicy:
    """The [docker] rules of one container-executor.cfg (``path``: where it was read, for messages)."""

    path: str
    sections: Mapping[str, Mapping[str, str]]

    def value(self, key: str, section: str = DOCKER_SECTION) -> str | None:
        return self.sections.get(section, {}).get(key)

    def values(self, key: str) -> tuple[str, ...] | None:
        """A list rule; None when the file does not set it (container-executor then allows nothing)."""
        return split_values(self.value(key))

    @property
    def docker_enabled(self) -> bool:
        """feature.docker.enabled (true/false in any case, or 0/1) at the top, or module.enabled=true
        exactly in [docker]; otherwise every Docker operation exits 32."""
        top = (self.value("feature.docker.enabled", "") or "").lower()
        return top in ("true", "1") or self.value("module.enabled") == "true"

    @property
    def privileged_enabled(self) -> bool:
        value = self.value("docker.privileged-containers.enabled")
        return value is not None and (value == "1" or value.lower() == "true")


def policy_of(text: str, path: str) -> DockerPolicy:
    """The policy in ``text`` (read from ``path``); ConfigError if container-executor could not read it."""
    try:
        return DockerPolicy(path, parse_cfg(text))
    except ValueError as exc:
        raise ConfigError(
            f"{cli_flag('container_executor_cfg')}: {path}: {exc}, and container-executor refuses every "
            "operation with such a file (exit 24); give the NodeManagers' file as they read it"
        ) from exc


# ---- the decisions (pure)


def image_trusted(image: str, registries: Iterable[str] | None) -> bool:
    """check_trusted_image: an entry is a prefix of the image name up to a '/' (the registry with its
    port, or a Docker Hub namespace); an entry starting with "library" trusts the names without any
    '/' (Docker Hub's official images)."""
    for registry in registries or ():
        if registry.startswith("library") and "/" not in image:
            return True
        if image.startswith(registry if registry.endswith("/") else registry + "/"):
            return True
    return False


def trusted_entry(image: str) -> str:
    """The docker.trusted.registries entry that would trust ``image``: its first path component
    (``registry:port``, or a Docker Hub namespace), or ``library`` for a name without a '/'."""
    return image.split("/", 1)[0] if "/" in image else "library"


def registry_of(image: str) -> str:
    """The registry Docker pulls ``image`` from (Docker's reference rules): the first path
    component when it has a '.' or a ':' or is localhost, otherwise Docker Hub."""
    first, slash, _rest = image.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        return first
    return "docker.io"


@dataclass(frozen=True)
class Mount:
    """One mount of ENV_MOUNTS: ``source:destination:mode``."""

    source: str
    destination: str
    mode: str

    @classmethod
    def parse(cls, text: str) -> Mount:
        source, destination, mode = [*text.split(":"), "", ""][:3]
        return cls(source, destination, mode)

    @property
    def read_write(self) -> bool:
        return self.mode == "rw"


def mount_allowed(source: str, entries: Iterable[str] | None) -> bool:
    """check_mount_permitted for a path: an entry equal to it or a directory above it. Only volume
    names can match a ``regex:`` entry, and TARN mounts paths."""
    wanted = posixpath.normpath(source)
    for entry in entries or ():
        if entry.startswith("regex:"):
            continue
        allowed = posixpath.normpath(entry)
        if wanted == allowed or wanted.startswith(allowed.rstrip("/") + "/"):
            return True
    return False


def spec_mounts(spec: JSON) -> list[Mount]:
    """Every mount the spec's components ask for, each once, in order."""
    seen: dict[str, Mount] = {}
    for env in _docker_envs(spec):
        for text in (env.get(ENV_MOUNTS) or "").split(","):
            if text and text not in seen:
                seen[text] = Mount.parse(text)
    return list(seen.values())


def check_spec(
    config: TarnConfig, spec: JSON, policy: DockerPolicy, nm_capabilities: tuple[str, ...] | None
) -> None:
    """Refuse (ConfigError, one line naming the option and the fix) a Docker spec that the
    NodeManagers' container-executor would refuse or run without its mounts. ``nm_capabilities``:
    what the NodeManagers' yarn-site.xml asks for every container, when the client configuration
    says (None: not known here)."""
    envs = _docker_envs(spec)
    if not envs:
        return
    _check_enabled(policy)
    for env in envs:
        _check_image(env.get(ENV_IMAGE) or "", spec, policy)
        _check_network(env.get(ENV_NETWORK) or "", policy)
        _check_privileged(env, policy)
        _check_ports(env.get(ENV_PORTS) or "")
    for mount in spec_mounts(spec):
        _check_mount(config, mount, policy)
    _check_gpu_runtime(spec, policy)
    _check_capabilities(nm_capabilities, policy)


def _docker_envs(spec: JSON) -> list[dict[str, str]]:
    envs = []
    for name in (CONTROLLER, TRITON):
        env = ((component_of(spec, name) or {}).get("configuration") or {}).get("env") or {}
        if env.get(ENV_RUNTIME) == "docker":
            envs.append(env)
    return envs


def _refuse(subject: str, problem: str, fix: str) -> NoReturn:
    raise ConfigError(f"{subject}: {problem}; {fix}")


def _listed(values: tuple[str, ...] | None) -> str:
    return ",".join(values) if values else "nothing"


def _rule(policy: DockerPolicy, key: str) -> str:
    """How a message names a rule: its key, the file and what it lists."""
    return f"{key} of {policy.path} ({_listed(policy.values(key))})"


def _on_every_node(key: str, value: str) -> str:
    return f"add {value} to {key} on every NodeManager ({ROLE_VARIABLE[key]} of tarn.yarn.yarn_nodemanager)"


def _check_enabled(policy: DockerPolicy) -> None:
    if not policy.docker_enabled:
        _refuse(
            cli_flag("container_executor_cfg"),
            f"{policy.path} does not enable Docker ([docker] module.enabled=true), and container-executor "
            "refuses every Docker container (exit 32)",
            "give the Docker NodeManagers' file (tarn.yarn.yarn_nodemanager with yarn_nodemanager_runtime: "
            f"docker writes it), or use {cli_flag('runtime')} process",
        )


def _check_image(image: str, spec: JSON, policy: DockerPolicy) -> None:
    flag = cli_flag("image")
    if not IMAGE_NAME.search(image):
        _refuse(
            flag,
            f"{image!r} is not an image name container-executor accepts (exit 56): "
            "[registry[:port]/]lowercase/path[:tag], without a digest",
            "tag the image so and give that name",
        )
    key = "docker.trusted.registries"
    if image_trusted(image, policy.values(key)):
        return
    lost = "; ".join(
        ["YARN's working and log directories, where the launch script is"]
        + [mount.source for mount in spec_mounts(spec)]
    )
    entry = trusted_entry(image)
    gpus = (
        " (and refuse those with GPUs: no runtime for an untrusted image, exit 74)"
        if _triton_gpus(spec)
        else ""
    )
    _refuse(
        flag,
        f"{image!r} (registry {registry_of(image)}) is not trusted by {_rule(policy, key)}: "
        f"container-executor would drop every mount of its containers ({lost}) and every added "
        f"capability{gpus}, so no TARN container could start",
        f"use an image under a trusted registry, or {_on_every_node(key, entry)}",
    )


def _check_network(network: str, policy: DockerPolicy) -> None:
    key = "docker.allowed.networks"
    if network and network not in (policy.values(key) or ()):
        _refuse(
            cli_flag("docker_network"),
            f"{network} is not in {_rule(policy, key)}, and container-executor refuses the container "
            "(exit 60)",
            f"use one of those networks, or {_on_every_node(key, network)}",
        )


def _check_privileged(env: Mapping[str, str], policy: DockerPolicy) -> None:
    if env.get(ENV_PRIVILEGED) != "true":
        return
    key = "docker.privileged-containers.enabled"
    if not policy.privileged_enabled:
        problem = (
            f"{key} is not true in {policy.path}, and container-executor refuses the container (exit 63)"
        )
    elif env.get(ENV_ENTRY_POINT) != "true":
        problem = (
            "container-executor runs a privileged container only in YARN's entry-point mode, and TARN's "
            "containers run their command through YARN's launch script: it refuses them (exit 63)"
        )
    else:
        return
    _refuse(cli_flag("docker_privileged"), problem, f"leave {cli_flag('docker_privileged')} out")


def _check_ports(mappings: str) -> None:
    for mapping in (m for m in mappings.split(",") if m):
        if not PORTS_MAPPING.search(mapping):
            container = mapping.rsplit(":", 1)[-1]
            _refuse(
                cli_flag("docker_ports"),
                f"{mapping!r} is not a port mapping YARN and container-executor accept (exit 61)",
                f"write HOST:CONTAINER, e.g. {container}:{container}",
            )


def _mount_origin(config: TarnConfig, mount: Mount) -> str:
    """The option that put a mount in the spec (the builder adds the local paths a component uses)."""
    text = f"{mount.source}:{mount.destination}:{mount.mode}"
    if text in config.docker_mounts:
        return "docker_mounts"
    for name in ("model_cache_dir", "model_repository", "secrets"):
        if getattr(config, name) == mount.source:
            return name
    return "docker_mounts"


def _check_mount(config: TarnConfig, mount: Mount, policy: DockerPolicy) -> None:
    ro, rw = "docker.allowed.ro-mounts", "docker.allowed.rw-mounts"
    if mount_allowed(mount.source, policy.values(rw)):
        return
    if not mount.read_write and mount_allowed(mount.source, policy.values(ro)):
        return
    origin = _mount_origin(config, mount)
    if mount.read_write:
        problem = (
            f"the read-write mount of {mount.source} is not under {_rule(policy, rw)}: container-executor "
            "refuses the container (exit 51)"
        )
        fix = _on_every_node(rw, mount.source)
    else:
        problem = (
            f"the read-only mount of {mount.source} is under neither {_rule(policy, ro)} nor {rw}: "
            "container-executor refuses the container (exit 50)"
        )
        fix = _on_every_node(ro, mount.source)
    if origin == "model_cache_dir":
        fix = (
            f"give the NodeManagers' cache (yarn_nodemanager_model_cache_dir, an allowed read-write mount), "
            f"or {fix}"
        )
    _refuse(cli_flag(origin), problem, fix)


def _triton_gpus(spec: JSON) -> int:
    triton = component_of(spec, TRITON) or {}
    gpu = ((triton.get("resource") or {}).get("additional") or {}).get("yarn.io/gpu") or {}
    return int(gpu.get("value") or 0)


def _check_gpu_runtime(spec: JSON, policy: DockerPolicy) -> None:
    gpus = _triton_gpus(spec)
    key = "docker.allowed.runtimes"
    if not gpus or GPU_RUNTIME in (policy.values(key) or ()):
        return
    _refuse(
        cli_flag("gpus_per_instance"),
        f"an instance with {gpus} yarn.io/gpu runs with Docker's {GPU_RUNTIME} runtime (YARN's "
        f"nvidia-docker-v2 plugin), which {_rule(policy, key)} does not allow (exit 74)",
        f"{_on_every_node(key, GPU_RUNTIME)} whose Docker engine has the NVIDIA Container Toolkit, "
        f"or give {cli_flag('gpus_per_instance')} 0 for CPU-only instances",
    )


def _check_capabilities(nm_capabilities: tuple[str, ...] | None, policy: DockerPolicy) -> None:
    key = "docker.allowed.capabilities"
    allowed = policy.values(key) or ()
    missing = [cap for cap in nm_capabilities or () if cap not in allowed]
    if missing:
        _refuse(
            cli_flag("container_executor_cfg"),
            f"{_rule(policy, key)} lacks {','.join(missing)}, which the NodeManagers add to every Docker "
            f"container ({CAPABILITIES_KEY}), and container-executor refuses each one (exit 62)",
            f"{_on_every_node(key, ','.join(missing))}, or remove them from {CAPABILITIES_KEY}",
        )


# ---- reading it where tarn runs (I/O)


def policy_path(config: TarnConfig, conf_dir: Path | None) -> Path | None:
    """``--container-executor-cfg``, else ``container-executor.cfg`` in the client configuration."""
    if config.container_executor_cfg:
        return Path(config.container_executor_cfg)
    return None if conf_dir is None else conf_dir / CFG_NAME


class PolicyMissing(ConfigError):
    """No container-executor.cfg where TARN looked."""


def read_policy(config: TarnConfig, conf_dir: Path | None) -> DockerPolicy:
    """The Docker policy TARN checks a Docker service against; PolicyMissing when there is no file,
    ConfigError when it cannot be read."""
    flag = cli_flag("container_executor_cfg")
    path = policy_path(config, conf_dir)
    why = (
        f"{cli_flag('runtime')} docker needs the NodeManagers' container-executor.cfg to refuse what their "
        "container-executor would refuse or silently drop (untrusted registries, mounts, networks, runtimes)"
    )
    fix = (
        f"pass {flag} PATH (a copy of the NodeManagers' file) or set TARN_CONTAINER_EXECUTOR_CFG, "
        "or put the file in the Hadoop client configuration"
    )
    if path is None:
        raise PolicyMissing(f"{flag}: no Hadoop client configuration to look in, and {why}; {fix}")
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise PolicyMissing(f"{flag}: {path} does not exist, and {why}; {fix}") from None
    except OSError as exc:
        raise ConfigError(
            f"{flag}: {path}: {exc.strerror}; give a copy this user can read (container-executor needs it "
            "root-owned and not writable by others, not unreadable)"
        ) from None
    return policy_of(text, str(path))


def nodemanager_capabilities(conf_dir: Path | None) -> tuple[str, ...] | None:
    """The capabilities the NodeManagers ask for every Docker container, when the client's
    yarn-site.xml says (a client configuration often lacks the NodeManagers' settings: then None,
    and the role checks them on the nodes)."""
    if conf_dir is None:
        return None
    value = read_properties(conf_dir / "yarn-site.xml").get(CAPABILITIES_KEY)
    if value is None:
        return None
    names = tuple(part.strip() for part in value.split(",") if part.strip())
    return () if [n.lower() for n in names] == ["none"] else names


def check_docker_policy(config: TarnConfig, spec: JSON, conf_dir: Path | None) -> None:
    """Read the NodeManagers' Docker policy and check ``spec`` against it (the Docker runtime only)."""
    if config.runtime != "docker":
        return
    check_spec(config, spec, read_policy(config, conf_dir), nodemanager_capabilities(conf_dir))


__all__ = [
    "CFG_NAME",
    "DockerPolicy",
    "Mount",
    "PolicyMissing",
    "check_docker_policy",
    "check_spec",
    "image_trusted",
    "mount_allowed",
    "parse_cfg",
    "policy_of",
    "read_policy",
    "registry_of",
    "spec_mounts",
    "trusted_entry",
]
