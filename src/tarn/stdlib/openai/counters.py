"""What the OpenAI front counts, and its Prometheus text (names ``tarn_openai_*``, docs/openai.md).

Plain data: the server adds to it, :func:`prometheus_text` renders it through prometheus_client
(tarn.stdlib.exposition) under the families of tarn.stdlib.openai.metric_names, which the
controller reads back from every instance's front and sums into its own /metrics. Tokens and
outcomes are per user (the entry's ``X-TARN-User``) and model; the timings and the streams in
flight per model.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import accumulate
from typing import TypeVar

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from tarn.stdlib.exposition import Family, buckets, label, render
from tarn.stdlib.openai import metric_names as names

# Seconds. The first token waits for the queue and the prompt; the next ones for one step each.
FIRST_TOKEN_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
QUEUE_WAIT_BUCKETS = (0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
BETWEEN_TOKENS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
OUTCOMES = ("completed", "cancelled", "failed")
# Labels come from clients (issue 48, item 3): a model is a label once Triton has shown it has it
# (its metadata answered, or it accepted a generation): a name Triton does not have leaves no series,
# whatever Triton answered. At most MAX_USERS distinct users, later ones counted as OTHER_USER.
MAX_USERS = 256
OTHER_USER = "other"


@dataclass
class Histogram:
    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)  # observations in each bucket, not cumulated
    count: int = 0
    total: float = 0.0

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0] * len(self.bounds)

    def observe(self, value: float) -> None:
        self.count += 1
        self.total += value
        for index, bound in enumerate(self.bounds):
            if value <= bound:
                self.counts[index] += 1
                return


UserModel = tuple[str, str]
Key = TypeVar("Key")


@dataclass
class Counters:
    prompt_tokens: dict[UserModel, int] = field(default_factory=dict)
    completion_tokens: dict[UserModel, int] = field(default_factory=dict)
    requests: dict[tuple[str, str, str], int] = field(default_factory=dict)  # (user, model, outcome)
    streams_in_flight: dict[str, int] = field(default_factory=dict)
    first_token: dict[str, Histogram] = field(default_factory=dict)
    between_tokens: dict[str, Histogram] = field(default_factory=dict)
    queued_now: dict[UserModel, int] = field(default_factory=dict)  # waiting for a slot (admission)
    queue_wait: dict[UserModel, Histogram] = field(default_factory=dict)
    served: set[str] = field(default_factory=set)  # models Triton has shown it has: the model labels
    users: set[str] = field(default_factory=set)  # the user labels so far (MAX_USERS at most)

    def has_model(self, model: str) -> None:
        """Triton has ``model``: from now on a label."""
        self.served.add(model)

    def user_label(self, user: str) -> str:
        """``user``, or OTHER_USER once MAX_USERS others have their own label."""
        if user in self.users or len(self.users) < MAX_USERS:
            self.users.add(user)
            return user
        return OTHER_USER

    def stream_started(self, model: str) -> None:
        self.streams_in_flight[model] = self.streams_in_flight.get(model, 0) + 1

    def stream_ended(self, model: str) -> None:
        self.streams_in_flight[model] = self.streams_in_flight.get(model, 1) - 1

    def forget_stream(self, model: str) -> None:
        """A stream Triton refused for an unknown model: the name leaves no series behind."""
        self.stream_ended(model)
        if self.streams_in_flight[model] == 0:
            del self.streams_in_flight[model]

    def first_token_after(self, model: str, seconds: float) -> None:
        _histogram(self.first_token, model, FIRST_TOKEN_BUCKETS).observe(seconds)

    def between_tokens_took(self, model: str, seconds: float) -> None:
        _histogram(self.between_tokens, model, BETWEEN_TOKENS_BUCKETS).observe(seconds)

    def queued(self, user: str, model: str, change: int) -> None:
        """A request began (1) or ended (-1) waiting for a slot (a series at 0 stays: its user and
        model are labels already, bounded as the others)."""
        key = (self.user_label(user), model)
        self.queued_now[key] = self.queued_now.get(key, 0) + change

    def waited(self, user: str, model: str, seconds: float) -> None:
        _histogram(self.queue_wait, (self.user_label(user), model), QUEUE_WAIT_BUCKETS).observe(seconds)

    def ended(self, user: str, model: str, outcome: str, prompt: int, completion: int) -> None:
        """A generation is over: its outcome and its tokens (a cancelled one's, up to the cancel)."""
        user = self.user_label(user)
        key = (user, model)
        self.prompt_tokens[key] = self.prompt_tokens.get(key, 0) + prompt
        self.completion_tokens[key] = self.completion_tokens.get(key, 0) + completion
        self.requests[(user, model, outcome)] = self.requests.get((user, model, outcome), 0) + 1


def _histogram(histograms: dict[Key, Histogram], key: Key, bounds: tuple[float, ...]) -> Histogram:
    """The histogram of ``key`` (a model; a user and model), made the first time only (this runs
    for every token)."""
    found = histograms.get(key)
    if found is None:
        found = histograms[key] = Histogram(bounds)
    return found


class CountersCollector(Collector):
    """The front's families (tarn.stdlib.openai.metric_names), filled from its counters at each scrape."""

    def __init__(self, counters: Counters) -> None:
        self._counters = counters

    def collect(self) -> Iterator[Metric]:
        counters = self._counters
        for family, values in (
            (names.PROMPT_TOKENS, counters.prompt_tokens),
            (names.COMPLETION_TOKENS, counters.completion_tokens),
        ):
            metric = family.counter()
            for (user, model), value in sorted(values.items()):
                metric.add_metric([label(user), label(model)], value)
            yield metric
        requests = names.REQUESTS.counter()
        for (user, model, outcome), value in sorted(counters.requests.items()):
            requests.add_metric([label(user), label(model), outcome], value)
        yield requests
        streams = names.STREAMS_IN_FLIGHT.gauge()
        for model, value in sorted(counters.streams_in_flight.items()):
            streams.add_metric([label(model)], value)
        yield streams
        for family, by_model in (
            (names.TIME_TO_FIRST_TOKEN, counters.first_token),
            (names.TIME_BETWEEN_TOKENS, counters.between_tokens),
        ):
            yield histograms(family, (((model,), histogram) for model, histogram in by_model.items()))
        queued = names.QUEUED_REQUESTS.gauge()
        for (user, model), value in sorted(counters.queued_now.items()):
            queued.add_metric([label(user), label(model)], value)
        yield queued
        yield histograms(names.QUEUE_WAIT, counters.queue_wait.items())


def histograms(family: Family, by_labels: Iterable[tuple[tuple[str, ...], Histogram]]) -> Metric:
    """``family``'s histograms, each under its label values (in the family's label order)."""
    metric = family.histogram()
    for values, histogram in sorted(by_labels, key=lambda item: item[0]):
        cumulated = buckets(histogram.bounds, accumulate(histogram.counts), histogram.count)
        metric.add_metric([label(value) for value in values], cumulated, histogram.total)
    return metric


def prometheus_text(counters: Counters) -> str:
    """The counters in Prometheus' text format (0.0.4)."""
    return render(CountersCollector(counters)).decode()
