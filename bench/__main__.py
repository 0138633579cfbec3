"""One benchmark command: runs every benchmark that can run here, one after the other, then writes
build/bench/report.md with its plots (bench/report.py).

Each bench runs as its own process with ``--json build/bench/<name>.json``, its output shown and
kept in build/bench/<name>.log. A bench that fails is recorded and shown in the report; the others
still run. Those that need the lab are skipped, with the reason, when it is not up; lab_bringup
(which rebuilds the lab, about 15 minutes) runs first unless --no-bringup. Before the benches
that need the main job's service tarn-demo, lab/main_job.py runs (it reuses a running one); a
bench that destroyed tarn-demo for room (submit_to_inference, scale_timeline) says so in its JSON,
and tarn-demo is brought back before the next bench that needs it, or at the end.

    make bench                                    # on the lab: builds what the lab needs first
    python -m bench [--quick] [--no-bringup] [--only NAME,...] [--skip NAME,...]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.catalogue import BENCHES, LAB_JOB, Bench
from bench.result import read

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "build" / "bench"
MASTER = os.environ.get("TARN_LAB_MASTER", "master")
LAB_NODE = "tarn-lab-master"
TIMEOUT_S = 3600  # one bench; lab_bringup is the longest (about 15 minutes)


@dataclass
class Run:
    name: str
    status: str  # ok, failed, skipped
    reason: str = ""
    seconds: float = 0.0
    command: str = ""
    log: str = ""


def selected(only: str | None, skip: str | None, bringup: bool) -> list[Bench]:
    """The benches to run, in the catalogue's order; an unknown name is an error."""
    known = {b.name for b in BENCHES}
    wanted = {n for n in (only or "").split(",") if n}
    unwanted = {n for n in (skip or "").split(",") if n}
    unknown = (wanted | unwanted) - known
    if unknown:
        raise SystemExit(
            f"--only/--skip: unknown {', '.join(sorted(unknown))}; known: {', '.join(sorted(known))}"
        )
    chosen = [b for b in BENCHES if (not wanted or b.name in wanted) and b.name not in unwanted]
    return [b for b in chosen if bringup or b.name != "lab_bringup"]


def lab_problem() -> str | None:
    """Why the lab cannot be used now, or None when it is up."""
    if not shutil.which("podman"):
        return "podman is not installed: the lab cannot run here"
    exists = subprocess.run(["podman", "container", "exists", LAB_NODE], capture_output=True, check=False)
    if exists.returncode:
        return f"the lab is not up (no {LAB_NODE} container): make lab"
    url = f"http://{MASTER}:8088/ws/v1/cluster/info"
    try:
        with urllib.request.urlopen(url, timeout=10):
            pass
    except OSError as error:  # URLError and HTTPError among them
        return f"the lab's ResourceManager ({url}) does not answer ({error.__class__.__name__})"
    return None


def missing_programs(bench: Bench) -> str | None:
    missing = [p for p in bench.programs if shutil.which(p) is None]
    return f"not installed: {', '.join(missing)} (lab/preflight.sh lists them)" if missing else None


def child_env() -> dict[str, str]:
    """The repository's root and src importable (tarn, tests.e2e), output unbuffered for the tee."""
    paths = [str(ROOT), str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p), "PYTHONUNBUFFERED": "1"}


def execute(bench: Bench, quick: bool, out: Path, timeout: float = TIMEOUT_S) -> Run:
    """Run one bench, its output to the console and its log; a failure is recorded, not raised."""
    document, log = out / f"{bench.name}.json", out / f"{bench.name}.log"
    document.unlink(missing_ok=True)  # a failed run must not leave an older run's figures behind
    command = [sys.executable, bench.script, *bench.arguments(quick)]
    if bench is not LAB_JOB:
        command += ["--json", str(document)]
    shown = " ".join(command[1:])
    print(f"\n==> {bench.name}: {shown}", flush=True)
    began = time.monotonic()
    with log.open("w") as sink:
        process = subprocess.Popen(
            command, cwd=ROOT, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,  # its own process group: a timeout ends it with its children
        )  # fmt: skip
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                os.killpg(process.pid, signal.SIGTERM)

        timer = threading.Timer(timeout, expire)
        timer.start()
        assert process.stdout is not None
        for line in process.stdout:
            sys.stdout.write(line)
            sink.write(line)
        code = process.wait()
        timer.cancel()
    seconds = time.monotonic() - began
    if expired.is_set():
        reason = f"timed out after {timeout:.0f} s"
    elif code:
        reason = f"exit {code}"
    elif bench is not LAB_JOB and not document.exists():
        reason = "exit 0 but no JSON written"
    else:
        reason = ""
    status = "failed" if reason else "ok"
    return Run(bench.name, status, reason, seconds, shown, os.path.relpath(log, ROOT))


def destroyed_demo(out: Path, name: str) -> bool:
    """Whether the bench destroyed tarn-demo to make room (its result says so)."""
    result = read(out / f"{name}.json")
    return bool(result and result.destroyed_demo)


class Runner:
    """Runs the benches in order; knows the lab's state, checked once and again after a bring-up."""

    def __init__(self, quick: bool, out: Path) -> None:
        self.quick, self.out = quick, out
        self.runs: list[Run] = []
        self._lab: str | None = None
        self._lab_checked = False
        self._demo: str | None = None  # why tarn-demo is not there; "" once lab/main_job.py passed
        self._demo_checked = False
        self.restore_demo = False  # a bench destroyed tarn-demo to make room

    def lab(self) -> str | None:
        if not self._lab_checked:
            self._lab, self._lab_checked = lab_problem(), True
        return self._lab

    def demo(self) -> str | None:
        if not self._demo_checked:
            job = execute(LAB_JOB, self.quick, self.out)
            self.runs.append(job)
            self._demo = (
                None if job.status == "ok" else f"lab/main_job.py failed ({job.reason}): see {job.log}"
            )
            self._demo_checked = True
        return self._demo

    def skip_reason(self, bench: Bench) -> str | None:
        return (
            missing_programs(bench)
            or (self.lab() if bench.lab else None)
            or (self.demo() if bench.demo else None)
        )

    def run(self, bench: Bench) -> None:
        reason = self.skip_reason(bench)
        if reason:
            print(f"\n==> {bench.name}: skipped: {reason}", flush=True)
            self.runs.append(Run(bench.name, "skipped", reason))
            return
        self.runs.append(execute(bench, self.quick, self.out))
        if bench.name == "lab_bringup":
            self._lab_checked = self._demo_checked = False  # a new lab: no tarn-demo yet
        if destroyed_demo(self.out, bench.name):
            self._demo_checked = False  # the next bench that needs it brings it back
            self.restore_demo = True

    def finish(self) -> None:
        """Leave the lab as found: tarn-demo back if a bench destroyed it and none brought it back."""
        if self.restore_demo and not self._demo_checked:
            print("\n==> a bench destroyed tarn-demo: bringing it back", flush=True)
            self.demo()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--only", help="these benches only, comma-separated: " + ", ".join(b.name for b in BENCHES)
    )
    parser.add_argument("--skip", help="not these, comma-separated")
    parser.add_argument("--no-bringup", action="store_true", help="do not rebuild the lab (lab_bringup)")
    parser.add_argument("--quick", action="store_true", help="small parameters: a check that everything runs")
    args = parser.parse_args()
    benches = selected(args.only, args.skip, bringup=not args.no_bringup)
    OUT.mkdir(parents=True, exist_ok=True)
    runner = Runner(args.quick, OUT)
    started = time.time()
    for bench in benches:
        runner.run(bench)
    runner.finish()
    record = {"started": started, "quick": args.quick, "runs": [asdict(r) for r in runner.runs]}
    (OUT / "runs.json").write_text(json.dumps(record, indent=2) + "\n")
    # only now: a child forked from a process holding matplotlib inherits its max RSS (controller_scale's)
    from bench.report import summary_table, write_report

    report = write_report(OUT)
    print(f"\n{summary_table(OUT)}\nreport: {os.path.relpath(report, ROOT)}")
    failed = [r.name for r in runner.runs if r.status == "failed"]
    if failed:
        sys.exit(f"failed: {', '.join(failed)} (their logs are in {OUT.relative_to(ROOT)})")


if __name__ == "__main__":
    main()
