"""The OpenAI fronts' figures on the dashboard (tarn.controller.llm): the quantile from cumulative
buckets as a table, the tables' rows from the controller's totals, a tick's rates; then the whole
way: fronts' /metrics text read by the control loop's ticks, the page's section, the charts'
points, and the cut to the models a viewer may list under Ranger."""

from __future__ import annotations

import math

import pytest

from tarn.controller.dashboard import render_dashboard
from tarn.controller.fronts import Series
from tarn.controller.llm import UserModelRow, quantile, tick_figures, view
from tarn.controller.server import Api
from tarn.ranger.authorizer import Authorizer
from tarn.ranger.state import Documents, PolicyState, polled
from tarn.stdlib.openai.counters import Counters
from tests.support.controller import FrontScraper, Lab, make
from tests.support.ranger_documents import BASIC, USERS

INF = math.inf
BUCKETS = [(0.1, 50.0), (0.2, 90.0), (0.5, 100.0), (INF, 100.0)]


@pytest.mark.parametrize(
    ("q", "buckets", "expected"),
    [
        (0.5, BUCKETS, 0.1),  # the rank on a bound: that bound
        (0.25, BUCKETS, 0.05),  # the first bucket starts at 0
        (0.7, BUCKETS, 0.15),  # linear within (0.1, 0.2]: 20 of its 40
        (0.99, BUCKETS, 0.47),  # 9 of the last 10 in (0.2, 0.5]
        (1.0, BUCKETS, 0.5),
        (0.99, [(0.1, 1.0), (INF, 10.0)], 0.1),  # in the +Inf bucket: the largest finite bound
        (0.99, [(INF, 3.0)], None),  # only +Inf: no finite bound to give
        (0.5, list(reversed(BUCKETS)), 0.1),  # order does not matter
        (0.5, [(0.1, 0.0), (INF, 0.0)], None),  # no observation
        (0.5, [], None),
        (0.5, [(0.1, 5.0), (0.2, 10.0)], None),  # no +Inf bucket: not a whole histogram
        (0.75, [(0.1, 5.0), (0.2, 4.0), (0.5, 10.0), (INF, 10.0)], 0.35),  # a dip: the running max
        (0.0, [(0.1, 0.0), (0.2, 4.0), (INF, 4.0)], 0.0),
    ],
    ids=[
        "on-a-bound", "first-bucket", "interpolated", "p99", "q=1", "inf-bucket", "only-inf",
        "unordered", "empty-counts", "no-buckets", "no-inf", "non-monotone", "q=0",
    ],
)  # fmt: skip
def test_a_quantile_from_cumulative_buckets(
    q: float, buckets: list[tuple[float, float]], expected: float | None
) -> None:
    found = quantile(q, buckets)
    assert found == (None if expected is None else pytest.approx(expected))


@pytest.mark.parametrize("q", [-0.1, 1.5])
def test_a_quantile_outside_0_to_1_is_refused(q: float) -> None:
    with pytest.raises(ValueError, match="give a quantile from 0 to 1"):
        quantile(q, BUCKETS)


def series(name: str, **labels: str) -> Series:
    return (name, tuple(sorted(labels.items())))


def histogram(name: str, model: str, buckets: list[tuple[str, float]], total: float) -> dict[Series, float]:
    found = {series(f"{name}_bucket", model=model, le=le): count for le, count in buckets}
    found[series(f"{name}_count", model=model)] = buckets[-1][1]
    found[series(f"{name}_sum", model=model)] = total
    return found


TOTALS: dict[Series, float] = {
    series("tarn_openai_prompt_tokens_total", user="alice", model="tiny_lm"): 30,
    series("tarn_openai_completion_tokens_total", user="alice", model="tiny_lm"): 200,
    series("tarn_openai_requests_total", user="alice", model="tiny_lm", outcome="completed"): 3,
    series("tarn_openai_requests_total", user="alice", model="tiny_lm", outcome="cancelled"): 1,
    series("tarn_openai_prompt_tokens_total", user="bob", model="tiny_lm"): 4,
    series("tarn_openai_completion_tokens_total", user="bob", model="tiny_lm"): 0,
    series("tarn_openai_requests_total", user="bob", model="tiny_lm", outcome="failed"): 1,
    **histogram(
        "tarn_openai_time_to_first_token_seconds",
        "tiny_lm",
        [("0.05", 2.0), ("0.1", 4.0), ("+Inf", 5.0)],
        0.5,
    ),
    **histogram("tarn_openai_time_between_tokens_seconds", "tiny_lm", [("0.1", 196), ("+Inf", 196)], 19.6),
}


def test_the_tables_rows_from_the_totals() -> None:
    lab = make(instances=2)
    lab.ticks(1)
    instances = lab.controller.snapshot.instances
    assert all(i.openai_port is None for i in instances)
    found = view(TOTALS, instances)
    assert found.fronts == 0
    assert found.shown  # totals without a front running now: still shown
    assert found.users == (
        UserModelRow("alice", "tiny_lm", 30, 200, 4, 1, 0),
        UserModelRow("bob", "tiny_lm", 4, 0, 1, 0, 1),
    )
    (model,) = found.models
    assert (model.model, model.streams) == ("tiny_lm", 0.0)
    assert model.first_token_p50_s == pytest.approx(0.0625)  # rank 2.5 of 5: a quarter into (0.05, 0.1]
    assert model.first_token_p99_s == 0.1  # rank 4.95 in the +Inf bucket: the largest finite bound
    assert model.first_token_mean_s == pytest.approx(0.1)
    assert model.between_tokens_mean_s == pytest.approx(0.1)
    assert view({}, instances).shown is False
    assert found.visible(lambda m: m != "tiny_lm").users == ()
    assert found.visible(lambda m: m != "tiny_lm").models == ()


def test_a_ticks_rates_and_slowest_first_token() -> None:
    first = histogram("tarn_openai_time_to_first_token_seconds", "a", [("0.1", 1.0), ("+Inf", 1.0)], 0.05)
    slow = histogram("tarn_openai_time_to_first_token_seconds", "b", [("1", 2.0), ("+Inf", 2.0)], 1.0)
    fronts = [
        {series("tarn_openai_completion_tokens_total", user="u", model="a"): 30.0, **first},
        {series("tarn_openai_completion_tokens_total", user="v", model="b"): 10.0, **slow},
        {series("tarn_openai_prompt_tokens_total", user="v", model="b"): 8.0},
    ]
    figures = tick_figures(fronts, 2.0)
    assert figures.completion_tokens_per_s == 20.0
    assert figures.prompt_tokens_per_s == 4.0
    assert figures.first_token_p99_s == pytest.approx(0.99)  # b's: (0, 1], 1.98 of 2
    unknown = tick_figures(fronts, None)  # no previous tick: no rate
    assert (unknown.prompt_tokens_per_s, unknown.completion_tokens_per_s) == (None, None)
    assert tick_figures([], 2.0).first_token_p99_s is None


# ---- the whole way: fronts read by the loop's ticks


def generated(front: Counters, user: str, model: str, prompt: int, completion: int, outcome: str) -> None:
    front.ended(user, model, outcome, prompt, completion)
    front.first_token_after(model, 0.04)
    for _token in range(completion - 1):
        front.between_tokens_took(model, 0.02)


def with_fronts() -> Lab:
    """Two instances with fronts; alice and bob use add_one and linear_onnx through them."""
    lab = make(instances=2, scraper_type=FrontScraper, openai_port=9000, anti_affinity=False, port_stride=10)
    scraper = lab.scraper
    assert isinstance(scraper, FrontScraper)
    scraper.fronts = {"triton-0": Counters(), "triton-1": Counters()}
    lab.ticks(1)  # the fronts' baselines
    generated(scraper.fronts["triton-0"], "alice", "add_one", 7, 20, "completed")
    generated(scraper.fronts["triton-1"], "<bob>", "linear_onnx", 3, 10, "cancelled")
    scraper.fronts["triton-1"].stream_started("linear_onnx")
    lab.ticks(1)
    return lab


def row(*cells: str) -> str:
    return "<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>"


def test_the_dashboard_shows_the_fronts_figures() -> None:
    lab = with_fronts()
    controller = lab.controller
    llm = view(controller.counters.openai, controller.snapshot.instances)
    assert llm.fronts == 2
    page = render_dashboard(controller.snapshot, llm=llm)
    section = page[page.index('<h2 id="llm">LLM (OpenAI API)</h2>') :]
    assert row("alice", "add_one", "7", "20", "1", "0", "0") in section
    assert row("&lt;bob&gt;", "linear_onnx", "3", "10", "1", "1", "0") in section  # escaped
    # per model: streams now, first token 40 ms (in (0.025, 0.05]: p50 0.0375 s), 20 ms between tokens
    assert row("linear_onnx", "1", "37.5 ms", "49.8 ms", "40.0 ms", "20.0 ms") in section
    # each front's streams in the containers table, and the charts of the fronts
    containers = page[page.index("<h2>Containers</h2>") : page.index("<h2>Models</h2>")]
    assert "<th>streams</th>" in containers
    assert "<td>triton-1</td>" in containers
    assert 'id="chart-tokens"' in page
    assert 'id="chart-ttft"' in page


def test_without_fronts_the_page_has_no_llm_section() -> None:
    lab = make(instances=2)
    lab.ticks(2)
    llm = view(lab.controller.counters.openai, lab.controller.snapshot.instances)
    page = render_dashboard(lab.controller.snapshot, llm=llm)
    assert "LLM (OpenAI API)" not in page
    assert "<th>streams</th>" not in page
    assert "chart-tokens" not in page
    (point,) = lab.controller.timeline.points()[-1:]
    assert (point["prompt_tokens_per_s"], point["streams"]) == (None, None)


def test_the_charts_points_carry_the_fronts_rates() -> None:
    lab = with_fronts()
    first, second = lab.controller.timeline.points()
    assert first["completion_tokens_per_s"] is None  # the first tick: no interval, and baselines
    assert first["streams"] == 0
    assert second["prompt_tokens_per_s"] == (7 + 3) / 2.0  # over the 2 s tick
    assert second["completion_tokens_per_s"] == (20 + 10) / 2.0
    assert second["streams"] == 1
    assert second["first_token_p99_s"] == pytest.approx(0.025 + 0.025 * 0.99)


def test_under_ranger_the_llm_figures_are_cut_to_what_the_viewer_may_list(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lab = with_fronts()
    now = 1_750_000_000.0
    state = polled(PolicyState(), Documents(BASIC, None, USERS), [], now)
    asked: list[str] = []
    authorizer = Authorizer(lambda: state, wall=lambda: now + 5)
    allowed = authorizer.allowed

    def counting(user: str | None, model: str, access: str, client_ip: str | None = None) -> bool:
        asked.append(model)
        return allowed(user, model, access, client_ip)

    monkeypatch.setattr(authorizer, "allowed", counting)
    api = Api(lab.controller, None, authorizer)
    _snap, llm = api.dashboard_for({"X-TARN-User": "alice"})  # alice may list add_* only
    assert [r.model for r in llm.users] == ["add_one"]
    assert [m.model for m in llm.models] == ["add_one"]
    assert len(asked) == len(set(asked))  # Ranger asked once per model for the whole page
    _snap, nobody = api.dashboard_for({})
    assert (nobody.users, nobody.models) == ((), ())
    assert nobody.fronts == 2  # no names in it: the count stays
