"""The OpenAI fronts' figures as the dashboard shows them (issue 35), pure.

Two sources, both already in the controller: the totals of the fronts' series since it started
(``Counters.openai``, summed by tarn.controller.fronts) for the tables, and each tick's increases
(``TickEvents.front_deltas``) for the charts' per-tick rates. Streams in flight are the
snapshot's, as each front last reported them.

Quantiles come from the fronts' histogram buckets the way Prometheus' ``histogram_quantile``
estimates them (linear within the bucket the rank falls in), so the dashboard and a Grafana panel
over the same buckets agree; their precision is the buckets' width
(tarn.stdlib.openai.counters.FIRST_TOKEN_BUCKETS). Means are ``_sum`` / ``_count``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from tarn.controller import fronts
from tarn.controller.fronts import Series
from tarn.controller.snapshot import InstanceView
from tarn.stdlib.openai import metric_names as names

# The fronts' series (tarn.stdlib.openai.metric_names): the counters' samples, the histograms' families.
(PROMPT,) = names.PROMPT_TOKENS.samples
(COMPLETION,) = names.COMPLETION_TOKENS.samples
(REQUESTS,) = names.REQUESTS.samples
TIME_TO_FIRST = names.TIME_TO_FIRST_TOKEN.name
TIME_BETWEEN = names.TIME_BETWEEN_TOKENS.name

Bucket = tuple[float, float]  # (upper bound, observations at or below it), +Inf as math.inf


def quantile(q: float, buckets: Iterable[Bucket]) -> float | None:
    """The ``q``-quantile estimated from cumulative buckets, as Prometheus' histogram_quantile:
    linear between the bucket's bounds (the first from 0); a rank in the +Inf bucket gives the
    largest finite bound. None without observations or without the +Inf bucket."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q={q}: give a quantile from 0 to 1")
    ordered = sorted(buckets)
    if not ordered or ordered[-1][0] != math.inf:
        return None
    # Summed increases can dip where a front restarted between two reads: counts never fall with
    # the bound, so take the running maximum (Prometheus does the same).
    cumulative, highest = [], 0.0
    for bound, count in ordered:
        highest = max(highest, count)
        cumulative.append((bound, highest))
    total = cumulative[-1][1]
    if total <= 0:
        return None
    rank = q * total
    lower_bound, lower_count = 0.0, 0.0
    for index, (bound, count) in enumerate(cumulative):
        if count >= rank:
            if bound == math.inf:
                return cumulative[index - 1][0] if index else None
            if count == lower_count:
                return lower_bound
            return lower_bound + (bound - lower_bound) * (rank - lower_count) / (count - lower_count)
        lower_bound, lower_count = bound, count
    return None  # not reached: the +Inf bucket holds every observation


def _label(series: Series, name: str) -> str:
    return dict(series[1]).get(name, "")


def _buckets(values: Mapping[Series, float], family: str) -> dict[str, list[Bucket]]:
    """Each model's buckets of a histogram family."""
    found: dict[str, list[Bucket]] = {}
    for series, value in values.items():
        if series[0] == f"{family}_bucket":
            le = _label(series, "le")
            found.setdefault(_label(series, "model"), []).append((float(le), value))  # float("+Inf") is inf
    return found


def _mean(values: Mapping[Series, float], family: str, model: str) -> float | None:
    labels = (("model", model),)
    count = values.get((f"{family}_count", labels), 0.0)
    return values.get((f"{family}_sum", labels), 0.0) / count if count > 0 else None


@dataclass(frozen=True)
class UserModelRow:
    """One user's use of one model since the controller started."""

    user: str
    model: str
    prompt_tokens: float
    completion_tokens: float
    requests: float  # ended, whatever the outcome
    cancelled: float
    failed: float


@dataclass(frozen=True)
class ModelRow:
    """One model through the fronts: its streams now, its timings since the controller started."""

    model: str
    streams: float
    first_token_p50_s: float | None
    first_token_p99_s: float | None
    first_token_mean_s: float | None
    between_tokens_mean_s: float | None


@dataclass(frozen=True)
class LlmView:
    fronts: int  # instances running an OpenAI front
    users: tuple[UserModelRow, ...] = ()
    models: tuple[ModelRow, ...] = ()

    @property
    def shown(self) -> bool:
        """The dashboard's section: while a front runs, or once any front counted anything."""
        return bool(self.fronts or self.users or self.models)

    def visible(self, may_list: Callable[[str], bool]) -> LlmView:
        """Cut to the models ``may_list`` lets the viewer see (Ranger's ``list``)."""
        return replace(
            self,
            users=tuple(r for r in self.users if may_list(r.model)),
            models=tuple(r for r in self.models if may_list(r.model)),
        )


def view(totals: Mapping[Series, float], instances: Sequence[InstanceView]) -> LlmView:
    """The tables: ``totals`` are the fronts' series since the controller started."""
    totals = dict(totals)  # a copy first: the loop's thread adds to the controller's own
    used: dict[tuple[str, str], dict[str, float]] = {}
    for series, value in totals.items():
        name = series[0]
        if name in (PROMPT, COMPLETION, REQUESTS):
            row = used.setdefault((_label(series, "user"), _label(series, "model")), {})
            key = _label(series, "outcome") if name == REQUESTS else name
            row[key] = row.get(key, 0.0) + value
    users = tuple(
        UserModelRow(
            user,
            model,
            row.get(PROMPT, 0.0),
            row.get(COMPLETION, 0.0),
            sum(row.get(outcome, 0.0) for outcome in ("completed", "cancelled", "failed")),
            row.get("cancelled", 0.0),
            row.get("failed", 0.0),
        )
        for (user, model), row in sorted(used.items())
    )
    streams = fronts.summed(dict(i.openai_streams) for i in instances)
    first = _buckets(totals, TIME_TO_FIRST)
    between = set(_buckets(totals, TIME_BETWEEN))
    models = tuple(
        ModelRow(
            model,
            streams.get(model, 0.0),
            quantile(0.5, first.get(model, ())),
            quantile(0.99, first.get(model, ())),
            _mean(totals, TIME_TO_FIRST, model),
            _mean(totals, TIME_BETWEEN, model),
        )
        for model in sorted(streams.keys() | first.keys() | between | {r.model for r in users})
    )
    return LlmView(sum(1 for i in instances if i.openai_port is not None), users, models)


@dataclass(frozen=True)
class TickFigures:
    """One tick of the fronts, every user and model together (no names: the charts' JSON)."""

    prompt_tokens_per_s: float | None
    completion_tokens_per_s: float | None
    first_token_p99_s: float | None  # the slowest model's, over the first tokens of this tick


def tick_figures(increases: Iterable[Mapping[Series, float]], seconds: float | None) -> TickFigures:
    """From one tick's increases (one mapping per front read) over the ``seconds`` since the
    previous counted tick; no rate without an interval. A front missed on a tick (no answer)
    adds its tokens to the next one's."""
    summed: dict[Series, float] = {}
    for deltas in increases:
        fronts.add(summed, deltas)
    p99s = [p for p in (quantile(0.99, b) for b in _buckets(summed, TIME_TO_FIRST).values()) if p is not None]

    def rate(name: str) -> float | None:
        if not seconds or seconds <= 0:
            return None
        return sum(v for series, v in summed.items() if series[0] == name) / seconds

    return TickFigures(rate(PROMPT), rate(COMPLETION), max(p99s) if p99s else None)
