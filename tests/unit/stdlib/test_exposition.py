"""The listeners' /metrics through prometheus_client (tarn.stdlib.exposition): a family declared once
is what the text holds, with no ``_created`` series, whatever its label values; and each listener's
names are written in its one declaration only, which every reader imports."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from tarn.activator import metrics as activator_metrics
from tarn.stdlib.exposition import Family, buckets, label, render
from tarn.stdlib.openai import metric_names
from tests.support import ROOT
from tests.support.exposition import departures

COUNTER = Family("t_things", "counter", "Things, by who", ("who",))
GAUGE = Family("t_level", "gauge", "A level")
HISTOGRAM = Family("t_wait_seconds", "histogram", "Waits, by who", ("who",))


class Fixed(Collector):
    def __init__(self, who: str) -> None:
        self.who = who

    def collect(self) -> Iterator[Metric]:
        things = COUNTER.counter()
        things.add_metric([label(self.who)], 3)
        level = GAUGE.gauge()
        level.add_metric([], 0.5)
        waits = HISTOGRAM.histogram()
        waits.add_metric([label(self.who)], buckets((0.1, 1.0, 10.0), (1, 2, 2), 3), 12.5)
        yield from (things, level, waits)


def parsed(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_the_text_holds_the_declared_families_and_no_created_series() -> None:
    text = render(Fixed("alice")).decode()
    assert departures(text, (COUNTER, GAUGE, HISTOGRAM)) == []
    assert "_created" not in text
    assert "# TYPE t_things_total counter" in text  # the name Prometheus and the dashboards query
    got = parsed(text)
    assert got[("t_things_total", (("who", "alice"),))] == 3
    assert got[("t_level", ())] == 0.5
    assert got[("t_wait_seconds_bucket", (("le", "1"), ("who", "alice")))] == 2  # le as %g
    assert got[("t_wait_seconds_bucket", (("le", "+Inf"), ("who", "alice")))] == 3
    assert got[("t_wait_seconds_count", (("who", "alice"),))] == 3
    assert got[("t_wait_seconds_sum", (("who", "alice"),))] == 12.5


@pytest.mark.parametrize("who", ['al"ice', "a\\b", "two\nlines", "ünï", "x\ud800y", "}{,= "])
def test_any_label_value_renders_and_reads_back(who: str) -> None:
    text = render(Fixed(who)).decode()
    assert departures(text, (COUNTER, GAUGE, HISTOGRAM)) == []
    assert parsed(text)[("t_things_total", (("who", label(who)),))] == 3


def test_a_lone_surrogate_is_written_as_its_escape() -> None:
    assert label("x\ud800y") == "x\\ud800y"
    assert label("ünï") == "ünï"


def test_a_family_is_built_as_its_declared_type_only() -> None:
    assert COUNTER.samples == ("t_things_total",)
    assert HISTOGRAM.samples == ("t_wait_seconds_bucket", "t_wait_seconds_sum", "t_wait_seconds_count")
    assert GAUGE.samples == ("t_level",)
    with pytest.raises(TypeError, match="declared a counter"):
        COUNTER.gauge()


# ---- one declaration per listener
DECLARATIONS = {
    "tarn_openai_": ROOT / "src" / "tarn" / "stdlib" / "openai" / "metric_names.py",
    "tarn_activator_": ROOT / "src" / "tarn" / "activator" / "metrics.py",
}


def names_in_code(path: Path, prefix: str) -> set[str]:
    """String constants starting with ``prefix`` in ``path``'s code (docstrings are prose)."""
    tree = ast.parse(path.read_text())
    prose = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.startswith(prefix)
        and id(node) not in prose
    }


@pytest.mark.parametrize("prefix", sorted(DECLARATIONS))
def test_a_listeners_names_are_written_in_its_declaration_only(prefix: str) -> None:
    sources = sorted((ROOT / "src" / "tarn").rglob("*.py"))
    writing = {path.relative_to(ROOT).as_posix() for path in sources if names_in_code(path, prefix)}
    assert writing == {DECLARATIONS[prefix].relative_to(ROOT).as_posix()}


@pytest.mark.parametrize(
    "families", [metric_names.FAMILIES, activator_metrics.FAMILIES], ids=["front", "activator"]
)
def test_a_declaration_declares_each_name_once(families: tuple[Family, ...]) -> None:
    assert len({family.name for family in families}) == len(families)
    samples = [sample for family in families for sample in family.samples]
    assert len(set(samples)) == len(samples)
