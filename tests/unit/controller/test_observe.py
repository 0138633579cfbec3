"""What the controller observes (tarn.controller.observe): whether the RM's answer can be trusted
(a stub, an error or nothing cannot: issue 11; the loop's side is in test_loop.py), addresses kept
while the RM omits them, and a scrape that registers a container only when the Triton on its port
is its own: an instance stopped a moment ago on the same node and port (scale to zero and back)
answers ready until the NodeManager kills it, with another container's id in Triton's server
metadata (--id)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tarn.controller.observe import (
    Container,
    Scraper,
    answered_by,
    application_of_container,
    containers_of,
    distrust,
    with_known_addresses,
)
from tarn.stdlib.config import parse_config
from tests.support.controller import STUB


class OldTriton(BaseHTTPRequestHandler):
    """Ready, metrics, and metadata naming the container that started it."""

    protocol_version = "HTTP/1.1"
    server_id = "container_1_0001_01_000003"

    def do_GET(self) -> None:
        body = (
            json.dumps({"name": OldTriton.server_id, "version": "2.51.0"}).encode()
            if self.path == "/v2"
            else b""
        )
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def port() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), OldTriton)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def container(container_id: str, port: int) -> Container:
    return Container("triton-1", container_id, "w", "127.0.0.1", "RUNNING", port, port + 1, port)


def test_a_port_answered_by_another_container_is_not_ready(port: int) -> None:
    scraper = Scraper(workers=2)
    try:
        new = container("container_1_0001_01_000004", port)
        assert not scraper.scrape_all([new], set())[new.container_id].ready
        own = container(OldTriton.server_id, port)
        assert scraper.scrape_all([own], set())[own.container_id].ready
    finally:
        scraper.close()


@pytest.mark.parametrize(
    ("status", "body", "own"),
    [
        (200, b'{"name": "container_9"}', True),
        (200, b'{"name": "container_8"}', False),
        (200, b'{"name": "triton"}', True),  # Triton's default: a launcher without --id
        (404, b"", True),
        (200, b"not json", True),
        (200, b"[]", True),
    ],
)
def test_answered_by(status: int, body: bytes, own: bool) -> None:
    assert answered_by("container_9", status, body) is own


@pytest.mark.parametrize(
    ("service", "trusted"),
    [
        (None, False),
        (STUB, False),
        ({**STUB, "state": "ACCEPTED"}, False),
        ({"name": "svc", "state": "STOPPED"}, False),
        (
            {
                "name": "svc",
                "state": "STABLE",
                "components": [{"name": "controller", "number_of_containers": 1}],
            },
            False,
        ),
        ({"name": "svc", "state": "STABLE", "components": [{"name": "triton"}]}, False),
        (
            {"name": "svc", "state": "STABLE", "components": [{"name": "triton", "number_of_containers": 0}]},
            True,
        ),
        (
            {"name": "svc", "state": "FLEX", "components": [{"name": "triton", "number_of_containers": 2}]},
            True,
        ),
        (
            {
                "name": "svc",
                "state": "UPGRADING",
                "components": [{"name": "triton", "number_of_containers": 2}],
            },
            True,
        ),
    ],
)
def test_distrust(service: dict[str, Any] | None, trusted: bool) -> None:
    assert (distrust(service) is None) is trusted


def test_with_known_addresses() -> None:
    known = Container("triton-0", "c0", "w1", "10.0.0.1", "READY", 8000, 8001, 8002)
    bare = Container("triton-0", "c0", "", "", "READY", 8000, 8001, 8002)
    other = Container("triton-1", "c1", "", "", "READY", 8010, 8011, 8012)
    assert with_known_addresses([bare, other], {"c0": known}) == [known, other]


@pytest.mark.parametrize(
    ("flags", "ports"),
    [
        ([], [(8000, None), (8000, None)]),
        (["--openai-port", "9000"], [(8000, 9000), (8000, 9000)]),
        (
            ["--no-anti-affinity", "--port-stride", "10", "--openai-port", "9000"],
            [(8000, 9000), (8020, 9020)],
        ),
    ],
    ids=["no front", "a front per node", "fronts shifted like Triton"],
)
def test_containers_carry_their_fronts_port(flags: list[str], ports: list[tuple[int, int | None]]) -> None:
    config = parse_config(["--model-repository", "/m", "--runtime", "process", *flags], {})
    service = {
        "components": [
            {
                "name": "triton",
                "containers": [
                    {
                        "component_instance_name": f"triton-{n}",
                        "id": f"c{n}",
                        "ip": "10.0.0.1",
                        "state": "READY",
                    }
                    for n in (0, 2)
                ],
            }
        ]
    }
    assert [(c.http_port, c.openai_port) for c in containers_of(service, config)] == ports


@pytest.mark.parametrize(
    ("container_id", "application"),
    [
        ("container_e17_1410901177871_0001_01_000005", "application_1410901177871_0001"),
        ("container_1764000000000_12345_02_000001", "application_1764000000000_12345"),
        ("", None),
        ("container_x_1_01_000001", None),
        ("container_17_1410901177871_0001_01_000005", None),  # six parts need the epoch's "e"
        ("application_1410901177871_0001", None),
    ],
)
def test_application_of_container(container_id: str, application: str | None) -> None:
    assert application_of_container(container_id) == application


def test_a_controller_never_acts_on_a_service_of_another_application() -> None:
    service = {"name": "svc", "id": "application_2_0001", "state": "STABLE",
               "components": [{"name": "triton", "number_of_containers": 1}]}  # fmt: skip
    assert distrust(service, "application_2_0001") is None
    assert distrust(service, None) is None  # outside YARN: nothing to compare
    assert distrust({**service, "id": None}, "application_1_0001") is None  # an RM answer without id
    doubt = str(distrust(service, "application_1_0001"))
    assert ("application_2_0001" in doubt, "application_1_0001" in doubt) == (True, True)
