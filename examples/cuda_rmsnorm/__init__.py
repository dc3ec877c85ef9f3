"""A CUDA C++ plug-in: the persistent-backward design's two backwards, ``cuda-naive`` and ``cuda-persistent``,
each with the same plain fused forward (one block per row, returns rstd). Loading this package registers them:
``RMSNORM_PLUGINS=examples.cuda_rmsnorm``, ``--plugin examples.cuda_rmsnorm``, or an entry point
``cuda = "examples.cuda_rmsnorm"`` in the group ``rmsnorm_dashboard.implementations``.

- ``rmsnorm.cu``: the kernels (16-byte vectors, fp32 arithmetic, warp then block reductions, cp.async pipeline);
- ``build.py``: compiled at first use on the GPU host (NVRTC through cuda-bindings, else nvcc), cached on disk;
- ``device.py``: loaded and launched on torch's current stream (CuPy, else cuda-bindings), the occupancy query;
- ``kernels.py``: the shapes they take, blocks and grids, the calls; this file: the autograd Function, the two dγ
  families and the ``@register`` lines.

Where no GPU (or no compiler, or no loader) is found, both are listed as unavailable with the reason; shapes they do
not take (N not a multiple of 8, N above the instantiated templates, float32) are skipped rows, with the reason.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from examples.cuda_rmsnorm import build, kernels
from examples.cuda_rmsnorm import device as loaders
from rmsnorm_kernels.families import PARTIAL_BYTES, BackwardFamily
from rmsnorm_kernels.registry import register
from rmsnorm_kernels.validation import validate_rmsnorm_inputs

CONTRIBUTION_BYTES = 2
"""The naive chain's M×N dγ contributions are stored in x's dtype: bf16 or fp16, the only dtypes it takes."""

NAIVE_CHAIN = BackwardFamily(
    "naive-chain",
    "one block per row writes its row of dγ terms (an M×N tensor in x's dtype); a column sum reduces it to "
    f"{kernels.NAIVE_PARTIAL_ROWS} fp32 rows; a second sums those (three kernels, five passes over M×N)",
    partial_rows=lambda grid, M, N: kernels.NAIVE_PARTIAL_ROWS,
    partial_bytes=lambda grid, M, N: M * N * CONTRIBUTION_BYTES + kernels.NAIVE_PARTIAL_ROWS * N * PARTIAL_BYTES,
    extra_bytes=lambda grid, M, N: 2 * M * N * CONTRIBUTION_BYTES + 2 * kernels.NAIVE_PARTIAL_ROWS * N * PARTIAL_BYTES,
    extra_bytes_note=lambda grid, M, N: (
        f"+ the M×N dγ contributions written and read back (2·M·N·{CONTRIBUTION_BYTES}) and "
        f"{kernels.NAIVE_PARTIAL_ROWS} fp32 partial rows written and read (2·{kernels.NAIVE_PARTIAL_ROWS}·N·4): "
        "five passes over M×N in all"
    ),
    partial_rows_text=f"{kernels.NAIVE_PARTIAL_ROWS} fp32 rows, after the column sum of the M×N contributions",
    extra_bytes_text=(
        f"2·M·N·{CONTRIBUTION_BYTES} + 2·{kernels.NAIVE_PARTIAL_ROWS}·N·4: the contributions and the "
        "partial rows, each written and read back"
    ),
)

PERSISTENT_CUDA = BackwardFamily(
    "persistent",
    "G = SMs × blocks per SM (the occupancy API) blocks walk rows b, b+G, …, the next row copied with cp.async "
    "while one is computed; dγ partials in registers, one fp32 row per block, then a column sum",
)

RECORDED = Path(__file__).with_name("recorded_occupancy.json")
"""Blocks per SM of the persistent kernel as a GPU's occupancy API answered (bench/cuda_plugins.sh writes it): the
grids the dock draws on a machine without a GPU. Absent: `kernels.estimate_blocks_per_sm`."""


def unavailable_reason() -> str | None:
    if not torch.cuda.is_available():
        return (
            "needs an NVIDIA GPU: torch.cuda.is_available() is False here (the CUDA kernels are compiled at first "
            "use on a GPU host, with NVRTC or nvcc)"
        )
    major, minor = torch.cuda.get_device_capability()
    if major < 8:
        return f"needs an sm80+ GPU (cp.async, bf16 conversions); this one is sm{major}{minor}"
    reason = build.compiler_available() or loaders.loader_available()
    if reason:
        return reason
    error = kernels.build_error()
    return f"the CUDA kernels did not build here: {error}" if error else None


def recorded_blocks_per_sm(N: int) -> tuple[int, str] | None:
    try:
        doc = json.loads(RECORDED.read_text())
        n = doc["blocks_per_sm"]["bfloat16"][str(N)]
        return int(n), f"recorded: the occupancy API on {doc['device']} ({RECORDED.name})"
    except (OSError, KeyError, ValueError, TypeError):
        return None


def occupancy(N: int) -> tuple[int, str]:
    """Blocks of the (bf16) persistent kernel per SM and where the number comes from: this GPU's occupancy API, else
    a recorded one, else the estimate."""
    if torch.cuda.is_available():
        try:
            return kernels.blocks_per_sm(N, "bfloat16")
        except Exception as exc:  # the kernels do not build here: the run's rows say so; the grid is the estimate's
            n, how = kernels.estimate_blocks_per_sm(N)
            return n, f"{how} (the occupancy query failed: {type(exc).__name__})"
    return recorded_blocks_per_sm(N) or kernels.estimate_blocks_per_sm(N)


def _shape(N: int, persistent: bool) -> tuple[int, int]:
    reason = kernels.refusal(N, "bfloat16", persistent)
    if reason:
        raise ValueError(reason)
    return kernels.vectors_per_thread(N, kernels.PERSISTENT_VPTS if persistent else kernels.ROW_VPTS)


def naive_launch(M: int, N: int, sm_count: int) -> dict:
    """One block per row (the grid needs no occupancy query), then the two reduction kernels."""
    vpt, block = _shape(N, False)
    return {
        "programs": M,
        "rows_per_program": 1,
        "threads_per_block": block,
        "vectors_per_thread": vpt,
        "kernels": 3,
        "contribution_rows": M,
        "column_sum_blocks": -(-(N // kernels.VECTOR) // kernels.COLUMN_SUM_BLOCK) * kernels.NAIVE_PARTIAL_ROWS,
    }


def persistent_launch(M: int, N: int, sm_count: int) -> dict:
    """SMs × blocks per SM (the occupancy API where there is a GPU), at most one block per row."""
    vpt, block = _shape(N, True)
    per_sm, how = occupancy(N)
    G = max(1, min(M, sm_count * per_sm))
    return {
        "programs": G,
        "rows_per_program": -(-M // G),
        "blocks_per_sm": per_sm,
        "sm_count": sm_count,
        "threads_per_block": block,
        "vectors_per_thread": vpt,
        "shared_memory_bytes": kernels.stage_bytes(N),
        "occupancy": how,
        "kernels": 2,
    }


class CudaRMSNorm(torch.autograd.Function):
    """The plain fused forward (saves x, γ and rstd), then the chosen backward."""

    @staticmethod
    def forward(ctx, x, weight, eps, backward):
        N = x.shape[-1]
        x2 = kernels.aligned(x.reshape(-1, N))
        w = kernels.aligned(weight.to(x.dtype))
        y, rstd = kernels.forward(x2, w, eps)
        ctx.save_for_backward(x2, w, rstd)
        ctx.backward, ctx.shape, ctx.weight_dtype = backward, x.shape, weight.dtype
        return y.view(x.shape)

    @staticmethod
    def backward(ctx, dy):
        x2, w, rstd = ctx.saved_tensors
        dy2 = kernels.aligned(dy.reshape(x2.shape))
        dx, dw = ctx.backward(x2, w, dy2, rstd)
        return dx.view(ctx.shape), dw.to(ctx.weight_dtype), None, None


def _call(x, weight, eps, persistent: bool):
    N = validate_rmsnorm_inputs(x, weight, eps, max_n=None)
    reason = kernels.refusal(N, str(x.dtype).replace("torch.", ""), persistent)
    if reason:
        raise ValueError(reason)
    if x.device.type != "cuda":
        raise ValueError(f"the CUDA kernels run on a CUDA device; x is on {x.device}")
    return CudaRMSNorm.apply(x, weight, eps, kernels.backward_persistent if persistent else kernels.backward_naive)


def naive_supports(M: int, N: int, dtype: str) -> str | None:
    return kernels.refusal(N, dtype, persistent=False)


def persistent_supports(M: int, N: int, dtype: str) -> str | None:
    return kernels.refusal(N, dtype, persistent=True)


@register(
    "cuda-naive",
    passes=("fwd", "bwd"),
    deterministic=True,
    family=NAIVE_CHAIN,
    fused=True,
    description="CUDA C++ plug-in: one block per row writes dx and an M×N tensor of dγ terms, reduced by two "
    "column sums (three kernels, five passes)",
    available_when=unavailable_reason,
    supports=naive_supports,
    launch=naive_launch,
)
def cuda_naive(x, weight, eps=1e-6):
    return _call(x, weight, eps, persistent=False)


@register(
    "cuda-persistent",
    passes=("fwd", "bwd"),
    deterministic=True,
    family=PERSISTENT_CUDA,
    fused=True,
    description="CUDA C++ plug-in: SMs × blocks-per-SM persistent blocks, cp.async double buffer, dγ partials "
    "in registers, one fp32 row per block",
    available_when=unavailable_reason,
    supports=persistent_supports,
    launch=persistent_launch,
)
def cuda_persistent(x, weight, eps=1e-6):
    return _call(x, weight, eps, persistent=True)
