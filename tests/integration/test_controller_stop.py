"""The controller's process ends with 143 within its stop budget on YARN's SIGTERM, whatever it waits
on (tarn.controller.shutdown): the NodeManager sends SIGKILL 10 s after SIGTERM (the roles' delay).

The real ``tarn controller`` runs on loopback against a cluster that hangs where a stop can meet it:
- a tick waiting on the ResourceManager (when YARN stops a service it stops the AM too, and an RM
  call about the service waits on the dying AM; CI25 saw the controller's container take 28.9 s);
- the start, while kazoo connects to a ZooKeeper that never answers (before the fix the signal
  killed the process outright: under Docker, as PID 1 without a handler, it was dropped);
- a ZooKeeper reconnect: the real server is stopped (SIGSTOP) under a connected controller (before
  the fix the process never ended: 30 s and counting);
- a Ranger policy poll and an HDFS audit write at once: Admin and the NameNode take the connection
  and never answer (before the fix the stop took 15 s: the poll's join, then the audit's last write).

Each silent peer is a socket that accepts and never answers (``Silent``). Not covered here: a
Kerberos re-login waiting on a KDC (it runs inside the tick's RM calls, the first case's path).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests

from tarn.controller.shutdown import STOP_BUDGET_S
from tarn.stdlib.hadoop_site import properties_xml
from tests.support.loopback import free_port
from tests.support.ranger_documents import SERVICE, allow, policies, roles, user_store, write_xml
from tests.support.zookeeper import ZooKeeperServer, zookeeper_server

TOKEN = "stop-test-token"  # noqa: S105 (a test's own)
SRC = Path(__file__).resolve().parents[2] / "src"
SIGKILL_DELAY_S = 10.0  # the NodeManager's, as the yarn_nodemanager role sets it


@dataclass
class Silent:
    """A TCP peer that accepts every connection and never answers; ``arrivals`` counts them."""

    sock: socket.socket = field(default_factory=lambda: socket.create_server(("127.0.0.1", 0)))
    arrivals: int = 0
    held: list[socket.socket] = field(default_factory=list)

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    def serve(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                connection, _address = self.sock.accept()
                self.held.append(connection)
                self.arrivals += 1

    def close(self) -> None:
        self.sock.close()
        for connection in self.held:
            connection.close()


@pytest.fixture
def silent() -> Iterator[Callable[[], Silent]]:
    peers: list[Silent] = []

    def make() -> Silent:
        peer = Silent()
        threading.Thread(target=peer.serve, daemon=True).start()
        peers.append(peer)
        return peer

    yield make
    for peer in peers:
        peer.close()


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    with zookeeper_server(tmp_path_factory.mktemp("zookeeper")) as server:
        yield server


@dataclass
class Running:
    process: subprocess.Popen[str]
    log: Path
    am_port: int

    def output(self) -> str:
        return self.log.read_text()


def start_controller(tmp_path: Path, *flags: str, env: dict[str, str] | None = None) -> Running:
    am_port = free_port()
    command = [sys.executable, "-m", "tarn", "controller", "--service-name", "stopping",
               "--am-port", str(am_port), "--address", "127.0.0.1", "--tick-seconds", "1",
               "--model-repository", "hdfs:///models", "--runtime", "process", *flags]  # fmt: skip
    log = tmp_path / "controller.log"
    environment = {**os.environ, "PYTHONPATH": str(SRC), **(env or {})}
    with log.open("w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, text=True, env=environment)
    return Running(process, log, am_port)


def wait_for(done: Callable[[], bool], running: Running, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert running.process.poll() is None, f"the controller ended before {what}: {running.output()}"
        assert time.monotonic() < deadline, f"no {what} within {timeout:.0f} s: {running.output()}"
        time.sleep(0.05)


def stop_and_time(running: Running, case: str) -> None:
    """SIGTERM; the process must end with 143 within the budget (and before the NodeManager's SIGKILL)."""
    running.process.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    try:
        status = running.process.wait(30)
    finally:
        if running.process.poll() is None:
            running.process.kill()
            running.process.wait()
    took = time.monotonic() - sent
    print(
        f"\n[controller] SIGTERM in {case}: exit {status} after {took:.2f} s (budget {STOP_BUDGET_S} s;"
        f" margin {STOP_BUDGET_S + 1.0 - took:.2f} s to the bound, {SIGKILL_DELAY_S - took:.2f} s to SIGKILL)"
    )
    assert status == 128 + signal.SIGTERM, running.output()  # not killed by the signal: 143, as YARN expects
    assert took < STOP_BUDGET_S + 1.0, running.output()
    assert TOKEN not in running.output()


def test_a_stop_during_a_tick_waiting_on_the_resourcemanager(
    tmp_path: Path, silent: Callable[[], Silent]
) -> None:
    rm = silent()
    running = start_controller(tmp_path, "--rm-url", f"http://127.0.0.1:{rm.port}")
    wait_for(lambda: rm.arrivals > 0, running, "a tick asking the ResourceManager")
    time.sleep(0.5)  # the tick waits on its GET, the RM timeout (5 s) not yet reached
    stop_and_time(running, "a tick waiting on the ResourceManager")


def test_a_stop_while_starting_connects_to_a_zookeeper_that_never_answers(
    tmp_path: Path, silent: Callable[[], Silent]
) -> None:
    zookeeper = silent()
    running = start_controller(
        tmp_path, "--rm-url", "http://127.0.0.1:9", "--zk-ensemble", f"127.0.0.1:{zookeeper.port}"
    )
    wait_for(lambda: zookeeper.arrivals > 0, running, "a connection to ZooKeeper")
    time.sleep(0.5)
    stop_and_time(running, "the start, ZooKeeper not answering")
    assert "while starting: stopped" in running.output()


def test_a_stop_during_a_zookeeper_reconnect(tmp_path: Path, zookeeper: ZooKeeperServer) -> None:
    running = start_controller(
        tmp_path, "--rm-url", "http://127.0.0.1:9", "--zk-ensemble", zookeeper.ensemble
    )
    wait_for(lambda: "serving on" in running.output(), running, "the controller's start")
    zookeeper.process.send_signal(signal.SIGSTOP)  # the connection stays open; nothing answers on it
    try:
        time.sleep(8)  # past kazoo's read timeout (2/3 of the 10 s session): it drops and reconnects
        stop_and_time(running, "a ZooKeeper reconnect")
    finally:
        zookeeper.process.send_signal(signal.SIGCONT)


def write_ranger_conf(conf: Path, admin_port: int, namenode_port: int) -> None:
    """Admin and HDFS at the silent peers; the policy cache lets alice infer on add_one meanwhile."""
    cache = conf / "policycache"
    cache.mkdir(parents=True)
    write_xml(
        conf,
        {
            "ranger.plugin.triton.service.name": SERVICE,
            "ranger.plugin.triton.policy.rest.url": f"http://127.0.0.1:{admin_port}",
            "ranger.plugin.triton.policy.pollIntervalMs": "1000",
            "ranger.plugin.triton.policy.rest.client.read.timeoutMs": "30000",
            "ranger.plugin.triton.policy.cache.dir": str(cache),
        },
    )
    (conf / "ranger-triton-audit.xml").write_bytes(
        properties_xml(
            {
                "xasecure.audit.is.enabled": "true",
                "xasecure.audit.destination.hdfs": "true",
                "xasecure.audit.destination.hdfs.dir": f"hdfs://127.0.0.1:{namenode_port}/ranger/audit",
            }
        )
    )
    stem = cache / f"tarn_{SERVICE}"
    alice = allow(1, ["add_one"], ["infer"], users=["alice"])
    stem.with_suffix(".json").write_text(json.dumps(policies(1, alice)))
    Path(f"{stem}_roles.json").write_text(json.dumps(roles(1)))
    Path(f"{stem}_userstore.json").write_text(json.dumps(user_store(1, {})))
    hadoop = conf / "hadoop"
    hadoop.mkdir()
    (hadoop / "core-site.xml").write_bytes(
        properties_xml({"fs.defaultFS": f"hdfs://127.0.0.1:{namenode_port}"})
    )
    (hadoop / "hdfs-site.xml").write_bytes(
        properties_xml({"dfs.namenode.http-address": f"127.0.0.1:{namenode_port}"})
    )


def test_a_stop_during_a_ranger_poll_and_an_hdfs_audit_write(
    tmp_path: Path, silent: Callable[[], Silent]
) -> None:
    admin, namenode = silent(), silent()
    conf = tmp_path / "conf"
    write_ranger_conf(conf, admin.port, namenode.port)
    (tmp_path / "token").write_text(TOKEN)
    running = start_controller(
        tmp_path, "--rm-url", "http://127.0.0.1:9", "--token-file", str(tmp_path / "token"),
        "-rs", SERVICE, "--ranger-conf-dir", str(conf), "--ranger-audit",
        env={"HADOOP_CONF_DIR": str(conf / "hadoop")},
    )  # fmt: skip
    url = f"http://127.0.0.1:{running.am_port}/authorize"
    asked = {"model": "add_one", "action": "infer", "user": "alice"}

    def allowed() -> bool:
        with contextlib.suppress(requests.ConnectionError):
            headers = {"X-TARN-Token": TOKEN}
            return requests.get(url, params=asked, headers=headers, timeout=2).text == "true"
        return False

    wait_for(allowed, running, "alice allowed from the policy cache")  # an audited decision, queued
    wait_for(lambda: admin.arrivals > 0 and namenode.arrivals > 0, running, "a poll and an audit write")
    time.sleep(0.5)
    stop_and_time(running, "a Ranger poll and an HDFS audit write")
    assert "left behind" in running.output()  # the audit's write outlived the budget, and says so
