"""An analytic model of batch-1 decode on a GPU, from published specifications, for comparison with the wafer.

One decode token must stream every weight and the live KV cache from HBM once, and do 2 flops per weight plus the
attention arithmetic; every device operation is (at least) one kernel launch. So per token
    max(bytes / HBM bandwidth, flops / peak matrix throughput) + kernels x launch overhead
on as many GPUs as the weights and cache need (tensor-parallel, bandwidth and flops adding up, communication not
modeled: an optimistic bound for models that need more than one GPU). Constants and sources: docs/wafer-validation.md.
This module knows bytes and flops, not models: the caller (cli/emulate.py, `waferline emulate`) derives them from a
model's shape.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class GPUSpec:
    name: str
    hbm_bytes: float
    hbm_bytes_per_s: float
    matrix_flops_16bit: float  # dense (no sparsity) BF16/FP16 tensor-core peak
    matrix_flops_32bit: float  # dense TF32 tensor-core peak (what float32 matmuls get)
    launch_overhead_s: float  # per kernel


# [H100-DS] NVIDIA H100 Tensor Core GPU datasheet (SXM5): 80 GB HBM3, 3.35 TB/s, BF16 1,979 TFLOPS and TF32 989
# TFLOPS with sparsity (half of each dense). [H200-DS] NVIDIA H200 datasheet (SXM): 141 GB HBM3e, 4.8 TB/s, same
# tensor-core peaks as H100. [LAUNCH] ~4-6 µs from one CPU launch to the next kernel, measured in "pegainfer (3):
# From Launch Overhead to CUDA Graph" (susun-blog.com); CUDA graphs cut it, batch-1 eager decode pays it.
LAUNCH_OVERHEAD_S = 4e-6

GPUS: dict[str, GPUSpec] = {
    "h100": GPUSpec(
        name="h100",
        hbm_bytes=80e9,
        hbm_bytes_per_s=3.35e12,
        matrix_flops_16bit=989.5e12,
        matrix_flops_32bit=494.7e12,
        launch_overhead_s=LAUNCH_OVERHEAD_S,
    ),
    "h200": GPUSpec(
        name="h200",
        hbm_bytes=141e9,
        hbm_bytes_per_s=4.8e12,
        matrix_flops_16bit=989.5e12,
        matrix_flops_32bit=494.7e12,
        launch_overhead_s=LAUNCH_OVERHEAD_S,
    ),
}


@dataclass(frozen=True)
class DecodeWork:
    """What one decode token needs: bytes read from memory, arithmetic, kernels, and bytes that must stay resident."""

    weight_bytes: float
    kv_bytes: float  # the live cache read by attention
    flops: float
    kernels: int
    resident_bytes: float  # weights plus the whole cache, which decide how many GPUs are needed
    bytes_per_element: int = 2


@dataclass(frozen=True)
class GPUProjection:
    gpu: str
    gpus: int
    seconds_per_token: float
    memory_s: float
    compute_s: float
    launch_s: float

    @property
    def tok_s(self) -> float:
        return 1.0 / self.seconds_per_token


def project(spec: GPUSpec, work: DecodeWork, usable_fraction: float = 0.9) -> GPUProjection:
    """Modeled batch-1 decode time of `work` on `spec`, on enough GPUs to hold it (`usable_fraction` of HBM each)."""
    gpus = max(1, math.ceil(work.resident_bytes / (spec.hbm_bytes * usable_fraction)))
    peak = spec.matrix_flops_16bit if work.bytes_per_element <= 2 else spec.matrix_flops_32bit
    memory = (work.weight_bytes + work.kv_bytes) / (spec.hbm_bytes_per_s * gpus)
    compute = work.flops / (peak * gpus)
    launch = work.kernels * spec.launch_overhead_s
    return GPUProjection(spec.name, gpus, max(memory, compute) + launch, memory, compute, launch)
