"""Fixtures for tests against the running lab (make lab-site, or the Molecule `lab` scenario)."""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from lab import lab_client
from tarn.clients.resourcemanager import ResourceManager
from tarn.stdlib.webhdfs import WebHdfsClient
from tests.support.lab import LAB_MASTER, LAB_USER

# CI runs the suite as two pytest processes side by side on one lab (lab/e2e_streams.sh): most of
# the suite's time is YARN's and the lab's waits, not CPU. TARN_E2E_STREAM picks a process's files.
# The edge stream has the files that need the edge's HAProxy path to themselves (each asserts
# exactly which instances serve there) or count the lab's GPUs; the cluster stream has the rest.
# test_tarn_modules and test_world need neither; they run there so that the two streams' shares of
# the suite's time are about even (docs/ci.md).
EDGE_STREAM = {
    "test_haproxy.py", "test_openai.py", "test_scale_to_zero.py", "test_chaos.py",
    "test_lab_cluster.py", "test_docker.py", "test_tarn_modules.py", "test_world.py",
}  # fmt: skip
STREAM = os.environ.get("TARN_E2E_STREAM", "")  # "edge", "cluster", or empty: the whole suite
LOCK = os.environ.get("TARN_E2E_LOCK", "")  # the streams' shared lock file
WAITED: dict[str, float] = {}  # test id -> seconds it waited for the other stream (over 1 s only)


def in_stream(item: pytest.Item) -> bool:
    return not STREAM or (item.path.name in EDGE_STREAM) == (STREAM == "edge")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The chaos suite goes last: it restarts the cluster's daemons under the other tests' feet.
    Tests marked ``before_chaos`` read what the others left (the daemons' logs) just before it.
    Tests marked ``suite_start`` go first: what they start lives through the suite (test_tokens).
    Tests marked ``alone`` go in one block at the end (the chaos suite's after its others, then the
    files of alone tests only; another file keeps its order, lest its module's service be deployed
    twice): each alone test first waits for the other stream's test under way, and that stream
    stops while it runs, so one block costs that wait once, and by then the other stream has most
    likely ended (lab/e2e_streams.sh).
    Tests marked ``docker_lab`` are deselected (reported as such, never as passed) on a lab
    without YARN's Docker runtime, and the other stream's files when TARN_E2E_STREAM is set."""
    deselected = [
        item
        for item in items
        if not in_stream(item) or (item.get_closest_marker("docker_lab") and not lab_client.docker())
    ]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [item for item in items if item not in deselected]
    not_alone = {item.path for item in items if not alone(item)}

    def order(item: pytest.Item) -> tuple[int, bool]:
        if item.get_closest_marker("suite_start"):
            return -1, False
        if item.get_closest_marker("before_chaos"):
            return 1, False
        if item.path not in not_alone:
            return 3, True
        chaos = item.path.name == "test_chaos.py"  # one module: its fixture's service stays up
        return (2, alone(item)) if chaos else (0, False)

    items.sort(key=order)


def alone(item: pytest.Item) -> bool:
    return item.get_closest_marker("alone") is not None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Side by side, each test (its setup, a module's service deployed there, and its teardown)
    holds the streams' lock: shared, or alone for a test marked ``alone`` (it restarts or stops a
    daemon both streams use, or its bounds were crossed with the other stream beside it), which
    then waits for the other stream's test under way and holds off its next one."""
    asked = time.monotonic()
    with stream_lock(alone=alone(item)):
        if (waited := time.monotonic() - asked) > 1:
            WAITED[item.nodeid] = waited
        return (yield)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """What the streams' lock cost this stream: CI's time (docs/ci.md) is set by it and the work."""
    if LOCK:
        longest = sorted(WAITED.items(), key=lambda kv: -kv[1])[:8]
        terminalreporter.write_line(
            f"[streams] {STREAM or 'whole'} stream waited {sum(WAITED.values()):.0f} s for the other's "
            f"tests over {len(WAITED)} tests; longest: " + ", ".join(f"{k} {v:.0f} s" for k, v in longest)
        )


@contextmanager
def stream_lock(alone: bool) -> Iterator[None]:
    """A readers-writer lock over TARN_E2E_LOCK (none when unset) that prefers the writer: a test
    waiting to run alone leaves ``<lock>.alone``, and no shared holder starts while it is there."""
    if not LOCK:
        yield
        return
    waiting = Path(f"{LOCK}.alone")
    if alone:
        waiting.touch()
    while not alone and waiting.exists():
        time.sleep(0.5)
    file = os.open(LOCK, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(file, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        yield
    finally:
        if alone:
            waiting.unlink(missing_ok=True)
        os.close(file)  # releases the flock


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
