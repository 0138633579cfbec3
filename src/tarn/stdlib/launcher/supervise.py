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
- exits with the command's status (128+N for signal N, as a shell reports it); once YARN stopped
  it (SIGTERM, SIGINT), with 128+N for that signal whatever the command's own status. That is a
  stopped container's status in YARN (143), and on Docker it is what ends the container at once:
  container-executor takes a Docker container's 0 for "not known yet" and asks Docker again,
  3 s apart, ``docker.inspect.max.retries`` times (10: 30 s) before it tells the NodeManager.

A sidecar (the OpenAI front, ``--openai-port``) runs beside the command, in the same process
group, with the same parent-death signal: started with it, sent the signals that stop it (SIGTERM,
SIGINT), stopped when the command ends. A sidecar that ends on its own is started again after a
short pause that doubles each time (:func:`restart_delay`); one that ends ``max_ends`` times
within ``window_s`` is broken, not unlucky: the command is stopped (SIGTERM) and the status is 1,
so that YARN restarts the whole instance rather than it serving ``/v2`` with a dead ``/v1``.
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
STOPPING = (signal.SIGTERM, signal.SIGINT)  # the forwarded signals that also stop the sidecar
POLL_S = 0.1  # how often the command and its sidecar are looked at
RESTART_FIRST_S = 0.5  # the pause before a sidecar's first restart; doubled at each end since
RESTART_MAX_S = 8.0
SIDECAR_STOP_S = 5.0  # a sidecar's time to end on SIGTERM once the command has ended
SIDECAR_GAVE_UP = 1  # the status when a broken sidecar stopped the instance


@dataclass(frozen=True)
class Sidecar:
    """A process that serves beside the command (the OpenAI front)."""

    name: str  # for the log: "the OpenAI front"
    command: tuple[str, ...]
    env: Mapping[str, str]
    max_ends: int = 5  # ends on its own within window_s that make it broken
    window_s: float = 60.0


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


def restart_delay(ends: Sequence[float], now: float, *, max_ends: int, window_s: float) -> float | None:
    """After a sidecar ended on its own (its ends, the latest included, as clock times): the
    seconds to wait before starting it again, or None when it ended ``max_ends`` times within
    ``window_s`` (give up)."""
    recent = sum(1 for end in ends if now - end <= window_s)
    if recent >= max_ends:
        return None
    return min(RESTART_FIRST_S * 2.0 ** max(recent - 1, 0), RESTART_MAX_S)


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


def _start(command: Sequence[str], env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(  # noqa: S603 - the instance's own commands
        list(command), env=dict(env), preexec_fn=lambda: die_with_parent(signal.SIGTERM)
    )


class _Tended:
    """A sidecar's process, restarted when it ends on its own (see :func:`restart_delay`)."""

    def __init__(self, sidecar: Sidecar, clock: Callable[[], float]) -> None:
        self.sidecar = sidecar
        self.clock = clock
        self.ends: list[float] = []
        self.due: float | None = None  # when to start it again
        self.stopping = False
        self.process: subprocess.Popen[bytes] | None = _start(sidecar.command, sidecar.env)
        log.info("%s started: %s", sidecar.name, " ".join(sidecar.command))

    def signal(self, signum: int) -> None:
        if signum in STOPPING:
            self.stopping = True
        if self.process is not None and self.process.poll() is None and signum in STOPPING:
            self.process.send_signal(signum)

    def tend(self) -> bool:
        """Restart it when due; False once it ended too often (broken)."""
        now = self.clock()
        if self.stopping:
            return True
        if self.process is not None:
            code = self.process.poll()
            if code is None:
                return True
            self.process = None
            self.ends.append(now)
            delay = restart_delay(
                self.ends, now, max_ends=self.sidecar.max_ends, window_s=self.sidecar.window_s
            )
            if delay is None:
                log.error(
                    "%s ended with status %d, %d times within %.0f s: stopping the instance",
                    self.sidecar.name,
                    exit_status(code),
                    self.sidecar.max_ends,
                    self.sidecar.window_s,
                )
                return False
            log.error("%s ended with status %d: starting it again in %.1f s", self.sidecar.name,
                      exit_status(code), delay)  # fmt: skip
            self.due = now + delay
        if self.due is not None and now >= self.due:
            self.due = None
            self.process = _start(self.sidecar.command, self.sidecar.env)
            log.info("%s started again", self.sidecar.name)
        return True

    def stop(self) -> None:
        """The command ended: SIGTERM, a grace, then SIGKILL (the sweep takes what it left)."""
        self.stopping = True
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
        try:
            code = self.process.wait(SIDECAR_STOP_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        log.info("%s stopped with status %d", self.sidecar.name, exit_status(code))


def supervise(
    command: Sequence[str],
    env: Mapping[str, str],
    *,
    group: bool,
    sidecar: Sidecar | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Run ``command`` until it ends, passing signals on; sweep what it left; its return code
    (negative: the signal that ended it). ``group``: the launcher owns the container's process
    group and sweeps it too; a rank wrapper shares mpirun's, and sweeps its descendants only.
    ``sidecar``: run beside it (see the module's docstring); ``SIDECAR_GAVE_UP`` when it broke."""
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    child = _start(command, env)
    beside = None if sidecar is None else _Tended(sidecar, clock)

    stopped_by: list[int] = []

    def forward(signum: int, _frame: FrameType | None) -> None:
        if signum in STOPPING:
            stopped_by.append(signum)
        child.send_signal(signum)
        if beside is not None:
            beside.signal(signum)

    for signum in FORWARDED:
        signal.signal(signum, forward)
    if beside is None:
        code, gave_up = child.wait(), False  # a signal YARN sends from here on: a no-op
    else:
        code, gave_up = _wait_beside(child, beside)
    log.info("%s ended with status %d", command[0], exit_status(code))
    sweep(group=group)
    return stopped_status(code, stopped_by[0] if stopped_by else None, gave_up)


def stopped_status(code: int, stopped_by: int | None, gave_up: bool) -> int:
    """The launcher's return code: the signal that stopped the instance, if one did (as a negative
    code, like a child's); else 1 when a broken sidecar stopped it; else the command's."""
    if stopped_by is not None:
        return -stopped_by
    return SIDECAR_GAVE_UP if gave_up else code


def _wait_beside(child: subprocess.Popen[bytes], beside: _Tended) -> tuple[int, bool]:
    """Wait for ``child`` while tending its sidecar; stop it if the sidecar breaks. Its return
    code, and whether the sidecar broke."""
    gave_up = False
    while (code := child.poll()) is None:
        if not gave_up and not beside.tend():
            gave_up = True
            child.terminate()  # Triton's graceful exit; then YARN restarts the instance
        time.sleep(POLL_S)
    beside.stop()
    return code, gave_up
