"""Fixtures for tests against the running lab (make lab-site, or the Molecule `lab` scenario)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from typing import TypeVar

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import ZnodeStat

from tarn.clients.resourcemanager import ResourceManager
from tarn.stdlib.webhdfs import SimpleAuth, WebHdfsClient

T = TypeVar("T")

LAB_MASTER = os.environ.get("TARN_LAB_MASTER", "master")
LAB_USER = "tarn"


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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The chaos suite goes last: it restarts the cluster's daemons under the other tests' feet."""
    items.sort(key=lambda item: item.path.name == "test_chaos.py")


@pytest.fixture(scope="session")
def rm() -> ResourceManager:
    return ResourceManager([f"http://{LAB_MASTER}:8088"], user=LAB_USER)


@pytest.fixture(scope="session")
def hdfs() -> WebHdfsClient:
    return WebHdfsClient(f"http://{LAB_MASTER}:9870", SimpleAuth(LAB_USER))


@pytest.fixture(scope="session")
def zk_hosts() -> str:
    return f"{LAB_MASTER}:2181"
