"""Fixtures for tests against the running lab (make lab-site, or the Molecule `lab` scenario)."""

from __future__ import annotations

import pytest

from tarn.clients.resourcemanager import ResourceManager
from tarn.stdlib.webhdfs import SimpleAuth, WebHdfsClient
from tests.support.lab import LAB_MASTER, LAB_USER


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
