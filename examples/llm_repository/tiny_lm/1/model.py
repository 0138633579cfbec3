"""tiny_lm: a small recurrent language model that generates text token by token on the CPU.

The weights are drawn from a fixed seed when the model loads (numpy only), so every instance on
every node writes the same text for the same prompt and seed. It is not trained: a soft grammar
over word classes (determiner, adjective, noun, verb, preposition, punctuation) shapes the output
into sentence-like text, and a recurrent state carried from the prompt makes each token depend on
everything before it.

Decoupled: each request runs in a thread of its own and gets one response per token
(``text_output``, with ``prompt_tokens`` and the running ``completion_tokens``), then the final
flag. Between tokens it asks ``request.is_cancelled()``: when the client of Triton's
``generate_stream`` goes away, the generation stops at once. Its counters are Triton metrics
(``tiny_lm_tokens_total``, ``tiny_lm_requests_total{outcome}``, ``tiny_lm_streams_active``,
``tiny_lm_requests_waiting`` on Triton's metrics port), and each cancelled request is logged, so a
test can see when it stopped.

Model parameter ``max_concurrent_generations`` (default "0": no limit): at most that many requests
generate at once, as an LLM server's batch slots (vLLM's max_num_seqs); the others wait for a slot
in arrival order, and the wait is part of their time to first token. A request cancelled while it
waits leaves the queue without generating.

Request parameters (any not given take the model's): ``temperature`` (0 to 2, 0 = greedy),
``seed`` (an integer; default: from the prompt), ``token_delay_s`` (0 to 10 s after each token),
``first_token_delay_s`` (0 to 900 s of silence before the first token, as a long prompt's prefill or
a reasoning model's thinking: what an entry's idle timeouts must let through).
"""

from __future__ import annotations

import json
import re
import threading
import time
import zlib
from collections import deque
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np
import triton_python_backend_utils as pb_utils

SEED = 20260135
HIDDEN = 48
EMBEDDING = 32
DEFAULT_TEMPERATURE = 0.8
CANCEL_POLL_S = 0.05  # the longest a cancelled request sleeps on before it notices


class Pacing(NamedTuple):
    """A request's pauses: before its first token, and after each token."""

    first_token_s: float
    between_tokens_s: float


# The split TARN's OpenAI front counts prompt tokens with when a model reports none (docs/openai.md):
# runs of word characters, and each other non-space character alone.
TOKEN = re.compile(r"\w+|[^\w\s]")


def _words(text: str) -> list[str]:
    return text.split()


WORD_CLASSES: dict[str, list[str]] = {
    "det": _words("the a one this that every some no each our"),
    "adj": _words(
        "quiet small bright old green cold warm slow quick tall dark gentle hidden distant silver"
        " wooden empty patient busy clever heavy narrow open golden"
    ),
    "noun": _words(
        "river stone hill cluster node model token garden bridge lamp window forest engine queue"
        " server harbor letter road cloud tower field market signal story machine village path door"
        " mountain question answer stream"
    ),
    "verb": _words(
        "finds carries holds follows watches builds sends keeps opens reaches crosses answers serves"
        " guards remembers counts lifts turns hears meets"
    ),
    "prep": _words("near under over beside behind across through beyond with"),
    "end": [".", ",", ";"],
}
# Which class may follow which: the soft grammar (a bonus to the logits, not a hard rule).
FOLLOWS: dict[str, tuple[str, ...]] = {
    "det": ("adj", "noun"),
    "adj": ("noun", "adj"),
    "noun": ("verb", "prep", "end"),
    "verb": ("det", "prep"),
    "prep": ("det",),
    "end": ("det",),
}
GRAMMAR_BONUS = 4.0
REPEAT_PENALTY = 3.0


def tokenize(text: str) -> list[str]:
    return TOKEN.findall(text)


class TinyLM:
    """The network: an Elman recurrent layer over word embeddings, its output a distribution
    over the vocabulary. Pure numpy, no Triton: unit tests drive it directly."""

    def __init__(self, seed: int = SEED) -> None:
        self.words: list[str] = []
        self.classes: list[str] = []
        for name, words in WORD_CLASSES.items():
            self.words += words
            self.classes += [name] * len(words)
        self.index = {word: i for i, word in enumerate(self.words)}
        size = len(self.words)
        rng = np.random.default_rng(seed)
        self.embedding = rng.normal(0.0, 1.0, (size, EMBEDDING))
        self.w_in = rng.normal(0.0, 1.0 / np.sqrt(EMBEDDING), (EMBEDDING, HIDDEN))
        self.w_rec = rng.normal(0.0, 0.9 / np.sqrt(HIDDEN), (HIDDEN, HIDDEN))
        self.w_out = rng.normal(0.0, 2.0 / np.sqrt(HIDDEN), (HIDDEN, size))
        names = list(WORD_CLASSES)
        member = np.array([[c == name for name in names] for c in self.classes], dtype=np.float64)
        allowed = np.array([[nxt in FOLLOWS[prev] for nxt in names] for prev in names], dtype=np.float64)
        # grammar[i, j]: the bonus for word j after word i
        self.grammar = GRAMMAR_BONUS * (member @ allowed @ member.T) - GRAMMAR_BONUS / 2

    def token_id(self, word: str) -> int:
        """A prompt word's id: its own if it is in the vocabulary, else a stable hash of it."""
        lowered = word.lower()
        if lowered in self.index:
            return self.index[lowered]
        return zlib.crc32(lowered.encode("utf-8")) % len(self.words)

    def step(self, state: np.ndarray, token: int) -> np.ndarray:
        return np.tanh(self.embedding[token] @ self.w_in + state @ self.w_rec)

    def generate(self, prompt: str, temperature: float, seed: int | None) -> Iterator[str]:
        """The text of each next token, for as long as the caller reads."""
        state = np.zeros(HIDDEN)
        last = self.index["."]  # a prompt starts a sentence
        for word in tokenize(prompt):
            last = self.token_id(word)
            state = self.step(state, last)
        if seed is None:
            seed = zlib.crc32(prompt.encode("utf-8"))
        rng = np.random.default_rng(seed)
        while True:
            logits = state @ self.w_out + self.grammar[last]
            logits[last] -= REPEAT_PENALTY
            if temperature <= 0:
                chosen = int(np.argmax(logits))
            else:
                scaled = (logits - logits.max()) / temperature
                weights = np.exp(scaled)
                chosen = int(rng.choice(len(weights), p=weights / weights.sum()))
            word = self.words[chosen]
            yield word if self.classes[chosen] == "end" else " " + word
            last = chosen
            state = self.step(state, chosen)


def _number(parameters: dict[str, Any], name: str, default: float, low: float, high: float) -> float:
    value = parameters.get(name, default)
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            value = None
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise ValueError(f"tiny_lm: parameter {name} must be a number from {low:g} to {high:g}")
    return float(value)


class TritonPythonModel:
    """Triton's side: one thread per request, one response per token, counters as metrics."""

    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        own = {key: value["string_value"] for key, value in config.get("parameters", {}).items()}
        self.default_max_tokens = int(own.get("default_max_tokens", "16"))
        self.max_tokens_limit = int(own.get("max_tokens_limit", "100000"))
        self.token_delay_s = float(own.get("token_delay_s", "0"))
        self.max_generating = int(own.get("max_concurrent_generations", "0"))
        if self.max_generating < 0:
            raise ValueError("tiny_lm: max_concurrent_generations must be 0 (no limit) or more")
        self.lm = TinyLM()
        self.stopping = threading.Event()
        # Guards the threads' set, every metric update and log line: the Python backend's metrics are not
        # thread-safe (Triton 2.51 crashed with SIGSEGV under 20 streams updating them unlocked).
        self.lock = threading.Lock()
        self.threads: set[threading.Thread] = set()
        # The slots share the lock: the queue and its gauge change together.
        self.slots = threading.Condition(self.lock)
        self.generating = 0
        self.waiting: deque[threading.Thread] = deque()  # first in line first
        labels = {"model": args["model_name"], "version": args["model_version"]}
        # The families must outlive their metrics: Triton refuses a metric whose family is gone.
        self.families = {
            "tokens": pb_utils.MetricFamily(
                name="tiny_lm_tokens_total",
                description="Tokens tiny_lm generated and sent",
                kind=pb_utils.MetricFamily.COUNTER,
            ),
            "requests": pb_utils.MetricFamily(
                name="tiny_lm_requests_total",
                description="Requests tiny_lm ended, by outcome (completed, cancelled, failed)",
                kind=pb_utils.MetricFamily.COUNTER,
            ),
            "active": pb_utils.MetricFamily(
                name="tiny_lm_streams_active",
                description="Requests tiny_lm is generating for now",
                kind=pb_utils.MetricFamily.GAUGE,
            ),
            "waiting": pb_utils.MetricFamily(
                name="tiny_lm_requests_waiting",
                description="Requests waiting for a generation slot (max_concurrent_generations)",
                kind=pb_utils.MetricFamily.GAUGE,
            ),
        }
        self.tokens = self.families["tokens"].Metric(labels=labels)
        self.outcomes = {
            outcome: self.families["requests"].Metric(labels={**labels, "outcome": outcome})
            for outcome in ("completed", "cancelled", "failed")
        }
        self.active = self.families["active"].Metric(labels=labels)
        self.queued = self.families["waiting"].Metric(labels=labels)

    def execute(self, requests: list[Any]) -> None:
        for request in requests:
            thread = threading.Thread(target=self._serve, args=(request,), daemon=True)
            with self.lock:
                self.threads.add(thread)
                self._count()
            thread.start()

    def finalize(self) -> None:
        self.stopping.set()
        with self.lock:
            threads = list(self.threads)
        for thread in threads:
            thread.join(timeout=5)

    def _serve(self, request: Any) -> None:
        sender = request.get_response_sender()
        outcome = "failed"
        try:
            outcome = self._generate(request, sender)
        except Exception as exc:  # the request must end with an error, never hang
            with self.lock:
                pb_utils.Logger.log_error(f"tiny_lm: a request failed: {exc}")
            sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError(str(exc))))
        finally:
            with self.lock:
                self.outcomes[outcome].increment(1)
            try:
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            finally:
                with self.lock:
                    self.threads.discard(threading.current_thread())
                    self._count()

    def _count(self) -> None:
        """Set the gauges; the caller holds the lock. A waiting request is not active."""
        self.active.set(len(self.threads) - len(self.waiting))
        self.queued.set(len(self.waiting))

    def _generate(self, request: Any, sender: Any) -> str:
        prompt, max_tokens, temperature, seed, pacing = self._read(request)  # a bad request fails at once
        if not self._take_slot(request):
            with self.lock:
                pb_utils.Logger.log_info("tiny_lm: a request cancelled after 0 tokens, waiting for a slot")
            return "cancelled"
        try:
            return self._stream(request, sender, prompt, max_tokens, temperature, seed, pacing)
        finally:
            self._give_slot()

    def _take_slot(self, request: Any) -> bool:
        """Wait for a generation slot in arrival order; False if cancelled meanwhile."""
        if self.max_generating == 0:
            return True
        me = threading.current_thread()
        with self.slots:
            self.waiting.append(me)
            self._count()
        while True:
            with self.slots:
                if self.waiting[0] is me and self.generating < self.max_generating:
                    self.waiting.popleft()
                    self.generating += 1
                    self._count()
                    self.slots.notify_all()  # the next in line may find a free slot too
                    return True
                self.slots.wait(CANCEL_POLL_S)
            # asked outside the lock: is_cancelled() goes to Triton and must not hold up the others
            if self._cancelled(request):
                with self.slots:
                    self.waiting.remove(me)
                    self._count()
                    self.slots.notify_all()  # it may have been first in line
                return False

    def _give_slot(self) -> None:
        if self.max_generating == 0:
            return
        with self.slots:
            self.generating -= 1
            self.slots.notify_all()

    def _stream(
        self,
        request: Any,
        sender: Any,
        prompt: str,
        max_tokens: int,
        temperature: float,
        seed: int | None,
        pacing: Pacing,
    ) -> str:
        prompt_tokens = np.array([len(tokenize(prompt))], dtype=np.int32)
        sent = 0
        if self._pause(request, pacing.first_token_s):  # the silence before the first token
            return self._cancelled_after(sent)
        for text in self.lm.generate(prompt, temperature, seed):
            if sent == max_tokens:
                return "completed"
            if self._cancelled(request):
                break
            sent += 1
            outputs = [
                pb_utils.Tensor("text_output", np.array([text.encode("utf-8")], dtype=np.object_)),
                pb_utils.Tensor("prompt_tokens", prompt_tokens),
                pb_utils.Tensor("completion_tokens", np.array([sent], dtype=np.int32)),
            ]
            sender.send(pb_utils.InferenceResponse(output_tensors=outputs))
            with self.lock:
                self.tokens.increment(1)
            if sent < max_tokens and self._pause(request, pacing.between_tokens_s):
                break
        return self._cancelled_after(sent)

    def _cancelled_after(self, sent: int) -> str:
        with self.lock:
            pb_utils.Logger.log_info(f"tiny_lm: a request cancelled after {sent} tokens")
        return "cancelled"

    def _cancelled(self, request: Any) -> bool:
        return self.stopping.is_set() or request.is_cancelled()

    def _pause(self, request: Any, delay: float) -> bool:
        """Sleep ``delay`` seconds, looking for a cancellation meanwhile; True if cancelled."""
        deadline = time.monotonic() + delay
        while (left := deadline - time.monotonic()) > 0:
            if self._cancelled(request):
                return True
            time.sleep(min(left, CANCEL_POLL_S))
        return self._cancelled(request)

    def _read(self, request: Any) -> tuple[str, int, float, int | None, Pacing]:
        text_input = pb_utils.get_input_tensor_by_name(request, "text_input")
        if text_input is None:
            raise ValueError("tiny_lm: text_input is required")
        raw = text_input.as_numpy().reshape(-1)
        if raw.size != 1:
            raise ValueError("tiny_lm: text_input must hold one string")
        prompt = raw[0].decode("utf-8", errors="replace") if isinstance(raw[0], bytes) else str(raw[0])
        max_tokens = self.default_max_tokens
        given = pb_utils.get_input_tensor_by_name(request, "max_tokens")
        if given is not None:
            max_tokens = int(given.as_numpy().reshape(-1)[0])
        if not 1 <= max_tokens <= self.max_tokens_limit:
            raise ValueError(f"tiny_lm: max_tokens must be from 1 to {self.max_tokens_limit}")
        parameters = json.loads(request.parameters() or "{}")
        temperature = _number(parameters, "temperature", DEFAULT_TEMPERATURE, 0.0, 2.0)
        delay = _number(parameters, "token_delay_s", self.token_delay_s, 0.0, 10.0)
        first = _number(parameters, "first_token_delay_s", 0.0, 0.0, 900.0)
        seed = parameters.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError("tiny_lm: parameter seed must be an integer")
        return prompt, max_tokens, temperature, seed, Pacing(first, delay)
