"""The fused RMSNorm forward in Triton: x read once, fp32 accumulation, y in x's dtype, per-row fp32 rstd
kept for the backward.

Three kernels behind one entry point, `rmsnorm_forward`, dispatched by shape (the registry's ``triton``
implementation is `kernels/triton_rmsnorm.py`):

* ``rmsnorm_fwd_row_kernel``: one program per row, the row in one BLOCK (a power of two ≥ N), autotuned
  over BLOCK × num_warps keyed on N; the prune hook `prune_row_configs` keeps only blocks that hold the row;
* ``rmsnorm_fwd_rows_kernel``: several rows per program (a [ROWS, BLOCK] tile) for short rows
  (per `FORWARD_PLAN`), where one row alone is too little work for a program;
* ``rmsnorm_fwd_chunked_kernel``: one program per row in two passes over CHUNK-wide pieces (Σx² first,
  the x loads kept in L2; then x read again, from L2, to write y), autotuned over CHUNK × num_warps: far
  fewer registers per thread than a whole row, so more programs per SM (TorchInductor's looped reduction
  does this for wide rows);
* ``rmsnorm_fwd_persistent_kernel``: SM count × k programs striding over [ROWS, BLOCK] tiles, the next
  tile's loads software-pipelined (``tl.range(..., num_stages)``) behind the current one's math; used
  where `FORWARD_PLAN` says it measured faster.

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

from kernels.fast_launch import fast
from kernels.poison import new_output
from kernels.triton_mode import interpreting, sm_count
from kernels.validation import MAX_N, validate_rmsnorm_inputs

ROW_BLOCKS = tuple(2**p for p in range(9, 17))  # 512 … 65536
ROW_WARPS = (4, 8, 16)
MULTI_ROW_TILES = (1024, 2048, 4096, 8192, 16384)  # elements per program (ROWS × BLOCK)
MULTI_ROW_WARPS = (1, 2, 4, 8)
MULTI_ROW_PER_THREAD = (4, 64)  # elements per thread a multi-row config may give (fewer: idle lanes; more: spills)
CHUNKS = (1024, 2048, 4096)
CHUNK_WARPS = (4, 8, 16)


def next_power_of_two(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def prune_row_configs(configs, named_args, **kwargs):
    """``early_config_prune`` hook: drop every config whose BLOCK is narrower than the row (it would leave
    columns unnormalized), and every one wider than the narrowest that fits (masked-off lanes only)."""
    n = int(named_args["N"])
    fitting = [c for c in configs if c.kwargs["BLOCK"] >= n]
    if not fitting:
        raise ValueError(f"no forward config holds a row of N = {n} (widest block {max(ROW_BLOCKS)})")
    narrowest = min(c.kwargs["BLOCK"] for c in fitting)
    return [c for c in fitting if c.kwargs["BLOCK"] == narrowest]


def size_class(m: int) -> int:
    """M in powers of four (4096 → 6, 16384 → 7, 65536 → 8): part of every forward autotuning key."""
    return max(0, int(m).bit_length() - 1) // 2


def prune_chunked_configs(configs, named_args, **kwargs):
    """Keep the chunks narrower than the row's block (a chunk as wide as the row is the one-row kernel)."""
    block = next_power_of_two(named_args["N"])
    kept = [c for c in configs if c.kwargs["CHUNK"] < block]
    return kept or [c for c in configs if c.kwargs["CHUNK"] == min(CHUNKS)]


def prune_multi_row_configs(configs, named_args, **kwargs):
    """Keep the multi-row tiles that hold at least one whole row of BLOCK = next power of two ≥ N, and give
    each thread 4…64 elements."""
    block = kwargs.get("BLOCK") or named_args.get("BLOCK") or next_power_of_two(named_args["N"])
    low, high = MULTI_ROW_PER_THREAD
    kept = [c for c in configs if c.kwargs["ROWS"] * block in MULTI_ROW_TILES
            and low <= c.kwargs["ROWS"] * block // (32 * c.num_warps) <= high]
    return kept or [configs[0]]


ROW_CONFIGS = [triton.Config({"BLOCK": b}, num_warps=w) for b in ROW_BLOCKS for w in ROW_WARPS]
CHUNKED_CONFIGS = [triton.Config({"CHUNK": c}, num_warps=w) for c in CHUNKS for w in CHUNK_WARPS]
MULTI_ROW_CONFIGS = [
    triton.Config({"ROWS": r}, num_warps=w) for r in (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024) for w in MULTI_ROW_WARPS
]


@triton.jit
def rmsnorm_fwd_row_kernel(X, W, Y, RSTD, stride_x, stride_y, N, eps, SIZE_CLASS, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(X + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(Y + row * stride_y + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=mask)
    tl.store(RSTD + row, rstd)


@triton.jit
def rmsnorm_fwd_rows_kernel(X, W, Y, RSTD, M, stride_x, stride_y, N, eps, SIZE_CLASS, BLOCK: tl.constexpr,
                            ROWS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    row_mask = rows < M
    col_mask = cols < N
    mask = row_mask[:, None] & col_mask[None, :]
    rows64 = rows.to(tl.int64)
    x = tl.load(X + rows64[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=1) / N + eps)
    w = tl.load(W + cols, mask=col_mask, other=0.0).to(tl.float32)
    y = x * rstd[:, None] * w[None, :]
    tl.store(Y + rows64[:, None] * stride_y + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)
    tl.store(RSTD + rows, rstd, mask=row_mask)


@triton.jit
def rmsnorm_fwd_chunked_kernel(X, W, Y, RSTD, stride_x, stride_y, N, eps, SIZE_CLASS, CHUNK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = X + row * stride_x
    y_row = Y + row * stride_y
    cols = tl.arange(0, CHUNK)
    squares = tl.zeros([CHUNK], dtype=tl.float32)
    for start in tl.range(0, N, CHUNK):
        x = tl.load(x_row + start + cols, mask=start + cols < N, other=0.0, eviction_policy="evict_last")
        x = x.to(tl.float32)
        squares += x * x
    rstd = tl.rsqrt(tl.sum(squares, axis=0) / N + eps)
    for start in tl.range(0, N, CHUNK):
        mask = start + cols < N
        x = tl.load(x_row + start + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        w = tl.load(W + start + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
        tl.store(y_row + start + cols, (x * rstd * w).to(Y.dtype.element_ty), mask=mask)
    tl.store(RSTD + row, rstd)


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


rmsnorm_fwd_row_tuned = triton.autotune(
    configs=ROW_CONFIGS, key=["N", "SIZE_CLASS"], prune_configs_by={"early_config_prune": prune_row_configs}
)(rmsnorm_fwd_row_kernel)

rmsnorm_fwd_rows_tuned = triton.autotune(
    configs=MULTI_ROW_CONFIGS, key=["N", "BLOCK", "SIZE_CLASS"],
    prune_configs_by={"early_config_prune": prune_multi_row_configs},
)(rmsnorm_fwd_rows_kernel)

rmsnorm_fwd_chunked_tuned = triton.autotune(
    configs=CHUNKED_CONFIGS, key=["N", "SIZE_CLASS"], prune_configs_by={"early_config_prune": prune_chunked_configs}
)(rmsnorm_fwd_chunked_kernel)


def as_rows(x: torch.Tensor) -> torch.Tensor:
    """``x`` as a 2-D [M, N] tensor whose rows are unit-stride (a view when possible, else a copy)."""
    x2d = x.reshape(-1, x.shape[-1])
    if x2d.stride(-1) != 1:
        x2d = x2d.contiguous()
    return x2d


FORWARD_PLAN = {
    # block: "one-row" | "multi-row" | "chunked" (autotuned) | (rows, num_warps, programs_per_sm, stages) for the
    # persistent kernel. Measured on the H200, bf16, 2026-12-02, all three beside each other at M 4096 …
    # 65536 (bench/NOTES.md, "third device session"): chunked wins at 2048 … 8192, one-row at ≥ 16384.
    **{b: "multi-row" for b in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)},
    2048: "chunked",
    4096: "chunked",
    8192: "chunked",
    **{b: "one-row" for b in ROW_BLOCKS[ROW_BLOCKS.index(16384):]},
}


def forward_kind(n: int):
    return FORWARD_PLAN[next_power_of_two(n)]


def uses_multi_row(n: int) -> bool:
    return forward_kind(n) == "multi-row"


def forward_launch(M: int, N: int, sm_count: int = 132) -> dict:
    """The forward's grid (as far as it is known before autotuning picks num_warps)."""
    block = next_power_of_two(N)
    kind = forward_kind(N)
    if kind == "multi-row":
        rows = max(1, 4096 // block)
        return {"programs": -(-M // rows), "rows_per_program": rows, "partial_rows": 0, "block": block,
                "kernel": "multi-row"}
    if kind in ("one-row", "chunked"):
        return {"programs": M, "rows_per_program": 1, "partial_rows": 0, "block": max(block, ROW_BLOCKS[0]),
                "kernel": kind}
    rows, num_warps, per_sm, _ = kind
    tiles = -(-M // rows)
    programs = max(1, min(tiles, sm_count * per_sm))
    return {"programs": programs, "rows_per_program": -(-tiles // programs) * rows, "partial_rows": 0,
            "block": block, "num_warps": num_warps, "kernel": "persistent"}


_CHOSEN_CONFIGS: dict = {}
"""(kernel, N, BLOCK, dtypes, device) → the autotuner's choice, launched directly from the second call on."""


def _launch_tuned(kind, tuned, raw, grid, args, n, m, **constants):
    """Launch ``raw`` with the autotuner's choice for (kind, N, size class of M, BLOCK, dtypes, device): the
    first call runs the autotuner (``tuned``), later ones launch its choice directly. Under the interpreter
    the autotuner would time every config on the CPU, so the first config its prune hook keeps is used."""
    if interpreting():
        prune = tuned.early_config_prune
        config = prune(tuned.configs, {"N": n}, **constants)[0]
        raw[grid(config.kwargs)](*args, **constants, **config.kwargs)
        return
    key = (kind, n, size_class(m), constants.get("BLOCK"), args[0].dtype, args[1].dtype, args[0].device)
    config = _CHOSEN_CONFIGS.get(key)
    if config is None:
        tuned[grid](*args, **constants)
        _CHOSEN_CONFIGS[key] = tuned.best_config
        return
    fast(raw)[grid(config.kwargs)](*args, **constants, **config.kwargs, num_warps=config.num_warps,
                             num_stages=config.num_stages)


def _persistent_stages(rows: int, block: int, element_size: int, per_sm: int, stages: int) -> int:
    while stages > 1 and stages * rows * block * element_size * per_sm > 200 * 1024:
        stages -= 1
    return stages


def rmsnorm_forward(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, *, kernel: str = "auto",
                    plan: tuple | None = None):
    """Run the forward. Returns ``(y, x2d, rstd)``: y shaped like x in x's dtype, x as [M, N] rows (what
    the backward reads) and the per-row fp32 rstd [M]. ``kernel`` ("auto", "one-row", "multi-row", "chunked",
    "persistent") and ``plan`` (rows, num_warps, programs_per_sm, stages) override the tuned dispatch
    (for tuning scripts)."""
    n = validate_rmsnorm_inputs(x, weight, eps, max_n=MAX_N)
    x2d = as_rows(x)
    w = weight if weight.is_contiguous() else weight.contiguous()
    m = x2d.shape[0]
    y2d = new_output((m, n), x.dtype, x.device)
    rstd = new_output((m,), torch.float32, x.device)
    args = (x2d, w, y2d, rstd)
    block = next_power_of_two(n)
    kind = forward_kind(n) if kernel == "auto" else (plan or kernel)
    if kind == "persistent":
        kind = (max(1, 4096 // block), 8, 2, 3)
    if isinstance(kind, tuple):
        rows, num_warps, per_sm, stages = kind
        tiles = -(-m // rows)
        programs = max(1, min(tiles, sm_count(x.device) * per_sm))
        fast(rmsnorm_fwd_persistent_kernel)[(programs,)](
            *args, m, x2d.stride(0), y2d.stride(0), n, eps, ROWS=rows, BLOCK=block,
            NUM_STAGES=_persistent_stages(rows, block, x2d.element_size(), per_sm, stages), num_warps=num_warps,
        )
    elif kind == "multi-row":
        _launch_tuned(kind, rmsnorm_fwd_rows_tuned, rmsnorm_fwd_rows_kernel, lambda meta: (-(-m // meta["ROWS"]),),
                      (*args, m, x2d.stride(0), y2d.stride(0), n, eps, size_class(m)), n, m, BLOCK=block)
    elif kind == "chunked":
        _launch_tuned(kind, rmsnorm_fwd_chunked_tuned, rmsnorm_fwd_chunked_kernel, lambda meta: (m,),
                      (*args, x2d.stride(0), y2d.stride(0), n, eps, size_class(m)), n, m)
    else:
        _launch_tuned("one-row", rmsnorm_fwd_row_tuned, rmsnorm_fwd_row_kernel, lambda meta: (m,),
                      (*args, x2d.stride(0), y2d.stride(0), n, eps, size_class(m)), n, m)
    return y2d.view(x.shape), x2d, rstd
