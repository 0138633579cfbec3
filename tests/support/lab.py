"""The lab's nodes as the e2e tests reach them: a command run in a node with ``podman exec``.

A node is named as inventories/lab/hosts.yml names it ("worker1"), by its container
("tarn-lab-worker1") or by its address on the lab network, the three forms the tests meet (the
RM reports hosts, the controller addresses). Where a service's controller answers is
tarn.service.controller_url, the product's own answer: the lab puts its nodes in this machine's
/etc/hosts (lab/nodes.yml), so the host name it prefers resolves here too.
"""

from __future__ import annotations

import functools
import subprocess
import sys
from collections.abc import Mapping

import yaml

from tests.support import ROOT

INVENTORY = ROOT / "inventories" / "lab" / "hosts.yml"


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
