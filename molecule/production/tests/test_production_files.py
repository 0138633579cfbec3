"""The production NodeManager, ResourceManager and HDFS NFS settings, read back from the rendered files."""

from __future__ import annotations

import xml.etree.ElementTree as ET

NM_CONF = "/etc/hadoop/conf.nodemanager"
RM_CONF = "/etc/hadoop/conf.resourcemanager"
CE_CFG = "/opt/hadoop/etc/hadoop/container-executor.cfg"


def properties(host, path: str) -> dict[str, str]:
    root = ET.fromstring(host.file(path).content_string)
    return {p.findtext("name"): p.findtext("value") for p in root.iter("property")}


def ini_sections(text: str) -> dict[str, dict[str, str]]:
    sections: dict[str, dict[str, str]] = {"": {}}
    current = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1]
            sections[current] = {}
        else:
            key, _sep, value = line.partition("=")
            sections[current][key] = value
    return sections


def test_nodemanager_runs_docker_through_linux_container_executor(host):
    site = properties(host, f"{NM_CONF}/yarn-site.xml")
    assert site["yarn.nodemanager.container-executor.class"].endswith("LinuxContainerExecutor")
    assert site["yarn.nodemanager.runtime.linux.allowed-runtimes"] == "default,docker"
    assert site["yarn.nodemanager.runtime.linux.docker.allowed-container-networks"] == "host,bridge,none"
    assert site["yarn.nodemanager.runtime.linux.docker.default-container-network"] == "host"
    assert site["yarn.nodemanager.runtime.linux.docker.privileged-containers.allowed"] == "false"
    assert site["yarn.nodemanager.runtime.linux.docker.allowed-container-runtimes"] == "runc,nvidia"
    assert site["yarn.nodemanager.linux-container-executor.group"] == "hadoop"


def test_nodemanager_schedules_real_gpus_with_the_nvidia_plugin(host):
    site = properties(host, f"{NM_CONF}/yarn-site.xml")
    assert site["yarn.nodemanager.resource-plugins"] == "yarn.io/gpu"
    assert site["yarn.nodemanager.resource-plugins.gpu.docker-plugin"] == "nvidia-docker-v2"
    assert (
        site["yarn.nodemanager.resource-plugins.gpu.path-to-discovery-executables"] == "/usr/bin/nvidia-smi"
    )
    assert site["yarn.nodemanager.resource.memory-mb"] == "245760"
    assert not host.file("/usr/local/lib/tarn-virtual-gpu/nvidia-smi").exists
    assert properties(host, f"{NM_CONF}/resource-types.xml") == {"yarn.resource-types": "yarn.io/gpu"}


def test_container_executor_cfg_is_root_only_with_docker_and_gpu_sections(host):
    cfg = host.file(CE_CFG)
    assert cfg.user == "root"
    assert cfg.group == "root"
    assert cfg.mode == 0o400
    sections = ini_sections(cfg.content_string)
    assert sections[""]["yarn.nodemanager.linux-container-executor.group"] == "hadoop"
    assert "yarn" in sections[""]["banned.users"].split(",")
    docker = sections["docker"]
    assert docker["module.enabled"] == "true"
    assert docker["docker.trusted.registries"] == "nvcr.io,registry.example.internal"
    assert docker["docker.allowed.runtimes"] == "runc,nvidia"
    assert docker["docker.privileged-containers.enabled"] == "false"
    assert "/var/lib/hadoop/yarn/local" in docker["docker.allowed.rw-mounts"].split(",")
    # Triton reads models from the HDFS NFS mount and the instances share the node's model cache.
    assert "/mnt/hdfs" in docker["docker.allowed.ro-mounts"].split(",")
    assert "/var/lib/tarn/model-cache" in docker["docker.allowed.rw-mounts"].split(",")
    assert sections["gpu"]["module.enabled"] == "true"
    assert sections["cgroups"]["yarn-hierarchy"]


def test_resourcemanager_weighs_gpus_and_serves_the_services_api(host):
    site = properties(host, f"{RM_CONF}/yarn-site.xml")
    assert site["yarn.webapp.api-service.enable"] == "true"
    assert site["yarn.resourcemanager.placement-constraints.handler"] == "scheduler"
    assert site["yarn.service.framework.path"].endswith("/yarn-services/3.4.2/service-dep.tar.gz")
    scheduler = properties(host, f"{RM_CONF}/capacity-scheduler.xml")
    assert scheduler["yarn.scheduler.capacity.resource-calculator"].endswith("DominantResourceCalculator")
    assert properties(host, f"{RM_CONF}/resource-types.xml") == {"yarn.resource-types": "yarn.io/gpu"}


def test_units_are_installed_but_left_alone(host):
    unit = host.file("/etc/systemd/system/hadoop-yarn-nodemanager.service")
    assert unit.exists
    assert "KillMode=process" in unit.content_string
    assert not host.service("hadoop-yarn-nodemanager").is_running


def test_the_model_cache_has_a_group_of_its_own_not_container_executors(host):
    cache = host.file("/var/lib/tarn/model-cache")
    assert cache.is_directory
    assert (cache.user, cache.group, cache.mode) == ("yarn", "tarn-cache", 0o2770)


def test_hdfs_is_in_fstab_through_the_gateway_with_hadoops_options(host):
    assert host.package("nfs-common").is_installed
    entries = [line.split() for line in host.file("/etc/fstab").content_string.splitlines()]
    [entry] = [e for e in entries if len(e) >= 4 and e[1] == "/mnt/hdfs"]
    assert entry[0] == "tarn-molecule-gpu-node:/"
    assert entry[2] == "nfs"
    hadoops = ["vers=3", "proto=tcp", "nolock", "noacl", "sync"]
    assert entry[3].split(",") == [*hadoops, "rsize=1048576", "wsize=1048576"]
    assert host.file("/mnt/hdfs").is_directory


def test_the_gateway_units_run_as_hdfs_with_only_portmap_privileged(host):
    portmap = host.file("/etc/systemd/system/hadoop-hdfs-portmap.service").content_string
    nfs3 = host.file("/etc/systemd/system/hadoop-hdfs-nfs3.service").content_string
    assert "User=hdfs" in portmap
    assert "User=hdfs" in nfs3
    assert "AmbientCapabilities=CAP_NET_BIND_SERVICE" in portmap
    assert "org.apache.hadoop.portmap.Portmap" in portmap
    assert "AmbientCapabilities" not in nfs3
    assert "Requires=hadoop-hdfs-portmap.service" in nfs3
    assert "UMask=0077" in nfs3  # nfs3 makes its dump directory again at each start
    assert "org.apache.hadoop.hdfs.nfs.nfs3.Nfs3" in nfs3
    assert not host.service("hadoop-hdfs-nfs3").is_running


def test_the_gateway_exports_read_only_and_the_namenode_allows_its_proxy_user(host):
    site = properties(host, "/etc/hadoop/conf.nfs3/hdfs-site.xml")
    assert site["nfs.exports.allowed.hosts"] == "10.20.0.0/16 ro ; tarn-molecule-gpu-node ro"
    assert site["nfs.dump.dir"] == "/var/lib/hadoop/hdfs-nfs/dump"
    assert site["nfs.superuser"] == "hdfs"
    assert site["nfs.port.monitoring.disabled"] == "false"
    assert site["nfs.export.point"] == "/"
    dump = host.file("/var/lib/hadoop/hdfs-nfs/dump")
    assert (dump.user, dump.mode) == ("hdfs", 0o700)
    # every daemon's core-site (the NameNode's included) names the gateway host for the hdfs proxy user
    for conf in ("/etc/hadoop/conf.nfs3", NM_CONF, RM_CONF, "/etc/hadoop/conf"):
        core = properties(host, f"{conf}/core-site.xml")
        assert core["hadoop.proxyuser.hdfs.hosts"] == "tarn-molecule-gpu-node", conf
        assert core["hadoop.proxyuser.hdfs.groups"] == "*", conf
