"""bench/result.py: the one shape of a bench's --json document, written by every bench and read by
the report and the runner."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.result import RESERVED, Figure, Result, figure_from_json, read

TICK: Figure = {
    "name": "tick median at 1000 instances",
    "value": 409.0,
    "unit": "ms",
    "baseline": 6.0,
    "baseline_name": "10 instances",
    "goal": "<= 500 ms",
    "met": True,
}


def test_the_document_is_flat_with_the_samples_beside_the_documents_own_keys() -> None:
    result = Result("controller_scale", [TICK], {"ticks": 8}, {"curve": [{"instances": 10}]})
    assert result.to_json() == {
        "bench": "controller_scale",
        "parameters": {"ticks": 8},
        "curve": [{"instances": 10}],
        "figures": [TICK],
    }


def test_destroyed_demo_is_written_only_by_a_bench_that_may_destroy_it() -> None:
    assert "destroyed_demo" not in Result("activator", []).to_json()
    assert Result("scale_timeline", [], destroyed_demo=False).to_json()["destroyed_demo"] is False


@pytest.mark.parametrize(
    "result",
    [
        Result("controller_scale", [TICK], {"ticks": 8}, {"curve": [], "rss_start_mib": 30.5}),
        Result("submit_to_inference", [], samples={"cold": {"submit_s": 4.0}}, destroyed_demo=True),
        Result("lab_bringup", [{"name": "warm bring-up", "value": None, "unit": "s"}]),
    ],
)
def test_what_a_bench_writes_reads_back_the_same(tmp_path: Path, result: Result) -> None:
    path = tmp_path / "result.json"
    result.write(path)
    assert path.read_text().endswith("}\n")
    assert read(path) == result


def test_a_sample_may_not_take_a_key_of_the_document() -> None:
    for key in RESERVED:
        with pytest.raises(ValueError, match=f"samples: {key} is a key of the document itself"):
            Result("activator", [], samples={key: 1})


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("{not json", "does not parse"),
        ("[1, 2]", "not an object"),
        ('{"figures": []}', "no kind"),
        ('{"bench": 3}', "a kind that is not a name"),
        ('{"bench": "activator", "figures": {}}', "figures not a list"),
        ('{"bench": "activator", "parameters": []}', "parameters not an object"),
        ('{"bench": "activator", "figures": [{"value": 1}]}', "a figure without a name"),
    ],
)
def test_what_is_not_a_result_reads_as_none(tmp_path: Path, text: str, why: str) -> None:
    path = tmp_path / "broken.json"
    path.write_text(text)
    assert read(path) is None, why


def test_a_missing_file_reads_as_none(tmp_path: Path) -> None:
    assert read(tmp_path / "absent.json") is None


def test_a_document_with_only_a_kind_has_no_figures_parameters_or_samples() -> None:
    assert Result.from_json({"bench": "activator"}) == Result("activator", [])


@pytest.mark.parametrize(
    ("written", "read_back"),
    [
        ({"name": "n", "value": 1.5, "unit": "s"}, {"name": "n", "value": 1.5, "unit": "s"}),
        ({"name": "n"}, {"name": "n", "value": None, "unit": ""}),
        ({"name": "n", "value": 2, "unit": None}, {"name": "n", "value": 2, "unit": ""}),
        (
            {"name": "n", "value": 1, "unit": "s", "goal": None, "met": None, "colour": "red"},
            {"name": "n", "value": 1, "unit": "s", "goal": None, "met": None},
        ),
        (TICK, TICK),
    ],
)
def test_a_figure_reads_back_with_its_declared_keys(written: dict[str, Any], read_back: Figure) -> None:
    assert figure_from_json(json.loads(json.dumps(written))) == read_back
