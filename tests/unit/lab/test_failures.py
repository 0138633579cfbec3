"""lab/failures.py names each failed or errored test of a JUnit report, and only those."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from tests.support import ROOT

SCRIPT = ROOT / "lab" / "failures.py"
spec = importlib.util.spec_from_file_location("lab_failures", SCRIPT)
assert spec is not None
assert spec.loader is not None
lab_failures = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lab_failures)

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="1" failures="1" tests="3">
<testcase classname="tests.e2e.test_chaos" name="test_restart_zookeeper" time="9.1"/>
<testcase classname="tests.e2e.test_chaos" name="test_kill_the_controller" time="30.2">
<failure message="AssertionError: 4 failed requests&#10;assert 4 == 0">trace</failure></testcase>
<testcase classname="tests.e2e.test_haproxy" name="test_sync" time="1.0">
<error message="failed on setup with &quot;TimeoutError&quot;">trace</error></testcase>
</testsuite></testsuites>
"""


def test_names_failures_and_errors_with_their_first_line(tmp_path: Path) -> None:
    report = tmp_path / "e2e.xml"
    report.write_text(REPORT)
    assert lab_failures.failures(report) == [
        "FAILURE tests.e2e.test_chaos::test_kill_the_controller: AssertionError: 4 failed requests",
        'ERROR tests.e2e.test_haproxy::test_sync: failed on setup with "TimeoutError"',
    ]


def test_a_missing_report_says_the_tests_did_not_run(tmp_path: Path, capsys) -> None:
    assert lab_failures.main(["failures.py", str(tmp_path / "absent.xml")]) == 0
    assert "did not run" in capsys.readouterr().out
