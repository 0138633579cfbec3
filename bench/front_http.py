"""The OpenAI front before and after its HTTP layer moved to h11 (issue 48, item 1), in one run: time
to first token, streaming rate and short requests per second, each front against the same Triton.

Two fronts, ``python -m tarn.stdlib.openai`` as the launcher runs it, each a process of its own on
127.0.0.1: the baseline is ``src/tarn`` as of ``BASELINE`` (its hand-written reading of requests
and of Triton's answers), taken out of git (``git archive``) into a temporary folder; the current
one is the working tree's ``src``, h11 underneath (tarn.stdlib.http1 reads the requests; Triton's
answers went through h11 too in 547bd8d, and back to the front's own reader once this bench showed
h11 cost about 20 us a token), with whatever else changed in the front since (its counters, the
trusted user); ``--current REVISION`` takes it from git instead (547bd8d: the HTTP layer's commit
alone). Both run beside one Triton at a time, and the rounds alternate (baseline then current, then
current then baseline, ...) so that drift on the machine hits both alike:

- the real tritonserver serving examples/llm_repository's ``tiny_lm`` with no pause between its
  tokens (found or made as bench/openai_routing.py finds it: ``--tritonserver``,
  $TARN_TRITONSERVER, else the nvidia-pytriton wheel's in ``--triton-venv``, that venv made from
  the triton_server role's pins when it has no binary). tiny_lm's own pace (numpy on the CPU,
  Triton's Python backend, on the same cores as the front) weighs more than the front's there;
- a Triton stand-in in this file: an asyncio server in a process of its own that answers
  generate_stream with the requested number of events, chunked, as Triton 2.51 sends them (one
  ``data:`` event per token with ``text_output``, ``prompt_tokens`` and ``completion_tokens``),
  as fast as it can, so that the front's own cost per event and per request shows. It also
  answers /v2/health/ready, /v2/repository/index and /v2/models/<m> as the front asks them.

Where no tritonserver can be had (no binary and no venv can be made), the run says so and measures
against the stand-in alone; ``--against stand-in`` or ``--against tritonserver`` chooses one.

Measured per front and Triton, every round: TTFT of ``--requests`` sequential streamed completions
of ``--ttft-tokens`` tokens (from sending the request to the first chunk that carries text; p50 and
p99 over all rounds), the streaming rate of ``--streams`` concurrent completions of
``--stream-tokens`` tokens (the tokens of all of them over the time from the first sent to the last
ended), and requests/s of ``--short-requests`` non-streamed completions of ``--short-tokens``
tokens from ``--clients`` clients. Printed: a table of both fronts' figures, the ratio
current/baseline, and per figure whether the current front is no slower than 1.1x the baseline
(latencies at most 1.1x, rates at least 1/1.1 of the baseline's). Beside them, unjudged, the CPU
time each front used (from /proc) per TTFT request, per streamed token and per short request: its
own cost, which a machine busy with other work does not blur as it does the wall-clock figures.

    python bench/front_http.py [--rounds 8] [--requests 25] [--streams 4] [--stream-tokens 2000]
                               [--short-requests 100] [--against both|stand-in|tritonserver]
                               [--current REVISION] [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run alone: bench.result from the root
from bench.common import percentile
from bench.openai_routing import (
    DEFAULT_VENV,
    MODEL,
    http_status,
    stage_repository,
    tritonserver,
    wait_until,
)
from bench.result import Figure, Result
from tests.support.loopback import free_port

ROOT = Path(__file__).resolve().parents[1]
# The parent of 547bd8d, the commit that put the front's HTTP/1.1 on h11 (tarn.stdlib.http1 for the
# requests, wire.Exchange for Triton's answers): the last front with the hand-written reading of both.
BASELINE = "81c43c1"
VARIANTS = ("baseline", "current")
SLOWER = 1.1  # the acceptance: the current front no slower than this many times the baseline
TRITONS = ("stand-in", "tritonserver")
PROMPT = "tell me about the river and the mill beside it"


# ---- the two fronts


def materialize(revision: str, into: Path) -> Path:
    """``src/tarn`` as of ``revision``, out of git into ``into``; returns the folder to import from."""
    into.mkdir(parents=True)
    archive = subprocess.Popen(
        ["git", "-C", str(ROOT), "archive", revision, "src/tarn"], stdout=subprocess.PIPE
    )
    extracted = subprocess.run(["tar", "-x", "-C", str(into)], stdin=archive.stdout, check=False)
    if archive.stdout is not None:
        archive.stdout.close()
    if archive.wait() != 0 or extracted.returncode != 0:
        raise SystemExit(f"git archive {revision} src/tarn failed: is {revision} in this checkout?")
    return into / "src"


# The front as the launcher starts it, importing tarn from the given folder first (checked: neither
# an installed tarn nor the working tree's may stand in for the baseline's).
FRONT = (
    "import sys; sys.path.insert(0, {src!r}); import tarn.stdlib.openai.server as s;"
    " assert s.__file__.startswith({src!r}), s.__file__;"
    " from tarn.stdlib.openai.__main__ import main; sys.exit(main(sys.argv[1:]))"
)


def quiet_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if "proxy" not in k.lower() and k != "PYTHONPATH"}


@dataclass
class Process:
    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def alive(self) -> bool:
        if self.process.poll() is not None:
            tail = self.log.read_text(errors="replace")[-2000:]
            raise SystemExit(f"{self.name} ended ({self.process.returncode}):\n{tail}")
        return True

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


def start(name: str, argv: list[str], scratch: Path) -> Process:
    log = scratch / f"{name}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            argv, cwd=scratch, env=quiet_env(), stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: tritonserver's stubs end with it
        )  # fmt: skip
    return Process(name, process, log)


@dataclass(frozen=True)
class Running:
    """A front up: its port, and its process (whose CPU time is read from /proc)."""

    port: int
    pid: int

    def cpu_s(self) -> float:
        """User and system CPU seconds the front has used so far: its own cost, however busy the
        machine (the wall-clock figures are not, on a machine shared with other work)."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


@contextlib.contextmanager
def front(variant: str, src: Path, triton_port: int, scratch: Path) -> Iterator[Running]:
    """One front on a free loopback port beside the Triton on ``triton_port``."""
    port = free_port()
    code = FRONT.format(src=str(src))
    argv = [
        sys.executable,
        "-c",
        code,
        "--port",
        str(port),
        "--triton-url",
        f"http://127.0.0.1:{triton_port}",
    ]
    process = start(f"front-{variant}", argv, scratch)
    try:
        wait_until(
            lambda: process.alive() and http_status(port, "/health") == 200, f"the {variant} front ready", 30
        )
        yield Running(port, process.process.pid)
    finally:
        process.stop()


# ---- the Triton stand-in: generate_stream's events as fast as it can


WORDS = (" the", " river", " runs", " past", " a", " mill", " and", " under", " old", " bridges", ".")


def event_chunk(model: str, text: str, prompt_tokens: int, completion_tokens: int) -> bytes:
    """One response of Triton 2.51's generate_stream: a ``data:`` event of every output, one chunk."""
    payload = {
        "completion_tokens": completion_tokens, "model_name": model, "model_version": "1",
        "prompt_tokens": prompt_tokens, "text_output": text,
    }  # fmt: skip
    data = b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def plain(status: str, body: bytes) -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\nTransfer-Encoding: chunked\r\n\r\n"
)
YIELD_EVERY = 16  # events written before the stand-in lets its other streams go on


async def stand_in_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """One request on one connection (the fronts close theirs to Triton after each answer)."""
    try:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        method, path, _version = head.split("\r\n", 1)[0].split(" ", 2)
        length = 0
        for line in head.split("\r\n")[1:]:
            name, _colon, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        body = await reader.readexactly(length)
        model = path.split("/")[3] if path.startswith("/v2/models/") else ""
        if method == "POST" and path.endswith("/generate_stream") and model == MODEL:
            asked = json.loads(body)
            tokens, prompt = int(asked.get("max_tokens", 16)), len(str(asked.get("text_input", "")).split())
            words = itertools.cycle(WORDS)
            for count in range(1, tokens + 1):  # the head goes with the first event, as Triton's
                data = event_chunk(model, next(words), prompt, count)
                writer.write(STREAM_HEAD + data if count == 1 else data)
                if count % YIELD_EVERY == 0:
                    await writer.drain()
                    await asyncio.sleep(0)
            writer.write(b"0\r\n\r\n")
        elif method == "GET" and path == "/v2/health/ready":
            writer.write(plain("200 OK", b""))
        elif method == "POST" and path == "/v2/repository/index":
            writer.write(
                plain("200 OK", json.dumps([{"name": MODEL, "version": "1", "state": "READY"}]).encode())
            )
        elif method == "GET" and path == f"/v2/models/{MODEL}":
            inputs = [{"name": "text_input", "datatype": "BYTES", "shape": [1]}]
            writer.write(plain("200 OK", json.dumps({"name": MODEL, "inputs": inputs}).encode()))
        else:
            writer.write(plain("404 Not Found", b'{"error":"not served by the stand-in"}'))
        await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
        pass
    finally:
        writer.close()


def serve_stand_in(port: int) -> None:
    """The stand-in on 127.0.0.1:``port`` until SIGTERM (run in a process of its own)."""

    async def run() -> None:
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        server = await asyncio.start_server(stand_in_answer, "127.0.0.1", port, backlog=1024)
        async with server:
            await stop.wait()

    asyncio.run(run())


@contextlib.contextmanager
def stand_in(scratch: Path) -> Iterator[int]:
    port = free_port()
    path = [str(ROOT), str(ROOT / "src")]
    code = f"import sys; sys.path[:0] = {path!r}; from bench.front_http import serve_stand_in;"
    process = start("stand-in", [sys.executable, "-c", f"{code} serve_stand_in({port})"], scratch)
    try:
        wait_until(
            lambda: process.alive() and http_status(port, "/v2/health/ready") == 200, "the stand-in ready", 30
        )
        yield port
    finally:
        process.stop()


# ---- the real tritonserver with tiny_lm


@contextlib.contextmanager
def real_triton(command: str, scratch: Path) -> Iterator[int]:
    repository = stage_repository(scratch, 0)  # a copy: the Python stub's caches stay out of examples/
    http, grpc, metrics = (free_port() for unused in range(3))
    argv = [
        *command.split(), f"--model-repository={repository}", f"--http-port={http}",
        f"--grpc-port={grpc}", f"--metrics-port={metrics}", "--http-address=127.0.0.1",
        "--grpc-address=127.0.0.1", "--metrics-address=127.0.0.1", "--allow-metrics=false",
    ]  # fmt: skip
    process = start("tritonserver", argv, scratch)
    try:
        wait_until(
            lambda: process.alive() and http_status(http, f"/v2/models/{MODEL}/ready") == 200,
            f"tritonserver's {MODEL} ready",
            180,
        )
        yield http
    finally:
        process.stop()


# ---- the client: completions through one front


def completion(tokens: int, stream: bool, index: int) -> bytes:
    body: dict[str, Any] = {
        "model": MODEL, "prompt": f"{PROMPT}, request {index}", "max_tokens": tokens, "stream": stream,
        "parameters": {"token_delay_s": 0},  # tiny_lm at its own pace (the stand-in has none)
    }  # fmt: skip
    if stream:
        body["stream_options"] = {"include_usage": True}
    return json.dumps(body).encode()


def post(port: int, body: bytes) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    reply = conn.getresponse()
    if reply.status != 200:
        raise SystemExit(f"front on {port}: {reply.status} {reply.read()[:300].decode(errors='replace')}")
    return reply


def usage_tokens(tail: bytes) -> int:
    """completion_tokens of the usage chunk at a stream's end."""
    for line in reversed(tail.split(b"\n")):
        if line.startswith(b"data: {") and b'"usage"' in line:
            usage = json.loads(line[6:]).get("usage") or {}
            return int(usage.get("completion_tokens", 0))
    raise SystemExit(f"a stream without its usage chunk: ...{tail[-300:]!r}")


def streamed(port: int, tokens: int, index: int) -> tuple[float, int, float]:
    """One streamed completion: (its TTFT, the tokens it reported, its whole time), in seconds. Parsed
    until the first chunk with text, then read in blocks: the client's CPU is not the front's."""
    began = time.perf_counter()
    reply = post(port, completion(tokens, True, index))
    ttft: float | None = None
    try:
        for line in iter(reply.readline, b""):
            if line.startswith(b"data: {") and b'"choices"' in line:
                choices = json.loads(line[6:])["choices"]
                if choices and choices[0].get("text"):
                    ttft = time.perf_counter() - began
                    break
        tail = b""
        while block := reply.read1(1 << 16):
            tail = (tail + block)[-4096:]
        ended = time.perf_counter() - began
    finally:
        reply.close()
    if ttft is None:
        raise SystemExit(f"front on {port}: a stream without text")
    return ttft, usage_tokens(tail), ended


def whole(port: int, tokens: int, index: int) -> int:
    """One non-streamed completion; the tokens it reported."""
    reply = post(port, completion(tokens, False, index))
    try:
        return int(json.loads(reply.read())["usage"]["completion_tokens"])
    finally:
        reply.close()


def checked(got: int, wanted: int, what: str) -> None:
    if got != wanted:
        raise SystemExit(f"{what}: {got} tokens, not {wanted}")


def ttft_round(port: int, requests: int, tokens: int) -> list[float]:
    """TTFT of ``requests`` streamed completions, one after the other."""
    found = []
    for index in range(requests):
        ttft, got, _ended = streamed(port, tokens, index)
        checked(got, tokens, "a streamed completion")
        found.append(ttft)
    return found


def stream_round(port: int, streams: int, tokens: int) -> tuple[int, float]:
    """``streams`` long completions at once: (their tokens, seconds from the first sent to the last ended)."""
    with ThreadPoolExecutor(max_workers=streams) as pool:
        began = time.perf_counter()
        done = list(pool.map(lambda index: streamed(port, tokens, index), range(streams)))
        seconds = time.perf_counter() - began
    for _ttft, got, _ended in done:
        checked(got, tokens, "a long stream")
    return sum(got for _ttft, got, _ended in done), seconds


def short_round(port: int, requests: int, clients: int, tokens: int) -> tuple[int, float]:
    """``requests`` non-streamed completions from ``clients`` clients: (requests, seconds)."""
    with ThreadPoolExecutor(max_workers=clients) as pool:
        began = time.perf_counter()
        got = list(pool.map(lambda index: whole(port, tokens, index), range(requests)))
        seconds = time.perf_counter() - began
    for count in got:
        checked(count, tokens, "a non-streamed completion")
    return len(got), seconds


# ---- the rounds


@dataclass
class Measured:
    """One front's samples against one Triton, every round's, with the CPU time the front used in
    each kind of load."""

    ttft_s: list[float] = field(default_factory=list)
    ttft_cpu_s: float = 0.0
    streams: list[tuple[int, float]] = field(default_factory=list)  # (tokens, seconds) per round
    stream_cpu_s: float = 0.0
    shorts: list[tuple[int, float]] = field(default_factory=list)  # (requests, seconds) per round
    short_cpu_s: float = 0.0

    def summary(self) -> dict[str, Any]:
        tokens, stream_s = (sum(v) for v in zip(*self.streams, strict=True))
        requests, short_s = (sum(v) for v in zip(*self.shorts, strict=True))
        return {
            "ttft_p50_ms": statistics.median(self.ttft_s) * 1000,
            "ttft_p99_ms": percentile(self.ttft_s, 0.99) * 1000,
            "stream_tokens_per_s": tokens / stream_s,
            "short_requests_per_s": requests / short_s,
            "cpu_ms_per_streamed_request": self.ttft_cpu_s / len(self.ttft_s) * 1000,
            "cpu_us_per_streamed_token": self.stream_cpu_s / tokens * 1e6,
            "cpu_ms_per_short_request": self.short_cpu_s / requests * 1000,
            "requests": len(self.ttft_s),
            "stream_tokens": tokens,
            "short_requests": requests,
            "ttft_ms": [round(t * 1000, 3) for t in self.ttft_s],
            "stream_rounds_tokens_per_s": [n / s for n, s in self.streams],
            "short_rounds_requests_per_s": [n / s for n, s in self.shorts],
        }


@dataclass(frozen=True)
class Metric:
    key: str
    name: str
    unit: str
    rate: bool  # higher is better
    judged: bool = True  # one the acceptance names; the front's CPU explains them


METRICS = (
    Metric("ttft_p50_ms", "TTFT p50", "ms", rate=False),
    Metric("ttft_p99_ms", "TTFT p99", "ms", rate=False),
    Metric("stream_tokens_per_s", "streaming rate", "tokens/s", rate=True),
    Metric("short_requests_per_s", "short completions", "req/s", rate=True),
    Metric("cpu_ms_per_streamed_request", "front CPU / TTFT request", "ms", rate=False, judged=False),
    Metric("cpu_us_per_streamed_token", "front CPU / streamed token", "us", rate=False, judged=False),
    Metric("cpu_ms_per_short_request", "front CPU / short request", "ms", rate=False, judged=False),
)


def no_slower(metric: Metric, current: float, baseline: float) -> bool:
    """The current front within SLOWER of the baseline: a latency (or a cost) at most SLOWER times,
    a rate at least 1/SLOWER of it."""
    return current * SLOWER >= baseline if metric.rate else current <= baseline * SLOWER


def measure(args: argparse.Namespace, fronts: dict[str, Running], label: str) -> dict[str, Measured]:
    """Every round against both ``fronts`` (by variant): each kind of load on one front then the
    other, their order swapped every round."""
    for running in fronts.values():  # warm-up: the front's first lookup of the model, Triton's first runs
        ttft_round(running.port, 3, args.ttft_tokens)
        stream_round(running.port, 2, 50)
        short_round(running.port, 4, 2, args.short_tokens)
    found = {variant: Measured() for variant in VARIANTS}
    for round_index in range(args.rounds):
        order = VARIANTS if round_index % 2 == 0 else VARIANTS[::-1]
        for variant in order:
            running, into = fronts[variant], found[variant]
            cpu = running.cpu_s()
            into.ttft_s += ttft_round(running.port, args.requests, args.ttft_tokens)
            into.ttft_cpu_s += running.cpu_s() - cpu
        for variant in order:
            running, into = fronts[variant], found[variant]
            cpu = running.cpu_s()
            into.streams.append(stream_round(running.port, args.streams, args.stream_tokens))
            into.stream_cpu_s += running.cpu_s() - cpu
        for variant in order:
            running, into = fronts[variant], found[variant]
            cpu = running.cpu_s()
            into.shorts.append(
                short_round(running.port, args.short_requests, args.clients, args.short_tokens)
            )
            into.short_cpu_s += running.cpu_s() - cpu
        shown = ", ".join(
            f"{v} TTFT p50 {statistics.median(found[v].ttft_s[-args.requests :]) * 1000:.1f} ms"
            f" {found[v].streams[-1][0] / found[v].streams[-1][1]:,.0f} tokens/s"
            f" {found[v].shorts[-1][0] / found[v].shorts[-1][1]:,.0f} req/s"
            for v in VARIANTS
        )
        print(f"{label}, round {round_index + 1}/{args.rounds} ({'/'.join(order)}): {shown}", flush=True)
    return found


def against(
    label: str,
    triton: contextlib.AbstractContextManager[int],
    sources: dict[str, Path],
    args: argparse.Namespace,
    scratch: Path,
) -> dict[str, dict[str, Any]]:
    """Both fronts beside one Triton, measured; each variant's summary."""
    began = time.monotonic()
    with triton as triton_port, contextlib.ExitStack() as stack:
        fronts = {v: stack.enter_context(front(v, sources[v], triton_port, scratch)) for v in VARIANTS}
        print(f"{label}: Triton and both fronts ready in {time.monotonic() - began:.1f} s", flush=True)
        found = measure(args, fronts, label)
    return {variant: found[variant].summary() for variant in VARIANTS}


# ---- the table and the figures


def rows(results: dict[str, dict[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per Triton and metric: both fronts' values, the ratio current/baseline and whether the current
    front is no slower (None for the CPU figures, which explain rather than judge)."""
    found = []
    for triton, variants in results.items():
        for metric in METRICS:
            baseline, current = variants["baseline"][metric.key], variants["current"][metric.key]
            ratio = current / baseline if baseline and current else None
            found.append({
                "triton": triton, "metric": metric.key, "name": metric.name, "unit": metric.unit,
                "baseline": baseline, "current": current, "ratio": ratio,
                # how many times slower the current front is (above 1: slower), whatever the unit
                "slowdown": None if ratio is None else 1 / ratio if metric.rate else ratio,
                "no_slower": no_slower(metric, current, baseline) if metric.judged else None,
            })  # fmt: skip
    return found


def show(table: list[dict[str, Any]]) -> None:
    print(
        f"\n{'Triton':<13}{'figure':<32}{'baseline ' + BASELINE:>18}{'current':>12}{'current/baseline':>18}"
        f"  no slower than {SLOWER}x"
    )
    for row in table:
        verdict = {True: "yes", False: "no", None: "(the front's own cost)"}[row["no_slower"]]
        ratio = "" if row["ratio"] is None else f"{row['ratio']:.2f}x"
        print(
            f"{row['triton']:<13}{row['name'] + ' (' + row['unit'] + ')':<32}{row['baseline']:>18,.2f}"
            f"{row['current']:>12,.2f}{ratio:>18}  {verdict}"
        )
    print()
    for row in table:
        if row["no_slower"] is not None:
            verdict = "yes" if row["no_slower"] else "no"
            print(f"{row['triton']}, {row['name']}: no slower than {SLOWER}x: {verdict}")


def figures(table: list[dict[str, Any]]) -> list[Figure]:
    metrics = {m.key: m for m in METRICS}
    found: list[Figure] = []
    for row in table:
        metric = metrics[row["metric"]]
        figure: Figure = {
            "name": f"{row['name']}, current front ({row['triton']} Triton)",
            "value": row["current"],
            "unit": row["unit"],
            "baseline": row["baseline"],
            "baseline_name": f"front at {BASELINE}",
        }
        if metric.judged:
            figure["goal"] = f">= baseline / {SLOWER}" if metric.rate else f"<= {SLOWER}x baseline"
            figure["met"] = row["no_slower"]
        found.append(figure)
    return found


def head_revision() -> str:
    described = subprocess.run(
        ["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
        capture_output=True,
        text=True,
        check=False,
    )
    return described.stdout.strip() or "unknown"


def quick(args: argparse.Namespace) -> None:
    args.rounds, args.requests, args.streams, args.stream_tokens = 2, 10, 2, 200
    args.short_requests, args.clients = 20, 2


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--rounds", type=int, default=8, help="rounds per Triton, the fronts' order alternating"
    )
    parser.add_argument(
        "--requests", type=int, default=25, help="sequential TTFT requests per front and round"
    )
    parser.add_argument("--ttft-tokens", type=int, default=16, help="tokens of each TTFT request")
    parser.add_argument("--streams", type=int, default=4, help="concurrent long streams per front and round")
    parser.add_argument("--stream-tokens", type=int, default=2000, help="tokens of each long stream")
    parser.add_argument(
        "--short-requests", type=int, default=100, help="non-streamed requests per front and round"
    )
    parser.add_argument("--short-tokens", type=int, default=16, help="tokens of each non-streamed request")
    parser.add_argument(
        "--clients", type=int, default=4, help="concurrent clients of the non-streamed requests"
    )
    parser.add_argument(
        "--current",
        metavar="REVISION",
        help="the current front from this git revision instead of the working tree (547bd8d: the HTTP"
        " layer's own commit, without what changed in the front since)",
    )
    parser.add_argument("--against", choices=("both", *TRITONS), default="both", help="which Triton(s)")
    parser.add_argument("--tritonserver", default=os.environ.get("TARN_TRITONSERVER"))
    parser.add_argument("--triton-venv", type=Path, default=DEFAULT_VENV)
    parser.add_argument("--quick", action="store_true", help="small counts: a check that it runs")
    parser.add_argument("--json", type=Path, help="also write the figures and every TTFT sample here")
    args = parser.parse_args(argv)
    if args.quick:
        quick(args)
    began = time.monotonic()
    current = args.current or f"the working tree ({head_revision()})"
    print(
        f"the OpenAI front at {BASELINE} (baseline) and at {current} (current);"
        f" {args.rounds} rounds of {args.requests} TTFT requests ({args.ttft_tokens} tokens),"
        f" {args.streams} streams of {args.stream_tokens} tokens at once, {args.short_requests}"
        f" non-streamed requests ({args.short_tokens} tokens) from {args.clients} clients, per front",
        flush=True,
    )
    results: dict[str, dict[str, dict[str, Any]]] = {}
    unavailable = ""
    with tempfile.TemporaryDirectory(prefix="tarn-bench-front-http.") as folder:
        scratch = Path(folder)
        sources = {
            "baseline": materialize(BASELINE, scratch / "baseline"),
            "current": materialize(args.current, scratch / "current") if args.current else ROOT / "src",
        }
        plan: list[tuple[str, Callable[[], contextlib.AbstractContextManager[int]]]] = []
        if args.against in ("both", "tritonserver"):
            try:
                command = tritonserver(args.tritonserver, args.triton_venv, scratch)
                plan.append(("tritonserver", lambda: real_triton(command, scratch)))
            except (SystemExit, subprocess.CalledProcessError, OSError) as error:
                if args.against == "tritonserver":
                    raise
                unavailable = str(error) or type(error).__name__
                print(f"no real tritonserver ({unavailable}): against the stand-in only", flush=True)
        if args.against in ("both", "stand-in"):
            plan.insert(0, ("stand-in", lambda: stand_in(scratch)))
        for label, triton in plan:
            results[label] = against(label, triton(), sources, args, scratch)
    table = rows(results)
    show(table)
    if unavailable:
        print(f"\nno real tritonserver ({unavailable}): measured against the stand-in only")
    runtime = time.monotonic() - began
    print(f"\nran {runtime:.0f} s")
    if args.json:
        parameters = {k: v for k, v in vars(args).items() if k not in ("json", "tritonserver", "triton_venv")}
        parameters = {
            **parameters,
            "baseline": BASELINE,
            "current": current,
            "triton_venv": str(args.triton_venv),
        }
        samples: dict[str, Any] = {"tritons": results, "table": table, "runtime_s": runtime}
        if unavailable:
            samples["tritonserver_unavailable"] = unavailable
        Result("front_http", figures(table), parameters, samples).write(args.json)


if __name__ == "__main__":
    main()
