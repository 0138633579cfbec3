"""Admission in the front (issue 49, item 1): the real Front before the stand-in Triton of
test_server, the slots from ``Limits`` or from the model's config, over HTTP on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tarn.stdlib.openai import mapping
from tarn.stdlib.openai.admission import Limits, Policy, Tenant
from tarn.stdlib.openai.mapping import Identity
from tarn.stdlib.openai.server import Front, Reply, Triton
from tarn.stdlib.openai.tenancy import Tenancy, TenancyFile, parse
from tests.support.loopback import eventually
from tests.support.openai_front import Running, as_user, run_front

COMPLETION = "/v1/completions"


def slow(max_tokens: int = 4, delay: float = 0.15, **extra: Any) -> dict[str, Any]:
    """A completion that holds its slot about ``max_tokens * delay`` seconds."""
    return {"model": "tiny", "prompt": "x", "max_tokens": max_tokens, "parameters": {"delay": delay}, **extra}


def metric(running: Running, name: str, **labels: str) -> float:
    _status, _headers, text = running.call("GET", "/metrics")
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


def queued(running: Running, count: int) -> bool:
    return metric(running, "tarn_openai_queued_requests") == count


class Finished:
    """Requests sent from threads, and the order they were answered in."""

    def __init__(self, running: Running) -> None:
        self.running = running
        self.order: list[str] = []
        self.codes: list[int] = []
        self._threads: list[threading.Thread] = []
        self._guard = threading.Lock()

    def send(self, tag: str, payload: dict[str, Any], user: str) -> None:
        def call() -> None:
            status, _headers, _body = self.running.call("POST", COMPLETION, payload, as_user(user))
            with self._guard:
                self.order.append(tag)
                self.codes.append(status)

        thread = threading.Thread(target=call)
        thread.start()
        self._threads.append(thread)

    def wait(self) -> None:
        for thread in self._threads:
            thread.join(20)


@pytest.fixture
def one_slot() -> Iterator[Running]:
    with run_front(admission=Limits(slots=1)) as running:
        yield running


def test_past_the_slots_a_request_waits_and_its_wait_is_counted(one_slot: Running) -> None:
    done = Finished(one_slot)
    done.send("first", slow(), "alice")
    assert eventually(lambda: one_slot.front.counters.streams_in_flight.get("tiny") == 1)
    done.send("second", slow(), "bob")
    assert eventually(lambda: metric(one_slot, "tarn_openai_queued_requests", user="bob") == 1)
    assert one_slot.front.counters.streams_in_flight["tiny"] == 1  # Triton has one generation only
    done.wait()
    assert (done.order, done.codes) == (["first", "second"], [200, 200])
    assert metric(one_slot, "tarn_openai_queued_requests") == 0
    assert metric(one_slot, "tarn_openai_queue_wait_seconds_count", model="tiny") == 2
    waited = metric(one_slot, "tarn_openai_queue_wait_seconds_sum", user="bob")
    assert waited > 0.3  # about the first one's 0.6 s


def test_a_quiet_user_goes_before_a_flooders_queue() -> None:
    """Two slots, a flooder with six requests, then a quiet user: its request starts at the first
    slot that frees, before the flooder's four waiting ones (first come, first served: after)."""
    places: tuple[tuple[Policy, int], ...] = (("fair", 2), ("fifo", 6))
    for policy, quiet_place in places:
        with run_front(admission=Limits(slots=2, policy=policy)) as running:
            done = Finished(running)
            for n in range(6):
                done.send(f"flood{n}", slow(), "flood")
            assert eventually(functools.partial(queued, running, 4))
            done.send("quiet", slow(max_tokens=1), "quiet")
            done.wait()
            assert done.order.index("quiet") == quiet_place, (policy, done.order)
            assert set(done.codes) == {200}


def test_the_slots_come_from_the_models_config() -> None:
    with run_front() as running:
        running.standin.slots["tiny"] = 1
        done = Finished(running)
        done.send("first", slow(), "alice")
        done.send("second", slow(), "alice")
        assert eventually(lambda: metric(running, "tarn_openai_queued_requests", user="alice") == 1)
        done.wait()
        assert done.codes == [200, 200]


def test_without_declared_slots_nothing_queues() -> None:
    with run_front() as running:
        done = Finished(running)
        for n in range(3):
            done.send(f"r{n}", slow(), "alice")
        assert eventually(lambda: running.front.counters.streams_in_flight.get("tiny") == 3)
        done.wait()
        assert metric(running, "tarn_openai_queue_wait_seconds_count") == 0


def test_a_user_past_its_queue_bound_gets_openais_429_with_retry_after() -> None:
    with run_front(admission=Limits(slots=1, max_waiting_per_tenant=1)) as running:
        done = Finished(running)
        done.send("running", slow(), "alice")
        done.send("waiting", slow(), "alice")
        assert eventually(lambda: metric(running, "tarn_openai_queued_requests", user="alice") == 1)
        status, headers, body = running.call("POST", COMPLETION, slow(), as_user("alice"))
        assert (status, headers["Retry-After"]) == (429, "1")
        assert body["error"]["type"] == "requests"
        assert body["error"]["code"] == "rate_limit_exceeded"
        assert "alice has 1 requests waiting" in body["error"]["message"]
        client = openai.OpenAI(  # the official client: OpenAI's own exception, the header kept
            base_url=f"http://127.0.0.1:{running.port}/v1",
            api_key="unused",
            max_retries=0,
            timeout=10,
            default_headers=as_user("alice"),
        )
        with pytest.raises(openai.RateLimitError) as limited:
            client.completions.create(model="tiny", prompt="x", max_tokens=1)
        assert (limited.value.code, limited.value.response.headers["retry-after"]) == (
            "rate_limit_exceeded",
            "1",
        )
        status, _headers, _body = running.call("POST", COMPLETION, slow(max_tokens=1), as_user("bob"))
        assert status == 200  # bob is not alice: he waits his turn
        done.wait()


def test_a_client_gone_while_waiting_leaves_the_queue_and_costs_nothing(one_slot: Running) -> None:
    done = Finished(one_slot)
    done.send("running", slow(), "alice")
    assert eventually(lambda: one_slot.front.counters.streams_in_flight.get("tiny") == 1)
    client = one_slot.open_stream(COMPLETION, slow())
    assert eventually(lambda: metric(one_slot, "tarn_openai_queued_requests") == 1)
    client.close()
    assert eventually(lambda: metric(one_slot, "tarn_openai_queued_requests") == 0)
    done.wait()
    asked = len(one_slot.standin.asked)
    assert asked == 1  # the gone one never reached Triton
    assert metric(one_slot, "tarn_openai_queue_wait_seconds_count", user="anonymous") == 0


def test_a_stream_waiting_for_a_slot_opens_and_beats(one_slot: Running) -> None:
    one_slot.front.heartbeat_s = 0.1
    done = Finished(one_slot)
    done.send("running", slow(max_tokens=4, delay=0.2), "alice")
    assert eventually(lambda: one_slot.front.counters.streams_in_flight.get("tiny") == 1)
    lines = one_slot.stream_lines(COMPLETION, slow(max_tokens=2, delay=0, stream=True), as_user("bob"))
    kinds = [line for _at, line in lines]
    first = next(i for i, line in enumerate(kinds) if '"text":" t1"' in line)
    assert kinds[:first].count(": keep-alive") >= 3  # the wait of about 0.8 s, beaten
    assert kinds[-1] == "data: [DONE]"
    done.wait()


# ---- the tenancy file
def test_the_tenancy_file_gives_bands_and_weights(tmp_path: Any) -> None:
    path = tmp_path / "tenancy.json"
    groups = {"interactive": {"members": ["alice"], "band": 1, "weight": 2}, "heavy": {"members": ["alice"]}}
    path.write_text(json.dumps({"groups": groups}))
    tenancy = TenancyFile(str(path))
    alice = tenancy.current().tenant("alice")
    assert (alice.band, alice.weight) == (1, 2.0)
    assert (tenancy.current().tenant("bob").band, tenancy.current().tenant("bob").weight) == (0, 1.0)
    time.sleep(0.01)
    path.write_text(json.dumps({"groups": {"interactive": {"members": ["bob"], "band": 2}}}))
    assert tenancy.current().tenant("bob").band == 2  # read again: no restart
    path.write_text("{not json")
    assert tenancy.current().tenant("bob").band == 2  # a broken file keeps the last good one


@pytest.mark.parametrize(
    ("document", "names"),
    [
        ([], "groups"),
        ({"groups": [], "x": 1}, "groups"),
        ({"groups": {"g": {"members": "alice"}}}, "groups.g.members"),
        ({"groups": {"g": {"band": 10}}}, "groups.g.band"),
        ({"groups": {"g": {"band": True}}}, "groups.g.band"),
        ({"groups": {"g": {"weight": 0}}}, "groups.g.weight"),
        ({"groups": {"g": {"weight": "2"}}}, "groups.g.weight"),
        ({"groups": {"g": {"owner": "x"}}}, "groups.g"),
    ],
)
def test_a_bad_tenancy_file_names_the_field(document: Any, names: str) -> None:
    with pytest.raises(ValueError, match=names.replace(".", r"\.")):
        parse(document)


def test_no_tenancy_file_makes_everyone_equal() -> None:
    assert TenancyFile(None).current() == Tenancy()


def test_a_request_cancelled_as_its_slot_comes_gives_the_slot_back() -> None:
    """The slot is given (its future set) and the client goes in the same turn of the loop: the
    cancel wins, and the slot must not stay taken by a request that never runs."""
    front = Front(Triton(), admission=Limits(slots=1))

    async def race() -> tuple[int, int]:
        front.counters.has_model("tiny")
        admission = await front._admission("tiny")
        assert admission is not None
        holder = admission.arrive(Tenant("alice"))
        generation = mapping.completion_generation({"model": "tiny", "prompt": "x"})
        identity = Identity("cmpl-1", 0)

        async def waiter() -> None:
            async with front._slot(generation, identity, "bob", Reply(None)):  # type: ignore[arg-type]
                pytest.fail("a cancelled request ran")

        task = asyncio.ensure_future(waiter())
        await asyncio.sleep(0)  # bob waits
        admission.leave(holder)  # bob's slot: his future is set...
        task.cancel()  # ...and he goes before he wakes
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return admission.running, admission.waiting

    assert asyncio.run(race()) == (0, 0)
