"""The controller's loop with many instances: tick time and memory for 1,000 simulated Triton
instances against 10 (the baseline, same run), and the time from a load step to the decision.

The instances are simulated by one loopback HTTP server in a separate process that answers
Triton's /v2/health/ready, /metrics (Triton's series and format) and /v2/repository/index;
the RM is a scripted service JSON. Everything else is the real controller code.

    python bench/controller_scale.py [--instances 1000] [--ticks 8]
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import socket
import statistics
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import requests

from tarn.controller.loop import ControlLoop
from tarn.controller.observe import Scraper
from tarn.stdlib.config import TarnConfig

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


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--instances", type=int, default=1000)
    parser.add_argument("--ticks", type=int, default=8)
    parser.add_argument("--simulators", type=int, default=2, help="processes serving the simulated instances")
    args = parser.parse_args()

    port = free_port()
    ready: Any = multiprocessing.Queue()
    shared = multiprocessing.Array("d", [0.0, 0.0, 0.0, time.monotonic()])
    servers = [
        multiprocessing.Process(target=serve_simulated, args=(port, ready, shared), daemon=True)
        for unused in range(args.simulators)
    ]
    for server in servers:
        server.start()
        ready.get(timeout=30)
    requests.get(f"http://127.0.0.1:{port}/control/inflight/2", timeout=5)  # load 0.5: no scaling
    before = rss_mib()
    baseline, read_small, small = tick_times(port, 10, args.ticks)
    after_small = rss_mib()
    measured, read_large, large = tick_times(port, args.instances, args.ticks)
    after_large = rss_mib()
    print(f"controller tick, 10 instances (baseline): median {statistics.median(baseline) * 1000:.0f} ms")
    print(
        f"controller tick, {args.instances} instances:"
        f" median {statistics.median(measured) * 1000:.0f} ms,"
        f" max {max(measured) * 1000:.0f} ms"
        f" ({statistics.median(measured) / statistics.median(baseline):.1f}x"
        f" the baseline; the default tick is 2 s)"
    )
    print(
        f"controller memory (max RSS): {before:.0f} MiB at start, {after_small:.0f} MiB with 10 instances,"
        f" {after_large:.0f} MiB with {args.instances}"
        f" (+{(after_large - after_small) * 1024 / args.instances:.0f} KiB per instance)"
    )
    for tick in (2.0, 1.0):
        print(f"load step -> scale-up decision, tick {tick:.0f} s: {load_step_to_decision(port, tick):.1f} s")
    print(
        "controller CPU per tick (its own process; the simulators share the machine's cores): "
        + ", ".join(f"{n} instances {seconds * 1000:.0f} ms" for n, seconds in cpu_per_tick.items())
    )
    print(f"instances read per tick: {read_small} (10); {read_large} ({args.instances})")
    del small, large
    for server in servers:
        server.terminate()


if __name__ == "__main__":
    main()
