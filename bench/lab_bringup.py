"""Lab bring-up numbers: cold (fresh nodes), warm (stopped nodes started again), the idempotent
re-run of site.yml, and the memory the lab holds. Run with `make bench` (it rebuilds the lab).

Cold is the baseline the warm bring-up and the re-run are compared against, in the same run.

    python bench/lab_bringup.py [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

from tarn.clients.resourcemanager import ResourceManager
from tarn.errors import ClusterError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run alone: bench.result from the root
from bench.result import Figure, Result

ROOT = Path(__file__).resolve().parents[1]
NODES = ["tarn-lab-master", "tarn-lab-worker1", "tarn-lab-worker2", "tarn-lab-edge"]


def playbook(*args: str) -> str:
    done = subprocess.run(["ansible-playbook", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode:
        sys.exit(f"ansible-playbook {' '.join(args)} failed:\n{done.stdout[-3000:]}{done.stderr[-2000:]}")
    return done.stdout


def changed(recap: str) -> int:
    return sum(int(n) for n in re.findall(r"changed=(\d+)", recap))


def wait_for_nodemanagers(timeout: float = 300) -> None:
    rm = ResourceManager(["http://master:8088"], user="tarn", timeout=5)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if sum(n["state"] == "RUNNING" for n in rm.nodes()) == 2:
                return
        except ClusterError:
            pass
        time.sleep(1)
    sys.exit("the NodeManagers did not register")


def timed(step: str, *actions: list[str]) -> float:
    start = time.monotonic()
    for action in actions:
        playbook(*action)
    wait_for_nodemanagers()
    seconds = time.monotonic() - start
    print(f"{step:<28} {seconds:7.1f} s")
    return seconds


def lab_memory_mib() -> float:
    stats = subprocess.run(
        ["podman", "stats", "--no-stream", "--format", "json", *NODES],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    total = 0.0
    for row in json.loads(stats):
        used = row["mem_usage"].split("/")[0].strip()
        value, unit = re.match(r"([\d.]+)\s*([kMG]?B)", used).groups()  # type: ignore[union-attr]
        total += float(value) * {"B": 1 / 2**20, "kB": 1 / 1024, "MB": 1, "GB": 1024}[unit]
    return total


def figures(cold: float, warm: float, rerun: float) -> list[Figure]:
    return [
        {"name": "warm bring-up", "value": warm, "unit": "s", "baseline": cold,
         "baseline_name": "cold bring-up"},
        {"name": "idempotent re-run of site.yml", "value": rerun, "unit": "s", "baseline": cold,
         "baseline_name": "cold bring-up"},
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    playbook("lab/nodes.yml", "-e", "tarn_lab_state=absent")
    cold = timed("cold bring-up (new nodes)", ["lab/nodes.yml"], ["playbooks/site.yml"])
    subprocess.run(["podman", "stop", "-t", "30", *NODES], check=True, capture_output=True)
    warm = timed("warm bring-up (nodes restarted)", ["lab/nodes.yml"], ["playbooks/site.yml"])
    start = time.monotonic()
    recap = playbook("playbooks/site.yml")
    rerun = time.monotonic() - start
    memory = lab_memory_mib()
    print(f"{'idempotent re-run':<28} {rerun:7.1f} s  (changed={changed(recap)})")
    print(f"{'lab memory (4 nodes)':<28} {memory:7.0f} MiB")
    print(f"warm / cold = {warm / cold:.2f}, re-run / cold = {rerun / cold:.2f}")
    if args.json:
        samples = {
            "cold_s": cold,
            "warm_s": warm,
            "rerun_s": rerun,
            "rerun_changed": changed(recap),
            "lab_memory_mib": memory,
        }
        Result("lab_bringup", figures(cold, warm, rerun), samples=samples).write(args.json)


if __name__ == "__main__":
    main()
