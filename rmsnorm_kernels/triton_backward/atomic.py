"""dγ strategy ``triton-atomic`` (the seed design): one program per tile of rows (one row for N ≥ 4096);
each computes dx and ``tl.atomic_add``s its dγ partial into one shared fp32 N-vector. Every program hits the
same N addresses, so the adds contend, and their order varies from run to run: dγ is NOT bit-reproducible.

One launch per backward: each program then takes a ticket from a counter; the program that takes the last one
(every other program's adds are in the vector by then) writes dγ in γ's dtype and leaves the vector and the
counter zero again. So the accumulator is a buffer a launch plan may keep for the next call on its stream
(`new_zeros(kept=True)`): no zero-fill launch and no cast launch per call (issue 16's host time)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from rmsnorm_kernels.families import BackwardFamily
from rmsnorm_kernels.fast_launch import fast
from rmsnorm_kernels.poison import new_output, new_zeros
from rmsnorm_kernels.triton_backward.dx import backward_tile, load_weight_segments, rmsnorm_bwd_rows


@triton.jit
def atomic_add_segment(ACC, value, N, OFF: tl.constexpr, W: tl.constexpr, MASKED: tl.constexpr):
    cols = OFF + tl.arange(0, W)
    if MASKED:
        tl.atomic_add(ACC + cols, value, mask=cols < N)
    else:
        tl.atomic_add(ACC + cols, value)


@triton.jit
def drain_segment(ACC, DW, N, OFF: tl.constexpr, W: tl.constexpr):
    """dγ of one segment from the accumulator, which is left zero. The read is an atomic add of zero: it reads
    the value at the point of coherence, where every program's adds were made."""
    cols = OFF + tl.arange(0, W)
    mask = cols < N
    total = tl.atomic_add(ACC + cols, tl.zeros([W], tl.float32), mask=mask)
    tl.store(ACC + cols, tl.zeros([W], tl.float32), mask=mask)
    tl.store(DW + cols, total.to(DW.dtype.element_ty), mask=mask)


@triton.jit
def rmsnorm_bwd_atomic_kernel(X, DY, W, RSTD, DX, DW, ACC, TICKETS, M, N, stride_x, stride_dy, stride_dx,
                              ROWS: tl.constexpr, W0: tl.constexpr, W1: tl.constexpr, W2: tl.constexpr,
                              MASK0: tl.constexpr, MASK1: tl.constexpr, MASK2: tl.constexpr):
    """dx of a tile of rows; dγ added into ACC (fp32 [N], zero on entry); the program with the last ticket writes
    DW (γ's dtype) from ACC and sets ACC and TICKETS (int32 [1]) back to zero."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    w0, w1, w2 = load_weight_segments(W, N, W0, W1, W2, MASK0, MASK1, MASK2)
    d0, d1, d2 = rmsnorm_bwd_rows(X, DY, DX, RSTD, w0, w1, w2, 0.0, 0.0, 0.0, rows, M, N, stride_x, stride_dy,
                                  stride_dx, W0, W1, W2, MASK0, MASK1, MASK2)
    atomic_add_segment(ACC, tl.sum(d0, axis=0), N, 0, W0, MASK0)
    if W1 > 0:
        atomic_add_segment(ACC, tl.sum(d1, axis=0), N, W0, W1, MASK1)
    if W2 > 0:
        atomic_add_segment(ACC, tl.sum(d2, axis=0), N, W0 + W1, W2, MASK2)
    tl.debug_barrier()  # every thread's adds are made before the ticket (acq_rel, GPU scope) releases them
    ticket = tl.atomic_add(TICKETS, 1)
    if ticket == tl.num_programs(0) - 1:
        drain_segment(ACC, DW, N, 0, W0)
        if W1 > 0:
            drain_segment(ACC, DW, N, W0, W1)
        if W2 > 0:
            drain_segment(ACC, DW, N, W0 + W1, W2)
        tl.atomic_xchg(TICKETS, 0)


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
    tile = backward_tile(N)
    return {"programs": -(-M // tile.rows), "rows_per_program": tile.rows, "block": tile.block,
            "num_warps": tile.num_warps}


def atomic_backward(dy2d, x2d, weight, rstd, *, tile=None):
    """(dx, dγ in γ's dtype) in one launch. The fp32 accumulator and the ticket counter are zero-filled here and
    left zero by the kernel: a launch plan keeps them for the stream's next call."""
    m, n = x2d.shape
    tile = tile or backward_tile(n)
    dx = new_output(x2d.shape, x2d.dtype, x2d.device)
    dw = new_output((n,), weight.dtype, x2d.device)
    acc = new_zeros((n,), torch.float32, x2d.device, kept=True)
    tickets = new_zeros((1,), torch.int32, x2d.device, kept=True)
    fast(rmsnorm_bwd_atomic_kernel)[(-(-m // tile.rows),)](
        x2d, dy2d, weight, rstd, dx, dw, acc, tickets, m, n, x2d.stride(0), dy2d.stride(0), dx.stride(0),
        ROWS=tile.rows, num_warps=tile.num_warps, **tile.segments(n).constants(),
    )
    return dx, dw
