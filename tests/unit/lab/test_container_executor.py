"""lab/container_executor/container_executor.py, the lab's stand-in for Hadoop 3.4.2's setuid
container-executor: one table per container-executor.cfg rule, asserting the real binary's codes
(util.h) and the docker argv built (docker-util.c order), then the program itself run as the
NodeManager runs it, with docker.binary pointed at a recording fake (no Docker engine here; the
subject is the stand-in, not Docker). The role's own container-executor.cfg template is rendered
with Ansible's templating and read by the stand-in's parser, so the two cannot drift apart.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.template import Templar, trust_as_template

from tests.support import ROOT
from tests.support.roles import trusted

SCRIPT = ROOT / "lab" / "container_executor" / "container_executor.py"
_spec = importlib.util.spec_from_file_location("lab_container_executor", SCRIPT)
assert _spec is not None
assert _spec.loader is not None
ce = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = ce  # dataclasses look their module up
_spec.loader.exec_module(ce)

CID = "container_e17_1410901177871_0001_01_000005"
APP = "application_1410901177871_0001"
TRITON = "registry.lab:5000/nvidia/tritonserver:24.08-py3"


# ---- the configuration files


def cfg_text(**docker: str | None) -> str:
    """A container-executor.cfg shaped like the role's template; keyword = [docker] key with
    dots as double underscores (None removes the key)."""
    values: dict[str, str | None] = {
        "module.enabled": "true",
        "docker.binary": "/usr/bin/docker",
        "docker.allowed.capabilities": "CHOWN,SETUID,SETGID",
        "docker.allowed.networks": "host,bridge,none",
        "docker.allowed.runtimes": "runc,nvidia",
        "docker.privileged-containers.enabled": "false",
        "docker.trusted.registries": "registry.lab:5000",
    }
    values.update({key.replace("__", "."): value for key, value in docker.items()})
    lines = [
        "# Ansible managed",
        "yarn.nodemanager.linux-container-executor.group=root",
        "banned.users=hdfs,yarn,mapred,bin",
        "min.user.id=1000",
        "allowed.system.users=",
        "feature.tc.enabled=false",
        "",
        "[docker]",
        *(f"  {key}={value}" for key, value in values.items() if value is not None),
        "",
        "[gpu]",
        "  module.enabled=true",
        "",
    ]
    return "\n".join(lines)


def command_text(**keys: str | None) -> str:
    """A docker command file as DockerClient.writeCommandToTempFile writes it."""
    values: dict[str, str | None] = {
        "docker-command": "run",
        "name": CID,
        "user": "1001:1001",
        "image": TRITON,
        "detach": "true",
        "net": "host",
        "workdir": "/work",
        "launch-command": "bash,/work/launch_container.sh",
    }
    values.update({key.replace("_", "-"): value for key, value in keys.items()})
    body = "".join(f"  {key}={value}\n" for key, value in values.items() if value is not None)
    return "[docker-command-execution]\n" + body


@dataclass
class Disk:
    """Real directories for the mount rules: what is allowed rw, ro, and what is not."""

    root: Path

    @property
    def local(self) -> Path:
        return self.root / "local"

    @property
    def models(self) -> Path:
        return self.root / "models"

    @property
    def other(self) -> Path:
        return self.root / "other"

    @property
    def config(self) -> Path:
        return self.root / "etc" / "container-executor.cfg"


@pytest.fixture
def disk(tmp_path: Path) -> Disk:
    found = Disk(tmp_path)
    for directory in (found.local / "appcache", found.models, found.other, found.config.parent):
        directory.mkdir(parents=True)
    found.config.write_text("")
    return found


def host(disk: Disk, privileged_users: tuple[str, ...] = ()) -> Any:
    drivers = {"host": "host", "bridge": "bridge", "none": "null"}
    return ce.DockerHost(
        config_path=str(disk.config),
        realpath=ce.real_path,
        is_dir=os.path.isdir,
        network_driver=drivers.get,
        may_run_privileged=lambda user: user in privileged_users,
    )


def mount_cfg(disk: Disk, **docker: str | None) -> Any:
    allowed = {
        "docker__allowed__rw-mounts": f"{disk.local},{disk.root / 'etc'}",
        "docker__allowed__ro-mounts": str(disk.models),
    }
    return ce.parse_config(cfg_text(**{**allowed, **docker}))


def build(disk: Disk, cfg: Any, **command: str | None) -> Any:
    return ce.docker_command_argv(ce.parse_config(command_text(**command)), cfg, host(disk))


# ---- the whole argv, in docker-util.c's order


def test_a_trusted_run_command_becomes_the_real_binarys_docker_run(disk: Disk) -> None:
    built = build(
        disk,
        mount_cfg(disk),
        mounts=f"{disk.local}:/local:rw,{disk.models}:/models:ro",
        cap_add="CHOWN,SETUID",
        runtime="nvidia",
        hostname="worker1",
        group_add="1002,1003",
        environ="/nm/private/docker.env",
    )
    assert built.argv == [
        "/usr/bin/docker",
        "run",
        f"--name={CID}",
        "--user=1001:1001",
        "-d",
        "--workdir=/work",
        "--net=host",
        "-v",
        f"{disk.local}:/local:rw",
        "-v",
        f"{disk.models}:/models:ro",
        "--cap-drop=ALL",
        "--cap-add=CHOWN",
        "--cap-add=SETUID",
        "--runtime=nvidia",
        "--hostname=worker1",
        "--group-add",
        "1002",
        "--group-add",
        "1003",
        "--env-file",
        "/nm/private/docker.env",
        TRITON,
        "bash",
        "/work/launch_container.sh",
    ]
    assert built.notes == []
    assert built.entry_point is False


def test_an_untrusted_image_still_runs_without_its_mounts_and_added_capabilities(disk: Disk) -> None:
    built = build(
        disk,
        mount_cfg(disk),
        image="docker.io/library/ubuntu:22.04",
        mounts=f"{disk.local}:/local:rw,{disk.models}:/models:ro",
        cap_add="CHOWN",
    )
    assert "-v" not in built.argv
    assert not [arg for arg in built.argv if arg.startswith("--cap-add")]
    assert "--cap-drop=ALL" in built.argv
    assert built.argv[-3:] == ["docker.io/library/ubuntu:22.04", "bash", "/work/launch_container.sh"]
    assert any("Disable mount volume for untrusted image" in note for note in built.notes)
    assert any("Docker capability disabled for untrusted image" in note for note in built.notes)


@pytest.mark.parametrize(
    ("registries", "image", "trusted"),
    [
        ("registry.lab:5000", TRITON, True),
        ("registry.lab:5000/", TRITON, True),
        ("registry.lab", TRITON, False),  # the prefix is the registry with its port
        ("registry.lab:5000", "ubuntu:22.04", False),
        ("library", "ubuntu:22.04", True),  # "library": images without a registry
        ("library", "docker.io/ubuntu:22.04", False),
        (None, TRITON, False),  # no list: nothing is trusted
    ],
)
def test_trusted_registries_are_image_prefixes(registries: str | None, image: str, trusted: bool) -> None:
    cfg = ce.parse_config(cfg_text(docker__trusted__registries=registries))
    assert ce.image_trusted(ce.parse_config(command_text(image=image)), cfg) is trusted


def test_a_bridge_network_publishes_every_port_unless_a_mapping_is_given(disk: Disk) -> None:
    assert "-P" in build(disk, mount_cfg(disk), net="bridge").argv
    mapped = build(disk, mount_cfg(disk), net="bridge", ports_mapping="8000:8000").argv
    assert "-P" not in mapped
    assert mapped[mapped.index("-p") + 1] == "8000:8000"
    assert "-P" not in build(disk, mount_cfg(disk), net="host").argv


def test_a_read_only_mount_may_come_from_an_allowed_read_write_directory(disk: Disk) -> None:
    (disk.local / "appcache" / "app").mkdir()
    built = build(disk, mount_cfg(disk), mounts=f"{disk.local}/appcache/app:/app:ro")
    assert built.argv[built.argv.index("-v") + 1] == f"{disk.local}/appcache/app:/app:ro"


def test_a_privileged_container_needs_the_switch_entry_point_a_trusted_image_and_a_docker_user(
    disk: Disk,
) -> None:
    cfg = mount_cfg(disk, **{"docker__privileged-containers__enabled": "true"})
    command = ce.parse_config(command_text(privileged="true", use_entry_point="true"))
    built = ce.docker_command_argv(command, cfg, host(disk, privileged_users=("1001:1001",)))
    assert "--privileged" in built.argv
    assert "--user=1001:1001" not in built.argv  # privileged containers run as their image says
    assert built.entry_point is True
    with pytest.raises(ce.DockerRefusal) as refused:
        ce.docker_command_argv(command, cfg, host(disk, privileged_users=()))
    assert refused.value.code == 63


# ---- one row per refusal: the real docker error code (the process exits 29 naming it)

REFUSALS = [
    # id, [docker] overrides, command file overrides, code
    ("network-not-allowed", {}, {"net": "overlay"}, 60),
    ("no-allowed-networks", {"docker__allowed__networks": None}, {"net": "host"}, 60),
    ("runtime-not-allowed", {}, {"runtime": "kata"}, 74),
    ("runtime-of-an-untrusted-image", {}, {"runtime": "nvidia", "image": "docker.io/x/y"}, 74),
    ("capability-not-allowed", {}, {"cap_add": "SYS_ADMIN"}, 62),
    ("privileged-disabled", {}, {"privileged": "true"}, 63),
    (
        "privileged-without-entry-point",
        {"docker__privileged-containers__enabled": "true"},
        {"privileged": "true"},
        63,
    ),
    (
        "privileged-untrusted",
        {"docker__privileged-containers__enabled": "true"},
        {"privileged": "true", "use_entry_point": "true", "image": "docker.io/x/y"},
        63,
    ),
    ("rw-mount-not-allowed", {}, {"mounts": "{other}:/o:rw"}, 51),
    ("ro-mount-not-allowed", {}, {"mounts": "{other}:/o:ro"}, 50),
    ("rw-mount-of-a-read-only-path", {}, {"mounts": "{models}:/m:rw"}, 51),
    ("rw-mount-of-the-cfg-directory", {}, {"mounts": "{etc}:/etc/hadoop:rw"}, 51),
    ("mount-source-missing", {}, {"mounts": "{root}/missing:/m:ro"}, 49),
    ("mount-without-mode", {}, {"mounts": "{local}:/local"}, 49),
    ("mount-bad-mode", {}, {"mounts": "{local}:/local:rx"}, 49),
    (
        "allowed-mount-missing-on-disk",
        {"docker__allowed__ro-mounts": "{root}/gone"},
        {"mounts": "{local}:/l:ro"},
        52,
    ),
    ("devices-not-allowed", {}, {"devices": "/dev/nvidia0:/dev/nvidia0"}, 64),
    ("pid-host-disabled", {}, {"pid": "host"}, 70),
    ("pid-other", {}, {"pid": "container:x"}, 71),
    ("image-name", {}, {"image": "registry.lab:5000/Triton:latest"}, 56),
    ("container-name", {}, {"name": "triton-1"}, 55),
    ("no-user", {}, {"user": None}, 57),
    ("ports-mapping", {}, {"net": "bridge", "ports_mapping": "80"}, 61),
    ("tmpfs-relative", {}, {"tmpfs": "run"}, 73),
    ("service-mode-disabled", {}, {"service_mode": "true"}, 75),
    ("unknown-command", {}, {"docker_command": "commit"}, 59),
    ("inspect-format", {}, {"docker_command": "inspect", "format": "{{.State.Pid}}"}, 58),
    ("kill-signal", {}, {"docker_command": "kill", "signal": "term"}, 66),
    ("stop-time", {}, {"docker_command": "stop", "time": "10s"}, 65),
]


@pytest.mark.parametrize(
    ("docker", "command", "code"), [row[1:] for row in REFUSALS], ids=[r[0] for r in REFUSALS]
)
def test_each_rule_refuses_with_the_real_docker_error_code(
    disk: Disk, docker: dict[str, str | None], command: dict[str, str | None], code: int
) -> None:
    paths = {
        "root": str(disk.root),
        "local": str(disk.local),
        "other": str(disk.other),
        "models": str(disk.models),
        "etc": str(disk.root / "etc"),
    }

    def fill(value: str | None) -> str | None:
        return None if value is None else value.format(**paths)

    cfg = mount_cfg(disk, **{key: fill(value) for key, value in docker.items()})
    with pytest.raises(ce.DockerRefusal) as refused:
        build(disk, cfg, **{key: fill(value) for key, value in command.items()})
    assert refused.value.code == code
    assert f"docker error code={code}," in ce.refusal_line(refused.value)


@pytest.mark.parametrize(
    ("command", "argv"),
    [
        (
            {"docker_command": "inspect", "format": "{{.State.Status}}"},
            ["inspect", "--format={{.State.Status}}", CID],
        ),
        ({"docker_command": "kill", "signal": "KILL"}, ["kill", "--signal=KILL", CID]),
        ({"docker_command": "stop", "time": "10"}, ["stop", "--time=10", CID]),
        ({"docker_command": "rm"}, ["rm", "-f", CID]),
        ({"docker_command": "start"}, ["start", CID]),
        ({"docker_command": "pull"}, ["pull", TRITON]),
    ],
    ids=["inspect", "kill", "stop", "rm", "start", "pull"],
)
def test_the_other_docker_commands_of_a_container_life_cycle(
    disk: Disk, command: dict[str, str], argv: list[str]
) -> None:
    assert build(disk, mount_cfg(disk), **command).argv == ["/usr/bin/docker", *argv]


def test_devices_match_the_allowed_list_on_their_host_part(disk: Disk) -> None:
    cfg = mount_cfg(disk, docker__allowed__devices="/dev/nvidia0,regex:^/dev/nvidia-uvm.*")
    built = build(disk, cfg, devices="/dev/nvidia0:/dev/nvidia0,/dev/nvidia-uvm-tools:/dev/nvidia-uvm-tools")
    assert "--device=/dev/nvidia0:/dev/nvidia0" in built.argv
    assert "--device=/dev/nvidia-uvm-tools:/dev/nvidia-uvm-tools" in built.argv


# ---- the setup check run before every operation (main.c assert_valid_setup)

ROOT_DIR = ce.FileStat(0, 0, stat.S_IFDIR | 0o755)
SETUP_PATHS = (
    "/opt/hadoop/etc/hadoop/container-executor.cfg",
    "/opt/hadoop/etc/hadoop",
    "/opt/hadoop/etc",
    "/opt/hadoop",
    "/opt",
)
GOOD_CFG = ce.FileStat(0, 0, stat.S_IFREG | 0o400)
GOOD_WRAPPER = ce.FileStat(0, 1000, stat.S_IFREG | 0o750)

SETUP = [
    # id, stat overrides, groups, code, text in the message
    ("good", {}, {"root": 0}, None, ""),
    (
        "cfg-not-root",
        {SETUP_PATHS[0]: ce.FileStat(1000, 0, stat.S_IFREG | 0o400)},
        {"root": 0},
        24,
        f"File {SETUP_PATHS[0]} must be owned by root",
    ),
    (
        "cfg-group-writable",
        {SETUP_PATHS[0]: ce.FileStat(0, 0, stat.S_IFREG | 0o620)},
        {"root": 0},
        24,
        "must not be world or group writable, but is 620",
    ),
    (
        "parent-world-writable",
        {"/opt/hadoop": ce.FileStat(0, 0, stat.S_IFDIR | 0o777)},
        {"root": 0},
        24,
        "File /opt/hadoop must not be world or group writable",
    ),
    (
        "parent-not-root",
        {"/opt": ce.FileStat(5, 0, stat.S_IFDIR | 0o755)},
        {"root": 0},
        24,
        "File /opt must be owned by root",
    ),
    ("unknown-nm-group", {}, {}, 24, "Can't get group information for root"),
    (
        "wrapper-not-root",
        {"/wrapper": ce.FileStat(1000, 0, stat.S_IFREG | 0o750)},
        {"root": 0},
        22,
        "user-owned by root",
    ),
    (
        "wrapper-other-group",
        {"/wrapper": ce.FileStat(0, 1000, stat.S_IFREG | 0o750)},
        {"root": 0},
        22,
        "group 0 is different",
    ),
    (
        "wrapper-others-execute",
        {"/wrapper": ce.FileStat(0, 0, stat.S_IFREG | 0o751)},
        {"root": 0},
        22,
        "execute for others",
    ),
]


@pytest.mark.parametrize(
    ("stats", "groups", "code", "text"), [row[1:] for row in SETUP], ids=[r[0] for r in SETUP]
)
def test_the_setup_check_names_what_is_wrong_with_the_real_codes(
    stats: dict[str, Any], groups: dict[str, int], code: int | None, text: str
) -> None:
    files = {path: ROOT_DIR for path in SETUP_PATHS[1:]}
    files |= {SETUP_PATHS[0]: GOOD_CFG, "/wrapper": ce.FileStat(0, 0, stat.S_IFREG | 0o750)} | stats
    result = ce.check_setup(
        SETUP_PATHS[0], SETUP_PATHS[0], "/wrapper", files.get, lambda _: cfg_text(), groups.get
    )
    if code is None:
        assert isinstance(result, ce.Setup)
        assert result.nm_gid == 0
    else:
        assert isinstance(result, ce.Refused)
        assert (result.code, text in result.message) == (code, True), result.message


def test_a_missing_configuration_or_group_key_is_an_invalid_config_file() -> None:
    missing = ce.check_setup("/x/container-executor.cfg", None, "/w", lambda _: None, str, lambda _: 0)
    assert missing == ce.Refused(24, "Configuration file /x/container-executor.cfg not found.")
    files = {"/c.cfg": GOOD_CFG, "/w": GOOD_WRAPPER}
    no_group = ce.check_setup("/c.cfg", "/c.cfg", "/w", files.get, lambda _: "[docker]\n  a=b\n", lambda _: 0)
    assert isinstance(no_group, ce.Refused)
    assert no_group.code == 24
    assert "yarn.nodemanager.linux-container-executor.group" in no_group.message


# ---- users: banned.users, min.user.id, allowed.system.users (set_user fails: exit 255)

USERS = [
    ("root", ce.Account("root", 0, 0), "", "Running as root is not allowed"),
    ("alice", ce.Account("alice", 1001, 1001), "", None),
    ("alice", None, "", "User alice not found"),
    ("daemon", ce.Account("daemon", 1, 1), "", "below the minimum allowed 1000"),
    ("daemon", ce.Account("daemon", 1, 1), "allowed.system.users=daemon\n", None),
    ("hdfs", ce.Account("hdfs", 1005, 1005), "", "Requested user hdfs is banned"),
    ("alice", ce.Account("alice", 1001, 1001), "banned.users=alice\n", "Requested user alice is banned"),
    ("alice", ce.Account("alice", 1001, 1001), "min.user.id=2000\n", "below the minimum allowed 2000"),
    ("alice", ce.Account("alice", 1001, 1001), "min.user.id=10x\n", "Illegal value of 10x"),
]


@pytest.mark.parametrize(("name", "account", "extra", "problem"), USERS)
def test_who_may_run_containers(name: str, account: Any, extra: str, problem: str | None) -> None:
    found = ce.user_problem(name, account, ce.parse_config(extra + cfg_text()))  # the first key wins
    if problem is None:
        assert found is None
    else:
        assert problem in (found or "<allowed>")


def test_without_banned_users_the_real_defaults_are_banned() -> None:
    cfg = ce.parse_config("yarn.nodemanager.linux-container-executor.group=hadoop\n")
    assert ce.user_problem("yarn", ce.Account("yarn", 1003, 1003), cfg) == "Requested user yarn is banned"


# ---- the command line (main.c): operation numbers, argument counts, codes

NM = ["/opt/hadoop/bin/container-executor", "alice", "alice"]
LAUNCH_DOCKER = [
    *NM, "4", APP, CID, "/l/usercache/alice/appcache/app/c", "/nm/launch_container.sh",
    "/nm/c.tokens", "--http", "/nm/c.pid", "/l1%/l2", "/g1%/g2", "/nm/docker.cmd",
]  # fmt: skip


def test_launch_docker_container_reads_the_nodemanagers_thirteen_arguments() -> None:
    op = ce.parse_invocation(LAUNCH_DOCKER, ce.parse_config(cfg_text()))
    assert isinstance(op, ce.LaunchDockerContainer)
    assert op.who == ce.RunAs("alice", "alice")
    assert op.files.local_dirs == ("/l1", "/l2")
    assert op.files.log_dirs == ("/g1", "/g2")
    assert (op.files.pid_file, op.command_file, op.files.https) == ("/nm/c.pid", "/nm/docker.cmd", None)
    https = [*LAUNCH_DOCKER[:9], "--https", "/nm/ks", "/nm/ts", *LAUNCH_DOCKER[10:]]
    op = ce.parse_invocation(https, ce.parse_config(cfg_text()))
    assert isinstance(op, ce.LaunchDockerContainer)
    assert (op.files.https, op.command_file) == (("/nm/ks", "/nm/ts"), "/nm/docker.cmd")


INVOCATIONS = [
    ("no-arguments", NM[:1], {}, 1),
    ("checksetup", [NM[0], "--checksetup"], {}, None),
    ("docker-disabled", LAUNCH_DOCKER, {"module__enabled": "false"}, 32),
    ("run-docker-disabled", [NM[0], "--run-docker", "/f"], {"module__enabled": None}, 32),
    ("run-docker-arguments", [NM[0], "--run-docker"], {}, 1),
    ("inspect-arguments", [NM[0], "--inspect-docker-container", CID], {}, 1),
    ("launch-docker-too-few", LAUNCH_DOCKER[:-1], {}, 1),
    ("launch-docker-with-tc-disabled", [*LAUNCH_DOCKER, "/nm/tc.cmd"], {}, 32),
    ("unknown-command", [*NM, "9"], {}, 3),
    ("signal-arguments", [*NM, "2", "1234"], {}, 1),
    ("signal-not-a-number", [*NM, "2", "12x", "15"], {}, 1),
    ("initialize-too-few", [*NM, "0", APP, CID, "/t", "/l", "/g"], {}, 1),
    ("initialize-bad-container", [*NM, "0", APP, "container_x", "/t", "/l", "/g", "java"], {}, 43),
    ("tc-disabled", [NM[0], "--tc-modify-state", "/f"], {}, 32),
    ("mount-cgroups-disabled", [NM[0], "--mount-cgroups", "h", "cpu=/c"], {}, 32),
]


@pytest.mark.parametrize(
    ("argv", "docker", "code"), [r[1:] for r in INVOCATIONS], ids=[r[0] for r in INVOCATIONS]
)
def test_the_command_line_is_checked_like_main_c(
    argv: list[str], docker: dict[str, str | None], code: int | None
) -> None:
    op = ce.parse_invocation(argv, ce.parse_config(cfg_text(**docker)))
    if code is None:
        assert not isinstance(op, ce.Refused)
    else:
        assert isinstance(op, ce.Refused)
        assert op.code == code


def test_the_operation_numbers_are_the_real_ones() -> None:
    assert {c.name: c.value for c in ce.RunAsUserCommand} == {
        "INITIALIZE_CONTAINER": 0,
        "LAUNCH_CONTAINER": 1,
        "SIGNAL_CONTAINER": 2,
        "DELETE_AS_USER": 3,
        "LAUNCH_DOCKER_CONTAINER": 4,
        "LIST_AS_USER": 5,
        "SYNC_YARN_SYSFS": 6,
    }


# ---- the parser, its quirks, and the role's own template


def test_the_parser_keeps_configuration_c_s_quirks() -> None:
    cfg = ce.parse_config(
        "top=1 # a comment\nempty=\n[docker]\n  key = a,,b \n  truncated=x=y\n[docker]\n  more=2\n"
    )
    assert cfg.value("top") == "1"
    assert cfg.value("empty") is None  # an empty value drops the key
    assert cfg.values("key", "docker") == ["a", "b"]
    assert cfg.value("truncated", "docker") == "x"  # a value ends at the next '='
    assert cfg.value("more", "docker") == "2"  # a repeated section is merged
    for bad in ("[docker]\n   \n", "[docker] \n", "[]\n"):
        with pytest.raises(ce.ConfigFileError):
            ce.parse_config(bad)


def rendered_role_cfg(**inputs: Any) -> str:
    variables: dict[str, Any] = {}
    for role in ("hadoop", "yarn_nodemanager"):
        variables.update(
            trusted(yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text()))
        )
    variables.update({"ansible_managed": "Ansible managed", "inventory_hostname": "worker1", "groups": {}})
    variables.update(inputs)
    template = (ROOT / "roles" / "yarn_nodemanager" / "templates" / "container-executor.cfg.j2").read_text()
    text = Templar(variables=variables).template(trust_as_template(template))
    assert isinstance(text, str)
    return text


@pytest.mark.parametrize(("cgroups", "gpus"), [(False, False), (True, False), (False, True)])
def test_the_roles_template_reads_as_the_real_parser_reads_it(cgroups: bool, gpus: bool) -> None:
    """The [cgroups] section is there for cgroups, and for GPUs (their module isolates devices there)."""
    cfg = ce.parse_config(
        rendered_role_cfg(yarn_nodemanager_cgroups_enabled=cgroups, yarn_nodemanager_gpu_enabled=gpus)
    )
    assert cfg.value(ce.NM_GROUP_KEY) == "hadoop"
    assert ce.docker_enabled(cfg)
    assert cfg.values("banned.users") == ["hdfs", "yarn", "mapred", "bin"]
    assert cfg.value("allowed.system.users") is None
    assert ("nvidia" in (cfg.values("docker.allowed.runtimes", "docker") or [])) is gpus
    assert cfg.value("module.enabled", "gpu") == str(gpus).lower()
    assert (cfg.value("root", "cgroups") == "/sys/fs/cgroup") is (cgroups or gpus)
    assert (cfg.value("yarn-hierarchy", "cgroups") == "hadoop-yarn") is (cgroups or gpus)


def test_the_program_imports_the_standard_library_only() -> None:
    imported = set()
    for node in ast.walk(ast.parse(SCRIPT.read_text())):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert imported - set(sys.stdlib_module_names) - {"__future__"} == set()


# ---- the program itself, run as the NodeManager runs it (root, a fake docker)

# Records its arguments; answers docker inspect from ANSWERS (a Go template -> what to print).
FAKE_DOCKER = """
args = sys.argv[1:]
with open(LOG, "a") as log:
    log.write(json.dumps(args) + "\\n")
form = next((a.split("=", 1)[1] for a in args if a.startswith("--format=")), None)
if "--format" in args:
    form = args[args.index("--format") + 1]
if args[:2] == ["network", "inspect"]:
    print("bridge" if args[2] == "bridge" else "host")
elif args[:1] == ["inspect"]:
    print(ANSWERS.get(form, "running"))
elif args[:1] == ["run"]:
    print("4f6d2c0e9b1a")
"""


@dataclass
class Node:
    """A node's layout under a root-owned directory, as the lab lays it out."""

    root: Path
    pid: int  # what the fake docker inspect answers: a process already gone

    @property
    def cfg(self) -> Path:
        return self.root / "etc" / "hadoop" / "container-executor.cfg"

    @property
    def wrapper(self) -> Path:
        return self.root / "bin" / "container-executor"

    @property
    def local(self) -> Path:
        return self.root / "local"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def docker_log(self) -> Path:
        return self.root / "docker.log"

    def write_cfg(self, **docker: str | None) -> None:
        defaults = {
            "docker__binary": str(self.root / "docker"),
            "docker__allowed__rw-mounts": f"{self.local},{self.logs}",
            "docker__allowed__ro-mounts": str(self.root / "models"),
            "docker__inspect__max__retries": "1",
        }
        self.cfg.write_text(cfg_text(**{**defaults, **docker}))
        self.cfg.chmod(0o400)

    def write_docker(self, exit_code: int = 3) -> None:
        answers = {"{{.State.Pid}}": self.pid, "{{.State.ExitCode}}": exit_code}
        fake = self.root / "docker"
        head = (
            f"#!{sys.executable}\nimport json, sys\nLOG = {str(self.docker_log)!r}\nANSWERS = {answers!r}\n"
        )
        fake.write_text(head + FAKE_DOCKER)
        fake.chmod(0o755)

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {key: value for key, value in os.environ.items() if key != "SUDO_UID"}
        env |= {"TARN_CE_CONF": str(self.cfg), "TARN_CE_BINARY": str(self.wrapper)}
        return subprocess.run(
            [sys.executable, str(SCRIPT), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def docker_calls(self) -> list[list[str]]:
        if not self.docker_log.exists():
            return []
        return [json.loads(line) for line in self.docker_log.read_text().splitlines()]


def gone_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


@pytest.fixture
def node() -> Iterator[Node]:
    if os.geteuid() != 0:
        pytest.fail(
            "the stand-in's own checks need root-owned files: run the unit tests as root (make test does)"
        )
    # /tmp is world-writable, and the real check refuses a cfg below it: a root-only place.
    root = Path(tempfile.mkdtemp(prefix="tarn-ce-", dir="/run"))
    try:
        root.chmod(0o755)
        made = Node(root, gone_pid())
        for directory in (
            made.cfg.parent,
            made.wrapper.parent,
            made.local / "usercache",
            made.logs,
            root / "models",
        ):
            directory.mkdir(parents=True)
            directory.chmod(0o755)
        (made.local / "usercache").chmod(0o755)
        made.wrapper.write_text('#!/bin/sh\nexec sudo -n /usr/bin/python3 container_executor.py "$@"\n')
        made.wrapper.chmod(0o750)
        made.write_cfg()
        made.write_docker()
        yield made
    finally:
        shutil.rmtree(root, ignore_errors=True)


def nobody() -> tuple[int, int]:
    entry = pwd.getpwnam("nobody")
    return entry.pw_uid, entry.pw_gid


def container_files(made: Node) -> dict[str, Path]:
    private = made.local / "nmPrivate" / APP / CID
    private.mkdir(parents=True)
    files = {
        "script": private / "launch_container.sh",
        "tokens": private / f"{CID}.tokens",
        "pid": private / f"{CID}.pid",
        "command": private / "docker.cmd",
        "work": made.local / "usercache" / "nobody" / "appcache" / APP / CID,
    }
    files["script"].write_text("#!/bin/bash\nexit 0\n")
    files["tokens"].write_bytes(b"HDTS")
    return files


def launch_args(made: Node, files: dict[str, Path]) -> list[str]:
    return [
        "nobody", "nobody", "4", APP, CID, str(files["work"]), str(files["script"]), str(files["tokens"]),
        "--http", str(files["pid"]), str(made.local), str(made.logs), str(files["command"]),
    ]  # fmt: skip


def test_checksetup_passes_on_a_node_laid_out_like_the_lab(node: Node) -> None:
    done = node.run("--checksetup")
    assert (done.returncode, done.stderr) == (0, "")


def test_checksetup_names_a_group_writable_directory_above_the_cfg(node: Node) -> None:
    node.cfg.parent.chmod(0o775)
    done = node.run("--checksetup")
    assert done.returncode == 24
    assert f"File {node.cfg.parent} must not be world or group writable" in done.stderr


def test_checksetup_refuses_a_wrapper_outside_the_nodemanager_group(node: Node) -> None:
    os.chown(node.wrapper, 0, nobody()[1])
    done = node.run("--checksetup")
    assert done.returncode == 22
    assert "Invalid permissions on container-executor binary." in done.stderr


def test_a_docker_container_is_launched_detached_and_its_exit_code_comes_back(node: Node) -> None:
    files = container_files(node)
    files["command"].write_text(
        command_text(user="65534:65534", mounts=f"{node.local}:{node.local}:rw", cap_add="CHOWN")
    )
    done = node.run(*launch_args(node, files))
    assert done.returncode == 3, done.stderr  # the container's exit code, from docker inspect
    run = next(call for call in node.docker_calls() if call[0] == "run")
    assert run[:4] == ["run", f"--name={CID}", "--user=65534:65534", "-d"]
    assert ["-v", f"{node.local}:{node.local}:rw"] == run[run.index("-v") : run.index("-v") + 2]
    assert "--cap-add=CHOWN" in run
    assert ["inspect", "--format", "{{.State.Pid}}", CID] in node.docker_calls()
    assert files["pid"].read_text() == str(node.pid)
    assert Path(f"{files['pid']}.exitcode").read_text() == "3"
    script = files["work"] / "launch_container.sh"
    assert (script.stat().st_uid, stat.S_IMODE(script.stat().st_mode)) == (nobody()[0], 0o700)
    assert (files["work"] / "container_tokens").read_bytes() == b"HDTS"
    assert (node.logs / APP / CID / "stdout.txt").exists()
    user_dir = node.local / "usercache" / "nobody"
    filecache = (user_dir / "filecache").stat()
    assert (filecache.st_gid, stat.S_IMODE(filecache.st_mode)) == (user_dir.stat().st_gid, 0o2710)


def test_an_untrusted_image_is_launched_without_mounts_and_says_so(node: Node) -> None:
    files = container_files(node)
    files["command"].write_text(
        command_text(image="docker.io/library/ubuntu:22.04", mounts=f"{node.local}:/l:rw", cap_add="CHOWN")
    )
    done = node.run(*launch_args(node, files))
    assert done.returncode == 3
    run = next(call for call in node.docker_calls() if call[0] == "run")
    assert "-v" not in run
    assert "--cap-add=CHOWN" not in run
    assert "Disable mount volume for untrusted image" in done.stderr


def test_a_refused_command_file_exits_29_naming_the_docker_code_and_runs_nothing(node: Node) -> None:
    files = container_files(node)
    files["command"].write_text(command_text(net="overlay"))
    done = node.run(*launch_args(node, files))
    assert done.returncode == 29
    assert "docker error code=60, error message='Invalid docker network'" in done.stderr
    assert not [call for call in node.docker_calls() if call[0] == "run"]
    assert not files["pid"].exists()


def test_a_banned_user_is_refused_before_anything_is_made(node: Node) -> None:
    node.cfg.write_text(node.cfg.read_text().replace("banned.users=hdfs", "banned.users=nobody,hdfs"))
    files = container_files(node)
    files["command"].write_text(command_text())
    done = node.run(*launch_args(node, files))
    assert done.returncode == 255
    assert "Requested user nobody is banned" in done.stdout
    assert not (node.local / "usercache" / "nobody").exists()


def test_run_docker_executes_the_checked_command(node: Node) -> None:
    command = node.root / "kill.cmd"
    command.write_text(command_text(docker_command="kill", signal="TERM"))
    done = node.run("--run-docker", str(command))
    assert done.returncode == 0, done.stderr
    assert node.docker_calls() == [["kill", "--signal=TERM", CID]]


def test_inspect_and_remove_go_to_the_configured_docker(node: Node) -> None:
    inspected = node.run("--inspect-docker-container", "--format={{.State.Status}}", CID)
    assert (inspected.returncode, inspected.stdout.strip()) == (0, "running")
    removed = node.run("--remove-docker-container", CID)
    assert removed.returncode == 0
    assert node.docker_calls()[-1] == ["rm", "-f", CID]


def test_docker_operations_are_refused_when_the_module_is_disabled(node: Node) -> None:
    node.write_cfg(module__enabled="false")
    done = node.run("--inspect-docker-container", "--format={{.State.Status}}", CID)
    assert done.returncode == 32
    assert "Feature disabled: docker" in done.stderr
    assert node.docker_calls() == []


def test_initialize_container_runs_the_localizer_as_the_user_in_the_app_dir(node: Node) -> None:
    tokens = node.local / "nmPrivate" / f"{CID}.tokens"
    tokens.parent.mkdir()
    tokens.write_bytes(b"HDTS")
    localizer = ["/bin/sh", "-c", "id -u > localizer.uid"]
    done = node.run(
        "nobody", "nobody", "0", APP, CID, str(tokens), str(node.local), str(node.logs), *localizer
    )
    assert done.returncode == 0, done.stdout + done.stderr
    app_dir = node.local / "usercache" / "nobody" / "appcache" / APP
    assert (app_dir / "localizer.uid").read_text().strip() == str(nobody()[0])
    assert (app_dir / f"{CID}.tokens").read_bytes() == b"HDTS"
    user_dir = node.local / "usercache" / "nobody"
    assert stat.S_IMODE(user_dir.stat().st_mode) == 0o2750
    assert (node.logs / APP / CID).is_dir()
    # made as the user below the setgid user dir: the NodeManager's group, which then reaches a
    # recovered container's resources (in the user's own group, a restarted NM localized anew)
    nm_group = user_dir.stat().st_gid
    assert nm_group != nobody()[1]
    for made in (app_dir.parent, app_dir):
        assert (made.stat().st_uid, made.stat().st_gid) == (nobody()[0], nm_group), made
        assert stat.S_IMODE(made.stat().st_mode) == 0o2750, made


def test_signal_container_signals_the_process_group_or_says_it_is_gone(node: Node) -> None:
    sleeper = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        done = node.run("nobody", "nobody", "2", str(sleeper.pid), "15")
        assert done.returncode == 0, done.stdout
        assert sleeper.wait(timeout=10) == -15
    finally:
        sleeper.kill()
    assert node.run("nobody", "nobody", "2", str(gone_pid()), "0").returncode == 9


def test_delete_as_user_removes_the_subdirectory_under_each_base_dir(node: Node) -> None:
    doomed = node.local / "usercache" / "nobody" / "appcache" / APP
    (doomed / "x").mkdir(parents=True)
    (doomed / "x" / "file").write_text("data")
    done = node.run(
        "nobody", "nobody", "3", f"usercache/nobody/appcache/{APP}", str(node.local), str(node.logs)
    )
    assert done.returncode == 0, done.stdout
    assert not doomed.exists()
    assert (node.local / "usercache" / "nobody" / "appcache").exists()


def test_a_default_runtime_container_runs_its_script_as_the_user_and_reports_its_exit(node: Node) -> None:
    files = container_files(node)
    files["script"].write_text("#!/bin/sh\nid -u > ran.uid\nexit 7\n")
    args = launch_args(node, files)
    args[2], args[-1] = "1", "cgroups=none"  # LAUNCH_CONTAINER: resources instead of a command file
    done = node.run(*args)
    assert done.returncode == 7, done.stdout + done.stderr
    assert (files["work"] / "ran.uid").read_text().strip() == str(nobody()[0])
    assert int(files["pid"].read_text()) > 0
    assert Path(f"{files['pid']}.exitcode").read_text() == "7"
    assert node.docker_calls() == []


def test_list_as_user_prints_the_entries_of_a_directory(node: Node) -> None:
    listed = node.local / "usercache" / "nobody" / "filecache"
    (listed / "10").mkdir(parents=True)
    (listed / "11").mkdir()
    done = node.run("nobody", "nobody", "5", str(listed))
    assert done.returncode == 0
    assert sorted(done.stdout.splitlines()[-2:]) == ["10", "11"]


def test_in_entry_point_mode_docker_runs_attached_to_the_containers_log_files(node: Node) -> None:
    files = container_files(node)
    files["command"].write_text(command_text(use_entry_point="true", detach=None, launch_command=None))
    done = node.run(*launch_args(node, files))
    assert done.returncode == 3, done.stderr
    stdout = (node.logs / APP / CID / "stdout.txt").read_text()
    assert stdout.startswith("Launching docker container...\nDocker run command: ")
    assert stdout.rstrip().endswith("4f6d2c0e9b1a")  # what `docker run` printed
    assert "-d" not in next(call for call in node.docker_calls() if call[0] == "run")


def test_the_gpu_module_is_accepted_only_when_enabled_and_isolates_nothing(node: Node) -> None:
    request = ["--module-gpu", "--excluded_gpus", "0,1", "--container_id", CID]
    done = node.run(*request)
    assert (done.returncode, "device cgroups not updated" in done.stdout) == (0, True)
    assert node.run("--module-gpu", "--excluded_gpus", "0", "--container_id", "c1").returncode == 1
    node.cfg.write_text(
        node.cfg.read_text().replace("[gpu]\n  module.enabled=true", "[gpu]\n  module.enabled=false")
    )
    assert node.run(*request).returncode == 255
