"""What several benches share: a free loopback port and the percentile their figures use."""

from __future__ import annotations

import socket
from collections.abc import Iterable


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the kernel's pick; free until something else takes it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def percentile(values: Iterable[float], fraction: float) -> float:
    """The value at ``fraction`` (0.99 for p99) of ``values``, in their unit, sorted here: the
    value at index int(fraction * n) of the sorted values (the last one for fraction 1),
    no interpolation."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("percentile of no values")
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]
