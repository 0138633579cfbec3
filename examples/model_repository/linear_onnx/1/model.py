"""linear_onnx: runs 1/model.onnx (a 4 -> 2 MatMul) with onnxruntime on the CPU."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import onnxruntime as ort
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """Feeds INPUT [N, 4] to the ONNX graph and returns its OUTPUT [N, 2]."""

    def initialize(self, args: dict[str, str]) -> None:
        path = os.path.join(args["model_repository"], args["model_version"], "model.onnx")
        options = ort.SessionOptions()
        # One Triton instance per CPU core is the scaling unit; keep onnxruntime to one thread.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(path, sess_options=options, providers=["CPUExecutionProvider"])

    def execute(self, requests: list[Any]) -> list[Any]:
        responses = []
        for request in requests:
            values = pb_utils.get_input_tensor_by_name(request, "INPUT").as_numpy().astype(np.float32)
            (result,) = self.session.run(["OUTPUT"], {"INPUT": values})
            output = pb_utils.Tensor("OUTPUT", np.ascontiguousarray(result, dtype=np.float32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[output]))
        return responses
