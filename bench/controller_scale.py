"""The controller's loop with many instances: tick time and memory for 1,000 simulated Triton
instances against 10 (the baseline, same run), and the time from a load step to the decision.

The instances are simulated by one loopback HTTP server in a separate process that answers
Triton's /v2/health/ready, /metrics (Triton's series and format) and /v2/repository/index;
the RM is a scripted service JSON. Everything else is the real controller code.

With ``--curve 10,100,1000`` it also measures every count in turn (the first is the baseline):
tick median and p90, controller CPU per tick and per instance, and max RSS, as a curve.

    python bench/controller_scale.py [--instances 1000] [--ticks 8] [--curve 10,100,1000] [--json PATH]
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import requests

from tarn.controller.loop import ControlLoop
from tarn.controller.observe import Scraper
from tarn.stdlib.config import TarnConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run alone: bench.result from the root
from bench.result import Figure, Result
from tests.support.loopback import free_port

METRICS_TEMPLATE = """\
# HELP nv_inference_request_success Number of successful inference requests, all batch sizes
# TYPE nv_inference_request_success counter
nv_inference_request_success{{model="add_one",version="1"}} {ok}
nv_inference_request_success{{model="linear_onnx",version="1"}} 0
# HELP nv_inference_request_failure Number of failed inference requests, all batch sizes
# TYPE nv_inference_request_failure counter
nv_inference_request_failure{{model="add_one",reason="BACKEND",version="1"}} 0
nv_inference_request_failure{{model="linear_onnx",reason="BACKEND",version="1"}} 0
# HELP nv_inference_request_duration_us Cumulative inference request duration in microseconds
# TYPE nv_inference_request_duration_us counter
nv_inference_request_duration_us{{model="add_one",version="1"}} {busy_us}
nv_inference_request_duration_us{{model="linear_onnx",version="1"}} 0
# HELP nv_inference_pending_request_count Instantaneous number of pending requests
# TYPE nv_inference_pending_request_count gauge
nv_inference_pending_request_count{{model="add_one",version="1"}} 0
# HELP nv_gpu_utilization GPU utilization rate [0.0 - 1.0)
# TYPE nv_gpu_utilization gauge
nv_gpu_utilization{{gpu_uuid="GPU-0000"}} {gpu}
# HELP nv_gpu_memory_used_bytes GPU used memory, in bytes
# TYPE nv_gpu_memory_used_bytes gauge
nv_gpu_memory_used_bytes{{gpu_uuid="GPU-0000"}} 2000000000
# HELP nv_gpu_memory_total_bytes GPU total memory, in bytes
# TYPE nv_gpu_memory_total_bytes gauge
nv_gpu_memory_total_bytes{{gpu_uuid="GPU-0000"}} 16000000000
"""


class SimulatedTriton:
    """Cumulative counters that grow with ``inflight`` requests at 100 requests/s per unit, in
    shared memory: every simulator process serves the same instance state."""

    INFLIGHT, OK, BUSY_US, SINCE = range(4)

    def __init__(self, shared: Any) -> None:
        self.shared = shared  # multiprocessing.Array("d", 4), with its lock

    def advance(self) -> None:
        now = time.monotonic()
        values = self.shared
        elapsed = now - values[self.SINCE]
        values[self.OK] += 100 * values[self.INFLIGHT] * elapsed
        values[self.BUSY_US] += values[self.INFLIGHT] * elapsed * 1e6
        values[self.SINCE] = now

    def metrics(self) -> bytes:
        with self.shared.get_lock():
            self.advance()
            ok, busy_us, gpu = (
                self.shared[self.OK],
                self.shared[self.BUSY_US],
                min(0.99, self.shared[self.INFLIGHT] / 4),
            )
        return METRICS_TEMPLATE.format(ok=int(ok), busy_us=int(busy_us), gpu=gpu).encode()

    def set_inflight(self, value: float) -> None:
        with self.shared.get_lock():
            self.advance()
            self.shared[self.INFLIGHT] = value


def serve_simulated(port: int, ready: Any, shared: Any) -> None:
    state = SimulatedTriton(shared)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as Triton
        disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK stall

        def do_GET(self) -> None:
            if self.path == "/v2/health/ready":
                self._send(b"")
            elif self.path == "/metrics":
                self._send(state.metrics())
            elif self.path.startswith("/control/inflight/"):
                state.set_inflight(float(self.path.rsplit("/", 1)[1]))
                self._send(b"ok")
            else:
                self.send_error(404)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            self.rfile.read(length)
            self._send(b'[{"name":"add_one","version":"1","state":"READY"}]')

        def _send(self, body: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    class Server(ThreadingHTTPServer):
        allow_reuse_port = True  # several simulator processes share the port: the kernel spreads connections
        daemon_threads = True

    server = Server(("127.0.0.1", port), Handler)
    ready.put(port)
    server.serve_forever()


class ScriptedRm:
    def __init__(self, instances: int) -> None:
        self.target = instances
        self.instances = instances
        self.decisions: list[tuple[float, int]] = []

    def service(self, name: str) -> dict[str, Any]:
        containers = [
            {"component_instance_name": f"triton-{n}", "id": f"container_sim_{n:05d}", "hostname": "sim",
             "ip": "127.0.0.1", "state": "READY"}
            for n in range(self.instances)
        ]  # fmt: skip
        return {"name": name, "state": "STABLE", "components": [
            {"name": "triton", "number_of_containers": self.target, "containers": containers}]}  # fmt: skip

    def flex(self, name: str, component: str, count: int) -> dict[str, Any]:
        self.decisions.append((time.monotonic(), count))
        self.target = count
        return {}

    def decommission(self, name: str, component: str, instances: list[str]) -> dict[str, Any]:
        return {}


def config(port: int, instances: int, tick: float) -> TarnConfig:
    # Not validated: the one simulated server answers HTTP and metrics on the same port.
    return (
        TarnConfig(
            model_repository="hdfs:///models", runtime="process", service_name="bench", port=port,
            metrics_port=port, min_instances=instances, max_instances=instances * 2, cooldown_ms=0,
            tick_seconds=tick,
        )
    )  # fmt: skip


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# Issue 16 part 3's targets at 1,000 instances.
GOAL_TICK_MS, GOAL_CPU_MS_PER_INSTANCE, GOAL_RSS_MIB = 500, 0.5, 60

cpu_per_tick: dict[int, float] = {}  # the controller process's own CPU seconds per tick


def tick_times(port: int, instances: int, ticks: int) -> tuple[list[float], list[int], ControlLoop]:
    """Tick durations and how many instances each tick read (a scrape past the deadline is not)."""
    rm = ScriptedRm(instances)
    controller = ControlLoop(config(port, instances, 2.0), rm, None, Scraper(workers=32))
    times: list[float] = []
    read: list[int] = []
    cpu_before = time.process_time()
    while len(times) < ticks:
        began = time.monotonic()
        snapshot = controller.tick()
        times.append(time.monotonic() - began)
        read.append(len(snapshot.serving()))
    cpu_per_tick[instances] = (time.process_time() - cpu_before) / ticks
    return times, read, controller


def load_step_to_decision(port: int, tick: float) -> float:
    """Load steps from 0 to 8 in flight per instance; seconds until the controller flexes up."""
    rm = ScriptedRm(1)
    controller = ControlLoop(config(port, 1, tick), rm, None, Scraper(workers=4))
    stop = threading.Event()
    loop = threading.Thread(target=controller.run, args=(stop,), daemon=True)
    requests.get(f"http://127.0.0.1:{port}/control/inflight/0", timeout=5)
    loop.start()
    time.sleep(3 * tick)
    stepped = time.monotonic()
    requests.get(f"http://127.0.0.1:{port}/control/inflight/8", timeout=5)
    while not rm.decisions and time.monotonic() - stepped < 60:
        time.sleep(0.01)
    stop.set()
    loop.join(timeout=10)
    requests.get(f"http://127.0.0.1:{port}/control/inflight/0", timeout=5)
    return rm.decisions[0][0] - stepped if rm.decisions else float("nan")


@dataclass
class Point:
    """One instance count of the curve: the tick samples, and the max RSS once it was measured."""

    instances: int
    tick_s: list[float]
    read: list[int]
    cpu_s_per_tick: float
    rss_mib: float

    def summary(self) -> dict[str, Any]:
        ordered = sorted(self.tick_s)
        return {
            "instances": self.instances,
            "tick_ms": [round(t * 1000, 3) for t in self.tick_s],
            "median_ms": statistics.median(ordered) * 1000,
            "p90_ms": ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))] * 1000,
            "max_ms": ordered[-1] * 1000,
            "cpu_ms_per_tick": self.cpu_s_per_tick * 1000,
            "cpu_ms_per_instance": self.cpu_s_per_tick * 1000 / self.instances,
            "rss_mib": self.rss_mib,
            "read": self.read,
        }


def figures(points: list[dict[str, Any]], decisions: dict[str, float]) -> list[Figure]:
    """The headline figures: the largest count against the first (the baseline), and the targets,
    which hold for 1,000 instances (fewer: no verdict)."""
    base, top = points[0], points[-1]
    against = f"{base['instances']} instances"
    at = f"at {top['instances']} instances"
    found: list[Figure] = [
        {"name": f"tick median {at}", "value": top["median_ms"], "unit": "ms", "baseline": base["median_ms"],
         "baseline_name": against, "goal": f"<= {GOAL_TICK_MS} ms", "met": top["median_ms"] <= GOAL_TICK_MS},
        {"name": f"controller CPU per instance {at}", "value": top["cpu_ms_per_instance"], "unit": "ms",
         "baseline": base["cpu_ms_per_instance"], "baseline_name": against,
         "goal": f"<= {GOAL_CPU_MS_PER_INSTANCE} ms",
         "met": top["cpu_ms_per_instance"] <= GOAL_CPU_MS_PER_INSTANCE},
        {"name": f"max RSS {at}", "value": top["rss_mib"], "unit": "MiB", "baseline": base["rss_mib"],
         "baseline_name": against, "goal": f"<= {GOAL_RSS_MIB} MiB", "met": top["rss_mib"] <= GOAL_RSS_MIB},
        {"name": "load step -> scale-up decision, tick 1 s", "value": decisions["1"], "unit": "s",
         "baseline": decisions["2"], "baseline_name": "tick 2 s"},
    ]  # fmt: skip
    if top["instances"] < 1000:
        return [{**f, "goal": None, "met": None} for f in found]
    return found


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--instances", type=int, default=1000)
    parser.add_argument("--ticks", type=int, default=8)
    parser.add_argument("--simulators", type=int, default=2, help="processes serving the simulated instances")
    parser.add_argument(
        "--curve", help="instance counts, comma-separated, e.g. 10,100,1000 (the first is the baseline)"
    )
    parser.add_argument("--json", type=Path, help="also write the figures and the tick samples here")
    return parser.parse_args()


def start_simulators(port: int, count: int) -> list[multiprocessing.Process]:
    """``count`` processes serving every simulated instance on ``port``, each listening on return."""
    ready: Any = multiprocessing.Queue()
    shared = multiprocessing.Array("d", [0.0, 0.0, 0.0, time.monotonic()])
    servers = [
        multiprocessing.Process(target=serve_simulated, args=(port, ready, shared), daemon=True)
        for unused in range(count)
    ]
    for server in servers:
        server.start()
        ready.get(timeout=30)
    return servers


def measure_curve(port: int, counts: list[int], ticks: int) -> tuple[list[Point], list[ControlLoop]]:
    """Each count in turn; its controllers are returned, alive, so the RSS grows as it would."""
    points: list[Point] = []
    kept: list[ControlLoop] = []
    for count in counts:
        times, read, controller = tick_times(port, count, ticks)
        kept.append(controller)
        points.append(Point(count, times, read, cpu_per_tick[count], rss_mib()))
    return points, kept


def print_ticks(points: list[Point], before: float) -> None:
    """The largest count's ticks and memory against the first's (the baseline)."""
    baseline, measured = points[0].tick_s, points[-1].tick_s
    largest, after_small, after_large = points[-1].instances, points[0].rss_mib, points[-1].rss_mib
    first = points[0].instances
    print(
        f"controller tick, {first} instances (baseline): median {statistics.median(baseline) * 1000:.0f} ms"
    )
    print(
        f"controller tick, {largest} instances:"
        f" median {statistics.median(measured) * 1000:.0f} ms,"
        f" max {max(measured) * 1000:.0f} ms"
        f" ({statistics.median(measured) / statistics.median(baseline):.1f}x"
        f" the baseline; the default tick is 2 s)"
    )
    print(
        f"controller memory (max RSS): {before:.0f} MiB at start,"
        f" {after_small:.0f} MiB with {first} instances,"
        f" {after_large:.0f} MiB with {largest}"
        f" (+{(after_large - after_small) * 1024 / largest:.0f} KiB per instance)"
    )


def decision_times(port: int) -> dict[str, float]:
    """Load step -> scale-up decision with a 2 s tick and a 1 s one, by the tick's seconds."""
    decisions: dict[str, float] = {}
    for tick in (2.0, 1.0):
        decisions[f"{tick:.0f}"] = load_step_to_decision(port, tick)
        print(f"load step -> scale-up decision, tick {tick:.0f} s: {decisions[f'{tick:.0f}']:.1f} s")
    return decisions


def print_cpu_and_reads(points: list[Point]) -> None:
    print(
        "controller CPU per tick (its own process; the simulators share the machine's cores): "
        + ", ".join(f"{n} instances {seconds * 1000:.0f} ms" for n, seconds in cpu_per_tick.items())
    )
    print("instances read per tick: " + "; ".join(f"{p.read} ({p.instances})" for p in points))


def print_curve(summaries: list[dict[str, Any]]) -> None:
    columns = ("median ms", "p90 ms", "CPU ms/tick", "CPU ms/inst", "RSS MiB")
    print(f"{'instances':>9} " + " ".join(f"{c:>12}" for c in columns))
    for row in summaries:
        print(
            f"{row['instances']:>9} {row['median_ms']:>12.1f} {row['p90_ms']:>12.1f}"
            f" {row['cpu_ms_per_tick']:>12.1f} {row['cpu_ms_per_instance']:>12.3f}"
            f" {row['rss_mib']:>12.0f}"
        )


def main() -> None:
    args = parse_args()
    counts = [int(n) for n in args.curve.split(",")] if args.curve else [10, args.instances]
    port = free_port()
    servers = start_simulators(port, args.simulators)
    requests.get(f"http://127.0.0.1:{port}/control/inflight/2", timeout=5)  # load 0.5: no scaling
    before = rss_mib()
    points, kept = measure_curve(port, counts, args.ticks)
    print_ticks(points, before)
    decisions = decision_times(port)
    print_cpu_and_reads(points)
    summaries = [p.summary() for p in points]
    if args.curve:
        print_curve(summaries)
    if args.json:
        parameters = {"ticks": args.ticks, "simulators": args.simulators, "counts": counts}
        samples = {"rss_start_mib": before, "curve": summaries, "load_step_to_decision_s": decisions}
        Result("controller_scale", figures(summaries, decisions), parameters, samples).write(args.json)
    del kept
    for server in servers:
        server.terminate()


if __name__ == "__main__":
    main()
