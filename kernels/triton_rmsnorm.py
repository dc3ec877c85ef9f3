"""The registry's ``triton`` implementation: the fused Triton forward (`kernels/triton_forward.py`), with the
persistent dγ strategy as its backward, so that it is a complete RMSNorm a model can train with.

It is benchmarked for its forward pass only (``passes=("fwd",)``): each backward strategy is its own
implementation in `kernels/triton_backward/`, with its own line in the charts."""

from __future__ import annotations

from kernels.registry import register
from kernels.triton_backward.function import triton_rmsnorm_with
from kernels.triton_backward.persistent import persistent_backward
from kernels.triton_forward import forward_launch
from kernels.triton_mode import triton_unavailable_reason


@register(
    "triton",
    passes=("fwd",),
    deterministic=True,
    family="other",
    description="Fused Triton forward: one program per row (several rows per program for short rows), fp32 "
    "accumulation, autotuned BLOCK × num_warps; its backward is triton-persistent's",
    available_when=triton_unavailable_reason,
    uses_triton=True,
    launch=forward_launch,
)
def triton_rmsnorm(x, weight, eps=1e-6):
    return triton_rmsnorm_with(persistent_backward, x, weight, eps)
