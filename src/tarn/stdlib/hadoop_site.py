"""Read Hadoop *-site.xml properties (standard library only: the launcher uses it too)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path


def read_properties(path: Path) -> dict[str, str]:
    """name → value of a Hadoop *-site.xml; an absent file has no properties."""
    if not path.is_file():
        return {}
    return parse_properties(path.read_bytes())


def parse_properties(data: bytes) -> dict[str, str]:
    """name → value of a Hadoop configuration document (a *-site.xml, or a daemon's /conf page)."""
    root = ET.fromstring(data)  # noqa: S314 - the cluster's own configuration
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


def hadoop_user(given: str | None, environ: Mapping[str, str]) -> str | None:
    """The user TARN acts as on a cluster with simple authentication, by Hadoop's own rule: the one
    given, else $HADOOP_USER_NAME, else the login user ($USER); None when there is none. Each caller
    says what no user means: the CLI and the modules refuse, the launcher and the controller (in a
    YARN container, where the NodeManager sets $USER) fall back to a name of their own."""
    return given or environ.get("HADOOP_USER_NAME") or environ.get("USER") or None


def kerberos_enabled(core_site: Mapping[str, str]) -> bool:
    """Whether the cluster authenticates with Kerberos (core-site's hadoop.security.authentication)."""
    return core_site.get("hadoop.security.authentication", "simple").strip().lower() == "kerberos"


def properties_xml(properties: Mapping[str, str]) -> bytes:
    """A Hadoop *-site.xml holding ``properties`` (sorted, so the same input gives the same bytes)."""
    root = ET.Element("configuration")
    for name, value in sorted(properties.items()):
        prop = ET.SubElement(root, "property")
        ET.SubElement(prop, "name").text = name
        ET.SubElement(prop, "value").text = value
    ET.indent(root)
    body: bytes = ET.tostring(root, encoding="utf-8")
    return b'<?xml version="1.0" encoding="UTF-8"?>\n' + body + b"\n"
