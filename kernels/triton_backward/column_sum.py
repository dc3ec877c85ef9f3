"""The tiny, deterministic second pass of the workspace and persistent strategies: dγ[n] = Σ_g partial[g, n]
over a [G, N] fp32 buffer, in a fixed order (BLOCK_G rows at a time, then one tree reduction), vectorized
along N. Output in γ's dtype."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.poison import new_output


@triton.jit
def column_sum_kernel(PARTIAL, OUT, G, N, stride_g, BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    acc = tl.zeros([BLOCK_G, BLOCK_N], dtype=tl.float32)
    for g0 in range(0, G, BLOCK_G):
        g = g0 + tl.arange(0, BLOCK_G)
        mask = (g < G)[:, None] & col_mask[None, :]
        acc += tl.load(PARTIAL + g.to(tl.int64)[:, None] * stride_g + cols[None, :], mask=mask, other=0.0)
    tl.store(OUT + cols, tl.sum(acc, axis=0).to(OUT.dtype.element_ty), mask=col_mask)


def column_sum(partial: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    """Sum a [G, N] fp32 partial buffer over G into a fresh [N] tensor of ``out_dtype``."""
    g, n = partial.shape
    out = new_output((n,), out_dtype, partial.device)
    block_n = 64 if n >= 64 else max(16, 1 << (n - 1).bit_length())
    block_g = 32
    column_sum_kernel[(triton.cdiv(n, block_n),)](
        partial, out, g, n, partial.stride(0), BLOCK_G=block_g, BLOCK_N=block_n, num_warps=4
    )
    return out
