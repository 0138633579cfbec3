"""bench/report.py: small documents shaped as the benches write them, through the real report and
real matplotlib, into files under tmp_path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import scale_timeline
from bench.catalogue import BENCHES
from bench.report import number, ratio, summary_table, write_report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def wrk(rps: float, p50: float) -> dict[str, Any]:
    return {
        "requests_per_s": rps,
        "p50_ms": p50,
        "p99_ms": p50 * 3,
        "requests": int(rps * 10),
        "non_2xx": 0,
        "socket_errors": {},
    }


def entry_overhead() -> dict[str, Any]:
    runs = [
        {"entry": entry, "connections": c, "wrk": wrk(rps * c, p50), "cpu_percent": {}, "errors": 0}
        for entry, rps, p50 in (("direct", 900.0, 1.1), ("haproxy", 850.0, 1.2), ("knox", 300.0, 2.9))
        for c in (1, 8)
    ]
    figures = [
        {
            "name": "Knox requests/s, 8 conn.",
            "value": 2400.0,
            "unit": "req/s",
            "baseline": 6800.0,
            "baseline_name": "HAProxy",
            "goal": "ratio >= 0.5",
            "met": False,
        },
        {
            "name": "Knox p50, 1 conn.",
            "value": 2.9,
            "unit": "ms",
            "baseline": 1.2,
            "baseline_name": "HAProxy",
            "goal": "<= HAProxy + 2 ms",
            "met": True,
        },
    ]
    return {"bench": "entry_overhead", "parameters": {"seconds": 10}, "runs": runs, "figures": figures}


def haproxy_throughput() -> dict[str, Any]:
    return {
        "bench": "haproxy_throughput",
        "throughput": {
            "direct": {
                "requests_per_s": 410.0,
                "p50_ms": 18.0,
                "p99_ms": 40.0,
                "requests": 4100,
                "failed": 0,
            },
            "haproxy": {
                "requests_per_s": 620.0,
                "p50_ms": 12.0,
                "p99_ms": 35.0,
                "requests": 6200,
                "failed": 0,
            },
        },
        "propagation": {
            "added_s": [0.21, 0.25, 0.32, 0.28, 0.3],
            "removed_s": [0.15, 0.18, 0.22, 0.2, 0.19],
            "backend_read_s": [0.09, 0.1, 0.11],
        },
        "figures": [
            {
                "name": "znode added -> in HAProxy backend (median)",
                "value": 280.0,
                "unit": "ms",
                "baseline": 100.0,
                "baseline_name": "one backend read",
            },
        ],
    }


def scale_timeline_document() -> dict[str, Any]:
    """Built with the bench's own functions, as it would write it on the lab."""
    t0 = 1000.0
    stamps = {
        "decision": 1001.2,
        "target": 1001.3,
        "container": 1003.0,
        "ready": 1011.5,
        "znode": 1012.1,
        "discovery": 1012.3,
    }  # "serving" never came
    events = scale_timeline.relative(stamps, t0)
    baseline = {"submit_to_ready_s": 38.0, "submit_to_znode_s": 38.6, "ready_to_znode_s": 0.6}
    answers = scale_timeline.answers_per_second([1000.1, 1000.5, 1001.7, 1013.0], t0, 1014.0)
    return {
        "bench": "scale_timeline",
        "t0": t0,
        "events": events,
        "decision_reason": "load 1.5 > 0.8",
        "baseline": baseline,
        "load": {"ok": 4, "failed": 0, "answers_per_s": answers},
        "figures": scale_timeline.figures(events, baseline),
    }


def staging(mode: str, goal: bool) -> dict[str, Any]:
    repositories = {
        name: {
            "files": files,
            "bytes": size,
            "sequential_mbps": seq,
            "staged_mbps": staged,
            "ratio": staged / seq,
        }
        for name, files, size, seq, staged in (
            ("small", 256, 67e6, 40.0, 95.0),
            ("large", 1, 537e6, 120.0, 118.0),
        )
    }
    figures = [
        {
            "name": f"staging MB/s, {n}",
            "value": r["staged_mbps"],
            "unit": "MB/s",
            "baseline": r["sequential_mbps"],
            "baseline_name": "sequential plain read",
            "goal": "ratio >= 1" if goal else None,
            "met": r["ratio"] >= 1 if goal else None,
        }
        for n, r in repositories.items()
    ]
    return {"bench": "staging_throughput", "mode": mode, "repositories": repositories, "figures": figures}


def controller_scale() -> dict[str, Any]:
    curve = [
        {
            "instances": n,
            "median_ms": ms,
            "p90_ms": ms * 1.4,
            "cpu_ms_per_instance": cpu,
            "rss_mib": rss,
            "tick_ms": [ms] * 3,
            "read": [n] * 3,
        }
        for n, ms, cpu, rss in ((10, 6.0, 0.6, 34.0), (100, 45.0, 0.45, 35.5), (1000, 409.0, 0.43, 40.0))
    ]
    figures = [
        {
            "name": "tick median at 1000 instances",
            "value": 409.0,
            "unit": "ms",
            "baseline": 6.0,
            "baseline_name": "10 instances",
            "goal": "<= 500 ms",
            "met": True,
        },
    ]
    return {"bench": "controller_scale", "parameters": {"ticks": 8}, "curve": curve, "figures": figures}


def documents() -> dict[str, dict[str, Any]]:
    return {
        "lab_bringup": {
            "bench": "lab_bringup",
            "cold_s": 820.0,
            "warm_s": 310.0,
            "rerun_s": 140.0,
            "rerun_changed": 0,
            "lab_memory_mib": 5200.0,
            "figures": [
                {
                    "name": "warm bring-up",
                    "value": 310.0,
                    "unit": "s",
                    "baseline": 820.0,
                    "baseline_name": "cold bring-up",
                }
            ],
        },
        "entry_overhead": entry_overhead(),
        "haproxy_throughput": haproxy_throughput(),
        "submit_to_inference": {
            "bench": "submit_to_inference",
            "cold": {"submit_s": 4.0, "first_inference_s": 61.0, "host": "worker1"},
            "warm": {"submit_s": 3.5, "first_inference_s": 44.0, "host": "worker2"},
            "figures": [
                {
                    "name": "submit -> first inference, warm",
                    "value": 44.0,
                    "unit": "s",
                    "baseline": 61.0,
                    "baseline_name": "cold",
                }
            ],
        },
        "staging_lab": staging("lab", goal=True),
        "scale_timeline": scale_timeline_document(),
        "controller_scale": controller_scale(),
        "ranger_authorize": {
            "bench": "ranger_authorize",
            "baseline": {
                "policies": 10,
                "load_ms": 1.0,
                "p50_us": 6.0,
                "p99_us": 20.0,
                "decisions_per_s": 1.4e5,
            },
            "measured": {
                "policies": 1000,
                "load_ms": 50.0,
                "p50_us": 30.0,
                "p99_us": 310.0,
                "decisions_per_s": 2e4,
            },
            "http": {"policies": 1000, "p50_ms": 0.7, "p99_ms": 2.5, "requests_per_s": 1000.0},
            "figures": [
                {
                    "name": "engine p99, 1000 policies",
                    "value": 310.0,
                    "unit": "us",
                    "baseline": 20.0,
                    "baseline_name": "10 policies",
                    "goal": "<= 1000 us",
                    "met": True,
                }
            ],
        },
        "openai_routing": {
            "bench": "openai_routing",
            "outcomes": {
                policy: [{"kind": "short", "ttft_s": (n + 1) * scale / 1000} for n in range(50)]
                for policy, scale in (("leastconn", 0.2), ("roundrobin", 0.4))
            },
            "figures": [
                {
                    "name": "TTFT p99, leastconn",
                    "value": 10.0,
                    "unit": "ms",
                    "baseline": 20.0,
                    "baseline_name": "roundrobin",
                    "goal": "ratio <= 0.5",
                    "met": True,
                },
            ],
        },
        "front_http": {
            "bench": "front_http",
            "tritons": {
                triton: {
                    variant: {"ttft_ms": [(n + 1) * scale for n in range(50)]}
                    for variant, scale in (("baseline", 0.1), ("current", 0.11))
                }
                for triton in ("stand-in", "tritonserver")
            },
            "table": [
                {"triton": triton, "name": name, "slowdown": slowdown}
                for triton in ("stand-in", "tritonserver")
                for name, slowdown in (
                    ("TTFT p50", 1.05),
                    ("streaming rate", 0.97),
                    ("front CPU / streamed token", 1.15),
                )
            ],
            "figures": [
                {
                    "name": "TTFT p50, current front (stand-in Triton)",
                    "value": 2.1,
                    "unit": "ms",
                    "baseline": 2.0,
                    "baseline_name": "front at 81c43c1",
                    "goal": "<= 1.1x baseline",
                    "met": True,
                }
            ],
        },
        "tenancy": {
            "bench": "tenancy",
            "quiet": {
                "alone": {"p50_ms": 8.0, "p99_ms": 20.0, "n": 40},
                "fair": {"p50_ms": 8.5, "p99_ms": 25.0, "n": 40},
                "fifo": {"p50_ms": 2000.0, "p99_ms": 2300.0, "n": 40},
            },
            "flood_rate": {"fair": 12.0, "fifo": 14.0},
            "figures": [
                {
                    "name": "quiet TTFT p50, flood, fair",
                    "value": 8.5,
                    "unit": "ms",
                    "baseline": 8.0,
                    "baseline_name": "alone",
                    "goal": "<= 1.2x alone",
                    "met": True,
                }
            ],
        },
        "activator": {
            "bench": "activator",
            "overload": {
                "held": 1000,
                "rss_idle_kib": 34000,
                "rss_holding_kib": 40000,
                "rss_after_excess_kib": 40100,
                "kib_per_held": 6.0,
                "excess_refused": 1000,
                "excess_slowest_ms": 40.0,
            },
            "entry": {
                "without": {"p50_us": 110.0, "p99_us": 300.0, "requests": 4000},
                "with": {"p50_us": 112.0, "p99_us": 310.0, "requests": 4000},
                "through_activator": 0,
            },
            "figures": [
                {"name": "excess refused", "value": 1000, "unit": "", "goal": "all 1000", "met": True}
            ],
        },
        "staging_self_test": staging("self-test", goal=False),
    }


def write(folder: Path, found: dict[str, dict[str, Any]], runs: list[dict[str, Any]] | None = None) -> None:
    for name, document in found.items():
        (folder / f"{name}.json").write_text(json.dumps(document))
        (folder / f"{name}.log").write_text(f"{name}'s output\n")
    if runs is not None:
        (folder / "runs.json").write_text(json.dumps({"started": 1.7e9, "quick": False, "runs": runs}))


def table_rows(markdown: str) -> list[list[str]]:
    """The summary table's rows, as cells."""
    block = markdown.split("## Summary", 1)[1].split("\n\n")[1]
    return [[c.strip() for c in line.strip("|").split(" | ")] for line in block.splitlines()[2:]]


def test_every_bench_gets_its_figures_and_its_plot(tmp_path: Path) -> None:
    write(tmp_path, documents())
    report = write_report(tmp_path).read_text()
    plotted = [b.name for b in BENCHES if b.name not in ("ranger_authorize", "activator")]
    for name in plotted:
        image = tmp_path / f"{name}.png"
        assert image.read_bytes().startswith(PNG_MAGIC), name
        assert image.stat().st_size > 10_000, name  # axes, bars and labels drawn, not an empty canvas
        assert f"]({name}.png)" in report
    assert "No plot" not in report
    assert "not run" not in report
    assert "| controller's GET /authorize | 1,000 | 700 | 2,500 | 1,000 |" in report  # the ranger table
    assert "| excess refused with 503 + Retry-After | 1000 of 1000 |" in report  # the activator table
    assert "Full log: [entry_overhead.log](entry_overhead.log)" in report


def test_the_summary_sets_each_figure_beside_its_baseline_with_ratio_goal_and_verdict(tmp_path: Path) -> None:
    write(tmp_path, documents())
    rows = table_rows(write_report(tmp_path).read_text())
    assert [
        "controller_scale",
        "tick median at 1000 instances",
        "409 ms",
        "6 ms (10 instances)",
        "68.2x",
        "<= 500 ms",
        "pass",
    ] in rows
    assert [
        "entry_overhead",
        "Knox requests/s, 8 conn.",
        "2,400 req/s",
        "6,800 req/s (HAProxy)",
        "0.35x",
        "ratio >= 0.5",
        "FAIL",
    ] in rows
    assert [
        "staging_self_test",
        "staging MB/s, small",
        "95 MB/s",
        "40 MB/s (sequential plain read)",
        "2.38x",
        "",
        "",
    ] in rows
    # the timeline's missing event: no value, no verdict, not a crash
    assert [
        "scale_timeline",
        "load step -> new instance serving",
        "n/a",
        "38.6 s (first instance: submit -> znode)",
        "",
        "",
        "",
    ] in rows
    assert [
        "scale_timeline",
        "scale-up: Triton ready -> znode",
        "0.60 s",
        "0.60 s (first instance: ready -> znode)",
        "1.00x",
        "<= 2 s",
        "pass",
    ] in rows
    assert summary_table(tmp_path) in write_report(tmp_path).read_text()


def test_missing_skipped_and_failed_benches_are_said_so(tmp_path: Path) -> None:
    found = documents()
    subset = {name: found[name] for name in ("controller_scale", "entry_overhead")}
    runs = [
        {
            "name": "lab_bringup",
            "status": "skipped",
            "reason": "not installed: podman",
            "seconds": 0,
            "log": "",
        },
        {"name": "entry_overhead", "status": "failed", "reason": "exit 1", "seconds": 40, "log": "x.log"},
        {"name": "controller_scale", "status": "ok", "reason": "", "seconds": 90, "log": "y.log"},
        {
            "name": "activator",
            "status": "failed",
            "reason": "timed out after 3600 s",
            "seconds": 3600,
            "log": "",
        },
    ]
    write(tmp_path, subset, runs)
    report = write_report(tmp_path).read_text()
    rows = table_rows(report)
    assert ["lab_bringup", "not run: skipped: not installed: podman", "", "", "", "", ""] in rows
    assert ["activator", "not run: failed: timed out after 3600 s", "", "", "", "", ""] in rows
    assert ["ranger_authorize", "not run", "", "", "", "", ""] in rows
    assert [
        "entry_overhead",
        "run failed: exit 1",
        "",
        "",
        "",
        "",
        "FAIL",
    ] in rows  # its figures still follow
    assert any(r[:2] == ["entry_overhead", "Knox p50, 1 conn."] for r in rows)
    assert (tmp_path / "controller_scale.png").exists()
    assert not (tmp_path / "activator.png").exists()
    assert "**failed**: timed out after 3600 s" in report
    assert "| activator | failed | timed out after 3600 s | 3600 |  |" in report  # the runs table


def test_nothing_measured_yet_is_a_report_of_not_run(tmp_path: Path) -> None:
    (tmp_path / "stray.json").write_text("{not json")
    rows = table_rows(write_report(tmp_path).read_text())
    assert rows == [[b.name, "not run", "", "", "", "", ""] for b in BENCHES]
    assert list(tmp_path.glob("*.png")) == []


def test_a_document_short_of_samples_gets_no_plot_but_its_figures(tmp_path: Path) -> None:
    broken = {"bench": "controller_scale", "figures": [{"name": "tick", "value": 5.0, "unit": "ms"}]}
    write(tmp_path, {"controller_scale": broken})
    report = write_report(tmp_path).read_text()
    assert "No plot: KeyError" in report
    assert ["controller_scale", "tick", "5 ms", "", "", "", ""] in table_rows(report)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (None, "n/a"),
        (float("nan"), "n/a"),
        (1234.5, "1,234"),
        (12.34, "12.3"),
        (1.234, "1.23"),
        (0.01234, "0.0123"),
        (7, "7"),
        (True, "True"),
    ],
)
def test_number(value: Any, shown: str) -> None:
    assert number(value) == shown


@pytest.mark.parametrize(
    ("value", "baseline", "shown"),
    [
        (10.0, 4.0, "2.50x"),
        (409.0, 6.0, "68.2x"),
        (1.0, 0.0, ""),
        (None, 3.0, ""),
        (2.0, None, ""),
        (float("nan"), 1.0, ""),
    ],
)
def test_ratio(value: Any, baseline: Any, shown: str) -> None:
    assert ratio(value, baseline) == shown
