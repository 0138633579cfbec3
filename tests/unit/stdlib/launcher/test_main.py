"""The launcher's main (tarn.stdlib.launcher.main): it waits for Triton's ports while an instance
stopped on the node still holds them, and it keeps its model cache in the node's cache when there
is one."""

from __future__ import annotations

import argparse
import logging
import socket
import threading
import time
from pathlib import Path

import pytest

from tarn.stdlib.launcher.main import cache_dir as launcher_cache_dir
from tarn.stdlib.launcher.main import port_in_use, wait_for_ports


def listening() -> socket.socket:
    server = socket.socket()
    server.bind(("0.0.0.0", 0))  # noqa: S104 - as Triton binds; the test never connects to it
    server.listen()
    return server


def test_a_port_someone_listens_on_is_in_use() -> None:
    with listening() as server:
        port = server.getsockname()[1]
        assert port_in_use(port)
    assert not port_in_use(port)


def test_waits_until_the_stopping_instance_lets_go(caplog: pytest.LogCaptureFixture) -> None:
    server = listening()
    port = server.getsockname()[1]
    threading.Timer(0.5, server.close).start()
    began = time.monotonic()
    with caplog.at_level(logging.INFO):
        wait_for_ports([port], timeout_s=10)
    assert 0.4 <= time.monotonic() - began < 3
    assert "still stopping" in caplog.text


def test_gives_up_after_the_timeout(caplog: pytest.LogCaptureFixture) -> None:
    with listening() as server:
        began = time.monotonic()
        wait_for_ports([server.getsockname()[1]], timeout_s=0.3)
        assert time.monotonic() - began < 2
    assert "starting Triton anyway" in caplog.text


def test_the_launcher_uses_the_node_cache_when_it_is_there(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    node = tmp_path / "node-cache"
    environ = {"LOCAL_DIRS": f"{tmp_path}/app,{tmp_path}/app2"}
    missing = argparse.Namespace(model_cache_dir=str(node))
    caplog.set_level(logging.WARNING)
    assert launcher_cache_dir(missing, environ) == tmp_path / "app" / "tarn-model-cache"
    assert f"model cache {node} is not a writable directory on this node" in caplog.text
    node.mkdir()
    assert launcher_cache_dir(missing, environ) == node
    assert (
        launcher_cache_dir(argparse.Namespace(model_cache_dir=None), environ)
        == tmp_path / "app" / "tarn-model-cache"
    )
