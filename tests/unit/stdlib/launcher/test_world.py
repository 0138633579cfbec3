"""Multi-rank Triton instances (tarn.stdlib.launcher.world): the GPU assignment and the launch command
per (tp, pp). The rank wrapper itself: test_rank.py."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tarn.stdlib.launcher import world
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
        assert "--exit-timeout-secs=5" in command  # ends before the NodeManager's SIGKILL (10 s)
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
