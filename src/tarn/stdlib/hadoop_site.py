"""Read Hadoop *-site.xml properties (standard library only: the launcher uses it too)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path


def read_properties(path: Path) -> dict[str, str]:
    """name → value of a Hadoop *-site.xml; an absent file has no properties."""
    if not path.is_file():
        return {}
    root = ET.parse(path).getroot()  # noqa: S314 - the cluster's own configuration files
    return {
        name: prop.findtext("value") or ""
        for prop in root.iter("property")
        if (name := prop.findtext("name"))
    }


def namenode_http_url(hdfs_site: Mapping[str, str]) -> str | None:
    """The NameNode's HTTP (WebHDFS) URL from hdfs-site.xml, when it names one (non-HA). A secure
    cluster whose DataNodes use SASL serves HDFS's web endpoints on HTTPS only (dfs.http.policy)."""
    if hdfs_site.get("dfs.http.policy", "HTTP_ONLY").upper() == "HTTPS_ONLY":
        address = hdfs_site.get("dfs.namenode.https-address")
        return f"https://{address}" if address else None
    address = hdfs_site.get("dfs.namenode.http-address")
    return f"http://{address}" if address else None


def kerberos_enabled(core_site: Mapping[str, str]) -> bool:
    """Whether the cluster authenticates with Kerberos (core-site's hadoop.security.authentication)."""
    return core_site.get("hadoop.security.authentication", "simple").strip().lower() == "kerberos"
