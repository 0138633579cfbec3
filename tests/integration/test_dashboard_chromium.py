"""The dashboard's charts in a real headless Chromium: the controller's own loop, API and page
(the ResourceManager and the Triton instances are the unit tests' fakes; the OpenAI fronts answer
with the /metrics text tarn.stdlib.openai.counters writes), the page's script run by the browser,
values read off the rendered DOM. The screenshots are kept in build/artifacts."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tarn.controller.server import Api, serve
from tarn.stdlib.api_token import Secret
from tarn.stdlib.openai.counters import Counters
from tests.support.chromium import CHROMIUM
from tests.support.controller import TOKEN, FrontScraper, Lab, make

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "build" / "artifacts"


@pytest.fixture
def scaled() -> Iterator[tuple[Lab, str]]:
    """A service of 2 under a load that makes the controller scale up, served on loopback."""
    lab = make(instances=2)
    lab.scraper.inflight = {"triton-0": 1.0, "triton-1": 1.0}  # 5 requests/s each, load 0.25
    lab.ticks(4)
    lab.scraper.inflight = {"triton-0": 6.0, "triton-1": 6.0}  # load 1.5 each: above --scale-up
    lab.ticks(6)
    assert any(e.direction == "up" for e in lab.controller.snapshot.history), "the fake load did not scale"
    server = serve(Api(lab.controller, Secret(TOKEN)), "127.0.0.1", 0)
    try:
        yield lab, f"http://127.0.0.1:{server.server_address[1]}/dashboard?token={TOKEN}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def generating() -> Iterator[tuple[Lab, str]]:
    """A service of 2 whose OpenAI fronts generate for alice and bob, served on loopback."""
    lab = make(instances=2, scraper_type=FrontScraper, openai_port=9000, anti_affinity=False, port_stride=10)
    assert isinstance(lab.scraper, FrontScraper)
    lab.scraper.inflight = {"triton-0": 1.0, "triton-1": 1.0}
    fronts = {"triton-0": Counters(), "triton-1": Counters()}
    lab.scraper.fronts = fronts
    lab.ticks(1)  # the fronts' baselines
    for tick in range(4):  # alice: 7 + 20 tokens a tick on triton-0; bob: one on triton-1, cancelled
        fronts["triton-0"].ended("alice", "tiny_lm", "completed", 7, 20)
        fronts["triton-0"].first_token_after("tiny_lm", 0.04)
        for _token in range(19):
            fronts["triton-0"].between_tokens_took("tiny_lm", 0.02)
        if tick == 0:
            fronts["triton-1"].ended("bob", "tiny_lm", "cancelled", 3, 9)
            fronts["triton-1"].first_token_after("tiny_lm", 0.3)
            fronts["triton-1"].stream_started("tiny_lm")  # still streaming
        lab.ticks(1)
    server = serve(Api(lab.controller, Secret(TOKEN)), "127.0.0.1", 0)
    try:
        yield lab, f"http://127.0.0.1:{server.server_address[1]}/dashboard?token={TOKEN}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def streaming() -> Iterator[str]:
    """A service of 2 the autoscaler scales on its OpenAI fronts' streams, served on loopback."""
    lab = make(
        instances=2, scraper_type=FrontScraper, openai_port=9000, anti_affinity=False, port_stride=10,
        scale_on="streams", scale_up_at=2.5, scale_down_at=0.0,
    )  # fmt: skip
    assert isinstance(lab.scraper, FrontScraper)
    lab.scraper.inflight = {"triton-0": 1.0, "triton-1": 1.0}
    lab.scraper.fronts = {"triton-0": Counters(), "triton-1": Counters()}
    lab.ticks(2)
    server = serve(Api(lab.controller, Secret(TOKEN)), "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/dashboard?token={TOKEN}"
    finally:
        server.shutdown()
        server.server_close()


def browse(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(ARTIFACTS)}
    # virtual time: the page's fetches and drawing finish before the DOM is dumped
    command = [*CHROMIUM, "--virtual-time-budget=5000", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=True, env=env)


def attribute(dom: str, pattern: str) -> list[Any]:
    """The pattern's groups in the DOM: strings, or tuples with several groups."""
    return re.findall(pattern, dom)


def test_the_charts_show_the_rise_and_the_scale_event(scaled: tuple[Lab, str]) -> None:
    lab, url = scaled
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "dashboard-charts.png"
    shot.unlink(missing_ok=True)
    dom = browse("--dump-dom", url).stdout
    browse(f"--screenshot={shot}", "--window-size=1280,1600", url)

    charts = attribute(dom, r'data-chart="([a-z]+)"')
    assert charts == ["instances", "load", "requests", "latency", "gpu"]
    points = int(attribute(dom, r'id="charts"[^>]*data-points="(\d+)"')[0])
    assert points == len(lab.controller.timeline.points()) == 10
    # the instance chart ends at the raised target; the scale-up is drawn as an event line
    target = lab.controller.snapshot.target
    assert target > 2
    assert attribute(dom, r'data-series="target" data-last="(\d+)"') == [str(target)]
    ups = attribute(dom, r'class="event"[^>]*data-direction="up" data-from="(\d+)" data-to="(\d+)"')
    assert ups
    assert ups[-1] == ("2", str(target))
    assert attribute(dom, r'data-threshold="scale-up" data-value="([\d.]+)"') == ["0.8"]
    assert "<h3>Load (mean; scale-up and scale-down thresholds dashed)</h3>" in dom
    note = "autoscaler: load per ready instance (mean, 0..1); more instances above 0.8, fewer below 0.2"
    assert note in dom
    # the per-model table: add_one's request rate as the fake instances served it
    served = sum(6.0 * 10 / 2.0 for _i in range(2))  # 10 requests per unit in flight per 2 s tick
    row = dom[dom.index("<h2>Models</h2>") :]
    rate = float(re.search(r"<td>add_one</td><td>[^<]*</td><td>([\d.]+)</td>", row)[1])  # type: ignore[index]
    assert rate == pytest.approx(served, rel=0.2)
    assert TOKEN not in dom.replace(url, "")
    assert shot.stat().st_size > 20_000
    print(f"\n[dashboard] {points} points, target {target}, add_one {rate:.1f} req/s; screenshot {shot}")


def test_the_llm_section_shows_the_tokens_the_fronts_counted(generating: tuple[Lab, str]) -> None:
    _lab, url = generating
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "dashboard-llm.png"
    shot.unlink(missing_ok=True)
    dom = browse("--dump-dom", url).stdout
    browse(f"--screenshot={shot}", "--window-size=1280,2200", url)

    # the tables, swapped in by the script from /dashboard: what the fronts' text said, summed
    section = dom[dom.index("LLM (OpenAI API)") :]
    users = re.findall(r"<tr><td>(\w+)</td><td>tiny_lm</td>" + r"<td>(\d+)</td>" * 3, section)
    assert users == [("alice", "28", "80", "4"), ("bob", "3", "9", "1")]
    model = re.search(r"<td>tiny_lm</td><td>(\d+)</td><td>([\d.]+) ms</td><td>([\d.]+) ms</td>", section)
    assert model is not None
    assert model[1] == "1"  # bob's stream, still in flight
    assert 25 <= float(model[2]) <= 50  # p50: alice's four at 40 ms, in the (25, 50] ms bucket
    assert 250 <= float(model[3]) <= 500  # p99: bob's 300 ms, in the (250, 500] ms bucket
    containers = dom[dom.index("<h2>Containers</h2>") : dom.index("<h2>Models</h2>")]
    assert "<th>streams</th>" in containers
    # the charts of /dashboard/data: tokens per second over the last 2 s tick, streams now
    charts = attribute(dom, r'data-chart="([a-z]+)"')
    assert charts == ["instances", "load", "requests", "latency", "gpu", "tokens", "streams", "ttft"]
    assert attribute(dom, r'data-series="completion_tokens_per_s" data-last="([\d.]+)"') == ["10"]
    assert attribute(dom, r'data-series="prompt_tokens_per_s" data-last="([\d.]+)"') == ["3.5"]
    assert attribute(dom, r'data-series="streams" data-last="(\d+)"') == ["1"]
    assert TOKEN not in dom.replace(url, "")
    assert shot.stat().st_size > 20_000
    print(f"\n[dashboard] LLM section: {users}; screenshot {shot}")


def test_the_load_thresholds_are_drawn_only_when_the_load_is_scaled_on(streaming: str) -> None:
    dom = browse("--dump-dom", streaming).stdout
    assert attribute(dom, r'data-chart="([a-z]+)"')[1] == "load"  # drawn, from /dashboard/data
    assert "data-threshold" not in dom, "the load's thresholds are not the ones in force"
    assert "<h3>Load (mean)</h3>" in dom
    note = (
        "autoscaler: OpenAI fronts' streams in flight per ready instance (mean); more instances above "
        "2.5, never fewer on this signal (--scale-down-at 0)"
    )
    assert note in dom
