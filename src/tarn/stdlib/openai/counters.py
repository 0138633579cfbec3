"""What the OpenAI front counts, and its Prometheus text (names ``tarn_openai_*``, docs/openai.md).

Plain data: the server adds to it, :func:`prometheus_text` renders it; the controller's /metrics
can merge the text of every instance's front. Tokens and outcomes are per user (the entry's
``X-TARN-User``) and model; the timings and the streams in flight per model.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Seconds. The first token waits for the queue and the prompt; the next ones for one step each.
FIRST_TOKEN_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
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


@dataclass
class Counters:
    prompt_tokens: dict[UserModel, int] = field(default_factory=dict)
    completion_tokens: dict[UserModel, int] = field(default_factory=dict)
    requests: dict[tuple[str, str, str], int] = field(default_factory=dict)  # (user, model, outcome)
    streams_in_flight: dict[str, int] = field(default_factory=dict)
    first_token: dict[str, Histogram] = field(default_factory=dict)
    between_tokens: dict[str, Histogram] = field(default_factory=dict)
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
        self.first_token.setdefault(model, Histogram(FIRST_TOKEN_BUCKETS)).observe(seconds)

    def between_tokens_took(self, model: str, seconds: float) -> None:
        self.between_tokens.setdefault(model, Histogram(BETWEEN_TOKENS_BUCKETS)).observe(seconds)

    def ended(self, user: str, model: str, outcome: str, prompt: int, completion: int) -> None:
        """A generation is over: its outcome and its tokens (a cancelled one's, up to the cancel)."""
        user = self.user_label(user)
        key = (user, model)
        self.prompt_tokens[key] = self.prompt_tokens.get(key, 0) + prompt
        self.completion_tokens[key] = self.completion_tokens.get(key, 0) + completion
        self.requests[(user, model, outcome)] = self.requests.get((user, model, outcome), 0) + 1


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(**labels: str) -> str:
    return "{" + ",".join(f'{name}="{_label(value)}"' for name, value in labels.items()) + "}"


def _family(name: str, kind: str, help_text: str) -> list[str]:
    return [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]


def _histogram(name: str, model: str, histogram: Histogram) -> list[str]:
    lines, cumulated = [], 0
    for bound, count in zip(histogram.bounds, histogram.counts, strict=True):
        cumulated += count
        lines.append(f"{name}_bucket{_labels(model=model, le=f'{bound:g}')} {cumulated}")
    lines.append(f"{name}_bucket{_labels(model=model, le='+Inf')} {histogram.count}")
    lines.append(f"{name}_sum{_labels(model=model)} {histogram.total:.6f}")
    lines.append(f"{name}_count{_labels(model=model)} {histogram.count}")
    return lines


def prometheus_text(counters: Counters) -> str:
    """The counters in Prometheus' text format (0.0.4)."""
    lines = _family(
        "tarn_openai_prompt_tokens_total", "counter", "Prompt tokens of generations, by user and model"
    )
    lines += [
        f"tarn_openai_prompt_tokens_total{_labels(user=user, model=model)} {value}"
        for (user, model), value in sorted(counters.prompt_tokens.items())
    ]
    lines += _family(
        "tarn_openai_completion_tokens_total", "counter", "Completion tokens generated, by user and model"
    )
    lines += [
        f"tarn_openai_completion_tokens_total{_labels(user=user, model=model)} {value}"
        for (user, model), value in sorted(counters.completion_tokens.items())
    ]
    lines += _family("tarn_openai_requests_total", "counter", "Generations ended, by user, model and outcome")
    lines += [
        f"tarn_openai_requests_total{_labels(user=user, model=model, outcome=outcome)} {value}"
        for (user, model, outcome), value in sorted(counters.requests.items())
    ]
    lines += _family(
        "tarn_openai_streams_in_flight", "gauge", "Generations streaming from Triton now, by model"
    )
    lines += [
        f"tarn_openai_streams_in_flight{_labels(model=model)} {value}"
        for model, value in sorted(counters.streams_in_flight.items())
    ]
    lines += _family(
        "tarn_openai_time_to_first_token_seconds",
        "histogram",
        "From the request to its first token, by model",
    )
    for model, histogram in sorted(counters.first_token.items()):
        lines += _histogram("tarn_openai_time_to_first_token_seconds", model, histogram)
    lines += _family(
        "tarn_openai_time_between_tokens_seconds", "histogram", "Between two tokens of a stream, by model"
    )
    for model, histogram in sorted(counters.between_tokens.items()):
        lines += _histogram("tarn_openai_time_between_tokens_seconds", model, histogram)
    return "\n".join(lines) + "\n"
