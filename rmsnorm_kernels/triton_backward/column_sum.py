"""The tiny, deterministic second pass of the workspace and persistent strategies: dγ[n] = Σ_g partial[g, n]
over a [G, N] fp32 buffer, in a fixed order (BLOCK_G rows at a time, then one tree reduction), vectorized
along N. Output in γ's dtype.

It follows a large kernel on the same stream, so its launch latency is a fixed cost of every backward (a few
µs: 8 of 63 µs at 4096×8192 on the H200). On Hopper it is launched with programmatic dependent launch:
the kernel before it calls ``gdc_launch_dependents`` as it starts, this one is queued behind it and waits
in ``gdc_wait`` until that kernel's partial rows are written (`rmsnorm_kernels.triton_mode.dependent_launch`)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from rmsnorm_kernels.fast_launch import fast
from rmsnorm_kernels.poison import new_output
from rmsnorm_kernels.segments import next_power_of_two
from rmsnorm_kernels.triton_mode import dependent_launch, dependent_launch_options


@triton.jit
def allow_dependent_launch(USE_PDL: tl.constexpr):
    """Called first thing by a kernel whose partial rows the column sum reads: lets it be queued now."""
    if USE_PDL:
        gdc_launch_dependents()


@triton.jit
def column_sum_kernel(
    PARTIAL, OUT, G, N, stride_g, BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr, USE_PDL: tl.constexpr
):
    if USE_PDL:
        gdc_wait()
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    acc = tl.zeros([BLOCK_G, BLOCK_N], dtype=tl.float32)
    for g0 in range(0, G, BLOCK_G):
        g = g0 + tl.arange(0, BLOCK_G)
        mask = (g < G)[:, None] & col_mask[None, :]
        acc += tl.load(PARTIAL + g.to(tl.int64)[:, None] * stride_g + cols[None, :], mask=mask, other=0.0)
    tl.store(OUT + cols, tl.sum(acc, axis=0).to(OUT.dtype.element_ty), mask=col_mask)


COLUMN_SUM_WARPS = 8


def column_sum_blocks(g: int, n: int) -> tuple[int, int]:
    """(BLOCK_G, BLOCK_N): 16-column strips (N / 16 programs: 512 at N = 8192) of 128 partial rows at a
    time — the fastest of BLOCK_G 32…256 × BLOCK_N 16…128 × 4/8 warps on the H200 at G = 128…264,
    N = 1024…16384 (1 µs faster than 64 × 32 at 132 × 8192; docs/NOTES.md)."""
    block_g = 128 if g >= 128 else next_power_of_two(g)
    return block_g, 16


def column_sum(
    partial: torch.Tensor,
    out_dtype: torch.dtype,
    *,
    blocks: tuple | None = None,
    num_warps: int | None = None,
    pdl: bool | None = None,
) -> torch.Tensor:
    """Sum a [G, N] fp32 partial buffer over G into a fresh [N] tensor of ``out_dtype``. ``pdl``: launch
    with programmatic dependent launch (default: where the device supports it); ``blocks`` (BLOCK_G,
    BLOCK_N) and ``num_warps`` override the defaults (for tuning scripts)."""
    g, n = partial.shape
    out = new_output((n,), out_dtype, partial.device)
    block_g, block_n = blocks or column_sum_blocks(g, n)
    pdl = dependent_launch(partial.device) if pdl is None else pdl
    fast(column_sum_kernel)[(-(-n // block_n),)](
        partial,
        out,
        g,
        n,
        partial.stride(0),
        BLOCK_G=block_g,
        BLOCK_N=block_n,
        USE_PDL=pdl,
        num_warps=num_warps or COLUMN_SUM_WARPS,
        **dependent_launch_options(pdl),
    )
    return out
