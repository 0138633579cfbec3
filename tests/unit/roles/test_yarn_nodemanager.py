"""tarn.yarn.yarn_nodemanager and the three defects a real container-executor showed on its nodes
(issue 34), each shown on the old settings and on the new ones:

2. every allowed Docker mount must exist on the node, or container-executor refuses every container
   that has a mount (exit 52): the NFS mount is allowed only where tarn.yarn.hdfs_nfs_mount mounts it,
   and the role fails, naming the variable, on an allowed path the node lacks;
3. an allowed runtime the Docker engine does not know fails every container asking for it: nvidia is
   allowed by default only with GPUs, and the role checks `docker info`;
4. the model cache belonged to hadoop_group, the group that may run the setuid container-executor,
   while the LinuxContainerExecutor runs containers as nobody or the submitting user, never yarn: it
   has a group of its own, its users are put in it, and a user in hadoop_group is refused.

The variables and the rendered container-executor.cfg are checked with Ansible's own templating and
the lab's stand-in for container-executor; the role's host checks (tasks/node_checks.yml, read only)
run with ansible-playbook on this machine, against paths under a temporary directory and a fake
docker client.
"""

from __future__ import annotations

import grp
import json
import os
import posixpath
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tarn.stdlib.launcher import cache
from tests.support import ROOT
from tests.support.container_executor import stand_in
from tests.support.roles import container_executor_cfg, node_value

ce = stand_in()

ANSIBLE_PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")
ROLE = ROOT / "roles" / "yarn_nodemanager"
NFS = {"hdfs_nfs_mount": ["worker1"]}
DOCKER = {"yarn_nodemanager_runtime": "docker"}
# What the role's defaults were before issue 34.
OLD_RO_MOUNTS = ["/sys/fs/cgroup", "/etc/passwd", "/etc/group", "/mnt/hdfs"]
OLD_RUNTIMES = ["runc", "nvidia"]
OLD_CACHE_GROUP = "hadoop"
ENGINE_RUNTIMES = ["runc", "io.containerd.runc.v2"]  # what a Docker engine without the NVIDIA toolkit knows


# ---- defect 2: an allowed mount missing on the node


def test_the_nfs_mount_is_allowed_only_where_it_is_mounted() -> None:
    expression = "yarn_nodemanager_docker_allowed_ro_mounts"
    assert "/mnt/hdfs" in node_value(expression, groups=NFS)
    assert "/data/hdfs" in node_value(expression, groups=NFS, hdfs_nfs_mount_path="/data/hdfs")
    assert node_value(expression, groups={}) == [
        "/sys/fs/cgroup",
        "/etc/passwd",
        "/etc/group",
        "/etc/hadoop",
        "/etc/ssl/certs",
    ]


def node_without(missing: str) -> Any:
    """A node where every absolute path exists but ``missing`` and what is below it."""

    def realpath(path: str) -> str | None:
        path = posixpath.normpath(path)
        return None if path == missing or path.startswith(missing + "/") else path

    return ce.DockerHost(
        config_path="/opt/hadoop/etc/hadoop/container-executor.cfg",
        realpath=realpath,
        is_dir=lambda path: realpath(path) is not None,
        network_driver={"host": "host"}.get,
        may_run_privileged=lambda user: False,
    )


@pytest.mark.parametrize(("settings", "code"), [("old", ce.Exit.MOUNT_ACCESS_ERROR), ("new", None)])
def test_a_node_without_the_nfs_mount_runs_containers_with_mounts(settings: str, code: int | None) -> None:
    """A NodeManager that is not an NFS client (no /mnt/hdfs): with the old default every container
    with a mount (here the model cache) was refused; now it runs."""
    old = {"yarn_nodemanager_docker_allowed_ro_mounts": OLD_RO_MOUNTS} if settings == "old" else {}
    cfg = ce.parse_config(container_executor_cfg(**DOCKER, groups={}, **old))
    command = ce.parse_config(
        "[docker-command-execution]\n  image=nvcr.io/nvidia/tritonserver:24.08-py3\n"
        "  mounts=/var/lib/tarn/model-cache:/var/lib/tarn/model-cache:rw\n"
    )
    if code is None:
        flags, notes = ce.mount_flags(command, cfg, node_without("/mnt/hdfs"))
        assert flags == ["-v", "/var/lib/tarn/model-cache:/var/lib/tarn/model-cache:rw"]
        assert notes == []
    else:
        with pytest.raises(ce.DockerRefusal) as refused:
            ce.mount_flags(command, cfg, node_without("/mnt/hdfs"))
        assert refused.value.code == code


# ---- defect 3: a runtime the Docker engine does not know


@pytest.mark.parametrize(("gpus", "runtimes"), [(True, ["runc", "nvidia"]), (False, ["runc"])])
def test_nvidia_is_allowed_by_default_only_with_gpus(gpus: bool, runtimes: list[str]) -> None:
    assert (
        node_value("yarn_nodemanager_docker_allowed_runtimes", yarn_nodemanager_gpu_enabled=gpus) == runtimes
    )
    cfg = ce.parse_config(container_executor_cfg(**DOCKER, yarn_nodemanager_gpu_enabled=gpus))
    assert cfg.values("docker.allowed.runtimes", "docker") == runtimes
    site = node_value("yarn_nodemanager_site_docker", yarn_nodemanager_gpu_enabled=gpus)
    assert site["yarn.nodemanager.runtime.linux.docker.allowed-container-runtimes"] == ",".join(runtimes)


def test_a_stopped_docker_container_is_removed_only_after_its_launch_read_the_exit_code() -> None:
    """YARN 3.4 removes a stopped Docker container as soon as it has exited, while the launch still
    reads its exit code (container-executor's inspections, 3 s apart): a container that ended within
    a second of the stop (the controller) made the launch wait out every inspection, 28 s (CI25)."""
    site = node_value("yarn_nodemanager_site_docker")
    cfg = ce.parse_config(container_executor_cfg(**DOCKER))
    inspections_s = ce.inspect_retries(cfg) * ce.INSPECT_RETRY_SLEEP_S
    assert int(site["yarn.nodemanager.delete.debug-delay-sec"]) > inspections_s


# ---- defect 4: the model cache's group and users


def test_the_cache_has_a_group_of_its_own() -> None:
    assert node_value("yarn_nodemanager_model_cache_group") == "tarn-cache"
    assert node_value("yarn_nodemanager_model_cache_group") != node_value("hadoop_group")


@pytest.mark.parametrize(
    ("runtime", "secure", "users"),
    [
        ("default", False, ["yarn"]),
        ("default", True, ["yarn"]),
        ("docker", False, ["nobody"]),
        ("docker", True, []),
    ],
)
def test_the_cache_users_are_who_containers_run_as(runtime: str, secure: bool, users: list[str]) -> None:
    realm = {"hadoop_kerberos_realm": "EXAMPLE.COM"} if secure else {}
    found = node_value("yarn_nodemanager_model_cache_users", yarn_nodemanager_runtime=runtime, **realm)
    assert found == users


def may_write(mode: int, owner: str, group: str, user: str, groups: set[str]) -> bool:
    """POSIX: the owner's bits, else the group's, else the others'."""
    if user == owner:
        return bool(mode & stat.S_IWUSR)
    if group in groups:
        return bool(mode & stat.S_IWGRP)
    return bool(mode & stat.S_IWOTH)


@pytest.mark.parametrize("settings", ["old", "new"])
def test_the_user_containers_run_as_under_the_linux_container_executor_may_write_the_cache(
    settings: str,
) -> None:
    """Non-secure LinuxContainerExecutor: every container runs as the local user (nobody), whom the
    stand-in accepts; yarn, the cache's owner and the old group's member, may not run containers."""
    old = settings == "old"
    cfg = ce.parse_config(container_executor_cfg(**DOCKER))
    local_user = node_value("yarn_nodemanager_nonsecure_local_user")
    assert ce.user_problem(local_user, ce.Account(local_user, 65534, 65534), cfg) is None
    assert ce.user_problem("yarn", ce.Account("yarn", 1003, 1003), cfg) == "Requested user yarn is banned"
    group = OLD_CACHE_GROUP if old else node_value("yarn_nodemanager_model_cache_group")
    members = set() if old else set(node_value("yarn_nodemanager_model_cache_users", **DOCKER))
    groups = {"nogroup"} | ({group} if local_user in members else set())
    assert may_write(cache.DIR_MODE, "yarn", group, local_user, groups) is (not old)


def test_the_role_makes_the_cache_with_the_launchers_mode() -> None:
    """The launcher makes the cache's directories with the role's mode: setgid, group-writable, and
    no sticky bit (a stager evicts and sweeps files another member's stager wrote)."""
    tasks = yaml.safe_load((ROLE / "tasks" / "main.yml").read_text())
    made = next(t for t in tasks if t.get("name") == "Model cache directory")["ansible.builtin.file"]
    assert int(made["mode"], 8) == cache.DIR_MODE == 0o2770
    assert made["group"] == "{{ yarn_nodemanager_model_cache_group }}"


# ---- the role's host checks, on this machine (read only)


def run_role(
    tmp_path: Path,
    tasks_from: str,
    extra: dict[str, Any],
    groups: dict[str, list[str]] | None = None,
    check: bool = False,
) -> tuple[int, str]:
    """An entry point of the role on this machine (worker1, connection local); rc and output."""
    role = {"name": "tarn.yarn.yarn_nodemanager", "tasks_from": tasks_from}
    play = [{"name": "NodeManager", "hosts": "worker1", "gather_facts": False,
             "tasks": [{"name": "Checks", "ansible.builtin.include_role": role}]}]  # fmt: skip
    inventory = {"all": {
        "hosts": {"worker1": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}},
        "children": {name: {"hosts": dict.fromkeys(hosts)} for name, hosts in (groups or {}).items()},
    }}  # fmt: skip
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    (tmp_path / "vars.json").write_text(json.dumps(extra))
    env = {**os.environ, "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_RETRY_FILES_ENABLED": "0"}  # fmt: skip
    argv = [ANSIBLE_PLAYBOOK, "-i", str(tmp_path / "hosts.yml"), "-e", "@" + str(tmp_path / "vars.json"),
            str(tmp_path / "play.yml"), *(["--check"] if check else [])]  # fmt: skip
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180, check=False)
    return done.returncode, done.stdout + done.stderr


def fake_docker(tmp_path: Path, runtimes: list[str] | None) -> str:
    """A docker client that answers `info --format {{json .Runtimes}}` (None: the engine is down)."""
    path = tmp_path / "docker"
    if runtimes is None:
        path.write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n")
    else:
        answer = json.dumps({name: {"path": name} for name in runtimes})
        path.write_text(f"#!/bin/sh\n[ \"$1 $2\" = 'info --format' ] || exit 2\necho '{answer}'\n")
    path.chmod(0o755)
    return str(path)


def container_executor(tmp_path: Path, mode: int = 0o750, name: str = "container-executor") -> str:
    """A file where the role looks for container-executor (its contents are not run), owned by this
    user and group: the node below names that group as the NodeManager's (hadoop_group)."""
    path = tmp_path / name
    path.write_text("")
    path.chmod(mode)
    return str(path)


def node(tmp_path: Path, runtimes: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    """A docker NodeManager on this machine: the hadoop role's variables, nobody as the cache's user,
    container-executor installed as Hadoop requires (root-owned, the group's, nothing for others)."""
    conf_root = tmp_path / "etc-hadoop"  # the hadoop role's configuration root, an allowed mount
    conf_root.mkdir(exist_ok=True)
    return {
        "hadoop_group": grp.getgrgid(os.getgid()).gr_name, "hadoop_yarn_user": "yarn", "hadoop_secure": False,
        "hadoop_conf_root": str(conf_root),
        "hadoop_manage_services": True,
        "yarn_nodemanager_runtime": "docker",
        "yarn_nodemanager_docker_binary": fake_docker(tmp_path, runtimes or ENGINE_RUNTIMES),
        "yarn_nodemanager_container_executor_path": container_executor(tmp_path),
        "yarn_nodemanager_model_cache_users": ["nobody"], **extra,
    }  # fmt: skip


@pytest.mark.parametrize(("state", "fault"), [("missing", "does not exist"), ("0755", "mode 0755")])
def test_a_container_executor_hadoop_would_refuse_fails_naming_the_variable(
    tmp_path: Path, state: str, fault: str
) -> None:
    """The NodeManager would not start: no binary, or one that others may run (exit 22)."""
    binary = (
        str(tmp_path / "absent")
        if state == "missing"
        else container_executor(tmp_path, 0o755, "runnable-by-all")
    )
    extra = node(
        tmp_path, yarn_nodemanager_container_executor_path=binary, yarn_nodemanager_gpu_enabled=False
    )
    rc, out = run_role(tmp_path, "node_checks", extra)
    assert rc != 0
    assert f"yarn_nodemanager_container_executor_path {binary}" in out
    assert fault in out
    assert "mode\n6050" in out or "mode 6050" in out


def test_a_docker_node_with_what_it_allows_passes_in_check_mode_too(tmp_path: Path) -> None:
    hdfs = tmp_path / "hdfs"
    hdfs.mkdir()
    extra = node(
        tmp_path, ["runc", "nvidia"], hdfs_nfs_mount_path=str(hdfs), yarn_nodemanager_gpu_enabled=True
    )
    for check in (False, True):
        rc, out = run_role(
            tmp_path, "node_checks", extra, groups={"hdfs_nfs_mount": ["worker1"]}, check=check
        )
        assert rc == 0, out
        assert "changed=0" in out


@pytest.mark.parametrize(("settings", "fails"), [("old", True), ("new", False)])
def test_an_allowed_mount_the_node_lacks_fails_naming_the_variable(
    tmp_path: Path, settings: str, fails: bool
) -> None:
    """Defect 2 on a node that does not mount HDFS: the old default allowed /mnt/hdfs anyway."""
    missing = str(tmp_path / "not-mounted")
    ro = {"yarn_nodemanager_docker_allowed_ro_mounts": ["/etc/passwd", missing]} if settings == "old" else {}
    settings_of_node = node(tmp_path, hdfs_nfs_mount_path=missing, yarn_nodemanager_gpu_enabled=False, **ro)
    rc, out = run_role(tmp_path, "node_checks", settings_of_node)
    if not fails:
        assert rc == 0, out
        return
    assert rc != 0
    assert (
        f"yarn_nodemanager_docker_allowed_ro_mounts has {missing}, which does not exist on this node" in out
    )
    assert "exit 52" in out
    assert "Mount HDFS there (tarn.yarn.hdfs_nfs_mount on this host)" in out


def test_a_missing_read_write_mount_names_its_list(tmp_path: Path) -> None:
    missing = str(tmp_path / "scratch")
    extra = node(
        tmp_path, yarn_nodemanager_gpu_enabled=False, yarn_nodemanager_docker_allowed_rw_mounts=[missing]
    )
    rc, out = run_role(tmp_path, "node_checks", extra)
    assert rc != 0
    assert f"yarn_nodemanager_docker_allowed_rw_mounts has {missing}, which does not exist" in out


@pytest.mark.parametrize(
    ("gpus", "runtimes", "allowed", "fails"),
    [
        (True, ["runc"], OLD_RUNTIMES, True),  # the old default on a node whose engine has no nvidia
        (False, ["runc"], None, False),  # the new default there
        (True, ["runc", "nvidia"], None, False),  # a GPU node with the NVIDIA Container Toolkit
        (True, ["runc"], None, True),  # GPUs enabled, no toolkit
    ],
)
def test_an_allowed_runtime_the_engine_does_not_know_fails_naming_the_variable(
    tmp_path: Path, gpus: bool, runtimes: list[str], allowed: list[str] | None, fails: bool
) -> None:
    extra = node(tmp_path, runtimes, yarn_nodemanager_gpu_enabled=gpus)
    if allowed is not None:
        extra["yarn_nodemanager_docker_allowed_runtimes"] = allowed
    rc, out = run_role(tmp_path, "node_checks", extra)
    if not fails:
        assert rc == 0, out
        return
    assert rc != 0
    assert "yarn_nodemanager_docker_allowed_runtimes has nvidia, which the\nDocker engine" in out or (
        "yarn_nodemanager_docker_allowed_runtimes has nvidia, which the Docker engine" in out
    ), out
    assert "NVIDIA Container Toolkit" in out


@pytest.mark.parametrize("managed", [True, False], ids=["services managed", "render only"])
def test_a_docker_engine_that_does_not_answer_fails_naming_the_binary(tmp_path: Path, managed: bool) -> None:
    """Render only (hadoop_manage_services: false) leaves the services, the Docker engine too, alone."""
    extra = {**node(tmp_path), "yarn_nodemanager_docker_binary": fake_docker(tmp_path, None)}
    rc, out = run_role(tmp_path, "node_checks", {**extra, "hadoop_manage_services": managed})
    if not managed:
        assert rc == 0, out
        return
    assert rc != 0
    assert "Cannot connect to the Docker daemon" in out
    assert "yarn_nodemanager_docker_binary" in out


@pytest.mark.parametrize(
    ("users", "hadoop_group", "named"),
    [
        (["root"], "root", "yarn_nodemanager_model_cache_users has 'root', a member of root"),
        (["nobody", "tarn-no-such-user"], "hadoop",
         "yarn_nodemanager_model_cache_users has 'tarn-no-such-user', which is no user"),
        ([], "hadoop", "yarn_nodemanager_model_cache_users is empty"),
    ],
)  # fmt: skip
def test_a_cache_user_in_container_executors_group_or_unknown_is_refused(
    tmp_path: Path, users: list[str], hadoop_group: str, named: str
) -> None:
    extra = node(tmp_path, yarn_nodemanager_gpu_enabled=False, yarn_nodemanager_model_cache_users=users,
                 hadoop_group=hadoop_group)  # fmt: skip
    rc, out = run_role(tmp_path, "node_checks", extra)
    assert rc != 0
    assert named in " ".join(out.split()), out


def test_the_process_runtime_may_keep_yarn_in_the_cache_group(tmp_path: Path) -> None:
    """DefaultContainerExecutor: containers run as yarn, a member of hadoop_group; no container-executor."""
    extra = node(tmp_path, yarn_nodemanager_runtime="default", yarn_nodemanager_model_cache_users=["root"],
                 hadoop_group="root")  # fmt: skip
    rc, out = run_role(tmp_path, "node_checks", extra)
    assert rc == 0, out


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"yarn_nodemanager_model_cache_group": "hadoop"}, "yarn_nodemanager_model_cache_group is 'hadoop'"),
        ({**DOCKER, "yarn_nodemanager_site_extra": {
            "yarn.nodemanager.runtime.linux.docker.capabilities": "CHOWN,SYS_ADMIN"}}, "lacks SYS_ADMIN"),
    ],
)  # fmt: skip
def test_validate_refuses_the_old_cache_group_and_unallowed_capabilities(
    tmp_path: Path, extra: dict[str, Any], named: str
) -> None:
    rc, out = run_role(tmp_path, "validate", extra)
    assert rc != 0
    assert named in " ".join(out.split()), out


def test_validate_passes_the_defaults_with_docker(tmp_path: Path) -> None:
    rc, out = run_role(tmp_path, "validate", {**DOCKER, "yarn_nodemanager_site_extra": {
        "yarn.nodemanager.runtime.linux.docker.capabilities": "CHOWN,SETUID"}})  # fmt: skip
    assert rc == 0, out
