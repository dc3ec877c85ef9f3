"""dγ strategy ``triton-atomic`` (the seed design): one program per tile of rows (one row for N ≥ 4096);
each computes dx and ``tl.atomic_add``s its dγ partial into one shared fp32 N-vector. Every program hits the
same N addresses, so the adds contend, and their order varies from run to run: dγ is NOT bit-reproducible.

The accumulator is not allocated per call: a small drain kernel (queued behind the first with programmatic
dependent launch, as the column sum is) writes dγ in γ's dtype and leaves the accumulator zero, so it is a buffer a
launch plan keeps for the stream's next call (`new_zeros(kept=True)`). Two launches and two allocations per call
(dx, dγ), where a zero-filled accumulator, its fill and a cast to γ's dtype made three of each (issue 16's host time).
A one-launch version (the program with the last ticket drained the vector) made every program wait for its adds to
be performed before taking its ticket: up to 38 % more GPU time under contention (docs/NOTES.md, fourteenth session)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_wait

from rmsnorm_kernels.families import BackwardFamily
from rmsnorm_kernels.fast_launch import fast
from rmsnorm_kernels.poison import new_output, new_zeros
from rmsnorm_kernels.triton_backward.column_sum import allow_dependent_launch
from rmsnorm_kernels.kernel_config import BackwardConfig, config_for, row_layout
from rmsnorm_kernels.triton_backward.dx import backward_config, load_weight_segments, rmsnorm_bwd_rows, launch_layout
from rmsnorm_kernels.triton_mode import dependent_launch, dependent_launch_options


@triton.jit
def atomic_add_segment(ACC, value, N, ROW: tl.constexpr, K: tl.constexpr):
    OFF: tl.constexpr = ROW[0] * (K > 0) + ROW[1] * (K > 1)
    cols = OFF + tl.arange(0, ROW[K])
    if ROW[3 + K]:
        tl.atomic_add(ACC + cols, value, mask=cols < N)
    else:
        tl.atomic_add(ACC + cols, value)


@triton.jit
def rmsnorm_bwd_atomic_kernel(
    X,
    DY,
    W,
    RSTD,
    DX,
    ACC,
    M,
    N,
    stride_x,
    stride_dy,
    stride_dx,
    ROWS: tl.constexpr,
    USE_PDL: tl.constexpr,
    ROW: tl.constexpr,
):
    """dx of a tile of rows; their dγ contributions added into ACC (fp32 [N])."""
    allow_dependent_launch(USE_PDL)
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    w0, w1, w2 = load_weight_segments(W, N, ROW)
    d0, d1, d2 = rmsnorm_bwd_rows(
        X, DY, DX, RSTD, w0, w1, w2, 0.0, 0.0, 0.0, rows, M, N, stride_x, stride_dy, stride_dx, ROW
    )
    atomic_add_segment(ACC, tl.sum(d0, axis=0), N, ROW, 0)
    if ROW[1] > 0:
        atomic_add_segment(ACC, tl.sum(d1, axis=0), N, ROW, 1)
    if ROW[2] > 0:
        atomic_add_segment(ACC, tl.sum(d2, axis=0), N, ROW, 2)


@triton.jit
def drain_kernel(ACC, DW, N, BLOCK: tl.constexpr, USE_PDL: tl.constexpr):
    """DW (γ's dtype) = ACC, and ACC = 0 again for the next call."""
    if USE_PDL:
        gdc_wait()
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < N
    tl.store(DW + cols, tl.load(ACC + cols, mask=mask, other=0.0).to(DW.dtype.element_ty), mask=mask)
    tl.store(ACC + cols, tl.zeros([BLOCK], tl.float32), mask=mask)


DRAIN_BLOCK = 1024


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
    config = config_for("atomic", N, M)
    return {
        "programs": -(-M // config.rows),
        "rows_per_program": config.rows,
        "block": row_layout(config, N).padded,
        "num_warps": config.num_warps,
    }


def atomic_backward(dy2d, x2d, weight, rstd, *, config: BackwardConfig | None = None, pdl: bool | None = None):
    """(dx, dγ in γ's dtype). The fp32 accumulator is zero-filled here and left zero by the drain kernel: a launch
    plan keeps it for the stream's next call. ``config`` and ``pdl`` (the drain's dependent launch) override the
    choices in force (the tuner, tests)."""
    m, n = x2d.shape
    config = config or backward_config("atomic", m, n, x2d.device)
    pdl = dependent_launch(x2d.device) if pdl is None else pdl
    dx = new_output(x2d.shape, x2d.dtype, x2d.device)
    dw = new_output((n,), weight.dtype, x2d.device)
    acc = new_zeros((n,), torch.float32, x2d.device, kept=True)
    fast(rmsnorm_bwd_atomic_kernel)[(-(-m // config.rows),)](
        x2d,
        dy2d,
        weight,
        rstd,
        dx,
        acc,
        m,
        n,
        x2d.stride(0),
        dy2d.stride(0),
        dx.stride(0),
        ROWS=config.rows,
        USE_PDL=pdl,
        num_warps=config.num_warps,
        ROW=launch_layout(config, x2d, dy2d, dx),
    )
    fast(drain_kernel)[(-(-n // DRAIN_BLOCK),)](
        acc, dw, n, BLOCK=DRAIN_BLOCK, USE_PDL=pdl, num_warps=4, **dependent_launch_options(pdl)
    )
    return dx, dw
