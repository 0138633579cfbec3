"""The OpenAI front on loopback (tarn.stdlib.openai.server) against a stand-in of Triton's generate
extension (tests/support/openai_front.py). The real Triton with
examples/llm_repository/tiny_lm and the official openai client: docs/openai.md."""

from __future__ import annotations

import http.client
import itertools
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

import tarn.stdlib.openai.counters as counters_module
from tarn.stdlib.openai import metric_names
from tarn.stdlib.openai.admission import Limits
from tests.support.exposition import departures
from tests.support.loopback import eventually
from tests.support.openai_front import (
    TEXT_MODELS,
    TOKEN,
    Running,
    as_user,
    run_front,
)


@pytest.fixture
def running() -> Iterator[Running]:
    with run_front() as running:
        yield running


def chat(model: str, **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": "Hi"}], **extra}


def content_of(events: list[tuple[float, str]]) -> list[dict[str, Any]]:
    return [json.loads(data) for _event, data in events if data != "[DONE]"]


# ---- models
def test_the_model_list_has_the_ready_models_that_take_text(running: Running) -> None:
    status, _headers, listing = running.call("GET", "/v1/models")
    assert status == 200
    assert [m["id"] for m in listing["data"]] == sorted(TEXT_MODELS)
    assert listing["data"][0] == {
        "id": "dying",
        "object": "model",
        "created": running.front.started_at,
        "owned_by": "tarn",
    }


@pytest.mark.parametrize(
    ("model", "status"), [("tiny", 200), ("add_one", 404), ("nope", 404), ("a%2Fb", 404)]
)
def test_one_model(running: Running, model: str, status: int) -> None:
    got, _headers, body = running.call("GET", f"/v1/models/{model}")
    assert got == status
    if status == 404:
        assert body["error"]["code"] == "model_not_found"


# ---- answers gathered
def test_a_chat_without_stream(running: Running) -> None:
    status, headers, body = running.call(
        "POST", "/v1/chat/completions", chat("tiny", max_tokens=3, temperature=0.5), as_user("alice")
    )
    assert status == 200
    assert headers["Content-Type"] == "application/json"
    assert body["object"] == "chat.completion"
    assert body["id"] == "chatcmpl-1"
    assert body["choices"][0]["message"] == {"role": "assistant", "content": " t1 t2 t3", "refusal": None}
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"] == {
        "prompt_tokens": 11,
        "completion_tokens": 3,
        "total_tokens": 14,
    }  # the model's counts
    asked = running.standin.asked[-1]
    assert (asked["text_input"], asked["max_tokens"], asked["stream"], asked["temperature"]) == (
        "user: Hi\nassistant:",
        3,
        True,
        0.5,
    )
    counters = running.front.counters  # counted once the answer is out
    assert eventually(lambda: counters.requests.get(("alice", "tiny", "completed")) == 1)
    assert counters.prompt_tokens[("alice", "tiny")] == 11
    assert counters.completion_tokens[("alice", "tiny")] == 3


def test_a_completion_counted_by_the_front(running: Running) -> None:
    status, _headers, body = running.call(
        "POST", "/v1/completions", {"model": "plain", "prompt": "Once upon a time"}
    )
    assert status == 200
    assert body["object"] == "text_completion"
    assert body["choices"][0]["text"] == " a b c"
    assert body["choices"][0]["finish_reason"] == "stop"  # 3 tokens, below the 16 asked
    assert body["usage"] == {"prompt_tokens": 4, "completion_tokens": 3, "total_tokens": 7}
    assert eventually(lambda: running.front.counters.prompt_tokens.get(("anonymous", "plain")) == 4)


def test_stop_sequences_end_a_gathered_answer(running: Running) -> None:
    _status, _headers, body = running.call(
        "POST", "/v1/completions", {"model": "stop", "prompt": "x", "stop": "STOP"}
    )
    assert (body["choices"][0]["text"], body["choices"][0]["finish_reason"]) == (" one two ", "stop")


# ---- streams
def test_a_chat_stream_arrives_event_by_event(running: Running) -> None:
    payload = chat(
        "tiny", max_tokens=3, stream=True, stream_options={"include_usage": True}, parameters={"delay": 0.3}
    )
    events = running.stream("/v1/chat/completions", payload)
    assert events[-1][1] == "[DONE]"
    chunks = content_of(events)
    assert all(c["object"] == "chat.completion.chunk" and c["id"] == "chatcmpl-1" for c in chunks)
    assert [c["choices"][0]["delta"] for c in chunks[:5]] == [
        {"role": "assistant", "content": ""},
        {"content": " t1"},
        {"content": " t2"},
        {"content": " t3"},
        {},
    ]
    assert chunks[4]["choices"][0]["finish_reason"] == "length"
    assert chunks[5] == {
        **chunks[5],
        "choices": [],
        "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14},
    }
    # nothing held back: each token reached the client about when Triton sent it
    arrivals = [at for at, data in events if '"content":" t' in data]
    assert all(later - earlier > 0.2 for earlier, later in itertools.pairwise(arrivals))
    assert running.front.counters.first_token["tiny"].count == 1
    assert running.front.counters.between_tokens["tiny"].count == 2
    assert running.front.counters.between_tokens["tiny"].total > 0.4


def test_a_completion_stream_with_a_stop_sequence(running: Running) -> None:
    payload = {"model": "stop", "prompt": "x", "stream": True, "stop": ["STOP"]}
    chunks = content_of(running.stream("/v1/completions", payload))
    assert all(c["object"] == "text_completion" and "usage" not in c for c in chunks)
    assert "".join(c["choices"][0]["text"] for c in chunks) == " one two "
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_a_model_error_ends_the_stream_with_an_error_event(running: Running) -> None:
    events = running.stream("/v1/chat/completions", chat("failing", stream=True))
    chunks = content_of(events)
    assert [c["choices"][0]["delta"].get("content") for c in chunks[:3]] == ["", " a", " b"]
    assert chunks[-1] == {
        "error": {"message": "The model failed: boom", "type": "server_error", "param": None, "code": None}
    }
    assert events[-1][1] != "[DONE]"
    assert eventually(lambda: running.front.counters.requests.get(("anonymous", "failing", "failed")) == 1)


def test_triton_dying_mid_stream_ends_it_with_an_error_event_not_a_silent_cut(running: Running) -> None:
    chunks = content_of(running.stream("/v1/completions", {"model": "dying", "prompt": "x", "stream": True}))
    assert [c["choices"][0]["text"] for c in chunks[:2]] == [" a", " b"]
    assert chunks[-1]["error"]["code"] == "triton_broken"
    assert chunks[-1]["error"]["type"] == "server_error"


@pytest.mark.parametrize(
    ("model", "status", "code"),
    [("failing", 500, None), ("dying", 503, "triton_broken"), ("rejecting", 400, "triton_rejected")],
)
def test_failures_of_gathered_answers(running: Running, model: str, status: int, code: str | None) -> None:
    got, _headers, body = running.call("POST", "/v1/completions", {"model": model, "prompt": "x"})
    assert got == status
    assert body["error"]["code"] == code
    if model == "rejecting":
        assert body["error"]["message"] == "max_tokens too big"


def test_a_stream_triton_refuses_is_an_http_error_not_a_stream(running: Running) -> None:
    status, _headers, body = running.call(
        "POST", "/v1/completions", {"model": "rejecting", "prompt": "x", "stream": True}
    )
    assert (status, body["error"]["message"]) == (400, "max_tokens too big")


# ---- heartbeats: a silence before the first token (a long prefill, a model thinking)
KEEP_ALIVE = ": keep-alive"


def test_a_silent_stream_gets_heartbeats_then_every_token(running: Running) -> None:
    running.front.heartbeat_s = 0.1
    payload = chat("tiny", max_tokens=3, stream=True, parameters={"silence": 0.6})
    lines = running.stream_lines("/v1/chat/completions", payload)
    kinds = [KEEP_ALIVE if line == KEEP_ALIVE else line for _at, line in lines]
    first_token = next(i for i, line in enumerate(kinds) if '"content":" t1"' in line)
    assert '"role":"assistant"' in kinds[0]  # the head's chunk, before the silence
    beats = kinds[1:first_token]
    assert beats == [KEEP_ALIVE] * len(beats)
    assert 3 <= len(beats) <= 7  # about one per 0.1 s of the 0.6 s (5 or 6; a loaded machine is late)
    beat_times = [at for at, line in lines[1:first_token]]
    assert all(later - earlier > 0.05 for earlier, later in itertools.pairwise(beat_times))
    assert KEEP_ALIVE not in kinds[first_token:]  # the tokens came at once: nothing between them
    chunks = content_of([(at, line[len("data: ") :]) for at, line in lines if line.startswith("data: ")])
    assert [c["choices"][0]["delta"].get("content") for c in chunks] == ["", " t1", " t2", " t3", None]
    assert kinds[-1] == "data: [DONE]"
    assert eventually(lambda: running.front.counters.requests.get(("anonymous", "tiny", "completed")) == 1)


def test_no_heartbeat_while_events_come_faster(running: Running) -> None:
    running.front.heartbeat_s = 0.3
    payload = {"model": "tiny", "prompt": "x", "max_tokens": 8, "stream": True, "parameters": {"delay": 0.1}}
    lines = running.stream_lines("/v1/completions", payload)
    assert lines[-1][0] - lines[0][0] > 0.6  # longer than two heartbeats in all
    assert not [line for _at, line in lines if line.startswith(":")]
    chunks = content_of([(at, line[len("data: ") :]) for at, line in lines if line.startswith("data: ")])
    assert "".join(c["choices"][0]["text"] for c in chunks) == " t1 t2 t3 t4 t5 t6 t7 t8"


def test_a_gathered_answer_gets_no_heartbeat(running: Running) -> None:
    running.front.heartbeat_s = 0.1
    payload = {"model": "tiny", "prompt": "x", "max_tokens": 2, "parameters": {"silence": 0.4}}
    status, _headers, body = running.call("POST", "/v1/completions", payload)
    assert (status, body["choices"][0]["text"]) == (200, " t1 t2")


@pytest.mark.parametrize(
    ("heartbeat_s", "beats"),
    [(0.1, 2), (60.0, 0)],  # with heartbeats flowing; and the watch on the client's socket alone
)
def test_a_client_gone_during_the_silence_closes_triton_at_once(
    running: Running, caplog: pytest.LogCaptureFixture, heartbeat_s: float, beats: int
) -> None:
    running.front.heartbeat_s = heartbeat_s
    client = running.open_stream(
        "/v1/completions", {"model": "tiny", "prompt": "x", "stream": True, "parameters": {"silence": 30}}
    )
    received = b""
    while beats and (b"\r\n\r\n" not in received or received.count(KEEP_ALIVE.encode()) < beats):
        received += client.recv(4096)
    if not beats:
        time.sleep(0.3)  # the request is with Triton; the front has sent nothing yet
    close_and_see_triton_cancelled(running, client, "tiny")
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]


def test_a_refusal_after_the_stream_opened_is_its_error_event(running: Running) -> None:
    """Triton answered only after the front had opened the stream: the refusal cannot be a status
    any more, so it is the stream's error event, and the stream ends without [DONE]."""
    running.front.heartbeat_s = 0.1
    payload = chat("rejecting", max_tokens=3, stream=True, parameters={"silence": 0.35})
    lines = [line for _at, line in running.stream_lines("/v1/chat/completions", payload)]
    assert '"role":"assistant"' in lines[0]
    assert KEEP_ALIVE in lines[1:3]
    errors = [json.loads(line[len("data: ") :]) for line in lines if line.startswith('data: {"error"')]
    assert len(errors) == 1, lines
    assert "max_tokens too big" in errors[0]["error"]["message"]
    assert "data: [DONE]" not in lines
    assert eventually(lambda: running.front.counters.requests.get(("anonymous", "rejecting", "failed")) == 1)


def test_the_official_client_reads_a_stream_with_heartbeats(running: Running) -> None:
    running.front.heartbeat_s = 0.1
    client = openai.OpenAI(
        base_url=f"http://127.0.0.1:{running.port}/v1", api_key="unused", max_retries=0, timeout=10
    )
    stream = client.chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": "Hi"}],
        max_tokens=3,
        stream=True,
        extra_body={"parameters": {"silence": 0.5}},
    )
    deltas = [c.choices[0].delta.content for c in stream if c.choices]
    assert deltas == ["", " t1", " t2", " t3", None]


# ---- clients that go away
def close_and_see_triton_cancelled(running: Running, client: socket.socket, model: str) -> None:
    """The client closes its connection: within 1 s the front closes its Triton request, and counts
    the generation cancelled with no stream left in flight."""
    client.close()
    gone_at = time.monotonic()
    assert eventually(lambda: bool(running.standin.closed_at))
    assert running.standin.closed_at[0] - gone_at < 1.0
    counters = running.front.counters
    assert eventually(lambda: counters.requests.get(("anonymous", model, "cancelled")) == 1)
    assert eventually(lambda: counters.streams_in_flight[model] == 0)


def test_a_client_gone_mid_stream_closes_triton_at_once(running: Running) -> None:
    client = running.open_stream("/v1/completions", {"model": "endless", "prompt": "x", "stream": True})
    received = b""
    while received.count(b'"text":" t') < 3:
        received += client.recv(4096)
    close_and_see_triton_cancelled(running, client, "endless")
    counters = running.front.counters
    assert counters.completion_tokens[("anonymous", "endless")] >= 3  # counted up to the cancel


def test_a_client_gone_while_its_answer_is_gathered_closes_triton_too(running: Running) -> None:
    client = running.open_stream("/v1/chat/completions", chat("endless"))
    time.sleep(0.3)
    close_and_see_triton_cancelled(running, client, "endless")


# ---- errors in OpenAI's shape
@pytest.mark.parametrize(
    ("method", "path", "payload", "status", "param", "code"),
    [
        ("POST", "/v1/chat/completions", b"{not json", 400, None, None),
        ("POST", "/v1/completions", b"[" * 100_000, 400, None, None),  # a RecursionError, a 500 (issue 48)
        ("POST", "/v1/completions", b'{"model": "x\\ud800", "prompt": "x"}', 400, "model", None),
        ("POST", "/v1/chat/completions", {"model": "tiny"}, 400, "messages", None),
        (
            "POST",
            "/v1/completions",
            {"model": "tiny", "prompt": "x", "max_tokens": "9"},
            400,
            "max_tokens",
            None,
        ),
        ("POST", "/v1/completions", {"model": "nope", "prompt": "x"}, 404, "model", "model_not_found"),
        ("GET", "/v1/completions", None, 405, None, "method_not_allowed"),
        ("POST", "/v1/models", b"{}", 405, None, "method_not_allowed"),
        ("POST", "/v1/embeddings", {"model": "tiny", "input": "x"}, 404, None, "unknown_url"),
        ("GET", "/v2/health/ready", None, 404, None, "unknown_url"),  # /v2 is Triton's, not the front's
    ],
)
def test_errors(
    running: Running, method: str, path: str, payload: Any, status: int, param: str | None, code: str | None
) -> None:
    got, headers, body = running.call(method, path, payload)
    assert got == status
    assert headers["Content-Type"] == "application/json"
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert (body["error"]["param"], body["error"]["code"]) == (param, code)


def test_metrics_render_after_a_model_name_no_utf8_can_carry(running: Running) -> None:
    """A lone surrogate in the model's name was counted, and /metrics answered 500 from then on."""
    running.call("POST", "/v1/completions", b'{"model": "x\\ud800", "prompt": "x", "stream": true}')
    status, _headers, _text = running.call("GET", "/metrics")
    assert status == 200


def test_an_unknown_model_leaves_no_series(running: Running) -> None:
    running.call("POST", "/v1/completions", {"model": "no-such-model", "prompt": "x", "stream": True})
    _status, _headers, text = running.call("GET", "/metrics")
    assert "no-such-model" not in text


def test_a_name_triton_does_not_have_leaves_no_series_whatever_triton_answered(running: Running) -> None:
    # issue 48, row 2: a refusal other than a 404 (some Tritons answer an unknown model 400) made a
    # permanent series of any name.
    model = "refused-400"
    status, _headers, _body = running.call("POST", "/v1/completions", {"model": model, "prompt": "x"})
    assert status >= 400
    _status, _headers, text = running.call("GET", "/metrics")
    assert f'model="{model}"' not in text
    assert running.front.counters.streams_in_flight == {}


def test_a_client_gone_before_triton_answered_a_name_it_does_not_have_leaves_no_series(
    running: Running,
) -> None:
    client = running.open_stream(
        "/v1/completions",
        {"model": "refused-400", "prompt": "x", "stream": True, "parameters": {"silence": 30}},
    )
    time.sleep(0.3)  # with Triton, silent
    client.close()
    assert eventually(lambda: bool(running.standin.closed_at))
    assert eventually(lambda: running.front.counters.streams_in_flight == {})
    assert not running.front.counters.requests


def test_users_beyond_the_cap_are_counted_together(running: Running, monkeypatch: pytest.MonkeyPatch) -> None:
    # issue 48, item 3: every X-TARN-User a client sends was a label of its own.
    monkeypatch.setattr(counters_module, "MAX_USERS", 2)
    for user in ("ann", "bob", "cy", "dee"):
        running.call("POST", "/v1/completions", {"model": "tiny", "prompt": "x"}, as_user(user))
    assert eventually(lambda: sum(running.front.counters.requests.values()) == 4)
    users = {user for user, _model, _outcome in running.front.counters.requests}
    assert users == {"ann", "bob", "other"}
    assert running.front.counters.requests[("other", "tiny", "completed")] == 2


def test_a_body_over_the_limit_is_refused() -> None:
    with run_front(max_body=100) as running:
        status, _headers, body = running.call(
            "POST", "/v1/completions", {"model": "tiny", "prompt": "x" * 200}
        )
    assert (status, body["error"]["code"]) == (413, "request_too_large")


def raw_answer(port: int, data: bytes, timeout: float = 5.0) -> bytes:
    """What the front answers to ``data`` sent as is on a new connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as client:
        client.sendall(data)
        received = b""
        while piece := client.recv(65536):
            received += piece
        return received


@pytest.mark.parametrize("length", ["\u00b2", "1\u00b9", "9" * 5000, "-1", "1 2"])
def test_a_content_length_that_is_no_ascii_number_is_a_400(length: str) -> None:
    # issue 48, row 10: '²'.isdigit() is true and int('²') raises: a 500 with a traceback.
    head = f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n\r\n"
    with run_front() as running:
        reply = raw_answer(running.port, head.encode("latin-1"))  # HTTP's bytes, as the front decodes them
    assert reply.startswith(b"HTTP/1.1 400 "), reply[:200]
    assert b"bad Content-Length" in reply


def test_half_a_request_is_answered_408_within_the_read_bound() -> None:
    # issue 48, row 4: connections holding half a request stayed open for good.
    with run_front(read_s=0.5) as running, socket.create_connection(("127.0.0.1", running.port)) as client:
        client.settimeout(5)
        began = time.monotonic()
        client.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{")
        reply = client.recv(65536)
        assert time.monotonic() - began < 2.0
    assert reply.startswith(b"HTTP/1.1 408 "), reply[:200]
    assert b'"code":"request_timeout"' in reply


def test_connections_beyond_the_bound_get_a_503_with_retry_after() -> None:
    with run_front(max_connections=2) as running:
        held = [socket.create_connection(("127.0.0.1", running.port)) for _n in range(2)]
        try:
            for client in held:
                client.sendall(b"GET /v1/models HTTP/1.1\r\n")  # half a request each
            assert eventually(lambda: running.front.connections == 2)
            reply = raw_answer(running.port, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        finally:
            for client in held:
                client.close()
        assert reply.startswith(b"HTTP/1.1 503 "), reply[:200]
        assert b"Retry-After: 1\r\n" in reply
        assert eventually(lambda: running.front.connections == 0)


def test_a_5_mb_body_over_the_limit_gets_a_413_the_client_can_read() -> None:
    # issue 48, row 14: the front closed with the body unread, and the client got a broken pipe.
    with run_front(max_body=1 << 20) as running:
        conn = http.client.HTTPConnection("127.0.0.1", running.port, timeout=10)
        conn.request("POST", "/v1/completions", body=b"x" * (5 * 1024 * 1024))
        reply = conn.getresponse()
        assert reply.status == 413
        assert json.loads(reply.read())["error"]["code"] == "request_too_large"
        conn.close()


def test_triton_unreachable_is_a_503() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    with run_front(triton_port=closed) as running:
        for method, path, payload in (
            ("POST", "/v1/completions", {"model": "tiny", "prompt": "x", "stream": True}),
            ("GET", "/v1/models", None),
        ):
            status, _headers, body = running.call(method, path, payload)
            assert (status, body["error"]["type"], body["error"]["code"]) == (
                503,
                "server_error",
                "triton_unreachable",
            )


# ---- what operators read
def test_metrics_and_health(running: Running) -> None:
    running.call("POST", "/v1/completions", {"model": "tiny", "prompt": "x"}, as_user("bob"))
    running.call("POST", "/v1/completions", {"model": "tiny", "prompt": "x"}, {"X-TARN-User": "  "})
    assert eventually(lambda: sum(running.front.counters.requests.values()) == 2)
    status, headers, text = running.call("GET", "/metrics")
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    # 16 tokens each: OpenAI's default max_tokens of a completion
    for user in ("bob", "anonymous"):
        assert samples[("tarn_openai_completion_tokens_total", (("model", "tiny"), ("user", user)))] == 16
    assert samples[("tarn_openai_streams_in_flight", (("model", "tiny"),))] == 0
    assert running.call("GET", "/health")[:1] == (200,)


def test_metrics_are_the_declared_families(running: Running) -> None:
    """/metrics, read back with prometheus_client's parser, is tarn.stdlib.openai.metric_names:
    every family, its type, help and labels (what the controller reads), no _created series;
    with admission (Limits: one slot), so that its series are written too."""
    running.front.admission = Limits(slots=1)
    running.call("POST", "/v1/completions", {"model": "tiny", "prompt": "x"}, as_user("bob"))
    assert eventually(lambda: sum(running.front.counters.requests.values()) == 1)
    _status, _headers, text = running.call("GET", "/metrics")
    assert departures(text, metric_names.FAMILIES) == []
    written = {sample.name for family in text_string_to_metric_families(text) for sample in family.samples}
    assert written == {sample for family in metric_names.FAMILIES for sample in family.samples}


def test_health_follows_tritons_readiness(running: Running) -> None:
    """An entry's health check on the front must fail while its Triton is not ready or gone."""
    running.standin.ready = False
    assert running.call("GET", "/health")[:1] == (503,)
    running.standin.ready = True
    assert running.call("GET", "/health")[:1] == (200,)


def test_a_user_named_without_knoxs_proof_counts_as_anonymous(running: Running) -> None:
    # issue 48, row 3: a client that reaches the front's port sending X-TARN-User: alice was alice.
    payload = {"model": "tiny", "prompt": "x"}
    running.call("POST", "/v1/completions", payload, {"X-TARN-User": "alice"})
    running.call("POST", "/v1/completions", payload, {"X-TARN-User": "alice", "X-TARN-User-Proof": "v1:1:00"})
    running.call("POST", "/v1/completions", payload, as_user("bob"))
    assert eventually(lambda: sum(running.front.counters.requests.values()) == 3)
    _status, _headers, text = running.call("GET", "/metrics")
    assert 'user="anonymous"' in text
    assert 'user="bob"' in text
    assert 'user="alice"' not in text


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"X-TARN-Token": "wrong"}, 401),
        ({"Authorization": "Bearer wrong"}, 401),
        ({"X-TARN-Token": TOKEN.reveal()}, 200),
        ({"Authorization": f"Bearer {TOKEN.reveal()}"}, 200),
    ],
)
def test_metrics_need_the_services_token(running: Running, headers: dict[str, str], status: int) -> None:
    # issue 48, row 3: the front's /metrics showed every user's usage to anyone.
    assert running.call("GET", "/metrics", headers=headers)[0] == status


def test_a_front_without_the_token_counts_everyone_as_anonymous() -> None:
    with run_front(token=None) as running:
        running.call("POST", "/v1/completions", {"model": "tiny", "prompt": "x"}, as_user("bob"))
        assert eventually(lambda: sum(running.front.counters.requests.values()) == 1)
        status, _headers, text = running.call("GET", "/metrics", headers={})
    assert status == 200
    assert 'user="anonymous"' in text
    assert 'user="bob"' not in text
