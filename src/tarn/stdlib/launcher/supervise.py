"""Run Triton as a child and leave no process behind when it ends (standard library only).

Why not exec: Triton's Python-backend stubs can outlive a Triton killed with -9. A NodeManager
that re-acquired a container after its own restart decides the container is alive by its process
*group* (``kill -0 -<pgid>``), so one orphaned stub kept a dead instance RUNNING in YARN for good.

So the launcher (and each rank wrapper of a multi-rank world)

- becomes a child subreaper (``PR_SET_CHILD_SUBREAPER``): a process orphaned below it, such as a
  stub whose Triton died, is re-parented to it rather than to the node's init, and stays findable;
- runs the command as its child; the kernel sends it SIGTERM should the launcher itself die;
- passes the signals YARN sends (SIGTERM first) on to it, for Triton's graceful exit;
- when it ends, however it ends: sweeps the rest (every descendant, and for the launcher the rest
  of its process group; never itself nor its ancestors): SIGTERM, a short grace, then SIGKILL;
- exits with the command's status (128+N for signal N, as a shell reports it).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

log = logging.getLogger("tarn.launcher")

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
PR_SET_CHILD_SUBREAPER = 36
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
SWEEP_GRACE_S = 2.0  # a stray's chance to end on SIGTERM before SIGKILL


@dataclass(frozen=True)
class Proc:
    ppid: int
    pgid: int


# ---- decisions (pure)


def exit_status(returncode: int) -> int:
    """A child's status as a shell reports it: its exit code, or 128+N when signal N ended it."""
    return 128 - returncode if returncode < 0 else returncode


def ancestors(table: Mapping[int, Proc], pid: int) -> set[int]:
    seen: set[int] = set()
    while pid in table and table[pid].ppid not in seen and table[pid].ppid > 0:
        pid = table[pid].ppid
        seen.add(pid)
    return seen


def strays(table: Mapping[int, Proc], me: int, *, group: bool) -> set[int]:
    """What to end once the command has: every descendant of ``me`` (re-parented orphans
    included) and, with ``group``, every other member of its process group; never ``me`` nor an
    ancestor (the container's shell, waiting on the launcher)."""
    children: dict[int, list[int]] = {}
    for pid, proc in table.items():
        children.setdefault(proc.ppid, []).append(pid)
    found: set[int] = set()
    todo = list(children.get(me, []))
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, []))
    if group and me in table:
        found |= {pid for pid, proc in table.items() if proc.pgid == table[me].pgid}
    return found - {me} - ancestors(table, me)


# ---- steps with I/O


def process_table(proc: Path = Path("/proc")) -> dict[int, Proc]:
    """pid -> (ppid, pgid) of every process this one can see."""
    table: dict[int, Proc] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # ended meanwhile
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) ": state ppid pgrp ...
        table[int(entry.name)] = Proc(ppid=int(fields[1]), pgid=int(fields[2]))
    return table


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option})")


def die_with_parent(signum: int) -> None:
    """The kernel sends this process ``signum`` when its parent dies (PR_SET_PDEATHSIG)."""
    _prctl(PR_SET_PDEATHSIG, signum)


def _signal_all(pids: Iterable[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


def _reap() -> None:
    """Collect the orphans re-parented here that have ended (else they stay zombies)."""
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def sweep(
    *, group: bool, grace_s: float = SWEEP_GRACE_S, table: Callable[[], dict[int, Proc]] = process_table
) -> int:
    """End every stray (see :func:`strays`): SIGTERM, up to ``grace_s`` to go, then SIGKILL.
    Returns how many there were."""
    me = os.getpid()
    found = strays(table(), me, group=group)
    if not found:
        return 0
    log.warning("ending %d process(es) left behind: %s", len(found), " ".join(map(str, sorted(found))))
    _signal_all(found, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while found & strays(table(), me, group=group) and time.monotonic() < deadline:
        _reap()
        time.sleep(0.05)
    for _round in range(10):  # a stray may have forked meanwhile: until none is left
        left = strays(table(), me, group=group)
        if not left:
            break
        _signal_all(left, signal.SIGKILL)
        time.sleep(0.05)
        _reap()
    _reap()
    return len(found)


def supervise(command: Sequence[str], env: Mapping[str, str], *, group: bool) -> int:
    """Run ``command`` until it ends, passing signals on; sweep what it left; its return code
    (negative: the signal that ended it). ``group``: the launcher owns the container's process
    group and sweeps it too; a rank wrapper shares mpirun's, and sweeps its descendants only."""
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    child = subprocess.Popen(  # noqa: S603 - the instance's own command
        list(command), env=dict(env), preexec_fn=lambda: die_with_parent(signal.SIGTERM)
    )

    def forward(signum: int, _frame: FrameType | None) -> None:
        child.send_signal(signum)

    for signum in FORWARDED:
        signal.signal(signum, forward)
    code = child.wait()  # a signal YARN sends from here on goes to the ended child: a no-op
    log.info("%s ended with status %d", command[0], exit_status(code))
    sweep(group=group)
    return code
