"""What the OpenAI front counts (tarn.stdlib.openai.counters), read back with prometheus_client's own
parser: the text must be valid Prometheus exposition, whatever the user names hold."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tarn.stdlib.openai import metric_names
from tarn.stdlib.openai.counters import (
    BETWEEN_TOKENS_BUCKETS,
    FIRST_TOKEN_BUCKETS,
    Counters,
    Histogram,
    prometheus_text,
)
from tests.support.exposition import departures


def samples(counters: Counters) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(prometheus_text(counters))
        for sample in family.samples
    }


@pytest.mark.parametrize(
    ("values", "counts"),
    [
        ([], [0, 0, 0]),
        ([0.5], [1, 0, 0]),
        ([1.0, 1.5, 2.0], [1, 2, 0]),  # a bound belongs to its bucket (le)
        ([9.0], [0, 0, 0]),  # above every bound: only in +Inf (count)
    ],
)
def test_histogram_buckets(values: list[float], counts: list[int]) -> None:
    histogram = Histogram((1.0, 2.0, 5.0))
    for value in values:
        histogram.observe(value)
    assert histogram.counts == counts
    assert histogram.count == len(values)
    assert histogram.total == pytest.approx(sum(values))


def test_the_counters_in_prometheus_text() -> None:
    counters = Counters()
    counters.stream_started("tiny_lm")
    counters.stream_started("tiny_lm")
    counters.stream_ended("tiny_lm")
    counters.first_token_after("tiny_lm", 0.03)
    counters.between_tokens_took("tiny_lm", 0.02)
    counters.between_tokens_took("tiny_lm", 0.2)
    counters.ended("alice", "tiny_lm", "completed", 9, 5)
    counters.ended("alice", "tiny_lm", "cancelled", 3, 2)
    counters.ended("bob", "tiny_lm", "completed", 4, 1)
    got = samples(counters)
    alice, bob = (("model", "tiny_lm"), ("user", "alice")), (("model", "tiny_lm"), ("user", "bob"))
    assert got[("tarn_openai_prompt_tokens_total", alice)] == 12
    assert got[("tarn_openai_completion_tokens_total", alice)] == 7
    assert got[("tarn_openai_completion_tokens_total", bob)] == 1
    assert got[("tarn_openai_requests_total", (*alice[:1], ("outcome", "cancelled"), alice[1]))] == 1
    assert got[("tarn_openai_streams_in_flight", (("model", "tiny_lm"),))] == 1
    first = {k[1]: v for k, v in got.items() if k[0] == "tarn_openai_time_to_first_token_seconds_bucket"}
    assert first[(("le", "0.025"), ("model", "tiny_lm"))] == 0
    assert first[(("le", "0.05"), ("model", "tiny_lm"))] == 1
    assert first[(("le", "+Inf"), ("model", "tiny_lm"))] == 1
    between = {k[1]: v for k, v in got.items() if k[0] == "tarn_openai_time_between_tokens_seconds_bucket"}
    assert between[(("le", "0.025"), ("model", "tiny_lm"))] == 1  # cumulated in the text
    assert between[(("le", "0.25"), ("model", "tiny_lm"))] == 2
    assert got[("tarn_openai_time_between_tokens_seconds_count", (("model", "tiny_lm"),))] == 2
    assert got[("tarn_openai_time_between_tokens_seconds_sum", (("model", "tiny_lm"),))] == pytest.approx(
        0.22
    )
    assert len(first) == len(FIRST_TOKEN_BUCKETS) + 1
    assert len(between) == len(BETWEEN_TOKENS_BUCKETS) + 1


def test_every_name_is_prefixed_and_typed_even_with_nothing_counted() -> None:
    families = list(text_string_to_metric_families(prometheus_text(Counters())))
    assert {f.name for f in families} == {
        "tarn_openai_prompt_tokens",
        "tarn_openai_completion_tokens",
        "tarn_openai_requests",
        "tarn_openai_streams_in_flight",
        "tarn_openai_time_to_first_token_seconds",
        "tarn_openai_time_between_tokens_seconds",
        "tarn_openai_queued_requests",
        "tarn_openai_queue_wait_seconds",
    }


def test_user_names_are_escaped() -> None:
    counters = Counters()
    odd = 'al"ice\\\nx'
    counters.ended(odd, "m", "completed", 1, 1)
    got = samples(counters)
    assert got[("tarn_openai_prompt_tokens_total", (("model", "m"), ("user", odd)))] == 1


def test_a_refused_model_leaves_no_series() -> None:
    counters = Counters()
    counters.stream_started("typo")
    counters.forget_stream("typo")
    assert "typo" not in prometheus_text(counters)


def test_the_text_is_the_declared_families_empty_or_not() -> None:
    assert departures(prometheus_text(Counters()), metric_names.FAMILIES) == []
    counters = Counters()
    counters.stream_started("m")
    counters.first_token_after("m", 0.3)
    counters.between_tokens_took("m", 0.01)
    counters.ended("alice", "m", "failed", 2, 0)
    text = prometheus_text(counters)
    assert departures(text, metric_names.FAMILIES) == []
    assert "_created" not in text


def test_a_label_no_utf8_can_carry_does_not_break_the_text() -> None:
    # mapping.py refuses such a model name; were one counted, the text must still render.
    counters = Counters()
    counters.ended("x\ud800", "m\udfff", "completed", 1, 1)
    got = samples(counters)
    assert got[("tarn_openai_prompt_tokens_total", (("model", "m\\udfff"), ("user", "x\\ud800")))] == 1
