"""The backward arithmetic every dγ strategy shares, on a tile of ROWS rows (ROWS = 1 for one row), each row
held as up to three power-of-two segments (`rmsnorm_kernels.segments.row_segments`: 5120 = 4096 + 1024, no padded
8192-wide block):

    dx = rstd·(γ·dy) − x·rstd³·mean(γ·dy·x)        (per row)
    dγ contribution = dy·x·rstd                     (summed over rows by the strategy)

plus the tile shape and warp count chosen for a row width N (`backward_tile`)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import triton
import triton.language as tl

from rmsnorm_kernels.limits import SHARED_MEMORY_BUDGET
from rmsnorm_kernels.segments import Segments, load_segment, load_vector, next_power_of_two, row_segments, store_segment


@triton.jit
def rmsnorm_bwd_rows(X, DY, DX, RSTD, w0, w1, w2, acc0, acc1, acc2, rows, M, N, stride_x, stride_dy, stride_dx,
                     W0: tl.constexpr, W1: tl.constexpr, W2: tl.constexpr,
                     MASK0: tl.constexpr, MASK1: tl.constexpr, MASK2: tl.constexpr):
    """Write dx of ``rows`` to DX and return the dγ accumulators ``acc0 acc1 acc2`` (fp32 [ROWS, Wk], one per
    segment; 0.0 for an absent one) with these rows' contributions dy·x·rstd added. γ comes in as its segments
    ``w0 w1 w2``.

        dx = rstd·(γ·dy) − x·rstd³·mean(γ·dy·x)        (per row; the mean spans every segment)

    The accumulators are updated before dx is formed, as the unsegmented kernel did: that order keeps the
    16384-wide tile inside 128 registers (ptxas, `engine.compiler_report`)."""
    rstd = tl.load(RSTD + rows, mask=rows < M, other=0.0)
    r = rstd[:, None]
    x0 = load_segment(X, rows, M, N, stride_x, 0, W0, MASK0)
    dy0 = load_segment(DY, rows, M, N, stride_dy, 0, W0, MASK0)
    wdy0 = w0[None, :] * dy0
    dot = tl.sum(wdy0 * x0, axis=1)
    acc0 += dy0 * x0 * r
    if W1 > 0:
        x1 = load_segment(X, rows, M, N, stride_x, W0, W1, MASK1)
        dy1 = load_segment(DY, rows, M, N, stride_dy, W0, W1, MASK1)
        wdy1 = w1[None, :] * dy1
        dot += tl.sum(wdy1 * x1, axis=1)
        acc1 += dy1 * x1 * r
    if W2 > 0:
        x2 = load_segment(X, rows, M, N, stride_x, W0 + W1, W2, MASK2)
        dy2 = load_segment(DY, rows, M, N, stride_dy, W0 + W1, W2, MASK2)
        wdy2 = w2[None, :] * dy2
        dot += tl.sum(wdy2 * x2, axis=1)
        acc2 += dy2 * x2 * r
    c = (r * r * r) * (dot / N)[:, None]
    store_segment(DX, r * wdy0 - x0 * c, rows, M, N, stride_dx, 0, W0, MASK0)
    if W1 > 0:
        store_segment(DX, r * wdy1 - x1 * c, rows, M, N, stride_dx, W0, W1, MASK1)
    if W2 > 0:
        store_segment(DX, r * wdy2 - x2 * c, rows, M, N, stride_dx, W0 + W1, W2, MASK2)
    return acc0, acc1, acc2


@triton.jit
def load_weight_segments(W, N, W0: tl.constexpr, W1: tl.constexpr, W2: tl.constexpr,
                         MASK0: tl.constexpr, MASK1: tl.constexpr, MASK2: tl.constexpr):
    """γ as its (up to) three segments, fp32; an absent segment is a 1-wide stand-in nothing reads."""
    w0 = load_vector(W, N, 0, W0, MASK0)
    w1 = w0
    w2 = w0
    if W1 > 0:
        w1 = load_vector(W, N, W0, W1, MASK1)
    if W2 > 0:
        w2 = load_vector(W, N, W0 + W1, W2, MASK2)
    return w0, w1, w2


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
    padded: bool = False
    """Hold each row in one power-of-two block of ``block`` columns (the layout before segments), for
    comparisons in the tuning scripts; by default a row is its `row_segments`."""

    def segments(self, n: int) -> Segments:
        """The column segments the kernels are compiled for at row width ``n``."""
        return Segments(self.block, 0, 0, n) if self.padded else row_segments(n)


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
    4096: (2, 8, 1, 3),  # was (2, 16, 1, 3) before the segment loads; 94 % vs 92 % (probe_widths)
    8192: (1, 8, 1, 3),
    16384: (1, 16, 1, 1, "reload-weight"),  # γ held for the program's life spilled (ptxas: 72 B stack)
    32768: (1, 32, 1, 1),
    65536: (1, 32, 1, 1),
}


TUNED_WIDTHS: dict = {
    # exact N (model hidden sizes): the best tile of bench/probe_widths.py on the H200, bf16, M 16384 and 65536,
    # 2026-12-02 (results/probe-widths-h200-2026-12-02.json; bench/NOTES.md, "model widths").
    2304: (4, 16, 1, 3),
    2560: (1, 4, 2, 3),
    2880: (1, 4, 2, 3),
    3072: (1, 4, 2, 3),
    3584: (1, 4, 2, 3),
    4608: (2, 8, 1, 3),
    5120: (2, 8, 1, 3),
    6144: (2, 8, 1, 3),
    7168: (1, 8, 1, 3, "padded"),  # 4096 + 2048 + 1024 segments lose to one masked 8192 block (88 % vs 93 %)
    12288: (1, 16, 1, 3),
}
"""Exact row widths whose best tile differs from their power of two's (same tuple form as TUNED_BACKWARD;
variant "padded": the row as one masked power-of-two block instead of its segments)."""


@functools.lru_cache(maxsize=None)
def backward_tile(n: int) -> BackwardTile:
    block = max(16, next_power_of_two(n))
    rows, num_warps, per_sm, stages, *variant = TUNED_WIDTHS.get(int(n)) or TUNED_BACKWARD[block]
    return BackwardTile(rows=rows, block=block, num_warps=num_warps, programs_per_sm=per_sm, stages=stages,
                        reload_weight="reload-weight" in variant, column_halves="column-halves" in variant,
                        padded="padded" in variant)


def pipeline_stages(tile: BackwardTile, element_size: int, programs_per_sm: int, stages: int) -> int:
    """The deepest pipeline (≤ ``stages``) whose buffers of x and dy tiles fit the shared-memory budget
    (each stage holds one tile of both; measured: +32 KB per stage for 2 × 4096 bf16)."""
    per_stage = 2 * tile.rows * tile.block * element_size * programs_per_sm
    while stages > 1 and stages * per_stage > SHARED_MEMORY_BUDGET:
        stages -= 1
    return stages
