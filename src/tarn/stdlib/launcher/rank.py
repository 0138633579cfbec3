"""One rank of a multi-rank Triton instance: ``tarn-launcher.pyz rank … -- tritonserver …``.

mpirun starts this wrapper once per rank (see :mod:`tarn.stdlib.launcher.world`). It

- marks the rank as up (a file in the world directory), and on rank 0 waits until every rank is
  up before Triton starts: the instance's ports open, and YARN's readiness check can pass, only
  when the whole world runs;
- runs Triton as its child under :mod:`tarn.stdlib.launcher.supervise` (signals passed on, and
  whatever Triton leaves behind ended with it); the kernel ends Triton if this wrapper dies, as it
  kills the wrapper if mpirun dies (PR_SET_PDEATHSIG), so no rank outlives its world;
- ends non-zero when its Triton ends, even with 0: a rank never ends on its own while its world
  serves, so mpirun stops every other rank and YARN restarts the instance.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from tarn.stdlib.launcher import supervise

log = logging.getLogger("tarn.launcher")


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tarn-launcher rank", description="one rank of a Triton world")
    parser.add_argument("--world-dir", type=Path, required=True)
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--size", type=int, required=True)
    parser.add_argument("--gpu", help="the device this rank drives")
    parser.add_argument(
        "--wait-seconds", type=float, default=300.0, help="rank 0: how long to wait for the rest"
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- tritonserver ARGS...")
    args = parser.parse_args(argv)
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if not args.command:
        parser.error("give the rank's command after --")
    return args


def up_marker(world_dir: Path, rank: int) -> Path:
    return world_dir / f"rank-{rank}.up"


def missing_ranks(world_dir: Path, size: int) -> list[int]:
    return [r for r in range(size) if not up_marker(world_dir, r).exists()]


def wait_for_world(world_dir: Path, size: int, timeout: float, poll: float = 0.05) -> list[int]:
    """The ranks still missing when every rank is up ([]) or the time is out."""
    deadline = time.monotonic() + timeout
    missing = missing_ranks(world_dir, size)
    while missing and time.monotonic() < deadline:
        time.sleep(poll)
        missing = missing_ranks(world_dir, size)
    return missing


def rank_exit_code(returncode: int) -> int:
    """A rank's exit status: never 0 (its world cannot go on without it); 128+N for signal N."""
    return supervise.exit_status(returncode) or 1


def main(argv: Sequence[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s tarn-launcher %(levelname)s %(message)s")
    args = parse_args(argv)
    # This wrapper dies with mpirun too, even when mpirun is killed outright (YARN's SIGKILL after
    # its stop grace), whatever process group MPI started it in; and so does its Triton, below.
    parent = os.getppid()
    supervise.die_with_parent(signal.SIGKILL)
    if os.getppid() != parent:  # mpirun died before the line above took effect
        return 1
    env = dict(os.environ, TARN_RANK=str(args.rank))
    if args.gpu is not None:
        env["TARN_RANK_GPU"] = args.gpu
    up_marker(args.world_dir, args.rank).touch()
    if args.rank == 0:
        missing = wait_for_world(args.world_dir, args.size, args.wait_seconds)
        if missing:
            log.error("rank 0: ranks %s did not start within %.0f s", missing, args.wait_seconds)
            return 1
        log.info("rank 0: all %d ranks are up; Triton starts serving", args.size)
    sys.stdout.flush()
    sys.stderr.flush()
    code = supervise.supervise(args.command, env, group=False)
    log.error("rank %d: %s ended with %s; the world stops", args.rank, args.command[0], code)
    return rank_exit_code(code)
