"""The fused RMSNorm forward in Triton: x read once, fp32 accumulation, y in x's dtype, per-row fp32 rstd
kept for the backward.

Two kernels behind one entry point, `rmsnorm_forward`, dispatched by row width (`forward_kind`; the
registry's ``triton`` implementation is `rmsnorm_kernels/triton_rmsnorm.py`):

* ``rmsnorm_fwd_rows_kernel``: ROWS rows per program, each row held as up to three power-of-two segments
  (`rmsnorm_kernels.segments.row_segments`: 5120 = 4096 + 1024, no padded 8192-wide block). Two autotuners share it:
  the one-row one (ROWS = 1) over num_warps, whose prune hook `prune_row_configs` keeps the warp counts that
  give each thread enough of the row, and the multi-row one for short rows (ROWS × warps,
  `prune_multi_row_configs`), where one row alone is too little work for a program;
* ``rmsnorm_fwd_chunked_kernel``: one program per row in two passes over CHUNK-wide pieces (Σx² first,
  the x loads kept in L2; then x read again, from L2, to write y), autotuned over CHUNK × num_warps with the
  chunks that pad the row least (`prune_chunked_configs`): far fewer registers per thread than a whole row,
  so more programs per SM (TorchInductor's looped reduction does this for wide rows);
* and, for the tuning scripts only, the persistent forward of `rmsnorm_kernels.experimental` (``kernel="persistent"``
  or a ``plan``): measured slower, not dispatched to.

The autotuners key on N and the size class of M (`size_class`: the best tile for 4096 rows is not the
best for 65536). Each runs once per (N, size class, dtypes, device); later calls launch its choice
directly (its per-call bookkeeping is host time every call would pay). Under Triton's interpreter the
autotuner is bypassed (it would time every config on the CPU): the first config the prune hook keeps is
launched directly.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from rmsnorm_kernels import launch_plans
from rmsnorm_kernels.fast_launch import fast
from rmsnorm_kernels.launch_plans import PlanCache
from rmsnorm_kernels.launch_record import note_unrecordable
from rmsnorm_kernels.poison import new_output
from rmsnorm_kernels.segments import Segments, load_segment, next_power_of_two, row_segments
from rmsnorm_kernels.triton_mode import interpreting
from rmsnorm_kernels.experimental import persistent_forward, persistent_forward_grid
from rmsnorm_kernels.limits import DEFAULT_SM_COUNT, MAX_N
from rmsnorm_kernels.validation import validate_rmsnorm_inputs

ROW_WARPS = (4, 8, 16, 32)
ROW_PER_THREAD = 4  # fewest elements per thread a one-row config may give (fewer: idle lanes)
MULTI_ROW_ROWS = (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
MULTI_ROW_TILES = (1024, 2048, 4096, 8192, 16384)  # elements per program (ROWS × padded row)
MULTI_ROW_WARPS = (1, 2, 4, 8)
MULTI_ROW_PER_THREAD = (4, 64)  # elements per thread a multi-row config may give (fewer: idle lanes; more: spills)
CHUNKS = (256, 512, 1024, 2048, 4096)
CHUNK_WARPS = (4, 8, 16)
CHUNK_PADDING = 1 / 16
"""A chunk size is tried only if ⌈N / chunk⌉ chunks overshoot N by at most this (or it overshoots least)."""


def padded_width(named_args, kwargs) -> int:
    """The row as the kernel holds it: the sum of its segments (W0 + W1 + W2)."""
    got = {**named_args, **kwargs}
    if "W0" in got:
        return int(got["W0"]) + int(got.get("W1", 0)) + int(got.get("W2", 0))
    return row_segments(int(got["N"])).padded


def prune_row_configs(configs, named_args, **kwargs):
    """``early_config_prune`` hook of the one-row kernel: keep the warp counts that give every thread at least
    ROW_PER_THREAD elements of the (segmented) row; the fewest warps if none does."""
    width = padded_width(named_args, kwargs)
    kept = [c for c in configs if width // (32 * c.num_warps) >= ROW_PER_THREAD]
    return kept or [min(configs, key=lambda c: c.num_warps)]


def size_class(m: int) -> int:
    """M in powers of four (4096 → 6, 16384 → 7, 65536 → 8): part of every forward autotuning key."""
    return max(0, int(m).bit_length() - 1) // 2


def prune_chunked_configs(configs, named_args, **kwargs):
    """Keep the chunks narrower than the row whose ⌈N / CHUNK⌉ chunks pad the row least (within CHUNK_PADDING
    of N): 2560 = 5 × 512 or 10 × 256, not 3 × 1024."""
    n = int(named_args["N"])
    narrower = [c for c in configs if c.kwargs["CHUNK"] < n] or [c for c in configs if c.kwargs["CHUNK"] == min(CHUNKS)]
    overshoot = {c.kwargs["CHUNK"]: -(-n // c.kwargs["CHUNK"]) * c.kwargs["CHUNK"] - n for c in narrower}
    least = min(overshoot.values())
    return [c for c in narrower if overshoot[c.kwargs["CHUNK"]] <= max(least, n * CHUNK_PADDING)]


def prune_multi_row_configs(configs, named_args, **kwargs):
    """Keep the multi-row tiles of ROWS whole (segmented) rows that make one of MULTI_ROW_TILES and give each
    thread 4…64 elements."""
    width = next_power_of_two(padded_width(named_args, kwargs))
    low, high = MULTI_ROW_PER_THREAD
    kept = [c for c in configs if c.kwargs["ROWS"] * width in MULTI_ROW_TILES
            and low <= c.kwargs["ROWS"] * width // (32 * c.num_warps) <= high]
    return kept or [configs[0]]


ROW_CONFIGS = [triton.Config({"ROWS": 1}, num_warps=w) for w in ROW_WARPS]
CHUNKED_CONFIGS = [triton.Config({"CHUNK": c}, num_warps=w) for c in CHUNKS for w in CHUNK_WARPS]
MULTI_ROW_CONFIGS = [triton.Config({"ROWS": r}, num_warps=w) for r in MULTI_ROW_ROWS for w in MULTI_ROW_WARPS]


@triton.jit
def normalize_row_segment(x, W, Y, rows, M, N, stride_y, rstd, OFF: tl.constexpr, W_: tl.constexpr,
                          MASKED: tl.constexpr):
    """Store y = x·rstd·γ for one segment of ``rows`` (x: its fp32 [ROWS, W_] values, still in registers)."""
    cols = OFF + tl.arange(0, W_)
    if MASKED:
        w = tl.load(W + cols, mask=cols < N, other=0.0).to(tl.float32)
        mask = (rows < M)[:, None] & (cols < N)[None, :]
    else:
        w = tl.load(W + cols).to(tl.float32)
        mask = (rows < M)[:, None]
    y = x * rstd[:, None] * w[None, :]
    tl.store(Y + rows.to(tl.int64)[:, None] * stride_y + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def rmsnorm_fwd_rows_kernel(X, W, Y, RSTD, M, stride_x, stride_y, N, eps, SIZE_CLASS, ROWS: tl.constexpr,
                            W0: tl.constexpr, W1: tl.constexpr, W2: tl.constexpr, MASK0: tl.constexpr,
                            MASK1: tl.constexpr, MASK2: tl.constexpr):
    """ROWS rows per program (ROWS = 1: one row per program), each row as up to three power-of-two segments
    (`rmsnorm_kernels.segments.row_segments`), so no lane is spent on a padded block."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    x0 = load_segment(X, rows, M, N, stride_x, 0, W0, MASK0)
    squares = tl.sum(x0 * x0, axis=1)
    if W1 > 0:
        x1 = load_segment(X, rows, M, N, stride_x, W0, W1, MASK1)
        squares += tl.sum(x1 * x1, axis=1)
    if W2 > 0:
        x2 = load_segment(X, rows, M, N, stride_x, W0 + W1, W2, MASK2)
        squares += tl.sum(x2 * x2, axis=1)
    rstd = tl.rsqrt(squares / N + eps)
    normalize_row_segment(x0, W, Y, rows, M, N, stride_y, rstd, 0, W0, MASK0)
    if W1 > 0:
        normalize_row_segment(x1, W, Y, rows, M, N, stride_y, rstd, W0, W1, MASK1)
    if W2 > 0:
        normalize_row_segment(x2, W, Y, rows, M, N, stride_y, rstd, W0 + W1, W2, MASK2)
    tl.store(RSTD + rows, rstd, mask=rows < M)


@triton.jit
def rmsnorm_fwd_chunked_kernel(X, W, Y, RSTD, stride_x, stride_y, N: tl.constexpr, eps, SIZE_CLASS,
                               CHUNK: tl.constexpr):
    # N is a compile-time constant (one compiled kernel per width, as the autotuner keys on N anyway): the loop
    # bounds are constants and, where CHUNK divides N, no load or store is masked — +2…7 % at 4096 / 16384 ×
    # 6144 on the H200 against the same loop with N at run time (bench/probe_forward_static.py, bench/NOTES.md)
    row = tl.program_id(0).to(tl.int64)
    x_row = X + row * stride_x
    y_row = Y + row * stride_y
    cols = tl.arange(0, CHUNK)
    squares = tl.zeros([CHUNK], dtype=tl.float32)
    for start in tl.range(0, N, CHUNK):
        if N % CHUNK == 0:
            x = tl.load(x_row + start + cols, eviction_policy="evict_last")
        else:
            x = tl.load(x_row + start + cols, mask=start + cols < N, other=0.0, eviction_policy="evict_last")
        x = x.to(tl.float32)
        squares += x * x
    rstd = tl.rsqrt(tl.sum(squares, axis=0) / N + eps)
    for start in tl.range(0, N, CHUNK):
        if N % CHUNK == 0:
            x = tl.load(x_row + start + cols, eviction_policy="evict_first").to(tl.float32)
            w = tl.load(W + start + cols, eviction_policy="evict_last").to(tl.float32)
            tl.store(y_row + start + cols, (x * rstd * w).to(Y.dtype.element_ty))
        else:
            mask = start + cols < N
            x = tl.load(x_row + start + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
            w = tl.load(W + start + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
            tl.store(y_row + start + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=mask)
    tl.store(RSTD + row, rstd)


rmsnorm_fwd_row_tuned = triton.autotune(
    configs=ROW_CONFIGS, key=["N", "SIZE_CLASS"], prune_configs_by={"early_config_prune": prune_row_configs}
)(rmsnorm_fwd_rows_kernel)

rmsnorm_fwd_rows_tuned = triton.autotune(
    configs=MULTI_ROW_CONFIGS, key=["N", "SIZE_CLASS"],
    prune_configs_by={"early_config_prune": prune_multi_row_configs},
)(rmsnorm_fwd_rows_kernel)

rmsnorm_fwd_chunked_tuned = triton.autotune(
    configs=CHUNKED_CONFIGS, key=["N", "SIZE_CLASS"], prune_configs_by={"early_config_prune": prune_chunked_configs}
)(rmsnorm_fwd_chunked_kernel)


def as_rows(x: torch.Tensor) -> torch.Tensor:
    """``x`` as a 2-D [M, N] tensor whose rows are unit-stride (a view when possible, else a copy)."""
    if x.dim() == 2 and x.stride(-1) == 1:
        return x
    x2d = x.reshape(-1, x.shape[-1])
    if x2d.stride(-1) != 1:
        x2d = x2d.contiguous()
    return x2d


FORWARD_PLAN = {
    # power of two ≥ N: "one-row" | "multi-row" | "chunked" (autotuned) | (rows, num_warps, programs_per_sm,
    # stages) for the persistent kernel. Measured on the H200, bf16, 2026-12-02, all three beside each other at
    # M 4096 … 65536 (bench/NOTES.md, "third device session"): chunked wins at 2048 … 8192, one-row at ≥ 16384.
    **{b: "multi-row" for b in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)},
    2048: "chunked",
    4096: "chunked",
    8192: "chunked",
    **{1 << p: "one-row" for p in range(14, 17)},
}
FORWARD_WIDTHS: dict = {
    # exact N (model hidden sizes): the best of bench/probe_widths.py on the H200, bf16, M 16384 and 65536,
    # 2026-12-02 (results/probe-widths-h200-2026-12-02.json; bench/NOTES.md, "model widths").
    2304: "one-row",
    2560: "one-row",
    2880: "one-row-padded",
    3584: "one-row-padded",
    4608: "one-row",
    5120: "one-row",
    7168: "one-row-padded",
    12288: "chunked",
}
"""Exact row widths whose best kernel differs from their power of two's (FORWARD_PLAN's values, or
"one-row-padded": the one-row kernel with the row in one masked power-of-two block)."""


def forward_kind(n: int):
    return FORWARD_WIDTHS.get(int(n)) or FORWARD_PLAN[next_power_of_two(n)]


def forward_launch(M: int, N: int, sm_count: int = DEFAULT_SM_COUNT) -> dict:
    """The forward's grid (as far as it is known before autotuning picks num_warps)."""
    width = row_segments(N).padded
    kind = forward_kind(N)
    if kind == "multi-row":
        rows = max(1, 4096 // next_power_of_two(width))
        return {"programs": -(-M // rows), "rows_per_program": rows, "partial_rows": 0, "block": width,
                "kernel": "multi-row"}
    if kind in ("one-row", "one-row-padded", "chunked"):
        if kind == "one-row-padded":
            kind, width = "one-row", next_power_of_two(N)
        return {"programs": M, "rows_per_program": 1, "partial_rows": 0, "block": width, "kernel": kind}
    return {**persistent_forward_grid(M, N, sm_count, kind), "partial_rows": 0}


_CHOSEN_CONFIGS: dict = {}
"""(kernel, N, size class, segments, dtypes, device) → the autotuner's choice, launched directly from the
second call on."""


def _launch_tuned(kind, tuned, raw, grid, args, n, m, **constants):
    """Launch ``raw`` with the autotuner's choice for (kind, N, size class of M, segments, dtypes, device): the
    first call runs the autotuner (``tuned``), later ones launch its choice directly. Under the interpreter
    the autotuner would time every config on the CPU, so the first config its prune hook keeps is used."""
    if interpreting():
        note_unrecordable()
        prune = tuned.early_config_prune
        config = prune(tuned.configs, {"N": n}, **constants)[0]
        raw[grid(config.kwargs)](*args, **constants, **config.kwargs)
        return
    key = (kind, n, size_class(m), tuple(sorted(constants.items())), args[0].dtype, args[1].dtype, args[0].device)
    config = _CHOSEN_CONFIGS.get(key)
    if config is None:
        note_unrecordable()  # the autotuner times every config: not a call to replay
        tuned[grid](*args, **constants)
        _CHOSEN_CONFIGS[key] = tuned.best_config
        return
    fast(raw)[grid(config.kwargs)](*args, **constants, **config.kwargs, num_warps=config.num_warps,
                                   num_stages=config.num_stages)


def rmsnorm_forward(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, *, kernel: str = "auto",
                    plan: tuple | None = None, padded: bool = False, need_rstd: bool = True):
    """Run the forward. Returns ``(y, x2d, rstd)``: y shaped like x in x's dtype, x as [M, N] rows (what
    the backward reads) and the per-row fp32 rstd [M]. ``kernel`` ("auto", "one-row", "multi-row", "chunked",
    "persistent") and ``plan`` (rows, num_warps, programs_per_sm, stages) override the tuned dispatch, and
    ``padded`` holds each row in one power-of-two block instead of its segments (for tuning scripts).

    The default dispatch of a contiguous x runs as a launch plan (`rmsnorm_kernels.launch_plans`): recorded on the
    first complete call of its (shape, strides, dtypes, device, eps), replayed after. ``need_rstd=False`` (no
    backward will read it: inference) lets a replay write rstd into a kept scratch buffer instead of a fresh one
    and return None for it (one allocation less)."""
    if kernel == "auto" and plan is None and not padded and launch_plans.ENABLED and x.is_contiguous() \
            and not ((x.data_ptr() | weight.data_ptr()) & 15):
        x2d = x if x.dim() == 2 else x.view(-1, x.shape[-1])
        key = forward_key(x2d, weight, eps)
        plans = FORWARD_PLANS if need_rstd else FORWARD_PLANS_NO_RSTD
        y2d, rstd = plans.call(key, (x2d, weight), _forward_rows, eps)
        return (y2d if x2d is x else y2d.view(x.shape)), x2d, rstd
    return _forward(x, weight, eps, kernel, plan, padded)


def forward_key(x2d: torch.Tensor, weight: torch.Tensor, eps: float) -> tuple:
    """The launch-plan key of a default-dispatch forward of contiguous rows ``x2d`` with γ ``weight``."""
    return (x2d.shape, x2d.dtype, weight.shape, weight.stride(), weight.dtype, x2d.get_device(), eps)


FORWARD_PLANS = PlanCache()
FORWARD_PLANS_NO_RSTD = PlanCache(discard=(1,))
"""The same forwards for callers that drop rstd (``need_rstd=False``)."""


def _forward_rows(x2d, weight, eps):
    """The full host path of a default-dispatch forward of rows (what `FORWARD_PLANS` records)."""
    y2d, _, rstd = _forward(x2d, weight, eps, "auto", None, False)
    return y2d, rstd


def _forward(x, weight, eps, kernel, plan, padded):
    n = validate_rmsnorm_inputs(x, weight, eps, max_n=MAX_N)
    x2d = as_rows(x)
    w = weight if weight.is_contiguous() else weight.contiguous()
    m = x2d.shape[0]
    y2d = new_output((m, n), x.dtype, x.device)
    rstd = new_output((m,), torch.float32, x.device)
    args = (x2d, w, y2d, rstd)
    kind = forward_kind(n) if kernel == "auto" else (plan or kernel)
    if kind == "one-row-padded":
        kind, padded = "one-row", True
    if kind == "persistent" or isinstance(kind, tuple):
        persistent_forward(args, eps, None if kind == "persistent" else kind)
    elif kind == "chunked":
        _launch_tuned(kind, rmsnorm_fwd_chunked_tuned, rmsnorm_fwd_chunked_kernel, lambda meta: (m,),
                      (*args, x2d.stride(0), y2d.stride(0), n, eps, size_class(m)), n, m)
    else:
        segments = Segments(next_power_of_two(n), 0, 0, n) if padded else row_segments(n)
        tuned = rmsnorm_fwd_rows_tuned if kind == "multi-row" else rmsnorm_fwd_row_tuned
        _launch_tuned(kind, tuned, rmsnorm_fwd_rows_kernel, lambda meta: (-(-m // meta["ROWS"]),),
                      (*args, m, x2d.stride(0), y2d.stride(0), n, eps, size_class(m)), n, m,
                      **segments.constants())
    return (y2d if x.dim() == 2 else y2d.view(x.shape)), x2d, rstd
