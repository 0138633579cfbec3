"""Triton as the launcher's child (tarn.stdlib.launcher.supervise): the strays decision as a
table, then the launcher itself with real processes, a stand-in tritonserver that leaves two
"stubs" behind (one in the container's process group, one that left it with setsid)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tarn.stdlib.launcher.supervise import (
    SIDECAR_GAVE_UP,
    Proc,
    ancestors,
    exit_status,
    process_table,
    stopped_status,
    strays,
)
from tests.support.loopback import free_ports
from tests.support.processes import alive

# pid: (ppid, pgid). 1 init; 10 the container's shell (group 10) runs 11, the launcher; 12 its
# Triton; 13 a stub of Triton's; 14 an orphaned stub re-parented to the launcher, in a session of
# its own; 15 a process of the group whose parent is gone (re-parented to init); 20 another
# container's launcher (group 20).
TABLE = {
    1: Proc(0, 1),
    10: Proc(1, 10),
    11: Proc(10, 10),
    12: Proc(11, 10),
    13: Proc(12, 10),
    14: Proc(11, 14),
    15: Proc(1, 10),
    20: Proc(1, 20),
    21: Proc(20, 20),
}


@pytest.mark.parametrize(
    ("me", "group", "expected"),
    [
        (11, True, {12, 13, 14, 15}),  # the launcher: descendants and its group, not the shell above it
        (11, False, {12, 13, 14}),  # a rank wrapper: its descendants only
        (12, True, {13, 15}),  # never an ancestor, though in the group
        (20, True, {21}),  # another container's processes are not this one's
        (99, True, set()),  # a table without this process: nothing
    ],
    ids=["launcher", "rank wrapper", "not an ancestor", "its own container only", "unknown"],
)
def test_what_is_swept_when_the_command_ends(me: int, group: bool, expected: set[int]) -> None:
    assert strays(TABLE, me, group=group) == expected


def test_ancestors_stop_at_init_and_at_a_loop() -> None:
    assert ancestors(TABLE, 13) == {12, 11, 10, 1}
    assert ancestors({5: Proc(6, 5), 6: Proc(5, 5)}, 5) == {6, 5}


@pytest.mark.parametrize(("returncode", "status"), [(0, 0), (3, 3), (-9, 137), (-15, 143)])
def test_the_status_is_a_shells(returncode: int, status: int) -> None:
    assert exit_status(returncode) == status


def test_the_process_table_is_this_machines() -> None:
    table = process_table()
    assert table[os.getpid()] == Proc(os.getppid(), os.getpgid(0))


# A stand-in tritonserver: starts a stub in its process group and one that leaves it (setsid),
# writes the three pids, and on SIGTERM exits 0 as Triton's graceful shutdown would, leaving both.
STANDIN = textwrap.dedent(
    """\
    import os, signal, subprocess, sys, time
    sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
    stub = subprocess.Popen(sleeper)
    escaped = subprocess.Popen(sleeper, start_new_session=True)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    with open(os.environ["STANDIN_PIDS"] + ".tmp", "w") as out:
        out.write(f"{os.getpid()} {stub.pid} {escaped.pid}")
    os.rename(os.environ["STANDIN_PIDS"] + ".tmp", os.environ["STANDIN_PIDS"])
    time.sleep(600)
    """
)


def start_launcher(tmp_path: Path) -> tuple[subprocess.Popen[bytes], list[int]]:
    """The launcher's main with a local repository and the stand-in as its tritonserver, in a
    session of its own as YARN starts a container."""
    standin = tmp_path / "tritonserver"
    standin.write_text(f"#!{sys.executable}\n{STANDIN}")
    standin.chmod(0o755)
    (tmp_path / "models").mkdir()
    pids_file = tmp_path / "pids"
    argv = ["--model-repository", str(tmp_path / "models"), "--tritonserver", str(standin)]
    http, grpc, metrics = free_ports(3)
    argv += ["--port", str(http), "--grpc-port", str(grpc), "--metrics-port", str(metrics)]
    code = f"import sys; from tarn.stdlib.launcher.main import main; sys.exit(main({argv!r}))"
    env = {**os.environ, "STANDIN_PIDS": str(pids_file)}
    launcher = subprocess.Popen([sys.executable, "-c", code], start_new_session=True, env=env)
    deadline = time.monotonic() + 20
    while not pids_file.exists():
        assert launcher.poll() is None, "the launcher ended before its tritonserver started"
        assert time.monotonic() < deadline, "the stand-in tritonserver did not start"
        time.sleep(0.05)
    return launcher, [int(p) for p in pids_file.read_text().split()]


def test_a_killed_triton_leaves_nothing_and_its_status_is_the_containers(tmp_path: Path) -> None:
    launcher, (triton, stub, escaped) = start_launcher(tmp_path)
    try:
        os.kill(triton, signal.SIGKILL)
        assert launcher.wait(timeout=20) == 137
        assert not alive(stub)
        assert not alive(escaped)  # it had left the group: found as an orphan re-parented to the launcher
    finally:
        launcher.kill()
        for pid in (triton, stub, escaped):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_yarns_sigterm_reaches_triton_and_then_nothing_is_left(tmp_path: Path) -> None:
    launcher, (triton, stub, escaped) = start_launcher(tmp_path)
    try:
        launcher.send_signal(signal.SIGTERM)  # to the launcher alone: it passes it on
        # Triton's graceful exit was 0; the launcher reports the stop, as YARN and a shell do
        assert launcher.wait(timeout=20) == 128 + signal.SIGTERM
        assert not alive(triton)
        assert not alive(stub)
        assert not alive(escaped)
    finally:
        launcher.kill()
        for pid in (triton, stub, escaped):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize(
    ("code", "stopped_by", "gave_up", "status"),
    [
        (0, None, False, 0),  # the command's own status
        (-9, None, False, -9),  # killed: the signal
        (0, signal.SIGTERM, False, -signal.SIGTERM),  # YARN stopped it: 143, whatever Triton said
        (1, signal.SIGINT, True, -signal.SIGINT),
        (0, None, True, SIDECAR_GAVE_UP),
    ],
)
def test_the_status_names_the_signal_that_stopped_the_instance(
    code: int, stopped_by: int | None, gave_up: bool, status: int
) -> None:
    assert stopped_status(code, stopped_by, gave_up) == status
