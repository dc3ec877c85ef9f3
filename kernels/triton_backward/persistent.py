"""dγ strategy ``triton-persistent``: a grid of G = SM count × k programs (k per row width, `programs_per_sm`),
program p walks tiles p, p+G, p+2G, … (software-pipelined: ``tl.range(..., num_stages=…)`` loads the next
tile while the current one computes), keeps its dγ partial in registers across all its rows and writes one
fp32 row at the end (for rows ≥ 16384 wide, where registers would spill, the partial lives in that row of
the buffer instead, L2-resident, updated in place row after row); the tiny column-sum kernel adds the G rows. Fixed order: dγ is bit-reproducible for a
given G (the device's SM count fixes it)."""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from kernels.poison import new_output
from kernels.registry import register
from kernels.triton_backward.column_sum import column_sum
from kernels.triton_backward.dx import backward_tile, load_tile, pipeline_stages, rmsnorm_dw_tile, rmsnorm_dx_tile, store_dx
from kernels.triton_backward.function import triton_rmsnorm_with
from kernels.triton_mode import sm_count as device_sm_count
from kernels.triton_mode import triton_unavailable_reason

@triton.jit
def rmsnorm_bwd_persistent_kernel(X, DY, W, RSTD, DX, PARTIAL, M, N, stride_x, stride_dy, stride_dx,
                                  ROWS: tl.constexpr, BLOCK: tl.constexpr, NUM_STAGES: tl.constexpr,
                                  PARTIAL_IN_MEMORY: tl.constexpr):
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    cols = tl.arange(0, BLOCK)
    w = tl.load(W + cols, mask=cols < N, other=0.0).to(tl.float32)
    partial_row = PARTIAL + pid.to(tl.int64) * N + cols
    acc = tl.zeros([ROWS, BLOCK], dtype=tl.float32)
    tiles = tl.cdiv(M, ROWS)
    for tile in tl.range(pid, tiles, programs, num_stages=NUM_STAGES):
        rows = tile * ROWS + tl.arange(0, ROWS)
        x, dy, rstd = load_tile(X, DY, RSTD, rows, cols, M, N, stride_x, stride_dy)
        store_dx(DX, rmsnorm_dx_tile(x, dy, w, rstd, N), rows, cols, M, N, stride_dx)
        if PARTIAL_IN_MEMORY:  # read-modify-write of this program's own row (no load on its first tile)
            previous = tl.load(partial_row, mask=(cols < N) & (tile != pid), other=0.0)
            tl.store(partial_row, previous + tl.sum(rmsnorm_dw_tile(x, dy, rstd), axis=0), mask=cols < N)
        else:
            acc += rmsnorm_dw_tile(x, dy, rstd)
    if not PARTIAL_IN_MEMORY:
        tl.store(partial_row, tl.sum(acc, axis=0), mask=cols < N)


def programs_per_sm(N: int) -> int:
    """k: programs per SM (from the tuned tile table)."""
    return backward_tile(N).programs_per_sm


@functools.lru_cache(maxsize=4096)
def persistent_plan(M: int, N: int, sm_count: int, tile=None, per_sm: int | None = None):
    tile = tile or backward_tile(N)
    tiles = -(-M // tile.rows)
    programs = max(1, min(tiles, sm_count * (per_sm or tile.programs_per_sm)))
    return tile, tiles, programs


def persistent_launch(M: int, N: int, sm_count: int = 132) -> dict:
    tile, tiles, programs = persistent_plan(M, N, sm_count)
    return {"programs": programs, "rows_per_program": -(-tiles // programs) * tile.rows,
            "partial_rows": programs, "block": tile.block, "num_warps": tile.num_warps,
            "programs_per_sm": tile.programs_per_sm, "rows_per_tile": tile.rows}


def persistent_backward(dy2d, x2d, weight, rstd, *, sm_count: int | None = None, tile=None,
                        per_sm: int | None = None, stages: int | None = None):
    """``tile``, ``per_sm`` (k) and ``stages`` override the tuned choices (for tuning scripts)."""
    m, n = x2d.shape
    tile, _, programs = persistent_plan(m, n, sm_count or device_sm_count(x2d.device), tile, per_sm)
    stages = pipeline_stages(tile, x2d.element_size(), per_sm or tile.programs_per_sm, stages or tile.stages)
    if tile.partial_in_memory:
        stages = 1  # a prefetched load of the partial row could overtake the previous tile's store
    dx = new_output(x2d.shape, x2d.dtype, x2d.device)
    partial = new_output((programs, n), torch.float32, x2d.device)
    rmsnorm_bwd_persistent_kernel[(programs,)](
        x2d, dy2d, weight, rstd, dx, partial, m, n, x2d.stride(0), dy2d.stride(0), dx.stride(0),
        ROWS=tile.rows, BLOCK=tile.block, NUM_STAGES=stages, PARTIAL_IN_MEMORY=tile.partial_in_memory,
        num_warps=tile.num_warps,
    )
    return dx, column_sum(partial, weight.dtype)


@register(
    "triton-persistent",
    passes=("bwd",),
    deterministic=True,
    family="persistent",
    description="Triton backward, persistent grid of SM count × k programs striding over rows, dγ partial kept "
    "in registers, one fp32 row per program, then a tiny column sum (deterministic)",
    available_when=triton_unavailable_reason,
    launch=persistent_launch,
)
def triton_persistent_rmsnorm(x, weight, eps=1e-6):
    return triton_rmsnorm_with(persistent_backward, x, weight, eps)
