"""The activator's demand reports (tarn.activator.demand): sent at once while requests are held,
then every interval, and once when none are."""

from __future__ import annotations

import time

import pytest

from tarn.activator.demand import Report, Reporter, parse_report


def test_reporter_sends_at_the_start_while_holding_and_once_at_the_end() -> None:
    sent: list[Report] = []
    reporter = Reporter(sent.append, interval=0.1)
    reporter.start()
    try:
        time.sleep(0.2)
        assert sent == []  # nothing held, nothing said
        reporter.update(3, 0.0)
        time.sleep(0.35)
        assert len(sent) >= 2  # at once, then every interval (0.1 s) while held
        assert all(r.held == 3 for r in sent)
        reporter.update(0, 0.0)
        time.sleep(0.3)
        assert sent[-1].held == 0
        count = len(sent)
        time.sleep(0.3)
        assert len(sent) == count  # quiet again
    finally:
        reporter.stop()


def test_a_report_reads_back() -> None:
    assert parse_report(Report(3, 1.5, 100.0).encode()) == Report(3, 1.5, 100.0)


@pytest.mark.parametrize(
    "data",
    [
        None,
        b"",
        b"not json",
        b"[1]",  # not an object
        b'"held"',
        b"{}",
        b'{"held": -1}',
        b'{"held": true}',
        b'{"held": "3"}',
        b'{"held": Infinity}',  # OverflowError from int() before (issue 48, row 12)
        b'{"held": 1, "oldest_s": NaN}',
        b'{"held": 1, "at": -Infinity}',
        b"[" * 100_000,  # RecursionError from the parser before
        b"\xff\xfe",
    ],
)
def test_anything_else_is_no_report_and_never_raises(data: bytes | None) -> None:
    assert parse_report(data) is None
