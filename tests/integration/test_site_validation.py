"""Bad inventory input stops site.yml in its first play, naming the variable, before any change.

The inventory points at containers that do not exist: had validation let the play through,
the next play would fail as unreachable instead of with the expected message.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAB_VARS = ROOT / "inventories" / "lab" / "group_vars" / "all.yml"


def inventory(groups: dict[str, list[str]]) -> dict[str, Any]:
    hosts = sorted({h for members in groups.values() for h in members})
    return {
        "all": {
            "vars": {"ansible_connection": "containers.podman.podman"},
            "hosts": {h: {"ansible_host": f"tarn-absent-{h}"} for h in hosts},
            "children": {
                **{g: {"hosts": dict.fromkeys(m)} for g, m in groups.items()},
                "hadoop": {
                    "children": dict.fromkeys(
                        ["hdfs_namenode", "hdfs_datanode", "yarn_resourcemanager", "yarn_nodemanager"]
                    )
                },
            },
        }
    }


LAB_GROUPS = {
    "zookeeper": ["master"],
    "hdfs_namenode": ["master"],
    "yarn_resourcemanager": ["master"],
    "hdfs_datanode": ["worker1", "worker2"],
    "yarn_nodemanager": ["worker1", "worker2"],
}


def run_site(
    tmp_path: Path, groups: dict[str, list[str]], extra: dict[str, Any], secure: bool = False
) -> tuple[int, str]:
    inv_dir = tmp_path / "inventory"
    (inv_dir / "group_vars").mkdir(parents=True)
    (inv_dir / "hosts.yml").write_text(json.dumps(inventory(groups)))
    (inv_dir / "group_vars" / "all.yml").write_text(LAB_VARS.read_text())
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_NOCOLOR": "1",
        "TARN_LAB_SECURE": "true" if secure else "false",  # the lab inventory's Kerberos switch
    }
    archive = tmp_path / "hadoop.tar.gz"
    archive.write_bytes(b"")  # a file exists, so only the input under test is wrong
    env["TARN_HADOOP_ARCHIVE"] = str(archive)
    proc = subprocess.run(
        [
            "ansible-playbook",
            "-i",
            str(inv_dir),
            str(ROOT / "playbooks" / "site.yml"),
            "-e",
            json.dumps(extra),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    return proc.returncode, proc.stdout + proc.stderr


def without(group: str) -> dict[str, list[str]]:
    return {**LAB_GROUPS, group: []}


WITH_KNOX = {**LAB_GROUPS, "knox": ["edge"]}
# files that exist, so that only the input under test is wrong
KNOX_FILES = {"knox_archive": str(ROOT / "galaxy.yml"), "knox_plugin_jar": str(ROOT / "galaxy.yml")}


CASES = [
    ("missing archive", LAB_GROUPS, {"hadoop_archive": "/nonexistent/hadoop-3.4.2.tar.gz"}, "hadoop_archive"),
    (
        "negative GPU count",
        LAB_GROUPS,
        {"yarn_nodemanager_virtual_gpus": -1},
        "yarn_nodemanager_virtual_gpus",
    ),
    (
        "GPU count not a number",
        LAB_GROUPS,
        {"yarn_nodemanager_virtual_gpus": "two"},
        "yarn_nodemanager_virtual_gpus",
    ),
    ("no ResourceManager group", without("yarn_resourcemanager"), {}, "hadoop_resourcemanager_host"),
    ("no NameNode group", without("hdfs_namenode"), {}, "hadoop_namenode_host"),
    ("no ZooKeeper group", without("zookeeper"), {}, "hadoop_zookeeper_quorum"),
    ("unknown install mode", LAB_GROUPS, {"hadoop_install_mode": "rpm"}, "hadoop_install_mode"),
    ("unknown runtime", LAB_GROUPS, {"yarn_nodemanager_runtime": "podman"}, "yarn_nodemanager_runtime"),
    ("negative heap", LAB_GROUPS, {"hadoop_heap_mb": -5}, "hadoop_heap_mb"),
    ("zero NodeManager memory", LAB_GROUPS, {"yarn_nodemanager_memory_mb": 0}, "yarn_nodemanager_memory_mb"),
    (
        "AM share above 1",
        LAB_GROUPS,
        {"yarn_resourcemanager_max_am_percent": 3},
        "yarn_resourcemanager_max_am_percent",
    ),
    ("bad ZooKeeper port", LAB_GROUPS, {"zookeeper_client_port": 70000}, "zookeeper_client_port"),
    ("no Knox master secret", WITH_KNOX, {**KNOX_FILES, "knox_master_secret": ""}, "knox_master_secret"),
    (
        "bad ZooKeeper ensemble for Knox",
        WITH_KNOX,
        {**KNOX_FILES, "knox_zookeeper_ensemble": "master:two"},
        "knox_zookeeper_ensemble",
    ),
]


# A secure inventory: files that exist for the keystores, so that only the input under test is wrong.
TLS = {
    "hadoop_tls_keystore_src": str(ROOT / "galaxy.yml"),
    "hadoop_tls_truststore_src": str(ROOT / "galaxy.yml"),
    "hadoop_tls_keystore_password": "x" * 12,
    "hadoop_tls_truststore_password": "x" * 12,
}
SECURE_CASES = [
    ("realm in lower case", {**TLS, "kerberos_realm": "tarn.lab"}, "kerberos_realm"),
    (
        "daemon principal without _HOST",
        {**TLS, "hadoop_principals": {"namenode": "nn@TARN.LAB"}},
        "hadoop_principals.namenode",
    ),
    ("no keystore", {**TLS, "hadoop_tls_keystore_src": "/nonexistent/master.p12"}, "hadoop_tls_keystore_src"),
    ("no keystore password", {**TLS, "hadoop_tls_keystore_password": ""}, "hadoop_tls_keystore_password"),
    (
        "operator keytabs missing",
        {**TLS, "kerberos_client_keytab_source": "files", "kerberos_client_keytab_files_dir": str(ROOT)},
        "hdfs.service.keytab is missing or unreadable",
    ),
]


@pytest.mark.parametrize(
    ("extra", "variable"), [c[1:] for c in SECURE_CASES], ids=[c[0] for c in SECURE_CASES]
)
def test_bad_kerberos_input_fails_early_naming_the_variable(
    tmp_path: Path, extra: dict[str, Any], variable: str
) -> None:
    rc, output = run_site(tmp_path, LAB_GROUPS, extra, secure=True)
    assert rc != 0
    assert variable in output, output[-3000:]
    assert "UNREACHABLE" not in output, "validation let the play reach a host"
    assert "PLAY [Kerberos KDC]" not in output, "site.yml went past its validation play"


@pytest.mark.parametrize(("groups", "extra", "variable"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_fails_early_naming_the_variable(
    tmp_path: Path, groups: dict[str, list[str]], extra: dict[str, Any], variable: str
) -> None:
    rc, output = run_site(tmp_path, groups, extra)
    assert rc != 0
    assert variable in output, output[-3000:]
    assert "UNREACHABLE" not in output, "validation let the play reach a host"
    assert "PLAY [ZooKeeper]" not in output, "site.yml went past its validation play"
