"""`tarn scale` / `tarn_scale`: up flexes; down drains the controller's choice of victims through
its API (a real HTTP server on loopback, the controller's own code), then decommissions exactly
those; without a controller it flexes and says so."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tarn import service
from tarn.controller.server import Api, serve
from tarn.spec import CONTROLLER, Artifacts, build_service_spec, component_of
from tarn.stdlib.api_token import Secret
from tarn.stdlib.config import TarnConfig
from tests.support.controller import FakeRm, make

TOKEN = "scale-token"  # noqa: S105 - a test token


class RmWithController(FakeRm):
    """FakeRm plus the controller component the CLI looks the controller up in."""

    def __init__(self, instances: int, am_port: int | None) -> None:
        super().__init__(instances)
        self.am_port = am_port

    def service(self, name: str) -> dict[str, Any]:
        found = super().service(name)
        if self.am_port is not None:
            found["components"][0] |= {
                "configuration": controller_configuration(self.am_port),
                "containers": [{"hostname": "127.0.0.1", "ip": "127.0.0.1", "state": "READY"}],
            }  # fmt: skip
        return found


def controller_configuration(am_port: int) -> dict[str, Any]:
    """The controller's configuration as the spec builder writes it (the settings TARN reads back)."""
    config = TarnConfig(
        model_repository="hdfs:///models", runtime="process", am_port=am_port, drain_timeout_s=0
    )
    spec = build_service_spec(config, Artifacts(payload="hdfs:///t/tarn.pyz", launcher="hdfs:///t/l.pyz"))
    return dict((component_of(spec, CONTROLLER) or {})["configuration"])


@pytest.fixture
def controller_port() -> Iterator[tuple[int, Any]]:
    lab = make(instances=3, cooldown_ms=600_000, drain_timeout_s=0)
    lab.scraper.inflight = {"triton-0": 1.0, "triton-1": 0.2, "triton-2": 0.0}
    lab.ticks(2)
    server = serve(Api(lab.controller, Secret(TOKEN)), "127.0.0.1", 0)
    yield server.server_address[1], lab
    server.shutdown()


def test_down_drains_the_least_loaded_then_decommissions_exactly_them(
    controller_port: tuple[int, Any],
) -> None:
    port, lab = controller_port
    rm = RmWithController(3, port)
    logged: list[str] = []
    options = service.Options(token=Secret(TOKEN), log=logged.append)
    # The controller's loop must tick for a drain to finish: the scripted one runs in this thread.
    answer = run_with_ticks(lab, lambda: service.scale(rm, "svc", 1, options))  # type: ignore[arg-type]
    assert rm.calls == [("decommission", ["triton-2", "triton-1"])]
    assert answer == "decommissioned triton-2, triton-1 after draining them"
    assert logged == ["triton-2 drained", "triton-1 drained"]


def test_up_only_flexes() -> None:
    rm = RmWithController(1, None)
    assert service.scale(rm, "svc", 3, service.Options()) == "ok"  # type: ignore[arg-type]
    assert rm.calls == [("flex", 3)]


def test_down_without_a_controller_flexes_and_says_so() -> None:
    rm = RmWithController(3, None)
    answer = service.scale(rm, "svc", 2, service.Options())  # type: ignore[arg-type]
    assert rm.calls == [("flex", 2)]
    assert "without draining" in answer


def run_with_ticks(lab: Any, action: Any) -> Any:
    done = threading.Event()
    result: list[Any] = []

    def ticker() -> None:
        while not done.is_set():
            lab.ticks(1)
            done.wait(0.05)

    thread = threading.Thread(target=ticker, daemon=True)
    thread.start()
    try:
        result.append(action())
    finally:
        done.set()
        thread.join()
    return result[0]
