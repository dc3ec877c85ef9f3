"""dγ strategy ``triton-persistent``: a grid of G = SM count × k programs (k from the configuration,
`rmsnorm_kernels.kernel_config`), program p walks tiles p, p+G, p+2G, … (software-pipelined: ``tl.range(...,
num_stages=…)`` loads the next tile while the current one computes), keeps its dγ partial in registers across all
its rows and writes one fp32 row at the end; the tiny column-sum kernel adds the G rows. Fixed order: dγ is
bit-reproducible for a given G (the device's SM count fixes it). Rows so wide that x, dy, γ and the partial do
not all fit in registers reload γ for every tile (``reload_weight``) instead of holding it.

``split`` (rows that do not start 16-byte aligned, one row a tile): with G a multiple of the vector width VEC, every
row a program walks starts at the same offset mod VEC, so the program splits each the same way — a head up to the
next vector boundary and a tail, under 2·VEC columns loaded element by element with their own dγ accumulator, and a
body of whole vectors that runs through the segments at full width; the partial row is written at the columns
the program's body and edges cover."""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from rmsnorm_kernels.families import BackwardFamily
from rmsnorm_kernels.fast_launch import fast
from rmsnorm_kernels.kernel_config import BackwardConfig, config_for, row_layout, split_layout
from rmsnorm_kernels.limits import DEFAULT_SM_COUNT
from rmsnorm_kernels.poison import new_output
from rmsnorm_kernels.segments import split_row, split_vector
from rmsnorm_kernels.triton_backward.column_sum import allow_dependent_launch, column_sum
from rmsnorm_kernels.triton_backward.dx import (
    launch_layout,
    backward_config,
    load_weight_segments,
    new_accumulators,
    pipeline_stages,
    rmsnorm_bwd_rows,
    rmsnorm_bwd_segments,
    store_partial,
)
from rmsnorm_kernels.triton_mode import dependent_launch
from rmsnorm_kernels.triton_mode import sm_count as device_sm_count


@triton.jit
def rmsnorm_bwd_persistent_kernel(
    X,
    DY,
    W,
    RSTD,
    DX,
    PARTIAL,
    M,
    N,
    stride_x,
    stride_dy,
    stride_dx,
    ROWS: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    RELOAD_W: tl.constexpr,
    USE_PDL: tl.constexpr,
    ROW: tl.constexpr,
    VEC: tl.constexpr,
):
    allow_dependent_launch(USE_PDL)
    pid = tl.program_id(0)
    if VEC > 0:  # split: x, dy and dx share one row stride (the launch checked), ROWS = 1
        head, body, edge_cols, edge_live = split_row(pid.to(tl.int64) * stride_x, N, VEC)
        w_edge = tl.load(W + edge_cols, mask=edge_live, other=0.0).to(tl.float32)
        acc_edge = tl.zeros([ROWS, 2 * VEC], dtype=tl.float32)
        w_body = W + head
    else:
        body = N
        w_body = W
    w0, w1, w2 = load_weight_segments(w_body, body, ROW)
    acc0, acc1, acc2 = new_accumulators(ROWS, ROW)
    for tile in tl.range(pid, tl.cdiv(M, ROWS), tl.num_programs(0), num_stages=NUM_STAGES):
        rows = tile * ROWS + tl.arange(0, ROWS)
        if RELOAD_W:
            w0, w1, w2 = load_weight_segments(w_body, body, ROW)
        if VEC > 0:
            live = rows < M
            r = tl.load(RSTD + rows, mask=live, other=0.0)[:, None]
            starts = rows.to(tl.int64) * stride_x
            at_edge = starts[:, None] + edge_cols[None, :]
            edge_mask = live[:, None] & edge_live[None, :]
            x_edge = tl.load(X + at_edge, mask=edge_mask, other=0.0).to(tl.float32)
            dy_edge = tl.load(DY + at_edge, mask=edge_mask, other=0.0).to(tl.float32)
            wdy_edge = w_edge[None, :] * dy_edge
            acc_edge += dy_edge * x_edge * r
            body_starts = tl.multiple_of(starts + head, VEC)
            acc0, acc1, acc2, c = rmsnorm_bwd_segments(
                X,
                DY,
                DX,
                r,
                w0,
                w1,
                w2,
                acc0,
                acc1,
                acc2,
                live,
                body_starts,
                body_starts,
                body_starts,
                body,
                N,
                tl.sum(wdy_edge * x_edge, axis=1),
                ROW,
            )
            tl.store(DX + at_edge, (r * wdy_edge - x_edge * c).to(DX.dtype.element_ty), mask=edge_mask)
        else:
            acc0, acc1, acc2 = rmsnorm_bwd_rows(
                X, DY, DX, RSTD, w0, w1, w2, acc0, acc1, acc2, rows, M, N, stride_x, stride_dy, stride_dx, ROW
            )
    partial = PARTIAL + pid.to(tl.int64) * N
    if VEC > 0:
        store_partial(partial + head, acc0, acc1, acc2, body, ROW)
        tl.store(partial + edge_cols, tl.sum(acc_edge, axis=0), mask=edge_live)
    else:
        store_partial(partial, acc0, acc1, acc2, N, ROW)


@functools.lru_cache(maxsize=4096)
def persistent_plan(M: int, N: int, sm_count: int, config: BackwardConfig) -> tuple[int, int]:
    """(tiles, programs): ⌈M / rows⌉ tiles over min(tiles, SMs × k) programs; with ``split``, a multiple of
    `SPLIT_GRID` programs where they walk more than one tile (so that a program's rows all start alike)."""
    tiles = -(-M // config.rows)
    programs = max(1, min(tiles, sm_count * config.programs_per_sm))
    if config.split and tiles > programs >= SPLIT_GRID:
        programs -= programs % SPLIT_GRID
    return tiles, programs


SPLIT_GRID = 8
"""``split`` grids are a multiple of this: the vector width in elements of 2-byte dtypes (4 for fp32 divides it)."""


def persistent_split(config: BackwardConfig, x2d, dy2d, dx, programs: int, tiles: int) -> int:
    """The vector width the split backward runs with (elements), or 0 where its assumptions do not hold — x, dy and
    dx split alike (`segments.split_vector`), one tile a row, a grid that keeps each program's rows alike, rows of at
    least 4 vectors: then the same launch unsplit."""
    if not (config.split and config.rows == 1):
        return 0
    vec = split_vector(x2d, dy2d, dx)
    return vec if vec and x2d.shape[1] >= 4 * vec and (programs % vec == 0 or tiles <= programs) else 0


PERSISTENT = BackwardFamily(
    "persistent",
    "SM count × k programs stride over the rows, each keeping its dγ partial in registers and writing one "
    "row of a [G, N] fp32 buffer at the end; a column-sum kernel adds them in a fixed order (deterministic)",
    partial_rows_text="one per program: G = SM count × k (at most one per tile of rows)",
)
"""The persistent strategy's dγ numbers (`rmsnorm_kernels.families`): one fp32 partial row per program."""


def persistent_grid(M: int, N: int, sm_count: int = DEFAULT_SM_COUNT) -> dict:
    config = config_for("persistent", N, M)
    tiles, programs = persistent_plan(M, N, sm_count, config)
    return {
        "programs": programs,
        "rows_per_program": -(-tiles // programs) * config.rows,
        "block": row_layout(config, N).padded,
        "num_warps": config.num_warps,
        "programs_per_sm": config.programs_per_sm,
        "rows_per_tile": config.rows,
    }


def persistent_backward(
    dy2d,
    x2d,
    weight,
    rstd,
    *,
    config: BackwardConfig | None = None,
    sm_count: int | None = None,
    pdl: bool | None = None,
):
    """(dx, dγ in γ's dtype). ``config``, ``sm_count`` and ``pdl`` (the column sum's dependent launch) override the
    choices in force (the tuner, tests)."""
    m, n = x2d.shape
    config = config or backward_config("persistent", m, n, x2d.device)
    tiles, programs = persistent_plan(m, n, sm_count or device_sm_count(x2d.device), config)
    dx = new_output(x2d.shape, x2d.dtype, x2d.device)
    vec = persistent_split(config, x2d, dy2d, dx, programs, tiles)
    partial = new_output((programs, n), torch.float32, x2d.device)
    pdl = dependent_launch(x2d.device) if pdl is None else pdl
    fast(rmsnorm_bwd_persistent_kernel)[(programs,)](
        x2d,
        dy2d,
        weight,
        rstd,
        dx,
        partial,
        m,
        n,
        x2d.stride(0),
        dy2d.stride(0),
        dx.stride(0),
        ROWS=config.rows,
        NUM_STAGES=pipeline_stages(config, n, x2d.element_size()),
        RELOAD_W=config.reload_weight,
        USE_PDL=pdl,
        num_warps=config.num_warps,
        ROW=split_layout(config, n, vec) if vec else launch_layout(config, x2d, dy2d, dx),
        VEC=vec,
    )
    return dx, column_sum(partial, weight.dtype, pdl=pdl)
