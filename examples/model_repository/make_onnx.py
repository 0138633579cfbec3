"""Write linear_onnx/1/model.onnx: OUTPUT[N, 2] = INPUT[N, 4] @ WEIGHTS, with fixed weights.

The output is byte-for-byte reproducible (fixed weights, opset and IR version, no timestamps),
so the committed model.onnx can be checked against a fresh run:

    python examples/model_repository/make_onnx.py --check
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# Deterministic weights; examples/client.py expects [1, 2, 3, 4] @ WEIGHTS = [50, 60].
WEIGHTS = np.array([[1, 2], [3, 4], [5, 6], [7, 8]], dtype=np.float32)
# Opset and IR version every onnxruntime since 1.14 loads.
OPSET = 17
IR_VERSION = 8
DEFAULT_OUTPUT = Path(__file__).resolve().parent / "linear_onnx" / "1" / "model.onnx"


def build_model() -> onnx.ModelProto:
    """The 4 -> 2 MatMul graph, inputs and outputs named as in linear_onnx/config.pbtxt."""
    weights = numpy_helper.from_array(WEIGHTS, name="WEIGHTS")
    graph = helper.make_graph(
        nodes=[helper.make_node("MatMul", ["INPUT", "WEIGHTS"], ["OUTPUT"], name="matmul")],
        name="linear",
        inputs=[helper.make_tensor_value_info("INPUT", TensorProto.FLOAT, ["N", 4])],
        outputs=[helper.make_tensor_value_info("OUTPUT", TensorProto.FLOAT, ["N", 2])],
        initializer=[weights],
    )
    model = helper.make_model(
        graph,
        producer_name="tarn-examples",
        opset_imports=[helper.make_opsetid("", OPSET)],
        ir_version=IR_VERSION,
    )
    onnx.checker.check_model(model, full_check=True)
    return model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="where to write the model")
    parser.add_argument(
        "--check", action="store_true", help="only compare with the file at --output; exit 1 when it differs"
    )
    args = parser.parse_args(argv)
    data = build_model().SerializeToString(deterministic=True)
    if args.check:
        same = args.output.is_file() and args.output.read_bytes() == data
        print(f"{args.output}: {'up to date' if same else 'differs from make_onnx.py'}")
        return 0 if same else 1
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_bytes(data)
    print(f"wrote {args.output} ({len(data)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
