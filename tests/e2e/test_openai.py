"""The OpenAI API through HAProxy on the lab (issue 35), driven by the official ``openai`` client.

A TARN service of examples/llm_repository (tiny_lm generates token by token on the CPU) whose
instances run the OpenAI front beside Triton (``--openai-port``); HAProxy's /v1/ backend and Knox's
TRITON-OPENAI follow the fronts' ports in ZooKeeper. The service starts at zero instances. Shown
here: 20 concurrent streams at zero through HAProxy and 20 through Knox (the lab's tarn-demo
topology, as alice), held by the activator, all answered whole, and a 120 s stream held there too
that arrives whole; chat and completions, streamed and not, the same text both ways, the
controller's token counters equal to the client's usage, and the dashboard showing them (headless
Chromium); a client that goes away, through either entry, stops its generation within 1 s (tiny_lm's
own metrics), and one that goes away during a long silence before the first token is seen by the
front within two of its heartbeats; and, on two instances, a 120 s stream that arrives whole while
the other instance's Triton is killed under a stream and a load of new requests (that stream ends
with an error event, new requests fail none), beside 120 s streams through each entry on the
survivor and streams silent for 100 s before their first token. The second instance is the
autoscaler's (``--scale-on streams``), and a new stream through either entry goes to it, the
instance with fewer streams. Last, admission (issue 49): beside tiny_lm the repository holds a copy
with 2 generation slots in its config (``max_concurrent_generations``, which the fronts read: the
service runs with ``--openai-max-generations``' default), and while alice floods it through Knox
bob, through Knox too, waits for no slot: the fronts keep his share free.
"""

from __future__ import annotations

import html
import json
import math
import os
import re
import socket
import ssl
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
import requests
from kazoo.client import KazooClient
from prometheus_client.parser import text_string_to_metric_families

from lab import lab_client
from tarn.cli import instances_of
from tarn.clients.resourcemanager import ResourceManager
from tarn.service.wait import ready
from tarn.stdlib.openai.server import HEARTBEAT_S
from tarn.stdlib.webhdfs import WebHdfsClient
from tests.support import ROOT
from tests.support.chromium import ARTIFACTS, browse
from tests.support.lab import LAB_USER, podman_exec, wait_for
from tests.support.lab_edge import CERT, FRONTEND, PASSWORDS, ZK_PATH, Registered, backend_ready
from tests.support.lab_service import CLUSTER, Service, tarn

SERVICE = "tarn-e2e-llm"
# The lab's Knox topology tarn-demo reads /services/triton as HAProxy does and asks /authorize on
# port 8888 with the lab's token: this service answers there (tarn-demo itself is gone in CI).
BASE_PORT, STRIDE, AM_PORT = 8600, 10, 8888
LAB_TOKEN = Path(os.environ.get("TARN_BUILD", ROOT / "build")) / "lab-secrets" / "tarn-api-token"
KNOX = "127.0.0.1:18443/gateway/tarn-demo/triton"
OPENAI_PORT = BASE_PORT + 3
MODELS_ON_HDFS = f"/user/{LAB_USER}/e2e-llm-models"
MODEL = "tiny_lm"
PROMPT = "Tell me how a cluster serves models"
LONG_TOKENS, LONG_DELAY_S = 600, 0.2  # a stream of 120 s
IDLE_S = 600  # the service starts at zero; it never idles this long once woken
BURST, BURST_TOKENS = 20, 30  # streams from zero through each entry, and the tokens of each
HAPROXY_USER = "anonymous"  # the fronts' name for a request without X-TARN-User (HAProxy drops it)
# The autoscaler watches the fronts' streams in flight: above 2.5 per instance it adds one, and the
# signal never removes one (--scale-down-at 0). The cooldown, counted from the wake, outlasts the
# burst from zero (41 streams on the first instance for a few seconds); after it, only the last test
# puts more than 2 streams on one instance (5).
STREAMS_UP_AT, COOLDOWN_MS = 2.5, 20000
SILENCE_S, SILENT_TOKENS = 100.0, 3  # a long prefill or a model's thinking: no byte for 100 s
QUIT_SILENCE_S = 30.0  # a prefill its client leaves: over two heartbeats, over soon after
SLOTTED, SLOTS = "tiny_lm_2_slots", 2  # tiny_lm whose config declares 2 generation slots (issue 49)
FLOOD, FLOOD_TOKENS, FLOOD_DELAY_S = 8, 40, 0.05  # alice's streams at once, of 2 s each
QUIET_REQUESTS, QUIET_TOKENS = 10, 4  # bob's, one at a time


def slotted_model(scratch: Path) -> Path:
    """examples/llm_repository's tiny_lm under another name, with SLOTS generation slots declared."""
    source = ROOT / "examples" / "llm_repository" / MODEL
    staged = scratch / SLOTTED
    for path in sorted(source.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            target = staged / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    config = staged / "config.pbtxt"
    text = config.read_text().replace(f'name: "{MODEL}"', f'name: "{SLOTTED}"')
    text, count = re.subn(
        r'(key: "max_concurrent_generations"\s*value: \{ string_value: )"\d+"', rf'\1"{SLOTS}"', text
    )
    assert count == 1, "tiny_lm's config has no max_concurrent_generations to set"
    config.write_text(text)
    return staged


def api(timeout: float = 60) -> openai.OpenAI:
    """The official client on HAProxy's /v1; no retries: a failure counts as one."""
    return openai.OpenAI(
        base_url=f"http://{FRONTEND}/v1", api_key="not-checked-by-haproxy", max_retries=0, timeout=timeout
    )


def knox_api(timeout: float = 60, user: str = "alice") -> openai.OpenAI:
    """The official client on Knox's /v1 as ``user`` (LDAP, Basic), no retries."""
    trusted = ssl.create_default_context(cafile=str(CERT))
    transport = httpx2.Client(auth=(user, PASSWORDS[user]), verify=trusted, timeout=timeout)
    return openai.OpenAI(
        base_url=f"https://{KNOX}/v1", api_key="unused", max_retries=0, http_client=transport
    )


def parameters(delay_s: float, silence_s: float = 0.0) -> dict[str, Any]:
    """TARN's extension: tiny_lm's pause after each token, and its silence before the first."""
    return {"parameters": {"token_delay_s": delay_s, "first_token_delay_s": silence_s}}


@dataclass
class Llm:
    service: Service
    registered: Registered  # the znodes under the path HAProxy's sync and Knox watch
    submitted_at: float  # wall clock
    held_long: Stream | None = None  # the 120 s stream the activator held at zero (first test)

    def records(self) -> list[dict[str, Any]]:
        return self.registered.records()

    def fronts(self) -> set[str]:
        return self.registered.endpoints("openai_port")


def converged(llm: Llm, count: int, timeout: float) -> list[dict[str, Any]]:
    """``count`` instances in ZooKeeper, each with a front, and HAProxy's /v1 backend equal to them."""

    def probe() -> list[dict[str, Any]] | None:
        fronts = llm.fronts()
        ok = len(fronts) == count and backend_ready("openai_backend") == fronts
        return llm.records() if ok else None

    return wait_for(probe, timeout, f"{count} fronts in ZooKeeper and in HAProxy's /v1 backend", every=0.5)


def model_metric(record: dict[str, Any], name: str, **labels: str) -> float:
    """One of tiny_lm's own metrics, as its Triton reports it (0 before it is first set)."""
    return scraped(record, "metrics_port", name, labels)


def front_metric(record: dict[str, Any], name: str, **labels: str) -> float:
    """One of the instance's OpenAI front's metrics (0 before it is first set)."""
    return scraped(record, "openai_port", name, labels)


def scraped(record: dict[str, Any], port: str, name: str, labels: dict[str, str]) -> float:
    """``name`` summed over its samples with ``labels``, from the instance's ``port``'s /metrics."""
    token = {"X-TARN-Token": LAB_TOKEN.read_text().strip()}  # the fronts' /metrics need it; Triton ignores it
    text = requests.get(f"http://{record['ip']}:{record[port]}/metrics", headers=token, timeout=5).text
    wanted = [f'{key}="{value}"' for key, value in labels.items()]
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") and all(w in line for w in wanted):
            total += float(line.rsplit(" ", 1)[1])
    return total


@pytest.fixture(scope="module")
def llm(rm: ResourceManager, hdfs: WebHdfsClient, zk_hosts: str) -> Iterator[Llm]:
    token = LAB_TOKEN.read_text().strip()
    tarn("destroy", "--service-name", SERVICE, "--user", LAB_USER, *CLUSTER, timeout=600)
    hdfs.upload_tree(ROOT / "examples" / "llm_repository", MODELS_ON_HDFS)
    with tempfile.TemporaryDirectory() as scratch:
        hdfs.upload_tree(slotted_model(Path(scratch)), f"{MODELS_ON_HDFS}/{SLOTTED}")
    submitted_at = time.time()
    submitted = tarn(
        "submit", "--service-name", SERVICE, "--user", LAB_USER, *lab_client.runtime_args(),
        "--model-repository", f"hdfs://{MODELS_ON_HDFS}",
        "--port", str(BASE_PORT), "--grpc-port", str(BASE_PORT + 1), "--metrics-port", str(BASE_PORT + 2),
        "--openai-port", str(OPENAI_PORT),
        "--port-stride", str(STRIDE), "--no-anti-affinity", "--am-port", str(AM_PORT),
        "--min-instances", "0", "--max-instances", "2", "--scale-to-zero-after", str(IDLE_S),
        "--scale-on", "streams", "--scale-up-at", str(STREAMS_UP_AT), "--scale-down-at", "0",
        "--cooldown", str(COOLDOWN_MS), "--tick-seconds", "1",
        "--gpus-per-instance", "0", "--memory-mb", "1024", "--vcores", "1", "--controller-memory-mb", "512",
        "--zk-ensemble", zk_hosts, "--zk-path", ZK_PATH, *CLUSTER,
        token=token, timeout=600,
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    zk = KazooClient(hosts=zk_hosts)
    zk.start(timeout=15)
    try:
        found = Llm(Service(rm, token, SERVICE), Registered(zk, SERVICE), submitted_at)
        wait_for(lambda: at_zero(rm), 300, "the service READY at zero instances")
        yield found
    finally:
        zk.stop()
        zk.close()
        done = tarn("destroy", "--service-name", SERVICE, "--user", LAB_USER, *CLUSTER, timeout=600)
        assert done.returncode == 0, done.stderr
        hdfs.delete(MODELS_ON_HDFS, recursive=True)


def at_zero(rm: ResourceManager) -> bool:
    """The controller READY and no Triton container: a service at zero as clients meet it."""
    service = rm.service(SERVICE)
    return service is not None and ready(0)(service) and not instances_of(service)


def first_token(through_knox: bool) -> tuple[float, str, int]:
    """One streamed chat completion through Knox or HAProxy: seconds to its first token, its text,
    its tokens."""
    began = time.monotonic()
    first, text, tokens = 0.0, "", 0
    client = knox_api(timeout=300) if through_knox else api(timeout=300)
    for chunk in client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": PROMPT}], max_tokens=BURST_TOKENS,
        temperature=0, stream=True, extra_body=parameters(0.05),
    ):  # fmt: skip
        if chunk.choices and chunk.choices[0].delta.content:
            first = first or time.monotonic() - began
            text += chunk.choices[0].delta.content
            tokens += 1
    return first, text, tokens


def test_from_zero_20_concurrent_streams_through_each_entry_are_all_answered(llm: Llm) -> None:
    """At zero, the activator holds the streams (HAProxy's backup server, the URL of Knox's
    TRITON-OPENAI while no front is listed), its demand wakes the controller, and each stream is
    relayed from the first instance's front, whole. A 120 s stream through Knox is held with them;
    the last test checks it (it still runs meanwhile, under alice's name)."""
    assert not llm.records(), "the service is not at zero"
    llm.held_long = Stream(LONG_DELAY_S, LONG_TOKENS, through_knox=True).start()
    entries = [False] * BURST + [True] * BURST  # HAProxy's, then Knox's
    with ThreadPoolExecutor(len(entries)) as pool:
        answers = list(pool.map(first_token, entries))
    assert {(text, tokens) for _first, text, tokens in answers} == {(answers[0][1], BURST_TOKENS)}
    for entry, some in (("HAProxy", answers[:BURST]), ("Knox", answers[BURST:])):
        waits = sorted(first for first, _text, _tokens in some)
        print(
            f"\nopenai: from zero through {entry}, {BURST} concurrent streams all whole; first token"
            f" after {waits[0]:.2f} s (fastest), {statistics.median(waits):.2f} s (median),"
            f" {waits[-1]:.2f} s (slowest)"
        )


def token_totals(service: Service) -> tuple[float, float]:
    """The controller's prompt and completion tokens of tiny_lm through HAProxy (alice's stream,
    through Knox, may still run)."""
    return (
        service.metric("tarn_openai_prompt_tokens_total", absent=0.0, user=HAPROXY_USER, model=MODEL),
        service.metric("tarn_openai_completion_tokens_total", absent=0.0, user=HAPROXY_USER, model=MODEL),
    )


def settled_totals(service: Service) -> tuple[float, float]:
    """The controller's token totals once they hold the burst's completion tokens through HAProxy
    and two reads 2 s apart (two ticks) agree."""

    def settled() -> tuple[float, float] | None:
        first = token_totals(service)
        time.sleep(2)
        return first if first[1] >= BURST * BURST_TOKENS and token_totals(service) == first else None

    return wait_for(settled, 30, "the controller's token totals to settle")


def test_chat_and_completions_streamed_and_not_and_the_counters_match(llm: Llm) -> None:
    client = api()
    assert sorted(m.id for m in client.models.list()) == sorted([MODEL, SLOTTED])
    messages: list[Any] = [{"role": "user", "content": PROMPT}]
    prompt_tokens, completion_tokens = settled_totals(llm.service)  # the burst's, summed

    chat = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=12, temperature=0)
    assert chat.usage is not None
    assert (chat.usage.completion_tokens, chat.choices[0].finish_reason) == (12, "length")
    chunks = list(
        client.chat.completions.create(
            model=MODEL, messages=messages, max_tokens=12, temperature=0, stream=True,
            stream_options={"include_usage": True},
        )
    )  # fmt: skip
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == chat.choices[0].message.content
    assert chunks[-1].usage == chat.usage
    prompt_tokens += 2 * chat.usage.prompt_tokens
    completion_tokens += 2 * chat.usage.completion_tokens

    text = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=9, temperature=0)
    assert text.usage is not None
    assert text.usage.completion_tokens == 9
    pieces = list(
        client.completions.create(
            model=MODEL, prompt=PROMPT, max_tokens=9, temperature=0, stream=True,
            stream_options={"include_usage": True},
        )
    )  # fmt: skip
    assert "".join(p.choices[0].text for p in pieces if p.choices) == text.choices[0].text
    assert pieces[-1].usage == text.usage
    prompt_tokens += 2 * text.usage.prompt_tokens
    completion_tokens += 2 * text.usage.completion_tokens

    # The controller sums the fronts' counters a tick or two later; they must come to the client's.
    counted = (prompt_tokens, completion_tokens)  # since the start: the burst's and these

    def totals() -> tuple[float, float] | None:
        now = token_totals(llm.service)
        return now if now == counted else None

    wait_for(totals, 20, f"the controller's token counters at the client's {counted}")
    shown = dashboard_tokens(llm.service, HAPROXY_USER)
    print(
        f"\nopenai: tokens the client counted (prompt, completion) {counted}; the controller the same;"
        f" the dashboard {shown}"
    )
    assert shown == counted


FORGED = "mallory-forged"  # an X-TARN-User a client sends; neither entry may let it be counted
HOSTILE_NAMES = ("x" * 200, "no_such_model", "forged log line", FORGED)  # never a label value


def hostile_json() -> list[tuple[str, bytes]]:
    """Bodies a hostile client posts to /v1/completions (issue 48's rows), each the client's mistake."""
    return [
        ("a lone surrogate in the model's name (row 1)", b'{"model": "x\\ud800", "prompt": "x"}'),
        (
            "a 10,000-character model name (row 2)",
            json.dumps({"model": "x" * 10_000, "prompt": "x"}).encode(),
        ),
        (
            "a model Triton never served (row 2)",
            json.dumps({"model": "no_such_model", "prompt": "x"}).encode(),
        ),
        (
            "a 200,000-character stop string (row 9)",
            json.dumps({"model": MODEL, "prompt": "x", "stop": "x" * 200_000}).encode(),
        ),
        ("100,000 [ (row 10)", b"[" * 100_000),
        (
            "a newline in the model's name (row 13)",
            json.dumps({"model": "tiny_lm\nforged log line", "prompt": "x"}).encode(),
        ),
        ("a 5 MB body (row 14)", json.dumps({"model": MODEL, "prompt": "x" * 5_000_000}).encode()),
        ("not JSON", b"{'model': "),
    ]


def raw_to_haproxy(data: bytes) -> bytes:
    """What HAProxy's frontend answers to ``data`` sent as is (its status line and what follows)."""
    host, port = FRONTEND.split(":")
    with socket.create_connection((host, int(port)), timeout=30) as client:
        client.sendall(data)
        received = b""
        while piece := client.recv(65536):
            received += piece
        return received


def test_hostile_requests_through_each_entry_get_a_4xx_and_leave_every_metrics_page_whole(llm: Llm) -> None:
    """Issue 48, item 6 on the lab: a dozen hostile requests through HAProxy and Knox, each a 4xx;
    the fronts' and the controller's /metrics then parse, with no label from client input; a
    forged X-TARN-User is counted as the entry's user, not the client's; one normal stream after."""
    [record] = llm.records()
    trusted = ssl.create_default_context(cafile=str(CERT))  # as knox_api's (requests refuses the lab's cert)
    knox = httpx2.Client(auth=("alice", PASSWORDS["alice"]), verify=trusted, timeout=60)
    statuses: dict[str, tuple[int, int]] = {}
    for what, body in hostile_json():
        headers = {"Content-Type": "application/json"}
        through_haproxy = requests.post(
            f"http://{FRONTEND}/v1/completions", data=body, headers=headers, timeout=60
        )
        through_knox = knox.post(f"https://{KNOX}/v1/completions", content=body, headers=headers)
        statuses[what] = (through_haproxy.status_code, through_knox.status_code)
    for entry, path, method in (
        ("an unknown path", "/v1/nope", "POST"),
        ("GET on completions", "/v1/completions", "GET"),
    ):
        statuses[entry] = (
            requests.request(method, f"http://{FRONTEND}{path}", data=b"{}", timeout=30).status_code,
            knox.request(method, f"https://{KNOX}{path}", content=b"{}").status_code,
        )
    odd = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: \u00b2\r\nConnection: close\r\n\r\n"
    # Knox's own client never sends such a length: HAProxy's answer only, twice
    haproxy_says = int(raw_to_haproxy(odd.encode()).split(b" ")[1])
    statuses["Content-Length: \u00b2 (row 10)"] = (haproxy_says, haproxy_says)
    print(
        "\nhostile requests (HAProxy, Knox): " + "; ".join(f"{w}: {h}, {k}" for w, (h, k) in statuses.items())
    )
    assert all(400 <= code < 500 for pair in statuses.values() for code in pair), statuses

    # A forged user through each entry, with a request that succeeds: counted as the entry's user.
    small = {"model": MODEL, "prompt": PROMPT, "max_tokens": 2}
    forged = {"X-TARN-User": FORGED}
    assert requests.post(f"http://{FRONTEND}/v1/completions", json=small, headers=forged, timeout=60).ok
    assert knox.post(f"https://{KNOX}/v1/completions", json=small, headers=forged).is_success
    front_url = f"http://{record['ip']}:{record['openai_port']}"
    direct = {**forged, "X-TARN-User-Proof": "v1:1:0"}  # a client that reaches the front's port (row 3)
    assert requests.post(f"{front_url}/v1/completions", json=small, headers=direct, timeout=60).ok
    assert requests.get(f"{front_url}/metrics", timeout=10).status_code == 401  # every user's usage
    # The controller API, without its token, on 300 paths of the client's choosing.
    api_url = llm.service.url  # once: each look-up is a call to the RM
    for n in range(300):
        assert requests.get(f"{api_url}/hostile-{n}", timeout=10).status_code in (401, 403, 404)
    controller = llm.service.get("/metrics")
    front = requests.get(f"{front_url}/metrics", headers={"X-TARN-Token": llm.service.token}, timeout=10)
    for page in (controller, front):
        assert page.status_code == 200
        values = {
            v for f in text_string_to_metric_families(page.text) for s in f.samples for v in s.labels.values()
        }
        assert not any(name in value for value in values for name in HOSTILE_NAMES), sorted(values)[:20]
        assert not any(value.startswith("/hostile-") for value in values)
    samples = [s for f in text_string_to_metric_families(front.text) for s in f.samples]
    users = {s.labels["user"] for s in samples if "user" in s.labels}
    assert users <= {HAPROXY_USER, "alice"}, users
    assert "alice" in users  # Knox's request counted as its authenticated user

    stream = api().completions.create(model=MODEL, prompt=PROMPT, max_tokens=5, stream=True)
    assert "".join(c.choices[0].text for c in stream if c.choices)


def dashboard_tokens(service: Service, user: str) -> tuple[float, float]:
    """The prompt and completion tokens of ``user`` and tiny_lm in the dashboard's LLM table, as
    headless Chromium renders the page."""
    url = f"{service.url}/dashboard?token={service.token}"
    dom = browse("--dump-dom", url)
    browse(f"--screenshot={ARTIFACTS / 'dashboard-llm-lab.png'}", "--window-size=1400,1400", url)
    assert service.token not in dom.replace(html.escape(url), "").replace(url, "")
    row = re.findall(rf"<tr><td>{user}</td><td>{MODEL}</td><td>(\d+)</td><td>(\d+)</td>", dom)
    assert len(row) == 1, f"no single row for {user} and {MODEL} in the dashboard's LLM table"
    return float(row[0][0]), float(row[0][1])


@pytest.mark.parametrize("through_knox", [False, True], ids=["haproxy", "knox"])
def test_a_client_that_goes_away_stops_its_generation_within_1_s(llm: Llm, through_knox: bool) -> None:
    [record] = llm.records()
    cancelled = model_metric(record, "tiny_lm_requests_total", outcome="cancelled")
    streams = model_metric(record, "tiny_lm_streams_active")  # the held 120 s stream's
    client = knox_api() if through_knox else api()
    stream = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": PROMPT}], max_tokens=2000, stream=True,
        extra_body=parameters(0.1),
    )  # fmt: skip
    tokens = 0
    for chunk in stream:
        tokens += bool(chunk.choices and chunk.choices[0].delta.content)
        if tokens == 5:
            break
    assert model_metric(record, "tiny_lm_streams_active") == streams + 1
    gone = time.monotonic()
    stream.close()

    def stopped() -> float | None:
        done = model_metric(record, "tiny_lm_requests_total", outcome="cancelled") == cancelled + 1
        alone = model_metric(record, "tiny_lm_streams_active") == streams
        return time.monotonic() if done and alone else None

    stop_s = wait_for(stopped, 10, "tiny_lm to count the generation cancelled", every=0.02) - gone
    generated = model_metric(record, "tiny_lm_tokens_total")
    time.sleep(1.0)
    # Only the held stream still generates, a token each LONG_DELAY_S; the cancelled one would add
    # a token each 0.1 s.
    after = model_metric(record, "tiny_lm_tokens_total") - generated
    assert after <= 1.0 / LONG_DELAY_S + 1, f"{after:.0f} tokens in the second after the cancel"
    entry = "Knox" if through_knox else "HAProxy"
    print(f"\nopenai: a client gone after 5 tokens through {entry}; tiny_lm stopped {stop_s:.3f} s later")
    assert stop_s <= 1.0


@pytest.mark.parametrize("through_knox", [False, True], ids=["haproxy", "knox"])
def test_a_client_that_goes_away_in_a_long_silence_is_seen_within_two_heartbeats(
    llm: Llm, through_knox: bool
) -> None:
    """Before its first token a stream carries only what the front sends: it opens the answer
    itself after HEARTBEAT_S (Triton sends a stream's head with its first event), then an SSE
    comment each HEARTBEAT_S. An entry notices a client gone only when it writes to it, so a client
    that leaves during a long prefill is seen at a heartbeat: the front then closes its Triton
    request (its own counter). Triton 2.51 tells the model only when it next writes to that
    request, so tiny_lm, silent, learns it at what would have been its first token."""
    [record] = llm.records()
    cancelled = front_metric(record, "tarn_openai_requests_total", model=MODEL, outcome="cancelled")
    client = knox_api() if through_knox else api()
    opened = time.monotonic()
    stream = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": PROMPT}], max_tokens=3, stream=True,
        extra_body=parameters(0.0, QUIT_SILENCE_S),
    )  # fmt: skip  # returns at the answer's head
    head_s = time.monotonic() - opened
    gone = time.monotonic()
    stream.close()

    def seen() -> float | None:
        now = front_metric(record, "tarn_openai_requests_total", model=MODEL, outcome="cancelled")
        return time.monotonic() if now == cancelled + 1 else None

    seen_s = wait_for(seen, 3 * HEARTBEAT_S, "the front to count it cancelled", every=0.1) - gone
    entry = "Knox" if through_knox else "HAProxy"
    print(
        f"\nopenai: a silent stream's head after {head_s:.2f} s (the front's); its client gone through"
        f" {entry}, the front cancelled it {seen_s:.2f} s later"
    )
    assert HEARTBEAT_S <= head_s <= HEARTBEAT_S + 2
    assert seen_s <= 2 * HEARTBEAT_S + 1  # the entry's write of the second heartbeat finds it gone


@dataclass
class Stream:
    """A streamed chat completion read in a thread: its text, event times, and how it ended."""

    delay_s: float
    max_tokens: int
    through_knox: bool = False  # else HAProxy
    silence_s: float = 0.0  # before the first token
    text: str = ""
    times: list[float] = field(default_factory=list)
    error: BaseException | None = None
    thread: threading.Thread | None = None
    began: float = 0.0

    def start(self) -> Stream:
        self.began = time.monotonic()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        return self

    def _read(self) -> None:
        try:
            client = knox_api(timeout=600) if self.through_knox else api(timeout=600)
            for chunk in client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": PROMPT}], max_tokens=self.max_tokens,
                temperature=0, stream=True, extra_body=parameters(self.delay_s, self.silence_s),
            ):  # fmt: skip
                if chunk.choices and chunk.choices[0].delta.content:
                    self.text += chunk.choices[0].delta.content
                    self.times.append(time.monotonic())
        except Exception as exc:  # what the client saw is the finding
            self.error = exc

    @property
    def span(self) -> float:
        """Seconds from its first token to its last."""
        return self.times[-1] - self.times[0] if self.times else 0.0

    @property
    def first_token_s(self) -> float:
        """Seconds from its start to its first token."""
        return self.times[0] - self.began if self.times else math.inf

    def join(self, timeout: float) -> None:
        assert self.thread is not None
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the stream did not end"


@dataclass
class ShortLoad:
    """Non-streamed chat completions in a loop through HAProxy, every outcome counted."""

    ok: int = 0
    failed: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    since: float = field(default_factory=time.monotonic)  # failures are timed from here (the fault)

    def run(self) -> None:
        client = api(timeout=30)
        while not self.stop.is_set():
            try:
                client.chat.completions.create(
                    model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=4,
                    extra_body=parameters(0.0),
                )  # fmt: skip
                self.ok += 1
            except openai.OpenAIError as exc:
                self.failed.append(f"{repr(exc)[:160]} at {time.monotonic() - self.since:+.2f} s")


def scaling_events(llm: Llm) -> list[dict[str, Any]]:
    """The controller's scaling history (the dashboard's): direction, targets and reason of each.
    All of this service's: the memory an earlier service of the same name left in ZooKeeper is
    another application's, which the controller ignores."""
    answer = llm.service.get("/dashboard/data")
    assert answer.status_code == 200, answer.text
    events = list(answer.json()["events"])
    assert all(e["at"] >= llm.submitted_at for e in events), f"an earlier service's history: {events}"
    return events


def carrying(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The instances whose tiny_lm generates now."""
    return [r for r in records if model_metric(r, "tiny_lm_streams_active") > 0]


def test_120_s_streams_arrive_whole_while_the_other_instance_is_killed_under_a_stream(llm: Llm) -> None:
    # The three 120 s streams (held at zero through Knox and the activator; through HAProxy; straight
    # through Knox) and two silent for 100 s before their first token (through each entry) all run
    # on the first instance, the only one when the last four start; the second instance then takes a
    # stream through each entry and is killed under them. They overlap: CI waits 120 s once.
    held = llm.held_long
    assert held is not None, "the first test starts it"
    [survivor] = converged(llm, 1, 60)
    unstreamed = api().chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": PROMPT}], max_tokens=LONG_TOKENS,
        temperature=0, extra_body=parameters(0.0),
    )  # fmt: skip
    expected = unstreamed.choices[0].message.content
    long = Stream(LONG_DELAY_S, LONG_TOKENS).start()
    knox_long = Stream(LONG_DELAY_S, LONG_TOKENS, through_knox=True).start()
    silent = [
        Stream(0.0, SILENT_TOKENS, through_knox=knox, silence_s=SILENCE_S).start() for knox in (False, True)
    ]
    wait_for(
        lambda: model_metric(survivor, "tiny_lm_streams_active") >= 5 or None, 10, "5 streams on the instance"
    )  # fmt: skip
    crowded = time.monotonic()
    records = converged(llm, 2, 300)  # the autoscaler's doing: 5 streams on one instance
    grown = time.monotonic() - crowded
    [scaled_up] = [e for e in scaling_events(llm) if (e["target_from"], e["target_to"]) == (1, 2)]
    assert scaled_up["reason"].startswith("streams 5.00 > 2.5: 1 -> 2"), scaled_up
    # Each entry sends a new stream to the instance with fewer: HAProxy's leastconn, and Knox's own
    # count of its streams in flight (the held, the long and the silent one on the first instance).
    doomed = Stream(0.1, 2000).start()
    [victim] = wait_for(
        lambda: [r for r in carrying(records) if r["container_id"] != survivor["container_id"]] or None,
        10, "a stream on the second instance",
    )  # fmt: skip
    knox_doomed = Stream(0.1, 2000, through_knox=True).start()
    wait_for(
        lambda: model_metric(victim, "tiny_lm_streams_active") >= 2 or None, 10,
        "Knox's stream on the second instance too",
    )  # fmt: skip
    load = ShortLoad()
    workers = [threading.Thread(target=load.run, daemon=True) for _worker in range(2)]
    for worker in workers:
        worker.start()
    time.sleep(5)
    load.since = time.monotonic()
    killed = podman_exec(
        victim["ip"], "pkill", "-KILL", "-f", f"tritonserver.*--http-port={victim['http_port']}"
    )
    assert killed.returncode == 0, killed.stderr
    doomed.join(60)
    knox_doomed.join(60)
    # The short requests go on until YARN's replacement serves beside the survivor (the killed
    # instance deregistered first: a replacement may come back on its host and port).
    wait_for(
        lambda: victim["container_id"] not in {r["container_id"] for r in llm.records()},
        60, "the killed instance's znode to go",
    )  # fmt: skip
    converged(llm, 2, 300)
    time.sleep(5)
    load.stop.set()
    for worker in workers:
        worker.join(60)
    for stream in (held, long, knox_long, *silent):
        stream.join(LONG_TOKENS * LONG_DELAY_S + 120)

    span, knox_span, held_span = long.span, knox_long.span, held.span
    quiet_lines = "".join(
        f"\nsilent through {'Knox' if q.through_knox else 'HAProxy'}: the first of {len(q.times)} events"
        f" after {q.first_token_s:.1f} s, ended by {q.error!r};"
        for q in silent
    )
    print(
        f"\nopenai: held at zero, through Knox and the activator: {len(held.times)} events over"
        f" {held_span:.1f} s, ended by {held.error!r};"
        f"\nthe long stream {len(long.times)} events over {span:.1f} s, ended by {long.error!r};"
        f"\nthrough Knox {len(knox_long.times)} events over {knox_span:.1f} s, ended by {knox_long.error!r};"
        f"{quiet_lines}"
        f"\nthe autoscaler's second instance served {grown:.1f} s after the fifth stream:"
        f" {scaled_up['reason']};"
        f"\nthe streams on the killed instance: through HAProxy {len(doomed.times)} events, then"
        f" {doomed.error!r}; through Knox {len(knox_doomed.times)} events, then {knox_doomed.error!r};"
        f"\nnew requests meanwhile: {load.ok} ok, {len(load.failed)} failed {load.failed[:3]}"
    )
    assert held.error is None
    assert held.text == expected, "the stream held at zero is not the text unstreamed"
    assert held_span >= (LONG_TOKENS - 1) * LONG_DELAY_S * 0.95
    assert long.error is None
    assert long.text == expected, "the long stream is not the same text as the same request unstreamed"
    assert span >= (LONG_TOKENS - 1) * LONG_DELAY_S * 0.95
    assert knox_long.error is None
    assert knox_long.text == expected, "the stream through Knox is not the text unstreamed"
    assert knox_span >= (LONG_TOKENS - 1) * LONG_DELAY_S * 0.95
    for quiet in silent:  # no entry's idle timeout cut the silence (HAProxy's default is 50 s)
        assert quiet.error is None
        assert (len(quiet.times), quiet.first_token_s >= SILENCE_S) == (SILENT_TOKENS, True)
        assert expected.startswith(quiet.text)
    for cut in (doomed, knox_doomed):
        assert isinstance(cut.error, openai.APIError), "a cut stream must end with an error event"
        assert cut.times, "the doomed stream had started"
    assert (load.ok > 0, load.failed) == (True, [])


# ---- admission (issue 49): a fair share of a model's slots
def slotted_ttft(client: openai.OpenAI, tokens: int, index: int) -> float:
    """One streamed completion of the slotted model, read whole: seconds to its first token."""
    began, first = time.monotonic(), 0.0
    for chunk in client.completions.create(
        model=SLOTTED, prompt=f"{PROMPT}, {index}", max_tokens=tokens, temperature=0, stream=True,
        extra_body=parameters(FLOOD_DELAY_S),
    ):  # fmt: skip
        if chunk.choices and chunk.choices[0].text and not first:
            first = time.monotonic() - began
    assert first, "a stream without text"
    return first


def waited(llm: Llm, user: str) -> tuple[float, float]:
    """The seconds ``user`` waited for a slot of the slotted model, and its requests, every front."""
    labels = {"user": user, "model": SLOTTED}
    records = llm.records()
    return (
        sum(front_metric(r, "tarn_openai_queue_wait_seconds_sum", **labels) for r in records),
        sum(front_metric(r, "tarn_openai_queue_wait_seconds_count", **labels) for r in records),
    )


def queued(llm: Llm, user: str) -> float:
    return sum(front_metric(r, "tarn_openai_queued_requests", user=user) for r in llm.records())


def test_a_quiet_user_waits_for_no_slot_while_another_floods_the_model(llm: Llm) -> None:
    """The slotted model (2 slots per front): bob through Knox alone, then beside alice's flood of
    8 streams at once through Knox and HAProxy's anonymous requests. The fronts admit alice only
    to the slots bob's share leaves: she waits, he does not (his mean wait for a slot under 0.3 s,
    the fronts' own histogram), and everyone's streams arrive whole."""
    bob = knox_api(timeout=300, user="bob")
    slotted_ttft(bob, 1, -1)  # wakes the service if it is at zero, loads the fronts' slot counts
    alone = [slotted_ttft(bob, QUIET_TOKENS, n) for n in range(QUIET_REQUESTS)]
    bob_before, alice_before = waited(llm, "bob"), waited(llm, "alice")
    stopping, flooded, failures = threading.Event(), [0], []

    def flood(stream: int) -> None:
        alice = knox_api(timeout=300)
        index = 0
        while not stopping.is_set():
            try:
                slotted_ttft(alice, FLOOD_TOKENS, stream * 1000 + index)
                flooded[0] += 1
            except (openai.APIError, AssertionError) as exc:
                failures.append(repr(exc))
            index += 1

    workers = [threading.Thread(target=flood, args=(n,)) for n in range(FLOOD)]
    for worker in workers:
        worker.start()
    try:
        wait_for(lambda: queued(llm, "alice") > 0, 60, "alice's streams queued at a front")
        beside = [slotted_ttft(bob, QUIET_TOKENS, 100 + n) for n in range(QUIET_REQUESTS)]
        anonymous = [slotted_ttft(api(timeout=300), QUIET_TOKENS, 200 + n) for n in range(3)]
    finally:
        stopping.set()
        for worker in workers:
            worker.join(120)
    (bob_s, bob_n), (alice_s, alice_n) = (
        tuple(after - before for after, before in zip(waited(llm, user), start, strict=True))
        for user, start in (("bob", bob_before), ("alice", alice_before))
    )
    median_alone, median_beside = statistics.median(alone), statistics.median(beside)
    print(
        f"\nadmission: bob's time to first token alone {median_alone * 1000:.0f} ms (median), beside"
        f" alice's {FLOOD} streams {median_beside * 1000:.0f} ms ({median_beside / median_alone:.2f}x);"
        f" waits for a slot: bob {bob_s:.2f} s over {bob_n:.0f} requests, alice {alice_s:.1f} s over"
        f" {alice_n:.0f} ({flooded[0]} of her streams whole, {len(failures)} failed);"
        f" HAProxy's anonymous ones {[round(t * 1000) for t in anonymous]} ms"
    )
    assert failures == []
    assert alice_s > 1.0, "alice's flood never waited: the slots were not the bound"
    assert bob_n >= QUIET_REQUESTS
    # One of alice's generations is 2 s: a bob admitted behind her queue would wait that or more.
    assert bob_s / bob_n < 0.3, f"bob waited {bob_s / bob_n:.2f} s per request for a slot behind alice"
