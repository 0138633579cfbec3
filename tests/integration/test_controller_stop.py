"""The controller's process stops promptly on YARN's SIGTERM, even with a tick under way.

When YARN stops a service it stops the AM too, and a ResourceManager call about the service then
waits on the dying AM until the controller's timeout (5 s per call; seen in CI25: the controller's
Docker container took 28.9 s to end, past the NodeManager's SIGKILL). Here the real ``tarn
controller`` runs against a ResourceManager stand-in on loopback that never answers the service's
GET, and gets SIGTERM while a tick waits on it.
"""

from __future__ import annotations

import http.server
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tarn.controller.main import RM_TIMEOUT_S, STOP_GRACE_S
from tests.support.loopback import free_port


class SilentRm(http.server.ThreadingHTTPServer):
    """Takes each request and answers none of them (a call that waits on a dying AM)."""

    daemon_threads = True

    def __init__(self, port: int) -> None:
        self.arrivals: list[float] = []
        self.release = threading.Event()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.arrivals.append(time.monotonic())
                outer.release.wait(60)

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(("127.0.0.1", port), Handler)


@pytest.fixture
def silent_rm() -> Iterator[SilentRm]:
    server = SilentRm(free_port())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()


def test_a_stop_during_a_tick_waiting_on_the_resourcemanager_ends_the_process_promptly(
    silent_rm: SilentRm, tmp_path: Path
) -> None:
    tarn = Path(os.environ.get("VIRTUAL_ENV", ".venv")) / "bin" / "tarn"
    command = [
        str(tarn if tarn.exists() else "tarn"), "controller", "--service-name", "stopping",
        "--rm-url", f"http://127.0.0.1:{silent_rm.server_address[1]}", "--am-port", str(free_port()),
        "--address", "127.0.0.1", "--tick-seconds", "1", "--model-repository", "hdfs:///models",
        "--runtime", "process",
    ]  # fmt: skip
    log = (tmp_path / "controller.log").open("w+")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while not silent_rm.arrivals and time.monotonic() < deadline:
            time.sleep(0.05)
        assert silent_rm.arrivals, "the controller never asked the ResourceManager"
        time.sleep(0.5)  # the tick waits on its GET, RM_TIMEOUT_S - 0.5 s to go
        process.send_signal(signal.SIGTERM)
        stopped = time.monotonic()
        status = process.wait(30)
        took = time.monotonic() - stopped
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    log.seek(0)
    print(f"\n[controller] SIGTERM with a tick waiting on the RM: exit {status} after {took:.2f} s")
    assert status == 128 + signal.SIGTERM, log.read()
    # without the loop in its own thread the process waited for the tick: RM_TIMEOUT_S - 0.5 s
    assert took < STOP_GRACE_S + 1.0 < RM_TIMEOUT_S - 0.5, log.read()
