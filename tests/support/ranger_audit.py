"""The Ranger audit a TARN controller writes to HDFS (``--ranger-audit``), for the lab's tests: its
settings file, and its events read where Ranger's HDFS destination puts them,
``<dir>/tarn/<yyyyMMdd>/tarn_ranger_audit_*.log``, one JSON event per line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tarn.stdlib.webhdfs import WebHdfsClient
from tests.support.lab import wait_for
from tests.support.lab_service import Service
from tests.support.ranger_documents import write_xml

APP_TYPE = "tarn"  # the audit's application type: the directory under the destination's


def write_audit_xml(conf: Path, audit_dir: str, **extra: str) -> Path:
    """ranger-triton-audit.xml: events to HDFS under ``audit_dir`` (and ``extra`` settings)."""
    settings = {
        "xasecure.audit.destination.hdfs": "true",
        "xasecure.audit.destination.hdfs.dir": f"hdfs://{audit_dir}",
    }
    return write_xml(conf, {**settings, **extra}, name="ranger-triton-audit.xml")


def audit_events(hdfs: WebHdfsClient, audit_dir: str) -> list[dict[str, Any]]:
    """Every event written under ``audit_dir``, on any day."""
    files = [
        f
        for f in hdfs.walk(f"{audit_dir}/{APP_TYPE}", missing_ok=True)
        if f.path.rsplit("/", 1)[-1].startswith("tarn_ranger_audit_")
    ]
    return [json.loads(line) for f in files for line in hdfs.read_bytes(f.path).decode().splitlines()]


def audit_events_since(hdfs: WebHdfsClient, audit_dir: str, before: set[str]) -> list[dict[str, Any]]:
    """The events written under ``audit_dir`` since the events ``before`` (their ids)."""
    return [e for e in audit_events(hdfs, audit_dir) if e["id"] not in before]


def settled(service: Service) -> float:
    """The number of audit events the controller has written, once none is pending."""
    wait_for(lambda: service.metric("tarn_ranger_audit_events_pending") == 0, 30, "the audit queue to empty")
    return service.metric("tarn_ranger_audit_events_written_total")
