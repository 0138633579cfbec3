"""Sources of instances: parsing both contracts (the OpenAI front's port where an instance runs
one), the controller asked for JSON, and the last good set kept through outages."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from tarn.haproxy.plan import Endpoint, parse_endpoint
from tarn.haproxy.sources import (
    ControllerSource,
    Instance,
    Instances,
    LastGoodSet,
    SourceError,
    Watcher,
    front_endpoints,
    parse_instances_json,
    parse_instances_text,
    parse_znode,
    triton_endpoints,
)
from tarn.stdlib.api_token import Secret
from tests.support.loopback import QuietHandler, reply_json, reply_text, serve, url


def eps(*texts: str) -> Instances:
    """Instances without a front, by their Triton endpoints."""
    return frozenset(Instance(parse_endpoint(t)) for t in texts)


# ---- the last good set


def test_first_good_read_is_announced() -> None:
    known = LastGoodSet("the controller")
    assert known.succeeded(eps("10.0.0.1:8000")) == ["instances from the controller: 10.0.0.1:8000"]
    assert known.endpoints == eps("10.0.0.1:8000")


def test_same_set_again_says_nothing() -> None:
    known = LastGoodSet("zk", eps("10.0.0.1:8000"))
    assert known.succeeded(eps("10.0.0.1:8000")) == []


def test_a_change_names_what_came_and_went() -> None:
    known = LastGoodSet("zk", eps("10.0.0.1:8000", "10.0.0.2:8000"))
    notes = known.succeeded(eps("10.0.0.2:8000", "10.0.0.3:8000"))
    assert notes == ["instances from zk: 10.0.0.2:8000, 10.0.0.3:8000 (+10.0.0.3:8000 -10.0.0.1:8000)"]


def test_an_outage_keeps_the_last_good_set_and_says_so_once() -> None:
    known = LastGoodSet("zk", eps("10.0.0.1:8000", "10.0.0.2:8000"))
    notes = known.failed("no ZooKeeper session")
    assert len(notes) == 1
    assert "keeping the last good set (2 instances" in notes[0]
    assert known.failed("no ZooKeeper session") == []
    assert known.failed("HTTP 502") == []
    assert known.endpoints == eps("10.0.0.1:8000", "10.0.0.2:8000")


def test_an_outage_before_any_read_leaves_the_set_unknown() -> None:
    known = LastGoodSet("zk")
    notes = known.failed("no ZooKeeper session")
    assert known.endpoints is None
    assert "HAProxy is left as it is" in notes[0]


def test_recovery_is_announced_then_the_new_set() -> None:
    known = LastGoodSet("zk", eps("10.0.0.1:8000"), failing=True)
    assert known.succeeded(eps("10.0.0.1:8000")) == ["zk answers again"]
    known.failed("down")
    notes = known.succeeded(frozenset())
    assert notes[0] == "zk answers again"
    assert notes[1].startswith("instances from zk: none")
    assert known.endpoints == frozenset()  # an answered empty set is an empty set


# ---- the watcher thread's bookkeeping (fetch_once runs in the caller's thread)


class Scripted:
    """A fetch that answers from a script: a set, or an exception to raise."""

    def __init__(self, *answers: Instances | Exception) -> None:
        self.answers = list(answers)

    def __call__(self) -> Instances:
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_watcher_keeps_the_last_good_set_through_failures(caplog: pytest.LogCaptureFixture) -> None:
    fetch = Scripted(
        eps("10.0.0.1:8000"),
        SourceError("HTTP 502"),
        ConnectionError("refused"),
        eps("10.0.0.1:8000", "10.0.0.2:8000"),
    )
    watcher = Watcher(fetch, 30, "the controller at http://c:8888")
    assert watcher.current() is None
    caplog.set_level(logging.INFO, logger="tarn.haproxy")

    watcher.fetch_once()
    assert watcher.changed.is_set()
    watcher.changed.clear()

    watcher.fetch_once()
    watcher.fetch_once()
    assert watcher.current() == eps("10.0.0.1:8000")
    assert not watcher.changed.is_set()  # nothing for the sync to do during the outage

    watcher.fetch_once()
    assert watcher.current() == eps("10.0.0.1:8000", "10.0.0.2:8000")
    assert watcher.changed.is_set()

    messages = [r.getMessage() for r in caplog.records]
    assert sum("unavailable (HTTP 502)" in m for m in messages) == 1
    assert not any("refused" in m for m in messages)  # already reported as failing
    assert "the controller at http://c:8888 answers again" in messages


def test_watcher_survives_unexpected_errors() -> None:
    watcher = Watcher(Scripted(RuntimeError("bug"), eps("10.0.0.1:8000")), 30, "zk")
    watcher.fetch_once()
    watcher.fetch_once()
    assert watcher.current() == eps("10.0.0.1:8000")


def test_watcher_thread_fetches_on_trigger() -> None:
    fetch = Scripted(frozenset(), eps("10.0.0.1:8000"))
    watcher = Watcher(fetch, 3600, "zk")
    watcher.start()
    try:
        assert watcher.changed.wait(5)
        assert watcher.current() == frozenset()
        watcher.changed.clear()
        watcher.trigger()
        assert watcher.changed.wait(5)
        assert watcher.current() == eps("10.0.0.1:8000")
    finally:
        watcher.stop()


# ---- the contracts of docs/discovery.md


def test_instances_text() -> None:
    text = "10.89.42.11:8000\n10.89.42.12:8000\n\n"
    assert parse_instances_text(text) == eps("10.89.42.11:8000", "10.89.42.12:8000")
    assert parse_instances_text("") == frozenset()


@pytest.mark.parametrize("text", ["worker1:8000\n", "10.0.0.1:8000\n<html>\n", "10.0.0.1\n"])
def test_instances_text_rejects_anything_else(text: str) -> None:
    with pytest.raises(SourceError, match="is not ip:port"):
        parse_instances_text(text)


def test_instances_json_takes_registered_instances() -> None:
    document = {
        "service": "tarn",
        "target": 2,
        "instances": [
            {"ip": "10.89.42.11", "http_port": 8000, "state": "READY", "registered": True},
            {"ip": "10.89.42.12", "http_port": 8000, "state": "STARTING", "registered": False},
        ],
    }
    assert parse_instances_json(document) == eps("10.89.42.11:8000")


def test_instances_json_carries_the_fronts() -> None:
    document = {
        "instances": [
            {"ip": "10.89.42.11", "http_port": 8000, "openai_port": 9000, "registered": True},
            {"ip": "10.89.42.12", "http_port": 8010, "registered": True},
        ]
    }
    found = parse_instances_json(document)
    assert triton_endpoints(found) == {Endpoint("10.89.42.11", 8000), Endpoint("10.89.42.12", 8010)}
    assert front_endpoints(found) == {Endpoint("10.89.42.11", 9000)}


@pytest.mark.parametrize(
    ("instances", "triton", "fronts"),
    [
        (frozenset(), set(), set()),
        (eps("10.0.0.1:8000"), {"10.0.0.1:8000"}, set()),
        (
            frozenset(
                {Instance(Endpoint("10.0.0.1", 8000), 9000), Instance(Endpoint("10.0.0.2", 8010), 9010)}
            ),
            {"10.0.0.1:8000", "10.0.0.2:8010"},
            {"10.0.0.1:9000", "10.0.0.2:9010"},
        ),
        (
            frozenset({Instance(Endpoint("10.0.0.1", 8000), 9000), Instance(Endpoint("10.0.0.2", 8000))}),
            {"10.0.0.1:8000", "10.0.0.2:8000"},
            {"10.0.0.1:9000"},
        ),
    ],
    ids=["none", "no front", "every instance with a front", "a front on one of two"],
)
def test_each_backend_gets_its_endpoints(instances: Instances, triton: set[str], fronts: set[str]) -> None:
    assert {str(e) for e in triton_endpoints(instances)} == triton
    assert {str(e) for e in front_endpoints(instances)} == fronts


@pytest.fixture
def controller() -> Iterator[dict[str, Any]]:
    """A stand-in controller's /instances: answers JSON or the seeds' text, records the headers."""
    seen: dict[str, Any] = {"form": "json", "headers": []}

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            seen["headers"].append(dict(self.headers))
            seen["path"] = self.path
            if seen["form"] == "json":
                rows = [{"ip": "10.0.0.1", "http_port": 8000, "openai_port": 9000, "registered": True}]
                reply_json(self, 200, {"service": "tarn", "target": 1, "instances": rows})
            else:
                reply_text(self, 200, "10.0.0.1:8000\n")

    server = serve(Handler)
    seen["url"] = url(server)
    yield seen
    server.shutdown()
    server.server_close()


def test_the_controller_is_asked_for_json_which_carries_the_fronts(controller: dict[str, Any]) -> None:
    source = ControllerSource(controller["url"], Secret("tok-1"))
    assert source.fetch() == {Instance(Endpoint("10.0.0.1", 8000), 9000)}
    assert controller["path"] == "/instances"
    assert controller["headers"][-1]["Accept"] == "application/json"
    assert controller["headers"][-1]["X-TARN-Token"] == "tok-1"
    controller["form"] = "text"  # a server that answers the seeds' form: Triton's endpoints only
    assert source.fetch() == eps("10.0.0.1:8000")


def test_instances_json_rejects_other_documents() -> None:
    with pytest.raises(SourceError):
        parse_instances_json({"instances": [{"host": "worker1"}]})


ZNODE = {
    "service": "tarn-demo",
    "instance": "triton-0",
    "container_id": "container_1763712000000_0001_01_000002",
    "host": "worker1",
    "ip": "10.89.42.11",
    "http_port": 8000,
    "grpc_port": 8001,
    "metrics_port": 8002,
    "url": "http://10.89.42.11:8000",
    "models": ["add_one"],
    "a_key_from_the_future": {"x": 1},
}


def test_znode_gives_ip_and_http_port() -> None:
    assert parse_znode(json.dumps(ZNODE).encode()) == Instance(Endpoint("10.89.42.11", 8000))


def test_znode_of_an_instance_with_a_front() -> None:
    found = parse_znode(json.dumps({**ZNODE, "openai_port": 9000}).encode())
    assert found == Instance(Endpoint("10.89.42.11", 8000), 9000)
    assert found.openai == Endpoint("10.89.42.11", 9000)
    assert str(found) == "10.89.42.11:8000 (/v1 on 9000)"
    assert Instance(Endpoint("10.89.42.11", 8000)).openai is None


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not json",
        b"[]",
        json.dumps({"host": "worker1", "http_port": 8000}).encode(),
        json.dumps({**ZNODE, "ip": "worker1"}).encode(),
        json.dumps({**ZNODE, "openai_port": 0}).encode(),
        json.dumps({**ZNODE, "openai_port": 70000}).encode(),
        json.dumps({**ZNODE, "openai_port": "9000"}).encode(),
        json.dumps({**ZNODE, "openai_port": True}).encode(),
        b"\xff",
    ],
)
def test_znode_rejects_others(data: bytes) -> None:
    with pytest.raises(SourceError, match="not an instance znode"):
        parse_znode(data)
