"""dγ strategy ``triton-persistent``: a grid of G = SM count × k programs (k per row width, `programs_per_sm`),
program p walks tiles p, p+G, p+2G, … (software-pipelined: ``tl.range(..., num_stages=…)`` loads the next
tile while the current one computes), keeps its dγ partial in registers across all its rows and writes one
fp32 row at the end; the tiny column-sum kernel adds the G rows. Fixed order: dγ is bit-reproducible for a
given G (the device's SM count fixes it).

Rows so wide that x, dy, γ and the partial do not fit in registers together (16384 at 16 warps: ptxas
spilled) have two remedies, chosen per width in `TUNED_BACKWARD`: reload γ for every row instead of holding
it (``reload_weight``), or the two-pass column-halves kernel (``column_halves``; `rmsnorm_kernels.experimental`,
no width is tuned to it today)."""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from rmsnorm_kernels.families import BackwardFamily
from rmsnorm_kernels.experimental import rmsnorm_bwd_persistent_halves_kernel
from rmsnorm_kernels.fast_launch import fast
from rmsnorm_kernels.limits import DEFAULT_SM_COUNT
from rmsnorm_kernels.poison import new_output
from rmsnorm_kernels.triton_backward.column_sum import allow_dependent_launch, column_sum
from rmsnorm_kernels.segments import store_vector
from rmsnorm_kernels.triton_backward.dx import backward_tile, load_weight_segments, pipeline_stages, rmsnorm_bwd_rows
from rmsnorm_kernels.triton_mode import sm_count as device_sm_count
from rmsnorm_kernels.triton_mode import dependent_launch


@triton.jit
def rmsnorm_bwd_persistent_kernel(X, DY, W, RSTD, DX, PARTIAL, M, N, stride_x, stride_dy, stride_dx,
                                  ROWS: tl.constexpr, NUM_STAGES: tl.constexpr, RELOAD_W: tl.constexpr,
                                  USE_PDL: tl.constexpr, W0: tl.constexpr, W1: tl.constexpr, W2: tl.constexpr,
                                  MASK0: tl.constexpr, MASK1: tl.constexpr, MASK2: tl.constexpr):
    allow_dependent_launch(USE_PDL)
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    w0, w1, w2 = load_weight_segments(W, N, W0, W1, W2, MASK0, MASK1, MASK2)
    acc0 = tl.zeros([ROWS, W0], dtype=tl.float32)
    acc1 = 0.0
    acc2 = 0.0
    if W1 > 0:
        acc1 = tl.zeros([ROWS, W1], dtype=tl.float32)
    if W2 > 0:
        acc2 = tl.zeros([ROWS, W2], dtype=tl.float32)
    tiles = tl.cdiv(M, ROWS)
    for tile in tl.range(pid, tiles, programs, num_stages=NUM_STAGES):
        rows = tile * ROWS + tl.arange(0, ROWS)
        if RELOAD_W:
            w0, w1, w2 = load_weight_segments(W, N, W0, W1, W2, MASK0, MASK1, MASK2)
        acc0, acc1, acc2 = rmsnorm_bwd_rows(X, DY, DX, RSTD, w0, w1, w2, acc0, acc1, acc2, rows, M, N,
                                            stride_x, stride_dy, stride_dx, W0, W1, W2, MASK0, MASK1, MASK2)
    partial = PARTIAL + pid.to(tl.int64) * N
    store_vector(partial, tl.sum(acc0, axis=0), N, 0, W0, MASK0)
    if W1 > 0:
        store_vector(partial, tl.sum(acc1, axis=0), N, W0, W1, MASK1)
    if W2 > 0:
        store_vector(partial, tl.sum(acc2, axis=0), N, W0 + W1, W2, MASK2)


def programs_per_sm(N: int) -> int:
    """k: programs per SM (from the tuned tile table)."""
    return backward_tile(N).programs_per_sm


@functools.lru_cache(maxsize=4096)
def persistent_plan(M: int, N: int, sm_count: int, tile=None, per_sm: int | None = None):
    tile = tile or backward_tile(N)
    tiles = -(-M // tile.rows)
    programs = max(1, min(tiles, sm_count * (per_sm or tile.programs_per_sm)))
    return tile, tiles, programs


PERSISTENT = BackwardFamily(
    "persistent",
    "SM count × k programs stride over the rows, each keeping its dγ partial in registers and writing one "
    "row of a [G, N] fp32 buffer at the end; a column-sum kernel adds them in a fixed order (deterministic)",
    partial_rows_text="one per program: G = SM count × k (at most one per tile of rows)",
)
"""The persistent strategy's dγ numbers (`rmsnorm_kernels.families`): one fp32 partial row per program."""


def persistent_grid(M: int, N: int, sm_count: int = DEFAULT_SM_COUNT) -> dict:
    tile, tiles, programs = persistent_plan(M, N, sm_count)
    return {"programs": programs, "rows_per_program": -(-tiles // programs) * tile.rows, "block": tile.block,
            "num_warps": tile.num_warps, "programs_per_sm": tile.programs_per_sm, "rows_per_tile": tile.rows}


def persistent_backward(dy2d, x2d, weight, rstd, *, sm_count: int | None = None, tile=None,
                        per_sm: int | None = None, stages: int | None = None, pdl: bool | None = None):
    """``tile``, ``per_sm`` (k), ``stages`` and ``pdl`` (the column sum's dependent launch) override the
    tuned choices (for tuning scripts)."""
    m, n = x2d.shape
    tile, _, programs = persistent_plan(m, n, sm_count or device_sm_count(x2d.device), tile, per_sm)
    stages = pipeline_stages(tile, x2d.element_size(), per_sm or tile.programs_per_sm, stages or tile.stages)
    dx = new_output(x2d.shape, x2d.dtype, x2d.device)
    partial = new_output((programs, n), torch.float32, x2d.device)
    args = (x2d, dy2d, weight, rstd, dx, partial, m, n, x2d.stride(0), dy2d.stride(0), dx.stride(0))
    pdl = dependent_launch(x2d.device) if pdl is None else pdl
    if tile.column_halves:
        fast(rmsnorm_bwd_persistent_halves_kernel)[(programs,)](
            *args, HALF=max(1, tile.block // 2), NUM_STAGES=stages, USE_PDL=pdl, num_warps=tile.num_warps)
    else:
        fast(rmsnorm_bwd_persistent_kernel)[(programs,)](
            *args, ROWS=tile.rows, NUM_STAGES=stages, RELOAD_W=tile.reload_weight, USE_PDL=pdl,
            num_warps=tile.num_warps, **tile.segments(n).constants())
    return dx, column_sum(partial, weight.dtype, pdl=pdl)
