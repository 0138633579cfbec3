"""`tarn haproxy-sync` (the zipapp the haproxy role installs) against a real HAProxy, in the
harness of tests/support/haproxy.py: network and mount namespaces of their own, HAProxy with the
seeds' exact haproxy.cfg (or the role's), Triton stand-ins, a fake controller serving /instances
and, for the ZooKeeper source, a real ZooKeeper with a registrar that writes instance znodes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest

from tarn.haproxy.plan import AdminState, Endpoint
from tarn.haproxy.runtime import RuntimeApiError
from tests.support.haproxy import (
    BACKEND,
    CONTROLLER,
    INSTANCES,
    SEEDS_CFG,
    STATE_FILE,
    TOKEN,
    Bench,
    Haproxy,
    start_zookeeper,
    wait_until,
    znode,
)

pytestmark = pytest.mark.usefixtures("haproxy_tools")


def test_controller_source_fills_the_seeds_slots(bench: Bench) -> None:
    proxy = bench.haproxy()
    bench.controller.instances = INSTANCES[:3]
    bench.sync_from_controller()
    wait_until(lambda: proxy.ready() == set(INSTANCES[:3]), "three slots serve the three instances")
    states = proxy.states()
    assert [states[f"triton-{n}"][:2] for n in (1, 2, 3)] == [(a, "ready") for a in INSTANCES[:3]]
    assert states["triton-4"] == ("0.0.0.0:8000", "maint", 0)

    answers = {bench.ns.get("/v2/models")[1] for _round in range(9)}
    assert answers == set(INSTANCES[:3])  # round robin through the frontend reaches each instance

    assert set(bench.controller.tokens) == {TOKEN}
    time.sleep(1.5)  # a few quiet rounds
    assert proxy.states() == states  # stable: no churn when nothing changes
    assert TOKEN not in bench.log()
    assert bench.log().count("new instance") == 3 * 2  # address + ready, once each


def test_gone_instance_drains_then_goes_to_maintenance(bench: Bench) -> None:
    proxy = bench.haproxy()
    first, second = INSTANCES[0], INSTANCES[1]
    bench.controller.instances = [first]
    bench.sync_from_controller()
    wait_until(lambda: proxy.ready() == {first}, "the first instance is served")

    # 6 s: the drain must be seen while it still runs, through three waits on a loaded machine
    slow = bench.ns.pool.submit(lambda: bench.ns.get("/slow?s=6"))
    wait_until(lambda: proxy.states()["triton-1"][2] == 1, "the slow request holds a session")
    bench.controller.instances = [second]  # the first goes away while it still serves a request

    wait_until(lambda: proxy.states()["triton-1"][1] == "drain", "the first slot drains")
    assert proxy.states()["triton-1"] == (first, "drain", 1)
    wait_until(lambda: proxy.ready() == {second}, "the second instance takes a free slot")
    assert proxy.states()["triton-2"][:2] == (second, "ready")

    assert slow.result(timeout=15) == (200, first)  # draining lets the running request finish
    took = wait_until(lambda: proxy.states()["triton-1"][1] == "maint", "the idle slot goes to maintenance")
    print(f"\n[sync] the idle drained slot in maintenance after {took:.2f} s (margin {2.0 - took:.2f} s)")
    assert took < 2.0
    assert bench.ns.get("/v2/models") == (200, second)


def test_more_instances_than_slots_is_reported(bench: Bench) -> None:
    proxy = bench.haproxy()
    bench.controller.instances = INSTANCES  # five instances, the seeds' four slots
    bench.sync_from_controller()
    wait_until(lambda: proxy.ready() == set(INSTANCES[:4]), "the four slots are filled")
    wait_until(lambda: "no free slot" in bench.log(), "the overflow is logged")
    time.sleep(1.2)
    assert bench.log().count("no free slot") == 1  # once, not every second
    assert f"1 instances have no free slot in backend {BACKEND}: {INSTANCES[4]}" in bench.log()

    bench.controller.instances = INSTANCES[1:]  # one leaves: its slot drains, then takes the fifth
    wait_until(lambda: proxy.ready() == set(INSTANCES[1:]), "the fifth instance gets the freed slot", 5)
    assert "every instance has a slot" in bench.log()


def test_a_controller_outage_keeps_the_backend(bench: Bench) -> None:
    proxy = bench.haproxy()
    bench.controller.instances = INSTANCES[:2]
    bench.sync_from_controller(interval=0.2)
    wait_until(lambda: proxy.ready() == set(INSTANCES[:2]), "two instances served")

    bench.controller.status = 503
    asked = bench.controller.requests
    wait_until(lambda: bench.controller.requests >= asked + 5, "the sync keeps asking")
    assert proxy.ready() == set(INSTANCES[:2])
    assert "unavailable (HTTP 503): keeping the last good set (2 instances" in bench.log()
    assert bench.ns.get("/v2/models")[0] == 200

    bench.controller.status = 200
    bench.controller.instances = INSTANCES[:1]
    wait_until(lambda: proxy.ready() == {INSTANCES[0]}, "the sync follows the controller again")
    assert "answers again" in bench.log()


def test_a_wrong_token_never_empties_the_backend(bench: Bench) -> None:
    proxy = bench.haproxy()
    token_file = bench.tmp / "wrong"
    token_file.write_text("wrong\n")
    url = f"http://{CONTROLLER[0]}:{CONTROLLER[1]}"
    bench.controller.instances = INSTANCES[:2]
    bench.sync("--controller-url", url, "--interval", "0.2", "--token-file", str(token_file))
    wait_until(lambda: "the token was refused" in bench.log(), "the refusal is logged")
    assert proxy.ready() == set()
    assert "no instance set known yet, HAProxy is left as it is" in bench.log()


def test_role_config_has_the_slots_and_checks(role_cfg: Path) -> None:
    text = role_cfg.read_text()
    triton, openai = [f"triton-{n}" for n in range(1, 7)], [f"openai-{n}" for n in range(1, 7)]
    assert [*triton, "activator", *openai, "activator"] == [  # the activator backs both backends
        line.split()[1] for line in text.splitlines() if line.strip().startswith("server ")
    ]
    for line in (
        "stats socket /var/run/haproxy.sock mode 660 level admin group haproxy expose-fd listeners",
        "option httpchk GET /v2/health/ready",
        "http-check expect status 200",
        "option redispatch 1",
        "default-server check inter 1s fall 2 rise 1 observe layer4 error-limit 1 on-error mark-down",
        "server activator 127.0.0.1:8099 backup no-check",
    ):
        assert line in text


@pytest.mark.parametrize("config", ["seeds", "role"])
def test_haproxy_restart_restores_the_backend(
    bench: Bench, config: str, request: pytest.FixtureRequest
) -> None:
    cfg = SEEDS_CFG if config == "seeds" else request.getfixturevalue("role_cfg")
    proxy = bench.haproxy(cfg)
    bench.controller.instances = INSTANCES[:3]
    bench.sync_from_controller()
    wait_until(lambda: proxy.ready() == set(INSTANCES[:3]), "three instances served")

    proxy.stop()
    wait_until(lambda: "retrying" in bench.log(), "the sync notices HAProxy is gone")
    time.sleep(1.5)  # gone for a while: the sync keeps retrying without filling its log
    assert bench.log().count("retrying") == 1

    started = proxy.start()
    socket_up = time.monotonic() - started
    restored = wait_until(lambda: proxy.ready() == set(INSTANCES[:3]), "the backend is restored") + socket_up
    serving = wait_until(lambda: bench.ns.get("/v2/models", timeout=1)[0] == 200, "traffic flows") + restored
    print(
        f"\n[{config} cfg] after the HAProxy restart: socket up {socket_up:.2f} s, "
        f"slots restored {restored:.2f} s, first 200 through the frontend {serving:.2f} s"
    )
    assert restored < 2.0
    assert serving < 2.0
    assert "HAProxy answers again" in bench.log()


def test_a_reload_keeps_the_backend_without_the_sync(bench: Bench, role_cfg: Path) -> None:
    """The role's reload (Debian's unit + the drop-in: save the states, then USR2 to the master)
    under a constant load, with no sync running to repair anything: every slot keeps its
    address and state, and no request fails."""
    assert shutil.which("socat"), "the state saver talks to HAProxy's socket with socat: apt install socat"
    proxy = Haproxy(bench.ns, role_cfg)
    proxy.process = bench.ns.popen(["haproxy", "-W", "-db", "-f", str(role_cfg)], "haproxy.log")
    wait_until(proxy._answers, "HAProxy's socket answers")
    for slot, address in enumerate(INSTANCES[:3], start=1):
        host, port = address.split(":")
        proxy.api.set_address(BACKEND, f"triton-{slot}", Endpoint(host, int(port)))
        proxy.api.set_state(BACKEND, f"triton-{slot}", AdminState.READY)
    wait_until(lambda: proxy.ready() == set(INSTANCES[:3]), "three instances served")
    wait_until(lambda: bench.ns.get("/v2/models", timeout=1)[0] == 200, "traffic flows")
    before = proxy.states()

    results: list[int] = []
    stop = threading.Event()

    def load() -> None:
        while not stop.is_set():
            try:
                results.append(bench.ns.get("/v2/models", timeout=5)[0])
            except OSError:
                results.append(0)

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    time.sleep(0.5)
    saver = bench.ns.popen(["sh", str(role_cfg.parent / "save-state")], "save-state.log")
    assert saver.wait(10) == 0
    assert "triton-1" in Path(bench.ns.path(STATE_FILE)).read_text()
    os.kill(proxy.process.pid, signal.SIGUSR2)  # what ExecReload's kill -USR2 $MAINPID does
    seen = []
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        with contextlib.suppress(RuntimeApiError):
            seen.append(proxy.ready())
        time.sleep(0.02)
    log = bench.tmp / "haproxy.log"
    wait_until(lambda: "Former worker" in log.read_text(), "the reload's old worker to end", 15)
    stop.set()
    worker.join()
    failed = sum(1 for code in results if code != 200)
    print(f"\n[role reload] {len(results)} requests, {failed} failed; {len(seen)} reads of the slots")
    assert "Former worker" in (bench.tmp / "haproxy.log").read_text()  # the reload happened
    assert all(ready == set(INSTANCES[:3]) for ready in seen)
    assert {k: v[:2] for k, v in proxy.states().items()} == {k: v[:2] for k, v in before.items()}
    assert failed == 0
    assert len(results) > 50


def test_zookeeper_source_follows_the_znodes(bench: Bench) -> None:
    zk = start_zookeeper(bench)
    ensemble, path, zk_main, zookeeper, tell = zk.ensemble, zk.path, zk.argv, zk.process, zk.tell
    proxy = bench.haproxy()
    bench.sync("--zk-ensemble", ensemble, "--zk-path", path)
    tell(f"put container_1 {znode(INSTANCES[0], 0)}")
    tell(f"put container_2 {znode(INSTANCES[1], 1)}")
    tell("put container_junk {not json")
    wait_until(lambda: proxy.ready() == set(INSTANCES[:2]), "two znodes, two slots", 15)
    assert "ignoring znode /services/triton/instances/container_junk" in bench.log()

    start = time.monotonic()
    tell("del container_1")
    wait_until(lambda: proxy.ready() == {INSTANCES[1]}, "a removed znode drains its slot", 5)
    pushed = time.monotonic() - start
    wait_until(lambda: proxy.states()["triton-1"][1] == "maint", "then maintenance", 5)
    print(f"\n[zookeeper] znode removed -> slot drained in {pushed:.2f} s (watch, no polling)")
    assert pushed < 1.5

    zookeeper.terminate()
    zookeeper.wait(10)
    wait_until(lambda: "keeping the last good set (1 instances" in bench.log(), "the outage is logged", 15)
    time.sleep(1.0)
    assert proxy.ready() == {INSTANCES[1]}  # ZooKeeper down: the backend stays as it was

    bench.ns.popen(zk_main, "zookeeper.log")  # back, same data: the sessions resume
    wait_until(lambda: "answers again" in bench.log(), "the sync reads ZooKeeper again", 30)
    tell(f"put container_3 {znode(INSTANCES[2], 2)}")
    wait_until(lambda: proxy.ready() == set(INSTANCES[1:3]), "a new znode after the outage", 10)
