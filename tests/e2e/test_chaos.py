"""Chaos on the lab (issue 11): each fault under a constant inference load through the edge's
HAProxy (the entry point clients use), one at a time, counting every failed request and the
seconds from the end of the fault until the service is whole again: YARN shows it STABLE with 2
READY Triton containers and the controller, ZooKeeper has the 2 instances and HAProxy's ready
servers are exactly them. The service runs 2 instances (min = max: the autoscaler stays out) on
the seeds' default placement, node anti-affinity (issue 47: a controller killed twice was never
relaunched there, and CI ran without it): one instance per worker, each on the same ports.

Printed per fault: `[chaos] <fault>: <ok> ok, <failed> failed, whole <s> s after the fault`. The
suite runs last (conftest). Rerun alone with `pytest -s tests/e2e/test_chaos.py` on `make lab`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException

from lab import lab_client
from tarn.clients.resourcemanager import ResourceManager
from tarn.controller.tick import REASK_AFTER_S
from tarn.errors import ClusterError
from tarn.service import controller_url as service_controller_url
from tarn.service import instances_of
from tarn.service.report import problems
from tarn.service.wait import ready, stable
from tarn.spec import instance_number
from tarn.stdlib.webhdfs import WebHdfsClient
from tests.support import ROOT
from tests.support.lab import (
    LAB_MASTER,
    LAB_USER,
    WORKERS,
    container,
    left_behind,
    podman_exec,
    restart_zookeeper,
    running_containers,
    wait_for,
)
from tests.support.lab_edge import (
    FRONTEND,
    ZK_PATH,
    Registered,
    backend_ready,
    backend_retries,
    backend_serving,
)
from tests.support.lab_service import CONNECTION, MODELS, ready_controller, run_module, run_playbook
from tests.support.load import PACED_S, Load

SERVICE = "tarn-e2e-chaos"
MODELS_ON_HDFS = f"/user/{LAB_USER}/e2e-chaos-models"
ZK_HOSTS = f"{LAB_MASTER}:2181"
OPTIONS: dict[str, Any] = {
    "service_name": SERVICE, **lab_client.runtime_options(),
    "port": 8400, "grpc_port": 8401, "metrics_port": 8402,
    "am_port": 8892, "min_instances": 2, "max_instances": 2,
    "tick_seconds": 1, "replace_unready_after": 30, "gpus_per_instance": 0, "memory_mb": 768, "vcores": 1,
    "controller_memory_mb": 512,
    "zk_ensemble": ZK_HOSTS, "zk_path": ZK_PATH, "token": "chaos-e2e-token", "model_repository": f"hdfs://{MODELS_ON_HDFS}",
}  # fmt: skip


@dataclass(frozen=True)
class Outcome:
    fault: str
    ok: int
    failed: int
    back_s: float
    errors: tuple[str, ...]
    longest_s: float  # the slowest request that succeeded: a wait, where the activator held it
    haproxy_log: tuple[str, ...] = ()  # HAProxy's lines for failed or cut requests meanwhile
    left: tuple[str, ...] = ()  # processes of ended containers still on a worker once whole


def where(pattern: str) -> str:
    """The worker running a process whose command line matches ``pattern``."""
    for worker in WORKERS:
        if podman_exec(worker, "pgrep", "-f", pattern).stdout.strip():
            return worker
    raise AssertionError(f"no worker runs {pattern!r}")


@dataclass(frozen=True)
class Watched:
    registered: Registered
    rm: ResourceManager


def whole(watched: Watched, count: int = 2) -> bool:
    """YARN: STABLE, ``count`` READY Triton containers and the controller; ZooKeeper: ``count``
    instances; HAProxy: its ready servers are exactly those."""
    try:
        service = watched.rm.service(SERVICE)
        if service is None or not (stable(service) and ready(count)(service)):
            return False
        wanted = watched.registered.endpoints()
        return len(wanted) == count and backend_ready() == wanted
    except (ClusterError, subprocess.CalledProcessError, OSError, KazooException):
        # KazooException: the test's own ZooKeeper session, e.g. expired by a slow ZooKeeper
        # restart; kazoo opens a new one, and the next probe reads again
        return False


def fresh(watched: Watched, count: int = 2) -> None:
    """The service destroyed and created again (a new YARN application) with ``count`` instances."""
    run_module("tarn_deploy", {"service_name": SERVICE, "state": "absent"})
    bounds = {"min_instances": count, "max_instances": count}
    run_module("tarn_deploy", {**OPTIONS, **bounds, "state": "started", "wait_timeout": 600})
    wait_for(lambda: whole(watched, count), 300, f"{count} instances READY, registered and behind HAProxy")


@pytest.fixture(scope="module")
def chaos(hdfs: WebHdfsClient, rm: ResourceManager) -> Iterator[Watched]:
    hdfs.upload_tree(ROOT / "examples" / "model_repository", MODELS_ON_HDFS)
    zk = KazooClient(hosts=ZK_HOSTS)
    zk.start(timeout=15)
    watched = Watched(Registered(zk, SERVICE), rm)
    try:
        fresh(watched)
        yield watched
    finally:
        zk.stop()
        zk.close()
        run_module("tarn_deploy", {"service_name": SERVICE, "state": "absent"})
        hdfs.delete(MODELS_ON_HDFS, recursive=True)


def under_load(
    watched: Watched,
    fault: str,
    inject: Callable[[], None],
    count: int = 2,
    settle: float = 1.0,
    timeout: float = 300,
) -> Outcome:
    """Inject the fault under load; wait until the service is whole again; count what failed.
    ``inject`` returns when the fault has ended (the daemon restarted, the process killed)."""
    began = time.time()
    with Load(lambda: [FRONTEND], threads=4, pause_s=PACED_S) as load:
        time.sleep(2)
        inject()
        ended = time.monotonic()
        time.sleep(settle)  # let the fault take effect before asking whether the service is whole
        wait_for(lambda: whole(watched, count), timeout, f"the service whole after: {fault}", every=0.1)
        back = time.monotonic() - ended
        time.sleep(2)
    tally = load.tally
    left = nothing_left_behind()
    kinds = sorted({error.split(": ", 1)[-1][:90] for error in tally.errors})
    logged = haproxy_errors_since(began) if tally.failed else ()
    outcome = Outcome(
        fault, tally.ok, tally.failed, back, tuple(kinds[:5]), max(tally.latencies, default=0.0), logged, left
    )
    counts = f"{tally.ok} ok, {tally.failed} failed" + (
        f" over {tally.failing_s:.2f} s" if tally.failed else ""
    )
    print(
        f"\n[chaos] {fault}: {counts}, whole {back:.1f} s after the fault, longest request "
        f"{outcome.longest_s:.1f} s",
        kinds,
    )
    for line in logged[:20]:
        print(f"[chaos] haproxy: {line}")
    for line in left:
        print(f"[chaos] left behind: {line}")
    return outcome


def nothing_left_behind(timeout: float = 20.0) -> tuple[str, ...]:
    """The processes of ended containers on the workers, once YARN has had ``timeout`` to end
    them (a stopped container gets SIGTERM, then SIGKILL after the NodeManager's delay)."""
    deadline = time.monotonic() + timeout
    while (left := left_behind()) and time.monotonic() < deadline:
        time.sleep(1)
    return tuple(left)


def haproxy_errors_since(wall: float) -> tuple[str, ...]:
    """The edge HAProxy's journal since ``wall``: the lab logs only failed or cut requests, each
    with its termination state (haproxy_log_errors_only), and HAProxy's own notices."""
    journal = podman_exec(
        "tarn-lab-edge", "journalctl", "-u", "haproxy", "--no-pager", "-o", "cat", f"--since=@{wall:.0f}",
    ).stdout  # fmt: skip
    return tuple(line for line in journal.splitlines() if line.strip())


def kill(pattern: str) -> None:
    """kill -9 the processes matching ``pattern`` on the worker that runs them."""
    podman_exec(where(pattern), "pkill", "-KILL", "-f", pattern, check=True)


def kill_one_instance() -> None:
    """The first worker's instance (each worker runs one, on the same port)."""
    kill("bin/tritonserver.*--http-port=8400 ")


TRITON = "bin/tritonserver.*--http-port=84"


def tritons() -> list[tuple[str, int, int]]:
    """(worker, pid, HTTP port) of each tritonserver of this service on the workers."""
    found = []
    for worker in WORKERS:
        for line in podman_exec(worker, "pgrep", "-af", TRITON).stdout.splitlines():
            port = re.search(r"--http-port=(\d+)", line)
            if port:
                found.append((worker, int(line.split()[0]), int(port.group(1))))
    return found


def stop_a_nodemanager_then_kill_its_triton() -> None:
    """The NodeManager of an instance stopped for 60 s (recovery on: its containers keep running)
    and started (it re-acquires them), then that instance's tritonserver killed (-9). Before the
    launcher supervised Triton, an orphaned Python-backend stub kept the container's process group
    alive, and a re-acquired container is judged by its group: RUNNING_BUT_UNREADY for good."""
    worker, pid, _port = tritons()[0]
    podman_exec(worker, "systemctl", "stop", "hadoop-yarn-nodemanager", check=True)
    time.sleep(60)
    podman_exec(worker, "systemctl", "start", "hadoop-yarn-nodemanager", check=True)
    wait_for(lambda: nodemanager_back(worker), 120, f"{worker}'s NodeManager back, with the container")
    podman_exec(worker, "kill", "-KILL", str(pid), check=True)


def nodemanager_back(worker: str) -> bool:
    """The worker's NodeManager answers and lists a running container (the one it re-acquired)."""
    try:
        return bool(running_containers(worker))
    except (requests.RequestException, ValueError):
        return False


# Run in each worker before the kill, given the killed pid and the port. Stops the killed Triton's
# successor (same port, another pid) within ~50 ms of its exec, long before it has loaded its models
# and listens, and says whether its port was listening already (then the fault came late: requests
# hang in it). Its pattern, `[t]ritonserver`, matches no command line of its own (its pgrep's), nor
# does the test's `pgrep -f` pattern match it. Polling with `podman exec pgrep` from the test once
# stopped a Triton that had served for a moment: four requests stuck in it until its replacement
# (the official CI at stop 42, docs/ci.md).
STOP_SUCCESSOR = r"""
old=$1 pattern="bin/[t]ritonserver.*--http-port=$2 " port=$(printf '%04X' "$2") end=$(( $(date +%s) + 120 ))
echo watching
while [ "$(date +%s)" -lt "$end" ]; do
  for pid in $(pgrep -f "$pattern"); do
    [ "$pid" = "$old" ] && continue
    kill -STOP "$pid" 2>/dev/null || continue
    if awk -v port=":$port" '$4 == "0A" && substr($2, length($2) - 4) == port { found = 1 }
        END { exit !found }' /proc/net/tcp /proc/net/tcp6; then state=listening; else state=starting; fi
    echo "$pid $state"
    exit 0
  done
  sleep 0.05
done
exit 1
"""
WATCHER = "tarn-chaos-stop-successor"  # the watchers' $0, by which the losers are ended


def hang_a_starting_triton() -> None:
    """kill -9 one instance and SIGSTOP its successor as soon as YARN has exec'd its tritonserver:
    a Triton that never answers ready (as one whose model never loads). It never serves, so no
    request can be lost to it; the controller replaces it after --replace-unready-after. Anti-
    affinity puts the successor on the killed one's worker (the other runs the other instance, on
    the same port: it must not be watched)."""
    worker, pid, port = tritons()[0]
    watchers = {
        node: subprocess.Popen(
            ["podman", "exec", container(node), "sh", "-c", STOP_SUCCESSOR, WATCHER, str(pid), str(port)],
            stdout=subprocess.PIPE, text=True,
        )
        for node in (worker,)
    }  # fmt: skip
    try:
        for watcher in watchers.values():
            assert watcher.stdout is not None
            assert watcher.stdout.readline().strip() == "watching", "a watcher did not start"
        podman_exec(worker, "kill", "-KILL", str(pid), check=True)
        stopped = wait_for(lambda: next((w for w, p in watchers.items() if p.poll() == 0), None), 130,
                           "YARN's relaunch of the killed instance, stopped", every=0.05)  # fmt: skip
    finally:
        for node, watcher in watchers.items():
            if watcher.poll() is None:
                podman_exec(node, "pkill", "-f", WATCHER)
                watcher.wait(timeout=30)
    said = watchers[stopped].stdout.read().split()  # type: ignore[union-attr]
    print(f"[chaos] stopped the successor on {stopped}: pid {said[0]}, {said[1]}")
    assert said[1] == "starting", "the successor was listening before it was stopped: the fault came late"


def kill_every_instance() -> None:
    """kill -9 every tritonserver of the service, on every worker, at once (side by side: the
    completions then often reach the service AM in one heartbeat, docs/recovery.md)."""
    with ThreadPoolExecutor(len(WORKERS)) as pool:
        list(pool.map(lambda worker: podman_exec(worker, "pkill", "-KILL", "-f", TRITON), WORKERS))


CONTROLLER_PROCESS = f"tarn.pyz controller.*--service-name {SERVICE}"  # its pgrep/pkill pattern


def kill_controller() -> None:
    kill(CONTROLLER_PROCESS)


def kill_application_master() -> None:
    kill(f"ServiceMaster.*{SERVICE}")


def restart_resourcemanager() -> None:
    podman_exec("tarn-lab-master", "systemctl", "restart", "hadoop-yarn-resourcemanager", check=True)


def reload_haproxy() -> None:
    podman_exec("tarn-lab-edge", "systemctl", "reload", "haproxy", check=True)


def restart_haproxy() -> None:
    podman_exec("tarn-lab-edge", "systemctl", "restart", "haproxy", check=True)


def rolling_upgrade(count: int) -> None:
    """A new "image" through tarn_deploy: YARN's rolling service upgrade, one instance at a time,
    each drained by the controller first (the process runtime has no image: an environment
    variable stands in, the same upgrade)."""
    bounds = {"min_instances": count, "max_instances": count}
    upgraded = run_module(
        "tarn_deploy", {**OPTIONS, **bounds, "env": {"TARN_IMAGE_STANDIN": "v2"}, "wait_timeout": 600}
    )
    assert "upgrade triton" in upgraded["actions"], upgraded


# (fault, inject, seconds until whole after the fault ended, why a bound is over 5 s, whether
# the fault needs an application of its own). A restart of the AM and one of the RM in the same
# application's life lose its instances (YARN 3.4.2, docs/recovery.md): each gets a fresh one.
ZERO_FAILURES = [
    (
        "kill -9 one of two instances",
        kill_one_instance,
        60,
        "YARN relaunches the container, Triton loads",
        False,
    ),
    ("kill -9 the controller", kill_controller, 60, "YARN relaunches the controller's container", False),
    ("restart ZooKeeper", restart_zookeeper, 15, "ZooKeeper's JVM starts, clients reconnect", False),
    ("reload HAProxy", reload_haproxy, 5, "", False),
    (
        "stop the NodeManager of an instance for 60 s, then kill -9 the Triton it re-acquired",
        stop_a_nodemanager_then_kill_its_triton,
        60,
        "the NM sees the container's group end, YARN relaunches it, Triton loads",
        False,
    ),
    ("restart the ResourceManager", restart_resourcemanager, 90, "the RM's JVM recovers, NMs resync", True),
    (
        "kill -9 the service AM",
        kill_application_master,
        90,
        "YARN starts the next attempt, which recovers the containers one by one",
        True,
    ),
]


# Faults of a daemon every service uses run alone when CI runs the suite in two streams (conftest);
# so do the cases below whose bounds the other stream beside them made them cross (docs/ci.md).
SHARED_DAEMONS = {restart_zookeeper, stop_a_nodemanager_then_kill_its_triton, restart_resourcemanager}


@pytest.mark.parametrize(
    ("fault", "inject", "bound", "why", "own_application"),
    [
        pytest.param(*f, id=f[0], marks=[pytest.mark.alone] if f[1] in SHARED_DAEMONS else [])
        for f in ZERO_FAILURES
    ],
)
def test_no_failed_request(
    chaos: Watched, fault: str, inject: Callable[[], None], bound: float, why: str, own_application: bool
) -> None:
    if own_application:
        fresh(chaos)
    outcome = under_load(chaos, fault, inject)
    assert outcome.ok > 50
    assert outcome.failed == 0, (outcome.errors, outcome.haproxy_log[:20])
    assert outcome.back_s <= bound, f"{fault}: whole {outcome.back_s:.1f} s after the fault; {why}"
    assert outcome.left == ()


def relaunched(rm: ResourceManager, killed: str) -> bool:
    """Another controller container than ``killed`` is READY and answers."""
    if ready_controller(rm, SERVICE) in (None, killed):
        return False
    url = service_controller_url(rm.service(SERVICE) or {})
    try:
        return url is not None and requests.get(f"{url}/health", timeout=2).status_code == 200
    except requests.RequestException:
        return False


def test_the_controller_killed_three_times_in_one_am_attempt(chaos: Watched) -> None:
    """On the default placement the controller is relaunched however often it dies in one AM
    attempt (YARN 3.4's RM failed every AM heartbeat on its second SchedulingRequest without a
    constraint of its own: docs/recovery.md); the instances serve meanwhile."""
    application = str((chaos.rm.service(SERVICE) or {})["id"])
    attempts = len(chaos.rm.app_attempts(application))
    absent: list[float] = []
    said: list[str] = []  # tarn status's problem line while the controller was away

    def back(before: str) -> bool:
        if relaunched(chaos.rm, before):
            return True
        lines = problems(chaos.rm.service(SERVICE) or {})
        said.extend(line for line in lines if "controller is not running" in line)
        return False

    def kill_and_wait() -> None:
        before = ready_controller(chaos.rm, SERVICE)
        assert before is not None, "no READY controller to kill"
        kill_controller()
        killed_at = time.monotonic()
        wait_for(lambda: back(before), 180, "the controller relaunched and READY", every=0.5)
        absent.append(time.monotonic() - killed_at)

    def three_kills() -> None:
        for _kill in range(3):
            kill_and_wait()

    outcome = under_load(chaos, "kill -9 the controller three times in one AM attempt", three_kills)
    print(f"[chaos] from each kill to the relaunched controller READY: {[round(a, 1) for a in absent]} s")
    print(f"[chaos] tarn status meanwhile: {said[:1]} ({len(said)} polls said so)")
    assert len(absent) == 3
    assert said, "tarn status never said the controller was not running"
    assert len(chaos.rm.app_attempts(application)) == attempts, "a new AM attempt: not one AM's relaunches"
    assert outcome.ok > 50
    assert outcome.failed == 0, (outcome.errors, outcome.haproxy_log[:20])
    assert outcome.back_s <= 60
    assert outcome.left == ()


# How long the controller is kept from running: the issue asked 5 minutes (300 s by hand); CI
# holds it 150 s, 15 times its ZooKeeper session (10 s), where the old registrations went.
ABSENT_S = float(os.environ.get("TARN_CHAOS_ABSENT_S", "150"))


def test_no_controller_for_minutes_with_a_triton_killed_meanwhile(chaos: Watched) -> None:
    """The controller kept from running (SIGSTOP: hung; YARN keeps its container, READY: the RM
    alone cannot tell, so tarn status cannot either; its dashboard and API stop answering) for ABSENT_S:
    both instances stay in ZooKeeper (what Knox and the activator read) and behind HAProxy; the
    one killed halfway leaves HAProxy's serving set by its health check, and comes back there as
    YARN relaunches it on its worker (anti-affinity: same address). Once the controller runs again
    it adopts the znodes: the relaunched instance's replaces the dead one's."""
    host = where(CONTROLLER_PROCESS)
    seen: dict[str, Any] = {}

    def absent() -> None:
        both = chaos.registered.endpoints()
        podman_exec(host, "pkill", "-STOP", "-f", CONTROLLER_PROCESS, check=True)
        try:
            time.sleep(ABSENT_S / 2)
            seen["registered halfway"] = chaos.registered.endpoints() == both
            seen["serving halfway"] = backend_serving() == both
            kill_one_instance()
            killed_at = time.monotonic()
            wait_for(lambda: len(backend_serving()) < 2, 30, "the dead instance out of HAProxy", every=0.2)
            seen["out of HAProxy after s"] = round(time.monotonic() - killed_at, 1)
            time.sleep(max(0.0, ABSENT_S / 2 - (time.monotonic() - killed_at)))
            seen["registered at the end"] = len(chaos.registered.endpoints()) == 2
        finally:
            podman_exec(host, "pkill", "-CONT", "-f", CONTROLLER_PROCESS, check=True)

    fault = f"no controller for {ABSENT_S:.0f} s (SIGSTOP), one Triton killed halfway"
    outcome = under_load(chaos, fault, absent)
    print(f"[chaos] without a controller: {seen}")
    assert seen["registered halfway"], "an instance left ZooKeeper while the controller was away"
    assert seen["serving halfway"], "an instance left HAProxy while the controller was away"
    assert seen["registered at the end"]
    assert outcome.ok > 50
    assert outcome.failed == 0, (outcome.errors, outcome.haproxy_log[:20])
    assert outcome.back_s <= 60
    assert outcome.left == ()


def history(watched: Watched, direction: str) -> list[str]:
    """The reasons of the controller's history entries of one kind (newest first)."""
    url = str(service_controller_url(watched.rm.service(SERVICE) or {}))
    auth = {"X-TARN-Token": str(OPTIONS["token"])}
    events = requests.get(f"{url}/dashboard/data", headers=auth, timeout=10).json()["events"]
    return [e["reason"] for e in events if e["direction"] == direction]


def replaced(watched: Watched) -> tuple[float, list[str]]:
    """The controller's tarn_replaced_instances_total and its history's replace entries."""
    url = str(service_controller_url(watched.rm.service(SERVICE) or {}))
    auth = {"X-TARN-Token": str(OPTIONS["token"])}
    text = requests.get(f"{url}/metrics", headers=auth, timeout=10).text
    total = next(
        float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith("tarn_replaced_instances_total")
    )
    return total, history(watched, "replace")


# alone in CI's two streams (see SHARED_DAEMONS): whole 68.4 s after the fault in CI5 against its 75 s bound
@pytest.mark.alone
def test_a_triton_that_never_answers_is_replaced(chaos: Watched) -> None:
    """A Triton that hangs while it starts (SIGSTOP) is replaced within --replace-unready-after
    (30 s here) plus a start; the history and the metric say so; no request fails."""
    count_before = replaced(chaos)[0]
    fault = "a Triton that hangs while starting (SIGSTOP)"
    outcome = under_load(chaos, fault, hang_a_starting_triton, settle=5.0)
    count, reasons = replaced(chaos)
    print(f"[chaos] replaced: {count - count_before:.0f}; {reasons[:1]}")
    assert outcome.ok > 50
    assert outcome.failed == 0, (outcome.errors, outcome.haproxy_log[:20])
    assert outcome.back_s <= 30 + 45, "replaced after the bound, the successor READY and registered"
    assert outcome.left == ()
    assert count == count_before + 1
    assert "(--replace-unready-after 30, YARN: " in reasons[0]


# alone in CI's two streams (see SHARED_DAEMONS): failed in a by-hand two-stream run (docs/recovery.md)
@pytest.mark.alone
def test_every_instance_killed_at_once(chaos: Watched) -> None:
    """Both instances killed together, three times (TARN_E2E_KILL_ALL_TIMES: 10 by hand): HAProxy's
    backup, the activator, holds what comes meanwhile; no request fails. The longest wait is
    printed. On an application of its own: with anti-affinity each instance can only come back on
    its own worker, and YARN places no instance on a node where more of its containers failed than
    the spec's node-blacklist threshold (docs/recovery.md); the cases before this one have killed
    the first worker's instance three times."""
    fresh(chaos)
    waits = []
    repetitions = int(os.environ.get("TARN_E2E_KILL_ALL_TIMES", "3"))  # 10 by hand (docs/recovery.md)
    for repetition in range(1, repetitions + 1):
        reasks, retries = len(history(chaos, "reask")), backend_retries()
        outcome = under_load(
            chaos, f"kill -9 every instance at once ({repetition} of {repetitions})", kill_every_instance
        )
        waits.append(outcome.longest_s)
        now = history(chaos, "reask")
        asked = now[: len(now) - reasks]  # newest first
        after = backend_retries()
        print(
            f"[chaos] HAProxy's retries {after[0] - retries[0]}, redispatches {after[1] - retries[1]}; "
            f"the controller asked YARN again for a lost relaunch: {asked}"
        )
        assert outcome.ok > 50
        assert outcome.failed == 0, (outcome.errors, outcome.haproxy_log[:20])
        # YARN's service AM can lose one of two relaunch requests in one heartbeat; the controller
        # asks again once YARN has owed the container REASK_AFTER_S (docs/recovery.md)
        assert outcome.back_s <= (REASK_AFTER_S + 60 if asked else 60)
        assert outcome.left == ()
    print(f"[chaos] every instance killed at once: the longest wait {max(waits):.1f} s")


def test_restart_haproxy_measured(chaos: Watched) -> None:
    """A restart closes the listening socket: requests in that window fail however the backend is
    kept (connection refused). Measured; the backend must be whole within a second of HAProxy
    answering again."""
    outcome = under_load(chaos, "restart HAProxy", restart_haproxy, settle=0)
    assert outcome.back_s <= 1.0
    assert outcome.left == ()


def playbook_vars(**overrides: Any) -> dict[str, Any]:
    """The chaos service as the day-2 playbooks' variables (role tarn.yarn.tarn)."""
    own = ("service_name", "runtime", "image", "model_repository", "min_instances", "max_instances", "token")
    return {
        "tarn_install": False, "tarn_python_interpreter": sys.executable, "tarn_user": LAB_USER,
        "tarn_rm_url": CONNECTION["rm_url"], "tarn_webhdfs_url": CONNECTION["webhdfs_url"],
        "tarn_principal": CONNECTION.get("principal", ""), "tarn_keytab": CONNECTION.get("keytab", ""),
        "tarn_service_name": SERVICE, "tarn_runtime": OPTIONS["runtime"],
        "tarn_image": OPTIONS.get("image", ""),
        "tarn_model_repository": OPTIONS["model_repository"], "tarn_token": OPTIONS["token"],
        "tarn_min_instances": 2, "tarn_max_instances": 2,
        "tarn_models_src": str(MODELS), "tarn_models_dest": MODELS_ON_HDFS,
        "tarn_service_options": {k: v for k, v in OPTIONS.items() if k not in own},
        **overrides,
    }  # fmt: skip


def test_day_two_playbooks_upgrade_under_load(chaos: Watched, hdfs: WebHdfsClient, tmp_path: Path) -> None:
    """playbooks/deploy.yml creates the service (its own application: on the one the faults above
    had hit, YARN failed a rolling upgrade twice, FAILED_UPGRADE, docs/recovery.md). Under load,
    playbooks/upgrade.yml loads a new model version in place on both instances (no restart), then
    rolls a new "image" (the process runtime has none: an environment variable stands in; YARN's
    rolling upgrade, one instance at a time, each drained by the controller first)."""
    run_module("tarn_deploy", {"service_name": SERVICE, "state": "absent"})
    run_playbook("deploy.yml", playbook_vars())
    wait_for(lambda: whole(chaos), 300, "2 instances READY, registered and behind HAProxy")
    new_models = tmp_path / "models"
    shutil.copytree(MODELS, new_models)
    shutil.copytree(new_models / "add_one" / "1", new_models / "add_one" / "2")
    said: list[str] = []
    served: list[list[str]] = []

    def upgrade() -> None:
        model = playbook_vars(tarn_models_src=str(new_models), tarn_models_load=["add_one"])
        said.append(run_playbook("upgrade.yml", {**model, "tarn_upgrade_spec": False}))
        for row in instances_of(chaos.rm.service(SERVICE) or {}):  # each on its own port (the stride)
            port = OPTIONS["port"] + OPTIONS.get("port_stride", 0) * instance_number(str(row["instance"]))
            model = requests.get(f"http://{row['host']}:{port}/v2/models/add_one", timeout=5).json()
            served.append(model["versions"])
        image = {**playbook_vars()["tarn_service_options"], "env": {"TARN_IMAGE_STANDIN": "v2"}}
        image_vars = playbook_vars(tarn_models_src="", tarn_service_options=image)
        said.append(run_playbook("upgrade.yml", image_vars))

    fault = "playbooks/upgrade.yml: a model version in place, then a rolling upgrade of both instances"
    outcome = under_load(chaos, fault, upgrade)
    assert outcome.ok > 50
    assert outcome.failed == 0, (outcome.errors, outcome.haproxy_log[:20])
    assert outcome.back_s <= 5, f"whole {outcome.back_s:.1f} s after the upgrade"
    assert outcome.left == ()
    assert "loaded in place" in said[0]
    assert len(served) == 2, served  # both instances, before any restart
    assert all("2" in versions for versions in served), served
    assert hdfs.status(f"{MODELS_ON_HDFS}/add_one/2/model.py") is not None  # restarted instances stage it
    assert "TARN_IMAGE_STANDIN" in json.dumps(chaos.rm.service(SERVICE) or {})


ONE_INSTANCE = [
    ("kill -9 the only instance", lambda: kill(TRITON), 60),
    ("a rolling upgrade of the only instance", lambda: rolling_upgrade(1), 5),
]


# alone in CI's two streams (see SHARED_DAEMONS): clients' 30 s timeout crossed in CI5's rolling upgrade
@pytest.mark.alone
@pytest.mark.parametrize(("fault", "inject", "bound"), ONE_INSTANCE, ids=[f[0] for f in ONE_INSTANCE])
def test_one_instance_fails_no_request(
    chaos: Watched, fault: str, inject: Callable[[], None], bound: float
) -> None:
    """With one instance nothing serves until it is back: HAProxy's backup server, the activator,
    holds the requests meanwhile (the wait shows in the load's latency, not as failures)."""
    fresh(chaos, count=1)
    outcome = under_load(chaos, fault, inject, count=1)
    assert outcome.ok > 50
    assert outcome.failed == 0, (outcome.errors, outcome.haproxy_log[:20])
    assert outcome.back_s <= bound
    assert outcome.left == ()
