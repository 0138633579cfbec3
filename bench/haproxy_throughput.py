"""Through HAProxy against straight to one Triton instance, in the same run: requests per second
and p50/p99 latency of add_one (the ratio is the figure); then the propagation time from a
znode appearing or going in ZooKeeper to HAProxy's backend following it.

Needs the lab with the main job's service (make lab): tarn-demo, 2 instances, HAProxy on the
edge published at 127.0.0.1:18000.

    python bench/haproxy_throughput.py [--seconds 15] [--threads 8] [--rounds 5] [--json PATH]

``--json`` also keeps every propagation time and, as their baseline, how long one read of the
backend's state takes (the measurement's own resolution).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import tritonclient.http as triton_http
from kazoo.client import KazooClient

from tarn.haproxy.plan import AdminState
from tarn.haproxy.runtime import parse_servers_state

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run alone: bench.result from the root
from bench.common import percentile
from bench.result import Figure, Result

HAPROXY = "127.0.0.1:18000"
DIRECT = "worker1:8000"
ZK_PATH = "/services/triton/instances"
INPUT = np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32)
DIRECT_NAME, HAPROXY_NAME = "direct to one instance", "through HAProxy (2 instances)"
Hammered = tuple[float, list[float], int]  # requests/s, sorted latencies, failures


def hammer(url: str, seconds: float, threads: int) -> Hammered:
    """Requests per second, latencies and failures of ``threads`` closed-loop clients."""
    latencies: list[float] = []
    failures = [0]
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def client() -> None:
        connection = triton_http.InferenceServerClient(url, connection_timeout=5, network_timeout=30)
        mine: list[float] = []
        failed = 0
        while time.monotonic() < stop:
            tensor = triton_http.InferInput("INPUT0", [4], "FP32")
            tensor.set_data_from_numpy(INPUT)
            began = time.monotonic()
            try:
                connection.infer("add_one", [tensor])
                mine.append(time.monotonic() - began)
            except Exception:  # counted, whatever the kind
                failed += 1
        with lock:
            latencies.extend(mine)
            failures[0] += failed

    workers = [threading.Thread(target=client) for unused in range(threads)]
    started = time.monotonic()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return len(latencies) / (time.monotonic() - started), sorted(latencies), failures[0]


def backend_ready() -> set[str]:
    text = subprocess.run(
        ["podman", "exec", "tarn-lab-edge", "sh", "-c",
         "echo 'show servers state triton_backend' | socat - /var/run/haproxy.sock"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return {f"{s.addr}:{s.port}" for s in parse_servers_state(text) if s.admin is AdminState.READY}


def timed_backend_ready(reads: list[float]) -> set[str]:
    """backend_ready(), its duration appended to ``reads``."""
    began = time.monotonic()
    found = backend_ready()
    reads.append(time.monotonic() - began)
    return found


def propagation(zk: KazooClient, rounds: int) -> tuple[list[float], list[float], list[float]]:
    """A znode for an address nothing listens on (10.89.42.11:8999): seconds until the backend
    takes it, and until it lets it go after the znode is deleted; and each read of the backend."""
    endpoint = "10.89.42.11:8999"
    record = {"service": "bench", "instance": "bench-0", "container_id": "bench", "ip": "10.89.42.11",
              "http_port": 8999, "grpc_port": 8998, "metrics_port": 8997, "host": "worker1",
              "url": f"http://{endpoint}", "models": []}  # fmt: skip
    added: list[float] = []
    removed: list[float] = []
    reads: list[float] = []
    while len(added) < rounds:
        began = time.monotonic()
        zk.create(f"{ZK_PATH}/bench-propagation", json.dumps(record).encode(), ephemeral=True, makepath=True)
        while endpoint not in timed_backend_ready(reads):
            time.sleep(0.02)
        added.append(time.monotonic() - began)
        began = time.monotonic()
        zk.delete(f"{ZK_PATH}/bench-propagation")
        while endpoint in timed_backend_ready(reads):
            time.sleep(0.02)
        removed.append(time.monotonic() - began)
        time.sleep(1.5)  # the slot drains, then goes to MAINT before the next round
    return added, removed, reads


def throughput(result: Hammered) -> dict[str, Any]:
    rps, latencies, failed = result
    return {
        "requests_per_s": rps, "p50_ms": percentile(latencies, 0.5) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
        "requests": len(latencies), "failed": failed,
    }  # fmt: skip


def figures(
    direct: Hammered, balanced: Hammered, added: list[float], removed: list[float], reads: list[float]
) -> list[Figure]:
    """HAProxy against direct; each propagation time against one read of the backend (its resolution)."""
    read_ms = statistics.median(reads) * 1000
    return [
        {"name": "HAProxy requests/s", "value": balanced[0], "unit": "req/s", "baseline": direct[0],
         "baseline_name": "direct"},
        {"name": "HAProxy p50", "value": percentile(balanced[1], 0.5) * 1000, "unit": "ms",
         "baseline": percentile(direct[1], 0.5) * 1000, "baseline_name": "direct"},
        {"name": "znode added -> in HAProxy backend (median)", "value": statistics.median(added) * 1000,
         "unit": "ms", "baseline": read_ms, "baseline_name": "one backend read"},
        {"name": "znode deleted -> out of HAProxy backend (median)",
         "value": statistics.median(removed) * 1000, "unit": "ms", "baseline": read_ms,
         "baseline_name": "one backend read"},
    ]  # fmt: skip


def compare_throughput(seconds: float, threads: int) -> dict[str, Hammered]:
    """Direct (the baseline) and through HAProxy, each warmed up first; printed with their ratio."""
    results = {}
    for name, url in ((DIRECT_NAME, DIRECT), (HAPROXY_NAME, HAPROXY)):
        hammer(url, 2, threads)  # warm-up: connections, Python backend stubs
        results[name] = hammer(url, seconds, threads)
    for name, (rps, latencies, failed) in results.items():
        print(
            f"{name}: {rps:.0f} requests/s, p50 {percentile(latencies, 0.5) * 1000:.1f} ms,"
            f" p99 {percentile(latencies, 0.99) * 1000:.1f} ms, {failed} failed"
        )
    direct, balanced = results[DIRECT_NAME], results[HAPROXY_NAME]
    print(
        f"ratio HAProxy/direct: {balanced[0] / direct[0]:.2f}x requests/s,"
        f" {percentile(balanced[1], 0.5) / percentile(direct[1], 0.5):.2f}x p50 latency"
        f" ({threads} closed-loop clients on this 2-core machine, which also runs the lab)"
    )
    return results


def measure_propagation(rounds: int) -> tuple[list[float], list[float], list[float]]:
    """propagation() against the lab's ZooKeeper, printed."""
    zk = KazooClient(hosts="master:2181")
    zk.start(timeout=15)
    try:
        added, removed, reads = propagation(zk, rounds)
    finally:
        zk.stop()
    print(
        f"ZooKeeper -> HAProxy backend: added median {statistics.median(added) * 1000:.0f} ms"
        f" (max {max(added) * 1000:.0f}), removed median {statistics.median(removed) * 1000:.0f} ms"
        f" (max {max(removed) * 1000:.0f}); each includes one `podman exec` to read the backend"
    )
    return added, removed, reads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write the figures and every sample here")
    args = parser.parse_args()
    results = compare_throughput(args.seconds, args.threads)
    added, removed, reads = measure_propagation(args.rounds)
    if args.json:
        parameters = {"seconds": args.seconds, "threads": args.threads, "rounds": args.rounds}
        samples = {
            "throughput": {
                key: throughput(results[name])
                for key, name in (("direct", DIRECT_NAME), ("haproxy", HAPROXY_NAME))
            },
            "propagation": {"added_s": added, "removed_s": removed, "backend_read_s": reads},
        }
        found = figures(results[DIRECT_NAME], results[HAPROXY_NAME], added, removed, reads)
        Result("haproxy_throughput", found, parameters, samples).write(args.json)


if __name__ == "__main__":
    main()
