"""Each lab node runs what its inventory groups say, configured as the roles promise."""

from __future__ import annotations

import os

import pytest
import testinfra.utils.ansible_runner

hosts = testinfra.utils.ansible_runner.AnsibleRunner(os.environ["MOLECULE_INVENTORY_FILE"])


def in_group(group: str) -> list[str]:
    return hosts.get_hosts(group)


@pytest.mark.parametrize("host", in_group("hdfs_namenode"), indirect=True)
def test_namenode_runs_as_hdfs_on_its_ports(host):
    assert host.service("hadoop-hdfs-namenode").is_running
    assert host.service("hadoop-hdfs-namenode").is_enabled
    assert host.process.get(comm="java", user="hdfs")
    assert host.socket("tcp://0.0.0.0:9870").is_listening or host.socket("tcp://:::9870").is_listening
    name_dir = host.file("/var/lib/hadoop/hdfs/name")
    assert name_dir.user == "hdfs"
    assert name_dir.mode == 0o700


@pytest.mark.parametrize("host", in_group("yarn_resourcemanager"), indirect=True)
def test_resourcemanager_serves_the_services_api(host):
    assert host.service("hadoop-yarn-resourcemanager").is_running
    site = host.file("/etc/hadoop/conf.resourcemanager/yarn-site.xml").content_string
    assert "yarn.webapp.api-service.enable" in site
    assert "placement-constraints.handler" in site


@pytest.mark.parametrize("host", in_group("zookeeper"), indirect=True)
def test_zookeeper_runs(host):
    assert host.service("zookeeper").is_running
    assert host.file("/var/lib/zookeeper/myid").content_string.strip() == "1"


@pytest.mark.parametrize("host", in_group("yarn_nodemanager"), indirect=True)
def test_nodemanager_and_datanode_run(host):
    assert host.service("hadoop-yarn-nodemanager").is_running
    assert host.service("hadoop-hdfs-datanode").is_running
    unit = host.file("/etc/systemd/system/hadoop-yarn-nodemanager.service").content_string
    assert "KillMode=process" in unit  # containers outlive a NodeManager restart


@pytest.mark.parametrize("host", in_group("yarn_nodemanager"), indirect=True)
def test_virtual_gpus_are_reported_as_nvidia_smi_xml(host):
    out = host.check_output("/usr/local/lib/tarn-virtual-gpu/nvidia-smi -q -x")
    assert out.count("<gpu id=") == 2
    assert "<minor_number>1</minor_number>" in out


@pytest.mark.parametrize("host", in_group("hadoop"), indirect=True)
def test_each_daemon_has_its_own_configuration(host):
    daemons = {
        "hdfs_namenode": "namenode",
        "hdfs_datanode": "datanode",
        "yarn_resourcemanager": "resourcemanager",
        "yarn_nodemanager": "nodemanager",
    }
    mine = [d for g, d in daemons.items() if host.backend.get_hostname() in in_group(g)]
    assert mine
    for daemon in mine:
        conf = host.file(f"/etc/hadoop/conf.{daemon}")
        assert conf.is_directory
        assert host.file(f"/etc/hadoop/conf.{daemon}/core-site.xml").contains("fs.defaultFS")
