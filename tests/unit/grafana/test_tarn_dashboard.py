"""The shipped Grafana dashboard queries only series the controller's /metrics exposes."""

from __future__ import annotations

import json
import re

from prometheus_client.parser import text_string_to_metric_families

from tarn.controller.metrics import metrics_registry, render
from tarn.stdlib.openai.counters import Counters
from tarn.stdlib.openai.metric_names import FAMILIES
from tests.support import ROOT
from tests.support.controller import FrontScraper, make

DASHBOARD = ROOT / "grafana" / "tarn-dashboard.json"


def exposed_series() -> set[str]:
    """With an OpenAI front that generated once and queued one (admission), so its histograms'
    _bucket samples are there."""
    lab = make(instances=2, scraper_type=FrontScraper, openai_port=9000, anti_affinity=False, port_stride=10)
    assert isinstance(lab.scraper, FrontScraper)
    lab.scraper.inflight = {"triton-0": 1.0}
    front = Counters()
    lab.scraper.fronts = {"triton-0": front}
    lab.ticks(1)  # the front's baseline
    front.ended("alice", "tiny_lm", "completed", 3, 2)
    front.first_token_after("tiny_lm", 0.04)
    front.between_tokens_took("tiny_lm", 0.02)
    front.queued("alice", "tiny_lm", 1)
    front.waited("alice", "tiny_lm", 0.5)
    lab.ticks(2)
    text = render(metrics_registry(lab.controller, dict)).decode()
    return {sample.name for family in text_string_to_metric_families(text) for sample in family.samples} | {
        # families that may be empty without GPUs or failures: declared, so listed by name
        family.name
        for family in text_string_to_metric_families(text)
    }


def test_every_query_names_an_exposed_series() -> None:
    board = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for panel in board["panels"] for t in panel["targets"]]
    names = {name for expr in exprs for name in re.findall(r"\btarn_[a-z_]+", expr)}
    assert names, "the dashboard queries nothing"
    missing = sorted(
        n for n in names if n not in exposed_series() and n.removesuffix("_total") not in exposed_series()
    )
    assert missing == []


def test_the_seeds_metrics_each_have_a_panel() -> None:
    text = DASHBOARD.read_text()
    for name in ("tarn_target_containers", "tarn_running_containers", "tarn_container_load",
                 "tarn_gpu_utilization", "tarn_gpu_memory_used"):  # fmt: skip
        assert name in text, name


def test_the_openai_fronts_series_each_have_a_panel() -> None:
    board = json.loads(DASHBOARD.read_text())
    exprs = " ".join(t["expr"] for panel in board["panels"] for t in panel["targets"])
    for family in [*(f.name for f in FAMILIES), "tarn_container_openai_streams"]:
        assert family in exprs, family
    for quantile in ("0.5", "0.99"):
        buckets = "(rate(tarn_openai_time_to_first_token_seconds_bucket"
        assert f"histogram_quantile({quantile}, sum by (model, le) {buckets}" in exprs
