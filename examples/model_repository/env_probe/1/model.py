"""env_probe: whether environment variables are set in the model's process, never their values."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils


def _name(raw: object) -> str:
    return raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else str(raw)


class TritonPythonModel:
    """STATUS[i] is b"set" when the variable NAMES[i] is set (even to ""), else b"unset"."""

    def execute(self, requests: list[Any]) -> list[Any]:
        responses = []
        for request in requests:
            names = pb_utils.get_input_tensor_by_name(request, "NAMES").as_numpy().reshape(-1)
            status = [b"set" if _name(raw) in os.environ else b"unset" for raw in names]
            result = np.array(status, dtype=np.object_)
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("STATUS", result)]))
        return responses
