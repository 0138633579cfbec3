"""/dashboard: one HTML page rendered from the snapshot, with charts drawn by /dashboard.js from
/dashboard/data; the script refreshes charts, cards and tables in place (without it, the page
reloads itself).

Every value is escaped. The page never shows the token or any secret: the snapshot holds none.
With Ranger on, the caller passes a snapshot cut to the models the viewer may list, and the
policies' health: the page says when they are stale or missing.

Where OpenAI fronts run (``--openai-port``), a section "LLM (OpenAI API)" shows their figures
(tarn.controller.llm, cut the same way): tokens and requests per user and model, streams and token
timings per model; the containers table gains each front's streams, the charts the tokens per second,
the streams and the time to first token.

The page says in words what the autoscaler watches and its thresholds in force (``scaling_note``):
the load chart draws its dashed thresholds only when that is the load (the streams chart shows the
total, not the mean per instance that queue and streams thresholds are against).
"""

from __future__ import annotations

import time
from html import escape

from tarn.controller.llm import LlmView, ModelRow, UserModelRow
from tarn.controller.snapshot import InstanceView, Snapshot
from tarn.ranger.state import Health
from tarn.stdlib.config import TarnConfig, cli_flag

STYLE = """
body{font:14px system-ui,sans-serif;margin:1.5em;color:#1d2430;background:#f7f8fa}
h1{font-size:1.4em;margin:0 0 .2em} h2{font-size:1.1em;margin:1.4em 0 .4em}
h3{font-size:1em;margin:1em 0 .3em}
table{border-collapse:collapse;background:#fff;min-width:40em}
th,td{border:1px solid #d5d9e0;padding:.3em .6em;text-align:left}
th{background:#eef1f5} .READY{color:#137333} .DRAINING{color:#b06000}
.STARTING,.UNREACHABLE{color:#a50e0e} .cards{display:flex;gap:1em;flex-wrap:wrap}
.card{background:#fff;border:1px solid #d5d9e0;padding:.6em 1em;min-width:8em}
.card b{display:block;font-size:1.6em} .problem{color:#a50e0e}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(30em,1fr));gap:1em;margin-top:1em}
.chart{background:#fff;border:1px solid #d5d9e0;padding:.4em .8em} .chart h3{font-size:1em;margin:.2em 0}
.chart svg{width:100%;height:auto} .legend{font-size:.9em} .legend span{margin-right:1em}
"""
CHARTS = ("instances", "load", "requests", "latency", "gpu")  # the ids /dashboard.js draws into
LLM_CHARTS = ("tokens", "streams", "ttft")  # drawn too where OpenAI fronts run
SIGNALS = {  # --scale-on: what its figure is, each a mean over the ready instances
    "load": "load per ready instance (mean, 0..1)",
    "queue": "Triton's pending requests per ready instance (mean)",
    "streams": "OpenAI fronts' streams in flight per ready instance (mean)",
}


def scaling_note(config: TarnConfig) -> str:
    """What the autoscaler watches (--scale-on) and the thresholds in force, in words."""
    up, down = config.scale_thresholds
    flag = cli_flag("scale_down" if config.scale_on == "load" else "scale_down_at")
    fewer = f"fewer below {down:g}" if down > 0 else f"never fewer on this signal ({flag} 0)"
    return f"autoscaler: {SIGNALS[config.scale_on]}; more instances above {up:g}, {fewer}"


def render_dashboard(
    snap: Snapshot,
    refresh_s: int = 5,
    ranger: Health | None = None,
    user: str | None = None,
    llm: LlmView | None = None,
    scaling: str | None = None,
) -> str:
    """``ranger``: the policies' health (None: Ranger off); ``user``: who the models are shown for;
    ``llm``: the OpenAI fronts' figures, cut like the snapshot (None or not ``shown``: no section);
    ``scaling``: what the autoscaler watches (``scaling_note``; None: not said)."""
    fronts = llm is not None and llm.shown
    charts = CHARTS + LLM_CHARTS if fronts else CHARTS
    container_columns = ["instance", "state", "host", "HTTP", "load", "req/s", "GPUs", "models", "container"]
    if fronts:
        container_columns.insert(6, "streams")
    ready = sum(1 for i in snap.instances if i.state == "READY")
    cards = [
        ("service", snap.service),
        ("state", snap.state),
        ("target", str(snap.target)),
        ("running", str(snap.running)),
        ("ready", str(ready)),
        ("in discovery", str(len(snap.serving()))),
        ("ZooKeeper", snap.zookeeper),
    ]
    if snap.scale_to_zero:
        cards.append(("scaled to zero", "yes" if snap.target == 0 else "no"))
    if snap.scale_to_zero or snap.held:
        cards.append(("requests held", str(snap.held)))
        if snap.held:
            cards.append(("oldest held", f"{snap.held_oldest_s:.1f} s"))
    notes = [scaling] if scaling else []
    problems = list(snap.problems)
    if ranger is not None:
        version = f" v{ranger.policy_version}" if ranger.policy_version >= 0 else ""
        cards.append(("Ranger", ranger.status + version))
        (notes if ranger.status == "current" else problems).append(ranger.text)
        notes.append(f"models shown for {user}" if user else "no X-TARN-User header: no models shown")
    parts = [
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<noscript><meta http-equiv="refresh" content="{refresh_s}"></noscript>',
        f"<title>TARN · {escape(snap.service)}</title><style>{STYLE}</style></head>",
        f'<body data-refresh="{refresh_s}">',
        f"<h1>TARN · {escape(snap.service)}</h1>",
        # data-at: the tick's wall clock, for scripts that line the figures up with their own
        f'<div id="live-top" data-at="{snap.at:.3f}">',
        f"<p>as of {escape(_clock(snap.at))}; "
        f"last decision: {escape(snap.decision.reason if snap.decision else 'none yet')}</p>",
        '<div class="cards">',
        *(f'<div class="card">{escape(k)}<b>{escape(v)}</b></div>' for k, v in cards),
        "</div>",
        *(f'<p class="problem">{escape(p)}</p>' for p in problems),
        *(f"<p>{escape(n)}</p>" for n in notes),
        "</div>",
        '<div id="charts" class="charts">',
        *(f'<div class="chart" id="chart-{chart}"></div>' for chart in charts),
        "</div>",
        '<div id="live-tables">',
        "<h2>Containers</h2>",
        _table(container_columns, [_container_row(i, fronts) for i in snap.instances]),
        "<h2>Models</h2>",
        _table(
            [
                "model",
                "instances serving it",
                "req/s",
                "failed/s",
                "p50",
                "p99",
                "mean",
                "queue p99",
                "queue mean",
            ],
            _model_rows(snap),
        ),
        *(_llm_section(llm) if llm is not None and fronts else ()),
        "<h2>Scaling history</h2>",
        _table(
            ["time", "direction", "target", "reason"],
            [[_clock(e.at), e.direction, f"{e.target_from} → {e.target_to}", e.reason] for e in snap.history],
        ),
        "</div>",
        '<script src="/dashboard.js"></script>',
        "</body></html>",
    ]
    return "\n".join(parts)


def _container_row(i: InstanceView, fronts: bool) -> list[str]:
    """``fronts``: the column of each OpenAI front's streams in flight ("-" where none runs)."""
    gpus = ", ".join(
        f"{g.uuid[-8:]} {g.utilization:.0%} {g.memory_used_bytes / 2**30:.1f} GiB" for g in i.gpus
    )
    streams = ["-" if i.front_streams is None else _count(i.front_streams)] if fronts else []
    return [
        i.instance,
        i.state,
        i.host,
        f"{i.ip}:{i.http_port}",
        f"{i.load.value:.2f}" if i.load else "-",
        f"{i.load.request_rate:.1f}" if i.load else "-",
        *streams,
        gpus or "none",
        ", ".join(i.models) or "-",
        i.container_id,
    ]


def _llm_section(llm: LlmView) -> list[str]:
    return [
        '<h2 id="llm">LLM (OpenAI API)</h2>',
        f"<p>{llm.fronts} instance(s) running a front. Tokens, requests and timings since the "
        "controller started; streams now. Time-to-first-token p50 and p99 are estimated from the "
        "fronts' histogram buckets (as Prometheus' histogram_quantile), the means are exact.</p>",
        "<h3>By user and model</h3>",
        _table(
            ["user", "model", "prompt tokens", "completion tokens", "requests", "cancelled", "failed"],
            [_user_row(r) for r in llm.users],
        ),
        "<h3>By model</h3>",
        _table(
            [
                "model",
                "streams in flight",
                "first token p50",
                "first token p99",
                "first token mean",
                "between tokens mean",
            ],
            [_llm_model_row(m) for m in llm.models],
        ),
    ]


def _user_row(r: UserModelRow) -> list[str]:
    counts = (r.prompt_tokens, r.completion_tokens, r.requests, r.cancelled, r.failed)
    return [r.user, r.model, *map(_count, counts)]


def _llm_model_row(m: ModelRow) -> list[str]:
    times = (m.first_token_p50_s, m.first_token_p99_s, m.first_token_mean_s, m.between_tokens_mean_s)
    return [m.model, _count(m.streams), *map(_ms, times)]


def _count(value: float) -> str:
    return f"{value:.0f}"


def _model_rows(snap: Snapshot) -> list[list[str]]:
    """Each model: who serves it, and its figures over the last tick (every instance together)."""
    serving: dict[str, list[str]] = {}
    for i in snap.instances:
        for model in i.models:
            serving.setdefault(model, []).append(i.instance)
    figures = {m.model: m for m in snap.models}
    rows = []
    for model in sorted(serving.keys() | figures.keys()):
        m = figures.get(model)
        rates = [f"{m.requests_per_s:.1f}", f"{m.failures_per_s:.1f}"] if m else ["-", "-"]
        times = (m.p50_s, m.p99_s, m.latency_s, m.queue_p99_s, m.queue_s) if m else (None,) * 5
        rows.append([model, ", ".join(serving.get(model, [])) or "-", *rates, *map(_ms, times)])
    return rows


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f} ms"


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    if not rows:
        return f"<table><tr>{head}</tr><tr><td colspan={len(header)}>none</td></tr></table>"
    body = "".join(
        "<tr>" + "".join(_cell(header[n], value) for n, value in enumerate(row)) + "</tr>" for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _cell(column: str, value: str) -> str:
    css = f' class="{escape(value)}"' if column == "state" else ""
    return f"<td{css}>{escape(value)}</td>"


def _clock(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at)) if at else "never"
