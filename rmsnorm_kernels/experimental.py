"""Kernels only the tuning scripts reach (bench/tune_kernels.py, bench/probe_tiles.py, bench/probe_widths.py):
kept because the tables that choose a kernel per width (`rmsnorm_kernels.triton_forward.FORWARD_PLAN`,
`rmsnorm_kernels.triton_backward.dx.TUNED_BACKWARD`) may name them, but today none does, so no registered
implementation launches them.

* ``rmsnorm_fwd_persistent_kernel``: the forward as SM count × k programs striding over [ROWS, BLOCK] tiles,
  the next tile's loads software-pipelined (``tl.range(..., num_stages)``) behind the current one's math;
  reached through ``rmsnorm_forward(kernel="persistent")`` or ``plan=(rows, num_warps, k, stages)``;
  measured slower than the one-row and chunked kernels (bench/NOTES.md, "third device session").
* ``rmsnorm_bwd_persistent_halves_kernel``: the persistent backward with each row in two column halves and
  two passes (``BackwardTile.column_halves``), a remedy for register spills at 16384 that lost to reloading γ.
"""

from __future__ import annotations

import triton
import triton.language as tl

from rmsnorm_kernels.fast_launch import fast
from rmsnorm_kernels.limits import DEFAULT_SM_COUNT, SHARED_MEMORY_BUDGET
from rmsnorm_kernels.segments import next_power_of_two
from rmsnorm_kernels.triton_backward.column_sum import allow_dependent_launch
from rmsnorm_kernels.triton_mode import sm_count as device_sm_count

DEFAULT_FORWARD_PLAN = (8, 2, 3)
"""(num_warps, programs per SM, stages) of ``kernel="persistent"``; its rows: a 4096-element tile."""


@triton.jit
def rmsnorm_fwd_persistent_kernel(X, W, Y, RSTD, M, stride_x, stride_y, N, eps,
                                  ROWS: tl.constexpr, BLOCK: tl.constexpr, NUM_STAGES: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    col_mask = cols < N
    w = tl.load(W + cols, mask=col_mask, other=0.0).to(tl.float32)
    tiles = tl.cdiv(M, ROWS)
    for tile in tl.range(tl.program_id(0), tiles, tl.num_programs(0), num_stages=NUM_STAGES):
        rows = tile * ROWS + tl.arange(0, ROWS)
        row_mask = rows < M
        mask = row_mask[:, None] & col_mask[None, :]
        rows64 = rows.to(tl.int64)
        x = tl.load(X + rows64[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        rstd = tl.rsqrt(tl.sum(x * x, axis=1) / N + eps)
        y = x * rstd[:, None] * w[None, :]
        tl.store(Y + rows64[:, None] * stride_y + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)
        tl.store(RSTD + rows, rstd, mask=row_mask)


def forward_plan(n: int, plan: tuple | None = None) -> tuple[int, int, int, int]:
    """(rows, num_warps, programs_per_sm, stages) for rows of width ``n``: ``plan`` or the default."""
    return plan or (max(1, 4096 // next_power_of_two(n)), *DEFAULT_FORWARD_PLAN)


def persistent_forward_grid(M: int, N: int, sm_count: int = DEFAULT_SM_COUNT, plan: tuple | None = None) -> dict:
    rows, num_warps, per_sm, _ = forward_plan(N, plan)
    tiles = -(-M // rows)
    programs = max(1, min(tiles, sm_count * per_sm))
    return {"programs": programs, "rows_per_program": -(-tiles // programs) * rows, "block": next_power_of_two(N),
            "num_warps": num_warps, "kernel": "persistent"}


def forward_stages(rows: int, block: int, element_size: int, per_sm: int, stages: int) -> int:
    while stages > 1 and stages * rows * block * element_size * per_sm > SHARED_MEMORY_BUDGET:
        stages -= 1
    return stages


def persistent_forward(args: tuple, eps: float, plan: tuple | None = None) -> None:
    """Launch the persistent forward on ``args`` = (x2d, w, y2d, rstd) as `rmsnorm_forward` prepared them."""
    x2d, _, y2d, _ = args
    m, n = x2d.shape
    rows, num_warps, per_sm, stages = forward_plan(n, plan)
    block = next_power_of_two(n)
    programs = max(1, min(-(-m // rows), device_sm_count(x2d.device) * per_sm))
    fast(rmsnorm_fwd_persistent_kernel)[(programs,)](
        *args, m, x2d.stride(0), y2d.stride(0), n, eps, ROWS=rows, BLOCK=block,
        NUM_STAGES=forward_stages(rows, block, x2d.element_size(), per_sm, stages), num_warps=num_warps,
    )


@triton.jit
def load_half(ROW, cols, N, EVICTION: tl.constexpr):
    return tl.load(ROW + cols, mask=cols < N, other=0.0, eviction_policy=EVICTION).to(tl.float32)


@triton.jit
def rmsnorm_bwd_persistent_halves_kernel(X, DY, W, RSTD, DX, PARTIAL, M, N, stride_x, stride_dy, stride_dx,
                                         HALF: tl.constexpr, NUM_STAGES: tl.constexpr, USE_PDL: tl.constexpr):
    """One row at a time in two column halves and two passes: pass 1 reads x and dy (kept in L2:
    ``evict_last``), adds dy·x·rstd to the dγ partial and forms Σγ·dy·x; pass 2 reads them again (L2 hits,
    ``evict_first``) to write dx. The two eviction hints also keep the compiler from merging the two reads
    into one value held across the passes, which is the register pressure this kernel exists to avoid."""
    allow_dependent_launch(USE_PDL)
    pid = tl.program_id(0)
    lo = tl.arange(0, HALF)
    hi = HALF + lo
    w_lo = load_half(W, lo, N, "evict_last")
    w_hi = load_half(W, hi, N, "evict_last")
    acc_lo = tl.zeros([HALF], dtype=tl.float32)
    acc_hi = tl.zeros([HALF], dtype=tl.float32)
    for row in tl.range(pid, M, tl.num_programs(0), num_stages=NUM_STAGES):
        row64 = tl.cast(row, tl.int64)
        x_row = X + row64 * stride_x
        dy_row = DY + row64 * stride_dy
        dx_row = DX + row64 * stride_dx
        rstd = tl.load(RSTD + row)
        x = load_half(x_row, lo, N, "evict_last")
        dy = load_half(dy_row, lo, N, "evict_last")
        acc_lo += dy * x * rstd
        dot = tl.sum(w_lo * dy * x, axis=0)
        x = load_half(x_row, hi, N, "evict_last")
        dy = load_half(dy_row, hi, N, "evict_last")
        acc_hi += dy * x * rstd
        dot += tl.sum(w_hi * dy * x, axis=0)
        c = rstd * rstd * rstd * dot / N
        x = load_half(x_row, lo, N, "evict_first")
        dy = load_half(dy_row, lo, N, "evict_first")
        tl.store(dx_row + lo, (rstd * w_lo * dy - x * c).to(DX.dtype.element_ty), mask=lo < N)
        x = load_half(x_row, hi, N, "evict_first")
        dy = load_half(dy_row, hi, N, "evict_first")
        tl.store(dx_row + hi, (rstd * w_hi * dy - x * c).to(DX.dtype.element_ty), mask=hi < N)
    partial_row = PARTIAL + pid.to(tl.int64) * N
    tl.store(partial_row + lo, acc_lo, mask=lo < N)
    tl.store(partial_row + hi, acc_hi, mask=hi < N)
