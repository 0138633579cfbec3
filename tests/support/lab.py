"""The lab as the e2e tests reach it: its master and user, a command run in a node with ``podman
exec``, a wait, the znodes under a path, a ZooKeeper restart and a YARN container's log.

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
import yaml
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import ZnodeStat

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


def container(node: str) -> str:
    """The podman container of a lab node given by its name, its container's name or its address."""
    for name, (podman_name, address) in _nodes().items():
        if node in (name, podman_name, address):
            return podman_name
    raise ValueError(f"{node!r} is not a node of {INVENTORY.relative_to(ROOT)}")


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
