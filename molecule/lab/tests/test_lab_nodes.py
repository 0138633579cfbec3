"""Each lab node runs what its inventory groups say, configured as the roles promise."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import testinfra
import testinfra.utils.ansible_runner

# The scenario's inventory directory holds the lab's hosts.yml and group_vars (linked).
INVENTORY = str(Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "inventory")
RUNNER = testinfra.utils.ansible_runner.AnsibleRunner(INVENTORY)


def hosts_in(group: str) -> list[testinfra.host.Host]:
    """The group's nodes, each reached with ``podman exec`` into its container (the inventory's
    ansible_host): through Ansible, every check was a module run, 2.5 minutes for this file."""
    names = RUNNER.get_hosts(group)
    assert names, f"inventory group {group!r} is empty: the test would check nothing"
    return [testinfra.get_host(f"podman://{RUNNER.get_variables(name)['ansible_host']}") for name in names]


def test_namenode_runs_as_hdfs_with_a_private_name_dir():
    for host in hosts_in("hdfs_namenode"):
        service = host.service("hadoop-hdfs-namenode")
        assert service.is_running
        assert service.is_enabled
        assert host.process.filter(user="hdfs", comm="java")
        name_dir = host.file("/var/lib/hadoop/hdfs/name")
        assert name_dir.user == "hdfs"
        assert name_dir.mode == 0o700


def test_resourcemanager_serves_the_services_api():
    for host in hosts_in("yarn_resourcemanager"):
        assert host.service("hadoop-yarn-resourcemanager").is_running
        site = host.file("/etc/hadoop/conf.resourcemanager/yarn-site.xml").content_string
        assert "<name>yarn.webapp.api-service.enable</name>" in site
        assert "<name>yarn.resourcemanager.placement-constraints.handler</name>" in site


def test_zookeeper_runs_with_its_id():
    for index, host in enumerate(hosts_in("zookeeper"), start=1):
        assert host.service("zookeeper").is_running
        assert host.file("/var/lib/zookeeper/myid").content_string.strip() == str(index)


def test_workers_run_a_nodemanager_and_a_datanode():
    for host in hosts_in("yarn_nodemanager"):
        assert host.service("hadoop-yarn-nodemanager").is_running
        assert host.service("hadoop-hdfs-datanode").is_running
        unit = host.file("/etc/systemd/system/hadoop-yarn-nodemanager.service").content_string
        assert "KillMode=process" in unit  # containers outlive a NodeManager restart


def test_virtual_gpus_are_reported_as_nvidia_smi_xml():
    for host in hosts_in("yarn_nodemanager"):
        out = host.check_output("/usr/local/lib/tarn-virtual-gpu/nvidia-smi -q -x")
        assert out.count("<gpu id=") == 2
        assert "<minor_number>1</minor_number>" in out


def test_each_daemon_has_its_own_configuration_directory():
    daemons = {
        "hdfs_namenode": "namenode",
        "hdfs_datanode": "datanode",
        "yarn_resourcemanager": "resourcemanager",
        "yarn_nodemanager": "nodemanager",
    }
    for group, daemon in daemons.items():
        for host in hosts_in(group):
            assert host.file(f"/etc/hadoop/conf.{daemon}/core-site.xml").contains("fs.defaultFS")
            assert host.file(f"/etc/hadoop/conf.{daemon}/log4j.properties").exists


def test_edge_runs_haproxy_its_sync_and_activator_with_an_admin_socket():
    for host in hosts_in("haproxy"):
        for unit in ("haproxy", "tarn-haproxy-sync", "tarn-activator"):
            assert host.service(unit).is_running, unit
            assert host.service(unit).is_enabled, unit
        assert host.run("haproxy -c -f /etc/haproxy/haproxy.cfg").rc == 0
        socket = host.file("/var/run/haproxy.sock")
        assert socket.is_socket
        assert socket.mode == 0o660
        # Both run tarn.pyz from the sync's directory (/opt/tarn/haproxy-sync): told apart by the subcommand.
        processes = host.process.filter(user="tarn-haproxy-sync")
        for command in ("haproxy-sync", "activator"):
            running = [p for p in processes if f"tarn.pyz {command} " in p.args]
            assert len(running) == 1, (command, [p.args for p in processes])
            assert (
                "--token" not in running[0].args.split()
            )  # a token goes in a file, never on the command line
        assert host.run("curl -fsS http://127.0.0.1:8098/health").rc == 0


def test_the_nfs_gateway_runs_portmap_and_nfs3_as_hdfs_not_root():
    for host in hosts_in("hdfs_nfs_gateway"):
        for unit in ("hadoop-hdfs-portmap", "hadoop-hdfs-nfs3"):
            assert host.service(unit).is_running, unit
            assert host.service(unit).is_enabled, unit
        portmap = host.file("/etc/systemd/system/hadoop-hdfs-portmap.service").content_string
        assert "User=hdfs" in portmap
        assert "AmbientCapabilities=CAP_NET_BIND_SERVICE" in portmap
        nfs3 = host.file("/etc/systemd/system/hadoop-hdfs-nfs3.service").content_string
        assert "Requires=hadoop-hdfs-portmap.service" in nfs3
        assert "UMask=0077" in nfs3  # nfs3 makes its dump directory again at each start
        assert "AmbientCapabilities" not in nfs3  # 2049 and 4242 need no privilege
        for main_class in ("org.apache.hadoop.portmap.Portmap", "org.apache.hadoop.hdfs.nfs.nfs3.Nfs3"):
            running = [p for p in host.process.filter(comm="java") if main_class in p.args]
            assert [p.user for p in running] == ["hdfs"], main_class
        for port in ("tcp://111", "udp://111", "tcp://2049", "tcp://4242"):  # any address
            assert host.socket(port).is_listening, port
        site = host.file("/etc/hadoop/conf.nfs3/hdfs-site.xml").content_string
        assert "<name>nfs.exports.allowed.hosts</name>" in site
        dump = host.file("/var/lib/hadoop/hdfs-nfs/dump")
        assert (dump.user, dump.mode) == ("hdfs", 0o700)
        assert host.run("systemctl is-enabled rpcbind.socket").stdout.strip() == "masked"


def test_the_namenode_lets_the_gateway_user_act_for_nfs_users():
    for host in hosts_in("hdfs_namenode"):
        core = host.file("/etc/hadoop/conf.namenode/core-site.xml").content_string
        assert "<name>hadoop.proxyuser.hdfs.hosts</name>" in core
        assert "<name>hadoop.proxyuser.hdfs.groups</name>" in core


def test_nodemanagers_have_the_nfs_mount_in_fstab_and_a_model_cache():
    for host in hosts_in("hdfs_nfs_mount"):
        assert host.package("nfs-common").is_installed
        entries = [line.split() for line in host.file("/etc/fstab").content_string.splitlines()]
        [entry] = [e for e in entries if len(e) >= 4 and e[1] == "/mnt/hdfs"]
        assert entry[:3] == ["master:/", "/mnt/hdfs", "nfs"]
        assert {"vers=3", "proto=tcp", "nolock", "noacl", "sync", "noauto"} <= set(entry[3].split(","))
        assert host.file("/mnt/hdfs").is_directory
    for host in hosts_in("yarn_nodemanager"):
        cache = host.file("/var/lib/tarn/model-cache")
        assert cache.is_directory
        # a group of its own (issue 34): container-executor's group must hold no application user
        assert (cache.user, cache.group, cache.mode) == ("yarn", "tarn-cache", 0o2770)
        # the user containers run as: yarn (process runtime), tarn or nobody (LinuxContainerExecutor)
        assert "tarn-cache" in host.user(container_user(host)).groups
        # and can reach it: `make lab` converged Docker first, whose role left /var/lib/tarn 0700
        assert host.run(f"runuser -u {container_user(host)} -- test -w /var/lib/tarn/model-cache").rc == 0


def runs_docker(host: testinfra.host.Host) -> bool:
    """Whether the NodeManager runs YARN's LinuxContainerExecutor (TARN_LAB_DOCKER=true)."""
    site = host.file("/etc/hadoop/conf.nodemanager/yarn-site.xml").content_string
    return "LinuxContainerExecutor" in site


def container_user(host: testinfra.host.Host) -> str:
    if not runs_docker(host):
        return "yarn"
    core_site = host.file("/etc/hadoop/conf.nodemanager/core-site.xml").content_string
    return "tarn" if "<value>kerberos</value>" in core_site else "nobody"


def test_a_docker_lab_runs_the_linux_container_executor_with_its_engine_and_image():
    for host in hosts_in("yarn_nodemanager"):
        if not runs_docker(host):
            pytest.skip("the lab runs the DefaultContainerExecutor (TARN_LAB_DOCKER=true runs Docker)")
        wrapper = host.file("/usr/local/lib/tarn-lab/bin/container-executor")  # the lab's stand-in
        assert (wrapper.user, wrapper.group, wrapper.mode) == ("root", "hadoop", 0o750)
        assert host.file("/usr/local/lib/tarn-lab/etc/hadoop/container-executor.cfg").mode == 0o400
        assert host.service("docker").is_running
        assert host.run("docker image inspect registry.tarn.lab/tarn/triton:2.51.0").rc == 0
        cgroup = host.file("/sys/fs/cgroup/devices/hadoop-yarn")  # YARN's GPU isolation
        assert (cgroup.is_directory, cgroup.user) == (True, "yarn")
        assert (
            host.file("/var/lib/hadoop/yarn/container-executor").content_string.strip()
            == "LinuxContainerExecutor"
        )


def test_the_lab_is_kerberized_with_a_kdc_and_a_keytab_per_daemon_account():
    [namenode] = hosts_in("hdfs_namenode")
    core_site = namenode.file("/etc/hadoop/conf.namenode/core-site.xml").content_string
    if "<value>kerberos</value>" not in core_site:
        pytest.skip("the lab runs simple authentication (lab/test_stages.sh checks the secure one)")
    for host in hosts_in("kerberos_kdc"):
        assert host.service("krb5-kdc").is_running
        assert host.service("krb5-admin-server").is_running  # kadmind: it exits without kadm5.acl
        assert host.file("/etc/krb5kdc/kdc.conf").mode == 0o600
    expected = {
        "hdfs_namenode": [("hdfs.service.keytab", "hdfs", "hadoop", 0o400)],
        "hdfs_datanode": [("hdfs.service.keytab", "hdfs", "hadoop", 0o400)],
        "yarn_resourcemanager": [("yarn.service.keytab", "yarn", "hadoop", 0o400)],
        "yarn_nodemanager": [
            ("yarn.service.keytab", "yarn", "hadoop", 0o400),
            # the YARN service's, read by its AM: as yarn (process runtime) or as tarn (Docker lab)
            (
                "tarn.service.keytab",
                "tarn" if runs_docker(hosts_in("yarn_nodemanager")[0]) else "root",
                "hadoop",
                0o440,
            ),
        ],
        "hadoop": [("spnego.service.keytab", "root", "hadoop", 0o440)],
    }
    for group, keytabs in expected.items():
        for host in hosts_in(group):
            assert "default_realm = TARN.LAB" in host.file("/etc/krb5.conf").content_string
            for name, user, group_name, mode in keytabs:
                keytab = host.file(f"/etc/security/keytabs/{name}")
                assert (keytab.user, keytab.group, keytab.mode) == (user, group_name, mode), (host, name)
    for host in hosts_in("hdfs_namenode"):
        core = host.file("/etc/hadoop/conf.namenode/core-site.xml").content_string
        assert "<value>kerberos</value>" in core
        tls = host.file("/etc/hadoop/conf.namenode/ssl-server.xml")
        assert (tls.group, tls.mode) == ("hadoop", 0o640)  # the keystore's password
        listening = host.check_output("ss -ltnH")
        assert ":9871 " in listening  # HDFS's web on HTTPS only
        assert ":9870 " not in listening
