"""The zipapps `tarn submit` ships run where they land: the launcher with the standard library and
the libraries it carries only."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tarn import payload


def run(pyz: Path, *args: str, isolated: bool) -> subprocess.CompletedProcess[str]:
    # -I -S: no site-packages, no environment: only the standard library and the zipapp itself.
    flags = ["-I", "-S"] if isolated else ["-I"]
    return subprocess.run(
        [sys.executable, *flags, str(pyz), *args], capture_output=True, text=True, check=False
    )


def test_launcher_runs_with_nothing_installed(tmp_path: Path) -> None:
    pyz = tmp_path / "tarn-launcher.pyz"
    pyz.write_bytes(payload.launcher_zipapp())
    done = run(pyz, "--help", isolated=True)
    assert done.returncode == 0, done.stderr
    assert "--model-repository" in done.stdout


def test_launcher_carries_the_libraries_of_its_listeners(tmp_path: Path) -> None:
    pyz = tmp_path / "tarn-launcher.pyz"
    pyz.write_bytes(payload.launcher_zipapp())
    script = (
        f"import sys; sys.path.insert(0, {str(pyz)!r})\n"
        "import h11, prometheus_client\n"
        "print(h11.__file__); print(prometheus_client.__file__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert all(line.startswith(str(pyz)) for line in done.stdout.splitlines())


def test_launcher_fails_cleanly_on_a_missing_local_repository(tmp_path: Path) -> None:
    pyz = tmp_path / "tarn-launcher.pyz"
    pyz.write_bytes(payload.launcher_zipapp())
    done = run(pyz, "--model-repository", str(tmp_path / "absent"), isolated=True)
    assert done.returncode == 1
    assert "is not a directory" in done.stderr


def test_controller_payload_carries_its_libraries(tmp_path: Path) -> None:
    pyz = tmp_path / "tarn.pyz"
    pyz.write_bytes(payload.controller_zipapp())
    done = run(pyz, "submit", "--help", isolated=True)
    assert done.returncode == 0, done.stderr
    assert "--model-repository" in done.stdout


def test_zipapps_are_reproducible() -> None:
    assert payload.launcher_zipapp() == payload.launcher_zipapp()


def test_controller_payload_carries_the_zookeeper_sasl(tmp_path: Path) -> None:
    """kazoo's SASL (pure-sasl) and TARN's GSSAPI mechanism import from the zipapp alone."""
    pyz = tmp_path / "tarn.pyz"
    pyz.write_bytes(payload.controller_zipapp())
    script = (
        f"import sys; sys.path.insert(0, {str(pyz)!r})\n"
        "from tarn.clients import zk_sasl\n"
        "import puresasl.mechanisms\n"
        "zk_sasl.register()\n"
        "assert puresasl.mechanisms.mechanisms['TARN-GSSAPI'] is zk_sasl.GssapiMechanism\n"
        "print(zk_sasl.puresasl.__file__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(str(pyz))  # not the test's own site-packages
