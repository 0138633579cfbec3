"""What several benches share: the percentile their figures use (free ports: tests.support.loopback)."""

from __future__ import annotations

from collections.abc import Iterable


def percentile(values: Iterable[float], fraction: float) -> float:
    """The value at ``fraction`` (0.99 for p99) of ``values``, in their unit, sorted here: the
    value at index int(fraction * n) of the sorted values (the last one for fraction 1),
    no interpolation."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("percentile of no values")
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]
