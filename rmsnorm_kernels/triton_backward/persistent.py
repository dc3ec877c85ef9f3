"""dγ strategy ``triton-persistent``: a grid of G = SM count × k programs (k from the configuration,
`rmsnorm_kernels.kernel_config`), program p walks tiles p, p+G, p+2G, … (software-pipelined: ``tl.range(...,
num_stages=…)`` loads the next tile while the current one computes), keeps its dγ partial in registers across all
its rows and writes one fp32 row at the end; the tiny column-sum kernel adds the G rows. Fixed order: dγ is
bit-reproducible for a given G (the device's SM count fixes it). Rows so wide that x, dy, γ and the partial do
not all fit in registers reload γ for every tile (``reload_weight``) instead of holding it."""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from rmsnorm_kernels.families import BackwardFamily
from rmsnorm_kernels.fast_launch import fast
from rmsnorm_kernels.kernel_config import BackwardConfig, config_for, row_layout
from rmsnorm_kernels.limits import DEFAULT_SM_COUNT
from rmsnorm_kernels.poison import new_output
from rmsnorm_kernels.triton_backward.column_sum import allow_dependent_launch, column_sum
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
):
    allow_dependent_launch(USE_PDL)
    pid = tl.program_id(0)
    w0, w1, w2 = load_weight_segments(W, N, ROW)
    acc0, acc1, acc2 = new_accumulators(ROWS, ROW)
    for tile in tl.range(pid, tl.cdiv(M, ROWS), tl.num_programs(0), num_stages=NUM_STAGES):
        rows = tile * ROWS + tl.arange(0, ROWS)
        if RELOAD_W:
            w0, w1, w2 = load_weight_segments(W, N, ROW)
        acc0, acc1, acc2 = rmsnorm_bwd_rows(
            X, DY, DX, RSTD, w0, w1, w2, acc0, acc1, acc2, rows, M, N, stride_x, stride_dy, stride_dx, ROW
        )
    store_partial(PARTIAL + pid.to(tl.int64) * N, acc0, acc1, acc2, N, ROW)


@functools.lru_cache(maxsize=4096)
def persistent_plan(M: int, N: int, sm_count: int, config: BackwardConfig) -> tuple[int, int]:
    """(tiles, programs): ⌈M / rows⌉ tiles over min(tiles, SMs × k) programs."""
    tiles = -(-M // config.rows)
    return tiles, max(1, min(tiles, sm_count * config.programs_per_sm))


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
    _, programs = persistent_plan(m, n, sm_count or device_sm_count(x2d.device), config)
    dx = new_output(x2d.shape, x2d.dtype, x2d.device)
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
        ROW=launch_layout(config, x2d, dy2d, dx),
    )
    return dx, column_sum(partial, weight.dtype, pdl=pdl)
