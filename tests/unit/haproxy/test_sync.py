"""One sync round (tarn.haproxy.sync) over a fake Runtime API: the plan applied, an overflow
reported once, HAProxy away and back; the Triton and OpenAI backends from one source."""

from __future__ import annotations

import logging
import threading

import pytest

from tarn.haproxy.plan import AdminState, Command, Endpoint, SetAddress, Slot
from tarn.haproxy.runtime import HaproxyUnavailable, RuntimeApi
from tarn.haproxy.sources import Instance, Instances, front_endpoints
from tarn.haproxy.sync import BackendSync, run

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


class KnownSource:
    """A source that knows one set and stops the loop after its first round."""

    def __init__(self, instances: Instances | None, stop: threading.Event) -> None:
        self.instances = instances
        self.changed = threading.Event()
        self.stop = stop

    def current(self) -> Instances | None:
        self.stop.set()
        return self.instances


def addresses(api: FakeApi) -> set[str]:
    return {str(c.endpoint) for c in api.applied if isinstance(c, SetAddress)}


def slots(prefix: str, port: int) -> list[Slot]:
    return [Slot(f"{prefix}-{n}", Endpoint(PLACEHOLDER_IP, port), AdminState.MAINT) for n in (1, 2)]


def test_one_round_fills_tritons_backend_and_the_fronts() -> None:
    triton, fronts = FakeApi(slots("triton", 8000)), FakeApi(slots("openai", 9000))
    syncs = [BackendSync(triton, "triton_backend"), BackendSync(fronts, "openai_backend", front_endpoints)]
    instances = frozenset({Instance(Endpoint("10.0.0.1", 8000), 9000), Instance(Endpoint("10.0.0.2", 8010))})
    stop = threading.Event()
    run(KnownSource(instances, stop), syncs, stop, repair_interval=0.01)
    assert addresses(triton) == {"10.0.0.1:8000", "10.0.0.2:8010"}  # /v2: every instance
    assert addresses(fronts) == {"10.0.0.1:9000"}  # /v1: the instances that run a front


def test_an_unknown_set_leaves_every_backend_alone() -> None:
    triton, fronts = FakeApi(slots("triton", 8000)), FakeApi(slots("openai", 9000))
    syncs = [BackendSync(triton, "triton_backend"), BackendSync(fronts, "openai_backend", front_endpoints)]
    stop = threading.Event()
    run(KnownSource(None, stop), syncs, stop, repair_interval=0.01)
    assert triton.applied == fronts.applied == []
