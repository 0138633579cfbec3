"""bench/front_http.py end to end against its Triton stand-in (no tritonserver): both fronts, the
baseline out of git and the working tree's, measured in a --quick run whose --json document holds
both variants' numbers; and its verdict rule."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.front_http import BASELINE, METRICS, ROOT, Metric, no_slower

VARIANTS = ("baseline", "current")


def has_baseline() -> bool:
    found = subprocess.run(
        ["git", "-C", str(ROOT), "cat-file", "-e", f"{BASELINE}^{{commit}}"], capture_output=True, check=False
    )
    return found.returncode == 0


@pytest.mark.skipif(not has_baseline(), reason=f"{BASELINE} is not in this checkout's history")
def test_a_quick_run_against_the_stand_in_measures_both_fronts(tmp_path: Path) -> None:
    out = tmp_path / "front_http.json"
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "front_http.py"), "--quick", "--against", "stand-in",
         "--json", str(out)],
        capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    document = json.loads(out.read_text())
    assert document["bench"] == "front_http"
    assert document["parameters"]["baseline"] == BASELINE
    assert list(document["tritons"]) == ["stand-in"]
    fronts = document["tritons"]["stand-in"]
    assert sorted(fronts) == sorted(VARIANTS)
    for variant in VARIANTS:
        found = fronts[variant]
        assert found["requests"] == 20  # --quick: 2 rounds of 10
        assert len(found["ttft_ms"]) == 20
        assert found["stream_tokens"] == 2 * 2 * 200  # 2 rounds of 2 streams of 200 tokens
        assert found["short_requests"] == 2 * 20
        for metric in METRICS:
            assert found[metric.key] > 0, (variant, metric.key)
    judged = [m for m in METRICS if m.judged]
    figures = document["figures"]
    assert len(figures) == len(METRICS)
    for figure in figures:
        assert figure["value"] > 0
        assert figure["baseline"] > 0
        assert figure["baseline_name"] == f"front at {BASELINE}"
    assert sum("met" in f for f in figures) == len(judged)
    for metric in judged:  # one verdict line per judged figure
        assert f"stand-in, {metric.name}: no slower than 1.1x: " in run.stdout
    assert "stand-in, round 2/2 (current/baseline)" in run.stdout  # the order alternates


def test_a_latency_may_grow_by_a_tenth_and_a_rate_shrink_to_one_over_1_1() -> None:
    latency = Metric("ttft_p50_ms", "TTFT p50", "ms", rate=False)
    rate = Metric("stream_tokens_per_s", "streaming rate", "tokens/s", rate=True)
    assert no_slower(latency, 10.9, 10.0)
    assert not no_slower(latency, 11.2, 10.0)
    assert no_slower(rate, 910.0, 1000.0)
    assert not no_slower(rate, 900.0, 1000.0)
    assert no_slower(rate, 2000.0, 1000.0)
