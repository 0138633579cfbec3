"""The activator's demand reports (tarn.activator.demand): sent at once while requests are held,
then every interval, and once when none are."""

from __future__ import annotations

import time

from tarn.activator.demand import Report, Reporter


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
