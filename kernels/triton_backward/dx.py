"""The backward arithmetic every dγ strategy shares, on a [ROWS, BLOCK] tile of rows (ROWS = 1 for one row):

    dx = rstd·(γ·dy) − x·rstd³·mean(γ·dy·x)        (per row)
    dγ contribution = dy·x·rstd                     (summed over rows by the strategy)

plus the tile shape and warp count chosen for a row width N (`backward_tile`)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import triton
import triton.language as tl


@triton.jit
def load_tile(X, DY, RSTD, rows, cols, M, N, stride_x, stride_dy):
    """x, dy as fp32 [ROWS, BLOCK] (zeros outside the matrix) and rstd [ROWS] for the given rows."""
    row_mask = rows < M
    mask = row_mask[:, None] & (cols < N)[None, :]
    rows64 = rows.to(tl.int64)
    x = tl.load(X + rows64[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(DY + rows64[:, None] * stride_dy + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    rstd = tl.load(RSTD + rows, mask=row_mask, other=0.0)
    return x, dy, rstd


@triton.jit
def rmsnorm_dx_tile(x, dy, w, rstd, N):
    """dx for a tile (fp32): x, dy [ROWS, BLOCK], w [BLOCK], rstd [ROWS]. Masked lanes (x = dy = 0) give 0."""
    wdy = w[None, :] * dy
    mean_wdy_x = tl.sum(wdy * x, axis=1) / N
    r = rstd[:, None]
    return r * wdy - x * (r * r * r) * mean_wdy_x[:, None]


@triton.jit
def rmsnorm_dw_tile(x, dy, rstd):
    """This tile's dγ contribution per element, dy·x·rstd (fp32 [ROWS, BLOCK]); the caller sums the rows."""
    return dy * x * rstd[:, None]


@triton.jit
def store_dx(DX, dx, rows, cols, M, N, stride_dx):
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    tl.store(DX + rows.to(tl.int64)[:, None] * stride_dx + cols[None, :], dx.to(DX.dtype.element_ty), mask=mask)


@dataclass(frozen=True)
class BackwardTile:
    """How one program sees a row width N: ``rows`` rows of ``block`` columns at a time, ``num_warps``
    warps; for the persistent grid also ``programs_per_sm`` (k) and the software-pipeline depth ``stages``."""

    rows: int
    block: int
    num_warps: int
    programs_per_sm: int = 1
    stages: int = 1
    reload_weight: bool = False
    """Persistent grid only: load γ again for every row (an L1/L2 hit) instead of holding it in registers
    for the program's life: 32 fewer live values per thread at 16384 × 16 warps, where ptxas spilled."""
    column_halves: bool = False
    """Persistent grid only: treat each row as two column halves in two passes (pass 1 accumulates dγ and
    the row's Σγ·dy·x, pass 2 reloads x and dy from L2 to write dx), so only half a row of x and dy is
    live at a time (`rmsnorm_bwd_persistent_halves_kernel`)."""


TUNED_BACKWARD = {
    # block: (rows, num_warps, programs_per_sm, stages[, variant]): the best of grids over rows × warps × k
    # × stages on the H200, bf16, 2026-12-02 (bench/NOTES.md); blocks < 128 follow 128's tile. variant:
    # "reload-weight" or "column-halves" (the `BackwardTile` fields of those names).
    16: (512, 8, 1, 3),
    32: (256, 8, 1, 3),
    64: (128, 8, 1, 3),
    128: (64, 8, 1, 3),
    256: (32, 8, 1, 3),
    512: (8, 4, 2, 3),
    1024: (4, 4, 2, 3),
    2048: (4, 8, 1, 3),
    4096: (2, 16, 1, 3),
    8192: (1, 8, 1, 3),
    16384: (1, 16, 1, 1, "reload-weight"),  # γ held for the program's life spilled (ptxas: 72 B stack)
    32768: (1, 32, 1, 1),
    65536: (1, 32, 1, 1),
}

SHARED_MEMORY_BUDGET = 200 * 1024
"""Bytes of shared memory one SM may give the pipelined loads of its k programs (the H100/H200 have 227 KB)."""


def next_power_of_two(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


@functools.lru_cache(maxsize=None)
def backward_tile(n: int) -> BackwardTile:
    block = max(16, next_power_of_two(n))
    rows, num_warps, per_sm, stages, *variant = TUNED_BACKWARD[block]
    return BackwardTile(rows=rows, block=block, num_warps=num_warps, programs_per_sm=per_sm, stages=stages,
                        reload_weight="reload-weight" in variant, column_halves="column-halves" in variant)


def pipeline_stages(tile: BackwardTile, element_size: int, programs_per_sm: int, stages: int) -> int:
    """The deepest pipeline (≤ ``stages``) whose buffers of x and dy tiles fit the shared-memory budget
    (each stage holds one tile of both; measured: +32 KB per stage for 2 × 4096 bf16)."""
    per_stage = 2 * tile.rows * tile.block * element_size * programs_per_sm
    while stages > 1 and stages * per_stage > SHARED_MEMORY_BUDGET:
        stages -= 1
    return stages
