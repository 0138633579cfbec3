"""bench/common.py: the percentile every bench's p99 is and the free loopback port."""

from __future__ import annotations

import socket

import pytest

from bench.common import percentile
from tests.support.loopback import free_port, free_ports


def test_the_percentile_is_the_sorted_value_at_its_index_without_interpolation() -> None:
    values = [float(v) for v in range(100, 0, -1)]  # 100 .. 1, unsorted on purpose
    assert percentile(values, 0.99) == 100.0  # index 99 of 1..100
    assert percentile(values, 0.5) == 51.0  # index 50, not the median's 50.5
    assert percentile(values, 0.0) == 1.0
    assert percentile(values, 1.0) == 100.0  # the last one, not past it
    assert percentile([3.0, 1.0, 2.0], 0.99) == 3.0  # index int(2.97) = 2
    assert percentile(iter([0.25]), 0.5) == 0.25  # any iterable, the values' own unit


def test_no_values_have_no_percentile() -> None:
    with pytest.raises(ValueError, match="no values"):
        percentile([], 0.99)


def test_the_free_port_can_be_bound_on_loopback() -> None:
    port = free_port()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", port))
        assert listener.getsockname()[1] == port


def test_free_ports_are_distinct() -> None:
    ports = free_ports(8)
    assert len(set(ports)) == 8
