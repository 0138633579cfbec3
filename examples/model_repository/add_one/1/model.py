"""add_one: OUTPUT0 = INPUT0 + 1 (FP32, any length), served by Triton's Python backend."""

from __future__ import annotations

from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Adds one to every element of INPUT0."""

    def execute(self, requests: list[Any]) -> list[Any]:
        responses = []
        for request in requests:
            values = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            result = (values + np.float32(1)).astype(np.float32)
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT0", result)]))
        return responses
