"""The Ranger plugin's configuration, read as a Ranger user writes it: ``ranger-triton-security.xml``.

A Java Ranger plugin finds ``ranger-<type>-security.xml`` on its classpath; TARN's controller reads it
from ``--ranger-conf-dir`` (``tarn submit`` ships the directory's ``ranger-triton-*.xml`` files to the
controller's container). The properties TARN uses, with Ranger 2.8.0's names and defaults:

======================================================== ==============================
property (``ranger.plugin.triton.`` + …)                  meaning, default
======================================================== ==============================
``policy.rest.url``                                      Ranger Admin; required. A
                                                         comma-separated list fails over
``service.name``                                         ``--ranger-service`` wins
``policy.pollIntervalMs``                                30000
``policy.cache.dir``                                     none: no cache files
``super.users``, ``super.groups``                        none
``access.cluster.name``                                  "" (sent as ``clusterName``)
``policy.rest.client.connection.timeoutMs``              5000 (Ranger: 120000)
``policy.rest.client.read.timeoutMs``                    30000
======================================================== ==============================

The connection timeout is shorter than Ranger's because one thread polls every URL in turn: a
dropped connection to the first Admin must not hold the failover for two minutes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit
from xml.etree.ElementTree import ParseError

from tarn.errors import ConfigError
from tarn.hadoop_conf import read_properties
from tarn.ranger.audit import OFF, AuditSettings, read_audit_settings
from tarn.stdlib.config import TarnConfig

SERVICE_TYPE = "triton"
PREFIX = f"ranger.plugin.{SERVICE_TYPE}"
SECURITY_FILE = f"ranger-{SERVICE_TYPE}-security.xml"
SHIPPED_FILES = f"ranger-{SERVICE_TYPE}-*.xml"
REST_URL = f"{PREFIX}.policy.rest.url"
SERVICE_NAME = f"{PREFIX}.service.name"
POLL_INTERVAL = f"{PREFIX}.policy.pollIntervalMs"
CACHE_DIR = f"{PREFIX}.policy.cache.dir"
SUPER_USERS = f"{PREFIX}.super.users"
SUPER_GROUPS = f"{PREFIX}.super.groups"
CLUSTER_NAME = f"{PREFIX}.access.cluster.name"
CONNECT_TIMEOUT = f"{PREFIX}.policy.rest.client.connection.timeoutMs"
READ_TIMEOUT = f"{PREFIX}.policy.rest.client.read.timeoutMs"
SSL_CONFIG = f"{PREFIX}.policy.rest.ssl.config.file"
DEFAULT_POLL_MS = 30_000  # Ranger's
MIN_POLL_MS = 100  # a smaller interval would only hammer Admin
_WHERE = f"--ranger-conf-dir: {SECURITY_FILE}"  # how errors about the file's properties start


@dataclass(frozen=True)
class PluginSettings:
    """What the controller's Ranger plugin needs; ``notes``: properties it reads but does not honour."""

    service: str
    app_id: str
    rest_urls: tuple[str, ...]
    poll_interval_s: float = DEFAULT_POLL_MS / 1000
    cache_dir: str | None = None
    super_users: frozenset[str] = frozenset()
    super_groups: frozenset[str] = frozenset()
    cluster_name: str = ""
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 30.0
    audit: AuditSettings = OFF  # --ranger-audit: ranger-triton-audit.xml's destinations
    notes: tuple[str, ...] = ()


def plugin_settings(properties: Mapping[str, str], service: str, app_id: str) -> PluginSettings:
    """The settings ``properties`` (ranger-triton-security.xml) give, for ``service``
    (``--ranger-service``, which wins over the file's service name); ConfigError names the property."""
    urls = tuple(u.strip().rstrip("/") for u in properties.get(REST_URL, "").split(",") if u.strip())
    if not urls:
        raise ConfigError(
            f"{_WHERE}: no {REST_URL}; add it: Ranger Admin's URL, e.g. http://ranger-admin:6080"
        )
    for url in urls:
        _check_url(url)
    notes = []
    named = properties.get(SERVICE_NAME, "").strip()
    if named and named != service:
        notes.append(f"{SERVICE_NAME} {named!r} is overridden by --ranger-service {service!r}")
    if properties.get(SSL_CONFIG, "").strip():
        notes.append(f"{SSL_CONFIG} is ignored: HTTPS is verified against the system's CA certificates")
    return PluginSettings(
        service=service,
        app_id=app_id,
        rest_urls=urls,
        poll_interval_s=_milliseconds(properties, POLL_INTERVAL, DEFAULT_POLL_MS, MIN_POLL_MS) / 1000,
        cache_dir=properties.get(CACHE_DIR, "").strip() or None,
        super_users=_names(properties.get(SUPER_USERS, "")),
        super_groups=_names(properties.get(SUPER_GROUPS, "")),
        cluster_name=properties.get(CLUSTER_NAME, "").strip(),
        connect_timeout_s=_milliseconds(properties, CONNECT_TIMEOUT, 5_000, 1) / 1000,
        read_timeout_s=_milliseconds(properties, READ_TIMEOUT, 30_000, 1) / 1000,
        notes=tuple(notes),
    )


def plugin_id(app_id: str, host: str, service: str) -> str:
    """RangerRESTUtils.getPluginId: ``<appId>@<host>-<service>``, at most 255 characters."""
    return f"{app_id}@{host}-{service}"[:255]


def settings_of(config: TarnConfig) -> PluginSettings | None:
    """The plugin settings a config asks for (None: no ``--ranger-service``, Ranger is off); read
    and checked where ``tarn submit`` runs and again in the controller's container."""
    if config.ranger_service is None:
        if config.ranger_audit:
            raise ConfigError("--ranger-audit: set without --ranger-service; give the service to audit")
        return None
    if config.ranger_conf_dir is None:
        raise ConfigError(
            "--ranger-service: set, but no policy REST URL without --ranger-conf-dir; "
            f"give --ranger-conf-dir DIR holding {SECURITY_FILE} with {REST_URL}"
        )
    return read_settings(
        Path(config.ranger_conf_dir), config.ranger_service, config.ranger_app_id, config.ranger_audit
    )


def read_settings(conf_dir: Path, service: str, app_id: str, audit: bool = False) -> PluginSettings:
    """The settings of ``conf_dir``/ranger-triton-security.xml (and, with ``audit``, of
    ranger-triton-audit.xml); ConfigError when one is missing or invalid."""
    settings = plugin_settings(_security_properties(conf_dir), service, app_id)
    if not audit:
        return settings
    return replace(settings, audit=read_audit_settings(conf_dir))


def shipped_files(conf_dir: Path) -> dict[str, bytes]:
    """The ``ranger-triton-*.xml`` files of ``conf_dir`` (what the controller's container gets), by name."""
    return {path.name: path.read_bytes() for path in sorted(conf_dir.glob(SHIPPED_FILES)) if path.is_file()}


def _security_properties(conf_dir: Path) -> dict[str, str]:
    path = conf_dir / SECURITY_FILE
    if not path.is_file():
        raise ConfigError(
            f"--ranger-conf-dir: no {SECURITY_FILE} in {conf_dir}; "
            f"write one with {REST_URL} (Ranger Admin's URL), or point --ranger-conf-dir at it"
        )
    try:
        return read_properties(path)
    except ParseError as exc:
        raise ConfigError(f"--ranger-conf-dir: {path} is not valid XML ({exc}); fix the file") from exc


def _check_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{_WHERE}: {REST_URL} {url!r} is not an http(s) URL; give e.g. http://host:6080")
    if parts.username or parts.password:  # the download API takes no credentials; keep them out of logs
        raise ConfigError(f"{_WHERE}: {REST_URL} carries credentials; remove them from the URL")


def _milliseconds(properties: Mapping[str, str], name: str, default: int, least: int) -> int:
    raw = properties.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < least:
        raise ConfigError(
            f"{_WHERE}: {name} {raw!r} is not a number of milliseconds >= {least}; give e.g. {default}"
        )
    return int(raw)


def _names(raw: str) -> frozenset[str]:
    return frozenset(name.strip() for name in raw.split(",") if name.strip())
