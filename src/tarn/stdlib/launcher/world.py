"""A tensor/pipeline-parallel Triton instance: a world of tp x pp ranks under Open MPI (pure).

TensorRT-LLM's Triton backend runs one ``tritonserver`` per GPU, all started by one ``mpirun``
(MPMD: ``-n 1 <rank 0> : -n 1 <rank 1> : …``). Rank 0 serves the instance's HTTP, gRPC and
metrics ports; the other ranks serve no port (their backend waits on rank 0 through MPI). Each
rank has its own Python-backend shared-memory prefix, so stubs of two ranks never share a region.

Ranks are numbered as TensorRT-LLM numbers them: rank = pp_rank x tp + tp_rank, so the ranks of a
tensor-parallel group are neighbours and get neighbouring GPUs. Rank r drives the r-th GPU of the
container (TensorRT-LLM picks device ``rank % GPUs``): every rank sees every GPU of the instance,
in that order, which NCCL needs for peer-to-peer transfers.

Every rank starts through ``tarn-launcher.pyz rank`` (:mod:`tarn.stdlib.launcher.rank`): rank 0
starts Triton only once every rank is up, and a rank whose Triton ends, for any reason, ends
non-zero, so ``mpirun`` stops the whole world and YARN restarts the instance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

# Values of NVIDIA_VISIBLE_DEVICES that name no device list.
_NO_LIST = frozenset({"", "all", "none", "void"})


@dataclass(frozen=True)
class Rank:
    rank: int
    tp_rank: int
    pp_rank: int
    gpu: str | None  # the device this rank drives; None in a CPU world


def world_size(tp: int, pp: int) -> int:
    return tp * pp


def visible_gpus(environ: Mapping[str, str]) -> list[str]:
    """The container's GPUs in CUDA's order; [] when none is known (a CPU world).

    ``CUDA_VISIBLE_DEVICES`` is taken as given. Under Docker, YARN's GPU plugin hands the
    container its GPUs through ``NVIDIA_VISIBLE_DEVICES`` (host ids) and CUDA numbers them 0..n-1.
    """
    cuda = environ.get("CUDA_VISIBLE_DEVICES")
    if cuda is not None:
        return [d for d in (d.strip() for d in cuda.split(",")) if d]
    nvidia = environ.get("NVIDIA_VISIBLE_DEVICES", "").strip()
    if nvidia.lower() in _NO_LIST:
        return []
    return [str(i) for i, d in enumerate(nvidia.split(",")) if d.strip()]


def layout(tp: int, pp: int, gpus: Sequence[str]) -> list[Rank]:
    """Every rank of the world with its tensor and pipeline position and its GPU."""
    size = world_size(tp, pp)
    if gpus and len(gpus) < size:
        raise ValueError(
            f"--tp {tp} --pp {pp}: a world of {size} ranks needs {size} GPUs, the container has "
            f"{len(gpus)} ({','.join(gpus)}); request at least {size} with --gpus-per-instance"
        )
    return [Rank(r, r % tp, r // tp, gpus[r] if gpus else None) for r in range(size)]


def shm_prefix(rank: int, container_id: str) -> str:
    """The Python backend's shared-memory prefix of a rank: unique on the node, as /dev/shm may be
    the node's own (process runtime, or Docker with the host's /dev/shm mounted)."""
    return f"tarn_{container_id or 'local'}_r{rank}_"


def rank_triton_args(serving: Sequence[str], rank: int, container_id: str) -> list[str]:
    """Rank 0: the instance's Triton arguments; other ranks: the same models, no endpoint."""
    prefix = f"--backend-config=python,shm-region-prefix-name={shm_prefix(rank, container_id)}"
    if rank == 0:
        return [*serving, prefix]
    repository = [a for a in serving if a.startswith("--model-repository=")]
    return [
        *repository,
        "--allow-http=false",
        "--allow-grpc=false",
        "--allow-metrics=false",
        "--model-control-mode=explicit",
        "--load-model=*",
        prefix,
    ]


def world_environment(gpus: Sequence[str], tp: int, pp: int) -> dict[str, str]:
    """Environment of every rank (mpirun passes its own to the ranks it starts on this node)."""
    env = {
        "TARN_TENSOR_PARALLEL": str(tp),
        "TARN_PIPELINE_PARALLEL": str(pp),
        "WORLD_SIZE": str(world_size(tp, pp)),
    }
    if gpus:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
    return env


def mpirun_command(
    *,
    mpirun: str,
    ranks: Sequence[Rank],
    rank_launcher: Sequence[str],
    tritonserver: str,
    serving: Sequence[str],
    world_dir: Path,
    container_id: str,
    as_root: bool,
) -> list[str]:
    """``mpirun`` starting every rank on this node through the rank wrapper, one app context each.

    ``--bind-to none``: YARN's cgroups, not MPI, share the node's cores; ``--oversubscribe``: a
    world is sized by GPUs, which may outnumber the cores MPI counts.
    """
    command = [mpirun, "--bind-to", "none", "--oversubscribe"]
    if as_root:
        command.append("--allow-run-as-root")
    for rank in ranks:
        if rank.rank:
            command.append(":")
        command += ["-n", "1", *rank_launcher, "rank", "--world-dir", str(world_dir)]
        command += ["--rank", str(rank.rank), "--size", str(len(ranks))]
        if rank.gpu is not None:
            command += ["--gpu", rank.gpu]
        command += ["--", tritonserver, *rank_triton_args(serving, rank.rank, container_id)]
    return command
