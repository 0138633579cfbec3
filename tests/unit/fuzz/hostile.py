"""What the fuzz suites of issue 48, item 6 share: hostile HTTP requests as raw bytes (Hypothesis
strategies), the client that sends one on a fresh socket and reads the answer strictly, and the
watch on what a listener logs.

The requests are bytes, not a library's requests: methods, targets, versions, header lines,
framings (Content-Length right, wrong, not a number; chunked whole and broken) and bodies (JSON
around each endpoint's fields, and worse) that no well-behaved client would send. The answer is
parsed with h11 as a client would: a status line that does not parse, a body that does not match
its framing, or bytes after the answer fail the example.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import math
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import h11
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

T = TypeVar("T")
Line = bytes  # a header line, without its end of line


def weighted(*choices: tuple[int, T]) -> st.SearchStrategy[T]:
    """One of the values, by weight (the first is what shrinking goes to)."""
    return st.sampled_from([value for weight, value in choices for _n in range(weight)])


# ---- JSON
# Every code point, lone surrogates too: JSON's "\ud800" decodes to one, which no UTF-8 can carry.
ANY_CHAR = st.characters(exclude_categories=())
NASTY_TEXT = (
    "", " ", "\ud800", "\udfff", "a\ud800b", "\x00", "\x01", "\n", "\r\n", "\t", "\u2028", "\u0085",
    "\ufeff", "\u202e", "é", "\U0001f4a5", '"', "\\", "</script>", "{}", "[DONE]", "data: x\n\n",
    "NaN", "null", "0", "-1", "1e309", "%s%n", "../..", " tiny", "TINY", "x" * 300,
)  # fmt: skip


# Names enough to pass the fronts' cap of user labels (counted, then the rest as "other").
NAMES = st.text("abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=6).map(str.encode)
TEXT = st.one_of(st.sampled_from(NASTY_TEXT), st.text(ANY_CHAR, max_size=10))
KEY = st.one_of(st.sampled_from(NASTY_TEXT), st.text(ANY_CHAR, max_size=6))
# Small values only: a huge max_tokens would make the stand-ins generate for good.
SAFE_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(), TEXT)
SCALARS = st.one_of(
    SAFE_SCALARS, st.integers(), st.sampled_from([2**63, -(2**63) - 1, 10**30, 2**1000])
)  # fmt: skip
# Any JSON (NaN and Infinity included, which Python's json reads). Strategies are built once: a
# strategy made afresh for each draw costs Hypothesis its validation every time.
JSON = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEY, inner, max_size=3), max_leaves=6
)


def field_of(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """An endpoint's field: a value of the kind it takes, or any JSON at all."""
    return st.one_of(good, JSON)


BODY_FORMS = weighted(
    (24, "json"), (1, "raw utf-8"), (1, "cut"), (1, "trailing"), (1, "deep"), (1, "deep object"),
    (1, "huge string"), (1, "big number"), (1, "duplicate key"), (1, "bom"), (1, "utf-16"),
    (2, "bytes"), (2, "empty"),
)  # fmt: skip


DEPTHS = st.sampled_from([64, 1000, 100_000])
OBJECT_DEPTHS = st.sampled_from([1000, 50_000])
HUGE = st.sampled_from([65_536, 300_000, 2_000_000])
TRAILING = st.sampled_from([b"x", b"}", b" \n", b"\x00", b"{}"])
SMALL_BYTES = st.binary(max_size=64)


@st.composite
def bodies(draw: st.DrawFn, documents: st.SearchStrategy[Any], keys: st.SearchStrategy[str]) -> bytes:
    """A document of ``documents`` as JSON, or as one of the ways a body goes wrong (``keys``: the
    endpoint's fields, which the huge values go in)."""
    form = draw(BODY_FORMS)
    if form == "bytes":
        return draw(SMALL_BYTES)
    if form == "empty":
        return b""
    if form == "deep":  # brackets nested deeper than the parser goes (issue 48, row 10)
        depth = draw(DEPTHS)
        return b"[" * depth + (b"]" * depth if draw(st.booleans()) else b"")
    if form == "deep object":
        depth = draw(OBJECT_DEPTHS)
        return b'{"a":' * depth + b"1" + b"}" * depth
    key = draw(keys)
    if form == "big number":  # beyond int()'s 4300 digits
        return b'{"%s": %s}' % (key.encode(), b"9" * 5000)
    document = draw(documents)
    if form == "huge string":
        size = draw(HUGE)
        document = {**(document if isinstance(document, dict) else {}), key: "x" * size}
    text = json.dumps(document)  # ASCII: lone surrogates as \ud800, NaN and Infinity as literals
    if form == "raw utf-8":  # the surrogates' bytes too, which no UTF-8 decoder takes
        return json.dumps(document, ensure_ascii=False).encode("utf-8", "surrogatepass")
    if form == "cut":
        return text.encode()[: draw(st.integers(0, max(0, len(text) - 1)))]
    if form == "trailing":
        return text.encode() + draw(TRAILING)
    if form == "duplicate key" and isinstance(document, dict):
        again = json.dumps({key: draw(SAFE_SCALARS)})[1:-1]
        return ("{" + ", ".join([text[1:-1], again] if document else [again]) + "}").encode()
    if form == "bom":
        return b"\xef\xbb\xbf" + text.encode()
    if form == "utf-16":
        return text.encode("utf-16")
    return text.encode()


# ---- OpenAI's bodies (the front's, and what the activator passes on to it)
CHAT_ROLES = ("system", "developer", "user", "assistant", "tool", "function", "")
# The stand-in Triton's well-behaved models (tests/unit/stdlib/openai/test_server.py); its endless,
# failing, dying and rejecting ones fail or never end on purpose, and "loading" is not ready.
GOOD_MODELS = ("tiny", "plain", "stop", "add_one")
AVOIDED = frozenset({"endless", "failing", "dying", "rejecting", "loading"})
# Request parameters the stand-in reads (a silence or a delay in seconds) are never sent.
STAND_IN_PARAMETERS = frozenset({"silence", "delay"})
MAX_TOKENS = 64  # the stand-in's tiny sends as many events as max_tokens asks


def clamped(document: Any) -> Any:
    """At most MAX_TOKENS tokens asked, and none of the stand-in's own parameters."""
    if not isinstance(document, dict):
        return document
    for key in ("max_tokens", "max_completion_tokens"):
        value = document.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > MAX_TOKENS:
            document = {**document, key: value % (MAX_TOKENS + 1)}
    parameters = document.get("parameters")
    if isinstance(parameters, dict) and STAND_IN_PARAMETERS & parameters.keys():
        kept = {k: v for k, v in parameters.items() if k not in STAND_IN_PARAMETERS}
        document = {**document, "parameters": kept}
    return document


MODEL_NAMES = st.one_of(st.sampled_from(GOOD_MODELS), st.text(min_size=1, max_size=12), TEXT, JSON).filter(
    lambda model: model not in AVOIDED if isinstance(model, str) else True
)
PART = st.fixed_dictionaries({"type": field_of(st.just("text")), "text": field_of(TEXT)})
MESSAGE = st.fixed_dictionaries(
    {
        "role": field_of(st.sampled_from(CHAT_ROLES)),
        "content": st.one_of(TEXT, st.lists(PART, max_size=3), JSON),
    },
    optional={"name": TEXT},
)
PARAMETERS = st.dictionaries(
    st.one_of(st.sampled_from(["custom", "priority", "triton_x", "sequence_id", "", "é"]), KEY),
    SCALARS,
    max_size=3,
)
DROPPED = object()  # a field left out
# The fields of /v1/chat/completions and /v1/completions, each with values of every kind.
HOSTILE_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "model": MODEL_NAMES,
    "messages": field_of(st.lists(MESSAGE, max_size=4)),
    "prompt": field_of(st.one_of(TEXT, st.lists(TEXT, max_size=2), st.lists(st.integers(), max_size=3))),
    "stream": field_of(st.booleans()),
    "stream_options": field_of(
        st.fixed_dictionaries({}, optional={"include_usage": field_of(st.booleans())})
    ),
    "max_tokens": field_of(st.integers(-1, MAX_TOKENS)),
    "max_completion_tokens": field_of(st.integers(-1, MAX_TOKENS)),
    "stop": field_of(st.one_of(TEXT, st.lists(TEXT, max_size=5))),
    "temperature": field_of(st.one_of(st.floats(-1, 3), st.sampled_from([math.nan, math.inf]))),
    "top_p": field_of(st.floats(-1, 2)),
    "seed": field_of(st.integers()),
    "n": field_of(st.integers(-1, 3)),
    "user": field_of(TEXT),
    "parameters": field_of(PARAMETERS),
    "echo": field_of(st.booleans()),
    "best_of": field_of(st.integers(-1, 3)),
    "logprobs": JSON,
    "tools": JSON,
}
FIELD_CHANGES = st.lists(
    st.one_of(
        *(
            st.tuples(st.just(key), st.one_of(value, st.just(DROPPED)))
            for key, value in HOSTILE_FIELDS.items()
        )
    ),
    min_size=1,
    max_size=2,
)
# Bodies the front takes, with hostile values where it takes any (texts, users, names it lacks):
# they reach the generation, the stop sequences, the streams and the counters.
VALID_COMMON = {
    "stream": st.booleans(),
    "max_tokens": st.integers(1, MAX_TOKENS),
    "stop": st.one_of(TEXT, st.lists(TEXT, min_size=1, max_size=4)),
    "temperature": st.floats(0, 2),
    "top_p": st.floats(0, 1),
    "seed": st.integers(-(2**63), 2**63 - 1),
    "n": st.just(1),
    "user": TEXT,
}
VALID_MODELS = st.one_of(
    st.sampled_from(GOOD_MODELS), NAMES.map(bytes.decode).filter(lambda name: name not in AVOIDED)
)
VALID_PART = st.fixed_dictionaries({"type": st.just("text"), "text": TEXT})
VALID_MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(CHAT_ROLES[:5]), "content": st.one_of(TEXT, st.lists(VALID_PART, max_size=2))}
)
VALID_CHAT = st.fixed_dictionaries(
    {"model": VALID_MODELS, "messages": st.lists(VALID_MESSAGE, min_size=1, max_size=3)},
    optional={**VALID_COMMON, "max_completion_tokens": st.integers(1, MAX_TOKENS)},
)
VALID_COMPLETION = st.fixed_dictionaries({"model": VALID_MODELS, "prompt": TEXT}, optional=VALID_COMMON)
VALID_DOCUMENTS = st.one_of(VALID_CHAT, VALID_COMPLETION)
STREAMED = st.fixed_dictionaries(
    {"stream": st.just(True), "stream_options": st.fixed_dictionaries({"include_usage": st.booleans()})}
)


def changed_document(document: dict[str, Any], changes: list[tuple[str, Any]]) -> dict[str, Any]:
    document = {**document, **dict(changes)}
    return {key: value for key, value in document.items() if value is not DROPPED}


OPENAI_DOCUMENTS = st.one_of(
    VALID_DOCUMENTS,
    st.builds(lambda document, streamed: {**document, **streamed}, VALID_DOCUMENTS, STREAMED),
    st.builds(changed_document, VALID_DOCUMENTS, FIELD_CHANGES),  # one or two fields hostile
    JSON,
).map(clamped)
OPENAI_FIELDS = ("model", "messages", "prompt", "stop", "user", "max_tokens", "parameters", "stream")


# ---- the request line
METHODS = weighted(
    (6, b"GET"), (6, b"POST"), (1, b"PUT"), (1, b"DELETE"), (1, b"HEAD"), (1, b"OPTIONS"),
    (1, b"PATCH"), (1, b"CONNECT"), (1, b"TRACE"), (1, b"get"), (1, b"G\x00T"), (1, b""),
    (1, b"P\xd3ST"), (1, b"GET GET"), (1, b"A" * 1000), (1, b"\x16\x03\x01"),
)  # fmt: skip
VERSIONS = weighted(
    (30, b"HTTP/1.1"), (4, b"HTTP/1.0"), (1, b"HTTP/2.0"), (1, b"HTTP/0.9"), (1, b"HTTP/1.2"),
    (1, b"HTTP/1"), (1, b"http/1.1"), (1, b"HTTP/1.1 x"), (1, b""), (1, b"HTTP/11"), (1, b"HTTP/1.10"),
    (1, b"HTTP/9999999999999999999.0"), (1, b"HTTP/\xff"), (1, b"HTTP/3.0"),
)  # fmt: skip
SEPARATORS = weighted((12, b" "), (1, b"  "), (1, b"\t"))
ENDS_OF_LINE = weighted((20, b"\r\n"), (1, b"\n"), (1, b"\r"))

JUNK_TARGETS = (
    b"*", b"", b"/%", b"/%zz", b"/%00", b"/%ff%fe", b"/%ed%a0%80", b"/\xc3\xa9", b"/\xe9", b"//[",
    b"http://[::1/x", b"http://tarn", b"https://tarn:99999/", b"//", b"/..", b"/../../etc/passwd",
    b"/?", b"/?&&", b"/#", b"/\x00", b"/\x7f", b"/a b", b"tarn:80", b"/\\", b"?x=1", b"/;x",
)  # fmt: skip
QUERY_JUNK = (
    "", "%zz", "%", "%00", "%ff", "%ed%a0%80", "é", "\ud800", "+", "=", "==", "1e309", "nan", "inf",
    "-0", "9" * 400, " 1", "a\x00", "[", "x" * 3000,
)  # fmt: skip


QUERY_NAMES = st.sampled_from(["", "x", "token[]", "%66ormat", "é"])
JOINERS = weighted((8, "&"), (1, ";"), (1, "&&"))
TARGET_FORMS = weighted((14, "known"), (3, "junk"), (1, "text"), (1, "bytes"), (1, "long"))
CHANGES = weighted(
    (12, ""), (1, "slash"), (1, "upper"), (1, "double"), (1, "absolute"), (1, "bad absolute"), (1, "dots"),
    (1, "escaped"),
)  # fmt: skip
LONG = st.sampled_from([8_000, 70_000])
ANY_TEXT = st.text(ANY_CHAR, max_size=20)
SHORT_BYTES = st.binary(max_size=20)


def query_strings(params: Sequence[str], values: Sequence[str]) -> st.SearchStrategy[str]:
    pair = st.tuples(
        st.one_of(st.sampled_from(params), QUERY_NAMES),
        st.one_of(st.sampled_from(values), st.sampled_from(QUERY_JUNK)),
        st.booleans(),  # "name=" rather than "name" when the value is empty
    )
    return st.builds(
        lambda pairs, joiner: joiner.join(f"{n}={v}" if v or equals else n for n, v, equals in pairs),
        st.lists(pair, max_size=4),
        JOINERS,
    )


def changed(path: str, change: str) -> str:
    if change == "slash":
        return path + "/"
    if change == "upper":
        return path.upper()
    if change == "double":
        return "/" + path
    if change == "absolute":
        return "http://tarn" + path
    if change == "bad absolute":
        return "http://[::1" + path
    if change == "dots":
        return "/x/.." + path
    if change == "escaped":
        return path.replace("/", "%2F", 2).replace("s", "%73")
    return path


def targets(paths: Sequence[str], queries: st.SearchStrategy[str]) -> st.SearchStrategy[bytes]:
    """A path the listener serves (changed a little or not), with or without a query; or junk."""
    known = st.sampled_from(paths)

    @st.composite
    def target(draw: st.DrawFn) -> bytes:
        form = draw(TARGET_FORMS)
        if form == "junk":
            return draw(st.sampled_from(JUNK_TARGETS))
        if form == "text":
            return ("/" + draw(ANY_TEXT)).encode("utf-8", "surrogatepass")
        if form == "bytes":
            return b"/" + draw(SHORT_BYTES)
        path = draw(known)
        if form == "long":  # over the heads' bounds (64 KiB) or not
            size = draw(LONG)
            return (
                (path + "?x=" + "a" * size).encode() if draw(st.booleans()) else ("/" + "a" * size).encode()
            )
        path = changed(path, draw(CHANGES))
        if draw(st.integers(0, 2)) == 0:
            path += "?" + draw(queries)
        if draw(st.integers(0, 19)) == 0:
            path += "#frag"
        return path.encode("utf-8", "surrogatepass")

    return target()


# ---- the headers
HOSTS = weighted(
    (12, b"tarn"), (1, b"127.0.0.1:8000"), (1, b""), (1, b"[::1"), (1, b"a b"), (1, b"\xff"),
    (1, b"x" * 300), (1, b"tarn, other"),
)  # fmt: skip
CONTENT_TYPES = st.sampled_from(
    [b"application/json", b"text/plain", b"application/json; charset=utf-16", b"", b"\xff",
     b"multipart/form-data; boundary=x", b"application/x-www-form-urlencoded"]
)  # fmt: skip
EXPECTS = weighted((6, b"100-continue"), (1, b"100-Continue"), (1, b"nothing"), (1, b""))
CONNECTIONS = weighted(
    (10, b"close"), (2, b"keep-alive"), (1, b"Upgrade"), (1, b"close, close"), (1, b""), (1, b"TE"),
    (1, b"\xff"),
)  # fmt: skip
JUNK_LINES = (
    b"no colon here", b":", b": no name", b"X Bad: 1", b"X-\xe9: 1", b"\x00: 1", b"Content-Length : 3",
    b" Host: tarn", b"X" * 1000 + b": 1", b"X-\x7f: 1", b"(x): 1", b"X-A:\x00", b"X-B: a\x0bb",
    b"Upgrade: h2c", b"Proxy-Connection: keep-alive", b"TE: trailers", b"Trailer: X-T", b"Keep-Alive: 5",
    b"Content-Encoding: gzip", b"Forwarded: for=\xff", b"X-Forwarded-For: 1.2.3.4, \xff",
)  # fmt: skip
USERS = (
    b"alice", b"bob", b"carol", b"", b" ", b"  alice", b"alice ", b"\x01bob", b"a" * 300, b"\xe9l\xe8ve",
    "\u00fcn\u00ef".encode(), b"other", b"anonymous", b'"quoted"', b"back\\slash", b"a\tb", b"\x7f",
    b"{}", b"a,b", b"a=b", b"\xc0\xaf", b"%0d%0aX: y",
)  # fmt: skip


def bearer(token: str) -> st.SearchStrategy[Line]:
    """Authorization with the right bearer token, a wrong one, none, or another scheme."""
    right = token.encode()
    return weighted(
        (4, b"Authorization: Bearer " + right), (1, b"Authorization: Bearer wrong"),
        (1, b"Authorization: Bearer "), (1, b"Authorization: Bearer"), (1, b"Authorization: Basic " + right),
        (1, b"Authorization: bearer " + right), (1, b"Authorization: Bearer  " + right + b"  "),
        (1, b"Authorization: Bearer " + right + b"x"), (1, b"Authorization: Bearer \xff"),
        (1, b"Authorization: " + right),
    )  # fmt: skip


@dataclass(frozen=True)
class Surface:
    """What one listener serves, for the generator."""

    routes: st.SearchStrategy[tuple[str, str]]  # (method, path) it serves
    paths: tuple[str, ...]  # the paths it serves, and a few it does not
    params: tuple[str, ...]  # the query parameters its paths take
    values: tuple[str, ...]  # values they take
    documents: st.SearchStrategy[Any]  # JSON documents around its endpoints' fields
    keys: tuple[str, ...]  # those fields
    credentials: st.SearchStrategy[list[Line]]  # header lines that carry (or fail to carry) a token
    half_close: st.SearchStrategy[bool]  # whether a client whose request is whole half-closes


@dataclass(frozen=True)
class Framed:
    lines: list[Line]
    payload: bytes  # what follows the head
    body: bytes | None  # the body the listener must read; None when the framing is broken or ambiguous


CHUNK_SIZES = st.lists(st.integers(1, 65_536), min_size=1, max_size=4)
EXTENSIONS = weighted((8, b""), (1, b";a=b"), (1, b";x"))
DIGITS = weighted((8, b"%x"), (1, b"%X"), (1, b"000%x"))
TRAILERS = weighted((8, b""), (1, b"X-Trailer: v\r\n"))


def chunked(draw: st.DrawFn, body: bytes) -> bytes:
    """``body`` in chunks of drawn sizes, with chunk extensions and trailers now and then."""
    sizes, extension, digits = draw(CHUNK_SIZES), draw(EXTENSIONS), draw(DIGITS)
    # At most some 500 chunks: a 100,000-byte body in one-byte chunks costs the listeners seconds
    # (each chunk is an h11 event; the report of issue 48, item 6), which 2,000 examples cannot pay.
    sizes = [max(size, len(body) // 500) for size in sizes]
    out, at, turn = [], 0, 0
    while at < len(body):
        size = sizes[turn % len(sizes)]
        piece, at, turn = body[at : at + size], at + size, turn + 1
        out.append(digits % len(piece) + extension + b"\r\n" + piece + b"\r\n")
    return b"".join(out) + b"0\r\n" + draw(TRAILERS) + b"\r\n"


BROKEN_CHUNKS = (
    b"zz\r\nabc\r\n0\r\n\r\n", b"10\r\nabc\r\n0\r\n\r\n", b"3\r\nabcX\r\n0\r\n\r\n", b"3\r\nabc\r\n",
    b"-1\r\n\r\n", b"ffffffffffffffffffff\r\nabc", b"3\nabc\n0\n\n", b"3;\x00\r\nabc\r\n0\r\n\r\n",
    b"3" + b";" + b"e" * 70_000 + b"\r\nabc\r\n0\r\n\r\n", b"", b"0\r\n", b"0x3\r\nabc\r\n0\r\n\r\n",
)  # fmt: skip
JUNK_LENGTHS = (
    b"", b"abc", "\u00b2".encode(), "1\u00b9".encode(), b"\xb2", "\u0663".encode(), "\uff15".encode(),
    b"-1", b"9" * 30, b"1 2", b"0x10", b"+5", b"1e3", b"5.0", b"5,6", b"\x00",
)  # fmt: skip
FRAMINGS = weighted(
    (10, "length"), (3, "none"), (1, "short"), (1, "long"), (2, "junk length"), (1, "twice"),
    (3, "chunked"), (2, "broken chunks"), (1, "other coding"), (1, "both"),
)  # fmt: skip


MORE = st.sampled_from([1, 100, 10**6, 10**12])
CODINGS = st.sampled_from(
    [
        b"gzip",
        b"gzip, chunked",
        b"chunked, gzip",
        b"identity",
        b"Chunked",
        b"chunked, chunked",
        b"\xffchunked",
    ]
)


PLAIN_FRAMINGS = weighted((4, "length"), (1, "chunked"))


def framed(draw: st.DrawFn, body: bytes, framings: st.SearchStrategy[str] = FRAMINGS) -> Framed:
    how = draw(framings)
    size = str(len(body)).encode()
    if how == "length":
        return Framed([b"Content-Length: " + size], body, body)
    if how == "none":  # what follows the head is not the request's: it has no body
        return Framed([], body, b"")
    if how == "short" and body:  # the rest is not the request's
        cut = draw(st.integers(0, len(body) - 1))
        return Framed([b"Content-Length: %d" % cut], body, body[:cut])
    if how == "long":
        more = draw(MORE)
        return Framed([b"Content-Length: %d" % (len(body) + more)], body, None)
    if how == "junk length":
        return Framed([b"Content-Length: " + draw(st.sampled_from(JUNK_LENGTHS))], body, None)
    if how == "twice":
        other = draw(st.sampled_from([size, size + b"0", b"0"]))
        return Framed([b"Content-Length: " + size, b"Content-Length: " + other], body, None)
    if how == "chunked":
        return Framed([b"Transfer-Encoding: chunked"], chunked(draw, body), body)
    if how == "broken chunks":
        return Framed([b"Transfer-Encoding: chunked"], draw(st.sampled_from(BROKEN_CHUNKS)), None)
    if how == "other coding":
        return Framed([b"Transfer-Encoding: " + draw(CODINGS)], chunked(draw, body), None)
    if how == "both":
        return Framed([b"Content-Length: " + size, b"Transfer-Encoding: chunked"], chunked(draw, body), None)
    return Framed([b"Content-Length: " + size], body, body)


class Raw:
    """One request as sent: its bytes, and whether the client then half-closes (it does whenever
    the listener could wait for more: a framing broken on purpose, junk). A plain class: Hypothesis
    prints a dataclass field by field, megabytes of body included."""

    def __init__(
        self, data: bytes, method: bytes, target: bytes, half_close: bool, body: bytes | None
    ) -> None:
        self.data = data
        self.method = method
        self.target = target
        self.half_close = half_close
        self.body = body  # what the listener must read as the body; None when not known

    def __repr__(self) -> str:
        shown = self.data if len(self.data) <= 2000 else self.data[:2000] + b"..."
        return f"Raw(half_close={self.half_close}, {len(self.data)} bytes: {shown!r})"


ODDITIES = weighted(
    (16, ""), (2, "junk"), (1, "duplicate"), (1, "fold"), (1, "many"), (1, "huge"), (1, "shuffle")
)  # fmt: skip
USER_LINES = st.lists(st.one_of(st.sampled_from(USERS), NAMES), min_size=1, max_size=2)
JUNK_HEADERS = st.lists(st.sampled_from(JUNK_LINES), min_size=1, max_size=3)
FOLDS = st.sampled_from([b" folded", b"\tfolded: x"])
MANY = st.sampled_from([101, 2000])


# How each listener's suite runs its examples: 2,000, the same ones every run (derandomized, no
# example database), each as slow as it takes (a listener's bound is checked by the test itself),
# and raw requests large by design.
HOSTILE_SETTINGS = settings(
    max_examples=2000,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)


@functools.cache
def requests(surface: Surface) -> st.SearchStrategy[Raw]:
    """Hostile requests to the listener ``surface`` describes."""
    queries = query_strings(surface.params, surface.values)
    target_of = targets(surface.paths, queries)
    body_of = bodies(surface.documents, st.sampled_from(surface.keys))

    @st.composite
    def request(draw: st.DrawFn) -> Raw:
        # Half the requests are HTTP a parser takes, hostile in what they carry only (paths,
        # queries, header values, bodies), so that they reach the listener's own code; the other
        # half are hostile HTTP too.
        plain = draw(st.booleans())
        if plain:
            method_text, path = draw(surface.routes)
            query = "?" + draw(queries) if draw(st.integers(0, 3)) == 0 else ""
            method, target = method_text.encode(), (path + query).encode("utf-8", "surrogatepass")
            version, separator = draw(weighted((9, b"HTTP/1.1"), (1, b"HTTP/1.0"))), b" "
            frame = framed(draw, draw(body_of), PLAIN_FRAMINGS)
            lines = [b"Host: tarn", *frame.lines]
        else:
            method, target, version = draw(METHODS), draw(target_of), draw(VERSIONS)
            separator = draw(SEPARATORS)
            frame = framed(draw, draw(body_of))
            lines = [b"Host: " + draw(HOSTS)] if draw(st.integers(0, 19)) else []
            lines += frame.lines
        line = method + separator + target + (separator + version if version else b"")
        if draw(st.booleans()):
            lines.append(b"Content-Type: " + draw(CONTENT_TYPES))
        lines += draw(surface.credentials)
        if draw(st.booleans()):
            lines += [b"X-TARN-User: " + user for user in draw(USER_LINES)]
        if draw(st.integers(0, 9)) == 0:
            lines.append(b"Expect: " + draw(EXPECTS))
        if draw(st.booleans()):
            lines.append(b"Connection: " + draw(CONNECTIONS))
        odd = "" if plain else draw(ODDITIES)
        if odd == "junk":
            lines += draw(JUNK_HEADERS)
        elif odd == "duplicate" and lines:
            lines.append(lines[draw(st.integers(0, len(lines) - 1))])
        elif odd == "fold":  # obs-fold: a line that continues the one before
            lines.insert(draw(st.integers(0, len(lines))), draw(FOLDS))
        elif odd == "many":
            lines += [b"X-N%d: v" % n for n in range(draw(MANY))]
        elif odd == "huge":
            lines.append(b"X-Big: " + b"v" * draw(LONG))
        elif odd == "shuffle":
            lines = list(draw(st.permutations(lines)))
        eol = b"\r\n" if plain else draw(ENDS_OF_LINE)
        data = line + eol + b"".join(header + eol for header in lines) + eol + frame.payload
        # A request the listener could wait on for more bytes: the client says it sent them all.
        whole = frame.body is not None and eol == b"\r\n" and version in (b"HTTP/1.1", b"HTTP/1.0")
        half_close = not whole or draw(surface.half_close)
        return Raw(data, method, target, half_close, frame.body if whole else None)

    return request()


# ---- the client
@dataclass(frozen=True)
class Answer:
    status: int | None  # None: the listener closed without answering
    headers: dict[str, str]  # names in lower case
    body: bytes
    complete: bool  # the body ended as its framing says
    reset: bool  # the connection was reset (after the answer, or instead of one)
    elapsed_s: float
    received: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def exchange(port: int, raw: Raw, within_s: float) -> Answer:
    """Sends ``raw`` on a fresh connection and reads the answer up to its end, as h11 frames it
    (no wait for the listener to close); AssertionError when none is whole within ``within_s``
    or what came is no HTTP answer."""
    parser = h11.Connection(h11.CLIENT)
    stand_for = h11.Request(
        method="HEAD" if raw.method == b"HEAD" else "GET", target="/", headers=[("Host", "x")]
    )
    parser.send(stand_for)  # puts h11 in the state of a client that sent that request
    parser.send(h11.EndOfMessage())
    began = time.monotonic()
    deadline = began + within_s
    received, body = bytearray(), bytearray()
    status: int | None = None
    headers: dict[str, str] = {}
    complete = reset = ended = False
    with socket.create_connection(("127.0.0.1", port), timeout=within_s) as sock:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            # A listener may answer and close before the whole request is sent: read its answer.
            sock.sendall(raw.data)
        if raw.half_close:
            with contextlib.suppress(OSError):  # closed by the listener already
                sock.shutdown(socket.SHUT_WR)
        while True:
            try:
                event = parser.next_event()
            except h11.RemoteProtocolError as exc:
                if status is not None and ended:
                    break  # a body cut short by the close: check_answer judges it
                raise AssertionError(f"not an HTTP answer ({exc}): {bytes(received[:500])!r}") from exc
            if event is h11.NEED_DATA:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no whole answer within {within_s:g} s: {bytes(received[:300])!r}")
                sock.settimeout(left)
                try:
                    data = sock.recv(65536)
                except TimeoutError as exc:
                    raise AssertionError(
                        f"no whole answer within {within_s:g} s: {bytes(received[:300])!r}"
                    ) from exc
                except ConnectionResetError:
                    data, reset = b"", True
                if not data and not received:
                    break  # closed without a byte of answer
                ended = not data
                received += data
                parser.receive_data(data)
            elif isinstance(event, h11.Response):
                status = event.status_code
                headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in event.headers}
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                complete = True
                leftover, _closed = parser.trailing_data
                if raw.method != b"HEAD":  # a HEAD's answer may carry the body the listener wrote anyway
                    assert not leftover, f"bytes after the answer's end: {bytes(leftover[:300])!r}"
                break
            elif isinstance(event, h11.ConnectionClosed):
                break
            # InformationalResponse (100 Continue): the final answer follows
    return Answer(status, headers, bytes(body), complete, reset, time.monotonic() - began, bytes(received))


def check_answer(raw: Raw, answer: Answer, may_fail: Callable[[Answer], bool] = lambda _a: False) -> None:
    """The invariants every listener keeps: an answer to a request it read whole (a client that
    half-closed may get none), whole unless the client half-closed, not a 5xx for the client's
    mistake unless ``may_fail`` says why."""
    if answer.status is None:
        assert raw.half_close, "no answer to a whole request"
        assert not answer.reset, "the connection was reset without an answer"
        return
    assert answer.status < 500 or may_fail(answer), f"{answer.status}: {answer.body[:300]!r}"
    assert answer.complete or raw.half_close, f"an answer cut short: {answer.received[:300]!r}"


# ---- what a listener must not do meanwhile
class Troubles(logging.Handler):
    """ERROR records (asyncio's "Task exception was never retrieved" and "Exception in callback"
    are) and exceptions nobody could catch (unraisable ones, threads that died), while watched."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.seen: list[str] = []
        self._guard = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        text = self.format(record)  # the traceback too
        with self._guard:
            self.seen.append(text)

    def unraisable(self, what: Any) -> None:
        with self._guard:
            self.seen.append(f"unraisable: {what.exc_value!r} in {what.object!r}")

    def thread_died(self, what: threading.ExceptHookArgs) -> None:
        with self._guard:
            self.seen.append(f"thread {what.thread}: {what.exc_value!r}")

    def take(self) -> list[str]:
        with self._guard:
            seen, self.seen = self.seen, []
        return seen


@contextlib.contextmanager
def troubles() -> Iterator[Troubles]:
    watch = Troubles()
    root = logging.getLogger()
    root.addHandler(watch)
    unraisable, excepthook = sys.unraisablehook, threading.excepthook
    sys.unraisablehook, threading.excepthook = watch.unraisable, watch.thread_died
    try:
        yield watch
    finally:
        root.removeHandler(watch)
        sys.unraisablehook, threading.excepthook = unraisable, excepthook


def eventually(check: Callable[[], bool], within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.0005)
    return True


# ---- after the examples
def label_sets(text: str) -> dict[str, set[tuple[tuple[str, str], ...]]]:
    """Each sample name of a Prometheus text, with its distinct label sets (the text must parse)."""
    found: dict[str, set[tuple[tuple[str, str], ...]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, set()).add(tuple(sorted(sample.labels.items())))
    return found


def values_of(sets: set[tuple[tuple[str, str], ...]], label: str) -> set[str]:
    return {value for labels in sets for name, value in labels if name == label}


# ---- slow clients
@dataclass
class Slow:
    """Clients that sent half a request head and nothing since."""

    sockets: list[socket.socket] = field(default_factory=list)

    def open(self, port: int, count: int, half_head: bytes) -> None:
        for _n in range(count):
            client = socket.create_connection(("127.0.0.1", port), timeout=5)
            client.sendall(half_head)
            self.sockets.append(client)

    def cut_within(self, seconds: float) -> list[bytes]:
        """What each received before the listener closed it, all within ``seconds``."""
        deadline, received = time.monotonic() + seconds, []
        for client in self.sockets:
            data = bytearray()
            while True:
                client.settimeout(max(0.001, deadline - time.monotonic()))
                try:
                    piece = client.recv(65536)
                except TimeoutError:
                    raise AssertionError(f"a slow client still open after {seconds:g} s") from None
                except ConnectionResetError:
                    piece = b""
                if not piece:
                    break
                data += piece
            received.append(bytes(data))
        return received

    def close(self) -> None:
        for client in self.sockets:
            client.close()


def well_formed(method: str, target: str, headers: dict[str, str] | None = None, body: bytes = b"") -> Raw:
    """A plain request, for the checks around the fuzzing (the client waits for the answer: the
    front and the activator take a half-close for a client that went away)."""
    lines = [f"{method} {target} HTTP/1.1", "Host: tarn", f"Content-Length: {len(body)}", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    data = ("\r\n".join(lines) + "\r\n\r\n").encode() + body
    return Raw(data, method.encode(), target.encode(), False, body)
