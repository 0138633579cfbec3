"""The RM client: failover between RM URLs and reading GPU counts, against loopback servers."""

from __future__ import annotations

import socket
from collections.abc import Iterator, Mapping
from http.server import ThreadingHTTPServer

import pytest

from tarn.clients.resourcemanager import ResourceManager, node_gpus
from tarn.errors import ClusterError
from tests.support.loopback import QuietHandler, reply_json, reply_text, serve, url

INFO = {"clusterInfo": {"haState": "ACTIVE", "state": "STARTED"}}


def serve_json(
    status: int, body: Mapping[str, object], headers: dict[str, str] | None = None
) -> ThreadingHTTPServer:
    class Handler(QuietHandler):
        def do_GET(self) -> None:
            reply_json(self, status, body, headers)

    return serve(Handler)


def closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture
def active() -> Iterator[ThreadingHTTPServer]:
    server = serve_json(200, INFO)
    yield server
    server.shutdown()


@pytest.fixture
def standby() -> Iterator[ThreadingHTTPServer]:
    server = serve_json(307, {}, {"Location": "http://elsewhere:8088/"})
    yield server
    server.shutdown()


def test_fails_over_from_a_dead_rm_and_remembers_the_active_one(active: ThreadingHTTPServer) -> None:
    rm = ResourceManager([closed_port(), url(active)], user="tarn", timeout=2)
    assert rm.cluster_info()["haState"] == "ACTIVE"
    assert rm._urls[0] == url(active)


def test_skips_a_standby_rm(standby: ThreadingHTTPServer, active: ThreadingHTTPServer) -> None:
    rm = ResourceManager([url(standby), url(active)], user="tarn", timeout=2)
    assert rm.cluster_info()["state"] == "STARTED"


def test_no_active_rm_is_a_cluster_error_naming_each_url(standby: ThreadingHTTPServer) -> None:
    dead = closed_port()
    rm = ResourceManager([dead, url(standby)], user="tarn", timeout=2)
    with pytest.raises(ClusterError, match="no active ResourceManager") as raised:
        rm.cluster_info()
    assert dead in str(raised.value)
    assert "standby" in str(raised.value)


def test_needs_at_least_one_url() -> None:
    with pytest.raises(ValueError, match="at least one"):
        ResourceManager([], user="tarn")


def resources(gpu: int | None) -> dict[str, object]:
    infos = [{"name": "memory-mb", "value": 4096}, {"name": "vcores", "value": 4}]
    if gpu is not None:
        infos.append({"name": "yarn.io/gpu", "value": gpu})
    return {"resourceInformations": {"resourceInformation": infos}}


@pytest.mark.parametrize(
    ("capacity", "used", "expected_total", "expected_used"), [(2, 1, 2, 1), (None, None, 0, 0)]
)
def test_node_gpus(capacity: int | None, used: int | None, expected_total: int, expected_used: int) -> None:
    node = {"totalResource": resources(capacity), "usedResource": resources(used)}
    assert node_gpus(node) == expected_total
    assert node_gpus(node, "usedResource") == expected_used


def test_kerberos_needs_no_python_package(monkeypatch: pytest.MonkeyPatch) -> None:
    """SPNEGO is tarn.stdlib.kerberos's (ctypes over MIT's GSSAPI): nothing to pip install."""
    import sys

    from tarn.clients.spnego import requests_auth

    for package in ("gssapi", "requests_gssapi"):
        monkeypatch.setitem(sys.modules, package, None)  # as if not installed
    assert requests_auth() is not None


def test_a_service_read_while_yarn_rewrites_it_is_asked_again() -> None:
    answers = [
        (500, {"diagnostics": "No content to map due to end-of-input"}),
        (500, {"diagnostics": "No content to map due to end-of-input"}),
        (200, {"name": "svc", "state": "STABLE"}),
    ]

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            reply_json(self, *answers.pop(0))

    server = serve(Handler)
    sleeps: list[float] = []
    try:
        rm = ResourceManager([url(server)], user="tarn", sleep=sleeps.append)
        assert rm.service("svc") == {"name": "svc", "state": "STABLE"}
        assert sleeps == [0.5, 1.0]
        answers.extend([(500, {"diagnostics": "broken"})] * 4)
        with pytest.raises(ClusterError, match="GET service svc answered 500: broken"):
            rm.service("svc")
    finally:
        server.shutdown()


# Hadoop's /conf servlet answers XML whatever the client asks (what a Kerberized 3.4.2 RM sent).
CONF_PAGE = (
    '<?xml version="1.0" encoding="UTF-8" standalone="no"?><configuration>\n'
    "<property><name>yarn.resource-types</name><value>yarn.io/gpu</value><final>false</final>"
    "<source>resource-types.xml</source></property>\n"
    "<property><name>hadoop.security.token.service.use_ip</name><value>true</value><final>false</final>"
    "<source>core-default.xml</source></property>\n</configuration>"
)


@pytest.mark.parametrize(
    ("status", "body", "problem"),
    [
        (200, CONF_PAGE, None),
        (403, "denied", "GET /conf answered 403"),
        (200, "<html>a proxy's page", "GET /conf: not a Hadoop configuration"),
    ],
)
def test_the_rms_configuration(status: int, body: str, problem: str | None) -> None:
    class Handler(QuietHandler):
        def do_GET(self) -> None:
            assert self.path.startswith("/conf")
            reply_text(self, status, body)

    server = serve(Handler)
    try:
        rm = ResourceManager([url(server)], user="tarn", timeout=2)
        if problem is None:
            assert rm.configuration() == {
                "yarn.resource-types": "yarn.io/gpu",
                "hadoop.security.token.service.use_ip": "true",
            }
        else:
            with pytest.raises(ClusterError, match=problem):
                rm.configuration()
    finally:
        server.shutdown()


@pytest.mark.parametrize(
    ("body", "ids"),
    [
        ({"appAttempts": {"appAttempt": [{"id": 1, "appAttemptState": "FAILED"}, {"id": 2}]}}, [1, 2]),
        ({"appAttempts": None}, []),  # an application the RM has not started yet
    ],
)
def test_an_applications_attempts(body: Mapping[str, object], ids: list[int]) -> None:
    server = serve_json(200, body)
    try:
        attempts = ResourceManager([url(server)], user="tarn", timeout=2).app_attempts("application_1_0001")
        assert [a["id"] for a in attempts] == ids
    finally:
        server.shutdown()
