"""dγ strategy ``triton-workspace`` (as TorchInductor splits a reduction): each program takes a fixed run of
consecutive rows (the configuration's ``rows_per_program``), computes their dx, sums their dγ in registers and writes
that fp32 partial as one row of a [G, N] workspace; the vectorized column-sum kernel then adds the G rows.
Fixed order throughout: dγ is bit-reproducible."""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from rmsnorm_kernels.families import BackwardFamily
from rmsnorm_kernels.fast_launch import fast
from rmsnorm_kernels.limits import DEFAULT_SM_COUNT
from rmsnorm_kernels.poison import new_output
from rmsnorm_kernels.triton_backward.column_sum import allow_dependent_launch, column_sum
from rmsnorm_kernels.kernel_config import BackwardConfig, config_for, row_layout
from rmsnorm_kernels.triton_backward.dx import (
    launch_layout,
    backward_config,
    load_weight_segments,
    new_accumulators,
    pipeline_stages,
    rmsnorm_bwd_rows,
    store_partial,
)
from rmsnorm_kernels.triton_mode import dependent_launch
from rmsnorm_kernels.triton_mode import sm_count as device_sm_count

MIN_TILES_PER_PROGRAM = 4
"""A program covers at least this many tiles, so their loads can be pipelined. The workspace is ⌈M / rows per
program⌉ fp32 rows: an extra 8 / (rows per program) bytes written and read back per element (0.06 B at 128 rows,
against the 6 every bf16 backward moves)."""


@triton.jit
def rmsnorm_bwd_workspace_kernel(
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
    tiles_per_program,
    ROWS: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    USE_PDL: tl.constexpr,
    ROW: tl.constexpr,
):
    allow_dependent_launch(USE_PDL)
    pid = tl.program_id(0)
    w0, w1, w2 = load_weight_segments(W, N, ROW)
    acc0, acc1, acc2 = new_accumulators(ROWS, ROW)
    for t in tl.range(0, tiles_per_program, num_stages=NUM_STAGES):
        rows = (pid * tiles_per_program + t) * ROWS + tl.arange(0, ROWS)
        acc0, acc1, acc2 = rmsnorm_bwd_rows(
            X, DY, DX, RSTD, w0, w1, w2, acc0, acc1, acc2, rows, M, N, stride_x, stride_dy, stride_dx, ROW
        )
    store_partial(PARTIAL + pid.to(tl.int64) * N, acc0, acc1, acc2, N, ROW)


@functools.lru_cache(maxsize=4096)
def workspace_plan(M: int, N: int, config: BackwardConfig, sm_count: int = DEFAULT_SM_COUNT) -> tuple[int, int]:
    """(tiles per program, programs). Rows per program: the configuration's, but no more than leaves 2 programs
    per SM (4096 rows of 8192 at 128 rows per program were 32 programs: 37 % of the ceiling)."""
    enough = 1 << max(0, (M // (2 * sm_count)).bit_length() - 1)  # a power of two ≤ M / (2 × SMs)
    rows_per_program = max(MIN_TILES_PER_PROGRAM * config.rows, min(config.rows_per_program or 128, enough))
    tiles = -(-M // config.rows)
    tiles_per_program = min(max(MIN_TILES_PER_PROGRAM, rows_per_program // config.rows), tiles)
    return tiles_per_program, -(-tiles // tiles_per_program)


WORKSPACE = BackwardFamily(
    "workspace",
    "each program's run of consecutive rows writes one dγ partial row of a [G, N] fp32 workspace, then a "
    "column-sum kernel adds the G rows in a fixed order (deterministic)",
    partial_rows_text="one per program: G = ⌈M / rows per program⌉",
)
"""The workspace strategy's dγ numbers (`rmsnorm_kernels.families`): one fp32 partial row per program."""


def workspace_grid(M: int, N: int, sm_count: int = DEFAULT_SM_COUNT) -> dict:
    config = config_for("workspace", N, M)
    tiles_per_program, programs = workspace_plan(M, N, config, sm_count or DEFAULT_SM_COUNT)
    return {
        "programs": programs,
        "rows_per_program": tiles_per_program * config.rows,
        "block": row_layout(config, N).padded,
        "num_warps": config.num_warps,
    }


def workspace_backward(dy2d, x2d, weight, rstd, *, config: BackwardConfig | None = None, pdl: bool | None = None):
    """(dx, dγ in γ's dtype). ``config`` and ``pdl`` override the choices in force (the tuner, tests)."""
    m, n = x2d.shape
    config = config or backward_config("workspace", m, n, x2d.device)
    tiles_per_program, programs = workspace_plan(m, n, config, device_sm_count(x2d.device))
    dx = new_output(x2d.shape, x2d.dtype, x2d.device)
    partial = new_output((programs, n), torch.float32, x2d.device)
    pdl = dependent_launch(x2d.device) if pdl is None else pdl
    fast(rmsnorm_bwd_workspace_kernel)[(programs,)](
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
        tiles_per_program,
        ROWS=config.rows,
        NUM_STAGES=pipeline_stages(config, n, x2d.element_size()),
        USE_PDL=pdl,
        num_warps=config.num_warps,
        ROW=launch_layout(config, x2d, dy2d, dx),
    )
    return dx, column_sum(partial, weight.dtype, pdl=pdl)
