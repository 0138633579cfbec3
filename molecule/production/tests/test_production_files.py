"""The production NodeManager and ResourceManager settings, read back from the rendered files."""

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
