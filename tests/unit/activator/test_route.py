"""Where the activator sends a request (tarn.activator.route): a table over targets and the
instances the source lists, as HAProxy's ACL routes (path_beg /v1/ to the fronts)."""

from __future__ import annotations

import pytest

from tarn.activator.route import Route, is_openai, route
from tarn.haproxy.plan import Endpoint
from tarn.haproxy.sources import Instance, Instances

A = Instance(Endpoint("10.0.0.1", 8000), 9000)  # Triton and its front
B = Instance(Endpoint("10.0.0.2", 8010), 9010)
BARE = Instance(Endpoint("10.0.0.3", 8000))  # started without --openai-port


@pytest.mark.parametrize(
    ("target", "openai"),
    [
        ("/v1/chat/completions", True),
        ("/v1/models?x=1", True),
        ("http://tarn:80/v1/completions", True),  # absolute form
        ("/v1", False),  # HAProxy's ACL is path_beg /v1/: this one goes to Triton
        ("/v10/x", False),
        ("/v2/models/m/infer", False),
        ("/v2/models/v1/", False),
        ("/", False),
        # urlsplit raises on a bracket left open: the activator's handler died (issue 48, item 6)
        ("http://[::1/v1/completions", False),
        ("/v1/[", True),
    ],
)
def test_openai_requests_are_the_ones_haproxy_sends_to_the_fronts(target: str, openai: bool) -> None:
    assert is_openai(target) is openai


def ends(*names: str) -> tuple[Endpoint, ...]:
    return tuple(sorted(Endpoint(n.split(":")[0], int(n.split(":")[1])) for n in names))


@pytest.mark.parametrize(
    ("target", "instances", "skipped", "endpoints"),
    [
        ("/v2/models", None, set(), ()),  # nothing read yet: hold
        ("/v1/chat/completions", None, set(), ()),
        ("/v2/models", frozenset(), set(), ()),  # at zero: hold
        ("/v1/chat/completions", frozenset(), set(), ()),
        (
            "/v2/models",
            frozenset({A, B, BARE}),
            set(),
            ends("10.0.0.1:8000", "10.0.0.2:8010", "10.0.0.3:8000"),
        ),
        ("/v1/chat/completions", frozenset({A, B, BARE}), set(), ends("10.0.0.1:9000", "10.0.0.2:9010")),
        ("/v1/models", frozenset({A, BARE}), set(), ends("10.0.0.1:9000")),
        ("/v1/completions", frozenset({A, B}), {Endpoint("10.0.0.1", 9000)}, ends("10.0.0.2:9010")),
        ("/v1/completions", frozenset({A}), {Endpoint("10.0.0.1", 9000)}, ()),  # its front refused: hold
        ("/v2/models", frozenset({A}), {Endpoint("10.0.0.1", 9000)}, ends("10.0.0.1:8000")),  # not Triton
        ("/v2/models", frozenset({BARE}), set(), ends("10.0.0.3:8000")),
    ],
    ids=[
        "unknown /v2",
        "unknown /v1",
        "zero /v2",
        "zero /v1",
        "/v2 to every Triton",
        "/v1 to the fronts only",
        "/v1 to the one front",
        "a skipped front",
        "the only front skipped",
        "a front skipped, its Triton not",
        "/v2 without fronts",
    ],
)
def test_route(
    target: str, instances: Instances | None, skipped: set[Endpoint], endpoints: tuple[Endpoint, ...]
) -> None:
    assert route(target, instances, skipped) == Route(endpoints)


def test_v1_with_no_front_anywhere_is_refused_at_once_in_openai_shape() -> None:
    found = route("/v1/chat/completions", frozenset({BARE, Instance(Endpoint("10.0.0.4", 8000))}))
    assert found.endpoints == ()
    assert not found.hold
    assert found.refusal is not None
    error = found.refusal.body()["error"]
    assert found.refusal.status == 404  # not 5xx: clients and HAProxy would retry it for nothing
    assert error["code"] == "openai_not_served"
    assert error["type"] == "invalid_request_error"
    assert "--openai-port" in error["message"]
    assert "2 ready instances" in error["message"]


def test_holding_is_no_endpoint_and_no_refusal() -> None:
    assert route("/v1/models", frozenset()).hold
    assert not route("/v1/models", frozenset({A})).hold
