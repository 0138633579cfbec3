"""The HDFS NFS roles without a host: tarn.yarn.hdfs_nfs_gateway (Hadoop's portmap and nfs3),
tarn.yarn.hdfs_nfs_mount, and what they share with tarn.yarn.hadoop (the proxy-user rule in every
core-site, the unit template's capabilities) and tarn.yarn.yarn_nodemanager (the allowed Docker
mounts, the node's model cache). Templates and defaults are rendered with Ansible's own templating;
the validate entry points run against an unreachable host, so any attempt to touch one fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.template import Templar, trust_as_template

from tests.support import ROOT
from tests.support.roles import LAB_GROUPS, ROLES, Json, defaults, templar, value

ANSIBLE_PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")


def render(role: str, name: str, t: Templar, **local: Any) -> str:
    if local:
        t = t.copy_with_new_env(available_variables={**t.available_variables, **local})
    result = t.template(trust_as_template((ROLES / role / "templates" / name).read_text()))
    assert isinstance(result, str)
    return result


def unit(daemon: str, **local: Any) -> list[str]:
    t = templar()
    text = render(
        "hadoop",
        "hadoop-daemon.service.j2",
        t,
        hadoop_daemon=daemon,
        hadoop_daemon_user="hdfs",
        hadoop_daemon_class="org.example.Main",
        hadoop_daemon_heap_mb=256,
        **local,
    )
    return text.splitlines()


# ---- the unit template shared by every daemon


def test_a_daemon_without_capabilities_or_requirements_gets_the_unit_it_had() -> None:
    lines = unit("namenode")
    lines = lines[lines.index("[Unit]") :]
    assert lines[0:4] == [
        "[Unit]",
        "Description=Apache Hadoop namenode",
        "After=network-online.target",
        "Wants=network-online.target",
    ]
    assert lines[4:8] == ["", "[Service]", "User=hdfs", "Group=hadoop"]
    assert lines[8].startswith("Environment=")
    assert not [
        line for line in lines if line.startswith(("AmbientCapabilities", "Requires", "CapabilityBounding"))
    ]


def test_portmap_binds_port_111_with_one_capability_not_as_root() -> None:
    lines = unit("portmap", hadoop_daemon_capabilities=["CAP_NET_BIND_SERVICE"])
    assert "User=hdfs" in lines
    assert "AmbientCapabilities=CAP_NET_BIND_SERVICE" in lines
    assert "CapabilityBoundingSet=CAP_NET_BIND_SERVICE" in lines
    assert not any(line.startswith("User=root") for line in lines)


def test_nfs3_starts_after_portmap_and_restarts_with_it() -> None:
    lines = unit("nfs3", hadoop_daemon_requires=["hadoop-hdfs-portmap.service"], hadoop_daemon_umask="0077")
    assert "UMask=0077" in lines
    assert "After=network-online.target hadoop-hdfs-portmap.service" in lines
    assert "Requires=hadoop-hdfs-portmap.service" in lines
    assert "Wants=network-online.target" in lines


def test_the_gateway_daemons_have_bigtops_unit_names() -> None:
    names = defaults("hadoop")["hadoop_service_names"]
    assert names["portmap"] == "hadoop-hdfs-portmap"
    assert names["nfs3"] == "hadoop-hdfs-nfs3"


# ---- the proxy-user rule in every core-site


def core_site(t: Templar) -> Json:
    site: Json = value(t, "hadoop_shared_site_files['core-site.xml']")
    return site


def test_with_a_gateway_every_core_site_lets_its_user_act_for_the_nfs_users() -> None:
    site = core_site(templar())
    assert site["hadoop.proxyuser.hdfs.hosts"] == "master"
    assert site["hadoop.proxyuser.hdfs.groups"] == "*"
    assert (
        site["hadoop.proxyuser.yarn.hosts"] == site["hadoop.proxyuser.yarn.groups"] == "*"
    )  # the RM acts for users


def test_without_a_gateway_the_hdfs_user_proxies_for_nobody() -> None:
    site = core_site(templar(groups={**LAB_GROUPS, "hdfs_nfs_gateway": []}))
    assert not [k for k in site if k.startswith("hadoop.proxyuser.hdfs.")]


def test_a_gateway_user_of_its_own_gets_the_rule_and_extra_core_site_wins() -> None:
    t = templar(
        hadoop_nfs_gateway_user="nfsserver",
        hadoop_nfs_gateway_proxy_groups="ml-team,root",
        hadoop_core_site_extra={"hadoop.proxyuser.nfsserver.hosts": "10.0.0.5"},
    )
    site = core_site(t)
    assert site["hadoop.proxyuser.nfsserver.groups"] == "ml-team,root"
    assert site["hadoop.proxyuser.nfsserver.hosts"] == "10.0.0.5"


# ---- the gateway's hdfs-site


def test_the_gateway_exports_read_only_to_the_mounting_hosts_by_default() -> None:
    site = value(templar("hdfs_nfs_gateway"), "hdfs_nfs_gateway_site")
    assert site == {
        "nfs.exports.allowed.hosts": "worker1 ro ; worker2 ro",
        "nfs.export.point": "/",
        "nfs.dump.dir": "/var/lib/hadoop/hdfs-nfs/dump",
        "nfs.port.monitoring.disabled": "false",
        "nfs.superuser": "hdfs",
    }


def test_the_gateway_site_takes_its_inputs() -> None:
    t = templar(
        "hdfs_nfs_gateway",
        hdfs_nfs_gateway_allowed_hosts=["10.89.42.0/24 ro", "admin.example.org rw"],
        hdfs_nfs_gateway_superuser="",
        hdfs_nfs_gateway_privileged_clients_only=False,
    )
    site = value(t, "hdfs_nfs_gateway_site")
    assert site["nfs.exports.allowed.hosts"] == "10.89.42.0/24 ro ; admin.example.org rw"
    assert site["nfs.port.monitoring.disabled"] == "true"
    assert "nfs.superuser" not in site


# ---- the NodeManager: allowed Docker mounts and the node cache


def ce_cfg(**inputs: Any) -> dict[str, str]:
    t = templar("yarn_nodemanager", **inputs)
    text = render("yarn_nodemanager", "container-executor.cfg.j2", t)
    docker = text.split("[docker]")[1].split("[gpu]")[0]
    return dict(line.strip().split("=", 1) for line in docker.splitlines() if "=" in line)


def test_the_nfs_mount_is_an_allowed_read_only_mount_following_its_path() -> None:
    assert "/mnt/hdfs" in ce_cfg(inventory_hostname="worker1")["docker.allowed.ro-mounts"].split(",")
    moved = ce_cfg(inventory_hostname="worker1", hdfs_nfs_mount_path="/data/hdfs")["docker.allowed.ro-mounts"]
    assert "/data/hdfs" in moved.split(",")
    assert "/mnt/hdfs" not in moved.split(",")
    # a NodeManager that mounts no HDFS: an allowed path missing there refuses every mount (exit 52)
    assert "/mnt/hdfs" not in ce_cfg(inventory_hostname="master")["docker.allowed.ro-mounts"].split(",")


def test_the_model_cache_is_an_allowed_read_write_mount_unless_disabled() -> None:
    rw = ce_cfg()["docker.allowed.rw-mounts"].split(",")
    assert rw == [
        "/var/lib/hadoop/yarn/local",
        "/var/log/hadoop/yarn-containers",
        "/var/lib/tarn/model-cache",
    ]
    assert (
        "/var/lib/tarn/model-cache"
        not in ce_cfg(yarn_nodemanager_model_cache_dir="")["docker.allowed.rw-mounts"]
    )


def test_the_model_cache_has_a_group_of_its_own_by_default() -> None:
    """Not hadoop_group, container-executor's: its members are the users containers run as."""
    assert value(templar("yarn_nodemanager"), "yarn_nodemanager_model_cache_group") == "tarn-cache"


# ---- argument specifications


@pytest.mark.parametrize("role", ["hdfs_nfs_gateway", "hdfs_nfs_mount"])
def test_every_default_is_documented_with_its_value(role: str) -> None:
    specs = yaml.safe_load((ROLES / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    main = specs["main"]["options"]
    described = " ".join(specs["main"]["description"])
    for name, default in defaults(role).items():
        if name in main:
            spec = main[name]
            if "default" in spec:
                assert spec["default"] == default, name
            else:
                assert "Jinja" in spec["description"], name
        else:
            assert f"C({name})" in described, f"{role}: {name} is neither declared nor described"
    for name, spec in specs["validate"]["options"].items():
        assert spec.get("default") == main[name].get("default"), name


# ---- ansible-playbook: the validate entry points


def validate(tmp_path: Path, role: str, extra: Json, host: str = "master") -> tuple[int, str]:
    """A role's validate entry point on a host that cannot be reached (TEST-NET-1)."""
    play = [
        {
            "name": f"Validate the {role} inputs",
            "hosts": host,
            "gather_facts": False,
            "tasks": [
                {
                    "name": "Inputs",
                    "ansible.builtin.include_role": {"name": f"tarn.yarn.{role}", "tasks_from": "validate"},
                }
            ],
        }
    ]
    (tmp_path / "validate.yml").write_text(yaml.safe_dump(play))
    inventory = {
        "all": {
            "hosts": {
                h: {"ansible_host": "192.0.2.1", "ansible_connection": "ssh"} for h in ("master", "worker1")
            },
            "children": {
                "hdfs_nfs_gateway": {"hosts": {"master": None}},
                "hdfs_nfs_mount": {"hosts": {"worker1": None}},
                "yarn_nodemanager": {"hosts": {"worker1": None}},
            },
        }
    }
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    (tmp_path / "vars.json").write_text(json.dumps(extra))
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_TIMEOUT": "5",
        "ANSIBLE_RETRY_FILES_ENABLED": "0",
    }
    proc = subprocess.run(
        [ANSIBLE_PLAYBOOK, "-i", str(tmp_path / "hosts.yml"), "-e", "@" + str(tmp_path / "vars.json"),
         str(tmp_path / "validate.yml")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    return proc.returncode, proc.stdout + proc.stderr


GOOD = [
    ("gateway defaults", "hdfs_nfs_gateway", {}, "master"),
    ("mount defaults", "hdfs_nfs_mount", {}, "worker1"),
    ("nodemanager with docker", "yarn_nodemanager", {"yarn_nodemanager_runtime": "docker"}, "worker1"),
]


@pytest.mark.parametrize(("role", "inputs", "host"), [c[1:] for c in GOOD], ids=[c[0] for c in GOOD])
def test_valid_inputs_pass_without_touching_the_host(
    tmp_path: Path, role: str, inputs: Json, host: str
) -> None:
    rc, out = validate(tmp_path, role, inputs, host)
    assert rc == 0, out
    assert "unreachable=0" in out
    assert "failed=0" in out


GATEWAY, MOUNT, NM = "hdfs_nfs_gateway", "hdfs_nfs_mount", "yarn_nodemanager"
DOCKER = {"yarn_nodemanager_runtime": "docker"}
RO = "yarn_nodemanager_docker_allowed_ro_mounts"
BAD = [
    ("no allowed hosts", GATEWAY, {"hdfs_nfs_gateway_allowed_hosts": []}, "master",
     "hdfs_nfs_gateway_allowed_hosts is empty"),
    ("two hosts in one entry", GATEWAY, {"hdfs_nfs_gateway_allowed_hosts": ["a ro; b rw"]}, "master",
     "hdfs_nfs_gateway_allowed_hosts has 'a ro; b rw'"),
    ("unknown access", GATEWAY, {"hdfs_nfs_gateway_allowed_hosts": ["10.0.0.0/8 write"]}, "master",
     "hdfs_nfs_gateway_allowed_hosts has"),
    ("relative export", GATEWAY, {"hdfs_nfs_gateway_export_point": "user"}, "master",
     "hdfs_nfs_gateway_export_point"),
    ("portmap heap", GATEWAY, {"hdfs_nfs_gateway_portmap_heap_mb": "lots"}, "master",
     "hdfs_nfs_gateway_portmap_heap_mb"),
    ("no gateway", MOUNT, {"hdfs_nfs_mount_gateway": ""}, "worker1",
     "hdfs_nfs_mount_gateway is empty"),
    ("relative mount path", MOUNT, {"hdfs_nfs_mount_path": "mnt/hdfs"}, "worker1",
     "hdfs_nfs_mount_path is 'mnt/hdfs'"),
    ("locking", MOUNT, {"hdfs_nfs_mount_options": ["vers=3", "proto=tcp"]}, "worker1",
     "need vers=3 and nolock"),
    ("NFSv4", MOUNT, {"hdfs_nfs_mount_options": ["vers=4", "nolock"]}, "worker1",
     "need vers=3 and nolock"),
    ("unknown state", MOUNT, {"hdfs_nfs_mount_state": "unmounted"}, "worker1",
     "hdfs_nfs_mount_state"),
    ("mount not allowed in docker", NM, {**DOCKER, RO: ["/etc/passwd"]},
     "worker1", "yarn_nodemanager_docker_allowed_ro_mounts lacks /mnt/hdfs"),
    ("moved mount not allowed", NM,
     {**DOCKER, "hdfs_nfs_mount_path": "/data/hdfs", RO: ["/mnt/hdfs"]},
     "worker1", "yarn_nodemanager_docker_allowed_ro_mounts lacks /data/hdfs"),
    ("relative cache", NM, {"yarn_nodemanager_model_cache_dir": "cache"}, "worker1",
     "yarn_nodemanager_model_cache_dir is 'cache'"),
]  # fmt: skip


@pytest.mark.parametrize(("role", "inputs", "host", "named"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_inputs_fail_naming_the_variable_before_touching_the_host(
    tmp_path: Path, role: str, inputs: Json, host: str, named: str
) -> None:
    rc, out = validate(tmp_path, role, inputs, host)
    assert rc != 0
    assert named in out, out
    assert "unreachable=0" in out, out
