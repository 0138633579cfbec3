"""The TARN options as a user gives them, for the tests of tarn.stdlib.config: the smallest valid
argv and a parse of it with more flags and an environment of the test's choosing."""

from __future__ import annotations

from tarn.stdlib.config import TarnConfig, parse_config

IMAGE = "nvcr.io/nvidia/tritonserver:24.09-py3"
BASE = ["--model-repository", "hdfs:///user/models", "--image", IMAGE]
TOKEN = "my-secret-token-4711"  # noqa: S105 - a test value


def parse(*extra: str, environ: dict[str, str] | None = None) -> TarnConfig:
    return parse_config([*BASE, *extra], environ or {})
