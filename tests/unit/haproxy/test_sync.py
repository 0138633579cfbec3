"""One sync round (tarn.haproxy.sync) over a fake Runtime API: the plan applied, an overflow
reported once, HAProxy away and back."""

from __future__ import annotations

import logging

import pytest

from tarn.haproxy.plan import AdminState, Command, Endpoint, Slot
from tarn.haproxy.runtime import HaproxyUnavailable, RuntimeApi
from tarn.haproxy.sync import BackendSync

PLACEHOLDER_IP = "0.0.0.0"  # noqa: S104 - the cfg's address of a free slot, nothing binds it


class FakeApi(RuntimeApi):
    def __init__(self, slots: list[Slot] | Exception) -> None:
        super().__init__("/run/fake.sock")
        self.current = slots
        self.applied: list[Command] = []

    def slots(self, backend: str) -> list[Slot]:
        if isinstance(self.current, Exception):
            raise self.current
        return self.current

    def apply(self, backend: str, planned: Command) -> None:
        self.applied.append(planned)


def test_round_applies_the_plan_and_reports_overflow_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="tarn.haproxy")
    api = FakeApi([Slot("triton-1", Endpoint(PLACEHOLDER_IP, 8000), AdminState.MAINT)])
    sync = BackendSync(api, "triton_backend")
    wanted = frozenset({Endpoint("10.0.0.1", 8000), Endpoint("10.0.0.2", 8000)})
    sync.reconcile(wanted)
    sync.reconcile(wanted)
    assert len(api.applied) == 4  # the fake does not change: the same plan twice
    overflow = [r for r in caplog.records if "no free slot" in r.getMessage()]
    assert len(overflow) == 1
    assert "10.0.0.2:8000" in overflow[0].getMessage()


def test_round_survives_haproxy_away(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="tarn.haproxy")
    api = FakeApi(HaproxyUnavailable("HAProxy's runtime API at /run/fake.sock: No such file or directory"))
    sync = BackendSync(api, "b")
    assert sync.reconcile(frozenset()) is None
    assert sync.reconcile(frozenset()) is None
    api.current = []
    assert sync.reconcile(frozenset()) is not None
    messages = [r.getMessage() for r in caplog.records]
    assert sum("No such file" in m for m in messages) == 1
    assert messages[-1] == "HAProxy answers again on /run/fake.sock"
