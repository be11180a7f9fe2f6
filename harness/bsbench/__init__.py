"""FP8 blockscale GEMM measurement harness (Triton, CUDA or ROCm).

Pure-Python modules (importable without torch): ``config``, ``stats``, ``plan``, ``env``.
GPU modules (import torch/Triton): ``kernel``, ``runner``.
"""
