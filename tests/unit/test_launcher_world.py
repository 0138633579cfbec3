"""Multi-rank Triton instances: the launch command and GPU assignment per (tp, pp), the rank wrapper
with real processes (start barrier, exit status, no rank outliving its wrapper)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tarn.stdlib.launcher import rank, world
from tarn.stdlib.launcher.main import launch_command, parse_args

SERVING = ["--model-repository=/models", "--http-port=8000", "--grpc-port=8001", "--metrics-port=8002"]


def app_contexts(command: list[str]) -> list[list[str]]:
    """mpirun's app contexts (``-n 1 …`` separated by ':'), each without its ``-n 1``."""
    head = command.index("-n")
    contexts: list[list[str]] = [[]]
    for word in command[head:]:
        if word == ":":
            contexts.append([])
        else:
            contexts[-1].append(word)
    assert all(c[:2] == ["-n", "1"] for c in contexts)
    return [c[2:] for c in contexts]


# (tp, pp) → [(rank, tp_rank, pp_rank, GPU)] for a container given GPUs 3,5,6,7,8,9,10,11
LAYOUTS = {
    (1, 1): [(0, 0, 0, "3")],
    (2, 1): [(0, 0, 0, "3"), (1, 1, 0, "5")],
    (1, 2): [(0, 0, 0, "3"), (1, 0, 1, "5")],
    (2, 2): [(0, 0, 0, "3"), (1, 1, 0, "5"), (2, 0, 1, "6"), (3, 1, 1, "7")],
    (4, 2): [
        (0, 0, 0, "3"), (1, 1, 0, "5"), (2, 2, 0, "6"), (3, 3, 0, "7"),
        (4, 0, 1, "8"), (5, 1, 1, "9"), (6, 2, 1, "10"), (7, 3, 1, "11"),
    ],
}  # fmt: skip
GPUS = ["3", "5", "6", "7", "8", "9", "10", "11"]


@pytest.mark.parametrize(("tp", "pp"), sorted(LAYOUTS))
def test_layout_assigns_neighbouring_gpus_to_a_tensor_parallel_group(tp: int, pp: int) -> None:
    ranks = world.layout(tp, pp, GPUS[: tp * pp])
    assert [(r.rank, r.tp_rank, r.pp_rank, r.gpu) for r in ranks] == LAYOUTS[tp, pp]


@pytest.mark.parametrize(("tp", "pp"), sorted(LAYOUTS))
def test_launch_command_per_parallelism(tp: int, pp: int, tmp_path: Path) -> None:
    args = parse_args(["--model-repository", "/models", "--tp", str(tp), "--pp", str(pp)])
    environ = {"CUDA_VISIBLE_DEVICES": ",".join(GPUS[: tp * pp]), "CONTAINER_ID": "container_01_000002"}
    command, env = launch_command(args, Path("/models"), environ, tmp_path, as_root=False)
    size = tp * pp
    assert env["WORLD_SIZE"] == str(size)
    assert (env["TARN_TENSOR_PARALLEL"], env["TARN_PIPELINE_PARALLEL"]) == (str(tp), str(pp))
    if size == 1:  # today's single process, exec'd directly
        assert command[0] == "tritonserver"
        assert "--http-port=8000" in command
        assert "--id=container_01_000002" in command  # the controller checks the server is its own
        assert not any(a.startswith("--backend-config") for a in command)
        assert "CUDA_VISIBLE_DEVICES" not in env
        return
    assert command[:4] == ["mpirun", "--bind-to", "none", "--oversubscribe"]
    assert "--allow-run-as-root" not in command
    assert env["CUDA_VISIBLE_DEVICES"] == ",".join(GPUS[:size])  # every rank sees every GPU, in rank order
    contexts = app_contexts(command)
    assert len(contexts) == size
    for (r, _tp_rank, _pp_rank, gpu), context in zip(LAYOUTS[tp, pp], contexts, strict=True):
        split = context.index("--")
        wrapper, triton = context[:split], context[split + 1 :]
        assert wrapper[:3] == [sys.executable, os.path.abspath(sys.argv[0]), "rank"]
        flags = dict(zip(wrapper[3::2], wrapper[4::2], strict=True))
        assert flags == {"--world-dir": str(tmp_path), "--rank": str(r), "--size": str(size), "--gpu": gpu}
        assert triton[0] == "tritonserver"
        assert f"--backend-config=python,shm-region-prefix-name=tarn_container_01_000002_r{r}_" in triton
        assert "--model-repository=/models" in triton
        if r == 0:  # rank 0 serves the instance's one set of ports
            assert {"--http-port=8000", "--grpc-port=8001", "--metrics-port=8002"} <= set(triton)
            assert "--allow-gpu-metrics=true" in triton
        else:
            assert not any(a.startswith(("--http-port", "--grpc-port", "--metrics-port")) for a in triton)
            assert {"--allow-http=false", "--allow-grpc=false", "--allow-metrics=false"} <= set(triton)


def test_a_cpu_world_has_no_gpu_and_root_is_allowed_explicitly(tmp_path: Path) -> None:
    args = parse_args(["--model-repository", "/models", "--tp", "2", "--mpirun", "/opt/ompi/bin/mpirun"])
    command, env = launch_command(args, Path("/models"), {}, tmp_path, as_root=True)
    assert command[0] == "/opt/ompi/bin/mpirun"
    assert "--allow-run-as-root" in command
    assert "--gpu" not in command
    assert "CUDA_VISIBLE_DEVICES" not in env
    assert "tarn_local_r1_" in " ".join(command)


@pytest.mark.parametrize(
    ("environ", "gpus"),
    [
        ({}, []),
        ({"CUDA_VISIBLE_DEVICES": "2,3"}, ["2", "3"]),
        ({"CUDA_VISIBLE_DEVICES": "GPU-a1, GPU-b2"}, ["GPU-a1", "GPU-b2"]),
        ({"CUDA_VISIBLE_DEVICES": ""}, []),
        # Docker: host ids in NVIDIA_VISIBLE_DEVICES, CUDA numbers them 0..n-1 in the container
        ({"NVIDIA_VISIBLE_DEVICES": "4,6"}, ["0", "1"]),
        ({"NVIDIA_VISIBLE_DEVICES": "all"}, []),
        ({"NVIDIA_VISIBLE_DEVICES": "void"}, []),
        ({"NVIDIA_VISIBLE_DEVICES": "4,6", "CUDA_VISIBLE_DEVICES": "1"}, ["1"]),
    ],
)
def test_visible_gpus(environ: dict[str, str], gpus: list[str]) -> None:
    assert world.visible_gpus(environ) == gpus


def test_a_container_with_fewer_gpus_than_ranks_is_refused_naming_the_fix() -> None:
    with pytest.raises(
        ValueError, match=r"--tp 2 --pp 2: a world of 4 ranks needs 4 GPUs.*--gpus-per-instance"
    ):
        world.layout(2, 2, ["0", "1"])


@pytest.mark.parametrize(("returncode", "status"), [(0, 1), (1, 1), (3, 3), (-9, 137), (-15, 143)])
def test_a_rank_never_ends_with_zero(returncode: int, status: int) -> None:
    assert rank.rank_exit_code(returncode) == status


# ---- the rank wrapper, real processes


def rank_code(world_dir: Path, r: int, size: int, *command: str, wait: float = 30.0) -> str:
    argv = ["rank", "--world-dir", str(world_dir), "--rank", str(r), "--size", str(size)]
    argv += ["--wait-seconds", str(wait), "--", *command]
    return f"import sys; from tarn.stdlib.launcher.main import main; sys.exit(main({argv!r}))"


def start_rank(
    world_dir: Path, r: int, size: int, *command: str, wait: float = 30.0
) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", rank_code(world_dir, r, size, *command, wait=wait)])


def gone(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().split()[2] == "Z"
    except OSError:
        return True


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
    while not gone(child):
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
    while not (gone(wrapper) and gone(child)):
        assert time.monotonic() < deadline, "a rank outlived mpirun"
        time.sleep(0.05)
