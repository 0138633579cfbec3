"""Waiting on the RM: a service YARN gave up (FAILED) ends the wait at once, with YARN's reason."""

from __future__ import annotations

from typing import Any

import pytest

from tarn.errors import ClusterError
from tarn.service.options import Options
from tarn.service.wait import stopped, until, wait_ready

DIAGNOSTICS = (
    "Application application_1_0001 failed 2 times due to AM Container for appattempt_1_0001_000002 "
    "exited with  exitCode: 1\nFailing this attempt."
)


class FailedRM:
    def __init__(self, app: dict[str, Any] | None = None) -> None:
        self.reads = 0
        self._app = {"diagnostics": DIAGNOSTICS} if app is None else app

    def service(self, name: str) -> dict[str, Any]:
        self.reads += 1
        return {"name": name, "id": "application_1_0001", "state": "FAILED", "components": []}

    def app(self, app_id: str) -> dict[str, Any]:
        return self._app


def test_a_failed_service_ends_the_wait_at_once_with_yarns_reason() -> None:
    rm = FailedRM()
    with pytest.raises(ClusterError) as raised:
        wait_ready(rm, "demo", 1, Options(timeout=300, poll=0.01))  # type: ignore[arg-type]
    assert rm.reads == 1
    assert str(raised.value) == (
        "service demo FAILED while waiting for service demo: 1 READY Triton instances and the controller: "
        "application_1_0001: Application application_1_0001 failed 2 times due to AM Container for "
        "appattempt_1_0001_000002 exited with exitCode: 1 Failing this attempt."
    )


def test_waiting_for_a_stop_accepts_failed() -> None:
    service = until(FailedRM(), "demo", stopped, "STOPPED", Options(timeout=1, poll=0.01))  # type: ignore[arg-type]
    assert service["state"] == "FAILED"


def test_without_diagnostics_it_says_so() -> None:
    with pytest.raises(ClusterError, match="application_1_0001: YARN gives no reason"):
        wait_ready(FailedRM(app={}), "demo", 1, Options(timeout=1, poll=0.01))  # type: ignore[arg-type]
