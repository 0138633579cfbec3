"""Least-loaded routing against round robin for OpenAI-API traffic (issue 35), in one run: time to
first token (TTFT) of streamed chat completions through a real HAProxy whose /v1 backend is two
instances' OpenAI fronts, once with ``balance leastconn`` (the haproxy role's openai_backend) and
once with ``balance roundrobin``, both under the identical arrival schedule.

Each instance is TARN's launcher (``tarn.stdlib.launcher.main``, as YARN runs it) with a real
tritonserver serving examples/llm_repository's ``tiny_lm`` (a decoupled Python-backend model that
generates token by token) and, beside it, TARN's OpenAI front (``--openai-port``). The repository is
staged in a temporary copy with tiny_lm's ``max_concurrent_generations`` set (``--slots``, default
2): an LLM server runs a bounded batch of sequences at once (vLLM's max_num_seqs, TensorRT-LLM's max
batch size) and queues the rest, and that queue is what round robin fills with short requests behind
long ones. 2 slots, not a GPU server's dozens, so that a few long streams fill an instance on a
2-core machine: what matters is the share of slots the long generations hold. Each instance is
pinned to a core of its own where the machine has two (``taskset``): an instance's compute is its
own, as a GPU is, and one that streams long generations is slower to start the next one. HAProxy
runs the haproxy role's own /v1 backend: roles/haproxy/templates/haproxy.cfg.j2 is rendered by
Ansible from the role's defaults and vars (tests/support/haproxy.py's ``render_role_cfg``, with the
venv's ansible-playbook) once per policy, with ``haproxy_openai_balance`` set to it and the
activator off, and the bench takes the ``openai_backend`` section as rendered (the balance, the 10
minute server and tunnel timeouts, http-no-delay, http-buffer-request, retries, checks,
default-server), with its two fronts in place of the role's disabled server slots, behind the
role's global and defaults less what is the host's (``HOST_ONLY``: syslog, chroot, user, the
/var/run socket, the server-state file) and a frontend of its own on loopback.

The workload (a fixed seed, the same schedule for both policies): short chats at tiny_lm's full
speed arriving at a steady Poisson rate, and long generations of about 3 s among them, paced
(``--long-delay`` after each token, as a GPU's decode steps are) so that they hold slots rather than
the CPU, one every 2 s on average: 1 to 3 at once, enough to fill an instance's 2 slots when two
land on it, never enough to fill both instances' when each goes to the one with fewer. TTFT is from
sending the request to the first chunk that carries text. Printed per policy: p50 and p99 TTFT of
every request and of the short ones, the requests each instance served, and the ratio p99(leastconn)
/ p99(roundrobin), goal <= 0.5.

tritonserver: ``--tritonserver PATH`` or $TARN_TRITONSERVER (a wrapper that runs it, such as the
triton_server role's), else the ``nvidia-pytriton`` wheel's binary
in ``--triton-venv`` (default build/triton-venv), wrapped here as the role's wrapper does it. That
venv is made when it has no binary: ``python3.X -m venv`` and ``pip install`` of the triton_server
role's pins (roles/triton_server/defaults/main.yml: Python, nvidia-pytriton and numpy versions),
with the Python backend stub for its Python copied in place as the role does, once; later runs
reuse it. Everything on 127.0.0.1.

    python bench/openai_routing.py [--seconds 20] [--rounds 2] [--short-rate 6] [--longs 10] [--slots 2]
                                   [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tarn.haproxy.runtime import RuntimeApi, RuntimeApiError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run alone: bench.result from the root
from bench.common import percentile
from bench.result import Figure, Result
from tests.support.haproxy import render_role_cfg
from tests.support.loopback import free_port

ROOT = Path(__file__).resolve().parents[1]
REPOSITORY = ROOT / "examples" / "llm_repository"
MODEL = "tiny_lm"
DEFAULT_VENV = ROOT / "build" / "triton-venv"
ROLE_DEFAULTS = ROOT / "roles" / "triton_server" / "defaults" / "main.yml"
BACKEND = "openai_backend"  # the role's default name
POLICIES = ("leastconn", "roundrobin")
GOAL = 0.5


def wait_until(check: Any, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(OSError, RuntimeApiError):
            if check():
                return
        if time.monotonic() > deadline:
            raise SystemExit(f"not within {timeout:.0f} s: {what}")
        time.sleep(0.1)


def http_status(port: int, path: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path)
        reply = conn.getresponse()
        reply.read()
        return reply.status
    finally:
        conn.close()


# ---- the instances: the launcher, a real tritonserver and the OpenAI front beside it


WRAPPER = """#!/bin/sh
# tritonserver from the nvidia-pytriton wheel, started as roles/triton_server's wrapper starts it
LD_LIBRARY_PATH="{libs}:{libpython}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"
PATH="{venv}/bin:$PATH"
export LD_LIBRARY_PATH PATH
exec "{binary}" --backend-directory="{backends}" "$@"
"""


def role_pin(name: str) -> str:
    """A pin of the triton_server role's defaults, so the bench runs what the lab installs."""
    found = re.search(rf'^triton_server_{name}: "([^"]+)"', ROLE_DEFAULTS.read_text(), re.MULTILINE)
    if not found:
        raise SystemExit(f"{ROLE_DEFAULTS}: no triton_server_{name}")
    return found.group(1)


def wheel_binaries(venv: Path) -> list[Path]:
    return sorted(venv.glob("lib/python3*/site-packages/pytriton/tritonserver/bin/tritonserver"))


def make_venv(venv: Path) -> None:
    """The role's venv, here: its Python, nvidia-pytriton and numpy pins (numpy < 2, or every
    inference fails); once, a few minutes for the wheel (about 400 MB installed)."""
    # the role's Python, else python3: the stub copied in place is the venv's own Python's
    python = next((p for p in (f"python{role_pin('python_version')}", "python3") if shutil.which(p)), None)
    if python is None:
        raise SystemExit(f"no python3 on PATH to make {venv} with; give --tritonserver")
    pins = [f"nvidia-pytriton=={role_pin('pytriton_version')}", f"numpy=={role_pin('numpy_version')}"]
    print(f"making {venv}: {python} -m venv, pip install {' '.join(pins)}", flush=True)
    shutil.rmtree(venv, ignore_errors=True)  # a half-made one from an interrupted run
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", *pins], check=True)


def tritonserver(given: str | None, venv: Path, scratch: Path) -> str:
    """The command that runs tritonserver: given, or the wheel's binary wrapped (the venv made
    first if it has none): the role's pins, not whatever tritonserver a PATH holds."""
    if given:
        return given
    if not wheel_binaries(venv):
        make_venv(venv)
    binaries = wheel_binaries(venv)
    if not binaries:
        raise SystemExit(f"no tritonserver in {venv} after pip install nvidia-pytriton; give --tritonserver")
    binary = binaries[-1]
    home, site = binary.parents[1], binary.parents[3]
    stub = home / "backends" / "python" / "triton_python_backend_stub"
    if not stub.exists():  # the wheel ships one per Python; the role copies the venv's in place
        shutil.copy2(
            home / "python_backend_stubs" / site.parent.name.removeprefix("python") / stub.name, stub
        )
    libpython = subprocess.run(
        [str(venv / "bin" / "python3"), "-c", "import sysconfig; print(sysconfig.get_config_var('LIBDIR'))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    wrapper = scratch / "tritonserver"
    wrapper.write_text(
        WRAPPER.format(
            libs=site / "nvidia_pytriton.libs",
            libpython=libpython,
            venv=venv,
            binary=binary,
            backends=home / "backends",
        )
    )
    wrapper.chmod(0o755)
    return str(wrapper)


@dataclass
class Instance:
    name: str
    triton_port: int
    front_port: int
    cpu: int | None
    process: subprocess.Popen[bytes]


def stage_repository(scratch: Path, slots: int) -> Path:
    """A copy of examples/llm_repository with tiny_lm's max_concurrent_generations set."""
    staged = scratch / "llm_repository"
    shutil.copytree(REPOSITORY, staged, ignore=shutil.ignore_patterns("__pycache__"))
    config = staged / MODEL / "config.pbtxt"
    text, count = re.subn(
        r'(key: "max_concurrent_generations"\s*value: \{ string_value: )"\d+"',
        rf'\1"{slots}"',
        config.read_text(),
    )
    if count != 1:
        raise SystemExit(f"{config}: no max_concurrent_generations parameter to set")
    config.write_text(text)
    return staged


def start_instance(index: int, triton: str, repository: Path, scratch: Path, cpu: int | None) -> Instance:
    """TARN's launcher with ``--openai-port``: it runs tritonserver and the front beside it."""
    http_port, grpc_port, metrics_port, front_port = (free_port() for unused in range(4))
    argv = ["--model-repository", str(repository), "--tritonserver", triton, "--address", "127.0.0.1",
            "--port", str(http_port), "--grpc-port", str(grpc_port), "--metrics-port", str(metrics_port),
            "--openai-port", str(front_port)]  # fmt: skip
    code = f"import sys; from tarn.stdlib.launcher.main import main; sys.exit(main({argv!r}))"
    pin = ["taskset", "-c", str(cpu)] if cpu is not None else []
    folder = scratch / f"instance-{index}"
    folder.mkdir()
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    log = (folder / "launcher.log").open("wb")
    process = subprocess.Popen(
        [*pin, sys.executable, "-c", code], cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,  # its own group: Triton's stubs and the front end with it
    )  # fmt: skip
    return Instance(f"instance-{index + 1}", http_port, front_port, cpu, process)


def wait_ready(instance: Instance, scratch: Path) -> None:
    def ready() -> bool:
        if instance.process.poll() is not None:
            log = (scratch / f"instance-{instance.name[-1:]}" / "launcher.log").read_text()[-2000:]
            raise SystemExit(f"{instance.name}: the launcher ended ({instance.process.returncode}):\n{log}")
        return (
            http_status(instance.triton_port, f"/v2/models/{MODEL}/ready") == 200
            and http_status(instance.front_port, "/health") == 200
        )

    wait_until(ready, f"{instance.name}: Triton's {MODEL} and the front ready", 120)


def stop_instance(instance: Instance) -> None:
    if instance.process.poll() is None:
        instance.process.send_signal(signal.SIGTERM)  # YARN's stop: the launcher stops Triton and the front
        try:
            instance.process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(instance.process.pid, signal.SIGKILL)
            instance.process.wait()


# ---- HAProxy: the role's openai_backend, with one balance or the other


# What of the role's global and defaults sections the bench leaves out: they are the host's (the
# syslog at /dev/log and the request logs sent there, a chroot and the haproxy user, which need
# root, the Runtime API socket in /var/run, the server-state file the next process loads). The
# bench's HAProxy runs as whoever runs the bench and logs nothing, its socket in the scratch
# folder; its servers are in its cfg, so it has no state to load. The rest (maxconn, the timeouts,
# idle-close-on-response, mode http) is the role's as rendered.
HOST_ONLY = {
    "global": ("log", "chroot", "user", "group", "stats socket", "server-state-file"),
    "defaults": ("log", "option httplog", "option dontlognull", "option dontlog-normal",
                 "load-server-state-from-file"),
}  # fmt: skip


def section(cfg: str, header: str) -> list[str]:
    """The directives of one section of an HAProxy cfg (``global``, ``defaults``, ``backend NAME``),
    stripped, without its comments and blank lines."""
    lines: list[str] | None = None
    for line in cfg.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line[0].isspace():  # a section's header starts at the margin
            if lines is not None:
                break
            if line.split() == header.split():
                lines = []
        elif lines is not None:
            lines.append(line.strip())
    if lines is None:
        raise ValueError(f"no section {header!r} in the rendered cfg")
    return lines


def openai_section(cfg: str, backend: str, servers: Sequence[tuple[str, int]]) -> list[str]:
    """The role's ``backend`` section out of its rendered haproxy.cfg (balance, timeouts, options,
    retries, checks, header rules, default-server: as rendered) with the bench's ``servers``
    (name, loopback port) in place of the role's. The role's ``server`` lines all go: its slots
    are disabled placeholders that haproxy-sync points at instances through the Runtime API, and
    a backup server is the activator, a service the bench does not run."""
    kept = [line for line in section(cfg, f"backend {backend}") if line.split()[0] != "server"]
    return [f"backend {backend}", *(f"    {line}" for line in kept)] + [
        f"    server {name} 127.0.0.1:{port}" for name, port in servers
    ]


def loopback_cfg(cfg: str, backend: str, servers: Sequence[tuple[str, int]], entry: int, socket: Path) -> str:
    """The bench's HAProxy cfg from the role's rendered one: its global and defaults less what is
    the host's (HOST_ONLY), a frontend of the bench's own on 127.0.0.1:``entry`` that sends
    everything to the role's ``backend``, and that backend with the bench's servers."""

    def host_only(kind: str, line: str) -> bool:
        return any(line == word or line.startswith(f"{word} ") for word in HOST_ONLY[kind])

    return "\n".join([
        "global",
        *(f"    {line}" for line in section(cfg, "global") if not host_only("global", line)),
        f"    stats socket {socket} mode 600 level admin",
        "defaults",
        *(f"    {line}" for line in section(cfg, "defaults") if not host_only("defaults", line)),
        "frontend entry",  # the bench's own: the role's binds *:80 and routes /v2 to Triton too
        f"    bind 127.0.0.1:{entry}",
        f"    default_backend {backend}",
        "    # not the role's: which front answered, for the bench's count",
        "    http-response set-header X-TARN-Front %s",
        *openai_section(cfg, backend, servers),
        "",
    ])  # fmt: skip


def render_role(balance: str, directory: Path) -> str:
    """The haproxy role's haproxy.cfg rendered by Ansible from its defaults and vars (as
    tests/integration runs it), with ``haproxy_openai_balance`` set to ``balance`` and no
    activator (its backup server line would point at a port nothing listens on here)."""
    directory.mkdir()
    rendered = render_role_cfg(directory, haproxy_openai_balance=balance, haproxy_activator_enabled="false")
    return rendered.read_text()


@contextlib.contextmanager
def haproxy(balance: str, rendered: str, instances: list[Instance], scratch: Path) -> Any:
    """A real HAProxy on a free loopback port running the role's rendered /v1 backend with
    both fronts up in it; yields the port."""
    entry, sock = free_port(), scratch / f"haproxy-{balance}.sock"
    servers = [(i.name, i.front_port) for i in instances]
    cfg = scratch / f"haproxy-{balance}.cfg"
    cfg.write_text(loopback_cfg(rendered, BACKEND, servers, entry, sock))
    process = subprocess.Popen(
        ["haproxy", "-f", str(cfg), "-db"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        api = RuntimeApi(str(sock), timeout=2)
        wait_until(
            lambda: sum(s.operational == 2 for s in api.servers_state(BACKEND)) == len(instances),
            "HAProxy's backend has every front up", 20,
        )  # fmt: skip
        yield entry
    finally:
        process.terminate()
        process.wait(10)


# ---- the workload


@dataclass(frozen=True)
class Arrival:
    at: float  # seconds from the phase's start
    kind: str  # short or long
    max_tokens: int
    token_delay_s: float = 0.0  # tiny_lm's pause after each token


def schedule(
    seed: int,
    seconds: float,
    short_rate: float,
    longs: int,
    long_tokens: int,
    short_tokens: int,
    long_delay: float = 0.0,
    short_delay: float = 0.0,
) -> list[Arrival]:
    """Short requests as a Poisson process of ``short_rate`` per second over ``seconds``, and
    ``longs`` long generations at a steady rate: one in each of ``longs`` equal spans of the
    time, at a random point of its first half."""
    rng = random.Random(seed)  # noqa: S311 - a reproducible schedule, not a secret
    arrivals: list[Arrival] = []
    at = rng.expovariate(short_rate)
    while at < seconds:
        arrivals.append(Arrival(at, "short", short_tokens, short_delay))
        at += rng.expovariate(short_rate)
    spacing = seconds / max(longs, 1)
    for index in range(longs):
        at = (index + rng.uniform(0.1, 0.5)) * spacing
        arrivals.append(Arrival(at, "long", long_tokens, long_delay))
    return sorted(arrivals, key=lambda a: a.at)


@dataclass
class Outcome:
    kind: str
    at: float  # when it was sent, from the phase's start
    ttft_s: float | None  # None: no text came
    total_s: float
    chunks: int  # chunks with text
    front: str
    error: str = ""
    phase: int = 0  # which of the policy's rounds: ``at`` is from that phase's start


def chat(port: int, arrival: Arrival, index: int) -> Outcome:
    """One streamed chat completion; its TTFT (to the first chunk with text) and how it ended."""
    body = json.dumps({
        "model": MODEL, "stream": True, "max_tokens": arrival.max_tokens, "temperature": 0.8,
        "messages": [{"role": "user", "content": f"tell me about the river, request {index}"}],
        "parameters": {"token_delay_s": arrival.token_delay_s, "seed": index},
    }).encode()  # fmt: skip
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    began = time.perf_counter()
    ttft: float | None = None
    chunks, front = 0, "-"
    try:
        conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        reply = conn.getresponse()
        front = reply.getheader("X-TARN-Front") or "-"
        if reply.status != 200:
            text = reply.read()[:200].decode(errors="replace")
            return Outcome(
                arrival.kind,
                arrival.at,
                None,
                time.perf_counter() - began,
                0,
                front,
                f"{reply.status} {text}",
            )
        for line in iter(reply.readline, b""):  # parsed until the first chunk with text
            carries = line.startswith(b"data: {") and b'"choices"' in line
            if carries and json.loads(line[6:])["choices"][0]["delta"].get("content"):
                ttft, chunks = time.perf_counter() - began, 1
                break
        # then read in blocks: the client's own CPU must not slow the short requests it times
        while block := reply.read1(1 << 16):
            chunks += block.count(b'"content":')
        return Outcome(arrival.kind, arrival.at, ttft, time.perf_counter() - began, chunks, front)
    except (OSError, http.client.HTTPException, ValueError) as error:
        return Outcome(
            arrival.kind, arrival.at, ttft, time.perf_counter() - began, chunks, front, repr(error)
        )
    finally:
        conn.close()


def run_phase(port: int, arrivals: list[Arrival]) -> list[Outcome]:
    """Every arrival sent at its time (each in a thread of its own); their outcomes in order."""
    with ThreadPoolExecutor(max_workers=len(arrivals)) as pool:
        futures: list[Future[Outcome]] = []
        start = time.perf_counter()
        for index, arrival in enumerate(arrivals):
            pause = start + arrival.at - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            futures.append(pool.submit(chat, port, arrival, index))
        return [f.result() for f in futures]


def summary(outcomes: list[Outcome]) -> dict[str, Any]:
    every = [o.ttft_s for o in outcomes if o.ttft_s is not None]
    short = [o.ttft_s for o in outcomes if o.ttft_s is not None and o.kind == "short"]
    long = [o for o in outcomes if o.kind == "long"]
    fronts: dict[str, dict[str, int]] = {}
    for o in outcomes:
        fronts.setdefault(o.front, {"short": 0, "long": 0})[o.kind] += 1
    return {
        "requests": len(outcomes), "failed": sum(1 for o in outcomes if o.error or o.ttft_s is None),
        "ttft_p50_ms": statistics.median(every) * 1000, "ttft_p99_ms": percentile(every, 0.99) * 1000,
        "ttft_max_ms": max(every) * 1000,
        "short_ttft_p50_ms": statistics.median(short) * 1000,
        "short_ttft_p99_ms": percentile(short, 0.99) * 1000,
        "long_seconds_median": statistics.median(o.total_s for o in long) if long else None,
        "long_chunks_median": statistics.median(o.chunks for o in long) if long else None,
        "fronts": fronts, "short_by_longs_on_front": by_load(outcomes),
    }  # fmt: skip


def by_load(outcomes: list[Outcome]) -> dict[str, dict[str, float]]:
    """The short requests' TTFT by how many long generations their front was streaming when
    they were sent (0, 1, 2 or more): the cost of a loaded instance, whatever the policy."""
    longs = [o for o in outcomes if o.kind == "long"]
    groups: dict[str, list[float]] = {}
    for o in outcomes:
        if o.kind == "short" and o.ttft_s is not None:
            busy = sum(
                1
                for g in longs
                if (g.phase, g.front) == (o.phase, o.front) and g.at <= o.at <= g.at + g.total_s
            )
            groups.setdefault(str(min(busy, 2)), []).append(o.ttft_s)
    return {
        load: {
            "requests": len(v),
            "ttft_p50_ms": statistics.median(v) * 1000,
            "ttft_p99_ms": percentile(v, 0.99) * 1000,
        }
        for load, v in sorted(groups.items())
    }


def show(policy: str, found: dict[str, Any]) -> None:
    served = ", ".join(
        f"{name} {c['short']} short + {c['long']} long" for name, c in sorted(found["fronts"].items())
    )
    long_s = found["long_seconds_median"]
    print(
        f"{policy:>10}: TTFT p50 {found['ttft_p50_ms']:.0f} ms, p99 {found['ttft_p99_ms']:.0f} ms"
        f" (max {found['ttft_max_ms']:.0f}); short only p50 {found['short_ttft_p50_ms']:.0f} ms,"
        f" p99 {found['short_ttft_p99_ms']:.0f} ms; {found['requests']} requests, {found['failed']} failed;"
        f" long ones {long_s:.1f} s median; {served}",
        flush=True,
    )
    loads = "; ".join(
        f"{'2+' if load == '2' else load} long: {g['requests']} short, TTFT p50 {g['ttft_p50_ms']:.0f} ms,"
        f" p99 {g['ttft_p99_ms']:.0f} ms"
        for load, g in found["short_by_longs_on_front"].items()
    )
    print(f"{'':>10}  short requests by the long streams on their front when sent: {loads}", flush=True)


def figures(results: dict[str, dict[str, Any]]) -> list[Figure]:
    lc, rr = results["leastconn"], results["roundrobin"]
    ratio = lc["ttft_p99_ms"] / rr["ttft_p99_ms"]
    return [
        {"name": "TTFT p99, leastconn", "value": lc["ttft_p99_ms"], "unit": "ms",
         "baseline": rr["ttft_p99_ms"], "baseline_name": "roundrobin",
         "goal": f"ratio <= {GOAL}", "met": ratio <= GOAL},
        {"name": "TTFT p50, leastconn", "value": lc["ttft_p50_ms"], "unit": "ms",
         "baseline": rr["ttft_p50_ms"], "baseline_name": "roundrobin"},
        {"name": "short requests' TTFT p99, leastconn", "value": lc["short_ttft_p99_ms"], "unit": "ms",
         "baseline": rr["short_ttft_p99_ms"], "baseline_name": "roundrobin"},
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=20, help="arrivals span this long, per phase")
    parser.add_argument("--rounds", type=int, default=2, help="phases per policy, alternating")
    parser.add_argument("--short-rate", type=float, default=6, help="short requests per second")
    parser.add_argument("--short-tokens", type=int, default=8)
    parser.add_argument(
        "--short-delay", type=float, default=0.0, help="tiny_lm's pause after a short's tokens (s)"
    )
    parser.add_argument("--longs", type=int, default=10, help="long generations per phase")
    parser.add_argument("--long-tokens", type=int, default=300)
    parser.add_argument(
        "--long-delay", type=float, default=0.01, help="tiny_lm's pause after a long's tokens (s)"
    )
    parser.add_argument("--slots", type=int, default=2, help="tiny_lm's max_concurrent_generations")
    parser.add_argument("--seed", type=int, default=35)
    parser.add_argument("--tritonserver", default=os.environ.get("TARN_TRITONSERVER"))
    parser.add_argument("--triton-venv", type=Path, default=DEFAULT_VENV)
    parser.add_argument("--no-pin", action="store_true", help="do not pin each instance to a core")
    parser.add_argument("--quick", action="store_true", help="a short run: one 10 s phase per policy")
    parser.add_argument("--json", type=Path, help="also write the figures and every request's outcome here")
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.longs, args.rounds = 10, 5, 1
    arrivals = schedule(
        args.seed,
        args.seconds,
        args.short_rate,
        args.longs,
        args.long_tokens,
        args.short_tokens,
        args.long_delay,
        args.short_delay,
    )
    cpus = sorted(os.sched_getaffinity(0))
    pins: list[int | None] = [cpus[0], cpus[1]] if len(cpus) >= 2 and not args.no_pin else [None, None]
    print(
        f"{args.rounds} x {len(arrivals)} requests per policy, each {args.seconds:.0f} s: {args.longs} long"
        f" ({args.long_tokens} tokens, {args.long_delay * 1000:.0f} ms after each), the rest short"
        f" ({args.short_tokens} tokens, {args.short_delay * 1000:.0f} ms after each, {args.short_rate}/s);"
        f" tiny_lm with {args.slots} generation slots per instance; instances pinned to CPUs {pins}",
        flush=True,
    )
    results: dict[str, dict[str, Any]] = {}
    outcomes: dict[str, list[Outcome]] = {}
    with tempfile.TemporaryDirectory(prefix="tarn-bench-openai.") as folder:
        scratch = Path(folder)
        rendered = {policy: render_role(policy, scratch / f"role-{policy}") for policy in POLICIES}
        triton = tritonserver(args.tritonserver, args.triton_venv, scratch)
        repository = stage_repository(scratch, args.slots)
        began = time.monotonic()
        instances = [start_instance(i, triton, repository, scratch, pins[i]) for i in range(2)]
        try:
            for instance in instances:
                wait_ready(instance, scratch)
            print(
                f"2 instances (launcher + tritonserver + front) ready in {time.monotonic() - began:.1f} s",
                flush=True,
            )
            for instance in instances:  # warm-up: the Python stub's first request, the front's connection
                run_phase(instance.front_port, [Arrival(0, "short", 4)] * 3)
            for round_index in range(args.rounds):  # alternating, so drift on the machine hits both alike
                order = POLICIES if round_index % 2 == 0 else POLICIES[::-1]
                for policy in order:
                    with haproxy(policy, rendered[policy], instances, scratch) as entry:
                        found = run_phase(entry, arrivals)
                    for outcome in found:
                        outcome.phase = round_index
                    outcomes.setdefault(policy, []).extend(found)
                    print(f"round {round_index + 1}, {policy}: {len(found)} requests done", flush=True)
            for policy in POLICIES:
                results[policy] = summary(outcomes[policy])
                show(policy, results[policy])
        finally:
            for instance in instances:
                stop_instance(instance)
    ratio = results["leastconn"]["ttft_p99_ms"] / results["roundrobin"]["ttft_p99_ms"]
    verdict = "met" if ratio <= GOAL else "NOT met"
    print(f"p99 TTFT leastconn / roundrobin: {ratio:.2f} (goal <= {GOAL}: {verdict})")
    if args.json:
        parameters = {k: v for k, v in vars(args).items() if k not in ("json", "tritonserver", "triton_venv")}
        parameters = {**parameters, "triton_venv": str(args.triton_venv), "pinned_cpus": pins}
        samples = {
            "policies": results,
            "ratio_p99": ratio,
            "outcomes": {p: [asdict(o) for o in found] for p, found in outcomes.items()},
        }
        Result("openai_routing", figures(results), parameters, samples).write(args.json)


if __name__ == "__main__":
    main()
