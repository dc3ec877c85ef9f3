"""dγ strategy ``triton-atomic`` (the seed design): one program per tile of rows (one row for N ≥ 4096);
each computes dx and ``tl.atomic_add``s its dγ partial into one shared fp32 N-vector. Every program hits the
same N addresses, so the adds contend, and their order varies from run to run: dγ is NOT bit-reproducible."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.fast_launch import fast
from kernels.poison import new_output
from kernels.registry import register
from kernels.triton_backward.dx import backward_tile, load_tile, rmsnorm_dw_tile, rmsnorm_dx_tile, store_dx
from kernels.triton_backward.function import triton_rmsnorm_with
from kernels.triton_mode import triton_unavailable_reason


@triton.jit
def rmsnorm_bwd_atomic_kernel(X, DY, W, RSTD, DX, DW, M, N, stride_x, stride_dy, stride_dx,
                              ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    w = tl.load(W + cols, mask=cols < N, other=0.0).to(tl.float32)
    x, dy, rstd = load_tile(X, DY, RSTD, rows, cols, M, N, stride_x, stride_dy)
    store_dx(DX, rmsnorm_dx_tile(x, dy, w, rstd, N), rows, cols, M, N, stride_dx)
    tl.atomic_add(DW + cols, tl.sum(rmsnorm_dw_tile(x, dy, rstd), axis=0), mask=cols < N)


def atomic_launch(M: int, N: int, sm_count: int = 0) -> dict:
    tile = backward_tile(N)
    programs = -(-M // tile.rows)
    return {"programs": programs, "rows_per_program": tile.rows, "partial_rows": 1,
            "block": tile.block, "num_warps": tile.num_warps}


def atomic_backward(dy2d, x2d, weight, rstd, *, tile=None):
    m, n = x2d.shape
    tile = tile or backward_tile(n)
    dx = new_output(x2d.shape, x2d.dtype, x2d.device)
    dw = torch.zeros((n,), dtype=torch.float32, device=x2d.device)
    fast(rmsnorm_bwd_atomic_kernel)[(-(-m // tile.rows),)](
        x2d, dy2d, weight, rstd, dx, dw, m, n, x2d.stride(0), dy2d.stride(0), dx.stride(0),
        ROWS=tile.rows, BLOCK=tile.block, num_warps=tile.num_warps,
    )
    return dx, dw.to(weight.dtype)


@register(
    "triton-atomic",
    passes=("bwd",),
    deterministic=False,
    family="atomic",
    description="Triton backward, dγ by tl.atomic_add of every program's partial into one fp32 vector "
    "(contended; not bit-reproducible)",
    available_when=triton_unavailable_reason,
    launch=atomic_launch,
)
def triton_atomic_rmsnorm(x, weight, eps=1e-6):
    return triton_rmsnorm_with(atomic_backward, x, weight, eps)
