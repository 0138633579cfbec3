"""The dashboard's note on what the autoscaler watches (tarn.controller.dashboard.scaling_note) and
the page showing it; the charts themselves are drawn in a real Chromium
(tests/integration/test_dashboard_chromium.py)."""

from __future__ import annotations

from html import escape
from typing import Any

import pytest

from tarn.controller.dashboard import render_dashboard, scaling_note
from tarn.stdlib.config import TarnConfig, validate
from tests.support.controller import make


def config(**overrides: Any) -> TarnConfig:
    return validate(TarnConfig(model_repository="hdfs:///models", runtime="process", **overrides))


@pytest.mark.parametrize(
    ("overrides", "note"),
    [
        ({}, "autoscaler: load per ready instance (mean, 0..1); more instances above 0.8, fewer below 0.2"),
        (
            {"scale_up": 0.7, "scale_down": 0.0},
            "autoscaler: load per ready instance (mean, 0..1); more instances above 0.7, "
            "never fewer on this signal (--scale-down 0)",
        ),
        (
            {"scale_on": "queue", "scale_up_at": 8.0, "scale_down_at": 2.0},
            "autoscaler: Triton's pending requests per ready instance (mean); more instances above 8, "
            "fewer below 2",
        ),
        (
            {"scale_on": "streams", "openai_port": 9000, "scale_up_at": 2.5, "scale_down_at": 0.5},
            "autoscaler: OpenAI fronts' streams in flight per ready instance (mean); more instances "
            "above 2.5, fewer below 0.5",
        ),
        (
            {"scale_on": "queue", "scale_up_at": 4.0, "scale_down_at": 0.0},
            "autoscaler: Triton's pending requests per ready instance (mean); more instances above 4, "
            "never fewer on this signal (--scale-down-at 0)",
        ),
    ],
    ids=["load", "load-never-fewer", "queue", "streams", "queue-never-fewer"],
)
def test_the_note_says_the_signal_and_its_thresholds(overrides: dict[str, Any], note: str) -> None:
    assert scaling_note(config(**overrides)) == note


def test_the_page_shows_the_note_escaped() -> None:
    lab = make(instances=1, scale_on="streams", openai_port=9000, scale_up_at=2.5, scale_down_at=0.0)
    lab.ticks(1)
    note = scaling_note(lab.controller.config)
    page = render_dashboard(lab.controller.snapshot, scaling=note)
    assert f"<p>{escape(note)}</p>" in page
    assert "fronts&#x27; streams in flight per ready instance (mean); more instances above 2.5" in page
    assert "autoscaler:" not in render_dashboard(lab.controller.snapshot)
    assert "<p>&lt;b&gt;</p>" in render_dashboard(lab.controller.snapshot, scaling="<b>")
