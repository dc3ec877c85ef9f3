"""dγ strategy ``triton-atomic`` (the seed design): one program per tile of rows (one row for N ≥ 4096);
each computes dx and ``tl.atomic_add``s its dγ partial into one shared fp32 N-vector. Every program hits the
same N addresses, so the adds contend, and their order varies from run to run: dγ is NOT bit-reproducible."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from rmsnorm_kernels.families import BackwardFamily
from rmsnorm_kernels.fast_launch import fast
from rmsnorm_kernels.poison import new_output, new_zeros
from rmsnorm_kernels.triton_backward.dx import backward_tile, load_weight_segments, rmsnorm_bwd_rows



@triton.jit
def atomic_add_segment(DW, value, N, OFF: tl.constexpr, W: tl.constexpr, MASKED: tl.constexpr):
    cols = OFF + tl.arange(0, W)
    if MASKED:
        tl.atomic_add(DW + cols, value, mask=cols < N)
    else:
        tl.atomic_add(DW + cols, value)


@triton.jit
def rmsnorm_bwd_atomic_kernel(X, DY, W, RSTD, DX, DW, M, N, stride_x, stride_dy, stride_dx,
                              ROWS: tl.constexpr, W0: tl.constexpr, W1: tl.constexpr, W2: tl.constexpr,
                              MASK0: tl.constexpr, MASK1: tl.constexpr, MASK2: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    w0, w1, w2 = load_weight_segments(W, N, W0, W1, W2, MASK0, MASK1, MASK2)
    d0, d1, d2 = rmsnorm_bwd_rows(X, DY, DX, RSTD, w0, w1, w2, 0.0, 0.0, 0.0, rows, M, N, stride_x, stride_dy,
                                  stride_dx, W0, W1, W2, MASK0, MASK1, MASK2)
    atomic_add_segment(DW, tl.sum(d0, axis=0), N, 0, W0, MASK0)
    if W1 > 0:
        atomic_add_segment(DW, tl.sum(d1, axis=0), N, W0, W1, MASK1)
    if W2 > 0:
        atomic_add_segment(DW, tl.sum(d2, axis=0), N, W0 + W1, W2, MASK2)


ATOMIC = BackwardFamily(
    "atomic",
    "every program tl.atomic_adds its dγ partial into one shared fp32 N-vector (contended; order varies)",
    partial_rows=lambda grid, M, N: 1,
    extra_bytes=lambda grid, M, N: grid["programs"] * N * 4 * 2,
    extra_bytes_note=lambda grid, M, N: f"estimate: + atomic dγ traffic ({grid['programs']}·N·4·2)",
    partial_rows_text="1: the shared fp32 dγ vector",
    extra_bytes_text="estimate: programs·N·4·2, every program's read-modify-write of the shared vector",
)
"""The atomic strategy's dγ numbers (`rmsnorm_kernels.families`): one fp32 row, each program's adds counted as traffic."""


def atomic_grid(M: int, N: int, sm_count: int = 0) -> dict:
    """One program per tile of rows (the SM count plays no part)."""
    tile = backward_tile(N)
    return {"programs": -(-M // tile.rows), "rows_per_program": tile.rows, "block": tile.block,
            "num_warps": tile.num_warps}


def atomic_backward(dy2d, x2d, weight, rstd, *, tile=None):
    dx, dw = atomic_backward_fp32(dy2d, x2d, weight, rstd, tile=tile)
    return dx, dw.to(weight.dtype)


def atomic_backward_fp32(dy2d, x2d, weight, rstd, *, tile=None):
    """`atomic_backward` with dγ left in its fp32 accumulator (what a launch plan replays; the caller casts)."""
    m, n = x2d.shape
    tile = tile or backward_tile(n)
    dx = new_output(x2d.shape, x2d.dtype, x2d.device)
    dw = new_zeros((n,), torch.float32, x2d.device)
    fast(rmsnorm_bwd_atomic_kernel)[(-(-m // tile.rows),)](
        x2d, dy2d, weight, rstd, dx, dw, m, n, x2d.stride(0), dy2d.stride(0), dx.stride(0),
        ROWS=tile.rows, num_warps=tile.num_warps, **tile.segments(n).constants(),
    )
    return dx, dw


atomic_backward.plannable = atomic_backward_fp32
