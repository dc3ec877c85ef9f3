"""The fused RMSNorm forward in Triton: x read once, fp32 accumulation, y in x's dtype, per-row fp32 rstd
kept for the backward.

    rstd = 1 / sqrt(mean(x²) + eps)          y = x · rstd · γ          (per row)

Two kernels behind one entry point, `rmsnorm_forward`; which one, and its rows and warps, is the configuration of
(N, M) on this GPU (`rmsnorm_kernels.kernel_config`: the tuned table's nearest entry, else the rule):

* ``rmsnorm_fwd_rows_kernel``: ROWS rows per program (several for short rows), each row held in registers as
  up to three power-of-two segments (`rmsnorm_kernels.segments.row_segments`: 5120 = 4096 + 1024, no padded
  8192-wide block);
* ``rmsnorm_fwd_chunked_kernel``: one program per row in two passes over CHUNK-wide pieces (Σx² first, the x
  loads kept in L2; then x read again, from L2, to write y): far fewer registers per thread than a whole row,
  so more programs per SM (TorchInductor's looped reduction does this for wide rows). With ``split`` (rows whose
  starts are not 16-byte aligned) each row is a head up to the next 16-byte boundary, a body of whole vectors
  loaded 16 bytes at a time, and a tail.

The registry's ``triton`` implementation is `rmsnorm_kernels/triton_rmsnorm.py`."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from rmsnorm_kernels import launch_plans
from rmsnorm_kernels.fast_launch import fast
from rmsnorm_kernels.kernel_config import ForwardConfig, config_for, row_layout
from rmsnorm_kernels.launch_plans import PlanCache
from rmsnorm_kernels.limits import MAX_N
from rmsnorm_kernels.poison import new_output
from rmsnorm_kernels.segments import (
    known_multiple,
    load_segment,
    load_vector,
    row_alignment,
    split_row,
    split_vector,
    store_segment,
)
from rmsnorm_kernels.triton_mode import arch
from rmsnorm_kernels.validation import validate_rmsnorm_inputs


@triton.jit
def normalize_row_segment(x, W, Y, rows, M, N, stride_y, rstd, ROW: tl.constexpr, K: tl.constexpr):
    """Store y = x·rstd·γ for segment K of ``rows`` (x: its fp32 values, still in registers)."""
    store_segment(Y, x * rstd[:, None] * load_vector(W, N, ROW, K)[None, :], rows, M, N, stride_y, ROW, K)


@triton.jit
def rmsnorm_fwd_rows_kernel(X, W, Y, RSTD, M, stride_x, stride_y, N, eps, ROWS: tl.constexpr, ROW: tl.constexpr):
    """ROWS rows per program (ROWS = 1: one row per program), each row as up to three power-of-two segments
    (``ROW``: `rmsnorm_kernels.segments.Segments.layout`), so no lane is spent on a padded block."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    x0 = load_segment(X, rows, M, N, stride_x, ROW, 0)
    squares = tl.sum(x0 * x0, axis=1)
    if ROW[1] > 0:
        x1 = load_segment(X, rows, M, N, stride_x, ROW, 1)
        squares += tl.sum(x1 * x1, axis=1)
    if ROW[2] > 0:
        x2 = load_segment(X, rows, M, N, stride_x, ROW, 2)
        squares += tl.sum(x2 * x2, axis=1)
    rstd = tl.rsqrt(squares / N + eps)
    normalize_row_segment(x0, W, Y, rows, M, N, stride_y, rstd, ROW, 0)
    if ROW[1] > 0:
        normalize_row_segment(x1, W, Y, rows, M, N, stride_y, rstd, ROW, 1)
    if ROW[2] > 0:
        normalize_row_segment(x2, W, Y, rows, M, N, stride_y, rstd, ROW, 2)
    tl.store(RSTD + rows, rstd, mask=rows < M)


@triton.jit
def rmsnorm_fwd_chunked_kernel(
    X, W, Y, RSTD, stride_x, stride_y, N: tl.constexpr, eps, CHUNK: tl.constexpr, ALIGN: tl.constexpr, VEC: tl.constexpr
):
    # N is a compile-time constant: the loop bounds are constants and, where CHUNK divides N, no load or store is
    # masked — +2…7 % at 4096 / 16384 × 6144 on the H200 against the same loop with N at run time (docs/NOTES.md)
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, CHUNK)
    if VEC > 0:
        # A row starting anywhere (odd N): its head up to the next VEC-element boundary and its tail, each under VEC
        # elements, go element by element; the body between them is whole vectors the compiler may load 16 bytes at
        # a time. x and y share the head: the launch gives them one stride and 16-byte aligned bases. γ's columns
        # shift with the head: its loads stay narrow (γ is in L2 after the first rows).
        start = row * stride_x
        head, body, edge_cols, edge_mask = split_row(start, N, VEC)
        x_row = X + tl.multiple_of(start + head, VEC)
        y_row = Y + tl.multiple_of(start + head, VEC)
        w_row = W + head
        x_edge = tl.load(X + start + edge_cols, mask=edge_mask, other=0.0).to(tl.float32)
        squares_edge = tl.sum(x_edge * x_edge, axis=0)
        limit = body
    else:
        x_row = X + row * known_multiple(stride_x, ALIGN)
        y_row = Y + row * known_multiple(stride_y, ALIGN)
        w_row = W
        squares_edge = 0.0
        limit = N
    squares = tl.zeros([CHUNK], dtype=tl.float32)
    for s in tl.range(0, N, CHUNK):
        if VEC == 0 and N % CHUNK == 0:
            x = tl.load(x_row + s + cols, eviction_policy="evict_last")
        else:
            x = tl.load(x_row + s + cols, mask=s + cols < limit, other=0.0, eviction_policy="evict_last")
        x = x.to(tl.float32)
        squares += x * x
    rstd = tl.rsqrt((tl.sum(squares, axis=0) + squares_edge) / N + eps)
    for s in tl.range(0, N, CHUNK):
        if VEC == 0 and N % CHUNK == 0:
            x = tl.load(x_row + s + cols, eviction_policy="evict_first").to(tl.float32)
            w = tl.load(w_row + s + cols, eviction_policy="evict_last").to(tl.float32)
            tl.store(y_row + s + cols, (x * rstd * w).to(Y.dtype.element_ty))
        else:
            mask = s + cols < limit
            x = tl.load(x_row + s + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
            w = tl.load(w_row + s + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
            tl.store(y_row + s + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=mask)
    if VEC > 0:
        w_edge = tl.load(W + edge_cols, mask=edge_mask, other=0.0).to(tl.float32)
        tl.store(Y + start + edge_cols, (x_edge * rstd * w_edge).to(Y.dtype.element_ty), mask=edge_mask)
    tl.store(RSTD + row, rstd)


def as_rows(x: torch.Tensor) -> torch.Tensor:
    """``x`` as a 2-D [M, N] tensor whose rows are unit-stride (a view when possible, else a copy)."""
    if x.dim() == 2 and x.stride(-1) == 1:
        return x
    x2d = x.reshape(-1, x.shape[-1])
    if x2d.stride(-1) != 1:
        x2d = x2d.contiguous()
    return x2d


def forward_config(m: int, n: int, device) -> ForwardConfig:
    """The forward's configuration for [m, n] rows on ``device`` (`rmsnorm_kernels.kernel_config`)."""
    return config_for("fwd", n, m, arch(device))


def forward_launch(M: int, N: int, sm_count: int = 0, config: ForwardConfig | None = None) -> dict:
    """The forward's grid: one program per ROWS rows (the SM count plays no part)."""
    config = config or config_for("fwd", N, M)
    width = row_layout(config, N).padded
    return {
        "programs": -(-M // config.rows),
        "rows_per_program": config.rows,
        "partial_rows": 0,
        "block": config.chunk or width,
        "num_warps": config.num_warps,
        "kernel": "chunked" if config.kernel == "chunked" else "one-row" if config.rows == 1 else "multi-row",
    }


def rmsnorm_forward(
    x: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    *,
    config: ForwardConfig | None = None,
    need_rstd: bool = True,
):
    """Run the forward. Returns ``(y, x2d, rstd)``: y shaped like x in x's dtype, x as [M, N] rows (what
    the backward reads) and the per-row fp32 rstd [M]. ``config`` overrides the configuration in force (the tuner).

    A contiguous x with the configuration in force runs as a launch plan (`rmsnorm_kernels.launch_plans`): recorded
    on the first complete call of its (shape, strides, dtypes, device, eps), replayed after. ``need_rstd=False`` (no
    backward will read it: inference) lets a replay write rstd into a kept scratch buffer instead of a fresh one
    and return None for it (one allocation less)."""
    if config is None and launch_plans.ENABLED and x.is_contiguous() and not ((x.data_ptr() | weight.data_ptr()) & 15):
        x2d = x if x.dim() == 2 else x.view(-1, x.shape[-1])
        key = forward_key(x2d, weight, eps)
        plans = FORWARD_PLANS if need_rstd else FORWARD_PLANS_NO_RSTD
        y2d, rstd = plans.call(key, (x2d, weight), _forward_rows, eps)
        return (y2d if x2d is x else y2d.view(x.shape)), x2d, rstd
    return _forward(x, weight, eps, config)


def forward_key(x2d: torch.Tensor, weight: torch.Tensor, eps: float) -> tuple:
    """The launch-plan key of a forward of contiguous rows ``x2d`` with γ ``weight``."""
    return (x2d.shape, x2d.dtype, weight.shape, weight.stride(), weight.dtype, x2d.get_device(), eps)


FORWARD_PLANS = PlanCache()
FORWARD_PLANS_NO_RSTD = PlanCache(discard=(1,))
"""The same forwards for callers that drop rstd (``need_rstd=False``)."""


def _forward_rows(x2d, weight, eps):
    """The full host path of a forward of rows (what `FORWARD_PLANS` records)."""
    y2d, _, rstd = _forward(x2d, weight, eps, None)
    return y2d, rstd


def _forward(x, weight, eps, config):
    n = validate_rmsnorm_inputs(x, weight, eps, max_n=MAX_N)
    x2d = as_rows(x)
    w = weight if weight.is_contiguous() else weight.contiguous()
    m = x2d.shape[0]
    config = config or forward_config(m, n, x.device)
    y2d = new_output((m, n), x.dtype, x.device)
    rstd = new_output((m,), torch.float32, x.device)
    strides = (x2d.stride(0), y2d.stride(0))
    if config.kernel == "chunked":
        align = row_alignment(n, strides, x2d.element_size())
        vec = split_vector(x2d, y2d) if config.split else 0  # 0: the same answer unsplit
        fast(rmsnorm_fwd_chunked_kernel)[(m,)](
            x2d, w, y2d, rstd, *strides, n, eps, CHUNK=config.chunk, ALIGN=align, VEC=vec, num_warps=config.num_warps
        )
    else:
        layout = row_layout(config, n, strides, x2d.element_size()).layout()
        fast(rmsnorm_fwd_rows_kernel)[(-(-m // config.rows),)](
            x2d, w, y2d, rstd, m, *strides, n, eps, ROWS=config.rows, ROW=layout, num_warps=config.num_warps
        )
    return (y2d if x.dim() == 2 else y2d.view(x.shape)), x2d, rstd
