"""An instance's ranks share one node: a world larger than every NodeManager's GPUs is refused."""

from __future__ import annotations

import pytest

from tarn.service.apply import gpu_shortfall
from tarn.stdlib.config import TarnConfig, parse_config


def config(*argv: str) -> TarnConfig:
    return parse_config(["--model-repository", "hdfs:///models", "--runtime", "process", *argv], {})


@pytest.mark.parametrize(
    ("argv", "capacities", "problem"),
    [
        ((), [1, 0], None),
        (("--tp", "2"), [2, 1], None),
        (("--tp", "4", "--pp", "2"), [8], None),
        (("--tp", "2", "--gpus-per-instance", "0"), [0, 0], None),  # a CPU world
        (("--tp", "2"), [], None),  # no NodeManager registered yet: YARN will wait, not refuse
        (("--tp", "2", "--pp", "2"), [2, 2],
         "--tp 2 --pp 2: an instance needs 4 yarn.io/gpu on one node, and the NodeManagers offer at most 2"),
        (("--tp", "4", "--pp", "2"), [4, 4, 4], "--tp 4 --pp 2: an instance needs 8"),
        (("--tp", "1"), [0], "--tp 1 --pp 1: an instance needs 1 yarn.io/gpu"),
        (("--gpus-per-instance", "3"), [2], "--gpus-per-instance: an instance needs 3"),
    ],
)  # fmt: skip
def test_gpu_shortfall(argv: tuple[str, ...], capacities: list[int], problem: str | None) -> None:
    found = gpu_shortfall(config(*argv), capacities)
    if problem is None:
        assert found is None
    else:
        assert found is not None
        assert found.startswith(problem), found
        assert "lower" in found
        assert found.endswith("or add GPUs to a node")
