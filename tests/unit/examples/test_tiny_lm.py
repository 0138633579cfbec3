"""examples/llm_repository/tiny_lm without Triton: the network (deterministic, text from its
vocabulary, the prompt split the OpenAI front counts with) and the Python-backend model driven
through a stand-in of ``triton_python_backend_utils`` (one response per token, running counts,
cancellation between tokens, errors, concurrent requests, counters, the queue for generation
slots). The model under the real Triton, through the OpenAI front: docs/openai.md."""

from __future__ import annotations

import importlib.util
import itertools
import json
import sys
import threading
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from tarn.stdlib.openai.mapping import count_tokens

MODEL = Path(__file__).resolve().parents[3] / "examples" / "llm_repository" / "tiny_lm"
FINAL = 1


class Tensor:
    def __init__(self, name: str, array: np.ndarray) -> None:
        self.name, self.array = name, array

    def as_numpy(self) -> np.ndarray:
        return self.array


class InferenceResponse:
    def __init__(self, output_tensors: list[Tensor] | None = None, error: Any = None) -> None:
        self.outputs = {t.name: t.array for t in output_tensors or []}
        self.error = error


class TritonError:
    def __init__(self, message: str) -> None:
        self.message = message


class Metric:
    def __init__(self, labels: dict[str, str]) -> None:
        self.labels, self.value = labels, 0.0

    def increment(self, value: float) -> None:
        self.value += value

    def set(self, value: float) -> None:
        self.value = value


class MetricFamily:
    COUNTER, GAUGE = "counter", "gauge"

    def __init__(self, name: str, description: str, kind: str) -> None:
        self.name = name

    def Metric(self, labels: dict[str, str]) -> Metric:  # the Python backend's name
        return Metric(labels)


class Logger:
    lines: ClassVar[list[str]] = []

    @classmethod
    def log_info(cls, line: str) -> None:
        cls.lines.append(line)

    log_error = log_info


class Sender:
    def __init__(self) -> None:
        self.responses: list[InferenceResponse] = []
        self.sent_at: list[float] = []  # monotonic, one per response
        self.final = threading.Event()
        self.final_at = 0.0

    def send(self, response: InferenceResponse | None = None, flags: int = 0) -> None:
        if response is not None:
            self.responses.append(response)
            self.sent_at.append(time.monotonic())
        if flags == FINAL:
            self.final_at = time.monotonic()
            self.final.set()


class Request:
    def __init__(self, inputs: dict[str, np.ndarray], parameters: dict[str, Any] | None = None) -> None:
        self.inputs = {name: Tensor(name, value) for name, value in inputs.items()}
        self._parameters = json.dumps(parameters or {})
        self.sender = Sender()
        self.cancelled = threading.Event()

    def get_response_sender(self) -> Sender:
        return self.sender

    def parameters(self) -> str:
        return self._parameters

    def is_cancelled(self) -> bool:
        return self.cancelled.is_set()

    # what the model read back
    def texts(self) -> list[str]:
        return [r.outputs["text_output"][0].decode() for r in self.sender.responses if r.error is None]

    def counts(self, name: str) -> list[int]:
        return [int(r.outputs[name][0]) for r in self.sender.responses if r.error is None]

    def errors(self) -> list[str]:
        return [r.error.message for r in self.sender.responses if r.error is not None]


def backend_utils() -> types.ModuleType:
    module = types.ModuleType("triton_python_backend_utils")
    for name, value in {
        "Tensor": Tensor,
        "InferenceResponse": InferenceResponse,
        "TritonError": TritonError,
        "MetricFamily": MetricFamily,
        "Logger": Logger,
        "TRITONSERVER_RESPONSE_COMPLETE_FINAL": FINAL,
        "get_input_tensor_by_name": lambda request, name: request.inputs.get(name),
    }.items():
        setattr(module, name, value)
    return module


@pytest.fixture(scope="module")
def tiny_lm() -> Iterator[types.ModuleType]:
    saved = sys.modules.get("triton_python_backend_utils")
    sys.modules["triton_python_backend_utils"] = backend_utils()
    try:
        spec = importlib.util.spec_from_file_location("tiny_lm_model", MODEL / "1" / "model.py")
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        if saved is None:
            sys.modules.pop("triton_python_backend_utils", None)
        else:
            sys.modules["triton_python_backend_utils"] = saved


def loaded(tiny_lm: types.ModuleType, **own: str) -> Any:
    parameters = {"default_max_tokens": "6", "token_delay_s": "0", **own}
    config = {"parameters": {key: {"string_value": value} for key, value in parameters.items()}}
    instance = tiny_lm.TritonPythonModel()
    instance.initialize({"model_config": json.dumps(config), "model_name": "tiny_lm", "model_version": "1"})
    return instance


@pytest.fixture
def model(tiny_lm: types.ModuleType) -> Iterator[Any]:
    instance = loaded(tiny_lm)
    yield instance
    instance.finalize()


@pytest.fixture
def one_slot(tiny_lm: types.ModuleType) -> Iterator[Any]:
    instance = loaded(tiny_lm, max_concurrent_generations="1")
    yield instance
    instance.finalize()


def prompt(text: str, max_tokens: int | None = None, **parameters: Any) -> Request:
    inputs = {"text_input": np.array([text.encode()], dtype=np.object_)}
    if max_tokens is not None:
        inputs["max_tokens"] = np.array([max_tokens], dtype=np.int32)
    return Request(inputs, parameters)


def served(model: Any, *requests: Request) -> list[Request]:
    model.execute(list(requests))
    for request in requests:
        assert request.sender.final.wait(10), "no final flag"
    return list(requests)


# ---- the network
def test_the_same_prompt_and_seed_make_the_same_text(tiny_lm: types.ModuleType) -> None:
    def text(prompt: str, seed: int | None, temperature: float = 0.8, count: int = 30) -> list[str]:
        tokens = tiny_lm.TinyLM().generate(prompt, temperature, seed)
        return [next(tokens) for _step in range(count)]

    assert text("The old river", None) == text("The old river", None)
    assert text("The old river", 1) == text("The old river", 1)
    assert text("The old river", 1) != text("The old river", 2)
    assert text("The old river", None) != text("A new river", None)
    assert text("x", 1, temperature=0) == text("x", 2, temperature=0)  # greedy: the seed plays no part


def test_tokens_are_words_of_its_vocabulary(tiny_lm: types.ModuleType) -> None:
    lm = tiny_lm.TinyLM()
    tokens = lm.generate("Tell me a story", 0.8, 5)
    words = [next(tokens) for _step in range(200)]
    assert {word.strip() for word in words} <= set(lm.words)
    assert all(word.startswith(" ") or word in (".", ",", ";") for word in words)
    assert len(set(words)) > 20  # it does not loop on a few words


@pytest.mark.parametrize(
    "text", ["", "Hello", "Hello, world!", "user: Hi\nassistant:", "  don't  ", "tabs\tand\nlines", "é à 3.5"]
)
def test_it_splits_a_prompt_as_the_front_counts_it(tiny_lm: types.ModuleType, text: str) -> None:
    assert len(tiny_lm.tokenize(text)) == count_tokens(text)


# ---- the Python-backend model
def test_one_response_per_token_with_running_counts(model: Any) -> None:
    (request,) = served(model, prompt("The old river", 5))
    assert len(request.texts()) == 5
    assert request.counts("completion_tokens") == [1, 2, 3, 4, 5]
    assert request.counts("prompt_tokens") == [3] * 5
    assert model.tokens.value == 5
    assert model.outcomes["completed"].value == 1
    assert model.active.value == 0


def test_the_model_default_of_max_tokens(model: Any) -> None:
    (request,) = served(model, prompt("x"))
    assert len(request.texts()) == 6


def test_the_same_request_makes_the_same_text(model: Any) -> None:
    first, second = served(model, prompt("The old river", 8, seed=3), prompt("The old river", 8, seed=3))
    assert first.texts() == second.texts()


def test_a_cancelled_request_stops_between_tokens(model: Any) -> None:
    request = prompt("a long story", 100000, token_delay_s=0.05)
    model.execute([request])
    while len(request.sender.responses) < 3:
        time.sleep(0.01)
    request.cancelled.set()
    cancelled_at = time.monotonic()
    assert request.sender.final.wait(5)
    assert time.monotonic() - cancelled_at < 0.5
    assert 3 <= len(request.texts()) <= 5
    assert model.outcomes["cancelled"].value == 1
    assert model.tokens.value == len(request.texts())
    assert any("cancelled after" in line for line in Logger.lines)


def test_the_first_token_comes_after_the_silence_asked_for(model: Any) -> None:
    began = time.monotonic()
    (request,) = served(model, prompt("think first", 3, first_token_delay_s=0.3))
    assert request.sender.sent_at[0] - began >= 0.3
    assert len(request.texts()) == 3
    assert model.outcomes["completed"].value == 1


def test_a_request_cancelled_in_its_silence_generates_nothing(model: Any) -> None:
    request = prompt("think long", 5, first_token_delay_s=60)
    model.execute([request])
    time.sleep(0.1)
    request.cancelled.set()
    cancelled_at = time.monotonic()
    assert request.sender.final.wait(5)
    assert time.monotonic() - cancelled_at < 0.5
    assert request.texts() == []
    assert (model.outcomes["cancelled"].value, model.tokens.value) == (1, 0)
    assert any("cancelled after 0 tokens" in line for line in Logger.lines)


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (Request({}), "tiny_lm: text_input is required"),
        (prompt("x", 0), "tiny_lm: max_tokens must be from 1 to 100000"),
        (prompt("x", 3, temperature=5), "tiny_lm: parameter temperature must be a number from 0 to 2"),
        (
            prompt("x", 3, token_delay_s="slow"),  # noqa: S106 - a delay, not a secret
            "tiny_lm: parameter token_delay_s must be a number from 0 to 10",
        ),
        (
            prompt("x", 3, first_token_delay_s=901),
            "tiny_lm: parameter first_token_delay_s must be a number from 0 to 900",
        ),
        (prompt("x", 3, seed="7"), "tiny_lm: parameter seed must be an integer"),
    ],
)
def test_bad_requests_end_with_an_error(model: Any, request_: Request, message: str) -> None:
    (request,) = served(model, request_)
    assert request.errors() == [message]
    assert request.texts() == []
    assert model.outcomes["failed"].value == 1


def test_concurrent_requests_each_get_their_own_stream(model: Any) -> None:
    requests = [prompt(f"prompt number {n}", 10 + n, token_delay_s=0.01) for n in range(10)]
    served(model, *requests)
    assert [len(r.texts()) for r in requests] == [10 + n for n in range(10)]
    assert model.tokens.value == sum(10 + n for n in range(10))
    assert model.outcomes["completed"].value == 10


def test_no_limit_by_default_nothing_waits(model: Any) -> None:
    requests = [prompt(f"prompt number {n}", 30, token_delay_s=0.01) for n in range(4)]
    served(model, *requests)
    # all four were generating at once: each began before any ended
    assert max(r.sender.sent_at[0] for r in requests) < min(r.sender.final_at for r in requests)
    assert model.queued.value == 0


# ---- max_concurrent_generations: the queue for generation slots
def until(check: Any, timeout: float = 5) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "not in time"
        time.sleep(0.005)


def test_with_one_slot_the_second_stream_begins_after_the_first_ends(one_slot: Any) -> None:
    first, second = prompt("the first", 20, token_delay_s=0.01), prompt("the second", 5)
    one_slot.execute([first])
    until(lambda: len(first.sender.responses) > 0)
    one_slot.execute([second])
    until(lambda: one_slot.queued.value == 1)
    assert one_slot.active.value == 1
    assert first.sender.final.wait(5)
    assert second.sender.final.wait(5)
    assert second.sender.sent_at[0] >= first.sender.final_at
    assert len(first.texts()) == 20
    assert len(second.texts()) == 5
    assert one_slot.outcomes["completed"].value == 2
    assert (one_slot.queued.value, one_slot.active.value) == (0, 0)


def test_waiting_requests_start_in_arrival_order(one_slot: Any) -> None:
    holder = prompt("holds the slot", 100000, token_delay_s=0.01)
    one_slot.execute([holder])
    until(lambda: len(holder.sender.responses) > 0)
    requests = [prompt(f"request {n}", 4, token_delay_s=0.01) for n in range(5)]
    for number, request in enumerate(requests):
        one_slot.execute([request])
        until(lambda n=number: one_slot.queued.value == n + 1)
    holder.cancelled.set()
    for request in requests:
        assert request.sender.final.wait(5)
    for earlier, later in itertools.pairwise([holder, *requests]):
        assert later.sender.sent_at[0] >= earlier.sender.final_at


def test_a_request_cancelled_while_it_waits_never_generates(one_slot: Any) -> None:
    running, waiting, after = (prompt(f"r{n}", 100000, token_delay_s=0.01) for n in range(3))
    one_slot.execute([running])
    until(lambda: len(running.sender.responses) > 0)
    one_slot.execute([waiting])
    until(lambda: one_slot.queued.value == 1)
    one_slot.execute([after])
    until(lambda: one_slot.queued.value == 2)
    waiting.cancelled.set()
    cancelled_at = time.monotonic()
    assert waiting.sender.final.wait(5)
    assert time.monotonic() - cancelled_at < 0.5
    assert waiting.sender.responses == []
    assert one_slot.outcomes["cancelled"].value == 1
    assert one_slot.queued.value == 1
    assert any("cancelled after 0 tokens, waiting for a slot" in line for line in Logger.lines)
    running.cancelled.set()  # its slot goes to the next in line
    until(lambda: len(after.sender.responses) > 0)
    assert one_slot.queued.value == 0
    after.cancelled.set()
    assert after.sender.final.wait(5)
    assert one_slot.outcomes["cancelled"].value == 3
    assert one_slot.tokens.value == len(running.texts()) + len(after.texts())


def test_never_more_generating_than_the_slots(tiny_lm: types.ModuleType) -> None:
    two = loaded(tiny_lm, max_concurrent_generations="2")
    try:
        requests = [prompt(f"prompt number {n}", 5 + n, token_delay_s=0.01) for n in range(8)]
        served(two, *requests)
    finally:
        two.finalize()
    assert [len(r.texts()) for r in requests] == [5 + n for n in range(8)]
    spans = [(r.sender.sent_at[0], r.sender.final_at) for r in requests]
    assert max(sum(1 for b, e in spans if b <= at < e) for at, unused in spans) == 2
    assert two.outcomes["completed"].value == 8
    assert (two.queued.value, two.active.value) == (0, 0)


def test_a_bad_slot_count_fails_the_load(tiny_lm: types.ModuleType) -> None:
    with pytest.raises(ValueError, match="max_concurrent_generations must be 0"):
        loaded(tiny_lm, max_concurrent_generations="-1")
