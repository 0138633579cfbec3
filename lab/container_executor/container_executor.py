"""LAB-ONLY stand-in for Hadoop 3.4.2's setuid ``container-executor``.

This file is for the lab's nodes. It is never part of the collection's roles, and no production
cluster ever uses it. Where the user supplies a Hadoop binary distribution with a real
``bin/container-executor``, the lab uses that binary and leaves this file out.

What it is for: the NodeManager's LinuxContainerExecutor with the Docker runtime
(DockerLinuxContainerRuntime) calls ``container-executor`` for every privileged step, and the
real setuid binary cannot be built or obtained on this machine. This program speaks the same
command line (argument orders, operation numbers, the Docker command file) and gives the same
exit codes as the real binary, as Hadoop's ``main.c``, ``container-executor.c``, ``util.h``,
``utils/docker-util.c``, ``utils/mount-utils.c`` and ``configuration.c`` define them. It reads
the same ``container-executor.cfg`` and applies its rules with the real exit codes: the Docker
module switch, ``banned.users``/``min.user.id``/``allowed.system.users``, trusted registries
(an image from another registry still runs, but its mounts and added capabilities are dropped,
with a line on stderr), the allowed ro/rw mounts, networks, runtimes, capabilities, devices,
privileged containers, and the ownership and mode of the configuration file and the executable.
It writes the pid file the NodeManager reads (the container's pid from ``docker inspect``),
waits for the container and exits with its exit code, as the real one does.

Where the real binary turns a ``docker run`` refusal into an exit code: every refusal of a
command file exits DOCKER_RUN_FAILED (29) and names the specific code (51, 60, ...) in its
message ("docker error code=60, error message='Invalid docker network'"), exactly as
``construct_docker_command`` does. The specific codes are what the decision functions return.

How it runs: a Python script cannot be setuid, so the lab installs it root-owned and calls it
as root through a root-owned wrapper and sudo (``yarn ALL=(root) NOPASSWD: <this program>``).
The setup check is adapted to that:

* the executable whose owner, group and mode are checked (root-owned, group equal to
  ``yarn.nodemanager.linux-container-executor.group``, no write or execute for others; exit 22)
  is the wrapper named by the environment variable ``TARN_CE_BINARY`` when it is set (the
  wrapper passes it, e.g. on sudo's command line or through ``env_keep``), else this file. The
  setuid bit is not required: neither a script nor its wrapper can carry one;
* the NodeManager's uid (the real binary's real uid) is ``SUDO_UID`` when sudo set it, else
  the caller's uid;
* the configuration is ``TARN_CE_CONF`` when set, else ``../etc/hadoop/container-executor.cfg``
  relative to this file, as the real binary resolves it relative to its own location; it and
  every directory above it must be root-owned and not group- or world-writable (exit 24, naming
  the path).

What it does NOT do: it is not setuid and separates no privileges (it runs every step as root,
switching to the container's user only to exec the localizer and the non-Docker launch script,
and owning the directories it creates as the real binary would); no cgroups (no mounting, no
pid written to a cgroup, no cgroup clean-up, no GPU/FPGA/device cgroup isolation: the
``--module-*`` requests are accepted and do nothing); no traffic control (``tc``); no terminal
(``--exec-container``); no runC. Non-Docker containers (LAUNCH_CONTAINER, used for the YARN
service's AM) are launched only as far as YARN needs: directories, pid file, the launch script
as the user, the exit code file. Deviations from the real code, each on purpose: the bridge
network's driver is looked up with ``docker.binary`` (the real binary runs ``/usr/bin/docker``
there whatever the configuration says); an existing ``sysfs`` directory is reused; there is no
sleep after the last ``docker inspect`` retry; a privileged container's user is checked against
the ``root``/``docker`` groups and ``sudo -l`` as in the real code, but nothing else.

Standard library only; it runs with Debian 12's ``/usr/bin/python3``.
"""

from __future__ import annotations

import contextlib
import enum
import errno
import grp
import os
import pwd
import re
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

# ---------------------------------------------------------------------------------------------
# Facts from Hadoop 3.4.2's sources: the numbers and names the NodeManager relies on.
# ---------------------------------------------------------------------------------------------


class Exit(enum.IntEnum):
    """Exit codes (util.h, enum errorcodes). A C ``return -1`` is exit status 255."""

    SUCCESS = 0
    INVALID_ARGUMENT_NUMBER = 1
    INVALID_COMMAND_PROVIDED = 3
    INVALID_NM_ROOT_DIRS = 5
    SETUID_OPER_FAILED = 6
    UNABLE_TO_EXECUTE_CONTAINER_SCRIPT = 7
    UNABLE_TO_SIGNAL_CONTAINER = 8
    INVALID_CONTAINER_PID = 9
    OUT_OF_MEMORY = 18
    INITIALIZE_USER_FAILED = 20
    PATH_TO_DELETE_IS_NULL = 21
    INVALID_CONTAINER_EXEC_PERMISSIONS = 22
    INVALID_CONFIG_FILE = 24
    SETSID_OPER_FAILED = 25
    WRITE_PIDFILE_FAILED = 26
    WRITE_CGROUP_FAILED = 27
    TRAFFIC_CONTROL_EXECUTION_FAILED = 28
    DOCKER_RUN_FAILED = 29
    FEATURE_DISABLED = 32
    COULD_NOT_CREATE_SCRIPT_COPY = 33
    COULD_NOT_CREATE_CREDENTIALS_COPY = 34
    COULD_NOT_CREATE_WORK_DIRECTORIES = 35
    COULD_NOT_CREATE_APP_LOG_DIRECTORIES = 36
    COULD_NOT_CREATE_TMP_DIRECTORIES = 37
    ERROR_CREATE_CONTAINER_DIRECTORIES_ARGUMENTS = 38
    INVALID_CONTAINER_ID = 43
    DOCKER_EXEC_FAILED = 44
    COULD_NOT_CREATE_KEYSTORE_COPY = 45
    COULD_NOT_CREATE_TRUSTSTORE_COPY = 46
    BUFFER_TOO_SMALL = 48
    INVALID_MOUNT = 49
    INVALID_RO_MOUNT = 50
    INVALID_RW_MOUNT = 51
    MOUNT_ACCESS_ERROR = 52
    INVALID_DOCKER_COMMAND_FILE = 53
    INCORRECT_DOCKER_COMMAND = 54
    INVALID_DOCKER_CONTAINER_NAME = 55
    INVALID_DOCKER_IMAGE_NAME = 56
    INVALID_DOCKER_USER_NAME = 57
    INVALID_DOCKER_INSPECT_FORMAT = 58
    UNKNOWN_DOCKER_COMMAND = 59
    INVALID_DOCKER_NETWORK = 60
    INVALID_DOCKER_PORTS_MAPPING = 61
    INVALID_DOCKER_CAPABILITY = 62
    PRIVILEGED_DOCKER_CONTAINERS_DISABLED = 63
    INVALID_DOCKER_DEVICE = 64
    INVALID_DOCKER_STOP_COMMAND = 65
    INVALID_DOCKER_KILL_COMMAND = 66
    INVALID_DOCKER_VOLUME_DRIVER = 67
    INVALID_DOCKER_VOLUME_NAME = 68
    INVALID_DOCKER_VOLUME_COMMAND = 69
    DOCKER_PID_HOST_DISABLED = 70
    INVALID_DOCKER_PID_NAMESPACE = 71
    INVALID_DOCKER_IMAGE_TRUST = 72
    INVALID_DOCKER_TMPFS_MOUNT = 73
    INVALID_DOCKER_RUNTIME = 74
    DOCKER_SERVICE_MODE_DISABLED = 75
    FAILED = 255  # a C function's -1


# util.c get_error_message, for the codes a docker command file can earn.
MESSAGES: Mapping[int, str] = {
    Exit.BUFFER_TOO_SMALL: "Buffer too small",
    Exit.INVALID_MOUNT: "Invalid mount",
    Exit.INVALID_RO_MOUNT: "Invalid read-only mount",
    Exit.INVALID_RW_MOUNT: "Invalid read-write mount",
    Exit.MOUNT_ACCESS_ERROR: "Mount access error",
    Exit.INVALID_DOCKER_COMMAND_FILE: "Invalid docker command file passed",
    Exit.INCORRECT_DOCKER_COMMAND: "Incorrect command",
    Exit.INVALID_DOCKER_CONTAINER_NAME: "Invalid docker container name",
    Exit.INVALID_DOCKER_IMAGE_NAME: "Invalid docker image name",
    Exit.INVALID_DOCKER_USER_NAME: "Invalid docker user name",
    Exit.INVALID_DOCKER_INSPECT_FORMAT: "Invalid docker inspect format",
    Exit.UNKNOWN_DOCKER_COMMAND: "Unknown docker command",
    Exit.INVALID_DOCKER_NETWORK: "Invalid docker network",
    Exit.INVALID_DOCKER_PORTS_MAPPING: "Invalid docker ports mapping",
    Exit.INVALID_DOCKER_CAPABILITY: "Invalid docker capability",
    Exit.PRIVILEGED_DOCKER_CONTAINERS_DISABLED: "Privileged docker containers are disabled",
    Exit.INVALID_DOCKER_DEVICE: "Invalid docker device",
    Exit.INVALID_DOCKER_STOP_COMMAND: "Invalid docker stop command",
    Exit.INVALID_DOCKER_KILL_COMMAND: "Invalid docker kill command",
    Exit.INVALID_DOCKER_VOLUME_DRIVER: "Invalid docker volume-driver",
    Exit.INVALID_DOCKER_VOLUME_NAME: "Invalid docker volume name",
    Exit.INVALID_DOCKER_VOLUME_COMMAND: "Invalid docker volume command",
    Exit.DOCKER_PID_HOST_DISABLED: "Docker host pid namespace is disabled",
    Exit.INVALID_DOCKER_PID_NAMESPACE: "Invalid docker pid namespace",
    Exit.INVALID_DOCKER_IMAGE_TRUST: "Docker image is not trusted",
    Exit.INVALID_DOCKER_TMPFS_MOUNT: "Invalid docker tmpfs mount",
    Exit.INVALID_DOCKER_RUNTIME: "Invalid docker runtime",
    Exit.DOCKER_SERVICE_MODE_DISABLED: "Docker service mode disabled",
}


class RunAsUserCommand(enum.IntEnum):
    """The third argument of ``<user> <yarn-user> <command> ...`` (container-executor.h)."""

    INITIALIZE_CONTAINER = 0
    LAUNCH_CONTAINER = 1
    SIGNAL_CONTAINER = 2
    DELETE_AS_USER = 3
    LAUNCH_DOCKER_CONTAINER = 4
    LIST_AS_USER = 5
    SYNC_YARN_SYSFS = 6


NM_GROUP_KEY = "yarn.nodemanager.linux-container-executor.group"
DOCKER_SECTION = "docker"  # in container-executor.cfg
COMMAND_SECTION = "docker-command-execution"  # in a docker command file
DEFAULT_BANNED_USERS = ("yarn", "mapred", "hdfs", "bin")
DEFAULT_MIN_USER_ID = 1000
DEFAULT_INSPECT_RETRIES = 10
INSPECT_RETRY_SLEEP_S = 3
CONTAINER_SCRIPT = "launch_container.sh"
CREDENTIALS_FILE = "container_tokens"
KEYSTORE_FILE = "yarn_provided.keystore"
TRUSTSTORE_FILE = "yarn_provided.truststore"
TMP_DIRS = ("tmp", "private_slash_tmp", "private_var_slash_tmp")
FILE_PATH_SEPARATOR = "%"  # PrivilegedOperation.LINUX_FILE_PATH_SEPARATOR
INSPECT_FORMATS = (
    "{{.State.Status}}",
    "{{range(.NetworkSettings.Networks)}}{{.IPAddress}},{{end}}{{.Config.Hostname}}",
    "{{json .NetworkSettings.Ports}}",
    "{{.State.Status}},{{.Config.StopSignal}}",
)
MOUNT_OPTIONS = ("rw", "ro", "shared", "rshared", "slave", "rslave", "private", "rprivate")

# docker-util.c and mount-utils.c (POSIX extended expressions; Python reads these the same).
IMAGE_NAME = re.compile(r"^(([a-zA-Z0-9.-]+)(:[0-9]+)?/)?([a-z0-9_./-]+)(:[a-zA-Z0-9_.-]+)?$")
VOLUME_NAME = re.compile(r"^[a-zA-Z0-9]([a-zA-Z0-9_.-]*)$")
TMPFS_MOUNT = re.compile(r"^/[^:]+$")
PORTS_MAPPING = re.compile(
    r"^:[0-9]+|^[0-9]+:[0-9]+|^(([0-9]|[1-9][0-9]|1[0-9]{2}|2[0-4][0-9]|25[0-5])\.)"
    r"{3}([0-9]|[1-9][0-9]|1[0-9]{2}|2[0-4][0-9]|25[0-5]):[0-9]+:[0-9]+$"
)


@dataclass(frozen=True)
class Refused:
    """An operation refused: the exit code and the line the real binary prints."""

    code: int
    message: str


# ---------------------------------------------------------------------------------------------
# container-executor.cfg and docker command files (configuration.c): one parser for both.
# ---------------------------------------------------------------------------------------------


class ConfigFileError(Exception):
    """A line the real parser rejects; it exits INVALID_CONFIG_FILE (24) on the spot."""


@dataclass(frozen=True)
class Config:
    """Sections of key=value pairs; the section "" holds the lines before any [section]."""

    sections: Mapping[str, tuple[tuple[str, str], ...]]

    def value(self, key: str, section: str = "") -> str | None:
        for name, value in self.sections.get(section, ()):
            if name == key:
                return value
        return None

    def values(self, key: str, section: str = "", delimiter: str = ",") -> list[str] | None:
        """split_delimiter: empty pieces skipped, no trimming; a value of delimiters only is kept."""
        value = self.value(key, section)
        if value is None:
            return None
        return [piece for piece in value.split(delimiter) if piece] or [value]


def parse_config(text: str) -> Config:
    """Read a file as configuration.c does, quirks included: '#' starts a comment anywhere, a
    value ends at the next '=', an empty value drops the key, a line of spaces is an error."""
    sections: dict[str, list[tuple[str, str]]] = {"": []}
    current = ""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for raw in lines:
        if raw.startswith("#"):
            continue
        line = raw.split("#", 1)[0]
        if len(line) >= 1 and line[0] == "[" and line[-1] == "]":
            current = line[1:-1]
            if not current:
                raise ConfigFileError("Empty section name")
            sections.setdefault(current, [])
            continue
        if not line:
            continue
        pieces = [piece for piece in line.split("=") if piece]
        if not pieces:
            raise ConfigFileError(f"Error with line '{line}', no '=' found")
        if len(pieces) < 2:
            if "=" not in line:
                raise ConfigFileError(f"configuration tokenization failed, error with line {line}")
            continue  # "key=" or "key=#comment": no value, the key is not stored
        sections[current].append((pieces[0].strip(), pieces[1].strip()))
    return Config({name: tuple(pairs) for name, pairs in sections.items() if pairs or name})


def feature_enabled(value: str | None, default: bool) -> bool:
    """is_feature_enabled: true/false in any case, or 0/1; anything else is the default."""
    if value is None:
        return default
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    if value in ("0", "1"):
        return value == "1"
    return default


def docker_enabled(cfg: Config) -> bool:
    """feature.docker.enabled at the top, or module.enabled=true (exactly) in [docker]."""
    return feature_enabled(cfg.value("feature.docker.enabled"), False) or (
        cfg.value("module.enabled", DOCKER_SECTION) == "true"
    )


def docker_binary(cfg: Config) -> str:
    return cfg.value("docker.binary", DOCKER_SECTION) or cfg.value("docker.binary") or "/usr/bin/docker"


def inspect_retries(cfg: Config) -> int:
    value = cfg.value("docker.inspect.max.retries", DOCKER_SECTION)
    return DEFAULT_INSPECT_RETRIES if value is None else c_atoi(value)


def c_atoi(text: str) -> int:
    """atoi: leading blanks, a sign, digits; whatever does not parse is 0."""
    match = re.match(r"\s*([+-]?[0-9]+)", text)
    return int(match.group(1)) if match else 0


def c_strtol(text: str) -> int | None:
    """strtol with the real binary's full-string check: None when anything is left over."""
    match = re.fullmatch(r"\s*([+-]?[0-9]+)", text)
    return int(match.group(1)) if match else None


def valid_container_id(text: str) -> bool:
    """string-utils.c validate_container_id: container_[e<n>_]<n>_<n>_<n>_<n>."""
    parts = [part for part in text.split("_") if part]
    if not 5 <= len(parts) <= 6 or parts[0] != "container":
        return False
    digits = re.compile("[0-9]+")
    if not digits.fullmatch(parts[1]) and not digits.fullmatch(parts[1].removeprefix("e")):
        return False
    return all(digits.fullmatch(part) for part in parts[2:])


# ---------------------------------------------------------------------------------------------
# The setup check done before every operation (main.c assert_valid_setup).
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileStat:
    uid: int
    gid: int
    mode: int  # st_mode


def config_permission_problem(config_path: str, stat_of: Callable[[str], FileStat | None]) -> str | None:
    """check_configuration_permissions: the file and every directory above it, "/" excepted,
    root-owned and writable by neither group nor others."""
    path = config_path
    while True:
        found = stat_of(path)
        if found is None:
            return f"Can't stat file {path}"
        if found.uid != 0:
            return f"File {path} must be owned by root, but is owned by {found.uid}"
        if found.mode & (stat.S_IWGRP | stat.S_IWOTH):
            return f"File {path} must not be world or group writable, but is {found.mode & 0o7777:03o}"
        path = os.path.dirname(path)
        if path in ("/", ""):
            return None


def executable_permission_problem(found: FileStat | None, nm_gid: int) -> str | None:
    """check_executor_permissions, without its setuid bit (see the module docstring)."""
    if found is None:
        return "Could not stat the executable"
    if found.uid != 0:
        return "The container-executor binary should be user-owned by root."
    if found.gid != nm_gid:
        return (
            f"The configured nodemanager group {nm_gid} is different from the group of the "
            f"executable {found.gid}"
        )
    if found.mode & (stat.S_IWOTH | stat.S_IXOTH):
        return "The container-executor binary should not have write or execute for others."
    return None


@dataclass(frozen=True)
class Setup:
    cfg: Config
    nm_gid: int


def check_setup(
    wanted_config: str,
    config_path: str | None,
    executable: str,
    stat_of: Callable[[str], FileStat | None],
    read_text: Callable[[str], str],
    group_gid: Callable[[str], int | None],
) -> Setup | Refused:
    """The checks every invocation passes before its arguments are read, in the real order."""
    bad = Exit.INVALID_CONFIG_FILE
    if config_path is None:
        return Refused(bad, f"Configuration file {wanted_config} not found.")
    problem = config_permission_problem(config_path, stat_of)
    if problem is not None:
        return Refused(bad, problem)
    try:
        cfg = parse_config(read_text(config_path))
    except ConfigFileError as error:
        return Refused(bad, str(error))
    except OSError as error:
        return Refused(bad, f"Invalid conf file provided, unable to open file : {config_path} - {error}")
    nm_group = cfg.value(NM_GROUP_KEY)
    if nm_group is None:
        return Refused(bad, f"Can't get configured value for {NM_GROUP_KEY}.")
    nm_gid = group_gid(nm_group)
    if nm_gid is None:
        return Refused(bad, f"Can't get group information for {nm_group} - unknown.")
    problem = executable_permission_problem(stat_of(executable), nm_gid)
    if problem is not None:
        return Refused(
            Exit.INVALID_CONTAINER_EXEC_PERMISSIONS,
            f"{problem} ({executable})\nInvalid permissions on container-executor binary.",
        )
    return Setup(cfg, nm_gid)


# ---------------------------------------------------------------------------------------------
# Users (container-executor.c check_user).
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Account:
    name: str
    uid: int
    gid: int


def user_problem(name: str, account: Account | None, cfg: Config) -> str | None:
    """Why the real binary refuses to act as this user (set_user returns -1: exit 255)."""
    if name == "root":
        return "Running as root is not allowed"
    min_uid = DEFAULT_MIN_USER_ID
    configured = cfg.value("min.user.id")
    if configured is not None:
        parsed = c_strtol(configured)
        if parsed is None:
            return f"Illegal value of {configured} for min.user.id in configuration"
        min_uid = parsed
    if account is None:
        return f"User {name} not found"
    if account.uid < min_uid and name not in (cfg.values("allowed.system.users") or []):
        return (
            f"Requested user {name} is not whitelisted and has id {account.uid},"
            f"which is below the minimum allowed {min_uid}"
        )
    banned = cfg.values("banned.users")
    if name in (DEFAULT_BANNED_USERS if banned is None else banned):
        return f"Requested user {name} is banned"
    return None


# ---------------------------------------------------------------------------------------------
# The command line (main.c validate_arguments).
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckSetup:
    pass


@dataclass(frozen=True)
class RunDocker:
    command_file: str


@dataclass(frozen=True)
class InspectDockerContainer:
    args: tuple[str, ...]  # ["--format=...", container]


@dataclass(frozen=True)
class RemoveDockerContainer:
    hierarchy: str | None
    container: str


@dataclass(frozen=True)
class DeviceModule:
    module: str  # gpu, fpga, devices
    args: tuple[str, ...]


@dataclass(frozen=True)
class NotProvided:
    """Enabled in the configuration, but not done by this stand-in (cgroups, tc, terminal)."""

    code: int
    what: str


@dataclass(frozen=True)
class RunAs:
    run_as: str  # whose uid the real binary takes (argv[1])
    user: str  # whose directories (argv[2])


@dataclass(frozen=True)
class ContainerFiles:
    app_id: str
    container_id: str
    work_dir: str
    script: str
    credentials: str
    https: tuple[str, str] | None  # keystore, truststore
    pid_file: str
    local_dirs: tuple[str, ...]
    log_dirs: tuple[str, ...]


@dataclass(frozen=True)
class InitializeContainer:
    who: RunAs
    app_id: str
    container_id: str
    credentials: str
    local_dirs: tuple[str, ...]
    log_dirs: tuple[str, ...]
    command: tuple[str, ...]


@dataclass(frozen=True)
class LaunchContainer:
    who: RunAs
    files: ContainerFiles
    resources_key: str
    resources: tuple[str, ...]


@dataclass(frozen=True)
class LaunchDockerContainer:
    who: RunAs
    files: ContainerFiles
    command_file: str


@dataclass(frozen=True)
class SignalContainer:
    who: RunAs
    pid: int
    signal: int


@dataclass(frozen=True)
class DeleteAsUser:
    who: RunAs
    target: str | None
    base_dirs: tuple[str, ...]


@dataclass(frozen=True)
class ListAsUser:
    who: RunAs
    target: str


@dataclass(frozen=True)
class SyncYarnSysfs:
    who: RunAs
    app_id: str
    local_dirs: tuple[str, ...]


Operation = (
    CheckSetup
    | RunDocker
    | InspectDockerContainer
    | RemoveDockerContainer
    | DeviceModule
    | NotProvided
    | InitializeContainer
    | LaunchContainer
    | LaunchDockerContainer
    | SignalContainer
    | DeleteAsUser
    | ListAsUser
    | SyncYarnSysfs
)

USAGE = (
    "Usage: container-executor --checksetup\n"
    "       container-executor --run-docker <command-file>\n"
    "       container-executor --remove-docker-container [hierarchy] <container_id>\n"
    "       container-executor --inspect-docker-container <format> <container_id>\n"
    "       container-executor <user> <yarn-user> <command> <command-args>"
)


def split_dirs(joined: str) -> tuple[str, ...]:
    return tuple(piece for piece in joined.split(FILE_PATH_SEPARATOR) if piece)


def parse_invocation(argv: Sequence[str], cfg: Config) -> Operation | Refused:
    """argv as main() gets it (argv[0] is the program). The checks and codes of main.c."""
    usage = Refused(Exit.INVALID_ARGUMENT_NUMBER, USAGE)
    disabled_docker = Refused(Exit.FEATURE_DISABLED, "Feature disabled: docker")
    argc = len(argv)
    if argc < 2:
        return usage
    option = argv[1]
    modules = {"--module-gpu": "gpu", "--module-fpga": "fpga", "--module-devices": "devices"}
    if option in modules:
        return DeviceModule(modules[option], tuple(argv[2:]))
    if option == "--checksetup":
        return CheckSetup()
    if option == "--mount-cgroups":
        if not feature_enabled(cfg.value("feature.mount-cgroup.enabled"), False):
            return Refused(Exit.FEATURE_DISABLED, "Feature disabled: mount cgroup")
        return usage if argc < 4 else NotProvided(Exit.FEATURE_DISABLED, "mounting cgroups")
    if option in ("--tc-modify-state", "--tc-read-state", "--tc-read-stats"):
        if not feature_enabled(cfg.value("feature.tc.enabled"), False):
            return Refused(Exit.FEATURE_DISABLED, "Feature disabled: traffic control")
        return usage if argc != 3 else NotProvided(Exit.TRAFFIC_CONTROL_EXECUTION_FAILED, "tc")
    if option == "--exec-container":
        if not feature_enabled(cfg.value("feature.terminal.enabled"), False):
            return Refused(Exit.FEATURE_DISABLED, "Feature disabled: feature.terminal.enabled")
        return usage if argc != 3 else NotProvided(Exit.DOCKER_EXEC_FAILED, "a terminal")
    if option == "--run-docker":
        if not docker_enabled(cfg):
            return disabled_docker
        return usage if argc != 3 else RunDocker(argv[2])
    if option == "--remove-docker-container":
        if not docker_enabled(cfg):
            return disabled_docker
        if argc == 3:
            return RemoveDockerContainer(None, argv[2])
        return RemoveDockerContainer(argv[2], argv[3]) if argc == 4 else usage
    if option == "--inspect-docker-container":
        if not docker_enabled(cfg):
            return disabled_docker
        return usage if argc != 4 else InspectDockerContainer(tuple(argv[2:]))
    return parse_run_as_user(argv, cfg)


def parse_container_files(args: Sequence[str]) -> tuple[ContainerFiles, list[str]] | None:
    """app container workdir script tokens (--https ks ts | --http) pidfile local log ...rest."""
    if len(args) < 9:
        return None
    app_id, container_id, work_dir, script, credentials, scheme = args[:6]
    rest = list(args[6:])
    https = None
    if scheme == "--https":
        if len(rest) < 2:
            return None
        https = (rest.pop(0), rest.pop(0))
    if len(rest) < 3:
        return None
    pid_file, local, log = rest[:3]
    files = ContainerFiles(
        app_id, container_id, work_dir, script, credentials, https, pid_file,
        split_dirs(local), split_dirs(log),
    )  # fmt: skip
    return files, rest[3:]


def parse_run_as_user(argv: Sequence[str], cfg: Config) -> Operation | Refused:
    argc = len(argv)
    if argc < 4:
        return Refused(Exit.INVALID_ARGUMENT_NUMBER, USAGE)
    who = RunAs(argv[1], argv[2])
    command = c_atoi(argv[3])
    args = list(argv[4:])
    tc_enabled = feature_enabled(cfg.value("feature.tc.enabled"), False)
    if command == RunAsUserCommand.INITIALIZE_CONTAINER:
        if argc < 10:
            return Refused(
                Exit.INVALID_ARGUMENT_NUMBER,
                f"Too few arguments ({argc} vs 10) for initialize container",
            )
        if not valid_container_id(args[1]):
            return Refused(Exit.INVALID_CONTAINER_ID, f"Invalid container id {args[1]}")
        return InitializeContainer(
            who, args[0], args[1], args[2], split_dirs(args[3]), split_dirs(args[4]), tuple(args[5:])
        )
    if command in (RunAsUserCommand.LAUNCH_CONTAINER, RunAsUserCommand.LAUNCH_DOCKER_CONTAINER):
        docker = command == RunAsUserCommand.LAUNCH_DOCKER_CONTAINER
        if docker and not docker_enabled(cfg):
            return Refused(Exit.FEATURE_DISABLED, "Feature disabled: docker")
        parsed = parse_container_files(args) if 14 <= argc <= 17 else None
        if parsed is None or len(parsed[1]) not in (1, 2):
            return Refused(
                Exit.INVALID_ARGUMENT_NUMBER,
                f"Wrong number of arguments ({argc} vs 14 - 17) for launch "
                f"{'docker ' if docker else ''}container",
            )
        files, rest = parsed  # [command file or resources] + [tc command file]
        key, sep, value = rest[0].partition("=")
        if not docker and not sep:
            return Refused(
                Exit.INVALID_ARGUMENT_NUMBER, f"Invalid arguments for cgroups resources: {rest[0]}"
            )
        if len(rest) == 2:
            if not tc_enabled:
                return Refused(Exit.FEATURE_DISABLED, "Feature disabled: traffic control")
            return NotProvided(Exit.TRAFFIC_CONTROL_EXECUTION_FAILED, "tc")
        if docker:
            return LaunchDockerContainer(who, files, rest[0])
        return LaunchContainer(who, files, key, split_dirs(value))
    if command == RunAsUserCommand.SIGNAL_CONTAINER:
        if argc != 6:
            return Refused(
                Exit.INVALID_ARGUMENT_NUMBER,
                f"Wrong number of arguments ({argc} vs 6) for signal container",
            )
        pid, signal = c_strtol(args[0]), c_strtol(args[1])
        if pid is None:
            return Refused(Exit.INVALID_ARGUMENT_NUMBER, f"Illegal argument for container pid {args[0]}")
        if signal is None:
            return Refused(Exit.INVALID_ARGUMENT_NUMBER, f"Illegal argument for signal {args[1]}")
        return SignalContainer(who, pid, signal)
    if command == RunAsUserCommand.DELETE_AS_USER:
        return DeleteAsUser(who, args[0] if args else None, tuple(args[1:]))
    if command == RunAsUserCommand.LIST_AS_USER:
        if not args:
            return Refused(Exit.INVALID_ARGUMENT_NUMBER, USAGE)
        return ListAsUser(who, args[0])
    if command == RunAsUserCommand.SYNC_YARN_SYSFS:
        if len(args) < 2:
            return Refused(Exit.INVALID_ARGUMENT_NUMBER, USAGE)
        return SyncYarnSysfs(who, args[0], split_dirs(args[1]))
    return Refused(Exit.INVALID_COMMAND_PROVIDED, f"Invalid command {command} not supported.")


# ---------------------------------------------------------------------------------------------
# Docker command files to docker argv (docker-util.c, mount-utils.c).
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DockerHost:
    """What building a docker command reads from the node, so the decisions stay testable."""

    config_path: str  # container-executor.cfg: never mountable read-write, nor its parents
    realpath: Callable[[str], str | None]  # None where realpath(3) fails
    is_dir: Callable[[str], bool]
    network_driver: Callable[[str], str | None]  # `docker network inspect` (None: it failed)
    may_run_privileged: Callable[[str], bool | None]  # None: no such user (the real exits 20)


@dataclass(frozen=True)
class DockerArgv:
    argv: list[str]
    notes: list[str] = field(default_factory=list)  # what was dropped and why, for stderr
    entry_point: bool = False


class DockerRefusal(Exception):
    def __init__(self, code: int, detail: str = "") -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail

    @property
    def message(self) -> str:
        return MESSAGES.get(self.code, "Unknown error code")


class DirectExit(Exception):
    """A check deep in the real docker code that calls exit() itself (check_privileges)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def true_exactly(value: str | None) -> bool:
    return value == "true"


def true_any_case(value: str | None) -> bool:
    return value is not None and value.lower() == "true"


def enabled_one_or_true(value: str | None) -> bool:
    return value is not None and (value == "1" or value.lower() == "true")


def image_trusted(command: Config, cfg: Config) -> bool:
    """check_trusted_image: the image's registry prefix is listed ("library" trusts images
    without a registry); a privileged container looks at its own list first."""
    image = command.value("image", COMMAND_SECTION)
    if image is None:
        return False
    registries = None
    if true_any_case(command.value("privileged", COMMAND_SECTION)):
        registries = cfg.values("docker.privileged-containers.registries", DOCKER_SECTION)
    if registries is None:
        registries = cfg.values("docker.trusted.registries", DOCKER_SECTION)
    for registry in registries or []:
        if registry.startswith("library") and "/" not in image:
            return True
        if image.startswith(registry if registry.endswith("/") else registry + "/"):
            return True
    return False


def allowed_values(
    command: Config,
    cfg: Config,
    key: str,
    allowed_key: str,
    flag: str,
    multiple: bool,
    host_part_separator: str | None = None,
) -> tuple[list[str], int]:
    """add_param_to_command_if_allowed: the flags to add and 0, or [] and the real result
    (INVALID_DOCKER_IMAGE_TRUST for an untrusted image, -1 for a value not allowed)."""
    permitted = cfg.values(allowed_key, DOCKER_SECTION)
    if multiple:
        requested = command.values(key, COMMAND_SECTION)
    else:
        single = command.value(key, COMMAND_SECTION)
        requested = None if single is None else [single]
    if requested is None:
        return [], 0
    if key != "net" and not image_trusted(command, cfg):
        return [], Exit.INVALID_DOCKER_IMAGE_TRUST
    if permitted is None:
        return [], -1
    flags = []
    for value in requested:
        if host_part_separator is None:
            allowed = value in permitted
        else:
            cut = value.find(host_part_separator)
            if cut < 0:
                return [], -1
            host_part = value[:cut]
            allowed = any(
                re.search(p[len("regex:") :], host_part) is not None
                if p.startswith("regex:")
                else len(p) >= cut and p[:cut] == host_part  # strncmp over the host part
                for p in permitted
            )
        if not allowed:
            return [], -1
        flags.append(flag + value)
    return flags, 0


@dataclass(frozen=True)
class Mount:
    source: str
    destination: str
    options: tuple[str, ...]
    read_write: bool

    def flag_value(self) -> str:
        return f"{self.source}:{self.destination}:{','.join(self.options)}"


def parse_mount(text: str) -> Mount | None:
    """get_docker_mount_source/_dest/_options: src:dest:opt[+opt]; None is INVALID_MOUNT."""
    if ":" not in text:
        return None
    source, _colon, rest = text.partition(":")
    destination = rest.split(":", 1)[0]
    option_string = text.rsplit(":", 1)[1]
    if len(option_string) == 2:
        wanted = 1
    elif len(option_string) < 8:
        return None
    else:
        wanted = 2
    tokens = [token for token in option_string.split("+") if token]
    if len(tokens) < wanted:
        return None
    read_write = False
    for option in tokens[:wanted]:
        if option not in MOUNT_OPTIONS:
            return None
        if option in ("rw", "ro"):
            read_write = option == "rw"
    return Mount(source, destination, tuple(tokens[:wanted]), read_write)


def normalize_mount(path: str, host: DockerHost, regex_allowed: bool) -> str | None:
    """realpath, with a trailing '/' for a directory; a volume name (and, in the allowed lists,
    a regex:) stays as it is; anything else that does not resolve is None."""
    real = host.realpath(path)
    if real is None:
        if VOLUME_NAME.search(path) or (regex_allowed and path.startswith("regex:")):
            return path
        return None
    if host.is_dir(real) and not real.endswith("/"):
        return real + "/"
    return real


def mount_permitted(permitted: list[str] | None, requested: str, host: DockerHost) -> int:
    """check_mount_permitted: 1 permitted, 0 not, -1 the requested path does not resolve."""
    if permitted is None:
        return 0
    normalized = normalize_mount(requested, host, False)
    if normalized is None:
        return -1
    for entry in permitted:
        if normalized == entry:
            return 1
        # mount-utils.c skips sizeof("regex:") == 7 characters: the regex's first one is lost.
        if entry.startswith("regex:") and VOLUME_NAME.search(normalized) and re.search(entry[7:], normalized):
            return 1
        if host.is_dir(entry) and normalized.startswith(entry):
            return 1
    return 0


def mount_flags(command: Config, cfg: Config, host: DockerHost) -> tuple[list[str], list[str]]:
    """add_docker_mounts: the -v flags and notes; an untrusted image's mounts are dropped."""
    requested = command.values("mounts", COMMAND_SECTION)
    if requested is None:
        return [], []
    if not image_trusted(command, cfg):
        return [], ["Disable mount volume for untrusted image (mounts dropped: " + ",".join(requested) + ")"]
    mounts = []
    for text in requested:
        mount = parse_mount(text)
        if mount is None:
            raise DockerRefusal(Exit.INVALID_MOUNT, f"Invalid mount '{text}'")
        mounts.append(mount)
    permitted: dict[str, list[str] | None] = {}
    for kind in ("ro", "rw"):
        entries = cfg.values(f"docker.allowed.{kind}-mounts", DOCKER_SECTION)
        if entries is None:
            permitted[kind] = None
            continue
        normalized = [normalize_mount(entry, host, True) for entry in entries]
        if None in normalized:
            raise DockerRefusal(Exit.MOUNT_ACCESS_ERROR, "Unable to find permitted mounts on disk")
        permitted[kind] = [entry for entry in normalized if entry is not None]
    flags = []
    for mount in mounts:
        config_path = normalize_mount(host.config_path, host, False)
        if config_path is None:
            raise DockerRefusal(Exit.MOUNT_ACCESS_ERROR, "Unable to normalize container-executor.cfg path")
        rw = mount_permitted(permitted["rw"], mount.source, host)
        ro = mount_permitted(permitted["ro"], mount.source, host)
        where = f"src='{mount.source}', dest='{mount.destination}'"
        if rw == -1 or ro == -1:
            raise DockerRefusal(Exit.INVALID_MOUNT, f"Invalid mount {where}")
        if mount.read_write:
            if rw == 0:
                raise DockerRefusal(Exit.INVALID_RW_MOUNT, f"Configuration does not allow mount {where}")
            source = normalize_mount(mount.source, host, False)
            if source is not None and mount_permitted([source], config_path, host) == 1:
                raise DockerRefusal(
                    Exit.INVALID_RW_MOUNT,
                    f"Attempting to mount a parent directory of container-executor.cfg as "
                    f"read-write. {where}",
                )
        elif ro == 0 and rw == 0:
            raise DockerRefusal(Exit.INVALID_RO_MOUNT, f"Configuration does not allow mount {where}")
        flags += ["-v", mount.flag_value()]
    return flags, []


def valid_container_name(name: str | None) -> str:
    if name is None or not name.startswith("container_") or not valid_container_id(name):
        raise DockerRefusal(Exit.INVALID_DOCKER_CONTAINER_NAME, f"Specified container_id={name} is invalid")
    return name


def docker_run_argv(command: Config, cfg: Config, host: DockerHost) -> DockerArgv:
    """get_docker_run_command: the arguments after the binary, in the real order."""

    def value(key: str) -> str | None:
        return command.value(key, COMMAND_SECTION)

    service_mode = False
    if true_any_case(value("service-mode")):
        if not feature_enabled(cfg.value("docker.service-mode.enabled", DOCKER_SECTION), False):
            raise DockerRefusal(Exit.DOCKER_SERVICE_MODE_DISABLED)
        service_mode = True
    entry_point = true_any_case(value("use-entry-point"))
    name = valid_container_name(value("name"))
    user = value("user")
    if not service_mode and user is None:
        raise DockerRefusal(Exit.INVALID_DOCKER_USER_NAME)
    image = value("image")
    if image is None or not IMAGE_NAME.search(image):
        raise DockerRefusal(Exit.INVALID_DOCKER_IMAGE_NAME, f"image: {image}")
    argv = ["run", f"--name={name}"]
    notes: list[str] = []
    privileged = value("privileged")
    if privileged is None or privileged == "false":
        if not service_mode:
            argv.append(f"--user={user}")
        if true_any_case(cfg.value("docker.no-new-privileges.enabled", DOCKER_SECTION)):
            argv.append("--security-opt=no-new-privileges")
    if true_exactly(value("detach")):
        argv.append("-d")
    if true_exactly(value("rm")):
        argv.append("--rm")
    if value("workdir") is not None:
        argv.append(f"--workdir={value('workdir')}")
    flags, result = allowed_values(command, cfg, "net", "docker.allowed.networks", "--net=", False)
    if result != 0:
        raise DockerRefusal(
            Exit.INVALID_DOCKER_NETWORK, "Could not find requested network in allowed networks"
        )
    argv += flags
    argv += ports_flags(command, host)
    pid = value("pid")
    if pid is not None:
        if pid != "host":
            raise DockerRefusal(Exit.INVALID_DOCKER_PID_NAMESPACE, "Invalid pid namespace")
        if not enabled_one_or_true(cfg.value("docker.host-pid-namespace.enabled", DOCKER_SECTION)):
            raise DockerRefusal(Exit.DOCKER_PID_HOST_DISABLED, "Host pid namespace is disabled")
        argv.append("--pid=host")
    flags, dropped = mount_flags(command, cfg, host)
    argv += flags
    notes += dropped
    for tmpfs in command.values("tmpfs", COMMAND_SECTION) or []:
        if not TMPFS_MOUNT.search(tmpfs):
            raise DockerRefusal(Exit.INVALID_DOCKER_TMPFS_MOUNT, f"Invalid docker tmpfs mount '{tmpfs}'")
        argv += ["--tmpfs", tmpfs]
    if value("cgroup-parent") is not None:
        argv.append(f"--cgroup-parent={value('cgroup-parent')}")
    argv += privileged_flags(command, cfg, host, entry_point)
    argv.append("--cap-drop=ALL")
    flags, result = allowed_values(command, cfg, "cap-add", "docker.allowed.capabilities", "--cap-add=", True)
    if result == Exit.INVALID_DOCKER_IMAGE_TRUST:
        notes.append(
            "Docker capability disabled for untrusted image (cap-add dropped: "
            + ",".join(command.values("cap-add", COMMAND_SECTION) or [])
            + ")"
        )
    elif result != 0:
        raise DockerRefusal(Exit.INVALID_DOCKER_CAPABILITY, "Invalid docker capability requested")
    argv += flags
    flags, result = allowed_values(command, cfg, "runtime", "docker.allowed.runtimes", "--runtime=", False)
    if result != 0:
        raise DockerRefusal(
            Exit.INVALID_DOCKER_RUNTIME, "Could not find requested runtime in allowed runtimes"
        )
    argv += flags
    if value("hostname") is not None:
        argv.append(f"--hostname={value('hostname')}")
    if not service_mode and not true_any_case(privileged):
        for group in command.values("group-add", COMMAND_SECTION) or []:
            argv += ["--group-add", group]
    flags, result = allowed_values(command, cfg, "devices", "docker.allowed.devices", "--device=", True, ":")
    if result != 0:
        raise DockerRefusal(Exit.INVALID_DOCKER_DEVICE, "Invalid docker device requested")
    argv += flags
    if value("environ") is not None:
        argv += ["--env-file", value("environ") or ""]
    argv.append(image)
    argv += command.values("launch-command", COMMAND_SECTION) or []
    return DockerArgv(argv, notes, entry_point)


def ports_flags(command: Config, host: DockerHost) -> list[str]:
    """add_ports_mapping_to_command: -P on a bridge network without ports-mapping, -p each."""
    network = command.value("net", COMMAND_SECTION)
    mappings = command.values("ports-mapping", COMMAND_SECTION)
    flags = []
    if network is not None:
        driver = host.network_driver(network)
        if driver is None:
            raise DockerRefusal(-1, f"Could not inspect docker network to get type {network}")
        if driver.lower() != "bridge":
            return []
        if mappings is None:
            flags.append("-P")
    for mapping in mappings or []:
        if not PORTS_MAPPING.search(mapping):
            raise DockerRefusal(Exit.INVALID_DOCKER_PORTS_MAPPING, f"Invalid port mappings: {mapping}")
        flags += ["-p", mapping]
    return flags


def privileged_flags(command: Config, cfg: Config, host: DockerHost, entry_point: bool) -> list[str]:
    """set_privileged: only where enabled, in entry-point mode, for a trusted image and a user
    in the root or docker group (or allowed `sudo docker`)."""
    user = command.value("user", COMMAND_SECTION)
    if user is None:
        raise DockerRefusal(Exit.INVALID_DOCKER_USER_NAME)
    if not true_any_case(command.value("privileged", COMMAND_SECTION)):
        return []
    disabled = Exit.PRIVILEGED_DOCKER_CONTAINERS_DISABLED
    if not enabled_one_or_true(cfg.value("docker.privileged-containers.enabled", DOCKER_SECTION)):
        raise DockerRefusal(disabled, "Privileged containers are disabled")
    if not entry_point:
        raise DockerRefusal(disabled, "Privileged containers are disabled for non-entry-point mode")
    if not image_trusted(command, cfg):
        raise DockerRefusal(disabled, "Privileged containers are disabled from untrusted source")
    allowed = host.may_run_privileged(user)
    if allowed is None:
        raise DirectExit(Exit.INITIALIZE_USER_FAILED, f"User {user} does not exist in host OS.")
    if not allowed:
        raise DockerRefusal(disabled, f"Privileged containers are disabled for user: {user}")
    return ["--privileged"]


def docker_command_argv(command: Config, cfg: Config, host: DockerHost) -> DockerArgv:
    """get_docker_command: [binary, --config=..., <command> ...]; DockerRefusal otherwise."""

    def value(key: str) -> str | None:
        return command.value(key, COMMAND_SECTION)

    head = [docker_binary(cfg)]
    if value("docker-config") is not None:
        head.append(f"--config={value('docker-config')}")
    which = value("docker-command")
    if which == "run":
        built = docker_run_argv(command, cfg, host)
        return DockerArgv(head + built.argv, built.notes, built.entry_point)
    builders: dict[str, Callable[[], list[str]]] = {
        "inspect": lambda: inspect_args(command),
        "kill": lambda: kill_args(command),
        "stop": lambda: stop_args(command),
        "rm": lambda: ["rm", "-f", valid_container_name(value("name"))],
        "start": lambda: ["start", valid_container_name(value("name"))],
        "pull": lambda: ["pull", checked_image(value("image"))],
        "load": lambda: load_args(command),
        "images": lambda: images_args(command),
        "volume": lambda: volume_args(command, cfg),
        "exec": lambda: exec_args(command),
    }
    if which not in builders:
        raise DockerRefusal(Exit.UNKNOWN_DOCKER_COMMAND, f"docker-command={which}")
    return DockerArgv(head + builders[which]())


def checked_image(image: str | None) -> str:
    if image is None or not IMAGE_NAME.search(image):
        raise DockerRefusal(Exit.INVALID_DOCKER_IMAGE_NAME, f"image: {image}")
    return image


def inspect_args(command: Config) -> list[str]:
    name = valid_container_name(command.value("name", COMMAND_SECTION))
    form = command.value("format", COMMAND_SECTION)
    if form not in INSPECT_FORMATS:
        raise DockerRefusal(
            Exit.INVALID_DOCKER_INSPECT_FORMAT, f"Invalid format option '{form}' not permitted"
        )
    return ["inspect", f"--format={form}", name]


def kill_args(command: Config) -> list[str]:
    name = valid_container_name(command.value("name", COMMAND_SECTION))
    signal = command.value("signal", COMMAND_SECTION)
    if signal is None:
        return ["kill", name]
    if not all(char.isupper() for char in signal):
        raise DockerRefusal(
            Exit.INVALID_DOCKER_KILL_COMMAND, f"Value for signal contains non-uppercase characters '{signal}'"
        )
    return ["kill", f"--signal={signal}", name]


def stop_args(command: Config) -> list[str]:
    name = valid_container_name(command.value("name", COMMAND_SECTION))
    seconds = command.value("time", COMMAND_SECTION)
    if seconds is None:
        return ["stop", name]
    if not all(char.isdigit() for char in seconds):
        raise DockerRefusal(Exit.INVALID_DOCKER_STOP_COMMAND, f"Value for time is not a number '{seconds}'")
    return ["stop", f"--time={seconds}", name]


def load_args(command: Config) -> list[str]:
    image = command.value("image", COMMAND_SECTION)
    if image is None:
        raise DockerRefusal(Exit.INVALID_DOCKER_IMAGE_NAME)
    return ["load", f"--i={image}"]


def images_args(command: Config) -> list[str]:
    image = command.value("image", COMMAND_SECTION)
    named = [checked_image(image)] if image is not None else []
    return ["images", *named, "--format={{json .}}", "--filter=dangling=false"]


def volume_args(command: Config, cfg: Config) -> list[str]:
    sub = command.value("sub-command", COMMAND_SECTION)
    if sub == "ls":
        form = command.value("format", COMMAND_SECTION)
        return ["volume", "ls", *([f"--format={form}"] if form is not None else [])]
    if sub != "create":
        raise DockerRefusal(Exit.INVALID_DOCKER_VOLUME_COMMAND, f'sub_command="{sub}"')
    volume = command.value("volume", COMMAND_SECTION)
    if volume is None or not VOLUME_NAME.search(volume):
        raise DockerRefusal(Exit.INVALID_DOCKER_VOLUME_NAME, f"{volume} is not a valid volume name.")
    driver = command.value("driver", COMMAND_SECTION)
    if driver is None or driver not in (cfg.values("docker.allowed.volume-drivers", DOCKER_SECTION) or []):
        raise DockerRefusal(
            Exit.INVALID_DOCKER_VOLUME_DRIVER, f"{driver} is not permitted docker.allowed.volume-drivers"
        )
    return ["volume", "create", f"--name={volume}", f"--driver={driver}"]


def exec_args(command: Config) -> list[str]:
    name = valid_container_name(command.value("name", COMMAND_SECTION))
    launch = command.values("launch-command", COMMAND_SECTION)
    if launch is None:
        raise DockerRefusal(Exit.INVALID_DOCKER_COMMAND_FILE)
    return ["exec", "-it", name, *launch]


def refusal_line(refusal: DockerRefusal) -> str:
    """What construct_docker_command prints before it exits DOCKER_RUN_FAILED."""
    return (
        f"Error constructing docker command, docker error code={refusal.code}, "
        f"error message='{refusal.message}'"
    )


def c_scan_int(text: str) -> int | None:
    """fscanf("%d"): the first integer after blanks, or None."""
    match = re.match(r"\s*([+-]?[0-9]+)", text)
    return int(match.group(1)) if match else None


# ---------------------------------------------------------------------------------------------
# The I/O layer: the node's files, users, processes and the docker binary.
# ---------------------------------------------------------------------------------------------


def log(line: str) -> None:
    print(line, flush=True)


def error(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def stat_of(path: str) -> FileStat | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return FileStat(found.st_uid, found.st_gid, found.st_mode)


def read_text(path: str) -> str:
    with open(path, encoding="utf-8", errors="surrogateescape") as handle:
        return handle.read()


def group_gid(name: str) -> int | None:
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        return None


def account_of(name: str) -> Account | None:
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None
    return Account(entry.pw_name, entry.pw_uid, entry.pw_gid)


def real_path(path: str) -> str | None:
    try:
        return os.path.realpath(path, strict=True)
    except (OSError, ValueError):
        return None


def config_location() -> str:
    """TARN_CE_CONF, else ../etc/hadoop/container-executor.cfg beside this program."""
    return os.environ.get("TARN_CE_CONF") or os.path.join(
        os.path.dirname(os.path.realpath(__file__)), "..", "etc", "hadoop", "container-executor.cfg"
    )


def executable_location() -> str:
    return os.environ.get("TARN_CE_BINARY") or os.path.realpath(__file__)


def is_root() -> bool:
    return os.geteuid() == 0


@dataclass
class Node:
    """The node as the real binary sees it after its setup check."""

    cfg: Config
    nm_uid: int
    nm_gid: int
    config_path: str

    def docker(self) -> str:
        return docker_binary(self.cfg)

    def chown(self, path: str, uid: int, gid: int) -> None:
        if is_root():
            os.chown(path, uid, gid, follow_symlinks=False)

    def nm_owns(self, root: str) -> bool:
        """check_nm_local_dir: the NodeManager's local or log dir, owned by its uid."""
        found = stat_of(root)
        if found is None:
            log(f"Error checking file stats for {root}.")
            return False
        if found.uid != self.nm_uid:
            log(f"Permission mismatch for {root} for caller uid: {self.nm_uid}, owner uid: {found.uid}.")
            return False
        return True

    def host(self) -> DockerHost:
        return DockerHost(
            config_path=self.config_path,
            realpath=real_path,
            is_dir=os.path.isdir,
            network_driver=self.network_driver,
            may_run_privileged=may_run_privileged,
        )

    def network_driver(self, network: str) -> str | None:
        done = subprocess.run(
            [self.docker(), "network", "inspect", network, "--format={{.Driver}}"],
            capture_output=True,
            text=True,
            check=False,
        )
        words = done.stdout.split()
        return words[0] if done.returncode == 0 and words else None

    def inspect(self, container_id: str, template: str) -> int | None:
        done = subprocess.run(
            [self.docker(), "inspect", "--format", template, container_id],
            capture_output=True,
            text=True,
            check=False,
        )
        return c_scan_int(done.stdout) if done.returncode == 0 else None

    def write_as_nm(self, path: str, text: str) -> bool:
        """write_pid_to_file_as_nm / write_exit_code_file_as_nm: a temp file, then rename."""
        temporary = f"{path}.tmp"
        try:
            handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o700)
            try:
                os.write(handle, text.encode())
            finally:
                os.close(handle)
            self.chown(temporary, self.nm_uid, self.nm_gid)
            os.rename(temporary, path)
        except OSError as problem:
            log(f"Can't write {path} as node manager - {problem}")
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            return False
        return True


def may_run_privileged(user: str) -> bool | None:
    """check_privileges: in the root or docker group, or `sudo -U user -n -l docker` allows it."""
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        return None
    for gid in os.getgrouplist(user, entry.pw_gid):
        with contextlib.suppress(KeyError):
            if grp.getgrgid(gid).gr_name in ("root", "docker"):
                return True
    if not os.path.exists("/usr/bin/sudo"):
        return False
    done = subprocess.run(
        ["/usr/bin/sudo", "-U", user, "-n", "-l", "docker"], capture_output=True, check=False
    )
    return done.returncode == 0


def become(account: Account) -> None:
    """change_user: the user's groups, gid and uid (only possible, and only done, as root)."""
    if not is_root():
        return
    os.setgroups(os.getgrouplist(account.name, account.gid))
    os.setgid(account.gid)
    os.setuid(account.uid)


# --- directories, as container-executor.c lays them out --------------------------------------


def make_dir_for_user(path: str, owner: int, node: Node) -> bool:
    """create_directory_for_user: mkdir (one level) 02750, owner and the NM group."""
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o750)
        node.chown(path, owner, node.nm_gid)
        os.chmod(path, 0o2750)  # noqa: S103 - setgid, group r-x: the real binary's mode
    except OSError as problem:
        log(f"Failed to create directory {path} - {problem}")
        return False
    return True


def mkdir_as_user(path: str, mode: int, owner: Account, node: Node) -> None:
    """mkdir as the real binary does it, having dropped to the user: owned by the user, in the
    group the kernel then gives, the parent's where the parent is setgid (and setgid itself, as
    usercache/<user> is) or else the user's. The NodeManager (group hadoop) reaches the app and
    file caches through that: it checks a recovered container's resources are still there."""
    os.mkdir(path)
    parent = os.stat(os.path.dirname(path))
    inherited = bool(parent.st_mode & stat.S_ISGID)
    node.chown(path, owner.uid, parent.st_gid if inherited else owner.gid)
    os.chmod(path, mode | (stat.S_ISGID if inherited else 0))


def make_dirs(path: str, mode: int, owner: Account, node: Node) -> bool:
    """mkdirs: missing components made with mode for the user; an existing last component must
    already have exactly that mode (check_dir)."""
    if os.path.isdir(path):
        current = stat.S_IMODE(os.stat(path).st_mode) & 0o777
        if current != mode & 0o777:
            log(f"Path {path} has permission {current:o} but needs permission {mode & 0o777:o}.")
            return False
        return True
    missing = []
    probe = path
    while not os.path.exists(probe):
        missing.append(probe)
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        log(f"Path {probe} is file not dir")
        return False
    try:
        for component in reversed(missing):
            mkdir_as_user(component, mode, owner, node)
    except OSError as problem:
        log(f"Can't create directory {path} - {problem}")
        return False
    return True


def initialize_user_dirs(user: str, owner: Account, local_dirs: Sequence[str], node: Node) -> int:
    """initialize_user: <local>/usercache/<user> on every disk (INITIALIZE_USER_FAILED)."""
    failed = False
    for root in local_dirs:
        if not node.nm_owns(root):
            log(f"Couldn't get userdir directory for {user}.")
            return Exit.INITIALIZE_USER_FAILED
        user_dir = os.path.join(root, "usercache", user)
        if "/../" in user_dir:
            log("Unsupported userdir directory path detected.")
            return Exit.INITIALIZE_USER_FAILED
        failed |= not make_dir_for_user(user_dir, owner.uid, node)
    return Exit.INITIALIZE_USER_FAILED if failed else 0


def create_log_dirs(app_id: str, owner: Account, log_dirs: Sequence[str], node: Node) -> int:
    """create_log_dirs: <log>/<app> wherever the NM owns the log root; none at all is -1."""
    created = False
    for root in log_dirs:
        if not node.nm_owns(root):
            continue
        app_log_dir = os.path.join(root, app_id)
        if ".." in app_log_dir:
            log("Unsupported app-log directory path detected.")
            continue
        if not make_dir_for_user(app_log_dir, owner.uid, node):
            return Exit.FAILED
        created = True
    if not created:
        log("Did not create any app-log directories")
        return Exit.FAILED
    return 0


def create_container_log_dirs(
    app_id: str, container_id: str, owner: Account, log_dirs: Sequence[str], node: Node
) -> int:
    created = False
    for root in log_dirs:
        path = os.path.join(root, app_id, container_id)
        if not node.nm_owns(root) or ".." in path:
            continue
        if not make_dir_for_user(path, owner.uid, node):
            log(f"Failed to create container log directory ({path})!")
            return Exit.FAILED
        created = True
    if not created:
        log("Did not create any container log directory.")
        return Exit.FAILED
    return 0


def create_app_dirs(
    user: str, app_id: str, owner: Account, local_dirs: Sequence[str], node: Node
) -> str | None:
    """create_app_dirs: <local>/usercache/<user>/appcache/<app>, 0750; the first one made."""
    primary = None
    for root in local_dirs:
        app_dir = os.path.join(root, "usercache", user, "appcache", app_id)
        if ".." in app_dir:
            log("Unsupported app directory path detected.")
            continue
        if make_dirs(app_dir, 0o750, owner, node) and primary is None:
            primary = app_dir
    if primary is None:
        log("Did not create any app directories")
    return primary


def copy_new_file(source: str, destination: str, mode: int, owner: Account, node: Node) -> bool:
    """copy_file: the destination must not exist (O_EXCL, no symlink followed)."""
    try:
        with open(source, "rb") as reader:
            data = reader.read()
        handle = os.open(destination, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
        try:
            os.write(handle, data)
        finally:
            os.close(handle)
        node.chown(destination, owner.uid, owner.gid)
    except OSError as problem:
        log(f"Can't copy {source} to {destination} - {problem}")
        return False
    return True


def create_container_dirs(
    op: LaunchContainer | LaunchDockerContainer, owner: Account, node: Node
) -> tuple[int, str | None]:
    """create_container_directories: work dirs (0710), log dirs (0750, the last one is where
    stdout.txt goes), tmp dirs under the work dir. Returns (code, chosen log dir)."""
    files, who = op.files, op.who
    made_work = False
    for root in files.local_dirs:
        container_dir = os.path.join(
            root, "usercache", who.user, "appcache", files.app_id, files.container_id
        )
        if not node.nm_owns(root):
            continue
        if ".." in container_dir:
            log("Unsupported container directory path detected.")
            return Exit.COULD_NOT_CREATE_WORK_DIRECTORIES, None
        made_work |= make_dirs(container_dir, 0o710, owner, node)
    if not made_work:
        return Exit.COULD_NOT_CREATE_WORK_DIRECTORIES, None
    chosen = None
    for root in files.log_dirs:
        log_dir = os.path.join(root, files.app_id, files.container_id)
        if not node.nm_owns(root) or ".." in log_dir:
            return Exit.COULD_NOT_CREATE_APP_LOG_DIRECTORIES, None
        if make_dirs(log_dir, 0o750, owner, node):
            chosen = log_dir
    if chosen is None:
        return Exit.COULD_NOT_CREATE_APP_LOG_DIRECTORIES, None
    for name in TMP_DIRS:
        path = os.path.join(files.work_dir, name)
        if ".." in path or not make_dirs(path, 0o710, owner, node):
            error(f"Could not create tmp dir: {path}")
            return Exit.COULD_NOT_CREATE_TMP_DIRECTORIES, None
    return 0, chosen


def prepare_container(
    op: LaunchContainer | LaunchDockerContainer, owner: Account, node: Node
) -> tuple[int, str | None]:
    """create_script_paths + create_local_dirs: user, log, app and container dirs, then the
    launch script (0700), the tokens (0600) and, for https, the key and trust stores."""
    files = op.files
    sources = [files.script, files.credentials, *(files.https or ())]
    for source in sources:
        if not os.access(source, os.R_OK):
            error(f"Could not open {source}")
            return Exit.INVALID_NM_ROOT_DIRS, None
    code = initialize_user_dirs(op.who.user, owner, files.local_dirs, node)
    if code:
        error("Could not create user dir")
        return code, None
    code = create_log_dirs(files.app_id, owner, files.log_dirs, node)
    if code:
        error("Could not create log dirs")
        return code, None
    if create_app_dirs(op.who.user, files.app_id, owner, files.local_dirs, node) is None:
        return Exit.COULD_NOT_CREATE_WORK_DIRECTORIES, None
    code, chosen = create_container_dirs(op, owner, node)
    if code:
        error("Could not create container dirs")
        return code, None
    copies = [
        (files.script, CONTAINER_SCRIPT, 0o700, Exit.COULD_NOT_CREATE_SCRIPT_COPY),
        (files.credentials, CREDENTIALS_FILE, 0o600, Exit.COULD_NOT_CREATE_CREDENTIALS_COPY),
    ]
    if files.https is not None:
        copies += [
            (files.https[0], KEYSTORE_FILE, 0o600, Exit.COULD_NOT_CREATE_KEYSTORE_COPY),
            (files.https[1], TRUSTSTORE_FILE, 0o600, Exit.COULD_NOT_CREATE_TRUSTSTORE_COPY),
        ]
    for source, name, mode, failure in copies:
        if not copy_new_file(source, os.path.join(files.work_dir, name), mode, owner, node):
            return failure, None
    if not os.path.isdir(files.work_dir):
        error(f"Can't change directory to {files.work_dir}")
        return Exit.FAILED, None
    return 0, chosen


# --- the operations ---------------------------------------------------------------------------


def checked_account(who: RunAs, cfg: Config) -> Account | int:
    account = account_of(who.run_as)
    problem = user_problem(who.run_as, account, cfg)
    if problem is not None or account is None:
        log(problem or f"User {who.run_as} not found")
        return Exit.FAILED
    return account


def initialize_container(op: InitializeContainer, node: Node) -> int:
    """initialize_app: the dirs, the tokens copied into the app dir, then exec the localizer
    there as the user."""
    account = checked_account(op.who, node.cfg)
    if isinstance(account, int):
        return account
    code = initialize_user_dirs(op.who.user, account, op.local_dirs, node)
    if code:
        return code
    for step in (
        create_log_dirs(op.app_id, account, op.log_dirs, node),
        create_container_log_dirs(op.app_id, op.container_id, account, op.log_dirs, node),
    ):
        if step:
            return step
    if not os.access(op.credentials, os.R_OK):
        log(f"Can't open file {op.credentials} as node manager")
        return Exit.FAILED
    primary = create_app_dirs(op.who.user, op.app_id, account, op.local_dirs, node)
    if primary is None:
        return Exit.FAILED
    copy = os.path.join(primary, os.path.basename(op.credentials))
    if not copy_new_file(op.credentials, copy, 0o600, account, node):
        return Exit.FAILED
    if not op.command:
        error("Failure to exec app initialization process - no command")
        return Exit.FAILED
    os.chdir(primary)
    become(account)
    with open(os.devnull, "rb") as nothing:
        os.dup2(nothing.fileno(), 0)
    try:
        os.execvp(op.command[0], list(op.command))  # noqa: S606 - exec, as the real binary does
    except OSError as problem:
        error(f"Failure to exec app initialization process - {problem}")
    return Exit.FAILED


def launch_container(op: LaunchContainer, node: Node) -> int:
    """launch_container_as_user: a new session writes its pid and execs the launch script as
    the user; the parent waits and writes the exit code file."""
    account = checked_account(op.who, node.cfg)
    if isinstance(account, int):
        return account
    for source in (op.files.script, op.files.credentials, *(op.files.https or ())):
        if not os.access(source, os.R_OK):
            error(f"Could not open {source}")
            return Exit.INVALID_NM_ROOT_DIRS
    exit_code_file = f"{op.files.pid_file}.exitcode"
    sys.stdout.flush()
    child = os.fork()
    if child:
        code = wait_for(child)
        if not node.write_as_nm(exit_code_file, str(code)):
            return Exit.FAILED
        return code
    code = Exit.UNABLE_TO_EXECUTE_CONTAINER_SCRIPT.value
    try:
        code = container_process(op, account, node)
    finally:
        os._exit(code & 0xFF)  # the child never returns into the parent's code


def container_process(op: LaunchContainer, account: Account, node: Node) -> int:
    """The forked child: its own session, the pid file, the dirs, then exec the script."""
    try:
        os.setsid()
    except OSError:
        return Exit.SETSID_OPER_FAILED
    if not node.write_as_nm(op.files.pid_file, str(os.getpid())):
        return Exit.WRITE_PIDFILE_FAILED
    if op.resources_key == "cgroups" and any(path != "none" for path in op.resources):
        log("lab stand-in: the container's pid is not written to cgroups " + ",".join(op.resources))
    code = prepare_container(op, account, node)[0]
    if code:
        return code
    script = os.path.join(op.files.work_dir, CONTAINER_SCRIPT)
    try:
        os.chdir(op.files.work_dir)
        become(account)
        os.umask(0o027)
        sys.stdout.flush()
        os.execlp(script, script)  # noqa: S606 - exec, as the real binary does
    except OSError as problem:
        log(f"Couldn't execute the container launch file {script} - {problem}")
    return Exit.UNABLE_TO_EXECUTE_CONTAINER_SCRIPT


def wait_for(child: int) -> int:
    """wait_and_get_exit_code: the exit status, or 0x80 + the signal."""
    status = os.waitpid(child, 0)[1]
    if os.WIFSIGNALED(status):
        return 0x80 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def launch_docker_container(op: LaunchDockerContainer, node: Node) -> int:
    """launch_docker_container_as_user: dirs and files, `docker run` (detached), the pid from
    `docker inspect` into the pid file, wait for it, then the container's exit code."""
    account = checked_account(op.who, node.cfg)
    if isinstance(account, int):
        return account
    log("Creating local dirs...")
    code, chosen_log_dir = prepare_container(op, account, node)
    if code:
        error("Could not create local files and directories")
        return code
    for root in op.files.local_dirs:
        filecache = os.path.join(root, "usercache", op.who.user, "filecache")
        try:
            with contextlib.suppress(FileExistsError):  # as the real binary's EEXIST: another launch made it
                mkdir_as_user(filecache, 0o710, account, node)
        except OSError:
            error("Could not create user filecache directory")
            return Exit.INITIALIZE_USER_FAILED
    for root in op.files.local_dirs:
        container_dir = os.path.join(
            root, "usercache", op.who.user, "appcache", op.files.app_id, op.files.container_id
        )
        if os.path.isdir(container_dir):
            make_dirs(os.path.join(container_dir, "sysfs"), 0o710, account, node)
    built = build_docker_command(op.command_file, node)
    if isinstance(built, int):
        return built
    exit_code_file = f"{op.files.pid_file}.exitcode"
    code = run_and_wait(op, built, chosen_log_dir, account, node)
    if not node.write_as_nm(exit_code_file, str(code)):
        error(f"Could not write exit code to file {exit_code_file}.")
    log(f"Wrote the exit code {code} to {exit_code_file}")
    return code


def run_and_wait(
    op: LaunchDockerContainer, built: DockerArgv, log_dir: str | None, account: Account, node: Node
) -> int:
    outputs = []
    for name in ("stdout.txt", "stderr.txt"):
        if log_dir is None:
            return Exit.UNABLE_TO_EXECUTE_CONTAINER_SCRIPT
        path = os.path.join(log_dir, name)
        try:
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o640))
            node.chown(path, account.uid, node.nm_gid)
            os.chmod(path, 0o640)
        except OSError as problem:
            error(f"Failed to create file {path} - {problem}")
            return Exit.UNABLE_TO_EXECUTE_CONTAINER_SCRIPT
        outputs.append(path)
    flat = " ".join(built.argv) + " "
    retries = inspect_retries(node.cfg)
    container = op.files.container_id
    try:
        if built.entry_point:
            with open(outputs[0], "a") as out, open(outputs[1], "a") as err:
                out.write(f"Launching docker container...\nDocker run command: {flat}\n")
                out.flush()
                subprocess.Popen(built.argv, stdout=out, stderr=err)
        else:
            run = subprocess.run(built.argv, check=False)
            if run.returncode != 0:
                return Exit.UNABLE_TO_EXECUTE_CONTAINER_SCRIPT
    except OSError as problem:
        error(f"failed to execute docker command! error: {problem}")
        return Exit.UNABLE_TO_EXECUTE_CONTAINER_SCRIPT
    if built.entry_point:
        for attempt in range(retries):
            log("Inspecting docker container...")
            if node.inspect(container, "{{.State.Pid}}"):
                break
            if attempt < retries - 1:
                time.sleep(INSPECT_RETRY_SLEEP_S)
    pid = node.inspect(container, "{{.State.Pid}}")
    log(f"pid from docker inspect: {pid}")
    if pid is None:
        error(f"Could not inspect docker to get pid of {container}.")
        return Exit.UNABLE_TO_EXECUTE_CONTAINER_SCRIPT
    if pid != 0:
        log("Writing pid file...")
        if not node.write_as_nm(op.files.pid_file, str(pid)):
            error(f"Could not write pid to {op.files.pid_file}")
            return Exit.WRITE_PIDFILE_FAILED
        log("Waiting for docker container to finish.")
        while os.path.isdir(f"/proc/{pid}"):
            time.sleep(1)
    code = -1
    log("Obtaining the exit code...")
    for attempt in range(retries):
        found = node.inspect(container, "{{.State.ExitCode}}")
        code = -1 if found is None else found
        if found is not None and found != 0:
            break
        if attempt < retries - 1:  # the real one sleeps after the last try too
            time.sleep(INSPECT_RETRY_SLEEP_S)
    log(f"Exit code from docker inspect: {code}")
    return code


def build_docker_command(command_file: str, node: Node) -> DockerArgv | int:
    """construct_docker_command: the argv, or exit DOCKER_RUN_FAILED naming the docker code."""
    try:
        command = parse_config(read_text(command_file))
    except ConfigFileError as problem:
        error(str(problem))
        return Exit.INVALID_CONFIG_FILE
    except OSError:
        error(refusal_line(DockerRefusal(Exit.INVALID_DOCKER_COMMAND_FILE)))
        return Exit.DOCKER_RUN_FAILED
    try:
        built = docker_command_argv(command, node.cfg, node.host())
    except DirectExit as stop:
        error(str(stop))
        return stop.code
    except DockerRefusal as refusal:
        if refusal.detail:
            error(refusal.detail)
        error(refusal_line(refusal))
        return Exit.DOCKER_RUN_FAILED
    for note in built.notes:
        error(note)
    return built


def run_docker(op: RunDocker, node: Node) -> int:
    built = build_docker_command(op.command_file, node)
    if isinstance(built, int):
        return built
    try:
        os.execvp(built.argv[0], built.argv)  # noqa: S606 - exec, as the real binary does
    except OSError as problem:
        error(f"Couldn't execute the container launch with args {built.argv[0]} - {problem}")
    return Exit.DOCKER_RUN_FAILED


def inspect_docker_container(op: InspectDockerContainer, node: Node) -> int:
    argv = [node.docker(), "inspect", *op.args]
    try:
        os.execvp(argv[0], argv)  # noqa: S606 - exec, as the real binary does
    except OSError as problem:
        error(f"Couldn't execute the container launch with args {argv[0]} - {problem}")
    return Exit.DOCKER_RUN_FAILED


def remove_docker_container(op: RemoveDockerContainer, node: Node) -> int:
    """remove_docker_container: `docker rm -f`; with a cgroup hierarchy, the cgroup clean-up's
    result is the exit code (here: nothing to clean, the lab has no cgroups)."""
    try:
        done = subprocess.run([node.docker(), "rm", "-f", op.container], check=False)
        code = 0 if done.returncode == 0 else Exit.DOCKER_RUN_FAILED
    except OSError:
        code = Exit.DOCKER_RUN_FAILED
    if op.hierarchy is not None:
        if not valid_container_id(op.container):
            error(f"clean_docker_cgroups: Invalid container_id: {op.container}")
            return Exit.FAILED
        log(f"lab stand-in: no cgroups to clean under {op.hierarchy}")
        return 0
    return code


def signal_container(op: SignalContainer, node: Node) -> int:
    """signal_container_as_user: the process group -pid."""
    account = checked_account(op.who, node.cfg)
    if isinstance(account, int):
        return account
    if op.pid <= 0:
        return Exit.INVALID_CONTAINER_PID
    try:
        os.kill(-op.pid, 0)
    except OSError:
        log(f"Error signalling not exist process group {op.pid} with signal {op.signal}")
        return Exit.INVALID_CONTAINER_PID
    try:
        os.kill(-op.pid, op.signal)
    except OSError as problem:
        if problem.errno == errno.ESRCH:
            return Exit.INVALID_CONTAINER_PID
        log(f"Error signalling process group {-op.pid} with signal {op.signal} - {problem}")
        return Exit.UNABLE_TO_SIGNAL_CONTAINER
    log(f"Killing process group {op.pid} with {op.signal}")
    return 0


def delete_path(path: str) -> int:
    """delete_path: the tree under path, then path; missing is fine."""
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    except FileNotFoundError:
        return 0
    except OSError as problem:
        log(f"Couldn't delete {path} - {problem}")
        return Exit.FAILED
    return 0


def delete_as_user(op: DeleteAsUser, node: Node) -> int:
    """delete_as_user: subdir under each base dir (missing ones skipped), or subdir itself."""
    account = checked_account(op.who, node.cfg)
    if isinstance(account, int):
        return account
    if op.target is None:
        log("Path is null")
        return Exit.PATH_TO_DELETE_IS_NULL
    if not op.base_dirs:
        return delete_path(op.target)
    result = 0
    for base in op.base_dirs:
        if not os.path.exists(base):
            continue
        if not os.path.isdir(base):
            if op.target:
                log(f'baseDir "{base}" is a file and cannot contain subdir "{op.target}".')
                return Exit.FAILED
            full = base
        else:
            full = os.path.join(base, op.target) if op.target else base
        result = delete_path(full) or result
    return result


def list_as_user(op: ListAsUser, node: Node) -> int:
    account = checked_account(op.who, node.cfg)
    if isinstance(account, int):
        return account
    if not os.path.exists(op.target):
        log(f"Could not stat {op.target}")
        return Exit.FAILED
    if not os.path.isdir(op.target):
        print(op.target)
        return 0
    try:
        for name in os.listdir(op.target):
            print(name)
    except OSError as problem:
        log(f"Could not open directory {op.target} - {problem}")
        return Exit.FAILED
    return 0


def sync_yarn_sysfs(op: SyncYarnSysfs, node: Node) -> int:
    """sync_yarn_sysfs: nmPrivate/<app>/sysfs/app.json into the app's sysfs.tar/sysfs dir."""
    account = checked_account(op.who, node.cfg)
    if isinstance(account, int):
        return account
    if not feature_enabled(node.cfg.value("feature.yarn.sysfs.enabled"), False):
        return Exit.FEATURE_DISABLED
    for root in op.local_dirs:
        app_cache = os.path.join(root, "usercache", op.who.user, "appcache", op.app_id)
        found = next((walk[0] for walk in os.walk(app_cache) if walk[0].endswith("/sysfs.tar/sysfs")), None)
        if found is None:
            return Exit.OUT_OF_MEMORY  # what the real code returns here
        source = os.path.join(root, "nmPrivate", op.app_id, "sysfs", "app.json")
        if not os.access(source, os.R_OK):
            continue
        destination = os.path.join(found, "app.json")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(destination)
        if copy_new_file(source, destination, 0o750, account, node):
            return 0
    return Exit.OUT_OF_MEMORY


def device_module(op: DeviceModule, node: Node) -> int:
    """--module-gpu/fpga/devices: the request is checked as the real one checks it; the
    device cgroups it would update are not touched (no isolation in the lab)."""
    if node.cfg.value("module.enabled", op.module) != "true":
        error(f"Please make sure {op.module} module is enabled before using it.")
        return Exit.FAILED
    container = None
    args = list(op.args)
    while args:
        name = args.pop(0)
        key, _equals, inline = name.partition("=")
        value = inline or (args.pop(0) if args else "")
        if key in ("--container_id", "-c"):
            if not valid_container_id(value):
                error(f"Specified container_id={value} is invalid")
                return 1
            container = value
        elif key not in ("--excluded_gpus", "-e", "--excluded_fpgas", "--excluded_devices"):
            error(f"Unknown option in {op.module} command {name}")
            return 1
    if container is None:
        error("--container_id must be specified.")
        return 1
    log(f"lab stand-in: {op.module} device cgroups not updated for {container} ({' '.join(op.args)})")
    return 0


def dispatch(op: Operation, node: Node) -> int:
    match op:
        case CheckSetup():
            return 0
        case NotProvided():
            error(f"lab stand-in: {op.what} is not provided by this container-executor")
            return op.code
        case RunDocker():
            return run_docker(op, node)
        case InspectDockerContainer():
            return inspect_docker_container(op, node)
        case RemoveDockerContainer():
            return remove_docker_container(op, node)
        case DeviceModule():
            return device_module(op, node)
        case InitializeContainer():
            return initialize_container(op, node)
        case LaunchContainer():
            return launch_container(op, node)
        case LaunchDockerContainer():
            return launch_docker_container(op, node)
        case SignalContainer():
            return signal_container(op, node)
        case DeleteAsUser():
            return delete_as_user(op, node)
        case ListAsUser():
            return list_as_user(op, node)
        case SyncYarnSysfs():
            return sync_yarn_sysfs(op, node)


def announce(argv: Sequence[str]) -> None:
    if len(argv) >= 4 and not argv[1].startswith("--"):
        log(f"main : command provided {c_atoi(argv[3])}")
        log(f"main : run as user is {argv[1]}")
        log(f"main : requested yarn user is {argv[2]}")


def main(argv: Sequence[str]) -> int:
    wanted = config_location()
    config_path = real_path(wanted)
    setup = check_setup(wanted, config_path, executable_location(), stat_of, read_text, group_gid)
    if isinstance(setup, Refused):
        error(setup.message)
        return setup.code
    assert config_path is not None  # check_setup refuses a missing configuration
    node = Node(setup.cfg, int(os.environ.get("SUDO_UID", os.getuid())), setup.nm_gid, config_path)
    announce(argv)
    op = parse_invocation(argv, setup.cfg)
    if isinstance(op, Refused):
        error(op.message)
        return op.code
    return dispatch(op, node)


if __name__ == "__main__":
    sys.exit(main(sys.argv) & 0xFF)
