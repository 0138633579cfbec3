"""The cost of each entry to the Triton instances, in the same run: requests/s and p50/p99 latency
of add_one straight to one instance (the baseline), through HAProxy, and through Knox (HTTPS,
LDAP basic auth, TARN's authorization with its cache), at each concurrency, with wrk (C, keep-alive).
Goal (issue 13): Knox >= 0.5x HAProxy's requests/s, and Knox's p50 at most 2 ms over HAProxy's at
concurrency 1. Also prints the CPU each piece used during each run, to show what limits Knox.

Needs the lab with the main job's service (make lab): tarn-demo, 2 instances, HAProxy and Knox on
the edge published at 127.0.0.1:18000 and 127.0.0.1:18443; and wrk (apt-get install wrk).

    python bench/entry_overhead.py [--seconds 10] [--rounds 3] [--connections 1,8] [--json results.json]
"""

from __future__ import annotations

import argparse
import base64
import ipaddress
import json
import os
import re
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import requests
import urllib3
from kazoo.client import KazooClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run alone: bench.result from the root
from bench.result import Figure, Result

MASTER = os.environ.get("TARN_LAB_MASTER", "master")
SERVICE = "tarn-demo"
ZK_PATH = "/services/triton/instances"
HAPROXY = "http://127.0.0.1:18000"
KNOX = f"https://127.0.0.1:18443/gateway/{SERVICE}/triton"
KNOX_USER = ("alice", "alice-password")  # Knox's demo LDAP (knox_demo_ldap_users)
EDGE = "tarn-lab-edge"
INFER = "/v2/models/add_one/infer"
# add_one's request as compact JSON (tritonclient's form)
BODY = '{"inputs":[{"name":"INPUT0","shape":[4],"datatype":"FP32","data":[1,2,3,4]}]}'
EXPECTED = [2.0, 3.0, 4.0, 5.0]
# traffic goes to this machine or to the lab's own network, nowhere else
ALLOWED = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("10.89.42.0/24"))
UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}  # wrk's time units, in ms
# the edge's processes whose CPU is measured, by a file name in their command line
PIECES = {"Knox JVM": "gateway.jar", "Knox LDAP": "ldap.jar", "HAProxy": "haproxy"}
# Issue 13's goals: Knox >= this fraction of HAProxy's requests/s; its p50 at most this over HAProxy's
GOAL_KNOX_RATIO, GOAL_KNOX_P50_OVER_MS = 0.5, 2.0


@dataclass
class Entry:
    name: str
    url: str  # base: INFER is appended
    auth: tuple[str, str] | None = None


@dataclass
class WrkResult:
    requests_per_s: float
    p50_ms: float
    p99_ms: float
    requests: int
    non_2xx: int
    socket_errors: dict[str, int]

    @property
    def errors(self) -> int:
        return self.non_2xx + sum(self.socket_errors.values())


@dataclass
class Run:
    entry: str
    connections: int
    wrk: WrkResult
    cpu_percent: dict[str, float | None] = field(default_factory=dict)  # 100 = one core


def lab_only(url: str) -> None:
    host = urlsplit(url).hostname or ""
    address = ipaddress.ip_address(socket.gethostbyname(host))
    if not any(address in network for network in ALLOWED):
        sys.exit(f"{url}: {address} is neither loopback nor the lab network")


def direct_instance(zk_hosts: str) -> str:
    """The base URL of the service's first instance (by name) in ZooKeeper."""
    zk = KazooClient(hosts=zk_hosts, timeout=10)
    zk.start(timeout=30)
    try:
        records = [json.loads(zk.get(f"{ZK_PATH}/{child}")[0]) for child in zk.get_children(ZK_PATH)]
    finally:
        zk.stop()
    mine = sorted((r for r in records if r.get("service") == SERVICE), key=lambda r: r["instance"])
    if not mine:
        sys.exit(f"direct: no instance of {SERVICE} under {ZK_PATH} on {zk_hosts}")
    return f"http://{mine[0]['ip']}:{mine[0]['http_port']}"


def check(entry: Entry) -> None:
    """One request, its answer checked: a misconfigured entry fails here, named, not under load."""
    try:
        answer = requests.post(
            entry.url + INFER,
            data=BODY,
            auth=entry.auth,
            headers={"Content-Type": "application/json"},
            timeout=30,
            verify=False,  # noqa: S501 (Knox's self-signed lab cert; wrk does not check either)
        )
    except requests.RequestException as error:
        sys.exit(f"{entry.name} ({entry.url}): {error}")
    if answer.status_code != 200:
        sys.exit(f"{entry.name} ({entry.url}): HTTP {answer.status_code}: {answer.text[:300]}")
    outputs = {o["name"]: o["data"] for o in answer.json().get("outputs", [])}
    if outputs.get("OUTPUT0") != EXPECTED:
        sys.exit(f"{entry.name} ({entry.url}): OUTPUT0 is {outputs.get('OUTPUT0')}, not {EXPECTED}")


def lua_script(entry: Entry) -> str:
    """wrk's request: the same POST for every connection (long brackets: the body has quotes)."""
    lines = [
        'wrk.method = "POST"',
        f"wrk.body = [==[{BODY}]==]",
        'wrk.headers["Content-Type"] = "application/json"',
    ]
    if entry.auth:
        token = base64.b64encode(":".join(entry.auth).encode()).decode()
        lines.append(f'wrk.headers["Authorization"] = "Basic {token}"')
    return "\n".join(lines) + "\n"


def parse_wrk(text: str) -> WrkResult:
    def number(pattern: str) -> re.Match[str]:
        found = re.search(pattern, text, re.MULTILINE)
        if not found:
            raise ValueError(f"wrk's output has no {pattern!r}:\n{text}")
        return found

    def latency(percent: int) -> float:
        found = number(rf"^\s+{percent}%\s+([\d.]+)(us|ms|s|m|h)\s*$")
        return float(found[1]) * UNITS[found[2]]

    # both lines appear only when there is something to count
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    sockets = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    kinds = ("connect", "read", "write", "timeout")
    return WrkResult(
        requests_per_s=float(number(r"^Requests/sec:\s+([\d.]+)")[1]),
        p50_ms=latency(50),
        p99_ms=latency(99),
        requests=int(number(r"^\s+(\d+) requests in ")[1]),
        non_2xx=int(non_2xx[1]) if non_2xx else 0,
        socket_errors={k: int(n) for k, n in zip(kinds, sockets.groups(), strict=True)} if sockets else {},
    )


def wrk(entry: Entry, connections: int, seconds: float, script: Path) -> WrkResult:
    command = [
        "wrk", f"-t{min(connections, 2)}", f"-c{connections}", f"-d{seconds:g}s", "--timeout", "5s",
        "--latency", "-s", str(script), entry.url + INFER,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        sys.exit(f"{entry.name}: {' '.join(command)} failed: {done.stdout}{done.stderr}")
    return parse_wrk(done.stdout)


def edge_pids() -> dict[str, list[int]]:
    """The pids (this machine's) of the pieces in the edge container: those in its pid namespace."""
    inspected = subprocess.run(
        ["podman", "inspect", "--format", "{{.State.Pid}}", EDGE], capture_output=True, text=True, check=True
    )
    namespace = os.readlink(f"/proc/{inspected.stdout.strip()}/ns/pid")
    found: dict[str, list[int]] = {name: [] for name in PIECES}
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            if os.readlink(f"/proc/{pid}/ns/pid") != namespace:
                continue
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:  # gone meanwhile
            continue
        names = {os.path.basename(arg) for arg in argv}  # java … -jar /…/bin/gateway.jar, /usr/sbin/haproxy
        for name, mark in PIECES.items():
            if mark in names:
                found[name].append(pid)
    return found


def ticks(pids: list[int]) -> int | None:
    """CPU time (user + system, clock ticks) of these processes, all their threads; None if none left."""
    total = 0
    try:
        for pid in pids:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime: fields 14 and 15 of stat(5)
    except OSError:
        return None
    return total if pids else None


def machine_ticks() -> tuple[int, int]:
    """(busy, all) clock ticks of every core, from /proc/stat's cpu line."""
    user, nice, system, idle, iowait, irq, softirq, steal = map(
        int, Path("/proc/stat").read_text().split()[1:9]
    )
    busy = user + nice + system + irq + softirq + steal
    return busy, busy + idle + iowait


def children_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measured(entry: Entry, connections: int, seconds: float, script: Path, pids: dict[str, list[int]]) -> Run:
    """One wrk run with the CPU each piece used meanwhile, in percent of one core."""
    hz, cores = os.sysconf("SC_CLK_TCK"), os.cpu_count() or 1
    before = {name: ticks(p) for name, p in pids.items()}
    busy0, all0 = machine_ticks()
    wrk0, began = children_seconds(), time.monotonic()
    result = wrk(entry, connections, seconds, script)
    wall = time.monotonic() - began
    busy1, all1 = machine_ticks()
    cpu: dict[str, float | None] = {}
    for name, p in pids.items():
        after, start = ticks(p), before[name]
        cpu[name] = None if after is None or start is None else (after - start) / hz / wall * 100
    cpu["wrk"] = (children_seconds() - wrk0) / wall * 100
    cpu["machine"] = (busy1 - busy0) / max(1, all1 - all0) * 100 * cores
    return Run(entry.name, connections, result, cpu)


WARM_STEP_S = 5.0
WARM_MIN_S = 30.0
WARM_STEADY = 0.05  # after WARM_MIN_S, a step within 5 % of the one before it: warm


def warm_up(entry: Entry, connections: int, limit_s: float, script: Path) -> list[float]:
    """Unmeasured wrk runs of WARM_STEP_S, at least WARM_MIN_S and then until the rate stops rising
    (Knox's JIT on two busy cores takes 30-50 s to reach its steady speed), at most ``limit_s`` in
    all; the rates seen."""
    rates: list[float] = []
    spent = 0.0
    while spent < limit_s:
        step = min(WARM_STEP_S, limit_s - spent)
        rates.append(wrk(entry, connections, step, script).requests_per_s)
        spent += step
        if len(rates) >= 2 and spent >= WARM_MIN_S and rates[-1] <= rates[-2] * (1 + WARM_STEADY):
            break
    return rates


def median_run(runs: list[Run]) -> Run:
    """The run with the median requests/s (the upper one of an even count)."""
    ordered = sorted(runs, key=lambda r: r.wrk.requests_per_s)
    return ordered[len(ordered) // 2]


def percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f}%"


def print_table(runs: list[Run], cores: int) -> None:
    print(f"{'entry':<8} {'conns':>5} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7}")
    for run in runs:
        w = run.wrk
        flag = "  <- ERRORS: " + json.dumps({"non-2xx": w.non_2xx, **w.socket_errors}) if w.errors else ""
        print(
            f"{run.entry:<8} {run.connections:>5} {w.requests_per_s:>9.1f} {w.p50_ms:>8.2f}"
            f" {w.p99_ms:>8.2f} {w.errors:>7}{flag}"
        )
    names = [*PIECES, "wrk", "machine"]
    print(f"\nCPU during each run, 100% = one core (machine: all {cores} cores, {cores * 100}% = all busy):")
    print(f"{'entry':<8} {'conns':>5} " + " ".join(f"{n:>10}" for n in names))
    for run in runs:
        cells = " ".join(f"{percent(run.cpu_percent.get(n)):>10}" for n in names)
        print(f"{run.entry:<8} {run.connections:>5} {cells}")


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def print_goals(runs: list[Run]) -> None:
    by = {(r.entry, r.connections): r.wrk for r in runs}
    print()
    for c in sorted({r.connections for r in runs}):
        knox, haproxy, direct = by[("knox", c)], by[("haproxy", c)], by[("direct", c)]
        ratio = knox.requests_per_s / haproxy.requests_per_s
        goal = verdict(ratio >= GOAL_KNOX_RATIO)
        print(
            f"Knox / HAProxy requests/s at {c} connections: {ratio:.2f} (goal >= {GOAL_KNOX_RATIO}): {goal}"
        )
        print(
            f"  for reference, HAProxy / direct at {c}: {haproxy.requests_per_s / direct.requests_per_s:.2f}"
            f" requests/s, p50 {haproxy.p50_ms - direct.p50_ms:+.2f} ms"
        )
    if ("knox", 1) in by:
        over = by[("knox", 1)].p50_ms - by[("haproxy", 1)].p50_ms
        print(
            f"Knox p50 - HAProxy p50 at 1 connection: {over:+.2f} ms (goal <= {GOAL_KNOX_P50_OVER_MS:g} ms):"
            f" {verdict(over <= GOAL_KNOX_P50_OVER_MS)}"
        )
    else:
        print("Knox p50 - HAProxy p50 at 1 connection: not measured (1 is not in --connections)")
    if any(r.wrk.errors for r in runs):
        print("WARNING: some runs had errors (see the table): their numbers are not valid")


def figures(runs: list[Run]) -> list[Figure]:
    """The headline figures, each against its baseline in the same run: HAProxy against direct,
    Knox against HAProxy (with issue 13's goals)."""
    by = {(r.entry, r.connections): r.wrk for r in runs}
    found: list[Figure] = []
    for c in sorted({r.connections for r in runs}):
        direct, haproxy, knox = by.get(("direct", c)), by.get(("haproxy", c)), by.get(("knox", c))
        if direct and haproxy:
            found.append(
                {"name": f"HAProxy requests/s, {c} conn.", "value": haproxy.requests_per_s, "unit": "req/s",
                 "baseline": direct.requests_per_s, "baseline_name": "direct"}
            )  # fmt: skip
        if haproxy and knox:
            ratio = knox.requests_per_s / haproxy.requests_per_s
            found.append(
                {"name": f"Knox requests/s, {c} conn.", "value": knox.requests_per_s, "unit": "req/s",
                 "baseline": haproxy.requests_per_s, "baseline_name": "HAProxy",
                 "goal": f"ratio >= {GOAL_KNOX_RATIO}", "met": ratio >= GOAL_KNOX_RATIO}
            )  # fmt: skip
    if ("knox", 1) in by and ("haproxy", 1) in by:
        knox, haproxy = by[("knox", 1)], by[("haproxy", 1)]
        found.append(
            {"name": "Knox p50, 1 conn.", "value": knox.p50_ms, "unit": "ms", "baseline": haproxy.p50_ms,
             "baseline_name": "HAProxy", "goal": f"<= HAProxy + {GOAL_KNOX_P50_OVER_MS:g} ms",
             "met": knox.p50_ms - haproxy.p50_ms <= GOAL_KNOX_P50_OVER_MS}
        )  # fmt: skip
    return found


def knox_rss_mib(pids: dict[str, list[int]]) -> str:
    if not pids.get("Knox JVM"):
        return "n/a"
    try:
        status = Path(f"/proc/{pids['Knox JVM'][0]}/status").read_text()
    except OSError:  # restarted meanwhile
        return "n/a"
    kib = re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE)
    return f"{int(kib[1]) / 1024:.0f} MiB" if kib else "n/a"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=10, help="each measured run (default 10)")
    parser.add_argument(
        "--warmup",
        type=float,
        default=60,
        help="seconds at most of unmeasured runs per entry first, until its rate stops rising (default 60;"
        " Knox's JIT: 3 s left it at half speed)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds; the median is reported (default 3)")
    parser.add_argument("--connections", default="1,8", help="concurrencies, comma-separated (default 1,8)")
    parser.add_argument("--zk", default=f"{MASTER}:2181", help="ZooKeeper, to find an instance")
    parser.add_argument("--direct", help="an instance's base URL (default: the first in ZooKeeper)")
    parser.add_argument("--json", type=Path, help="also write the runs and the headline figures here")
    return parser.parse_args()


def checked_entries(direct: str | None, zk: str) -> list[Entry]:
    """Direct (the baseline), HAProxy and Knox, each on the lab and answering add_one correctly."""
    entries = [
        Entry("direct", direct or direct_instance(zk)),
        Entry("haproxy", HAPROXY),
        Entry("knox", KNOX, KNOX_USER),
    ]
    for entry in entries:
        lab_only(entry.url)
        check(entry)
        print(f"{entry.name}: {entry.url} answers add_one correctly")
    return entries


def visible_edge_pids() -> dict[str, list[int]]:
    try:
        return edge_pids()
    except (OSError, subprocess.CalledProcessError) as error:
        print(f"the edge's processes are not visible here ({error}): no CPU figures for them")
        return {}


def every_run(
    args: argparse.Namespace, entries: list[Entry], concurrencies: list[int], pids: dict[str, list[int]]
) -> list[Run]:
    """Each entry warmed up, then every round of every concurrency and entry."""
    every: list[Run] = []
    with tempfile.TemporaryDirectory() as scratch:
        scripts = {}
        for entry in entries:
            scripts[entry.name] = Path(scratch) / f"{entry.name}.lua"
            scripts[entry.name].write_text(lua_script(entry))
            if args.warmup > 0:
                rates = warm_up(entry, max(concurrencies), args.warmup, scripts[entry.name])
                print(f"warm-up {entry.name}: " + ", ".join(f"{r:.0f}" for r in rates) + " req/s")
        # The entries take turns within each round: a drift of the shared machine's load hits all
        # of them alike rather than whichever ran last.
        for _round in range(args.rounds):
            for c in concurrencies:
                every += [measured(entry, c, args.seconds, scripts[entry.name], pids) for entry in entries]
    return every


def result(
    args: argparse.Namespace, entries: list[Entry], concurrencies: list[int], cores: int,
    runs: list[Run], every: list[Run], knox_rss: str,
) -> Result:  # fmt: skip
    parameters = {
        "seconds": args.seconds,
        "warmup": args.warmup,
        "connections": concurrencies,
        "rounds": args.rounds,
    }
    # "runs" is what --json wrote before (one object per entry and concurrency)
    samples = {
        "entries": {e.name: e.url for e in entries},
        "cores": cores,
        "runs": [asdict(r) | {"errors": r.wrk.errors} for r in runs],  # the medians
        "every_run": [asdict(r) | {"errors": r.wrk.errors} for r in every],
        "knox_rss": knox_rss,
    }
    return Result("entry_overhead", figures(runs), parameters, samples)


def main() -> None:
    args = parse_args()
    concurrencies = [int(c) for c in args.connections.split(",")]
    if not shutil.which("wrk"):
        sys.exit("wrk is not installed: apt-get install wrk (lab/preflight.sh lists it)")
    urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)  # Knox's self-signed cert
    entries = checked_entries(args.direct, args.zk)
    pids = visible_edge_pids()
    cores = os.cpu_count() or 1
    print(
        f"wrk, {args.seconds:g} s per run, connections {concurrencies}, the median of {args.rounds} rounds"
        f" (the entries in turn); this machine: {cores} cores\n"
    )
    every = every_run(args, entries, concurrencies, pids)
    runs = [
        median_run([r for r in every if r.entry == entry.name and r.connections == c])
        for entry in entries
        for c in concurrencies
    ]
    print_table(runs, cores)
    print_goals(runs)
    print(f"Knox JVM resident memory after the runs: {knox_rss_mib(pids)}")
    if args.json:
        result(args, entries, concurrencies, cores, runs, every, knox_rss_mib(pids)).write(args.json)
    if any(r.wrk.errors for r in every):
        sys.exit(1)


if __name__ == "__main__":
    main()
