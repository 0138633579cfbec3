"""build/bench/report.md and its PNG plots, from the JSON documents the benches wrote there
(python -m bench runs them; runs.json says how each run went). Any subset may be present: a bench
without its document shows as not run, with the reason when the runner gave one.

Each document is a bench.result.Result: its kind, parameters, figures and samples. The summary
table lists every figure beside its baseline from the same run; the plots and tables read each
kind's own samples.

    python -m bench.report [build/bench]
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from bench.catalogue import BENCHES, Bench
from bench.result import Figure as BenchFigure  # beside matplotlib's Figure
from bench.result import Result, read

Samples = dict[str, Any]  # a result's samples: what its kind's plot or table reads
NOT_RUN = "not run"


# ---- reading


def load_documents(folder: Path) -> dict[str, Result]:
    """build/bench/<name>.json by name; one that is not a result is left out (its run failed)."""
    found: dict[str, Result] = {}
    for path in sorted(folder.glob("*.json")):
        result = None if path.stem == "runs" else read(path)
        if result is not None:
            found[path.stem] = result
    return found


def load_runs(folder: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """runs.json: the whole record, and each name's last run."""
    try:
        record: dict[str, Any] = json.loads((folder / "runs.json").read_text())
    except (OSError, ValueError):
        return {}, {}
    return record, {run["name"]: run for run in record.get("runs", [])}


# ---- the summary table


def number(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    size = abs(value)
    if size >= 100 or value == int(value):
        return f"{value:,.0f}"
    return f"{value:.1f}" if size >= 10 else f"{value:.2f}" if size >= 0.1 else f"{value:.3g}"


def with_unit(value: Any, unit: str) -> str:
    shown = number(value)
    return f"{shown} {unit}" if unit and shown != "n/a" else shown


def ratio(value: Any, baseline: Any) -> str:
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (value, baseline))
    if not numbers or not baseline or math.isnan(value) or math.isnan(baseline):
        return ""
    quotient = value / baseline
    return f"{quotient:.1f}x" if abs(quotient) >= 10 else f"{quotient:.2f}x"


def verdict(met: Any) -> str:
    return {True: "pass", False: "FAIL"}.get(met, "")


@dataclass(frozen=True)
class Row:
    bench: str
    figure: str
    value: str
    baseline: str
    ratio: str
    goal: str
    verdict: str

    def cells(self) -> tuple[str, ...]:
        return (self.bench, self.figure, self.value, self.baseline, self.ratio, self.goal, self.verdict)


def figure_row(bench: str, figure: BenchFigure) -> Row:
    unit = figure["unit"]
    baseline = figure.get("baseline")
    shown_baseline = ""
    if baseline is not None:
        shown_baseline = f"{with_unit(baseline, unit)} ({figure.get('baseline_name') or 'baseline'})"
    return Row(
        bench,
        figure["name"],
        with_unit(figure["value"], unit),
        shown_baseline,
        ratio(figure["value"], baseline),
        str(figure.get("goal") or ""),
        verdict(figure.get("met")),
    )


def why_not(name: str, runs: dict[str, dict[str, Any]]) -> str:
    run = runs.get(name)
    if run is None:
        return NOT_RUN
    if run["status"] == "skipped":
        return f"{NOT_RUN}: skipped: {run['reason']}"
    return f"{NOT_RUN}: {run['status']}: {run['reason']}" if run.get("reason") else NOT_RUN


def rows(documents: dict[str, Result], runs: dict[str, dict[str, Any]]) -> list[Row]:
    """Every figure of every bench in the catalogue's order; one line for a bench without figures."""
    found: list[Row] = []
    for bench in BENCHES:
        document = documents.get(bench.name)
        if document is None:
            found.append(Row(bench.name, why_not(bench.name, runs), "", "", "", "", ""))
            continue
        failed = runs.get(bench.name, {}).get("status") == "failed"
        figures = [figure_row(bench.name, f) for f in document.figures]
        if failed:  # its figures stand, but the run did not finish cleanly
            figures = [
                Row(bench.name, f"run failed: {runs[bench.name]['reason']}", "", "", "", "", "FAIL"),
                *figures,
            ]
        found += figures or [Row(bench.name, "no figures", "", "", "", "", "")]
    return found


def markdown_table(header: tuple[str, ...], body: Sequence[tuple[str, ...]]) -> str:
    def line(cells: tuple[str, ...]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return "\n".join([line(header), "|" + "---|" * len(header), *(line(cells) for cells in body)])


SUMMARY_HEADER = ("bench", "figure", "value", "baseline (same run)", "ratio", "goal", "verdict")


def summary_table(folder: Path) -> str:
    _record, runs = load_runs(folder)
    return markdown_table(SUMMARY_HEADER, [r.cells() for r in rows(load_documents(folder), runs)])


# ---- plots: one per kind of document, each from its own samples


def save(figure: Figure, path: Path) -> None:
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def bars(ax: Axes, groups: list[str], series: dict[str, list[float]], ylabel: str) -> None:
    """Grouped bars: one group per x label, one bar per series, each value written on its bar."""
    width = 0.8 / max(1, len(series))
    for index, (name, values) in enumerate(series.items()):
        positions = [g + (index - (len(series) - 1) / 2) * width for g in range(len(groups))]
        drawn = ax.bar(positions, values, width, label=name)
        ax.bar_label(drawn, labels=[number(v) for v in values], fontsize=7)
    ax.set_xticks(range(len(groups)), groups)
    ax.set_ylabel(ylabel)
    if len(series) > 1:
        ax.legend(fontsize=8)


def plot_entry_overhead(samples: Samples, path: Path) -> None:
    runs = samples["runs"]
    concurrencies = sorted({r["connections"] for r in runs})
    entries = list(dict.fromkeys(r["entry"] for r in runs))
    by = {(r["entry"], r["connections"]): r["wrk"] for r in runs}
    figure = Figure(figsize=(12, 4))
    panels = (
        ("requests_per_s", "requests/s"),
        ("p50_ms", "p50 latency (ms)"),
        ("p99_ms", "p99 latency (ms)"),
    )
    for ax, (key, label) in zip(figure.subplots(1, 3), panels, strict=True):
        series = {e: [by[(e, c)][key] if (e, c) in by else 0.0 for c in concurrencies] for e in entries}
        bars(ax, [f"{c} conn." for c in concurrencies], series, label)
        ax.set_title(label)
    figure.suptitle("add_one through each entry (wrk, keep-alive); baseline: direct")
    save(figure, path)


def cdf(ax: Axes, samples: list[float], label: str) -> None:
    ordered = sorted(samples)
    fractions = [0.0, *((n + 1) / len(ordered) for n in range(len(ordered)))]
    ax.step([ordered[0], *ordered], fractions, where="post", label=f"{label} (n={len(ordered)})")


def plot_haproxy_throughput(samples: Samples, path: Path) -> None:
    propagation = samples["propagation"]
    figure = Figure(figsize=(11, 4))
    left, right = figure.subplots(1, 2, width_ratios=(2, 1))
    cdf(left, [s * 1000 for s in propagation["added_s"]], "znode added -> in backend")
    cdf(left, [s * 1000 for s in propagation["removed_s"]], "znode deleted -> out of backend")
    reads = sorted(propagation.get("backend_read_s") or [])
    if reads:
        left.axvline(
            reads[len(reads) // 2] * 1000, color="grey", linestyle="--", label="one backend read (median)"
        )
    left.set_xlabel("ms")
    left.set_ylabel("fraction of rounds")
    left.set_ylim(0, 1.05)
    left.set_title("ZooKeeper -> HAProxy backend (CDF)")
    left.legend(fontsize=8)
    throughput = samples["throughput"]
    names = list(throughput)
    bars(right, names, {"requests/s": [throughput[n]["requests_per_s"] for n in names]}, "requests/s")
    right.set_title("add_one, closed-loop clients")
    save(figure, path)


def plot_scale_timeline(samples: Samples, path: Path) -> None:
    events: dict[str, float | None] = samples["events"]
    baseline = samples["baseline"]
    names = list(events)
    figure = Figure(figsize=(11, 4.5))
    ax = figure.subplots()
    rate = samples.get("load", {}).get("answers_per_s") or []
    if rate:
        twin = ax.twinx()
        twin.step(range(len(rate)), rate, where="post", color="lightgrey")
        twin.set_ylabel("load: answers/s", color="grey")
    labels = [*names, "baseline: first instance submit -> ready"]
    levels = {name: len(labels) - 1 - n for n, name in enumerate(labels)}
    ax.barh(levels[labels[-1]], baseline["submit_to_ready_s"], height=0.5, color="tab:orange", alpha=0.5)
    for name in names:
        seconds = events[name]
        if seconds is not None:
            ax.plot([seconds], [levels[name]], "o", color="tab:blue")
            ax.annotate(
                f"{seconds:.1f} s", (seconds, levels[name]), textcoords="offset points", xytext=(6, -3)
            )
    ax.set_yticks(list(levels.values()), list(levels))
    ax.set_xlabel("seconds after the load step")
    ax.set_xlim(left=min(0.0, *(s for s in events.values() if s is not None)) - 1)
    ax.set_title("load step -> decision -> container -> ready -> znode -> discovery -> serving")
    ax.set_zorder(1)  # the events above the load's line
    ax.patch.set_visible(False)
    save(figure, path)


def plot_staging(samples: Samples, path: Path) -> None:
    repositories = samples["repositories"]
    names = list(repositories)
    figure = Figure(figsize=(7, 4))
    ax = figure.subplots()
    series = {
        "sequential plain read (baseline)": [repositories[n]["sequential_mbps"] for n in names],
        "staging, cold cache": [repositories[n]["staged_mbps"] for n in names],
    }
    groups = [
        f"{n}\n{repositories[n]['files']} files, {repositories[n]['bytes'] / 1e6:.0f} MB" for n in names
    ]
    bars(ax, groups, series, "MB/s")
    ax.set_title(f"staging vs sequential read ({samples.get('mode', '')})")
    save(figure, path)


def plot_submit(samples: Samples, path: Path) -> None:
    labels = ["cold", "warm"]
    submit = [samples[k]["submit_s"] for k in labels]
    rest = [samples[k]["first_inference_s"] - samples[k]["submit_s"] for k in labels]
    figure = Figure(figsize=(6, 4))
    ax = figure.subplots()
    ax.bar(labels, submit, label="tarn submit")
    drawn = ax.bar(labels, rest, bottom=submit, label="-> first inference")
    ax.bar_label(drawn, labels=[f"{samples[k]['first_inference_s']:.1f} s" for k in labels])
    ax.set_ylabel("seconds")
    ax.set_title("submit -> first inference (baseline: cold)")
    ax.legend(fontsize=8)
    save(figure, path)


def plot_controller_scale(samples: Samples, path: Path) -> None:
    curve = samples["curve"]
    counts = [p["instances"] for p in curve]
    figure = Figure(figsize=(11, 4))
    left, right = figure.subplots(1, 2)
    left.plot(counts, [p["median_ms"] for p in curve], "o-", label="tick median")
    left.plot(counts, [p["p90_ms"] for p in curve], "s--", label="tick p90")
    left.axhline(500, color="grey", linestyle=":", label="target at 1,000: 500 ms")
    left.set_xscale("log")
    left.set_xlabel("instances")
    left.set_ylabel("tick (ms)")
    per_instance = left.twinx()
    per_instance.plot(
        counts, [p["cpu_ms_per_instance"] for p in curve], "^-", color="tab:green", label="CPU per instance"
    )
    per_instance.set_ylabel("controller CPU per tick and instance (ms)", color="tab:green")
    per_instance.set_ylim(bottom=0)
    handles, labels = left.get_legend_handles_labels()
    more, names = per_instance.get_legend_handles_labels()
    left.legend(handles + more, labels + names, fontsize=8, loc="upper left")
    left.set_title(f"tick vs instances (baseline: {counts[0]})")
    right.plot(counts, [p["rss_mib"] for p in curve], "o-", color="tab:purple")
    right.set_xscale("log")
    for ax in (left, right):
        ax.set_xticks(counts, [f"{n:,}" for n in counts])
        ax.minorticks_off()
    right.set_xlabel("instances")
    right.set_ylabel("max RSS (MiB)")
    right.set_ylim(bottom=0)
    right.set_title("controller memory")
    save(figure, path)


def plot_lab_bringup(samples: Samples, path: Path) -> None:
    labels = ["cold (baseline)", "warm", "re-run of site.yml"]
    values = [samples["cold_s"], samples["warm_s"], samples["rerun_s"]]
    figure = Figure(figsize=(6, 4))
    ax = figure.subplots()
    bars(ax, labels, {"seconds": values}, "seconds")
    ax.set_title(f"lab bring-up (the lab holds {samples['lab_memory_mib']:.0f} MiB)")
    save(figure, path)


def plot_openai_routing(samples: Samples, path: Path) -> None:
    """Each policy's TTFT, every request of its phases (CDF, log scale: the tail is the point)."""
    figure = Figure(figsize=(8, 4))
    ax = figure.subplots()
    for policy, outcomes in samples["outcomes"].items():
        cdf(ax, [o["ttft_s"] * 1000 for o in outcomes if o["ttft_s"] is not None], policy)
    ax.set_xscale("log")
    ax.set_xlabel("time to first token (ms)")
    ax.set_ylabel("fraction of requests")
    ax.set_ylim(0, 1.05)
    ax.set_title("Streamed chats through HAProxy to 2 instances (CDF)")
    ax.legend(fontsize=8)
    save(figure, path)


def plot_front_http(samples: Samples, path: Path) -> None:
    """Per Triton, both fronts' TTFT (CDF); then how many times slower the current front is in each
    figure (1.1: the acceptance's bound)."""
    tritons = samples["tritons"]
    figure = Figure(figsize=(5 * (len(tritons) + 1), 4))
    axes = figure.subplots(1, len(tritons) + 1, squeeze=False)[0]
    for ax, (triton, variants) in zip(axes, tritons.items(), strict=False):
        for variant, found in variants.items():
            cdf(ax, found["ttft_ms"], variant)
        ax.set_xscale("log")
        ax.minorticks_off()  # within a decade, the minor ticks' labels would overlap
        ax.set_xlabel("time to first token (ms)")
        ax.set_ylabel("fraction of requests")
        ax.set_ylim(0, 1.05)
        ax.set_title(f"streamed completions, {triton} Triton (CDF)")
        ax.legend(fontsize=8)
    table = samples["table"]
    names = list(dict.fromkeys(row["name"] for row in table))
    slowdown = {(row["triton"], row["name"]): row["slowdown"] for row in table}
    series = {t: [slowdown.get((t, n)) or 0.0 for n in names] for t in tritons}
    last = axes[-1]
    bars(last, [n.replace(" / ", " /\n") for n in names], series, "current slower by (x)")
    last.axhline(1.1, color="grey", linestyle="--")
    last.set_ylim(0, 1.3 * max([1.1, *(v for values in series.values() for v in values)]))
    last.tick_params(axis="x", labelsize=7, labelrotation=30)
    last.set_title("current vs baseline front (above 1: slower)")
    save(figure, path)


def plot_tenancy(samples: Samples, path: Path) -> None:
    """The quiet client's TTFT alone, beside the flood with fair admission, and with first come,
    first served (log scale: fifo's is orders of magnitude above)."""
    quiet = samples["quiet"]
    phases = [p for p in ("alone", "fair", "fifo") if p in quiet]
    figure = Figure(figsize=(7, 4))
    ax = figure.subplots()
    series = {q: [quiet[p][f"{q}_ms"] for p in phases] for q in ("p50", "p99")}
    bars(ax, ["alone", *(f"flood, {p}" for p in phases[1:])], series, "quiet client's TTFT (ms)")
    ax.set_yscale("log")
    ax.set_title("A quiet user beside a flooder, 4 slots")
    save(figure, path)


PLOTS: dict[str, Callable[[Samples, Path], None]] = {
    "entry_overhead": plot_entry_overhead,
    "haproxy_throughput": plot_haproxy_throughput,
    "scale_timeline": plot_scale_timeline,
    "staging_throughput": plot_staging,
    "submit_to_inference": plot_submit,
    "controller_scale": plot_controller_scale,
    "lab_bringup": plot_lab_bringup,
    "openai_routing": plot_openai_routing,
    "front_http": plot_front_http,
    "tenancy": plot_tenancy,
}


# ---- small tables instead of plots


def ranger_table(samples: Samples) -> str:
    body = [
        (label, number(samples[key]["policies"]), number(samples[key]["p50_us"]),
         number(samples[key]["p99_us"]), number(samples[key]["decisions_per_s"]))
        for label, key in (("engine, baseline", "baseline"), ("engine", "measured"))
    ]  # fmt: skip
    http = samples["http"]
    body.append(
        ("controller's GET /authorize", number(http["policies"]), number(http["p50_ms"] * 1000),
         number(http["p99_ms"] * 1000), number(http["requests_per_s"]))
    )  # fmt: skip
    return markdown_table(("path", "policies", "p50 (µs)", "p99 (µs)", "per second"), body)


def activator_table(samples: Samples) -> str:
    held, entry = samples["overload"], samples["entry"]
    rss = " / ".join(
        number(held[k] / 1024) for k in ("rss_idle_kib", "rss_holding_kib", "rss_after_excess_kib")
    )
    body = [
        ("RSS idle / holding / after the excess (MiB)",
         rss),
        ("per held request (KiB)", number(held["kib_per_held"])),
        ("excess refused with 503 + Retry-After", f"{held['excess_refused']} of {held['held']}"),
        ("slowest refusal (ms)", number(held["excess_slowest_ms"])),
        ("entry p50 / p99 without the activator (µs)", f"{number(entry['without']['p50_us'])} / "
         f"{number(entry['without']['p99_us'])}"),
        ("entry p50 / p99 with the activator as backup (µs)", f"{number(entry['with']['p50_us'])} / "
         f"{number(entry['with']['p99_us'])}"),
        ("requests through the activator meanwhile", number(entry["through_activator"])),
    ]  # fmt: skip
    return markdown_table(("figure", "value"), body)


TABLES: dict[str, Callable[[Samples], str]] = {
    "ranger_authorize": ranger_table,
    "activator": activator_table,
}


# ---- the report


def section(bench: Bench, document: Result | None, run: dict[str, Any] | None, folder: Path) -> str:
    lines = [f"## {bench.title}", ""]
    if run is not None and run["status"] != "ok":
        lines += [f"**{run['status']}**: {run['reason']}", ""]
    if document is None:
        return "\n".join([*lines, f"{why_not(bench.name, {} if run is None else {bench.name: run})}.", ""])
    measured = time.strftime(
        "%Y-%m-%d %H:%M", time.localtime((folder / f"{bench.name}.json").stat().st_mtime)
    )
    lines += [f"Measured {measured}; parameters: `{json.dumps(document.parameters)}`.", ""]
    kind = document.bench
    if kind in PLOTS:
        image = folder / f"{bench.name}.png"
        try:
            PLOTS[kind](document.samples, image)
            lines += [f"![{bench.title}]({image.name})", ""]
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as error:  # a document short of samples
            lines += [f"No plot: {error.__class__.__name__}: {error}", ""]
    if kind in TABLES:
        lines += [TABLES[kind](document.samples), ""]
    body = [figure_row(bench.name, f).cells()[1:] for f in document.figures]
    if body:
        lines += [markdown_table(SUMMARY_HEADER[1:], body), ""]
    log = folder / f"{bench.name}.log"
    if log.exists():
        lines += [f"Full log: [{log.name}]({log.name}) (`{os.path.relpath(log)}`)", ""]
    return "\n".join(lines)


def write_report(folder: Path) -> Path:
    """report.md and its PNGs in ``folder``; returns the report's path."""
    documents = load_documents(folder)
    record, runs = load_runs(folder)
    started = record.get("started")
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(started)) if started else "unknown"
    head = [
        "# TARN benchmarks",
        "",
        f"Written by `python -m bench` (`make bench`); last run started {when}."
        " Each figure stands beside its baseline from the same run of its bench.",
        "",
    ]
    if record.get("quick"):
        head += ["**--quick**: small parameters, a check that everything runs; not figures to quote.", ""]
    head += ["## Summary", "", markdown_table(SUMMARY_HEADER, [r.cells() for r in rows(documents, runs)]), ""]
    if record.get("runs"):
        body = [
            (r["name"], r["status"], r["reason"], f"{r['seconds']:.0f}", r["log"]) for r in record["runs"]
        ]
        head += ["## Runs", "", markdown_table(("run", "status", "reason", "seconds", "log"), body), ""]
    sections = [section(b, documents.get(b.name), runs.get(b.name), folder) for b in BENCHES]
    report = folder / "report.md"
    report.write_text("\n".join([*head, *sections]))
    return report


if __name__ == "__main__":
    print(write_report(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("build/bench")))
