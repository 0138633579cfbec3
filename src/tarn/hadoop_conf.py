"""Cluster endpoints from a Hadoop client configuration directory ($HADOOP_CONF_DIR).

`tarn` runs where `yarn jar` ran in the seeds: on a node with the cluster's client configuration.
Without --rm-url / --webhdfs-url it reads the RM web addresses (all of them with RM HA) and the
NameNode's HTTP address from yarn-site.xml and hdfs-site.xml, as Hadoop's own clients do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from tarn.errors import ConfigError
from tarn.stdlib.hadoop_site import read_properties
from tarn.stdlib.webhdfs import namenode_from_conf

__all__ = [
    "client_conf_dir",
    "client_site",
    "read_properties",
    "resource_manager_urls",
    "rm_web_urls",
    "webhdfs_url",
]

Properties = Mapping[str, str]


def client_conf_dir(explicit: str | None, environ: Mapping[str, str]) -> Path:
    """--conf-dir, else $HADOOP_CONF_DIR (set in YARN containers too), else /etc/hadoop/conf."""
    return Path(explicit or environ.get("HADOOP_CONF_DIR") or "/etc/hadoop/conf")


def client_site(conf_dir: Path | None) -> dict[str, str]:
    """core-site.xml and hdfs-site.xml of ``conf_dir`` as one mapping (empty without a directory)."""
    if conf_dir is None:
        return {}
    return read_properties(conf_dir / "core-site.xml") | read_properties(conf_dir / "hdfs-site.xml")


def resource_manager_urls(explicit: Sequence[str] | None, conf_dir: Path) -> list[str]:
    """The --rm-url values, else every RM of ``conf_dir``/yarn-site.xml; ConfigError if none."""
    if explicit:
        return list(explicit)
    urls = rm_web_urls(read_properties(conf_dir / "yarn-site.xml"))
    if not urls:
        raise ConfigError(f"--rm-url: none given and none found in {conf_dir}/yarn-site.xml")
    return urls


def rm_web_urls(yarn_site: Properties) -> list[str]:
    """Every ResourceManager's web URL: one per rm-id with HA, else the single RM."""
    scheme = "https" if yarn_site.get("yarn.http.policy") == "HTTPS_ONLY" else "http"
    key = (
        "yarn.resourcemanager.webapp.https.address"
        if scheme == "https"
        else "yarn.resourcemanager.webapp.address"
    )
    default_port = 8090 if scheme == "https" else 8088
    if yarn_site.get("yarn.resourcemanager.ha.enabled") == "true":
        ids = [i.strip() for i in yarn_site.get("yarn.resourcemanager.ha.rm-ids", "").split(",") if i.strip()]
        return [_rm_address(yarn_site, key, default_port, f".{rm_id}", scheme) for rm_id in ids]
    return [_rm_address(yarn_site, key, default_port, "", scheme)]


def _rm_address(site: Properties, key: str, port: int, suffix: str, scheme: str) -> str:
    address = site.get(key + suffix)
    if not address:
        host = site.get("yarn.resourcemanager.hostname" + suffix)
        if not host:
            raise ConfigError(f"--rm-url: no {key + suffix} in yarn-site.xml; pass --rm-url http://RM:8088")
        address = f"{host}:{port}"
    return f"{scheme}://{address}"


def webhdfs_url(conf: Path) -> str:
    """The NameNode's HTTP address (non-HA; with HA pass --webhdfs-url), found as the launcher finds it:
    dfs.namenode.http-address, else the host of fs.defaultFS on the default HTTP port."""
    try:
        url, _root = namenode_from_conf("hdfs:///", conf)
    except ValueError as exc:
        raise ConfigError(
            "--webhdfs-url: no dfs.namenode.http-address in hdfs-site.xml; pass --webhdfs-url"
        ) from exc
    return url
