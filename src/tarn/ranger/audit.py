"""Ranger's audit of the controller's decisions, as a Ranger plugin writes it (pure: no I/O, no clock;
tarn.ranger.audit_log sends the events).

``--ranger-audit`` turns it on; the destinations come from ``ranger-triton-audit.xml`` in
``--ranger-conf-dir``, with Ranger 2.8.0's property names and defaults:

=================================================== =============================================
property                                            meaning, default
=================================================== =============================================
``xasecure.audit.is.enabled``                       true; false turns every destination off
``xasecure.audit.destination.hdfs``                 true: JSON lines on HDFS
``xasecure.audit.destination.hdfs.dir``             required, e.g. hdfs://nn:8020/ranger/audit
``xasecure.audit.destination.hdfs.subdir``          ``%app-type%/%time:yyyyMMdd%``
``xasecure.audit.destination.hdfs.filename.format`` ``%app-type%_ranger_audit_%hostname%.log``
``xasecure.audit.destination.hdfs.file.rollover.sec`` 86400: a new file after that long
``xasecure.audit.destination.log4j``                true: one JSON line per event to a logger
``xasecure.audit.destination.log4j.logger``         ``xaaudit`` (a Python logger here: the
                                                    controller's log, the log4j destination's role)
=================================================== =============================================

``%app-type%`` is the plugin's app id (``--ranger-app-id``), ``%hostname%`` the controller's host,
``%time:FORMAT%`` the file's start time in Java's SimpleDateFormat letters (y M d H m s S).
Ranger's other destinations (solr, elasticsearch, db, kafka, log4j's summary queues...) are refused
by name: TARN does not write them.

The event is Ranger's AuthzAuditEvent as RangerDefaultAuditHandler fills it and Gson writes it
(MiscUtil's date format ``yyyy-MM-dd HH:mm:ss.SSS``, null fields left out).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from xml.etree.ElementTree import ParseError

from tarn.errors import ConfigError
from tarn.hadoop_conf import read_properties
from tarn.ranger.engine import Verdict

AUDIT_FILE = "ranger-triton-audit.xml"
ENABLED = "xasecure.audit.is.enabled"
DESTINATION = "xasecure.audit.destination."
HDFS = DESTINATION + "hdfs"
LOG4J = DESTINATION + "log4j"
SUPPORTED = ("hdfs", "log4j")
DEFAULT_SUBDIR = "%app-type%/%time:yyyyMMdd%"
DEFAULT_FILENAME = "%app-type%_ranger_audit_%hostname%.log"
DEFAULT_ROLLOVER_S = 24 * 60 * 60
DEFAULT_LOGGER = "xaaudit"
ENFORCER = "ranger-acl"  # RangerHadoopConstants.DEFAULT_RANGER_MODULE_ACL_NAME
LOG_TYPE = "RangerAudit"
RESOURCE_TYPE = "model"  # the triton service def's only resource: the request's leaf name
_WHERE = f"--ranger-conf-dir: {AUDIT_FILE}"


@dataclass(frozen=True)
class HdfsDestination:
    """Where Ranger's HDFS destination writes: ``dir``/``subdir``/``filename`` (tokens expanded)."""

    dir: str
    subdir: str = DEFAULT_SUBDIR
    filename: str = DEFAULT_FILENAME
    rollover_s: int = DEFAULT_ROLLOVER_S


@dataclass(frozen=True)
class AuditSettings:
    """The destinations audits go to; none at all means audit is off."""

    hdfs: HdfsDestination | None = None
    logger: str | None = None  # the log4j destination's logger name

    @property
    def on(self) -> bool:
        return self.hdfs is not None or self.logger is not None


OFF = AuditSettings()


def audit_settings(properties: Mapping[str, str]) -> AuditSettings:
    """The destinations ``properties`` (ranger-triton-audit.xml) turn on; ConfigError names the property."""
    if not _flag(properties, ENABLED, default=True):
        return OFF
    refused = sorted(
        name
        for key in properties
        if key.startswith(DESTINATION)
        and "." not in (name := key.removeprefix(DESTINATION))
        and name not in SUPPORTED
        and _flag(properties, key, default=False)
    )
    if refused:
        raise ConfigError(
            f"{_WHERE}: {', '.join(DESTINATION + n for n in refused)} is not supported by TARN "
            f"(it writes {' and '.join(SUPPORTED)}); set it to false, or audit to HDFS and load from there"
        )
    hdfs = None
    if _flag(properties, HDFS, default=False):
        folder = properties.get(f"{HDFS}.dir", "").strip()
        if not folder.startswith("hdfs://"):
            raise ConfigError(
                f"{_WHERE}: {HDFS}.dir {folder!r} is not an hdfs:// URI; give e.g. hdfs://namenode:8020/ranger/audit"
            )
        hdfs = HdfsDestination(
            dir=folder.rstrip("/"),
            subdir=properties.get(f"{HDFS}.subdir", "").strip() or DEFAULT_SUBDIR,
            filename=properties.get(f"{HDFS}.filename.format", "").strip() or DEFAULT_FILENAME,
            rollover_s=_seconds(properties, f"{HDFS}.file.rollover.sec", DEFAULT_ROLLOVER_S),
        )
        for pattern in (hdfs.subdir, hdfs.filename):
            expand(pattern, "app", "host", datetime(2000, 1, 1))  # a bad token fails now, not at an event
    logger = None
    if _flag(properties, LOG4J, default=False):
        logger = properties.get(f"{LOG4J}.logger", "").strip() or DEFAULT_LOGGER
    if hdfs is None and logger is None:
        raise ConfigError(
            f"{_WHERE}: --ranger-audit is on but no destination is: set {HDFS} (with {HDFS}.dir) "
            f"or {LOG4J} to true"
        )
    return AuditSettings(hdfs=hdfs, logger=logger)


def read_audit_settings(conf_dir: Path) -> AuditSettings:
    path = conf_dir / AUDIT_FILE
    if not path.is_file():
        raise ConfigError(
            f"--ranger-audit: no {AUDIT_FILE} in {conf_dir}; write one naming the destinations "
            f"({HDFS}=true and {HDFS}.dir, or {LOG4J}=true), or drop --ranger-audit"
        )
    try:
        return audit_settings(read_properties(path))
    except ParseError as exc:
        raise ConfigError(f"--ranger-audit: {path} is not valid XML ({exc}); fix the file") from exc


def hdfs_file(destination: HdfsDestination, app_type: str, host: str, opened: datetime) -> str:
    """The file a destination opened at ``opened`` writes (AbstractRangerAuditWriter: dir/subdir/filename)."""
    folder = expand(f"{destination.dir}/{destination.subdir}", app_type, host, opened)
    return f"{folder}/{expand(destination.filename, app_type, host, opened)}"


def numbered(path: str, n: int) -> str:
    """The name Ranger tries when ``path`` exists: ``x.log`` → ``x.1.log``, ``x.2.log``..."""
    if n == 0:
        return path
    stem, dot, extension = path.rpartition(".")
    return f"{stem}.{n}.{extension}" if dot else f"{path}.{n}"


_TOKEN = re.compile(r"%([^%]*)%")


def expand(pattern: str, app_type: str, host: str, when: datetime) -> str:
    """MiscUtil.replaceTokens: %hostname%, %app-type%, %time:FORMAT%; an unknown token is refused."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name == "hostname":
            return host
        if name == "app-type":
            return app_type
        if name.startswith("time:"):
            return java_time(name.removeprefix("time:"), when)
        raise ConfigError(
            f"{_WHERE}: token %{name}% in {pattern!r} is not one TARN expands; "
            "use %app-type%, %hostname% or %time:FORMAT%"
        )

    return _TOKEN.sub(value, pattern)


_JAVA_FIELDS = {"y": "year", "M": "month", "d": "day", "H": "hour", "m": "minute", "s": "second"}


def java_time(pattern: str, when: datetime) -> str:
    """SimpleDateFormat for the numeric letters audit paths use (y M d H m s S, 'quoted' text): a
    field is zero-padded to its letter count, ``yy`` is the year's last two digits."""
    out = []
    for run, quoted in _java_runs(pattern):
        letter = run[0]
        if quoted or not letter.isalpha():
            out.append(run)
            continue
        if letter == "S":
            value = when.microsecond // 1000
        elif letter in _JAVA_FIELDS and not (letter == "M" and len(run) > 2):
            value = getattr(when, _JAVA_FIELDS[letter])
        else:
            raise ConfigError(
                f"{_WHERE}: %time:{pattern}% uses {run!r}; TARN formats numeric y M d H m s S (e.g. yyyyMMdd)"
            )
        out.append(f"{value % 100:02d}" if run == "yy" else str(value).rjust(len(run), "0"))
    return "".join(out)


def _java_runs(pattern: str) -> list[tuple[str, bool]]:
    """(run of one letter or of literal text, quoted?) as SimpleDateFormat reads a pattern."""
    runs: list[tuple[str, bool]] = []
    i = 0
    while i < len(pattern):
        if pattern[i] == "'":
            end = pattern.find("'", i + 1)
            end = len(pattern) if end < 0 else end
            runs.append((pattern[i + 1 : end] or "'", True))
            i = end + 1
            continue
        j = i
        while j < len(pattern) and pattern[j] == pattern[i] and pattern[i].isalpha():
            j += 1
        runs.append((pattern[i : max(j, i + 1)], False))
        i = max(j, i + 1)
    return runs


@dataclass(frozen=True)
class Request:
    """One decision's request, as the controller saw it."""

    user: str
    model: str
    access: str
    client_ip: str | None = None


def event(
    request: Request,
    verdict: Verdict,
    *,
    service: str,
    service_type_id: int,
    app_id: str,
    host: str,
    cluster_name: str,
    event_id: str,
    seq_num: int,
    at: datetime,
) -> dict[str, Any]:
    """The AuthzAuditEvent Ranger's plugin logs for ``verdict`` (RangerDefaultAuditHandler.getAuthzEvents),
    in Gson's JSON: null fields left out, dates as MiscUtil formats them."""
    fields: dict[str, Any] = {
        "repoType": service_type_id,
        "repo": service,
        "reqUser": request.user,
        "evtTime": java_time("yyyy-MM-dd HH:mm:ss.SSS", at),
        "access": request.access,  # the request's action: for TARN, the access type itself
        "resource": request.model,
        "resType": RESOURCE_TYPE,
        "action": request.access,
        "result": 1 if verdict.allowed else 0,
        "agent": app_id,
        "policy": verdict.policy_id,
        "enforcer": ENFORCER,
        "cliIP": request.client_ip,
        "agentHost": host,
        "logType": LOG_TYPE,
        "id": event_id,
        "seq_num": seq_num,
        "event_count": 1,
        "event_dur_ms": 0,
        "tags": [],
        "cluster_name": cluster_name,
        "policy_version": verdict.policy_version,
    }
    return {key: value for key, value in fields.items() if value is not None}


def _flag(properties: Mapping[str, str], name: str, default: bool) -> bool:
    raw = properties.get(name, "").strip().lower()
    return default if not raw else raw == "true"  # Boolean.valueOf: anything else is false


def _seconds(properties: Mapping[str, str], name: str, default: int) -> int:
    raw = properties.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigError(f"{_WHERE}: {name} {raw!r} is not a number of seconds >= 1; give e.g. {default}")
    return int(raw)
