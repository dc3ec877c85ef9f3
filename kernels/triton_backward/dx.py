"""The backward arithmetic every dγ strategy shares, on a [ROWS, BLOCK] tile of rows (ROWS = 1 for one row):

    dx = rstd·(γ·dy) − x·rstd³·mean(γ·dy·x)        (per row)
    dγ contribution = dy·x·rstd                     (summed over rows by the strategy)

plus the tile shape and warp count chosen for a row width N (`backward_tile`)."""

from __future__ import annotations

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
    """How one program sees a row width N: ROWS rows of BLOCK columns at a time, with ``num_warps``."""

    rows: int
    block: int
    num_warps: int


BACKWARD_TILE_ELEMENTS = 4096
"""Elements per tile for short rows: several rows share a program until the tile holds this many."""


def backward_tile(n: int) -> BackwardTile:
    block = max(16, 1 << max(0, (int(n) - 1).bit_length()))
    rows = max(1, BACKWARD_TILE_ELEMENTS // block)
    elements = rows * block
    num_warps = max(4, min(16, elements // 512))
    return BackwardTile(rows=rows, block=block, num_warps=num_warps)
