"""The OpenAI API on Triton's generate extension, as pure functions (no I/O, no clock).

* A request body in, a :class:`Generation` out (or an :class:`OpenAIError` naming the field);
  :func:`triton_request` makes the body of ``POST /v2/models/<m>/generate_stream``.
* Each server-sent event of Triton's stream in, an :class:`Event` out (:func:`parse_event`);
  :class:`Tally` counts the tokens, :class:`StopScanner` applies the ``stop`` sequences.
* The answers in OpenAI's shapes: stream chunks (``chat.completion.chunk``, ``text_completion``),
  whole responses with ``usage``, the model list, errors.

Token counting (docs/openai.md): the counts a model reports in its events win (``prompt_tokens``,
``completion_tokens``: the running total of its stream); a model that reports none is counted one
completion token per event that carries text, and its prompt by :func:`count_tokens`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Kind = Literal["chat", "completion"]
Scalar = str | int | float | bool

CHAT_ROLES = ("system", "developer", "user", "assistant", "tool")
MAX_STOP = 4
# A stop sequence's length: the StopScanner compares the end of the text held back with each
# sequence's beginnings, quadratic in its length (200,000 characters took 1.1 s per piece streamed,
# stalling every stream of the front: issue 48, row 9). Real stop sequences are a few tokens.
MAX_STOP_CHARS = 256
# Triton reserves these request parameters (its parameters extension): a client may not set them.
RESERVED_PARAMETERS = frozenset(
    {"sequence_id", "sequence_start", "sequence_end", "priority", "timeout", "headers"}
)
COMPLETION_DEFAULT_MAX_TOKENS = 16  # OpenAI's default for /v1/completions
# The split tiny_lm tokenizes with (examples/llm_repository/tiny_lm): runs of word characters,
# and each other non-space character alone.
TOKEN = re.compile(r"\w+|[^\w\s]")
DONE = b"data: [DONE]\n\n"


class OpenAIError(Exception):
    """An answer in OpenAI's error shape, with its HTTP status."""

    def __init__(
        self,
        status: int,
        message: str,
        kind: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.param = param
        self.code = code
        self.headers = dict(headers or {})  # sent with the answer (Retry-After)

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}


MODEL_NAME_MAX = 255  # a model is a directory of the repository: a file name's limit


def invalid(param: str, problem: str) -> OpenAIError:
    return OpenAIError(400, f"{param}: {problem}", param=param)


# The error codes of the 4xx answers to requests that could not be read (OpenAI's error.code).
UNREADABLE_CODES = {408: "request_timeout", 413: "request_too_large", 431: "request_header_too_large"}


def unreadable(status: int, why: str) -> OpenAIError:
    """The answer to a request that could not be read (tarn.stdlib.http1's ClientError)."""
    return OpenAIError(status, f"Bad HTTP request: {why}", code=UNREADABLE_CODES.get(status))


def model_not_found(model: str) -> OpenAIError:
    return OpenAIError(404, f"The model `{model}` does not exist", param="model", code="model_not_found")


@dataclass(frozen=True)
class Generation:
    """One OpenAI request, validated: what to ask Triton and how to answer."""

    kind: Kind
    model: str
    prompt: str  # the text_input Triton gets (a chat's messages rendered by render_chat)
    stream: bool = False
    include_usage: bool = False
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    sampling: Mapping[str, int | float] = field(default_factory=dict)  # temperature, top_p, seed
    parameters: Mapping[str, Scalar] = field(default_factory=dict)  # TARN's extension, passed on


# ---- requests
def _present(body: Mapping[str, Any], name: str) -> Any:
    """A field's value; None when absent or null (OpenAI's clients send null for 'not given')."""
    return body.get(name)


def _boolean(body: Mapping[str, Any], name: str, default: bool = False) -> bool:
    value = _present(body, name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise invalid(name, "must be true or false")
    return value


def _integer(body: Mapping[str, Any], name: str, low: int, high: int | None = None) -> int | None:
    value = _present(body, name)
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < low
        or (high is not None and value > high)
    ):
        bounds = f"from {low} to {high}" if high is not None else f"at least {low}"
        raise invalid(name, f"must be an integer {bounds}")
    return value


def _number(body: Mapping[str, Any], name: str, low: float, high: float) -> float | None:
    value = _present(body, name)
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not low <= value <= high
    ):
        raise invalid(name, f"must be a number from {low:g} to {high:g}")
    return value


def _stop(body: Mapping[str, Any]) -> tuple[str, ...]:
    value = _present(body, "stop")
    if value is None:
        return ()
    stops = [value] if isinstance(value, str) else value
    if (
        not isinstance(stops, list)
        or not 0 < len(stops) <= MAX_STOP
        or not all(isinstance(s, str) and 0 < len(s) <= MAX_STOP_CHARS for s in stops)
    ):
        raise invalid(
            "stop",
            f"must be a string of 1 to {MAX_STOP_CHARS} characters or a list of 1 to {MAX_STOP} of them",
        )
    return tuple(stops)


def _parameters(body: Mapping[str, Any]) -> dict[str, Scalar]:
    value = _present(body, "parameters")
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise invalid("parameters", "must be an object of Triton request parameters")
    for name, item in value.items():
        where = f"parameters.{name}"
        if name in RESERVED_PARAMETERS or name.startswith("triton_"):
            raise invalid(where, "is reserved by Triton")
        if not isinstance(item, str | int | float | bool) or (
            isinstance(item, float) and not math.isfinite(item)
        ):
            raise invalid(where, "must be a string, a number or a boolean")
    return dict(value)


def _common(body: Any, kind: Kind, prompt: str) -> Generation:
    """The fields chat and completions share (body is known to be an object with a model)."""
    stream = _boolean(body, "stream")
    options = _present(body, "stream_options")
    include_usage = False
    if options is not None:
        if not stream:
            raise invalid("stream_options", "is only allowed when stream is true")
        if not isinstance(options, dict):
            raise invalid("stream_options", "must be an object")
        include_usage = _boolean(options, "include_usage")
    n = _integer(body, "n", 1)
    if n not in (None, 1):
        raise invalid("n", "only 1 choice per request is served")
    max_tokens = _integer(body, "max_tokens", 1)
    if kind == "chat":
        newer = _integer(body, "max_completion_tokens", 1)
        max_tokens = newer if newer is not None else max_tokens
    elif max_tokens is None:
        max_tokens = COMPLETION_DEFAULT_MAX_TOKENS
    sampling: dict[str, int | float] = {}
    for name, value in (
        ("temperature", _number(body, "temperature", 0.0, 2.0)),
        ("top_p", _number(body, "top_p", 0.0, 1.0)),
        ("seed", _integer(body, "seed", -(2**63), 2**63 - 1)),
    ):
        if value is not None:
            sampling[name] = value
    return Generation(
        kind=kind,
        model=body["model"],
        prompt=prompt,
        stream=stream,
        include_usage=include_usage,
        max_tokens=max_tokens,
        stop=_stop(body),
        sampling=sampling,
        parameters=_parameters(body),
    )


def _object_with_model(body: Any) -> Mapping[str, Any]:
    if not isinstance(body, dict):
        raise OpenAIError(400, "The request body must be a JSON object")
    model = _present(body, "model")
    if not isinstance(model, str) or not model:
        raise invalid("model", "a model name is required")
    # A name ends up in metric labels and log lines: no control characters (a forged log line), no
    # unpaired surrogate (JSON's "\ud800", which no UTF-8 output can carry: it broke /metrics for
    # good), and no longer than a model directory's name can be (issue 48).
    if len(model) > MODEL_NAME_MAX or not model.isprintable():
        raise invalid("model", f"must be a model's name: at most {MODEL_NAME_MAX} printable characters")
    return body


def _content(value: Any, where: str) -> str:
    """A message's content: a string, or a list of text parts joined."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = []
        for index, part in enumerate(value):
            if (
                not isinstance(part, dict)
                or part.get("type") != "text"
                or not isinstance(part.get("text"), str)
            ):
                raise invalid(f"{where}[{index}]", "only text parts are served")
            texts.append(part["text"])
        return "".join(texts)
    raise invalid(where, "must be a string or a list of text parts")


def chat_generation(body: Any) -> Generation:
    """A /v1/chat/completions body, validated."""
    body = _object_with_model(body)
    messages = _present(body, "messages")
    if not isinstance(messages, list) or not messages:
        raise invalid("messages", "a non-empty list of messages is required")
    turns = []
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            raise invalid(where, "must be an object with a role and a content")
        role = message.get("role")
        if role not in CHAT_ROLES:
            raise invalid(f"{where}.role", f"must be one of {', '.join(CHAT_ROLES)}")
        if message.get("content") is None and role != "assistant":
            raise invalid(f"{where}.content", "is required")
        turns.append((role, _content(message.get("content"), f"{where}.content")))
    return _common(body, "chat", render_chat(turns))


def completion_generation(body: Any) -> Generation:
    """A /v1/completions body, validated."""
    body = _object_with_model(body)
    prompt = _present(body, "prompt")
    if isinstance(prompt, list) and len(prompt) == 1:
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise invalid("prompt", "must be a string (one prompt per request; token arrays are not served)")
    if _boolean(body, "echo"):
        raise invalid("echo", "is not served")
    best_of = _integer(body, "best_of", 1)
    if best_of not in (None, 1):
        raise invalid("best_of", "only 1 is served")
    return _common(body, "completion", prompt)


def render_chat(turns: Sequence[tuple[str, str]]) -> str:
    """The text_input of a chat: one ``role: content`` line per message, then ``assistant:``.
    A model with a chat template of its own applies it to this text or takes it as it is."""
    return "".join(f"{role}: {content}\n" for role, content in turns) + "assistant:"


def triton_request(generation: Generation) -> dict[str, Any]:
    """The body of Triton's generate_stream. Fields the model declares as inputs become tensors,
    the others request parameters (Triton's rule): ``text_input``, ``max_tokens``,
    ``temperature``, ``top_p``, ``seed`` and ``stream`` are the names Triton's LLM backends
    (TensorRT-LLM, the Python backend examples) read; the vLLM backend reads its own
    ``sampling_parameters`` and ``exclude_input_in_output``."""
    request: dict[str, Any] = {"text_input": generation.prompt, "stream": True}
    if generation.max_tokens is not None:
        request["max_tokens"] = generation.max_tokens
    request.update(generation.sampling)
    vllm = dict(generation.sampling)
    if generation.max_tokens is not None:
        vllm["max_tokens"] = generation.max_tokens
    request["sampling_parameters"] = json.dumps(vllm, sort_keys=True)
    request["exclude_input_in_output"] = True
    if generation.parameters:
        request["parameters"] = dict(generation.parameters)
    return request


# ---- Triton's events
def count_tokens(text: str) -> int:
    return len(TOKEN.findall(text))


@dataclass(frozen=True)
class Event:
    """One event of Triton's generate_stream: the text it adds, the counts the model reported."""

    text: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: str | None = None


def _count(value: Any) -> int | None:
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def parse_event(data: str) -> Event:
    """The ``data:`` of one event. A malformed event is an error event: the stream cannot be trusted."""
    try:
        payload = json.loads(data)
    except ValueError:
        return Event(error=f"Triton sent an event that is not JSON: {data[:200]!r}")
    if not isinstance(payload, dict):
        return Event(error=f"Triton sent an event that is not a JSON object: {data[:200]!r}")
    if payload.get("error") is not None:
        return Event(error=str(payload["error"]))
    text = payload.get("text_output", "")
    if isinstance(text, list):
        text = "".join(str(piece) for piece in text)
    return Event(
        text=str(text),
        prompt_tokens=_count(payload.get("prompt_tokens")),
        completion_tokens=_count(payload.get("completion_tokens")),
    )


def error_message(body: bytes) -> str:
    """The message of Triton's error answer: a JSON ``{"error": …}``, or the same as an event."""
    text = body.decode("utf-8", errors="replace").strip()
    if text.startswith("data:"):
        text = text.split("\n", 1)[0][len("data:") :].strip()
    try:
        payload = json.loads(text)
    except ValueError:
        return text[:500] or "no message"
    if isinstance(payload, dict) and payload.get("error") is not None:
        return str(payload["error"])
    return text[:500]


def triton_error(status: int, body: bytes, model: str) -> OpenAIError:
    """Triton's answer other than 200 to a generate_stream, as the OpenAI client's answer."""
    message = error_message(body)
    if status == 404:
        return model_not_found(model)
    if status == 400:
        return OpenAIError(400, message, code="triton_rejected")
    if status in (429, 503):
        return OpenAIError(status, f"Triton is busy: {message}", kind="server_error", code="triton_busy")
    return OpenAIError(502, f"Triton answered {status}: {message}", kind="server_error", code="triton_failed")


@dataclass
class Tally:
    """The tokens of one generation, by the rule in the module's docstring."""

    prompt: str
    reported_prompt: int | None = None
    reported_completion: int | None = None
    events: int = 0  # events that carried text

    def add(self, event: Event) -> None:
        if event.prompt_tokens is not None:
            self.reported_prompt = event.prompt_tokens
        if event.completion_tokens is not None:
            self.reported_completion = event.completion_tokens
        if event.text:
            self.events += 1

    @property
    def prompt_tokens(self) -> int:
        return self.reported_prompt if self.reported_prompt is not None else count_tokens(self.prompt)

    @property
    def completion_tokens(self) -> int:
        return self.reported_completion if self.reported_completion is not None else self.events

    def usage(self) -> dict[str, int]:
        prompt, completion = self.prompt_tokens, self.completion_tokens
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


class StopScanner:
    """Applies ``stop`` to the streamed text: passes on what cannot begin a stop sequence, holds
    back the tail that might, and ends the text before the first stop sequence found."""

    def __init__(self, stops: Sequence[str]) -> None:
        self.stops = tuple(stops)
        self.held = ""
        self.stopped = False

    def feed(self, text: str) -> str:
        """The text that may be sent now. After a stop sequence, always ''."""
        if self.stopped or not self.stops:
            return "" if self.stopped else text
        pending = self.held + text
        found = [index for index in (pending.find(stop) for stop in self.stops) if index >= 0]
        if found:
            self.stopped, self.held = True, ""
            return pending[: min(found)]
        keep = max((_overlap(pending, stop) for stop in self.stops), default=0)
        self.held = pending[len(pending) - keep :] if keep else ""
        return pending[: len(pending) - keep]

    def flush(self) -> str:
        """At the end of the stream: what was held back (it began no stop sequence after all)."""
        held, self.held = self.held, ""
        return "" if self.stopped else held


def _overlap(text: str, stop: str) -> int:
    """The length of the longest end of ``text`` that is a beginning of ``stop``."""
    for size in range(min(len(text), len(stop) - 1), 0, -1):
        if stop.startswith(text[-size:]):
            return size
    return 0


def finish_reason(generation: Generation, completion_tokens: int, stopped: bool) -> str:
    if not stopped and generation.max_tokens is not None and completion_tokens >= generation.max_tokens:
        return "length"
    return "stop"


# ---- answers
@dataclass(frozen=True)
class Identity:
    """What every chunk of one answer repeats: its id and its creation time (Unix seconds)."""

    id: str
    created: int


def id_prefix(kind: Kind) -> str:
    return "chatcmpl-" if kind == "chat" else "cmpl-"


def stream_chunk(
    generation: Generation,
    identity: Identity,
    text: str | None = None,
    role: bool = False,
    finish: str | None = None,
) -> dict[str, Any]:
    """One chunk of a streamed answer: the role (chat's first), a piece of text, or the finish."""
    choice: dict[str, Any]
    if generation.kind == "chat":
        delta: dict[str, Any] = {}
        if role:
            delta = {"role": "assistant", "content": ""}
        elif text is not None:
            delta = {"content": text}
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        kind = "chat.completion.chunk"
    else:
        choice = {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish}
        kind = "text_completion"
    chunk = {"id": identity.id, "object": kind, "created": identity.created, "model": generation.model}
    chunk["choices"] = [choice]
    if generation.include_usage:
        chunk["usage"] = None
    return chunk


def usage_chunk(generation: Generation, identity: Identity, usage: Mapping[str, int]) -> dict[str, Any]:
    """The last chunk with ``stream_options.include_usage``: no choices, the usage."""
    kind = "chat.completion.chunk" if generation.kind == "chat" else "text_completion"
    return {
        "id": identity.id,
        "object": kind,
        "created": identity.created,
        "model": generation.model,
        "choices": [],
        "usage": dict(usage),
    }


def whole_response(
    generation: Generation, identity: Identity, text: str, finish: str, usage: Mapping[str, int]
) -> dict[str, Any]:
    """The answer to a request without ``stream``."""
    if generation.kind == "chat":
        message = {"role": "assistant", "content": text, "refusal": None}
        choice: dict[str, Any] = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
        kind = "chat.completion"
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
        kind = "text_completion"
    return {
        "id": identity.id,
        "object": kind,
        "created": identity.created,
        "model": generation.model,
        "choices": [choice],
        "usage": dict(usage),
    }


def sse(payload: Mapping[str, Any]) -> bytes:
    """One server-sent event carrying ``payload`` as JSON."""
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


def model_entry(name: str, created: int) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": created, "owned_by": "tarn"}


def model_list(names: Sequence[str], created: int) -> dict[str, Any]:
    return {"object": "list", "data": [model_entry(name, created) for name in sorted(set(names))]}


def generates_text(metadata: Any) -> bool:
    """Whether Triton's model metadata shows a model /v1 can serve: it takes ``text_input``."""
    inputs = metadata.get("inputs") if isinstance(metadata, dict) else None
    return isinstance(inputs, list) and any(
        isinstance(i, dict) and i.get("name") == "text_input" for i in inputs
    )
