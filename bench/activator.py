"""The activator under overload, and what its backup server costs the entry when instances are up.

1. Overload: `tarn activator` (the zipapp the haproxy role installs) holds ``--max-held``
   requests with 4 KiB bodies while no instance is ready; as many again are sent on top. Printed:
   its RSS idle, holding the limit, and after the excess (which must get 503 + Retry-After at
   once), so the bound on memory shows.
2. Entry latency: a real HAProxy in front of an instance (an HAProxy frontend that answers 200
   itself, so the instance adds no noise), once with the activator as backup server and once
   without, alternating in the same run. Printed: p50/p99 per configuration and the activator's
   request counter, which must not move.

Everything on loopback; the instances' source is a local stand-in for the controller's
/instances.

    python bench/activator.py [--held 1000] [--requests 4000] [--json PATH]
"""

from __future__ import annotations

import argparse
import http.client
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tarn import payload

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run alone: bench.result from the root
from bench.common import percentile
from bench.result import Figure, Result
from tests.support.loopback import free_port


class Instances(BaseHTTPRequestHandler):
    """The controller's /instances (text) and /wake: the activator's source and its demand sink."""

    listed = ""

    def do_GET(self) -> None:
        body = Instances.listed.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self.send_response(202)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return -1


def metric(admin: int, name: str) -> float:
    conn = http.client.HTTPConnection("127.0.0.1", admin, timeout=5)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name))


def post(port: int, body: bytes, timeout: float = 60) -> tuple[int, str | None, float]:
    began = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(
            "POST", "/v2/models/add_one/infer", body=body, headers={"Content-Type": "application/json"}
        )
        reply = conn.getresponse()
        reply.read()
        return reply.status, reply.getheader("Retry-After"), time.monotonic() - began
    except OSError:
        return 0, None, time.monotonic() - began
    finally:
        conn.close()


def wait_started(admin: int, timeout_s: float = 20.0) -> None:
    """Until the activator's admin port answers its metrics."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            metric(admin, "tarn_activator_requests_held")
            return
        except OSError:
            assert time.monotonic() < deadline, "the activator did not start"
            time.sleep(0.1)


def overload(zipapp: Path, held: int) -> dict[str, Any]:
    source = ThreadingHTTPServer(("127.0.0.1", 0), Instances)
    threading.Thread(target=source.serve_forever, daemon=True).start()
    listen, admin = free_port(), free_port()
    activator = subprocess.Popen(
        [sys.executable, "-I", str(zipapp), "activator", "--listen", f"127.0.0.1:{listen}",
         "--admin", f"127.0.0.1:{admin}", "--max-held", str(held), "--hold-timeout", "120",
         "--controller-url", f"http://127.0.0.1:{source.server_address[1]}", "--interval", "1"],
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_started(admin)
        idle = rss_kib(activator.pid)
        body = b'{"inputs":[' + b"1.0," * 1000 + b"1.0]}"  # about 4 KiB
        with ThreadPoolExecutor(held + 64) as pool:
            holding = [pool.submit(post, listen, body, 150) for count in range(held)]
            while metric(admin, "tarn_activator_requests_held") < held:
                time.sleep(0.2)
            full = rss_kib(activator.pid)
            excess = [f.result() for f in [pool.submit(post, listen, body) for count in range(held)]]
            after = rss_kib(activator.pid)
            refused = [e for e in excess if e[0] == 503 and e[1]]
            slowest = max(e[2] for e in excess)
            print(
                f"overload: RSS idle {idle / 1024:.1f} MiB, holding {held} requests {full / 1024:.1f} MiB "
                f"({(full - idle) / held:.1f} KiB each), after {held} more {after / 1024:.1f} MiB; "
                f"the excess: {len(refused)}/{held} got 503 + Retry-After, slowest {slowest * 1000:.0f} ms"
            )
            Instances.listed = ""  # let the held ones time out quickly: stop the activator instead
            # inside the pool's block: leaving it waits for every held request (--hold-timeout, 120 s)
            activator.terminate()
            for future in holding:
                future.result()
        return {
            "held": held, "rss_idle_kib": idle, "rss_holding_kib": full, "rss_after_excess_kib": after,
            "kib_per_held": (full - idle) / held, "excess_refused": len(refused),
            "excess_slowest_ms": slowest * 1000,
        }  # fmt: skip
    finally:
        if activator.poll() is None:
            activator.kill()
        activator.wait()
        source.shutdown()


HAPROXY_CFG = """
global
    maxconn 4096
defaults
    mode http
    timeout connect 5s
    timeout client 50s
    timeout server 50s
frontend instance
    bind 127.0.0.1:{instance}
    http-request return status 200 content-type text/plain string ok
frontend entry
    bind 127.0.0.1:{entry}
    default_backend triton
backend triton
    balance roundrobin
    option redispatch
    retries 3
    default-server check inter 1s fall 2 rise 1 observe layer4 error-limit 1 on-error mark-down
    server triton-1 127.0.0.1:{instance}
{backup}
"""


def entry_latency(zipapp: Path, requests: int) -> dict[str, Any]:
    instance, entry, listen, admin = free_port(), free_port(), free_port(), free_port()
    source = ThreadingHTTPServer(("127.0.0.1", 0), Instances)
    threading.Thread(target=source.serve_forever, daemon=True).start()
    Instances.listed = f"127.0.0.1:{instance}\n"
    activator = subprocess.Popen(
        [sys.executable, "-I", str(zipapp), "activator", "--listen", f"127.0.0.1:{listen}",
         "--admin", f"127.0.0.1:{admin}", "--controller-url", f"http://127.0.0.1:{source.server_address[1]}"],
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    folder = Path(tempfile.mkdtemp(prefix="tarn-bench-activator."))
    configs = {}
    for name, backup in (
        ("without", ""),
        ("with", f"    server activator 127.0.0.1:{listen} backup no-check"),
    ):
        path = folder / f"{name}.cfg"
        path.write_text(HAPROXY_CFG.format(instance=instance, entry=entry, backup=backup))
        configs[name] = path
    latencies: dict[str, list[float]] = {"without": [], "with": []}
    try:
        wait_started(admin)  # a fixed wait failed on a busy machine
        before = metric(admin, "tarn_activator_requests_total")
        for round_number in range(4):  # alternate, so drift on the machine hits both alike
            for name, path in configs.items():
                proxy = subprocess.Popen(["haproxy", "-f", str(path), "-db"], stderr=subprocess.DEVNULL)
                try:
                    time.sleep(1.5)  # the first check marks triton-1 up
                    conn = http.client.HTTPConnection("127.0.0.1", entry, timeout=10)
                    for count in range(requests // 4 + 50):
                        began = time.perf_counter()
                        conn.request("GET", "/v2/health/ready")
                        conn.getresponse().read()
                        if count >= 50:  # warm-up left out
                            latencies[name].append(time.perf_counter() - began)
                    conn.close()
                finally:
                    proxy.terminate()
                    proxy.wait()
            del round_number
        carried = metric(admin, "tarn_activator_requests_total") - before
    finally:
        activator.terminate()
        activator.wait()
        source.shutdown()
    found: dict[str, Any] = {}
    for name, values in latencies.items():
        p99 = percentile(values, 0.99)
        print(
            f"entry {name} the activator as backup: p50 {statistics.median(values) * 1e6:.0f} µs, "
            f"p99 {p99 * 1e6:.0f} µs over {len(values)} requests"
        )
        found[name] = {
            "p50_us": statistics.median(values) * 1e6,
            "p99_us": p99 * 1e6,
            "requests": len(values),
        }
    ratio = statistics.median(latencies["with"]) / statistics.median(latencies["without"])
    print(f"with / without (p50): {ratio:.2f}; requests through the activator meanwhile: {carried:.0f}")
    return found | {"through_activator": carried}


def figures(held: dict[str, Any], entry: dict[str, Any]) -> list[Figure]:
    """The entry's p50 with the activator as backup against without; the excess refused at once."""
    return [
        {"name": "entry p50 with the activator as backup", "value": entry["with"]["p50_us"], "unit": "us",
         "baseline": entry["without"]["p50_us"], "baseline_name": "without"},
        {"name": "requests through the activator while instances were up",
         "value": entry["through_activator"], "unit": "", "goal": "0",
         "met": entry["through_activator"] == 0},
        {"name": f"RSS holding {held['held']} requests", "value": held["rss_holding_kib"] / 1024,
         "unit": "MiB", "baseline": held["rss_idle_kib"] / 1024, "baseline_name": "idle"},
        {"name": f"excess requests refused with 503 + Retry-After (of {held['held']})",
         "value": held["excess_refused"], "unit": "",
         "goal": f"all {held['held']}", "met": held["excess_refused"] == held["held"]},
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--held", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # thousands of sockets, here and in the child
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with tempfile.TemporaryDirectory() as scratch:
        zipapp = Path(scratch) / "tarn.pyz"
        zipapp.write_bytes(payload.controller_zipapp())
        os.environ.pop("http_proxy", None)
        held = overload(zipapp, args.held)
        entry = entry_latency(zipapp, args.requests)
    if args.json:
        parameters = {"held": args.held, "requests": args.requests}
        samples = {"overload": held, "entry": entry}
        Result("activator", figures(held, entry), parameters, samples).write(args.json)


if __name__ == "__main__":
    main()
