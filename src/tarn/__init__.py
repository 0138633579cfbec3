"""TARN: NVIDIA Triton Inference Server on Hadoop YARN."""

__version__ = "0.1.0"
