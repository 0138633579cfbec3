"""lab/preflight.sh: a missing program is named with its Debian package; the programs the tests
look up are in its table (the table is also the Makefile's apt list)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from tests.support import ROOT

PREFLIGHT = ROOT / "lab" / "preflight.sh"


def table() -> dict[str, str]:
    """command (or path) → package, as the script lists them."""
    rows = re.findall(r'^  "(\S+)\s+(\S+)\s', PREFLIGHT.read_text(), re.MULTILINE)
    return dict(rows)


def test_a_missing_program_is_named_with_its_package(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for command in [c for c in table() if not c.startswith("/")] + ["bash", "env"]:
        found = shutil.which(command)
        if found and command != "haproxy":
            (bin_dir / command).symlink_to(found)
    done = subprocess.run(
        ["bash", str(PREFLIGHT)],
        env={**os.environ, "PATH": str(bin_dir)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert "haproxy (apt package haproxy; used by tests/integration" in done.stderr
    assert "podman (" not in done.stderr


def test_every_program_here_passes() -> None:
    done = subprocess.run(["bash", str(PREFLIGHT)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_the_packages_are_the_tables() -> None:
    done = subprocess.run(["bash", str(PREFLIGHT), "--packages"], capture_output=True, text=True, check=True)
    assert done.stdout.split() == sorted(set(table().values()))


def test_the_programs_the_tests_look_up_are_in_the_table() -> None:
    looked_up: set[str] = set()
    for path in [*ROOT.glob("tests/**/*.py"), *ROOT.glob("lab/**/*.py"), *ROOT.glob("bench/*.py")]:
        text = path.read_text()
        looked_up |= set(re.findall(r'shutil\.which\("([\w.-]+)"\)', text))
        for group in re.findall(r"for tool in \(([^)]*)\)", text):
            looked_up |= set(re.findall(r'"([\w.-]+)"', group))
    assert looked_up, "the scan found nothing: its patterns are stale"
    assert looked_up - set(table()) == set()
