"""The control loop, driven tick by tick with a scripted RM and scripted scrapes: scaling, scale to
zero and wake, drains, registration, each model's figures (tarn.controller.metrics and the
dashboard render them); and a view it cannot trust (issue 11): an RM that restarts, fails over or
has not heard from the AM yet answers a stub, an error or nothing, and none of these may
deregister a serving instance, flex, decommission or drop a drain.

The doubles are tests/support/controller.py's. The real RM, ZooKeeper and Triton are exercised by
tests/e2e/test_controller.py on the lab.
"""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tarn.activator.demand import Report
from tarn.controller.dashboard import render_dashboard
from tarn.controller.metrics import metrics_registry, render
from tarn.controller.observe import UNREPORTED_GRACE_S
from tarn.errors import ClusterError
from tests.support.controller import STUB, Lab, Registry, make


def test_load_scales_up_after_the_cooldown_then_idle_drains_and_decommissions() -> None:
    lab = make(instances=2)
    lab.scraper.inflight = {"triton-0": 6.0, "triton-1": 6.0}  # load 1.5 each
    lab.ticks(3)
    assert lab.rm.calls == []  # a new controller first waits a cooldown (it may be a restart)
    lab.ticks(4)
    assert lab.rm.calls == [("flex", 4)]  # 2 x 1.5 = 3.0 instance-loads -> 6 at mid-band, capped at 4
    lab.scraper.inflight = {"triton-0": 0.0, "triton-1": 0.0, "triton-2": 0.0, "triton-3": 3.0}
    lab.ticks(10)
    # mean 0.19 < 0.2: 0.75 instance-loads need 2 at mid-band; the busy one and the oldest stay
    assert lab.rm.calls[1] == ("decommission", ["triton-1", "triton-2"])
    assert lab.controller.snapshot.target == 2
    assert lab.rm.target == 2
    assert [e.direction for e in lab.controller.snapshot.history] == ["down", "up"]


def test_idle_for_the_grace_drains_to_zero_and_held_requests_wake_it_at_once() -> None:
    lab = make(instances=1, min_instances=0, scale_to_zero_after_s=20)
    lab.scraper.inflight = {"triton-0": 1.0}  # serving: the idle clock does not run
    lab.ticks(15)
    assert lab.rm.calls == []
    lab.scraper.inflight = {}
    lab.ticks(14)  # 20 s without a request, then the drain
    assert lab.rm.calls == [("decommission", ["triton-0"])]
    snap = lab.controller.snapshot
    assert (snap.target, snap.running, snap.history[0].target_to) == (0, 0, 0)
    lab.ticks(30)
    assert lab.rm.calls == [("decommission", ["triton-0"])]  # no request, no wake
    assert "scaled to zero<b>yes</b>" in render_dashboard(lab.controller.snapshot)
    lab.controller.note_demand(Report(held=50, oldest_s=0.1, at=0.0))
    lab.ticks(1)  # one tick after the report, no cooldown
    assert lab.rm.calls[-1] == ("flex", 1)
    assert lab.controller.snapshot.held == 50
    text = render(metrics_registry(lab.controller, dict)).decode()
    figures = {s.name: s.value for family in text_string_to_metric_families(text) for s in family.samples}
    assert figures["tarn_requests_held"] == 50
    assert figures["tarn_requests_held_oldest_seconds"] == 0.1
    assert figures["tarn_scaled_to_zero"] == 0  # the flex to 1 is under way
    assert figures["tarn_demand_reports_total"] == 1
    assert "requests held<b>50</b>" in render_dashboard(lab.controller.snapshot)
    assert lab.controller.snapshot.history[0].reason.startswith("50 request(s) held")


def test_held_requests_call_off_a_drain_to_zero() -> None:
    lab = make(instances=1, min_instances=0, scale_to_zero_after_s=20)
    for _tick in range(15):  # idle for the grace: the drain to zero begins
        lab.ticks(1)
        if lab.controller.snapshot.instances[0].state == "DRAINING":
            break
    assert lab.controller.snapshot.instances[0].state == "DRAINING"
    lab.controller.note_demand(Report(held=3))  # a request came while it drained
    lab.ticks(1)
    snap = lab.controller.snapshot
    assert (snap.instances[0].state, snap.instances[0].registered) == ("READY", True)  # serving again
    lab.ticks(3)
    assert lab.rm.calls == []  # nothing removed


def test_a_stale_demand_report_wakes_nothing() -> None:
    lab = make(instances=0, min_instances=0, scale_to_zero_after_s=20)
    lab.controller.note_demand(Report(held=5))
    lab.clock[0] += 11.0  # older than FRESH_S: its activator stopped reporting
    lab.ticks(1)
    assert lab.rm.calls == []
    assert lab.controller.snapshot.held == 0


def test_a_drained_instance_leaves_discovery_before_it_is_removed() -> None:
    lab = make(instances=2, cooldown_ms=0)
    lab.ticks(7)  # idle: 2 -> 1, the victim drains first
    states = {i.instance: (i.state, i.registered) for i in lab.controller.snapshot.instances}
    assert states == {"triton-0": ("READY", True), "triton-1": ("DRAINING", False)}
    assert lab.rm.calls == []
    lab.ticks(3)
    assert lab.rm.calls == [("decommission", ["triton-1"])]


def test_an_unready_instance_is_not_registered() -> None:
    lab = make(instances=2)
    lab.scraper.down = {"triton-1"}
    lab.ticks(2)
    views = {i.instance: (i.state, i.registered) for i in lab.controller.snapshot.instances}
    assert views == {"triton-0": ("READY", True), "triton-1": ("STARTING", False)}


def test_an_instance_unready_past_the_bound_is_replaced_counted_and_shown() -> None:
    lab = make(instances=2, replace_unready_after_s=30)
    lab.scraper.inflight = {"triton-0": 2.0, "triton-2": 2.0}  # load within the band: no scaling
    lab.scraper.down = {"triton-1"}  # a hung Triton: the controller's probe and YARN's both fail
    lab.rm.unready = {"triton-1"}
    lab.ticks(15)  # first seen unready 28 s ago: within the bound
    assert lab.rm.calls == []
    text = render(metrics_registry(lab.controller, dict)).decode()
    unready = {
        s.labels["instance"]: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "tarn_container_unready_seconds"
    }
    assert unready == {"triton-0": 0.0, "triton-1": 28.0}
    lab.ticks(2)  # 30 s: decommissioned; once YARN accepted, the count flexed back
    assert lab.rm.calls == [("decommission", ["triton-1"]), ("flex", 2)]
    assert lab.rm.names == ["triton-0", "triton-2"]
    snap = lab.controller.snapshot
    [event] = snap.history
    assert (event.direction, event.target_from, event.target_to) == ("replace", 2, 2)
    assert event.reason.startswith("triton-1 unready for 30 s (--replace-unready-after 30")
    lab.ticks(3)
    assert len(lab.rm.calls) == 2  # nothing more: the new instance serves
    text = render(metrics_registry(lab.controller, dict)).decode()
    figures = {s.name: s.value for family in text_string_to_metric_families(text) for s in family.samples}
    assert figures["tarn_replaced_instances_total"] == 1.0
    assert "triton-1 unready for 30 s" in render_dashboard(lab.controller.snapshot)


def test_no_registration_before_the_rm_reports_an_address() -> None:
    lab = make(instances=2)
    lab.rm.no_ip = {"triton-1"}
    lab.ticks(2)
    views = {i.instance: (i.ip, i.registered) for i in lab.controller.snapshot.instances}
    assert views == {"triton-0": ("127.0.0.1", True), "triton-1": ("", False)}
    lab.rm.no_ip = set()
    lab.ticks(1)
    assert all(i.registered for i in lab.controller.snapshot.instances)


def test_operator_drain_and_undrain() -> None:
    lab = make(instances=2, cooldown_ms=600_000)
    lab.ticks(1)
    assert lab.controller.drain("triton-0")
    assert not lab.controller.drain("triton-9")
    lab.ticks(3)
    assert lab.controller.drained("triton-0")
    assert [i.registered for i in lab.controller.snapshot.instances] == [False, True]
    assert lab.controller.undrain("triton-0")
    lab.ticks(1)
    assert [i.registered for i in lab.controller.snapshot.instances] == [True, True]
    assert lab.rm.calls == []


def test_an_operator_drain_ends_when_the_instance_restarts() -> None:
    lab = make(instances=1, cooldown_ms=600_000)
    lab.ticks(1)
    lab.controller.drain("triton-0")
    lab.scraper.down = {"triton-0"}
    lab.ticks(1)
    lab.scraper.down = set()
    lab.ticks(1)
    assert lab.controller.snapshot.instances[0].registered


def test_each_models_rate_latency_and_totals() -> None:
    lab = make(instances=2)
    lab.scraper.inflight = {"triton-0": 1.0, "triton-1": 3.0}  # 5 and 15 requests/s, 0.2 s each
    lab.ticks(3)
    [model] = lab.controller.snapshot.models
    assert (model.model, model.instances) == ("add_one", 2)
    assert model.requests_per_s == pytest.approx(20.0)
    assert model.latency_s == pytest.approx(0.2)
    assert model.queue_s == pytest.approx(0.02)
    assert lab.controller.counters.models["add_one"].ok == pytest.approx(80.0)  # 2 intervals x 40
    text = render(metrics_registry(lab.controller, dict)).decode()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert samples[("tarn_model_requests_total", (("model", "add_one"), ("outcome", "success")))] == 80.0
    assert samples[("tarn_model_request_duration_seconds_count", (("model", "add_one"),))] == 80.0
    assert samples[("tarn_model_request_duration_seconds_sum", (("model", "add_one"),))] == pytest.approx(
        16.0
    )
    assert samples[("tarn_model_queue_duration_seconds_sum", (("model", "add_one"),))] == pytest.approx(1.6)
    assert samples[("tarn_model_instances", (("model", "add_one"),))] == 2.0
    quantile = ("tarn_model_request_duration_seconds", (("model", "add_one"), ("quantile", "0.99")))
    assert samples[quantile] == 0.4
    assert ("tarn_model_queue_duration_seconds", (("model", "add_one"), ("quantile", "0.5"))) not in samples


def test_the_dashboard_shows_each_models_figures() -> None:
    lab = make(instances=2)
    lab.scraper.inflight = {"triton-0": 1.0, "triton-1": 3.0}
    lab.ticks(3)
    page = render_dashboard(lab.controller.snapshot)
    models = page[page.index("<h2>Models</h2>") :]
    row = models[models.index("<td>add_one</td>") :].split("</tr>", 1)[0]
    cells = "<td>add_one</td><td>triton-0, triton-1</td><td>20.0</td><td>0.0</td>"
    latency = "<td>150.0 ms</td><td>400.0 ms</td><td>200.0 ms</td><td>50.0 ms</td><td>20.0 ms</td>"
    assert row == cells + latency


# ---- a view it cannot trust


def with_registry(instances: int, **overrides: Any) -> tuple[Lab, Registry]:
    lab = make(instances=instances, **overrides)
    registry = Registry()
    lab.controller._registry = registry  # the loop's registry seam (a real ZooKeeper: tests/e2e)
    return lab, registry


def answer(lab: Lab, reply: Any) -> None:
    """From now on the RM answers ``reply`` (a service JSON, None, or an exception to raise)."""

    def service(name: str) -> Any:
        if isinstance(reply, Exception):
            raise reply
        return reply

    lab.rm.service = service  # type: ignore[method-assign]


@pytest.mark.parametrize(
    "reply", [STUB, None, ClusterError("connection refused")], ids=["stub", "not found", "error"]
)
def test_an_untrusted_view_changes_nothing(reply: Any) -> None:
    lab, registry = with_registry(instances=2, cooldown_ms=0)
    lab.ticks(2)
    before = lab.controller.snapshot
    assert sorted(registry.znodes) == ["c-triton-0", "c-triton-1"]
    real = lab.rm.service
    answer(lab, reply)
    lab.ticks(10)  # idle: a trusted view would have drained one and decommissioned it by now
    snap = lab.controller.snapshot
    assert snap.state == "UNKNOWN"
    assert "nothing changed" in snap.problems[0]
    assert snap.instances == before.instances  # discovery and the API keep serving what was seen
    assert sorted(registry.znodes) == ["c-triton-0", "c-triton-1"]
    assert lab.rm.calls == []  # no flex, no decommission
    lab.rm.service = real  # type: ignore[method-assign]
    lab.ticks(1)
    assert lab.controller.snapshot.state == "STABLE"
    assert all(i.registered for i in lab.controller.snapshot.instances)


def test_a_drain_waits_out_an_untrusted_view() -> None:
    lab = with_registry(instances=2, cooldown_ms=0)[0]
    lab.ticks(7)  # idle: 2 -> 1, triton-1 drains
    assert lab.controller.snapshot.drains["triton-1"].remove
    real = lab.rm.service
    answer(lab, STUB)
    lab.ticks(5)
    assert lab.rm.calls == []
    assert "triton-1" in lab.controller.snapshot.drains  # not forgotten
    lab.rm.service = real  # type: ignore[method-assign]
    lab.ticks(2)
    assert lab.rm.calls == [("decommission", ["triton-1"])]


def test_an_operator_drain_asked_during_an_untrusted_view_applies_after() -> None:
    lab, registry = with_registry(instances=2, cooldown_ms=600_000)
    lab.ticks(1)
    real = lab.rm.service
    answer(lab, STUB)
    lab.ticks(1)
    assert lab.controller.drain("triton-0")
    lab.ticks(2)
    assert "c-triton-0" in registry.znodes
    lab.rm.service = real  # type: ignore[method-assign]
    lab.ticks(1)
    assert "c-triton-0" not in registry.znodes
    assert lab.controller.snapshot.drains["triton-0"].remove is False


def test_an_instance_keeps_its_address_while_the_rm_omits_it() -> None:
    lab, registry = with_registry(instances=2)
    lab.ticks(2)
    lab.rm.no_ip = {"triton-1"}  # e.g. a relaunched AM reporting recovered containers
    lab.ticks(3)
    views = {i.instance: (i.ip, i.registered) for i in lab.controller.snapshot.instances}
    assert views == {"triton-0": ("127.0.0.1", True), "triton-1": ("127.0.0.1", True)}
    assert sorted(registry.znodes) == ["c-triton-0", "c-triton-1"]


def test_an_instance_the_rm_leaves_out_stays_while_it_serves_and_nothing_scales() -> None:
    """A relaunched AM lists its recovered containers one by one (issue 11: killing the AM
    withdrew both instances for ~2 s)."""
    lab, registry = with_registry(instances=2, cooldown_ms=0)
    lab.ticks(2)
    lab.rm.unlisted = {"triton-0", "triton-1"}
    lab.ticks(10)  # idle: a full view would have drained one and decommissioned it by now
    views = {i.instance: (i.yarn_state, i.registered) for i in lab.controller.snapshot.instances}
    assert views == {"triton-0": ("UNREPORTED", True), "triton-1": ("UNREPORTED", True)}
    assert sorted(registry.znodes) == ["c-triton-0", "c-triton-1"]
    assert lab.rm.calls == []
    assert "lacks triton-0, triton-1, still serving" in lab.controller.snapshot.problems[0]
    lab.rm.unlisted = set()
    lab.ticks(8)
    assert lab.rm.calls == [("decommission", ["triton-1"])]  # a full view again: idle scales down


def test_an_unlisted_instance_that_stops_answering_is_withdrawn() -> None:
    lab, registry = with_registry(instances=2)
    lab.ticks(2)
    lab.rm.unlisted = {"triton-1"}
    lab.ticks(1)
    assert "c-triton-1" in registry.znodes
    lab.scraper.down = {"triton-1"}  # its container ended: YARN dropped it, Triton is gone
    lab.ticks(1)
    assert sorted(registry.znodes) == ["c-triton-0"]
    lab.scraper.down = set()
    lab.ticks(2)
    assert sorted(registry.znodes) == ["c-triton-0"]  # not listed, not remembered: gone for good


def test_an_instance_unlisted_past_the_grace_is_withdrawn() -> None:
    lab, registry = with_registry(instances=2)
    lab.ticks(2)
    lab.rm.unlisted = {"triton-1"}
    lab.ticks(int(UNREPORTED_GRACE_S / 2))  # two seconds a tick
    assert "c-triton-1" in registry.znodes
    lab.ticks(2)
    assert sorted(registry.znodes) == ["c-triton-0"]


def test_a_decommissioned_instance_is_not_kept_while_its_triton_stops() -> None:
    lab, registry = with_registry(instances=2, cooldown_ms=0)
    lab.ticks(8)  # idle: triton-1 drained and decommissioned; the fake RM drops it at once
    assert lab.rm.calls == [("decommission", ["triton-1"])]
    lab.ticks(2)  # its Triton would still answer here: it must not come back
    assert sorted(registry.znodes) == ["c-triton-0"]
    assert [i.instance for i in lab.controller.snapshot.instances] == ["triton-0"]


def test_a_container_yarn_owes_for_a_minute_is_asked_for_by_a_flex_up_and_back() -> None:
    # issue 47: the service AM lost the relaunch request of triton-1 (docs/recovery.md); the RM
    # counts 2 instances and lists one container.
    lab = make(instances=2)
    lab.scraper.inflight = {"triton-0": 2.0}  # load within the band: no scaling
    lab.rm.unlisted = {"triton-1"}
    lab.ticks(29)  # owed 56 s
    assert lab.rm.calls == []
    lab.ticks(2)  # a minute
    assert lab.rm.calls == [("flex", 3), ("flex", 2)]
    assert lab.rm.target == 2
    assert "asked again" in str(lab.controller.snapshot.decision)
    lab.ticks(29)
    assert len(lab.rm.calls) == 2  # YARN's turn for a minute
    lab.rm.unlisted = set()  # placed
    lab.ticks(40)
    assert len(lab.rm.calls) == 2  # nothing owed, nothing asked
