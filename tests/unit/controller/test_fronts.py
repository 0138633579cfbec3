"""The OpenAI fronts' counters in the controller (tarn.controller.fronts): a front's /metrics text,
as tarn.stdlib.openai.counters writes it, parsed; increases as a table (the baseline, a restart, a
series first seen); then the whole way: fronts' counters scraped by the control loop's ticks, summed
in the controller's /metrics, equal to what the fronts counted, restarts included; and the scraper
reading a front over HTTP."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tarn.controller import fronts, llm
from tarn.controller.fronts import FrontSample, Series, front_deltas, parse_front_metrics, summed
from tarn.controller.metrics import metrics_registry, render
from tarn.controller.observe import Container, Scraper
from tarn.stdlib.api_token import Secret
from tarn.stdlib.openai import metric_names
from tarn.stdlib.openai.counters import Counters, prometheus_text
from tests.support.controller import FrontScraper, Lab, make
from tests.support.exposition import departures


def counted(
    *generations: tuple[str, str, str, int, int], streaming: dict[str, int] | None = None
) -> Counters:
    """A front's counters after ``generations`` (user, model, outcome, prompt, completion)."""
    counters = Counters()
    for user, model, outcome, prompt, completion in generations:
        counters.ended(user, model, outcome, prompt, completion)
        counters.first_token_after(model, 0.04)
        counters.between_tokens_took(model, 0.02)
    for model, streams in (streaming or {}).items():
        for _stream in range(streams):
            counters.stream_started(model)
    return counters


def sample(
    *generations: tuple[str, str, str, int, int], streaming: dict[str, int] | None = None
) -> FrontSample:
    return parse_front_metrics(prometheus_text(counted(*generations, streaming=streaming)))


PROMPT: Series = ("tarn_openai_prompt_tokens_total", (("model", "tiny_lm"), ("user", "alice")))
COMPLETED: Series = (
    "tarn_openai_requests_total",
    (("model", "tiny_lm"), ("outcome", "completed"), ("user", "alice")),
)


def test_a_fronts_text_parses_into_its_series() -> None:
    parsed = sample(("alice", "tiny_lm", "completed", 7, 20), streaming={"tiny_lm": 2})
    assert parsed.counters[PROMPT] == 7
    assert parsed.counters[("tarn_openai_completion_tokens_total", PROMPT[1])] == 20
    assert parsed.counters[COMPLETED] == 1
    ttft = "tarn_openai_time_to_first_token_seconds"
    assert parsed.counters[(f"{ttft}_bucket", (("le", "0.05"), ("model", "tiny_lm")))] == 1
    assert parsed.counters[(f"{ttft}_count", (("model", "tiny_lm"),))] == 1
    assert parsed.streams == {"tiny_lm": 2}
    assert parse_front_metrics("# HELP other x\n# TYPE other gauge\nother 1\n") == FrontSample({}, {})


@pytest.mark.parametrize(
    ("before", "after", "increase"),
    [
        (None, 10.0, None),  # a front's first sample: the baseline
        ({PROMPT: 10.0}, 10.0, 0.0),  # nothing new: kept, so every bucket and counter is in the totals
        ({PROMPT: 10.0}, 25.0, 15.0),
        ({PROMPT: 30.0}, 4.0, 4.0),  # went down: the front restarted, counting from zero since
        ({}, 6.0, 6.0),  # a series first seen (a new user or model) counts whole
    ],
    ids=["baseline", "unchanged", "increase", "restart", "new series"],
)
def test_increases_between_two_samples(
    before: dict[Series, float] | None, after: float, increase: float | None
) -> None:
    previous = None if before is None else FrontSample(before, {})
    assert front_deltas(previous, FrontSample({PROMPT: after}, {})).get(PROMPT) == increase


def test_streams_are_summed_by_model() -> None:
    assert summed([{"a": 2.0}, {}, {"a": 1.0, "b": 3.0}]) == {"a": 3.0, "b": 3.0}


# ---- the whole way: ticks, totals, /metrics


def exposed(lab_controller: object) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = render(metrics_registry(lab_controller, dict)).decode()  # type: ignore[arg-type]
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith(("tarn_openai_", "tarn_container_openai_"))
    }


def front_lab() -> tuple[Lab, FrontScraper]:
    """Two instances with an OpenAI front each, their counters scripted (FrontScraper)."""
    lab = make(instances=2, scraper_type=FrontScraper, openai_port=9000, anti_affinity=False, port_stride=10)
    assert isinstance(lab.scraper, FrontScraper)
    return lab, lab.scraper


def test_the_controller_sums_every_fronts_counters_since_it_started() -> None:
    lab, scraper = front_lab()
    # Before the controller's first look: the baseline, not counted (as Triton's own counters).
    scraper.fronts = {"triton-0": counted(("alice", "tiny_lm", "completed", 5, 5))}
    lab.ticks(1)
    scraper.fronts = {
        "triton-0": counted(
            ("alice", "tiny_lm", "completed", 5, 5), ("alice", "tiny_lm", "completed", 7, 20)
        ),
        "triton-1": counted(("bob", "tiny_lm", "cancelled", 3, 9), streaming={"tiny_lm": 2}),
    }
    lab.ticks(1)  # triton-1's front is seen for the first time: its baseline
    scraper.fronts["triton-1"] = counted(
        ("bob", "tiny_lm", "cancelled", 3, 9),
        ("alice", "tiny_lm", "completed", 4, 16),
        streaming={"tiny_lm": 1},
    )
    lab.ticks(1)
    scraper.fronts["triton-0"] = counted(("alice", "tiny_lm", "failed", 2, 1))  # it restarted
    lab.ticks(1)

    seen = exposed(lab.controller)
    alice = (("model", "tiny_lm"), ("user", "alice"))
    assert seen[("tarn_openai_prompt_tokens_total", alice)] == 7 + 4 + 2
    assert seen[("tarn_openai_completion_tokens_total", alice)] == 20 + 16 + 1
    # bob's generation was in triton-1's baseline: his series exist, counting nothing since the start
    assert seen[("tarn_openai_prompt_tokens_total", (("model", "tiny_lm"), ("user", "bob")))] == 0
    outcomes = {
        dict(labels)["outcome"]: value
        for (name, labels), value in seen.items()
        if name == "tarn_openai_requests_total" and dict(labels)["user"] == "alice"
    }
    assert outcomes == {"completed": 2, "failed": 1}
    ttft = (("le", "+Inf"), ("model", "tiny_lm"))
    assert seen[("tarn_openai_time_to_first_token_seconds_bucket", ttft)] == 3  # histograms add up too
    assert seen[("tarn_openai_time_to_first_token_seconds_count", (("model", "tiny_lm"),))] == 3
    empty = (("le", "0.01"), ("model", "tiny_lm"))  # no first token that fast: its bucket still there
    assert seen[("tarn_openai_time_to_first_token_seconds_bucket", empty)] == 0
    assert seen[("tarn_openai_streams_in_flight", (("model", "tiny_lm"),))] == 1  # now, not a total
    per_instance = {
        dict(labels)["instance"]: value
        for (name, labels), value in seen.items()
        if name == "tarn_container_openai_streams"
    }
    assert per_instance == {"triton-0": 0, "triton-1": 1}


def test_without_fronts_the_families_are_empty() -> None:
    lab = make(instances=1)
    lab.ticks(2)
    assert exposed(lab.controller) == {}


# ---- one declaration: the front's (tarn.stdlib.openai.metric_names), the controller reads it


def test_the_controller_reads_exactly_the_names_the_front_declares() -> None:
    # The very declarations, imported (tests/unit/stdlib/test_exposition.py: no copy of a name elsewhere).
    assert all(any(ours is theirs for theirs in metric_names.FAMILIES) for ours in fronts.MONOTONE)
    gauges = {metric_names.STREAMS_IN_FLIGHT, metric_names.QUEUED_REQUESTS}
    assert {*fronts.MONOTONE, *gauges} == set(metric_names.FAMILIES)
    assert metric_names.STREAMS_IN_FLIGHT.name == fronts.STREAMS
    assert set(fronts.HELP) == set(metric_names.FAMILIES)
    kept = {sample for family in fronts.MONOTONE for sample in family.samples}
    assert {llm.PROMPT, llm.COMPLETION, llm.REQUESTS} <= kept
    assert {f"{llm.TIME_TO_FIRST}_bucket", f"{llm.TIME_BETWEEN}_count"} <= kept
    # Every sample a front writes is read: the monotone ones as counters, the gauge as streams.
    text = prometheus_text(
        counted(("alice", "tiny_lm", "completed", 7, 20), ("bob", "m", "failed", 1, 0), streaming={"m": 2})
    )
    written = {
        (s.name, tuple(sorted(s.labels.items())))
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    parsed = parse_front_metrics(text)
    gauge_names = {fronts.STREAMS, fronts.QUEUED}
    assert set(parsed.counters) == {series for series in written if series[0] not in gauge_names}
    assert parsed.streams == {"m": 2}


def test_the_controllers_sums_carry_the_fronts_names_types_and_labels() -> None:
    lab, scraper = front_lab()
    scraper.fronts = {"triton-0": counted(("alice", "tiny_lm", "completed", 5, 5))}
    lab.ticks(1)
    scraper.fronts = {
        "triton-0": counted(("alice", "tiny_lm", "completed", 5, 5), ("bob", "tiny_lm", "failed", 1, 0)),
        "triton-1": counted(("carol", "tiny_lm", "cancelled", 3, 9), streaming={"tiny_lm": 1}),
    }
    lab.ticks(2)
    text = render(metrics_registry(lab.controller, dict)).decode()
    found = departures(text, metric_names.FAMILIES, fronts.HELP, prefix="tarn_openai_")
    assert found == []


# ---- the scraper over HTTP


FRONT_TOKEN = Secret("the-services-token")


class TritonStandIn(BaseHTTPRequestHandler):
    """Ready, with empty metadata and metrics."""

    protocol_version = "HTTP/1.1"
    body = b""
    token: str | None = None  # the X-TARN-Token it needs, if any

    def do_GET(self) -> None:
        self.send_response(200 if self.token in (None, self.headers.get("X-TARN-Token")) else 401)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class FrontStandIn(TritonStandIn):
    """A front's /metrics, which needs the service's token (issue 48, item 4)."""

    token = FRONT_TOKEN.reveal()

    body = prometheus_text(
        counted(("alice", "tiny_lm", "completed", 7, 20), streaming={"tiny_lm": 1})
    ).encode()


@pytest.fixture
def ports() -> Iterator[tuple[int, int]]:
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), handler) for handler in (TritonStandIn, FrontStandIn)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    yield servers[0].server_address[1], servers[1].server_address[1]
    for server in servers:
        server.shutdown()


def test_the_scraper_reads_the_front_beside_triton_with_the_token(ports: tuple[int, int]) -> None:
    triton, front = ports
    scraper = Scraper(timeout=2.0, token=FRONT_TOKEN)
    try:
        with_front = Container("triton-0", "c0", "w", "127.0.0.1", "RUNNING", triton, triton, triton, front)
        without = replace(with_front, container_id="c1", openai_port=None)
        gone = replace(with_front, container_id="c2", openai_port=1)  # nothing listens: no front sample
        scrapes = scraper.scrape_all([with_front, without, gone], set())
    finally:
        scraper.close()
    assert scrapes["c0"].ready
    assert scrapes["c0"].front is not None
    assert scrapes["c0"].front.counters[PROMPT] == 7
    assert scrapes["c0"].front.streams == {"tiny_lm": 1}
    assert (scrapes["c1"].ready, scrapes["c1"].front) == (True, None)
    assert (scrapes["c2"].ready, scrapes["c2"].front) == (True, None)  # Triton still counts as ready
    tokenless = Scraper(timeout=2.0)
    try:
        assert tokenless.scrape_all([with_front], set())["c0"].front is None  # the front's 401
    finally:
        tokenless.close()


def test_the_counters_an_api_thread_reads_are_not_changed_by_the_next_publish() -> None:
    # issue 48, row 6: /metrics iterated the loop's own maps while the loop added a front's new
    # series ("dictionary changed size during iteration": 27 of 56 scrapes got no answer).
    lab, scraper = front_lab()
    scraper.fronts = {"triton-0": counted(("alice", "tiny_lm", "completed", 5, 5))}
    lab.ticks(1)
    read = lab.controller.counters  # what a scrape under way holds
    held = dict(read.openai)
    scraper.fronts = {
        "triton-0": counted(("alice", "tiny_lm", "completed", 5, 5), ("carol", "tiny_lm", "completed", 1, 2))
    }
    lab.ticks(1)  # carol's series appear
    assert read.openai == held
    assert len(lab.controller.counters.openai) > len(held)
