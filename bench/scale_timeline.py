"""Load step -> scale-up decision -> new instance ready -> in discovery -> serving, on the lab.

A service of its own (process runtime, min 1 / max 2, a 1 s tick, 2 requests in flight per
instance as full load, no anti-affinity and a port stride so both instances fit on one worker).
Once its first instance serves and the controller has idled a few ticks, a constant load starts
(t = 0) through what a client does: the controller's /instances?format=text, re-read every
0.2 s (tests/e2e/load.py sends the requests). Then the wall-clock times, from t = 0, of:

  decision   the controller's scale-up event (/dashboard/data "events": the controller's clock,
             which is this machine's: the lab's containers share its kernel)
  target     the controller's /instances first shows target 2 (this machine's poll, every 50 ms)
  container  the RM lists the second Triton container (in the controller's /instances)
  ready      its Triton answers /v2/health/ready
  znode      its znode appears in ZooKeeper
  discovery  a client's /instances?format=text lists it
  serving    the load's first answer from it

Baselines, same run: the first instance's submit -> Triton ready and -> znode (the cold path the
scale-up's container -> ready and its load step -> in discovery compare with), its own ready ->
znode (the registration the scale-up's ready -> znode repeats) and the tick (for the decision).

The lab has 8 vcores and 8 GiB for containers: beside the main job's tarn-demo (2 instances) this
service may not fit, so tarn-demo is destroyed first when the free capacity is short (unless
--keep-demo), and the bench says so; `make lab-job` brings it back.

    python bench/scale_timeline.py [--threads 6] [--settle 8] [--timeout 300] [--json PATH]
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import requests
from kazoo.client import KazooClient

from tarn.clients.resourcemanager import ResourceManager
from tarn.clients.triton import Triton
from tarn.errors import TarnError
from tarn.stdlib.webhdfs import SimpleAuth, WebHdfsClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run alone: bench.result from the root
from bench.result import Figure, Result

if TYPE_CHECKING:
    from tests.support.load import Discovery, Load

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[1]
MASTER = os.environ.get("TARN_LAB_MASTER", "master")
USER = "tarn"
SERVICE = "tarn-bench-scale"
COOLDOWN_MS = 10_000  # between two scaling changes; also the wait after the controller starts
CONTROLLER_START_S = 10  # submission -> the controller's first tick, at most (the AM launches it)
DEMO = "tarn-demo"  # lab/main_job.py's service
ZK_PATH = f"/services/{SERVICE}/instances"  # its own path: the edge's HAProxy does not follow it
MODELS_ON_HDFS = f"/user/{USER}/bench-scale-models"
BASE_PORT, STRIDE, AM_PORT = 8300, 10, 8893  # apart from the e2e tests' services
TICK_S = 1
CLUSTER = ["--rm-url", f"http://{MASTER}:8088", "--webhdfs-url", f"http://{MASTER}:9870"]
# YARN's service AM (yarn.service.am-resource: 1 vcore, 1024 MB), the controller, two instances
NEED_VCORES, NEED_MB = 1 + 1 + 2 * 1, 1024 + 512 + 2 * 768
EVENTS = ("decision", "target", "container", "ready", "znode", "discovery", "serving")
GOAL_READY_TO_ZNODE_S = 2.0  # tests/e2e/test_controller.py's bound on registration


def tarn(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tarn", *args], capture_output=True, text=True, timeout=300, check=False
    )


def wait_for(probe: Callable[[], T | None], timeout: float, what: str, every: float = 0.05) -> T:
    """Poll until the probe returns something truthy; exit naming ``what`` on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(every)
    sys.exit(f"timed out after {timeout:.0f} s waiting for {what}")


def free_capacity(rm: ResourceManager) -> tuple[int, int]:
    """(vcores, MB) free on the running NodeManagers."""
    running = [n for n in rm.nodes() if n.get("state") == "RUNNING"]
    return (
        sum(int(n.get("availableVirtualCores", 0)) for n in running),
        sum(int(n.get("availMemoryMB", 0)) for n in running),
    )


def fits(free: tuple[int, int]) -> bool:
    return free[0] >= NEED_VCORES and free[1] >= NEED_MB


def make_room(rm: ResourceManager, keep_demo: bool) -> bool:
    """Destroy tarn-demo if this service does not fit beside it; whether it was destroyed."""
    free = free_capacity(rm)
    if fits(free):
        return False
    short = f"{free[0]} vcores and {free[1]} MB free, this bench needs {NEED_VCORES} vcores and {NEED_MB} MB"
    if rm.service(DEMO) is None:
        sys.exit(f"the lab is short of room ({short}) and {DEMO} is not what holds it: free some first")
    if keep_demo:
        sys.exit(f"the lab is short of room ({short}) and --keep-demo keeps {DEMO}")
    print(f"{short}: destroying {DEMO} to make room (`make lab-job` brings it back)", flush=True)
    done = tarn("destroy", "--service-name", DEMO, "--user", USER, *CLUSTER)
    if done.returncode:
        sys.exit(f"tarn destroy {DEMO}: {done.stderr.strip()}")
    wait_for(lambda: fits(free_capacity(rm)), 120, f"the room {DEMO} held", every=1)
    return True


class Controller:
    """The service's controller API; its address is looked up in the RM once, again after a failure."""

    def __init__(self, rm: ResourceManager, token: str) -> None:
        self._rm, self._token = rm, token
        self._host: str | None = None

    def _lookup(self) -> str | None:
        service = self._rm.service(SERVICE) or {}
        for component in service.get("components", []):
            if component["name"] == "controller":
                for container in component.get("containers", []):
                    address = container.get("ip") or container.get("hostname")
                    return str(address) if address else None
        return None

    def get(self, path: str) -> requests.Response:
        self._host = self._host or self._lookup()
        if self._host is None:
            raise requests.ConnectionError("no controller container yet")
        try:
            return requests.get(
                f"http://{self._host}:{AM_PORT}{path}", headers={"X-TARN-Token": self._token}, timeout=5
            )
        except requests.RequestException:
            self._host = None  # moved, or not up yet: ask the RM next time
            raise

    def listing(self) -> dict[str, Any] | None:
        """/instances as JSON; None while the controller does not answer."""
        try:
            reply = self.get("/instances")
        except (requests.RequestException, TarnError):
            return None
        return reply.json() if reply.status_code == 200 else None

    def scale_ups(self) -> list[dict[str, Any]]:
        """The scaling history's scale-up events (wall clock "at", target_from/to, reason)."""
        try:
            reply = self.get("/dashboard/data")
        except (requests.RequestException, TarnError):
            return []
        if reply.status_code != 200:
            return []
        return [e for e in reply.json().get("events", []) if e.get("direction") == "up"]


def addressed(row: dict[str, Any]) -> bool:
    return str(row.get("ip") or "").count(".") == 3


def registered(zk: KazooClient) -> set[str]:
    """Container ids with a znode (the znode's name)."""
    return set(zk.get_children(ZK_PATH)) if zk.exists(ZK_PATH) else set()


def first_instance(controller: Controller) -> dict[str, Any] | None:
    listing = controller.listing()
    rows = [r for r in (listing or {}).get("instances", []) if addressed(r)]
    return rows[0] if rows else None


def cold_start(
    controller: Controller, zk: KazooClient, submitted_at: float
) -> tuple[dict[str, Any], dict[str, float]]:
    """The first instance, and the baseline: seconds from submit to its Triton ready and its znode."""
    first = wait_for(lambda: first_instance(controller), 300, "the first Triton container with an address")
    triton = Triton(first["ip"], first["http_port"], timeout=0.5)
    wait_for(triton.ready, 300, "the first Triton ready")
    ready_at = time.time()
    wait_for(lambda: first["container_id"] in registered(zk), 60, "the first instance's znode")
    znode_at = time.time()
    return first, {
        "submit_to_ready_s": ready_at - submitted_at,
        "submit_to_znode_s": znode_at - submitted_at,
        "ready_to_znode_s": znode_at - ready_at,
    }


class Watch:
    """Every 50 ms during the load step: the first wall-clock time each event was seen."""

    def __init__(self, controller: Controller, zk: KazooClient, first_id: str, t0: float) -> None:
        self.controller, self.zk, self.first_id, self.t0 = controller, zk, first_id, t0
        self.stamps: dict[str, float] = {}
        self.second: dict[str, Any] | None = None
        self.reason = ""
        self._triton: Triton | None = None
        self._events_read = 0.0

    @property
    def address(self) -> str | None:
        return f"{self.second['ip']}:{self.second['http_port']}" if self.second else None

    def look(self, discovery: Discovery, by_target: dict[str, int]) -> None:
        now = time.time()
        if "decision" not in self.stamps and now - self._events_read >= 0.25:  # a heavier page
            self._events_read = now
            ups = [e for e in self.controller.scale_ups() if e["at"] >= self.t0]
            if ups:
                self.stamps["decision"], self.reason = ups[0]["at"], str(ups[0].get("reason", ""))
        listing = self.controller.listing() or {}
        if listing.get("target", 0) >= 2:
            self.stamps.setdefault("target", now)
        if self.second is None:
            others = [r for r in listing.get("instances", []) if r["container_id"] != self.first_id]
            if others:
                self.stamps.setdefault("container", now)
                if addressed(others[0]):
                    self.second = others[0]
                    self._triton = Triton(others[0]["ip"], others[0]["http_port"], timeout=0.5)
        if self.second is None or self.address is None:
            return
        if "ready" not in self.stamps and self._triton is not None and self._triton.ready():
            self.stamps["ready"] = time.time()
        if "znode" not in self.stamps and self.second["container_id"] in registered(self.zk):
            self.stamps["znode"] = time.time()
        if self.address in discovery.first_listed:
            self.stamps.setdefault("discovery", discovery.first_listed[self.address])
        if by_target.get(self.address, 0) > 0:
            self.stamps.setdefault("serving", time.time())


def relative(stamps: dict[str, float], t0: float) -> dict[str, float | None]:
    """Each event's seconds after the load step, None if it was not seen."""
    return {name: (stamps[name] - t0 if name in stamps else None) for name in EVENTS}


def answers_per_second(finished_at: list[float], t0: float, until: float) -> list[int]:
    """The load's answers (good or not) in each second from the load step."""
    bins = [0] * max(1, int(until - t0) + 1)
    for at in finished_at:
        if t0 <= at < until:
            bins[int(at - t0)] += 1
    return bins


def gap(events: dict[str, float | None], later: str, earlier: str) -> float | None:
    end, start = events[later], events[earlier]
    return None if end is None or start is None else end - start


def figures(events: dict[str, float | None], baseline: dict[str, float]) -> list[Figure]:
    """Each step of the scale-up beside what the same run's first instance took for the same path."""
    ready_to_znode = gap(events, "znode", "ready")
    return [
        {"name": "load step -> scale-up decision", "value": events["decision"], "unit": "s",
         "baseline": TICK_S, "baseline_name": "one tick"},
        {"name": "scale-up: container listed -> Triton ready", "value": gap(events, "ready", "container"),
         "unit": "s", "baseline": baseline["submit_to_ready_s"],
         "baseline_name": "first instance: submit -> ready"},
        {"name": "scale-up: Triton ready -> znode", "value": ready_to_znode, "unit": "s",
         "baseline": baseline["ready_to_znode_s"], "baseline_name": "first instance: ready -> znode",
         "goal": f"<= {GOAL_READY_TO_ZNODE_S:g} s",
         "met": None if ready_to_znode is None else ready_to_znode <= GOAL_READY_TO_ZNODE_S},
        {"name": "load step -> new instance serving", "value": events["serving"], "unit": "s",
         "baseline": baseline["submit_to_znode_s"], "baseline_name": "first instance: submit -> znode"},
    ]  # fmt: skip


def e2e_load() -> tuple[type[Load], type[Discovery]]:
    """The e2e tests' load generator and client discovery, as a script run does not see them."""
    sys.path.insert(0, str(ROOT))
    from tests.support.load import Discovery, Load

    return Load, Discovery


def load_step(
    controller: Controller, zk: KazooClient, first_id: str, threads: int, timeout: float
) -> tuple[float, Watch, dict[str, Any]]:
    """Start the load; watch until the new instance answers (or the timeout). t0, the watch, the load."""
    load_type, discovery_type = e2e_load()
    with discovery_type(lambda: controller.get("/instances?format=text")) as discovery:
        t0 = time.time()
        watch = Watch(controller, zk, first_id, t0)
        with load_type(discovery.targets, threads=threads) as load:
            deadline = time.monotonic() + timeout
            while "serving" not in watch.stamps and time.monotonic() < deadline:
                watch.look(discovery, dict(load.tally.by_target))
                time.sleep(0.05)
            tally = load.stop()
    until = time.time()
    summary = {
        "threads": threads, "ok": tally.ok, "failed": tally.failed, "errors": tally.errors[:5],
        "p50_ms": statistics.median(tally.latencies) * 1000 if tally.latencies else None,
        "by_target": tally.by_target, "answers_per_s": answers_per_second(tally.finished_at, t0, until),
    }  # fmt: skip
    return t0, watch, summary


def print_timeline(events: dict[str, float | None], reason: str, baseline: dict[str, float]) -> None:
    print("t = 0: the load step")
    for name in EVENTS:
        seconds = events[name]
        shown = "not seen" if seconds is None else f"{seconds:+7.2f} s"
        print(f"  {name:<10} {shown}" + (f"  ({reason})" if name == "decision" and reason else ""))
    print(
        f"baseline, the first instance: submit -> Triton ready {baseline['submit_to_ready_s']:.1f} s,"
        f" -> znode {baseline['submit_to_znode_s']:.1f} s"
        f" (ready -> znode {baseline['ready_to_znode_s']:.2f} s)"
    )


def submit(token: str, zk_hosts: str) -> None:
    done = tarn(
        "submit", "--service-name", SERVICE, "--user", USER, "--runtime", "process",
        "--model-repository", f"hdfs://{MODELS_ON_HDFS}", f"--token={token}",  # may start with "-"
        "--port", str(BASE_PORT), "--grpc-port", str(BASE_PORT + 1), "--metrics-port", str(BASE_PORT + 2),
        "--port-stride", str(STRIDE), "--no-anti-affinity", "--am-port", str(AM_PORT),
        "--min-instances", "1", "--max-instances", "2", "--cooldown", str(COOLDOWN_MS),
        "--tick-seconds", str(TICK_S),
        "--concurrency-per-instance", "2", "--gpus-per-instance", "0",
        "--memory-mb", "768", "--vcores", "1", "--controller-memory-mb", "512",
        "--zk-ensemble", zk_hosts, "--zk-path", ZK_PATH, *CLUSTER,
    )  # fmt: skip
    if done.returncode:
        sys.exit(f"tarn submit {SERVICE}: {done.stderr.strip()}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--threads", type=int, default=6, help="the load's closed-loop clients (default 6)")
    parser.add_argument(
        "--settle", type=float, default=8, help="idle seconds before the load step (default 8)"
    )
    parser.add_argument(
        "--timeout", type=float, default=300, help="for the new instance to serve (default 300)"
    )
    parser.add_argument(
        "--keep-demo", action="store_true", help=f"never destroy {DEMO}; fail if short of room"
    )
    parser.add_argument("--json", type=Path, help="also write the timeline and its baselines here")
    return parser.parse_args()


def measure(
    args: argparse.Namespace, rm: ResourceManager, hdfs: WebHdfsClient, destroyed_demo: bool
) -> tuple[dict[str, float], float, Watch, dict[str, Any]]:
    """The service submitted, its first instance's cold start (the baseline), then the load step:
    the baseline, t0, the watch and the load; the service and its models gone again in any case."""
    zk_hosts = f"{MASTER}:2181"
    token = secrets.token_urlsafe(16)
    tarn("destroy", "--service-name", SERVICE, "--user", USER, *CLUSTER)  # a leftover of an interrupted run
    hdfs.upload_tree(ROOT / "examples" / "model_repository", MODELS_ON_HDFS)
    zk = KazooClient(hosts=zk_hosts)
    zk.start(timeout=15)
    try:
        submitted_at = time.time()
        submit(token, zk_hosts)
        controller = Controller(rm, token)
        first, baseline = cold_start(controller, zk, submitted_at)
        # A (re)started controller waits one cooldown before its first change: the step comes after
        # it, and after a few idle ticks, so the decision measures the reaction, not the start-up.
        # (the controller starts within CONTROLLER_START_S of the submission)
        cooled = submitted_at + CONTROLLER_START_S + COOLDOWN_MS / 1000
        time.sleep(max(args.settle, cooled - time.time()))
        t0, watch, load = load_step(controller, zk, first["container_id"], args.threads, args.timeout)
    finally:
        zk.stop()
        zk.close()
        tarn("destroy", "--service-name", SERVICE, "--user", USER, *CLUSTER)
        hdfs.delete(MODELS_ON_HDFS, recursive=True)
        if destroyed_demo:
            print(f"{DEMO} was destroyed to make room: `make lab-job` brings it back")
    return baseline, t0, watch, load


def main() -> None:
    args = parse_args()
    rm = ResourceManager([f"http://{MASTER}:8088"], user=USER)
    hdfs = WebHdfsClient(f"http://{MASTER}:9870", SimpleAuth(USER))
    destroyed_demo = make_room(rm, args.keep_demo)
    baseline, t0, watch, load = measure(args, rm, hdfs, destroyed_demo)
    events = relative(watch.stamps, t0)
    print_timeline(events, watch.reason, baseline)
    print(f"load: {args.threads} clients, {load['ok']} answered, {load['failed']} failed")
    if args.json:
        parameters = {"threads": args.threads, "settle_s": args.settle, "tick_s": TICK_S}
        samples = {
            "t0": t0,
            "events": events,
            "decision_reason": watch.reason,
            "new_instance": watch.address,
            "baseline": baseline,
            "load": load,
        }
        found = figures(events, baseline)
        Result("scale_timeline", found, parameters, samples, destroyed_demo=destroyed_demo).write(args.json)
    missing = [name for name, seconds in events.items() if seconds is None]
    if missing:
        sys.exit(f"not seen within {args.timeout:.0f} s: {', '.join(missing)}")


if __name__ == "__main__":
    main()
