"""A bench's result document: what each bench writes with --json and what bench/report.py (its
summary, sections and plots) and bench/__main__.py (tarn-demo destroyed or not) read back.

    {"bench": kind, "parameters": {...}, ["destroyed_demo": bool,] <samples...>, "figures": [...]}

The kind names the plot and table the report draws (two catalogue entries may share one: the
staging bench on the lab and on its fake). The figures are the summary's rows, each beside its
baseline from the same run; the samples are the bench's own sections, read only by its kind's
plot or table.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict, cast


class _FigureRequired(TypedDict):
    name: str
    value: float | None  # None: not measured this run (shown as n/a)
    unit: str


class Figure(_FigureRequired, total=False):
    """One headline number; where it has them, its baseline from the same run and its goal."""

    baseline: float | None
    baseline_name: str
    goal: str | None
    met: bool | None  # None: no verdict


# The document's own keys; every other top-level key is one of the bench's samples.
RESERVED = ("bench", "parameters", "destroyed_demo", "figures")


@dataclass(frozen=True)
class Result:
    """One run of one bench, as its --json document holds it."""

    bench: str  # the kind
    figures: list[Figure]
    parameters: dict[str, Any] = field(default_factory=dict)  # shown in the report's section
    samples: dict[str, Any] = field(default_factory=dict)
    destroyed_demo: bool | None = None  # None: a bench that never touches tarn-demo

    def __post_init__(self) -> None:
        clash = sorted(set(self.samples) & set(RESERVED))
        if clash:
            raise ValueError(f"samples: {', '.join(clash)} is a key of the document itself; rename it")

    def to_json(self) -> dict[str, Any]:
        head: dict[str, Any] = {"bench": self.bench, "parameters": self.parameters}
        if self.destroyed_demo is not None:
            head["destroyed_demo"] = self.destroyed_demo
        return {**head, **self.samples, "figures": self.figures}

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json(), indent=2) + "\n")

    @classmethod
    def from_json(cls, data: object) -> Result:
        """The document's parts; ValueError when it is not a result document."""
        if not isinstance(data, dict) or not isinstance(data.get("bench"), str):
            raise ValueError('not a bench result: no "bench" naming its kind')
        figures, parameters = data.get("figures", []), data.get("parameters", {})
        if not isinstance(figures, list) or not isinstance(parameters, dict):
            raise ValueError(f'{data["bench"]}: "figures" is not a list or "parameters" not an object')
        destroyed = data.get("destroyed_demo")
        return cls(
            bench=data["bench"],
            figures=[figure_from_json(f) for f in figures],
            parameters=parameters,
            samples={k: v for k, v in data.items() if k not in RESERVED},
            destroyed_demo=None if destroyed is None else bool(destroyed),
        )


def figure_from_json(data: object) -> Figure:
    """A figure as written; a missing value or unit reads as None and ""; unknown keys are dropped."""
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        raise ValueError(f"a figure without a name: {data!r}")
    optional = {k: data[k] for k in Figure.__optional_keys__ if k in data}
    unit = str(data.get("unit") or "")
    return cast(Figure, {"name": data["name"], "value": data.get("value"), "unit": unit, **optional})


def read(path: Path) -> Result | None:
    """The result a bench wrote at ``path``; None when there is none or it is not one (its run failed)."""
    try:
        return Result.from_json(json.loads(path.read_text()))
    except (OSError, ValueError):
        return None
