"""The lab as the e2e tests reach it: its master and user, a command run in a node with ``podman
exec``, a wait, the znodes under a path, a ZooKeeper restart, a YARN container's log, and the
processes an ended container left behind on a node.

A node is named as inventories/lab/hosts.yml names it ("worker1"), by its container
("tarn-lab-worker1") or by its address on the lab network, the three forms the tests meet (the
RM reports hosts, the controller addresses). Where a service's controller answers is
tarn.service.controller_url, the product's own answer: the lab puts its nodes in this machine's
/etc/hosts (lab/nodes.yml), so the host name it prefers resolves here too.
"""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from typing import TypeVar

import pytest
import requests
import yaml
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import ZnodeStat

from lab import lab_client
from tarn.clients.spnego import rm_auth
from tests.support import ROOT

T = TypeVar("T")

INVENTORY = ROOT / "inventories" / "lab" / "hosts.yml"
LAB_MASTER = os.environ.get("TARN_LAB_MASTER", "master")
LAB_USER = "tarn"
WORKERS = ("tarn-lab-worker1", "tarn-lab-worker2")


@functools.cache
def _nodes() -> dict[str, tuple[str, str]]:
    """Lab node name -> (its container, its address)."""
    hosts = yaml.safe_load(INVENTORY.read_text())["all"]["hosts"]
    return {name: (str(host["ansible_host"]), str(host["tarn_lab_ip"])) for name, host in hosts.items()}


def _node(node: str) -> tuple[str, str, str]:
    """(name, container, address) of a lab node given by any of the three."""
    for name, (podman_name, ip) in _nodes().items():
        if node in (name, podman_name, ip):
            return name, podman_name, ip
    raise ValueError(f"{node!r} is not a node of {INVENTORY.relative_to(ROOT)}")


def container(node: str) -> str:
    """The podman container of a lab node given by its name, its container's name or its address."""
    return _node(node)[1]


def podman_exec(
    node: str,
    *command: str,
    check: bool = False,
    timeout: float = 120.0,
    env: Mapping[str, str] | None = None,
    detach: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``command`` run in a lab node, its output captured. With ``check``, a failure raises
    CalledProcessError after writing the command's stderr to this process's (pytest shows it)."""
    options = ["-d"] if detach else []
    for name, value in (env or {}).items():
        options += ["-e", f"{name}={value}"]
    done = subprocess.run(
        ["podman", "exec", *options, container(node), *command],
        capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    if check and done.returncode != 0:
        sys.stderr.write(done.stderr)
        done.check_returncode()
    return done


def wait_for(probe: Callable[[], T | None], timeout: float, what: str, every: float = 1.0) -> T:
    """Call probe until it returns something truthy; fail the test naming `what` on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(every)


def znodes(zk: KazooClient, path: str) -> dict[str, tuple[bytes, ZnodeStat]]:
    """The children of ``path`` with their data and stat; one that goes between the listing and
    its read (a deregistration) is left out."""
    found = {}
    for child in zk.get_children(path) if zk.exists(path) else []:
        with contextlib.suppress(NoNodeError):
            found[child] = zk.get(f"{path}/{child}")
    return found


def restart_zookeeper() -> None:
    podman_exec("tarn-lab-master", "systemctl", "restart", "zookeeper", check=True)


def container_log(worker: str, container_id: str) -> str:
    logs = f"cat /var/log/hadoop/yarn-containers/*/{container_id}/std*"
    return podman_exec(worker, "sh", "-c", logs).stdout


# ---- what a YARN container leaves behind on a node (issue 32)
# The NodeManager's states of a container whose processes must all be gone.
ENDED = frozenset({
    "EXITED_WITH_SUCCESS", "EXITED_WITH_FAILURE", "CONTAINER_CLEANEDUP_AFTER_KILL",
    "CONTAINER_RESOURCES_CLEANINGUP", "DONE", "LOCALIZATION_FAILED",
})  # fmt: skip
# Run in the node: every process with a CONTAINER_ID in its environment (YARN sets it in each
# container's; children inherit it), as "pid container-id command line".
_LIST_CONTAINER_PROCESSES = """
import os
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        env = open(f"/proc/{pid}/environ", "rb").read().split(b"\\0")
        cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\\0", b" ")[:160]
    except OSError:
        continue
    ids = [e[13:].decode() for e in env if e.startswith(b"CONTAINER_ID=")]
    if ids:
        print(pid, ids[0], cmd.decode(errors="replace"))
"""


def address(node: str) -> str:
    """A lab node's address on the lab network."""
    return _node(node)[2]


def container_processes(node: str) -> list[tuple[int, str, str]]:
    """(pid, container id, command line) of each process of a YARN container in ``node``."""
    listed = podman_exec(node, "python3", "-c", _LIST_CONTAINER_PROCESSES, check=True).stdout
    return [(int(pid), cid, cmd) for pid, cid, cmd in (line.split(" ", 2) for line in listed.splitlines())]


def running_containers(node: str) -> set[str]:
    """The containers ``node``'s NodeManager has not ended (its REST API; SPNEGO on a secure lab)."""
    url = f"http://{_node(node)[0]}:8042/ws/v1/node/containers"  # by name: SPNEGO asks for HTTP/<name>
    reply = requests.get(url, timeout=10, auth=rm_auth(lab_client.identity()))
    reply.raise_for_status()
    listed = (reply.json().get("containers") or {}).get("container") or []
    return {c["id"] for c in listed if c["state"] not in ENDED}


def left_behind(nodes: tuple[str, ...] = WORKERS) -> list[str]:
    """Processes of ended containers (or of containers their NodeManager does not know) on
    ``nodes``: "node pid container command", none when every ended container took its own along."""
    found = []
    for node in nodes:
        running = running_containers(node)
        found += [
            f"{node} {pid} {cid} {cmd}" for pid, cid, cmd in container_processes(node) if cid not in running
        ]
    return found
