"""The backward arithmetic every dγ strategy shares, on a tile of ROWS rows (ROWS = 1 for one row), each row
held as up to three power-of-two segments (`rmsnorm_kernels.segments.row_segments`: 5120 = 4096 + 1024, no padded
8192-wide block):

    dx = rstd·(γ·dy) − x·rstd³·mean(γ·dy·x)        (per row)
    dγ contribution = dy·x·rstd                     (summed over rows by the strategy)

plus each strategy's configuration for (M, N) on this GPU (`backward_config`, from `rmsnorm_kernels.kernel_config`)."""

from __future__ import annotations

import triton
import triton.language as tl

from rmsnorm_kernels.kernel_config import DEFAULT_ARCH, BackwardConfig, config_for, row_layout
from rmsnorm_kernels.limits import SHARED_MEMORY_BUDGET
from rmsnorm_kernels.segments import (
    load_segment_at,
    load_vector,
    row_starts,
    store_segment_at,
    store_vector,
)
from rmsnorm_kernels.triton_mode import arch


@triton.jit
def rmsnorm_bwd_rows(
    X, DY, DX, RSTD, w0, w1, w2, acc0, acc1, acc2, rows, M, N, stride_x, stride_dy, stride_dx, ROW: tl.constexpr
):
    """Write dx of ``rows`` to DX and return the dγ accumulators ``acc0 acc1 acc2`` (fp32, one per segment of
    ``ROW``; 0.0 for an absent one) with these rows' contributions dy·x·rstd added. γ comes in as its segments
    ``w0 w1 w2``.

        dx = rstd·(γ·dy) − x·rstd³·mean(γ·dy·x)        (per row; the mean spans every segment)

    The accumulators are updated before dx is formed, as the unsegmented kernel did: that order keeps the
    16384-wide tile inside 128 registers (ptxas, `engine.compiler_report`)."""
    live = rows < M
    r = tl.load(RSTD + rows, mask=live, other=0.0)[:, None]
    sx, sdy, sdx = row_starts(rows, stride_x, ROW), row_starts(rows, stride_dy, ROW), row_starts(rows, stride_dx, ROW)
    acc0, acc1, acc2, _ = rmsnorm_bwd_segments(
        X, DY, DX, r, w0, w1, w2, acc0, acc1, acc2, live, sx, sdy, sdx, N, N, None, ROW
    )
    return acc0, acc1, acc2


@triton.jit
def rmsnorm_bwd_segments(
    X, DY, DX, r, w0, w1, w2, acc0, acc1, acc2, live, sx, sdy, sdx, cols, N, dot_rest, ROW: tl.constexpr
):
    """`rmsnorm_bwd_rows` over the segments of ``ROW`` of rows starting at ``sx sdy sdx`` (``live``: which exist;
    ``r``: their rstd, [ROWS, 1]), columns below ``cols``; ``dot_rest``: Σγ·dy·x of the row's other columns (the
    split backward's head and tail) or None. Returns the accumulators and c = rstd³·mean(γ·dy·x), [ROWS, 1], which
    the other columns' dx needs."""
    x0 = load_segment_at(X, sx, live, cols, ROW, 0)
    dy0 = load_segment_at(DY, sdy, live, cols, ROW, 0)
    wdy0 = w0[None, :] * dy0
    dot = tl.sum(wdy0 * x0, axis=1)
    if dot_rest is not None:
        dot += dot_rest
    acc0 += dy0 * x0 * r
    if ROW[1] > 0:
        x1 = load_segment_at(X, sx, live, cols, ROW, 1)
        dy1 = load_segment_at(DY, sdy, live, cols, ROW, 1)
        wdy1 = w1[None, :] * dy1
        dot += tl.sum(wdy1 * x1, axis=1)
        acc1 += dy1 * x1 * r
    if ROW[2] > 0:
        x2 = load_segment_at(X, sx, live, cols, ROW, 2)
        dy2 = load_segment_at(DY, sdy, live, cols, ROW, 2)
        wdy2 = w2[None, :] * dy2
        dot += tl.sum(wdy2 * x2, axis=1)
        acc2 += dy2 * x2 * r
    c = (r * r * r) * (dot / N)[:, None]
    store_segment_at(DX, r * wdy0 - x0 * c, sdx, live, cols, ROW, 0)
    if ROW[1] > 0:
        store_segment_at(DX, r * wdy1 - x1 * c, sdx, live, cols, ROW, 1)
    if ROW[2] > 0:
        store_segment_at(DX, r * wdy2 - x2 * c, sdx, live, cols, ROW, 2)
    return acc0, acc1, acc2, c


@triton.jit
def load_weight_segments(W, N, ROW: tl.constexpr):
    """γ as its (up to) three segments, fp32; an absent segment is a stand-in nothing reads."""
    w0 = load_vector(W, N, ROW, 0)
    w1 = w0
    w2 = w0
    if ROW[1] > 0:
        w1 = load_vector(W, N, ROW, 1)
    if ROW[2] > 0:
        w2 = load_vector(W, N, ROW, 2)
    return w0, w1, w2


@triton.jit
def new_accumulators(ROWS: tl.constexpr, ROW: tl.constexpr):
    """Zeroed fp32 dγ accumulators, [ROWS, width] for each segment of ``ROW`` (0.0 for an absent one)."""
    W0: tl.constexpr = ROW[0]
    W1: tl.constexpr = ROW[1]
    W2: tl.constexpr = ROW[2]
    acc0 = tl.zeros([ROWS, W0], dtype=tl.float32)
    acc1 = 0.0
    acc2 = 0.0
    if W1 > 0:
        acc1 = tl.zeros([ROWS, W1], dtype=tl.float32)
    if W2 > 0:
        acc2 = tl.zeros([ROWS, W2], dtype=tl.float32)
    return acc0, acc1, acc2


@triton.jit
def store_partial(PARTIAL, acc0, acc1, acc2, N, ROW: tl.constexpr):
    """One program's dγ partial row: each accumulator summed over its rows, written as one fp32 row."""
    store_vector(PARTIAL, tl.sum(acc0, axis=0), N, ROW, 0)
    if ROW[1] > 0:
        store_vector(PARTIAL, tl.sum(acc1, axis=0), N, ROW, 1)
    if ROW[2] > 0:
        store_vector(PARTIAL, tl.sum(acc2, axis=0), N, ROW, 2)


def backward_config(kind: str, m: int, n: int, device=None) -> BackwardConfig:
    """The configuration of strategy ``kind`` for [m, n] rows on ``device`` (`rmsnorm_kernels.kernel_config`: the
    tuned table's nearest entry, else the rule)."""
    return config_for(kind, n, m, arch(device) if device is not None else DEFAULT_ARCH)


def launch_layout(config: BackwardConfig, x2d, dy2d, dx) -> tuple:
    """The constexpr ``ROW`` a backward launches with: `row_layout` of the row width and the rows' alignment in x,
    dy and dx (`segments.row_alignment`)."""
    strides = (x2d.stride(0), dy2d.stride(0), dx.stride(0))
    return row_layout(config, x2d.shape[1], strides, x2d.element_size()).layout()


def pipeline_stages(config: BackwardConfig, n: int, element_size: int, programs_per_sm: int | None = None) -> int:
    """The deepest pipeline (≤ ``config.stages``) whose buffers of x and dy tiles fit the shared-memory budget
    (each stage holds one tile of both; measured: +32 KB per stage for 2 × 4096 bf16)."""
    per_stage = (
        2 * config.rows * row_layout(config, n).padded * element_size * (programs_per_sm or config.programs_per_sm)
    )
    stages = config.stages
    while stages > 1 and stages * per_stage > SHARED_MEMORY_BUDGET:
        stages -= 1
    return stages
