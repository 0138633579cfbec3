"""The rank wrapper (tarn.stdlib.launcher.rank) with real processes: the start barrier, the exit
status, no rank outliving its wrapper or mpirun."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tarn.stdlib.launcher import rank
from tests.support.processes import alive


@pytest.mark.parametrize(("returncode", "status"), [(0, 1), (1, 1), (3, 3), (-9, 137), (-15, 143)])
def test_a_rank_never_ends_with_zero(returncode: int, status: int) -> None:
    assert rank.rank_exit_code(returncode) == status


def rank_code(world_dir: Path, r: int, size: int, *command: str, wait: float = 30.0) -> str:
    argv = ["rank", "--world-dir", str(world_dir), "--rank", str(r), "--size", str(size)]
    argv += ["--wait-seconds", str(wait), "--", *command]
    return f"import sys; from tarn.stdlib.launcher.main import main; sys.exit(main({argv!r}))"


def start_rank(
    world_dir: Path, r: int, size: int, *command: str, wait: float = 30.0
) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", rank_code(world_dir, r, size, *command, wait=wait)])


def read_pids(*files: Path) -> list[int]:
    deadline = time.monotonic() + 10
    while not all(f.exists() and f.read_text().strip() for f in files):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return [int(f.read_text()) for f in files]


def test_rank_0_starts_its_command_only_when_every_rank_is_up(tmp_path: Path) -> None:
    started = tmp_path / "rank0-started"
    leader = start_rank(tmp_path, 0, 2, "sh", "-c", f"touch {started}; exec sleep 60")
    time.sleep(1.0)
    assert not started.exists()  # rank 1 is not up yet
    follower = start_rank(tmp_path, 1, 2, "sleep", "60")
    deadline = time.monotonic() + 10
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert started.exists()
    for process in (leader, follower):
        process.terminate()  # passed on to the command, which dies of it: so does the rank
        assert process.wait(10) == 128 + signal.SIGTERM


def test_rank_0_gives_up_when_a_rank_never_comes(tmp_path: Path) -> None:
    started = tmp_path / "rank0-started"
    leader = start_rank(tmp_path, 0, 2, "touch", str(started), wait=0.5)
    assert leader.wait(10) == 1
    assert not started.exists()


def test_a_rank_whose_command_is_killed_ends_with_the_signal_status(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    wrapper = start_rank(tmp_path, 1, 2, "sh", "-c", f"echo $$ > {pid_file}; exec sleep 60")
    deadline = time.monotonic() + 10
    while not pid_file.exists() or not pid_file.read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.kill(int(pid_file.read_text()), signal.SIGKILL)
    assert wrapper.wait(10) == 137


def test_a_killed_wrapper_takes_its_command_along(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    wrapper = start_rank(tmp_path, 1, 2, "sh", "-c", f"echo $$ > {pid_file}; exec sleep 60")
    (child,) = read_pids(pid_file)
    wrapper.kill()  # SIGKILL: no handler runs; PR_SET_PDEATHSIG kills the command
    wrapper.wait(10)
    deadline = time.monotonic() + 10
    while alive(child):
        assert time.monotonic() < deadline, "the rank's command outlived its wrapper"
        time.sleep(0.05)


def test_a_killed_mpirun_takes_the_wrapper_and_its_command_along(tmp_path: Path) -> None:
    pid_file, wrapper_file = tmp_path / "pid", tmp_path / "wrapper"
    command = ("sh", "-c", f"echo $$ > {pid_file}; echo $PPID > {wrapper_file}; exec sleep 60")
    code = rank_code(tmp_path, 1, 2, *command)
    # Stands in for mpirun: starts the wrapper in a process group of its own, then is killed.
    starter = (
        f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {code!r}], process_group=0)"
    )
    parent = subprocess.Popen([sys.executable, "-c", f"{starter}; time.sleep(60)"])
    child, wrapper = read_pids(pid_file, wrapper_file)
    parent.kill()
    parent.wait(10)
    deadline = time.monotonic() + 10
    while alive(wrapper) or alive(child):
        assert time.monotonic() < deadline, "a rank outlived mpirun"
        time.sleep(0.05)
