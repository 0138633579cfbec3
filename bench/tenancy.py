"""Fair share of the batch slots against first come, first served (issue 49), in one run: a quiet
client's time to first token (TTFT) alone, beside a flooder with the front's fair admission, and
beside the same flooder with first come, first served.

One real tritonserver serves examples/llm_repository's ``tiny_lm`` staged with 4 generation slots
(``max_concurrent_generations``, as bench/openai_routing.py stages it; tritonserver found or made
as there: ``--tritonserver``, $TARN_TRITONSERVER, else the nvidia-pytriton wheel's in
``--triton-venv``). Beside it, two OpenAI fronts as the launcher runs them
(``python -m tarn.stdlib.openai``), each reading the 4 slots from the model's config: one with
``--admission fair``, one with ``--admission fifo``. Both have the service's token, and every
request carries the user and the proof an entry sends (X-TARN-User, X-TARN-User-Proof), so the
quiet client and the flooder are two users, as Knox would make them.

The load: the quiet client sends one streamed completion at a time (``--quiet-tokens`` tokens,
then ``--think`` seconds before the next); the flooder keeps ``--flood`` (10) of its own open at
once, each ``--flood-tokens`` tokens long: ten times the quiet one's load, more than the slots.
tiny_lm pauses ``--token-delay`` after each token (a GPU's decode step), so the generations hold
slots rather than the CPU. TTFT: from sending the request to the first chunk that carries text.

Each round measures three phases, the order of the two policies alternating between rounds so
that drift on the machine hits both alike: the quiet client alone (the fair front), with the flood
through the fair front, with the flood through the fifo front. Printed: the quiet client's p50 and
p99 TTFT in each, and the ratios to alone. Goal (issue 49): with fair admission, at most 1.2x alone
at the median and 1.5x at p99.

    python bench/tenancy.py [--rounds 3] [--requests 40] [--flood 10] [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run alone: bench.* from the root
from bench.common import percentile
from bench.openai_routing import DEFAULT_VENV, MODEL, http_status, stage_repository, tritonserver, wait_until
from bench.result import Figure, Result
from tarn.stdlib.api_token import Secret
from tarn.stdlib.openai.trust import PROOF_HEADER, USER_HEADER, proof
from tests.support.loopback import free_port

ROOT = Path(__file__).resolve().parents[1]
POLICIES = ("fair", "fifo")
SLOTS = 4
TOKEN = Secret("tarn-bench-tenancy-token")  # the fronts' --token-file: keys the users' proofs
GOALS = {"p50": 1.2, "p99": 1.5}  # the quiet client's TTFT with fair admission over its TTFT alone


# ---- the processes
@contextlib.contextmanager
def process(name: str, argv: list[str], scratch: Path) -> Iterator[subprocess.Popen[bytes]]:
    log = (scratch / f"{name}.log").open("wb")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    started = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        yield started
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(started.pid, 15)
        try:
            started.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(started.pid, 9)
            started.wait()
        log.close()


@contextlib.contextmanager
def triton(command: str, scratch: Path) -> Iterator[int]:
    repository = stage_repository(scratch, SLOTS)
    http, grpc, metrics = (free_port() for _n in range(3))
    argv = [
        *command.split(), f"--model-repository={repository}", f"--http-port={http}",
        f"--grpc-port={grpc}", f"--metrics-port={metrics}", "--http-address=127.0.0.1",
        "--grpc-address=127.0.0.1", "--metrics-address=127.0.0.1",
    ]  # fmt: skip
    with process("tritonserver", argv, scratch) as running:
        wait_until(
            lambda: running.poll() is None and http_status(http, f"/v2/models/{MODEL}/ready") == 200,
            f"tritonserver's {MODEL} ready (log: {scratch}/tritonserver.log)",
            180,
        )
        yield http


@contextlib.contextmanager
def front(policy: str, triton_port: int, scratch: Path) -> Iterator[int]:
    port = free_port()
    token_file = scratch / "token"
    token_file.write_text(TOKEN.reveal())
    argv = [
        sys.executable, "-m", "tarn.stdlib.openai", "--port", str(port),
        "--triton-url", f"http://127.0.0.1:{triton_port}", "--token-file", str(token_file),
        "--admission", policy,
    ]  # fmt: skip
    with process(f"front-{policy}", argv, scratch) as running:
        wait_until(
            lambda: running.poll() is None and http_status(port, "/health") == 200, f"the {policy} front", 30
        )
        yield port


# ---- the clients
def ttft(port: int, user: str, tokens: int, delay: float, index: int) -> float:
    """One streamed completion as ``user``: seconds to its first text chunk; read whole."""
    body = json.dumps({
        "model": MODEL, "prompt": f"{user} asks, request {index}", "max_tokens": tokens, "stream": True,
        "parameters": {"token_delay_s": delay},
    }).encode()  # fmt: skip
    headers = {"Content-Type": "application/json", USER_HEADER: user,
               PROOF_HEADER: proof(TOKEN, int(time.time()), user)}  # fmt: skip
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    try:
        sent = time.monotonic()
        conn.request("POST", "/v1/completions", body, headers)
        reply = conn.getresponse()
        if reply.status != 200:
            raise SystemExit(f"{user}: {reply.status} {reply.read()[:300]!r}")
        first = None
        while line := reply.readline():
            if first is None and line.startswith(b"data: {") and b'"text":""' not in line:
                first = time.monotonic() - sent
        if first is None:
            raise SystemExit(f"{user}: a stream without text")
        return first
    finally:
        conn.close()


class Flood:
    """``streams`` loops, each sending the flooder's completions one after another, until stopped."""

    def __init__(self, port: int, streams: int, tokens: int, delay: float) -> None:
        self.stopping = threading.Event()
        self.sent = 0
        self._threads = [
            threading.Thread(target=self._loop, args=(port, n, tokens, delay), daemon=True)
            for n in range(streams)
        ]

    def _loop(self, port: int, stream: int, tokens: int, delay: float) -> None:
        index = 0
        while not self.stopping.is_set():
            ttft(port, "flooder", tokens, delay, stream * 100_000 + index)
            index += 1
            self.sent += 1

    def __enter__(self) -> Flood:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        for thread in self._threads:
            thread.join(300)


def quiet(port: int, args: argparse.Namespace) -> list[float]:
    times = []
    for index in range(args.requests):
        times.append(ttft(port, "quiet", args.quiet_tokens, args.token_delay, index))
        time.sleep(args.think)
    return times


def phase(port: int, args: argparse.Namespace, flood: bool) -> tuple[list[float], float]:
    """The quiet client's TTFTs, and the flooder's completions per second meanwhile."""
    if not flood:
        return quiet(port, args), 0.0
    with Flood(port, args.flood, args.flood_tokens, args.token_delay) as flooding:
        time.sleep(args.flood_tokens * args.token_delay)  # the flood fills the slots first
        began, before = time.monotonic(), flooding.sent
        times = quiet(port, args)
        rate = (flooding.sent - before) / (time.monotonic() - began)
    return times, rate


# ---- the figures
def summary(times: list[float]) -> dict[str, float]:
    return {
        "p50_ms": percentile(times, 0.5) * 1000,
        "p99_ms": percentile(times, 0.99) * 1000,
        "n": len(times),
    }


def figures(found: dict[str, dict[str, float]]) -> list[Figure]:
    alone = found["alone"]
    rows: list[Figure] = []
    for quantile, goal in GOALS.items():
        for policy in POLICIES:
            value = found[policy][f"{quantile}_ms"]
            figure: Figure = {
                "name": f"quiet TTFT {quantile}, flood, {policy}", "value": value, "unit": "ms",
                "baseline": alone[f"{quantile}_ms"], "baseline_name": "alone",
            }  # fmt: skip
            if policy == "fair":
                figure["goal"] = f"<= {goal}x alone"
                figure["met"] = value <= goal * alone[f"{quantile}_ms"]
            rows.append(figure)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=40, help="the quiet client's requests per phase")
    parser.add_argument("--quiet-tokens", type=int, default=8)
    parser.add_argument("--think", type=float, default=0.05, help="the quiet client's pause between requests")
    parser.add_argument("--flood", type=int, default=10, help="the flooder's completions open at once")
    parser.add_argument("--flood-tokens", type=int, default=40)
    parser.add_argument(
        "--token-delay", type=float, default=0.02, help="tiny_lm's pause after each token (s)"
    )
    parser.add_argument("--tritonserver", default=os.environ.get("TARN_TRITONSERVER"))
    parser.add_argument("--triton-venv", type=Path, default=DEFAULT_VENV)
    parser.add_argument("--quick", action="store_true", help="one round of 15 requests per phase")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.requests = 1, 15
    print(
        f"tiny_lm with {SLOTS} slots; quiet: {args.requests} x {args.quiet_tokens} tokens one at a time;"
        f" flooder: {args.flood} x {args.flood_tokens} tokens at once; {args.token_delay * 1000:.0f} ms"
        f" after each token; {args.rounds} rounds",
        flush=True,
    )
    times: dict[str, list[float]] = {"alone": [], "fair": [], "fifo": []}
    flooded: dict[str, list[float]] = {"fair": [], "fifo": []}  # the flooder's completions/s
    with tempfile.TemporaryDirectory(prefix="tarn-bench-tenancy.") as folder:
        scratch = Path(folder)
        command = tritonserver(args.tritonserver, args.triton_venv, scratch)
        with triton(command, scratch) as triton_port, contextlib.ExitStack() as fronts:
            ports = {policy: fronts.enter_context(front(policy, triton_port, scratch)) for policy in POLICIES}
            for port in ports.values():  # warm-up: the Python stub's first request, the fronts' lookups
                ttft(port, "quiet", 2, 0, -1)
            for round_index in range(args.rounds):
                order = POLICIES if round_index % 2 == 0 else POLICIES[::-1]
                times["alone"] += phase(ports["fair"], args, flood=False)[0]
                for policy in order:
                    measured, rate = phase(ports[policy], args, flood=True)
                    times[policy] += measured
                    flooded[policy].append(rate)
                print(f"round {round_index + 1} done", flush=True)
    found = {name: summary(values) for name, values in times.items()}
    print(f"\n{'quiet client':<28} {'p50 ms':>9} {'p99 ms':>9} {'p50/alone':>10} {'p99/alone':>10}")
    alone = found["alone"]
    for name in ("alone", *POLICIES):
        row = found[name]
        label = "alone" if name == "alone" else f"beside the flood, {name}"
        print(
            f"{label:<28} {row['p50_ms']:9.1f} {row['p99_ms']:9.1f}"
            f" {row['p50_ms'] / alone['p50_ms']:10.2f} {row['p99_ms'] / alone['p99_ms']:10.2f}"
        )
    rates = {policy: sum(values) / len(values) for policy, values in flooded.items()}
    print(
        f"the flooder's completions per second meanwhile: fair {rates['fair']:.2f}, fifo {rates['fifo']:.2f}"
        f" (fair keeps a slot free for the quiet client: at most {SLOTS - 1} of {SLOTS} are the flooder's)"
    )
    rows = figures(found)
    for judged in rows:
        if "met" in judged:
            print(
                f"{judged['name']}: {judged['value']:.1f} ms, goal {judged['goal']}:"
                f" {'met' if judged['met'] else 'NOT met'}"
            )
    if args.json:
        parameters = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k != "json"}
        Result("tenancy", rows, parameters, {"quiet": found, "flood_rate": rates}).write(args.json)


if __name__ == "__main__":
    main()
