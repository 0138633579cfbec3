"""The Triton client never hangs or raises on a dead instance where the caller asks `ready()`."""

from __future__ import annotations

import socket

import pytest

from tarn.clients.triton import Triton
from tarn.errors import ClusterError


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_a_dead_instance_is_not_ready() -> None:
    assert Triton("127.0.0.1", http_port=closed_port(), timeout=1).ready() is False


def test_metrics_of_a_dead_instance_is_a_cluster_error() -> None:
    with pytest.raises(ClusterError, match="metrics"):
        Triton("127.0.0.1", metrics_port=closed_port(), timeout=1).metrics()
