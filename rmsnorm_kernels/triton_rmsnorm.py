"""The registry's four Triton implementations: the fused forward (`rmsnorm_kernels/triton_forward.py`) with each dγ
strategy of `rmsnorm_kernels/triton_backward/` as its backward, all through `rmsnorm_kernels.ops.rms_norm` (eager: the autograd
Function; under ``torch.compile`` / ``torch.export``: the ``rmsnorm_dashboard`` custom ops).

``triton`` is benchmarked for its forward only (its backward is triton-persistent's, so it is a complete
RMSNorm a model can train with); each backward strategy is its own implementation with its own line in the
charts. The strategy modules hold the kernels, the launch grids and the dγ family each declares; this file only
names them. A plug-in backward outside the package registers itself in its own file (see `examples/`)."""

from __future__ import annotations

from rmsnorm_kernels import ops
from rmsnorm_kernels.registry import register
from rmsnorm_kernels.triton_backward.atomic import ATOMIC, atomic_grid
from rmsnorm_kernels.triton_backward.persistent import PERSISTENT, persistent_grid
from rmsnorm_kernels.triton_backward.workspace import WORKSPACE, workspace_grid
from rmsnorm_kernels.triton_forward import forward_launch
from rmsnorm_kernels.triton_mode import triton_unavailable_reason


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
    return ops.rms_norm(x, weight, eps, 0.0, "persistent")


@register(
    "triton-atomic",
    passes=("bwd",),
    deterministic=False,
    family=ATOMIC,
    description="Triton backward, dγ by tl.atomic_add of every program's partial into one fp32 vector "
    "(contended; not bit-reproducible)",
    available_when=triton_unavailable_reason,
    uses_triton=True,
    launch=atomic_grid,
)
def triton_atomic_rmsnorm(x, weight, eps=1e-6):
    return ops.rms_norm(x, weight, eps, 0.0, "atomic")


@register(
    "triton-workspace",
    passes=("bwd",),
    deterministic=True,
    family=WORKSPACE,
    description="Triton backward, dγ partials of runs of ≥ 32 consecutive rows written to a [G, N] fp32 workspace, "
    "then summed by a vectorized column-sum kernel (deterministic)",
    available_when=triton_unavailable_reason,
    uses_triton=True,
    launch=workspace_grid,
)
def triton_workspace_rmsnorm(x, weight, eps=1e-6):
    return ops.rms_norm(x, weight, eps, 0.0, "workspace")


@register(
    "triton-persistent",
    passes=("bwd",),
    deterministic=True,
    family=PERSISTENT,
    description="Triton backward, persistent grid of SM count × k programs striding over rows, dγ partial kept "
    "in registers, one fp32 row per program, then a tiny column sum (deterministic)",
    available_when=triton_unavailable_reason,
    uses_triton=True,
    launch=persistent_grid,
)
def triton_persistent_rmsnorm(x, weight, eps=1e-6):
    return ops.rms_norm(x, weight, eps, 0.0, "persistent")
