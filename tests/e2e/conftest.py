"""Fixtures for tests against the running lab (make lab-site, or the Molecule `lab` scenario)."""

from __future__ import annotations

import pytest

from lab import lab_client
from tarn.clients.resourcemanager import ResourceManager
from tarn.stdlib.webhdfs import WebHdfsClient
from tests.support.lab import LAB_MASTER, LAB_USER


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The chaos suite goes last: it restarts the cluster's daemons under the other tests' feet.
    Tests marked ``before_chaos`` read what the others left (the daemons' logs) just before it.
    Tests marked ``suite_start`` go first: what they start lives through the suite (test_tokens).
    Tests marked ``docker_lab`` are deselected (reported as such, never as passed) on a lab
    without YARN's Docker runtime."""
    if not lab_client.docker():
        deselected = [item for item in items if item.get_closest_marker("docker_lab")]
        if deselected:
            config.hook.pytest_deselected(items=deselected)
            items[:] = [item for item in items if item not in deselected]

    def order(item: pytest.Item) -> int:
        if item.get_closest_marker("suite_start"):
            return -1
        if item.get_closest_marker("before_chaos"):
            return 1
        return 2 if item.path.name == "test_chaos.py" else 0

    items.sort(key=order)


@pytest.fixture(scope="session")
def rm() -> ResourceManager:
    lab_client.use_lab()
    return lab_client.resource_manager(LAB_USER)


@pytest.fixture(scope="session")
def hdfs() -> WebHdfsClient:
    lab_client.use_lab()
    return lab_client.webhdfs(LAB_USER)


@pytest.fixture(scope="session")
def zk_hosts() -> str:
    return f"{LAB_MASTER}:2181"
