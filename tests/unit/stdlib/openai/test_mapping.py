"""The OpenAI front's pure translation (tarn.stdlib.openai.mapping), as tables: requests validated
and mapped onto Triton's generate extension, Triton's events read and counted, stop sequences,
and the answers in OpenAI's shapes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tarn.stdlib.openai import mapping
from tarn.stdlib.openai.mapping import Event, Generation, Identity, OpenAIError, StopScanner, Tally

CHAT = {"model": "tiny_lm", "messages": [{"role": "user", "content": "Hello there"}]}
COMPLETION = {"model": "tiny_lm", "prompt": "Once upon"}


def rejected(parse: Any, body: Any) -> OpenAIError:
    with pytest.raises(OpenAIError) as caught:
        parse(body)
    return caught.value


# ---- requests
@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({}, {"prompt": "user: Hello there\nassistant:", "stream": False, "max_tokens": None}),
        ({"stream": True}, {"stream": True, "include_usage": False}),
        ({"stream": True, "stream_options": {"include_usage": True}}, {"include_usage": True}),
        ({"max_tokens": 7}, {"max_tokens": 7}),
        ({"max_tokens": 7, "max_completion_tokens": 9}, {"max_tokens": 9}),  # the newer name wins
        (
            {"temperature": 0, "top_p": 0.5, "seed": 3},
            {"sampling": {"temperature": 0, "top_p": 0.5, "seed": 3}},
        ),
        ({"temperature": None, "n": 1, "user": "x", "logit_bias": {}}, {"sampling": {}}),  # null, ignored
        ({"stop": "\n"}, {"stop": ("\n",)}),
        ({"stop": ["a", "b"]}, {"stop": ("a", "b")}),
        (
            {"parameters": {"token_delay_s": 0.1, "mode": "x"}},
            {"parameters": {"token_delay_s": 0.1, "mode": "x"}},
        ),
    ],
)
def test_chat_requests(extra: dict[str, Any], expected: dict[str, Any]) -> None:
    generation = mapping.chat_generation({**CHAT, **extra})
    assert generation.kind == "chat"
    assert generation.model == "tiny_lm"
    for name, value in expected.items():
        assert getattr(generation, name) == value, name


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ([], None),
        ({"messages": CHAT["messages"]}, "model"),
        ({**CHAT, "model": ""}, "model"),
        ({**CHAT, "model": "x\ud800"}, "model"),  # a lone surrogate broke /metrics (issue 48, row 1)
        ({**CHAT, "model": "tiny_lm\nforged log line"}, "model"),  # row 13
        ({**CHAT, "model": "m" * 256}, "model"),  # row 2's 10,000-character name
        ({**CHAT, "messages": []}, "messages"),
        ({**CHAT, "messages": "hi"}, "messages"),
        ({**CHAT, "messages": ["hi"]}, "messages[0]"),
        ({**CHAT, "messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
        ({**CHAT, "messages": [{"role": "user"}]}, "messages[0].content"),
        (
            {**CHAT, "messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
            "messages[0].content[0]",
        ),
        ({**CHAT, "messages": [{"role": "user", "content": 3}]}, "messages[0].content"),
        ({**CHAT, "stream": "yes"}, "stream"),
        ({**CHAT, "stream_options": {"include_usage": True}}, "stream_options"),
        ({**CHAT, "stream": True, "stream_options": []}, "stream_options"),
        ({**CHAT, "n": 2}, "n"),
        ({**CHAT, "max_tokens": 0}, "max_tokens"),
        ({**CHAT, "max_tokens": 1.5}, "max_tokens"),
        ({**CHAT, "max_tokens": True}, "max_tokens"),
        ({**CHAT, "max_completion_tokens": -1}, "max_completion_tokens"),
        ({**CHAT, "temperature": 3}, "temperature"),
        ({**CHAT, "temperature": "hot"}, "temperature"),
        ({**CHAT, "top_p": 1.5}, "top_p"),
        ({**CHAT, "seed": 1.5}, "seed"),
        ({**CHAT, "stop": ""}, "stop"),
        ({**CHAT, "stop": ["a", "b", "c", "d", "e"]}, "stop"),
        ({**CHAT, "stop": [1]}, "stop"),
        ({**CHAT, "stop": "x" * 200_000}, "stop"),  # issue 48, row 9: a quadratic scan per piece
        ({**CHAT, "stop": ["a", "y" * 257]}, "stop"),
        ({**CHAT, "parameters": [1]}, "parameters"),
        ({**CHAT, "parameters": {"priority": 1}}, "parameters.priority"),
        ({**CHAT, "parameters": {"triton_x": True}}, "parameters.triton_x"),
        ({**CHAT, "parameters": {"x": [1]}}, "parameters.x"),
        ({**CHAT, "parameters": {"x": None}}, "parameters.x"),
    ],
)
def test_chat_requests_refused_name_the_field(body: Any, param: str | None) -> None:
    error = rejected(mapping.chat_generation, body)
    assert error.status == 400
    assert error.kind == "invalid_request_error"
    if param is not None:
        assert error.param == param
        assert error.message.startswith(f"{param}: ")


def test_a_chat_renders_every_message_in_order() -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Hi, "}, {"type": "text", "text": "you"}]},
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "user", "content": "Again"},
    ]
    generation = mapping.chat_generation({"model": "m", "messages": messages})
    assert generation.prompt == "system: Be brief.\nuser: Hi, you\nassistant: \nuser: Again\nassistant:"


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({}, {"prompt": "Once upon", "max_tokens": 16, "stream": False}),  # OpenAI's default of 16
        ({"prompt": ["One prompt"]}, {"prompt": "One prompt"}),
        ({"max_tokens": 3, "stream": True}, {"max_tokens": 3, "stream": True}),
        ({"echo": False, "best_of": 1, "suffix": None}, {"prompt": "Once upon"}),
    ],
)
def test_completion_requests(extra: dict[str, Any], expected: dict[str, Any]) -> None:
    generation = mapping.completion_generation({**COMPLETION, **extra})
    assert generation.kind == "completion"
    for name, value in expected.items():
        assert getattr(generation, name) == value, name


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "m"}, "prompt"),
        ({**COMPLETION, "prompt": ["a", "b"]}, "prompt"),
        ({**COMPLETION, "prompt": [1, 2, 3]}, "prompt"),
        ({**COMPLETION, "echo": True}, "echo"),
        ({**COMPLETION, "best_of": 2}, "best_of"),
        ({**COMPLETION, "model": 3}, "model"),
    ],
)
def test_completion_requests_refused_name_the_field(body: Any, param: str) -> None:
    error = rejected(mapping.completion_generation, body)
    assert (error.status, error.param) == (400, param)


@pytest.mark.parametrize(
    ("generation", "expected"),
    [
        (
            Generation("completion", "m", "Hi"),
            {
                "text_input": "Hi",
                "stream": True,
                "sampling_parameters": "{}",
                "exclude_input_in_output": True,
            },
        ),
        (
            Generation(
                "chat",
                "m",
                "user: Hi\nassistant:",
                max_tokens=5,
                sampling={"temperature": 0.5, "seed": 7},
                parameters={"token_delay_s": 0.1},
            ),
            {
                "text_input": "user: Hi\nassistant:",
                "stream": True,
                "max_tokens": 5,
                "temperature": 0.5,
                "seed": 7,
                "sampling_parameters": '{"max_tokens": 5, "seed": 7, "temperature": 0.5}',
                "exclude_input_in_output": True,
                "parameters": {"token_delay_s": 0.1},
            },
        ),
    ],
)
def test_the_triton_request(generation: Generation, expected: dict[str, Any]) -> None:
    assert mapping.triton_request(generation) == expected
    json.dumps(expected)  # a JSON body


# ---- Triton's events
@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            '{"model_name":"m","model_version":"1","text_output":" river",'
            '"prompt_tokens":3,"completion_tokens":2}',
            Event(" river", 3, 2),
        ),
        ('{"text_output":"x"}', Event("x")),
        ('{"text_output":["a","b"],"completion_tokens":[4]}', Event("ab", None, 4)),
        ('{"model_name":"m"}', Event("")),
        ('{"text_output":"x","completion_tokens":-1,"prompt_tokens":true}', Event("x")),
        ('{"error":"boom"}', Event(error="boom")),
        ("not json", Event(error="Triton sent an event that is not JSON: 'not json'")),
        ("[1]", Event(error="Triton sent an event that is not a JSON object: '[1]'")),
    ],
)
def test_events(data: str, expected: Event) -> None:
    assert mapping.parse_event(data) == expected


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            b'{"error":"Request for unknown model: \'x\' is not found"}',
            "Request for unknown model: 'x' is not found",
        ),
        (
            b'data: {"error":"tiny_lm: max_tokens must be from 1 to 100000"}\n\n',
            "tiny_lm: max_tokens must be from 1 to 100000",
        ),
        (b"plain text", "plain text"),
        (b"", "no message"),
    ],
)
def test_error_messages(body: bytes, message: str) -> None:
    assert mapping.error_message(body) == message


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (404, (404, "invalid_request_error", "model_not_found", "The model `m` does not exist")),
        (400, (400, "invalid_request_error", "triton_rejected", "bad")),
        (503, (503, "server_error", "triton_busy", "Triton is busy: bad")),
        (429, (429, "server_error", "triton_busy", "Triton is busy: bad")),
        (500, (502, "server_error", "triton_failed", "Triton answered 500: bad")),
    ],
)
def test_triton_errors(status: int, expected: tuple[int, str, str, str]) -> None:
    error = mapping.triton_error(status, b'{"error":"bad"}', "m")
    assert (error.status, error.kind, error.code, error.message) == expected


def test_the_error_shape() -> None:
    error = OpenAIError(400, "max_tokens: bad", param="max_tokens")
    assert error.body() == {
        "error": {
            "message": "max_tokens: bad",
            "type": "invalid_request_error",
            "param": "max_tokens",
            "code": None,
        }
    }


@pytest.mark.parametrize(
    ("text", "count"),
    [("", 0), ("Hello", 1), ("Hello, world!", 4), ("user: Hi\nassistant:", 5), ("  don't  ", 3), ("é à", 2)],
)
def test_count_tokens(text: str, count: int) -> None:
    assert mapping.count_tokens(text) == count


@pytest.mark.parametrize(
    ("events", "usage"),
    [
        # the model's own counts win, the last one of each (a running total)
        ([Event("a", 9, 1), Event("b", 9, 2), Event("c", 9, 3)], (9, 3)),
        # counts the model reports without text (a final event) still count
        ([Event("a"), Event("", 9, 5)], (9, 5)),
        # none reported: one token per event with text, the prompt by count_tokens
        ([Event("a"), Event(""), Event("bc")], (4, 2)),
        ([], (4, 0)),
        ([Event("a", 2), Event("b")], (2, 2)),  # prompt reported, completion counted
    ],
)
def test_tally(events: list[Event], usage: tuple[int, int]) -> None:
    tally = Tally("Hello, big world")
    for event in events:
        tally.add(event)
    prompt, completion = usage
    assert tally.usage() == {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


@pytest.mark.parametrize(
    ("stops", "pieces", "sent", "stopped"),
    [
        ((), ["a", "b"], ["a", "b", ""], False),
        (("STOP",), ["hello ", "world"], ["hello ", "world", ""], False),
        (("STOP",), ["hello ST", "OP there"], ["hello ", "", ""], True),  # held back, then dropped
        (("STOP",), ["hello ST", "ar"], ["hello ", "STar", ""], False),  # held back, then released
        (("STOP",), ["end S"], ["end ", "S"], False),  # the stream ends: the held tail is sent
        (("\n",), ["line one\nline two"], ["line one", ""], True),
        (("b", "ab"), ["xab"], ["x"], True),  # the earliest stop sequence wins
        (("STOP",), ["STOP", "more"], ["", ""], True),
        (("abc",), ["a", "b", "x"], ["", "", "abx"], False),
    ],
)
def test_stop_sequences(stops: tuple[str, ...], pieces: list[str], sent: list[str], stopped: bool) -> None:
    scanner = StopScanner(stops)
    got = [scanner.feed(piece) for piece in pieces]
    if len(sent) > len(pieces):
        got.append(scanner.flush())
    assert got == sent
    assert scanner.stopped is stopped


@pytest.mark.parametrize(
    ("max_tokens", "completion", "stopped", "reason"),
    [(None, 100, False, "stop"), (5, 5, False, "length"), (5, 4, False, "stop"), (5, 5, True, "stop")],
)
def test_finish_reason(max_tokens: int | None, completion: int, stopped: bool, reason: str) -> None:
    generation = Generation("chat", "m", "p", max_tokens=max_tokens)
    assert mapping.finish_reason(generation, completion, stopped) == reason


# ---- answers
IDENTITY = Identity("chatcmpl-1", 1700000000)
BASE = {"id": "chatcmpl-1", "created": 1700000000, "model": "m"}


@pytest.mark.parametrize(
    ("generation", "arguments", "expected"),
    [
        (
            Generation("chat", "m", "p"),
            {"role": True},
            {
                **BASE,
                "object": "chat.completion.chunk",
                "choices": [
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": ""},
                        "logprobs": None,
                        "finish_reason": None,
                    }
                ],
            },
        ),
        (
            Generation("chat", "m", "p", stream=True, include_usage=True),
            {"text": " river"},
            {
                **BASE,
                "object": "chat.completion.chunk",
                "choices": [
                    {"index": 0, "delta": {"content": " river"}, "logprobs": None, "finish_reason": None}
                ],
                "usage": None,
            },
        ),
        (
            Generation("chat", "m", "p"),
            {"finish": "length"},
            {
                **BASE,
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "length"}],
            },
        ),
        (
            Generation("completion", "m", "p"),
            {"text": " river"},
            {
                **BASE,
                "object": "text_completion",
                "choices": [{"index": 0, "text": " river", "logprobs": None, "finish_reason": None}],
            },
        ),
        (
            Generation("completion", "m", "p"),
            {"finish": "stop"},
            {
                **BASE,
                "object": "text_completion",
                "choices": [{"index": 0, "text": "", "logprobs": None, "finish_reason": "stop"}],
            },
        ),
    ],
)
def test_stream_chunks(generation: Generation, arguments: dict[str, Any], expected: dict[str, Any]) -> None:
    assert mapping.stream_chunk(generation, IDENTITY, **arguments) == expected


USAGE = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}


@pytest.mark.parametrize("kind", ["chat", "completion"])
def test_the_usage_chunk(kind: mapping.Kind) -> None:
    chunk = mapping.usage_chunk(Generation(kind, "m", "p"), IDENTITY, USAGE)
    assert chunk["choices"] == []
    assert chunk["usage"] == USAGE
    assert chunk["object"] == ("chat.completion.chunk" if kind == "chat" else "text_completion")


def test_whole_responses() -> None:
    chat = mapping.whole_response(Generation("chat", "m", "p"), IDENTITY, " a b", "stop", USAGE)
    assert chat == {
        **BASE,
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": " a b", "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": USAGE,
    }
    completion = mapping.whole_response(Generation("completion", "m", "p"), IDENTITY, " a b", "length", USAGE)
    assert completion["object"] == "text_completion"
    assert completion["choices"] == [
        {"index": 0, "text": " a b", "logprobs": None, "finish_reason": "length"}
    ]


def test_events_are_sse_data_lines() -> None:
    assert mapping.sse({"a": 1}) == b'data: {"a":1}\n\n'
    assert mapping.DONE == b"data: [DONE]\n\n"


def test_the_model_list() -> None:
    assert mapping.model_list(["b", "a", "b"], 5) == {
        "object": "list",
        "data": [
            {"id": "a", "object": "model", "created": 5, "owned_by": "tarn"},
            {"id": "b", "object": "model", "created": 5, "owned_by": "tarn"},
        ],
    }


@pytest.mark.parametrize(
    ("metadata", "served"),
    [
        ({"inputs": [{"name": "text_input"}, {"name": "max_tokens"}]}, True),
        ({"inputs": [{"name": "INPUT0"}]}, False),
        ({"inputs": "text_input"}, False),
        (None, False),
        ([], False),
    ],
)
def test_which_models_generate_text(metadata: Any, served: bool) -> None:
    assert mapping.generates_text(metadata) is served
