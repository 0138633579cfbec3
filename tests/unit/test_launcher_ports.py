"""The launcher waits for Triton's ports while an instance stopped on the node still holds them."""

from __future__ import annotations

import logging
import socket
import threading
import time

import pytest

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
