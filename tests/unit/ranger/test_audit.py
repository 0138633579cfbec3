"""Ranger's audit (tarn.ranger.audit, tarn.ranger.audit_log): ranger-triton-audit.xml read with Ranger's
names and defaults, paths as Ranger's HDFS destination makes them, AuthzAuditEvent's fields, and the
writer's batches, rollover and failures against a loopback WebHDFS (tests/support/webhdfs.py).

The audited decisions themselves are checked against Ranger's engine in
tests/integration/test_ranger_controller.py; the events on a real HDFS in tests/e2e/test_ranger.py."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from tarn.errors import ConfigError
from tarn.ranger.audit import (
    OFF,
    AuditSettings,
    HdfsDestination,
    Request,
    audit_settings,
    event,
    expand,
    hdfs_file,
    java_time,
    numbered,
    read_audit_settings,
)
from tarn.ranger.audit_log import AuditLog, HdfsAuditFile, Identity, next_rollover
from tarn.ranger.authorizer import Authorizer
from tarn.ranger.engine import Engine, Verdict
from tarn.ranger.settings import settings_of
from tarn.ranger.state import PolicyState
from tarn.stdlib.config import parse_config
from tarn.stdlib.webhdfs import SimpleAuth, WebHdfsClient
from tests.support.ranger_documents import URL, allow, policies, write_xml
from tests.support.webhdfs import Hdfs

D = "xasecure.audit.destination."
HDFS_ON = {D + "hdfs": "true", D + "hdfs.dir": "hdfs://nn:8020/ranger/audit"}
AT = datetime(2026, 11, 24, 9, 5, 7, 42_000)
ALLOWED = Verdict(allowed=True, audited=True, policy_id=7, policy_version=3)


def test_ranger_s_defaults_for_the_hdfs_destination() -> None:
    settings = audit_settings(HDFS_ON)
    assert settings == AuditSettings(hdfs=HdfsDestination(dir="hdfs://nn:8020/ranger/audit"))
    assert hdfs_file(settings.hdfs, "tarn", "worker1", AT) == (  # type: ignore[arg-type]
        "hdfs://nn:8020/ranger/audit/tarn/20261124/tarn_ranger_audit_worker1.log"
    )


def test_every_property() -> None:
    settings = audit_settings(
        {
            **HDFS_ON,
            D + "hdfs.subdir": "%app-type%/%time:yyyy-MM-dd'T'HH%",
            D + "hdfs.filename.format": "%hostname%-%time:HHmmss.SSS%.json",
            D + "hdfs.file.rollover.sec": "3600",
            D + "log4j": "TRUE",
            D + "log4j.logger": "audit.triton",
            D + "solr": "false",  # off: not refused
        }
    )
    assert settings.logger == "audit.triton"
    destination = settings.hdfs
    assert destination is not None
    assert destination.rollover_s == 3600
    assert hdfs_file(destination, "tarn", "w1", AT).endswith("/tarn/2026-11-24T09/w1-090507.042.json")


def test_audit_off_and_the_log4j_default_logger() -> None:
    assert audit_settings({**HDFS_ON, "xasecure.audit.is.enabled": "false"}) == OFF
    assert not OFF.on
    assert audit_settings({D + "log4j": "true"}) == AuditSettings(logger="xaaudit")


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({D + "solr": "true", D + "elasticsearch": "true", **HDFS_ON},
         f"{D}elasticsearch, {D}solr is not supported by TARN"),
        ({D + "hdfs": "true"}, f"{D}hdfs.dir '' is not an hdfs:// URI"),
        ({D + "hdfs": "true", D + "hdfs.dir": "/ranger/audit"}, "is not an hdfs:// URI; give e.g. hdfs://"),
        ({**HDFS_ON, D + "hdfs.file.rollover.sec": "0"}, "rollover.sec '0' is not a number of seconds >= 1"),
        ({**HDFS_ON, D + "hdfs.subdir": "%jvm-instance%"}, "token %jvm-instance% in '%jvm-instance%'"),
        ({**HDFS_ON, D + "hdfs.subdir": "%time:yyyyMMdd-EEE%"}, "uses 'EEE'; TARN formats numeric"),
        ({D + "hdfs": "false"}, "no destination is: set xasecure.audit.destination.hdfs"),
    ],
)  # fmt: skip
def test_refused_with_the_property_and_the_fix(properties: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=r"^--ranger-conf-dir: ranger-triton-audit\.xml: ") as refused:
        audit_settings(properties)
    assert message in str(refused.value)


def test_the_flag_needs_the_file_and_the_service(tmp_path: Path) -> None:
    write_xml(tmp_path, URL)
    base = ["--model-repository", "hdfs:///m", "--runtime", "process", "-rs", "triton_prod",
            "--ranger-conf-dir", str(tmp_path)]  # fmt: skip
    with pytest.raises(ConfigError, match=r"no ranger-triton-audit\.xml in .*drop --ranger-audit"):
        settings_of(parse_config([*base, "--ranger-audit"], {}))
    write_xml(tmp_path, HDFS_ON, name="ranger-triton-audit.xml")
    settings = settings_of(parse_config([*base, "--ranger-audit"], {}))
    assert settings is not None
    assert settings.audit == read_audit_settings(tmp_path)
    without_flag = settings_of(parse_config(base, {}))
    assert without_flag is not None
    assert without_flag.audit == OFF, "the file alone turns nothing on"
    with pytest.raises(ConfigError, match="--ranger-audit: set without --ranger-service"):
        settings_of(parse_config([*base[:4], "--ranger-audit"], {}))


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("yyyyMMdd", "20261124"),
        ("yyyy-MM-dd HH:mm:ss.SSS", "2026-11-24 09:05:07.042"),
        ("yy/M/d H", "26/11/24 9"),  # a one-letter field is not padded
        ("'at' HH'h'", "at 09h"),
        ("''", "'"),
    ],
)
def test_java_time(pattern: str, expected: str) -> None:
    assert java_time(pattern, AT) == expected


def test_expand_and_numbered_names() -> None:
    assert expand("%app-type%_%hostname%_%time:yyyyMMdd%", "tarn", "w1", AT) == "tarn_w1_20261124"
    assert expand("plain", "tarn", "w1", AT) == "plain"
    assert [numbered("/a/x.log", n) for n in range(3)] == ["/a/x.log", "/a/x.1.log", "/a/x.2.log"]
    assert numbered("/a/x", 1) == "/a/x.1"


def test_rollover_at_the_period_boundaries_from_local_midnight() -> None:
    assert next_rollover(AT, 86_400) == datetime(2026, 11, 25)
    assert next_rollover(AT, 3600) == datetime(2026, 11, 24, 10)
    assert next_rollover(AT, 2 * 86_400) == datetime(2026, 11, 26, 9, 5, 7, 42_000)


def test_the_event_has_ranger_s_fields() -> None:
    found = event(
        Request("alice", "add_one", "infer", "10.0.0.5"),
        ALLOWED,
        service="triton_prod",
        service_type_id=207,
        app_id="tarn",
        host="w1",
        cluster_name="",
        event_id="u-0",
        seq_num=0,
        at=AT,
    )
    assert found == {
        "repoType": 207, "repo": "triton_prod", "reqUser": "alice", "evtTime": "2026-11-24 09:05:07.042",
        "access": "infer", "resource": "add_one", "resType": "model", "action": "infer", "result": 1,
        "agent": "tarn", "policy": 7, "enforcer": "ranger-acl", "cliIP": "10.0.0.5", "agentHost": "w1",
        "logType": "RangerAudit", "id": "u-0", "seq_num": 0, "event_count": 1, "event_dur_ms": 0, "tags": [],
        "cluster_name": "", "policy_version": 3,
    }  # fmt: skip
    no_policy = event(
        Request("bob", "m", "list"), Verdict(False, True), service="s", service_type_id=1, app_id="tarn",
        host="w1", cluster_name="c", event_id="u-1", seq_num=1, at=AT,
    )  # fmt: skip
    assert (no_policy["result"], no_policy["policy"]) == (0, -1)
    assert "cliIP" not in no_policy, "Gson leaves nulls out"
    assert "policy_version" not in no_policy


@pytest.fixture
def hdfs() -> Iterator[Hdfs]:
    fake = Hdfs()
    yield fake
    fake.server.shutdown()


class Clock:
    def __init__(self, at: datetime) -> None:
        self.now = at.timestamp()

    def __call__(self) -> float:
        return self.now


def writer(hdfs: Hdfs, clock: Clock, capacity: int = 100) -> AuditLog:
    client = WebHdfsClient(hdfs.url, SimpleAuth("tarn"), timeout=5, retries=0)
    destination = HdfsDestination(dir="/ranger/audit")
    file = HdfsAuditFile(client, destination, "tarn", "w1")
    return AuditLog(AuditSettings(hdfs=destination), Identity("triton_prod", "tarn", "w1"), file,
                    capacity=capacity, clock=clock)  # fmt: skip


def lines(data: bytes) -> list[dict[str, object]]:
    return [json.loads(line) for line in data.decode().splitlines()]


def test_batches_append_to_one_file_per_day_and_a_taken_name_is_numbered(hdfs: Hdfs) -> None:
    clock = Clock(AT)
    hdfs.files["/ranger/audit/tarn/20261124/tarn_ranger_audit_w1.log"] = b""  # an earlier controller's
    audit = writer(hdfs, clock)
    audit.log(Request("alice", "add_one", "infer"), ALLOWED, 207)
    audit.flush()
    audit.flush()  # nothing queued: nothing written
    audit.log(Request("bob", "add_one", "list"), Verdict(False, True), 207)
    audit.flush()
    today = "/ranger/audit/tarn/20261124/tarn_ranger_audit_w1.1.log"
    assert [(e["reqUser"], e["seq_num"]) for e in lines(hdfs.files[today])] == [("alice", 0), ("bob", 1)]
    assert [op for _m, _w, op, _n in hdfs.seen].count("CREATE") == 2  # name node + data node, once
    clock.now = datetime(2026, 11, 25, 0, 0, 1).timestamp()
    audit.log(Request("carol", "m", "infer"), ALLOWED, 207)
    audit.flush()
    tomorrow = "/ranger/audit/tarn/20261125/tarn_ranger_audit_w1.log"
    assert [e["reqUser"] for e in lines(hdfs.files[tomorrow])] == ["carol"]
    assert (audit.written, audit.failures) == (3, 0)


def test_a_failed_write_keeps_the_events_for_a_new_file(hdfs: Hdfs) -> None:
    audit = writer(hdfs, Clock(AT))
    audit.log(Request("alice", "a", "infer"), ALLOWED, 207)
    audit.flush()
    hdfs.fail_next = 2  # the append fails, then the new file's existence check
    audit.log(Request("bob", "b", "infer"), ALLOWED, 207)
    audit.flush()
    assert (audit.failures, audit.pending, audit.written) == (1, 1, 1)
    audit.flush()
    assert audit.failures == 2
    audit.log(Request("carol", "c", "infer"), ALLOWED, 207)
    audit.flush()
    assert (audit.pending, audit.written) == (0, 3)
    day = "/ranger/audit/tarn/20261124"
    first, second = (hdfs.files[f"{day}/tarn_ranger_audit_w1{n}.log"] for n in ("", ".1"))
    assert [e["reqUser"] for e in lines(first)] == ["alice"]
    assert [e["reqUser"] for e in lines(second)] == ["bob", "carol"]


def test_a_full_queue_drops_and_counts(hdfs: Hdfs) -> None:
    audit = writer(hdfs, Clock(AT), capacity=2)
    for user in ("a", "b", "c"):
        audit.log(Request(user, "m", "infer"), ALLOWED, 207)
    assert (audit.dropped, audit.pending) == (1, 2)


def test_the_log4j_destination_logs_one_json_line_per_event(caplog: pytest.LogCaptureFixture) -> None:
    audit = AuditLog(AuditSettings(logger="xaaudit"), Identity("triton_prod", "tarn", "w1"), None)
    with caplog.at_level(logging.INFO, logger="xaaudit"):
        audit.log(Request("alice", "add_one", "infer"), ALLOWED, 207)
        audit.flush()
    assert [json.loads(r.getMessage())["reqUser"] for r in caplog.records if r.name == "xaaudit"] == ["alice"]
    assert audit.written == 1


def test_the_authorizer_audits_what_ranger_audits() -> None:
    """Audited verdicts only; nothing when no policies are loaded or no user is known (Ranger's plugin
    has no result to audit then)."""
    documents = policies(
        3,
        allow(1, ["add_*"], ["infer"], users=["alice"]),
        allow(2, ["quiet"], ["infer"], users=["alice"], isAuditEnabled=False),
    )
    state = PolicyState(engine=Engine.from_json(documents, None))
    logged: list[tuple[Request, Verdict, int]] = []

    class Recorder(AuditLog):
        def log(self, request: Request, verdict: Verdict, service_type_id: int) -> None:
            logged.append((request, verdict, service_type_id))

    recorder = Recorder(OFF, Identity("s", "tarn", "h"), None)
    authorizer = Authorizer(lambda: state, audit=recorder)
    assert authorizer.allowed("alice", "add_one", "infer", "10.0.0.5")
    assert authorizer.allowed("alice", "quiet", "infer")
    assert not authorizer.allowed(None, "add_one", "infer")
    assert [(r.user, r.model, r.client_ip, v.policy_id) for r, v, _id in logged] == [
        ("alice", "add_one", "10.0.0.5", 1)
    ]
    empty = Authorizer(PolicyState, audit=recorder)
    assert not empty.allowed("alice", "add_one", "infer")
    assert len(logged) == 1


def test_a_batch_being_written_is_still_pending(hdfs: Hdfs) -> None:
    """``pending`` 0 means every event logged before is on HDFS: the lab's tests read HDFS then.
    (CI's stop 45 saw a batch taken from the queue but not yet appended counted nowhere.)"""
    audit = writer(hdfs, Clock(AT))
    seen: list[tuple[int, int]] = []
    file = audit._hdfs
    assert file is not None
    write = file.write

    def watched(data: bytes, now: float) -> None:
        seen.append((audit.pending, audit.written))
        write(data, now)

    file.write = watched  # type: ignore[method-assign,assignment]
    audit.log(Request("alice", "a", "infer"), ALLOWED, 207)
    audit.log(Request("bob", "b", "infer"), ALLOWED, 207)
    audit.flush()
    assert seen == [(2, 0)]
    assert (audit.pending, audit.written) == (0, 2)
